#include "memplan/core/catalog.hpp"

#include <memplan/plugin_abi.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <functional>

#include "memplan/core/text.hpp"
#include "model/gpu_performance.hpp"
#include "model/model_reader.hpp"
#include "common/input_file.hpp"
#include "common/toml_guard.hpp"
#include "common/toml_reader.hpp"

namespace memplan {
namespace {

toml::table parse_text(std::string_view text, const std::string& path) {
  try {
    return parse_toml(text, path);
  } catch (const toml::parse_error& error) {
    fail_at(location_of(path, error.source()), std::string(error.description()));
  }
}

toml::table parse_file(const std::filesystem::path& path) {
  return parse_text(read_input_file(path, "catalog file"), path.string());
}

// "sm_" and two or three digits (compute capability 7.0 to 12.x without its dot), or "gfx" and three or four
// hexadecimal digits (AMD's LLVM targets: gfx90a, gfx942, gfx1100).
bool valid_architecture(const std::string& text) {
  const auto all_of = [&](size_t from, auto predicate) {
    return std::all_of(text.begin() + static_cast<std::ptrdiff_t>(from), text.end(),
                       [&](char c) { return predicate(static_cast<unsigned char>(c)); });
  };
  if (text.starts_with("sm_")) return (text.size() == 5 || text.size() == 6) && all_of(3, ::isdigit);
  if (text.starts_with("gfx")) return (text.size() == 6 || text.size() == 7) && all_of(3, ::isxdigit);
  return false;
}

std::vector<GpuEntry> read_gpus(const toml::table& root, const std::string& path) {
  std::vector<GpuEntry> gpus;
  for (const auto& [key, node] : root) {
    const std::string name(key.str());
    if (!node.is_table()) fail_at(location_of(path, key.source()), "GPU '" + name + "' must be a table");
    TomlReader reader(*node.as_table(), path, "[" + name + "]");
    std::vector<std::string_view> allowed{"label",  "memory_gib",         "cuda_total_gib", "cuda_total_source",
                                          "nvlink_sharp", "architecture", "source", "performance_source"};
    allowed.insert(allowed.end(), kGpuPerformanceKeys.begin(), kGpuPerformanceKeys.end());
    reader.reject_unknown_keys(allowed);
    GpuEntry gpu;
    gpu.name = name;
    gpu.location = location_of(path, key.source());
    gpu.label = reader.string("label").value_or(name);
    auto gib = reader.memory_gib_bytes("memory_gib");
    if (!gib) fail_at(reader.table_location(), "GPU '" + name + "' needs memory_gib");
    gpu.nominal_bytes = *gib;
    gpu.memory_bytes = *gib;
    // What CUDA reports as the device's total (cudaMemGetInfo, torch's total_memory): the nominal capacity less
    // what the driver keeps; the capacity a job's peak is compared with.
    if (auto total = reader.memory_gib_bytes("cuda_total_gib")) {
      if (*total > *gib)
        reader.fail_key("cuda_total_gib", "is above memory_gib: CUDA's total is the nominal capacity less what the "
                                          "driver keeps");
      gpu.cuda_total_source = reader.string("cuda_total_source").value_or("");
      if (gpu.cuda_total_source.empty())
        fail_at(reader.table_location(), "GPU '" + name + "' gives cuda_total_gib without cuda_total_source; say where "
                                         "it was read (an out-of-memory message's total capacity, deviceQuery, a log)");
      gpu.memory_bytes = *total;
    } else if (reader.string("cuda_total_source")) {
      reader.fail_key("cuda_total_source", "describes cuda_total_gib, which this GPU does not give");
    }
    gpu.nvlink_sharp = reader.boolean("nvlink_sharp").value_or(false);
    gpu.architecture = reader.string("architecture").value_or("");
    if (!gpu.architecture.empty() && !valid_architecture(gpu.architecture))
      reader.fail_key("architecture", "must name a compute target as \"sm_\" and NVIDIA's compute capability without "
                                      "its dot (\"sm_80\", \"sm_90\", \"sm_100\") or AMD's \"gfx\" target "
                                      "(\"gfx942\"), not \"" + gpu.architecture + "\"");
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

std::vector<GpuEntry> load_gpus(const std::filesystem::path& path) {
  if (!std::filesystem::exists(path)) return {};
  return read_gpus(parse_file(path), path.string());
}

ModelPreset read_preset(const toml::table& root, const std::string& path) {
  ModelPreset preset;
  preset.name = std::filesystem::path(path).stem().string();
  preset.file = path;
  TomlReader reader(root, path, "model preset '" + preset.name + "'");
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

ModelPreset load_preset(const std::filesystem::path& path) { return read_preset(parse_file(path), path.string()); }

// The *.toml files of `folder`, in name order; none when it is not a folder.
std::vector<std::filesystem::path> toml_files(const std::filesystem::path& folder) {
  std::vector<std::filesystem::path> files;
  if (!std::filesystem::is_directory(folder)) return files;
  for (const auto& entry : std::filesystem::directory_iterator(folder))
    if (entry.path().extension() == ".toml") files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  return files;
}

// Where an entry comes from, for a clash: its file (and line) and who provides it.
std::string provenance(const SourceLocation& where, const std::string& origin) {
  return where.str() + " (" + (origin.empty() ? std::string("built-in") : origin) + ")";
}

// A name taken twice is an error at the newcomer, naming both files: an installed package never replaces a
// built-in entry or another package's, silently or not.
[[noreturn]] void fail_clash(const char* what, const std::string& name, const SourceLocation& where,
                             const CatalogSource& source, const SourceLocation& first, const std::string& first_origin,
                             const std::string& rename) {
  fail_at(where, std::string(what) + " '" + name + "' of " + source.origin + " has the name of the " + what + " at " +
                     provenance(first, first_origin) + "; a name means one entry across the catalog and every "
                     "installed bundle, and neither replaces the other (rule: catalog names are unique). " + rename +
                     (source.remedy.empty() ? "" : ", or " + source.remedy));
}

// A malformed file of an installed source (a bundle) breaks every command that reads the catalog:
// its error says so and how to drop the source.
template <class Read>
auto read_source_file(const CatalogSource& source, Read read) -> decltype(read()) {
  try {
    return read();
  } catch (const Error& error) {
    if (source.remedy.empty()) throw;
    throw Error(std::string(error.what()) + " (this file is " + source.origin + "'s; " + source.remedy + ")");
  }
}

void check_framework_defaults(const std::vector<FrameworkProfile>& frameworks) {
  std::string first_default;
  std::string mode_default[2];  // train, infer
  for (const FrameworkProfile& profile : frameworks) {
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
}

// Where a profile comes from, for the end of an error about it.
std::string profile_source(const FrameworkProfile& profile) {
  return profile.origin.empty() ? std::string()
                                : " (this profile is " + profile.origin + "'s: its publisher fixes the bundle, or "
                                  "`memplan bundle remove` drops it)";
}

// Every name a profile answers to (its own and its aliases) names one profile across the catalog
// and the installed bundles: a name that meant two would pick one by load order. Two built-in
// profiles may not share a name key; an alias may not be another profile's alias, nor the name
// of another built-in profile. An installed profile named like a built-in alias is allowed (it
// was a valid name before aliases existed): names are looked up before aliases, so it keeps it.
void check_framework_names(const std::vector<FrameworkProfile>& frameworks) {
  for (size_t i = 0; i < frameworks.size(); ++i)
    for (size_t j = i + 1; j < frameworks.size(); ++j)
      if (frameworks[i].origin.empty() && frameworks[j].origin.empty() &&
          framework_key(frameworks[i].name) == framework_key(frameworks[j].name))
        fail_at(SourceLocation{frameworks[j].file, 1, 1},
                "framework profiles '" + frameworks[i].name + "' (" + frameworks[i].file + ") and '" +
                    frameworks[j].name + "' differ only in case or '_' for '-', which framework names are "
                    "matched without (rule: framework names are unique). Rename one of them");
  for (size_t i = 0; i < frameworks.size(); ++i) {
    const FrameworkProfile& profile = frameworks[i];
    for (const FrameworkProfile::Alias& entry : profile.aliases) {
      const std::string& alias = entry.name;
      for (size_t j = 0; j < frameworks.size(); ++j) {
        if (i == j) continue;
        const FrameworkProfile& other = frameworks[j];
        const bool is_name = framework_key(other.name) == alias && other.origin.empty();
        const bool is_alias = other.has_alias(alias);
        if (!is_name && !is_alias) continue;
        if (!is_name && j < i) continue;  // an alias both share: reported once, from the first of the two
        fail_at(entry.location, "framework profile '" + profile.name + "' has the alias '" + alias + "', which is " +
                           (is_name ? std::string("the name") : std::string("an alias")) + " of profile '" +
                           other.name + "' (" + other.file + "); a framework name means one profile across the "
                           "catalog and every installed bundle (rule: framework names are unique). Remove or rename "
                           "the alias in one of them" + profile_source(profile));
      }
    }
  }
}

// Profiles that extend another take its behaviour beneath their own, base first (a chain resolves
// from its root); a missing base or a cycle is an error at the extends key.
void resolve_extends(std::vector<FrameworkProfile>& frameworks, const Catalog& catalog) {
  std::vector<int> state(frameworks.size(), 0);  // 0 unresolved, 1 resolving, 2 resolved
  std::function<void(size_t)> resolve = [&](size_t i) {
    if (state[i] == 2) return;
    FrameworkProfile& profile = frameworks[i];
    if (profile.extends.empty()) {
      state[i] = 2;
      return;
    }
    if (state[i] == 1)
      fail_at(profile.extends_location, "in [framework], extends = \"" + profile.extends + "\" closes a cycle of "
                                        "profiles extending each other; one of them must stand on its own" +
                                        profile_source(profile));
    state[i] = 1;
    const FrameworkProfile* base = catalog.find_framework(profile.extends);
    if (base == nullptr)
      fail_at(profile.extends_location, "in [framework], extends names no framework profile ('" + profile.extends +
                                            "'); known profiles: " + join_alternatives(catalog.framework_names(), ", ") +
                                            profile_source(profile));
    const size_t b = static_cast<size_t>(base - frameworks.data());
    if (b == i)
      fail_at(profile.extends_location, "in [framework], a profile cannot extend itself");
    resolve(b);
    inherit_profile(profile, frameworks[b]);
    state[i] = 2;
  };
  for (size_t i = 0; i < frameworks.size(); ++i) resolve(i);
}

}  // namespace

Catalog Catalog::load(const std::filesystem::path& data_dir) { return load(data_dir, {}); }

Catalog Catalog::load(const std::filesystem::path& data_dir, const std::vector<CatalogSource>& sources) {
  Catalog catalog;
  catalog.data_dir_ = data_dir;
  catalog.gpus_ = load_gpus(data_dir / "gpus.toml");
  for (const auto& file : toml_files(data_dir / "models")) catalog.models_.push_back(load_preset(file));
  for (const auto& file : toml_files(data_dir / "frameworks"))
    catalog.frameworks_.push_back(load_framework_profile(file.string()));
  for (const CatalogSource& source : sources) {
    if (source.gpus) {
      std::vector<GpuEntry> gpus = read_source_file(
          source, [&] { return read_gpus(parse_text(source.gpus->text, source.gpus->path), source.gpus->path); });
      for (GpuEntry& gpu : gpus) {
        if (const GpuEntry* first = catalog.find_gpu(gpu.name))
          fail_clash("GPU", gpu.name, gpu.location, source, first->location, first->origin,
                     "Rename its [" + gpu.name + "] table in " + gpu.location.file + " (its publisher makes the bundle "
                     "again)");
        gpu.origin = source.origin;
        catalog.gpus_.push_back(std::move(gpu));
      }
    }
    for (const CatalogFile& file : source.models) {
      ModelPreset preset = read_source_file(source, [&] { return read_preset(parse_text(file.text, file.path), file.path); });
      if (const ModelPreset* first = catalog.find_model(preset.name))
        fail_clash("model preset", preset.name, SourceLocation{file.path, 0, 0}, source, SourceLocation{first->file, 0, 0},
                   first->origin, "A preset's name is its file name: rename " + file.path + " (its publisher makes the "
                   "bundle again)");
      preset.origin = source.origin;
      catalog.models_.push_back(std::move(preset));
    }
    for (const CatalogFile& file : source.frameworks) {
      FrameworkProfile profile = read_source_file(source, [&] { return parse_framework_profile(file.text, file.path); });
      // The defaults of scenarios without [framework] are the built-in catalog's: an installed profile
      // is used by name only, so that installing a bundle never changes what an existing scenario means.
      if (profile.is_default || profile.default_for_mode != -1)
        fail_at(SourceLocation{file.path, 1, 1},
                "framework profile '" + profile.name + "' of " + source.origin + " says default = true or default_for; "
                "an installed profile is used by name ([framework] use = \"" + profile.name + "\") and never becomes "
                "the default of scenarios without [framework] (rule: the defaults are the built-in catalog's). Remove "
                "the key from " + file.path + " (its publisher makes the bundle again)" +
                    (source.remedy.empty() ? "" : ", or " + source.remedy));
      // Clashes by exact name, as before aliases: a bundle's profile named like a built-in alias keeps its name.
      const auto same_name = std::find_if(catalog.frameworks_.begin(), catalog.frameworks_.end(),
                                          [&](const FrameworkProfile& known) { return known.name == profile.name; });
      if (const FrameworkProfile* first = same_name == catalog.frameworks_.end() ? nullptr : &*same_name)
        fail_clash("framework profile", profile.name, SourceLocation{file.path, 0, 0}, source, SourceLocation{first->file, 0, 0},
                   first->origin, "A profile's name is its file name and its [framework] name: rename both in " +
                   file.path + " (its publisher makes the bundle again)");
      profile.origin = source.origin;
      catalog.frameworks_.push_back(std::move(profile));
    }
  }
  check_framework_defaults(catalog.frameworks_);
  check_framework_names(catalog.frameworks_);
  resolve_extends(catalog.frameworks_, catalog);
  return catalog;
}

const FrameworkProfile* Catalog::find_framework(std::string_view name) const {
  for (const FrameworkProfile& profile : frameworks_)
    if (profile.name == name) return &profile;
  // Then the name written in any case, '_' or '-' (the built-in catalog first), then the other
  // names a framework goes by: a name always wins over an alias.
  const std::string key = framework_key(name);
  for (const FrameworkProfile& profile : frameworks_)
    if (framework_key(profile.name) == key) return &profile;
  for (const FrameworkProfile& profile : frameworks_)
    if (profile.has_alias(key)) return &profile;
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
