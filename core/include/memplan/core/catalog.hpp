// Data files shipped with memplan: GPU memory sizes, model presets and
// framework profiles. They live in <prefix>/share/memplan (gpus.toml,
// models/*.toml, frameworks/*.toml) so that adding one needs no rebuild.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "memplan/core/step_time.hpp"
#include "memplan/core/framework.hpp"
#include "memplan/core/model.hpp"

namespace memplan {

struct GpuEntry {
  std::string name;   // catalog key, e.g. "h100-sxm-80gb"
  std::string label;  // e.g. "NVIDIA H100 SXM5 80GB"
  uint64_t memory_bytes = 0;
  bool nvlink_sharp = false;  // on an NVSwitch with NVLink SHARP (multicast): NCCL's NVLS algorithm is available
  std::string source;
  GpuPerformance performance;  // peaks and bandwidths, with their source (performance.source)
};

struct ModelPreset {
  std::string name;  // file stem, e.g. "llama-2-7b"
  ModelSpec spec;
  double published_params = 0;  // the total its authors publish, for tests and docs
  std::string source;
  std::string file;
};

class Catalog {
 public:
  // Loads gpus.toml, models/*.toml and frameworks/*.toml from `data_dir`; a malformed file is an
  // error naming it. A missing directory gives an empty catalog.
  static Catalog load(const std::filesystem::path& data_dir);

  const GpuEntry* find_gpu(std::string_view name) const;
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
