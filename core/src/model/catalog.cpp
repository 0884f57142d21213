#include "memplan/core/catalog.hpp"

#include <memplan/plugin_abi.h>

#include <algorithm>
#include <cmath>

#include "model/gpu_performance.hpp"
#include "model/model_reader.hpp"
#include "common/input_file.hpp"
#include "common/toml_guard.hpp"
#include "common/toml_reader.hpp"

namespace memplan {
namespace {

toml::table parse_file(const std::filesystem::path& path) {
  try {
    return parse_toml(read_input_file(path, "catalog file"), path.string());
  } catch (const toml::parse_error& error) {
    fail_at(location_of(path.string(), error.source()), std::string(error.description()));
  }
}

std::vector<GpuEntry> load_gpus(const std::filesystem::path& path) {
  std::vector<GpuEntry> gpus;
  if (!std::filesystem::exists(path)) return gpus;
  const toml::table root = parse_file(path);
  for (const auto& [key, node] : root) {
    const std::string name(key.str());
    if (!node.is_table()) fail_at(location_of(path.string(), key.source()), "GPU '" + name + "' must be a table");
    TomlReader reader(*node.as_table(), path.string(), "[" + name + "]");
    std::vector<std::string_view> allowed{"label", "memory_gib", "nvlink_sharp", "source", "performance_source"};
    allowed.insert(allowed.end(), kGpuPerformanceKeys.begin(), kGpuPerformanceKeys.end());
    reader.reject_unknown_keys(allowed);
    GpuEntry gpu;
    gpu.name = name;
    gpu.label = reader.string("label").value_or(name);
    auto gib = reader.memory_gib_bytes("memory_gib");
    if (!gib) fail_at(reader.table_location(), "GPU '" + name + "' needs memory_gib");
    gpu.memory_bytes = *gib;
    gpu.nvlink_sharp = reader.boolean("nvlink_sharp").value_or(false);
    gpu.source = reader.string("source").value_or("");
    read_gpu_performance(*node.as_table(), reader, gpu.performance);
    gpu.performance.source = reader.string("performance_source").value_or("");
    if (gpu.performance.any() && gpu.performance.source.empty())
      fail_at(reader.table_location(), "GPU '" + name + "' gives performance figures without performance_source; "
                                       "say where they come from (a datasheet, a measurement)");
    gpus.push_back(std::move(gpu));
  }
  return gpus;
}

ModelPreset load_preset(const std::filesystem::path& path) {
  const toml::table root = parse_file(path);
  ModelPreset preset;
  preset.name = path.stem().string();
  preset.file = path.string();
  TomlReader reader(root, path.string(), "model preset '" + preset.name + "'");
  std::vector<std::string_view> allowed(kModelKeys.begin(), kModelKeys.end());
  allowed.insert(allowed.end(), {"published_params", "source"});
  reader.reject_unknown_keys(allowed);
  read_model_keys(reader, root, preset.spec);
  preset.spec.preset = preset.name;
  preset.published_params = reader.positive_number("published_params").value_or(0);
  preset.source = reader.string("source").value_or("");
  validate_model(preset.spec, reader);
  return preset;
}

// The *.toml files of `folder`, in name order; none when it is not a folder.
std::vector<std::filesystem::path> toml_files(const std::filesystem::path& folder) {
  std::vector<std::filesystem::path> files;
  if (!std::filesystem::is_directory(folder)) return files;
  for (const auto& entry : std::filesystem::directory_iterator(folder))
    if (entry.path().extension() == ".toml") files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

Catalog Catalog::load(const std::filesystem::path& data_dir) {
  Catalog catalog;
  catalog.data_dir_ = data_dir;
  catalog.gpus_ = load_gpus(data_dir / "gpus.toml");
  for (const auto& file : toml_files(data_dir / "models")) catalog.models_.push_back(load_preset(file));
  std::string first_default;
  std::string mode_default[2];  // train, infer
  for (const auto& file : toml_files(data_dir / "frameworks")) {
    catalog.frameworks_.push_back(load_framework_profile(file.string()));
    const FrameworkProfile& profile = catalog.frameworks_.back();
    if (profile.default_for_mode == MEMPLAN_MODE_TRAIN || profile.default_for_mode == MEMPLAN_MODE_INFER) {
      std::string& first = mode_default[profile.default_for_mode == MEMPLAN_MODE_INFER ? 1 : 0];
      if (!first.empty())
        fail_at(SourceLocation{profile.file, 1, 1},
                "two framework profiles say default_for = \"" +
                    std::string(profile.default_for_mode == MEMPLAN_MODE_INFER ? "infer" : "train") + "\" ('" +
                    first + "' and '" + profile.name + "'); that mode's scenarios without [framework] need at most one");
      first = profile.name;
    }
    if (!profile.is_default) continue;
    if (!first_default.empty())
      fail_at(SourceLocation{profile.file, 1, 1},
              "two framework profiles say default = true ('" + first_default + "' and '" + profile.name +
                  "'); scenarios without [framework] need at most one");
    first_default = profile.name;
  }
  return catalog;
}

const FrameworkProfile* Catalog::find_framework(std::string_view name) const {
  for (const FrameworkProfile& profile : frameworks_)
    if (profile.name == name) return &profile;
  return nullptr;
}

const FrameworkProfile* Catalog::default_framework() const {
  for (const FrameworkProfile& profile : frameworks_)
    if (profile.is_default) return &profile;
  return nullptr;
}

const FrameworkProfile* Catalog::default_framework(int32_t mode) const {
  for (const FrameworkProfile& profile : frameworks_)
    if (profile.default_for_mode == mode) return &profile;
  return default_framework();
}

std::vector<std::string> Catalog::framework_names() const {
  std::vector<std::string> names;
  for (const FrameworkProfile& profile : frameworks_) names.push_back(profile.name);
  return names;
}

const GpuEntry* Catalog::find_gpu(std::string_view name) const {
  for (const GpuEntry& gpu : gpus_)
    if (gpu.name == name) return &gpu;
  return nullptr;
}

const ModelPreset* Catalog::find_model(std::string_view name) const {
  for (const ModelPreset& model : models_)
    if (model.name == name) return &model;
  return nullptr;
}

std::vector<std::string> Catalog::gpu_names() const {
  std::vector<std::string> names;
  for (const GpuEntry& gpu : gpus_) names.push_back(gpu.name);
  return names;
}

std::vector<std::string> Catalog::model_names() const {
  std::vector<std::string> names;
  for (const ModelPreset& model : models_) names.push_back(model.name);
  return names;
}

}  // namespace memplan
