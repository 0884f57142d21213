// Data files shipped with memplan: GPU memory sizes, model presets and
// framework profiles. They live in <prefix>/share/memplan (gpus.toml,
// models/*.toml, frameworks/*.toml) so that adding one needs no rebuild.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "memplan/core/error.hpp"
#include "memplan/core/step_time.hpp"
#include "memplan/core/framework.hpp"
#include "memplan/core/model.hpp"

namespace memplan {

struct GpuEntry {
  std::string name;   // catalog key, e.g. "h100-sxm-80gb"
  std::string label;  // e.g. "NVIDIA H100 SXM5 80GB"
  uint64_t memory_bytes = 0;   // what a process can use: cuda_total_gib where the catalog gives it, else memory_gib
  uint64_t nominal_bytes = 0;  // memory_gib, the vendor's nominal capacity
  std::string cuda_total_source;  // where cuda_total_gib was read ("" when the catalog gives none)
  bool nvlink_sharp = false;  // on an NVSwitch with NVLink SHARP (multicast): NCCL's NVLS algorithm is available
  std::string architecture;   // the compute target, "sm_90" (NVIDIA compute capability 9.0) or "gfx942" (AMD); "" unknown
  std::string source;
  GpuPerformance performance;  // peaks and bandwidths, with their source (performance.source)
  std::string origin;       // "" for the built-in catalog, else who provides it (CatalogSource::origin)
  SourceLocation location;  // where its name stands in its gpus.toml ([name])
};

struct ModelPreset {
  std::string name;  // file stem, e.g. "llama-2-7b"
  ModelSpec spec;
  double published_params = 0;  // the total its authors publish, for tests and docs
  std::string source;
  std::string file;
  std::string origin;  // "" for the built-in catalog, else who provides it (CatalogSource::origin)
};

// Catalog files from outside the built-in data folder: an installed package's
// (a bundle's data/gpus.toml, data/models/*.toml, data/frameworks/*.toml).
// Whoever vouches for them reads and checks them (sha256 against a signed
// manifest) and hands the bytes over, so the bytes checked are the bytes parsed.
struct CatalogFile {
  std::string path;  // shown in messages and listings; a preset's or profile's name is its stem
  std::string text;
};
struct CatalogSource {
  std::string origin;  // who provides the files, e.g. "bundle acme 1.0.0": shown by `memplan gpus` and `presets`
  std::string remedy;  // how to drop them, for a name clash: e.g. "remove it with `memplan bundle remove acme`"
  std::optional<CatalogFile> gpus;
  std::vector<CatalogFile> models;
  std::vector<CatalogFile> frameworks;
};

class Catalog {
 public:
  // Loads gpus.toml, models/*.toml and frameworks/*.toml from `data_dir`; a malformed file is an
  // error naming it. A missing directory gives an empty catalog.
  static Catalog load(const std::filesystem::path& data_dir);
  // The same, then the files of each source in order. A GPU, preset or profile whose name is already
  // taken (built-in or an earlier source) is an error naming both files, never an override.
  static Catalog load(const std::filesystem::path& data_dir, const std::vector<CatalogSource>& sources);

  const GpuEntry* find_gpu(std::string_view name) const;
  // A profile by its name, else by framework_key(name) among names and aliases; null when none answers to it.
  const FrameworkProfile* find_framework(std::string_view name) const;
  // The profile marked `default = true`, used when a scenario has no [framework]; null when none is.
  const FrameworkProfile* default_framework() const;
  // The default of a scenario of `mode` (MEMPLAN_MODE_*): the profile that says default_for = that mode, else
  // default_framework().
  const FrameworkProfile* default_framework(int32_t mode) const;
  const std::vector<FrameworkProfile>& frameworks() const { return frameworks_; }
  std::vector<std::string> framework_names() const;
  const ModelPreset* find_model(std::string_view name) const;
  const std::vector<GpuEntry>& gpus() const { return gpus_; }
  const std::vector<ModelPreset>& models() const { return models_; }
  std::vector<std::string> gpu_names() const;
  std::vector<std::string> model_names() const;
  const std::filesystem::path& data_dir() const { return data_dir_; }

 private:
  std::filesystem::path data_dir_;
  std::vector<GpuEntry> gpus_;
  std::vector<ModelPreset> models_;
  std::vector<FrameworkProfile> frameworks_;
};

}  // namespace memplan
