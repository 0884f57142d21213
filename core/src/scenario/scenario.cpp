#include "memplan/core/scenario.hpp"

#include <algorithm>
#include <cstdio>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "model/hf_config.hpp"
#include "memplan/core/breakdown.hpp"
#include "memplan/core/requirement.hpp"
#include "memplan/core/text.hpp"
#include "scenario/component_reader.hpp"
#include "model/model_reader.hpp"
#include "common/input_file.hpp"
#include "scenario/scenario_overrides.hpp"
#include "common/toml_guard.hpp"
#include "common/toml_reader.hpp"
#include "model/gpu_performance.hpp"

namespace memplan {
namespace {

const toml::table* optional_table(const toml::table& root, std::string_view key, const std::string& file) {
  const toml::node* node = root.get(key);
  if (node == nullptr) return nullptr;
  if (!node->is_table())
    fail_at(location_of(file, node->source()), "'" + std::string(key) + "' must be a table ([" + std::string(key) +
                                                   "]), not " + std::string(describe_type(*node)));
  return node->as_table();
}

void read_model(const toml::table& root, const std::string& file, const Catalog& catalog, Scenario& scenario) {
  const toml::table* table = optional_table(root, "model", file);
  if (table == nullptr) fail_at(SourceLocation{file, 1, 1}, "the scenario needs a [model] table");
  TomlReader reader(*table, file, "[model]");
  std::vector<std::string_view> allowed(kModelKeys.begin(), kModelKeys.end());
  allowed.push_back("preset");
  allowed.push_back("hf_config");
  reader.reject_unknown_keys(allowed);
  scenario.model_location = reader.table_location();
  auto preset = reader.string("preset");
  auto hf_config = reader.string("hf_config");
  if (preset && hf_config)
    reader.fail_key("hf_config", "conflicts with 'preset'; give one of them (keys in [model] may override either)");
  if (preset) {
    const ModelPreset* found = catalog.find_model(*preset);
    if (found == nullptr) {
      std::vector<std::string> names = catalog.model_names();
      reader.fail_key("preset", "names no model in the catalog (" + catalog.data_dir().string() + "/models)" +
                                    did_you_mean(*preset, names) + " Known presets: " +
                                    join_alternatives(names, ", ") + ".");
    }
    scenario.model = found->spec;
  }
  if (hf_config) {
    // Relative to the scenario file's folder, as [plugins] search_path.
    std::filesystem::path config(*hf_config);
    if (config.is_relative()) config = std::filesystem::path(file).parent_path() / config;
    const std::string config_path = config.lexically_normal().string();
    std::string why;
    const auto text = read_regular_file(config_path, kMaxTextInput, why, Links::follow);
    if (!text)
      reader.fail_key("hf_config", "names a file that cannot be read: " + config_path + " (it " + why +
                                       "); paths are relative to the scenario file's folder");
    scenario.model = read_hf_config(*text, config_path);
    if (!scenario.model.hf_note.empty())
      scenario.warnings.push_back(reader.value_location("hf_config").str() + ": warning: " + scenario.model.hf_note);
  }
  read_model_keys(reader, *table, scenario.model);
  validate_model(scenario.model, reader);
}

void read_batch(const toml::table& root, const std::string& file, Scenario& scenario) {
  const toml::table* table = optional_table(root, "batch", file);
  if (table == nullptr) return;
  TomlReader reader(*table, file, "[batch]");
  reader.reject_unknown_keys({"micro_batch", "seq_len", "grad_accum", "beyond_context"});
  // A size, or "max" to solve for the largest that fits.
  auto size_or_max = [&](std::string_view key, int64_t fallback, bool& is_max) {
    const toml::node* node = table->get(key);
    if (node != nullptr && node->is_string()) {
      if (node->as_string()->get() != "max")
        reader.fail_key(key, "must be a positive integer or \"max\", not \"" + node->as_string()->get() + "\"");
      is_max = true;
      scenario.max_location = reader.value_location(key);
      return int64_t{1};
    }
    return reader.positive_integer(key).value_or(fallback);
  };
  scenario.micro_batch = size_or_max("micro_batch", 1, scenario.micro_batch_max);
  scenario.seq_len = size_or_max("seq_len", 0, scenario.seq_len_max);
  if (scenario.micro_batch_max && scenario.seq_len_max)
    reader.fail_key("seq_len", "and 'micro_batch' are both \"max\"; solve for one and fix the other");
  scenario.grad_accum = reader.positive_integer("grad_accum").value_or(1);
  // Bounds far above any real job, as the model's dimensions have: products
  // of a workload size with the model's (tokens x layers x width ...) stay
  // in exact range in every plugin, and no size wraps negative.
  struct Bound {
    const char* key;
    int64_t value;
    int64_t limit;
  };
  for (const Bound& bound : {Bound{"micro_batch", scenario.micro_batch, 1'000'000},
                             Bound{"seq_len", scenario.seq_len, 1'000'000'000},
                             Bound{"grad_accum", scenario.grad_accum, 1'000'000'000}})
    if (bound.value > bound.limit)
      reader.fail_key(bound.key, "= " + std::to_string(bound.value) + " is implausibly large (the limit is " +
                                     std::to_string(bound.limit) + "); check the number");
  // A sequence longer than the model was built for is usually a slip (32768
  // for a 4096-token model); runs that extend the context (RoPE scaling,
  // long-context fine-tuning) say so. A warning, not an error: scenarios that
  // ran before this check keep running. [model] is read before [batch].
  const bool beyond = reader.boolean("beyond_context").value_or(false);
  const int64_t context = scenario.model.max_context;
  if (!scenario.seq_len_max && context > 0 && scenario.seq_len > context && !beyond)
    scenario.warnings.push_back(reader.value_location("seq_len").str() + ": warning: in [batch], 'seq_len' = " +
                                std::to_string(scenario.seq_len) + " is beyond the model's context of " +
                                std::to_string(context) + " tokens; lower it, or set beyond_context = true in "
                                "[batch] if the run extends the context (RoPE scaling, long-context training)");
}

void read_hardware(const toml::table& root, const std::string& file, const Catalog& catalog, Scenario& scenario) {
  const toml::table* table = optional_table(root, "hardware", file);
  if (table == nullptr) return;
  TomlReader reader(*table, file, "[hardware]");
  std::vector<std::string_view> allowed{"gpu", "memory_gib", "cuda_total_gib", "count", "fit_quantity"};
  allowed.insert(allowed.end(), kGpuPerformanceKeys.begin(), kGpuPerformanceKeys.end());
  reader.reject_unknown_keys(allowed);
  // Which quantity `fits` compares with the GPU: what the device shows unless the scenario asks otherwise.
  if (auto quantity = reader.choice("fit_quantity", {"allocated", "reserved", "device"}))
    scenario.hardware.fit_quantity = *quantity_from_name(*quantity);
  HardwareSpec& hardware = scenario.hardware;
  auto gpu = reader.string("gpu");
  auto gib = reader.memory_gib_bytes("memory_gib");
  if (gpu && gib) reader.fail_key("memory_gib", "conflicts with 'gpu'; give one of them");
  if (gpu) {
    const GpuEntry* entry = catalog.find_gpu(*gpu);
    if (entry == nullptr) {
      std::vector<std::string> names = catalog.gpu_names();
      reader.fail_key("gpu", "names no GPU in the catalog (" + catalog.data_dir().string() + "/gpus.toml)" +
                                 did_you_mean(*gpu, names) + " Known GPUs: " + join_alternatives(names, ", ") +
                                 ". Or give memory_gib instead.");
    }
    hardware.gpu = entry->name;
    hardware.label = entry->label;
    hardware.memory_bytes = entry->memory_bytes;
    hardware.nominal_bytes = entry->nominal_bytes;
    hardware.nvlink_sharp = entry->nvlink_sharp;
    hardware.architecture = entry->architecture;
    hardware.performance = entry->performance;
  } else if (gib) {
    hardware.memory_bytes = *gib;
    hardware.nominal_bytes = *gib;
    std::ostringstream label;
    label << static_cast<double>(*gib) / 1073741824.0 << " GiB GPU";  // memory_gib as given (the value is bytes)
    hardware.label = label.str();
  }
  // What CUDA reports on the scenario's own machine (drivers differ by a few hundred MiB) replaces the
  // catalog's total: it is the capacity under every profile that runs on CUDA (read_framework).
  if (auto total = reader.memory_gib_bytes("cuda_total_gib")) {
    if (hardware.nominal_bytes == 0)
      reader.fail_key("cuda_total_gib", "is the total CUDA reports on the scenario's GPU; it needs gpu or memory_gib");
    if (*total > hardware.nominal_bytes)
      reader.fail_key("cuda_total_gib", "is above the GPU's memory (" + format_gib(static_cast<double>(hardware.nominal_bytes)) +
                                            "): CUDA reports at most the GPU's size; give what "
                                            "torch.cuda.mem_get_info()[1] / 2**30 prints");
    hardware.memory_bytes = *total;
    hardware.cuda_total_location = reader.value_location("cuda_total_gib");
  }
  // The scenario's figures replace the catalog's, one by one (a GPU the catalog lacks, a measured peak).
  GpuPerformance given;
  read_gpu_performance(*table, reader, given);
  if (given.any()) {
    for (size_t m = 0; m < given.peak_flops.size(); ++m)
      if (given.peak_flops[m] > 0) hardware.performance.peak_flops[m] = given.peak_flops[m];
    if (given.memory_bandwidth > 0) hardware.performance.memory_bandwidth = given.memory_bandwidth;
    if (given.intra_node_bandwidth > 0) hardware.performance.intra_node_bandwidth = given.intra_node_bandwidth;
    if (given.inter_node_bandwidth > 0) hardware.performance.inter_node_bandwidth = given.inter_node_bandwidth;
    if (given.gpus_per_node > 0) hardware.performance.gpus_per_node = given.gpus_per_node;
    hardware.performance.source = hardware.performance.source.empty()
                                      ? file
                                      : file + " and " + hardware.performance.source;
  }
  if (auto count = reader.positive_integer("count")) {
    hardware.count = *count;
    hardware.count_location = reader.value_location("count");
  }
}

void read_bundle_requirements(const toml::table& table, const TomlReader& reader, const std::string& file,
                              Scenario& scenario) {
  const toml::node* node = table.get("bundles");
  if (node == nullptr) return;
  if (!node->is_array())
    reader.fail_key("bundles", "must be an array of bundle requirements, e.g. [\"acme-optimizers>=1.2\"]");
  for (const toml::node& entry : *node->as_array()) {
    const SourceLocation location = location_of(file, entry.source());
    if (!entry.is_string())
      fail_at(location, "in [plugins], 'bundles' entries must be strings such as \"acme-optimizers>=1.2\"");
    std::string why;
    auto requirement = parse_requirement(entry.as_string()->get(), why);
    if (!requirement) fail_at(location, "in [plugins], 'bundles' entry " + why);
    scenario.bundles.push_back(BundleRequirementSpec{requirement->text, requirement->name, location});
  }
}

void read_plugins(const toml::table& root, const std::string& file, Scenario& scenario) {
  const toml::table* table = optional_table(root, "plugins", file);
  if (table == nullptr) return;
  TomlReader reader(*table, file, "[plugins]");
  // No key here can relax a security setting: --allow-unsigned exists only on the command line.
  reader.reject_unknown_keys({"search_path", "bundles"});
  read_bundle_requirements(*table, reader, file, scenario);
  const toml::node* node = table->get("search_path");
  if (node == nullptr) return;
  scenario.search_path_location = location_of(file, node->source());
  if (!node->is_array()) reader.fail_key("search_path", "must be an array of folder names");
  const std::filesystem::path base = std::filesystem::absolute(file).parent_path();
  for (const toml::node& entry : *node->as_array()) {
    if (!entry.is_string())
      fail_at(location_of(file, entry.source()), "in [plugins], 'search_path' entries must be strings");
    std::filesystem::path folder(entry.as_string()->get());
    if (folder.is_relative()) folder = base / folder;
    scenario.search_path.push_back(folder.lexically_normal().string());
  }
}

void read_components(const toml::table& root, const std::string& file, Scenario& scenario) {
  struct Single {
    const char* key;
    int32_t kind;
  };
  for (Single single : {Single{"precision", MEMPLAN_KIND_PRECISION}, Single{"optimizer", MEMPLAN_KIND_OPTIMIZER},
                        Single{"activations", MEMPLAN_KIND_ACTIVATIONS}}) {
    const toml::node* node = root.get(single.key);
    if (node == nullptr) continue;
    if (node->is_array_of_tables())
      fail_at(location_of(file, node->source()),
              "'" + std::string(single.key) + "' must be one table ([" + single.key + "]), not [[" + single.key + "]]");
    const toml::table* table = optional_table(root, single.key, file);
    scenario.components.push_back(read_component(*table, single.kind, file, "[" + std::string(single.key) + "]"));
  }
  read_strategies(root, file, "", scenario.components);
}

// Merges a framework profile into the scenario's components: the profile's
// option defaults for the plugins the scenario uses, and the runtime
// components it brings unless the scenario has them or excludes them. The
// scenario's own keys always win; merged values keep the profile's locations,
// so an error in one points at the profile file.
void add_missing_options(ComponentSpec& component, const std::vector<OptionValue>& defaults) {
  for (const OptionValue& option : defaults) {
    bool present = false;
    for (const OptionValue& own : component.options) present = present || own.key == option.key;
    if (!present) component.options.push_back(option);
  }
}

void apply_framework(const FrameworkProfile& profile, const std::string& version,
                     const std::vector<std::string>& excluded, bool read_generic_values, Scenario& scenario) {
  // GPU-dependent defaults match the catalog GPU's name and label, lower-case.
  std::string gpu_names = scenario.hardware.gpu + " " + scenario.hardware.label;
  if (scenario.hardware.gpu.empty()) gpu_names.clear();
  std::transform(gpu_names.begin(), gpu_names.end(), gpu_names.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  ProfileFacts facts{gpu_names, scenario.hardware.nominal_bytes, scenario.hardware.architecture, {}};
  for (const ComponentSpec& component : scenario.components)
    if (component.kind == MEMPLAN_KIND_STRATEGY) facts.strategies.push_back(component.use);
  const auto all_defaults = profile.defaults_for(version, facts);
  const size_t own = scenario.components.size();
  // A generic value the scenario gives is read the framework's way, and the scenario is told.
  const FrameworkReadings readings = read_generic_values
                                         ? profile.readings_for(version, facts)
                                         : FrameworkReadings{};
  for (size_t i = 0; i < own; ++i)
    for (const auto& [plugin, entries] : readings) {
      if (scenario.components[i].use != plugin) continue;
      for (OptionValue& option : scenario.components[i].options) {
        if (option.type != OptionValue::Type::string || option.list) continue;
        for (const OptionValue& reading : entries) {
          if (reading.key != option.key + "=" + option.text) continue;
          // The version as the report names it ("before 4.18" for a date before the first dated version).
          const std::string& at = scenario.framework.version;
          scenario.warnings.push_back(
              option.value_location.str() + ": warning: in " + scenario.components[i].section + ", " + option.key +
              " = \"" + option.text + "\" is read as \"" + reading.text + "\", the way framework '" + profile.name +
              "'" + (at.empty() ? "" : " " + at) + " computes it (" + reading.value_location.str() + "); write \"" +
              reading.text + "\" to say so, or [framework] readings = false for the generic path");
          // The value is the profile's now: an error about it points at the profile's line.
          option.text = reading.text;
          option.value_location = reading.value_location;
          break;
        }
      }
    }
  for (size_t i = 0; i < own; ++i)
    for (const auto& [plugin, defaults] : all_defaults)
      if (scenario.components[i].use == plugin) add_missing_options(scenario.components[i], defaults);
  for (const ComponentSpec& brought : profile.strategies) {
    ComponentSpec* existing = nullptr;
    for (size_t i = 0; i < own; ++i)
      if (scenario.components[i].use == brought.use) existing = &scenario.components[i];
    if (existing != nullptr) {
      add_missing_options(*existing, brought.options);
      continue;
    }
    if (std::find(excluded.begin(), excluded.end(), brought.use) != excluded.end()) continue;
    ComponentSpec added = brought;
    for (const auto& [plugin, defaults] : all_defaults)
      if (added.use == plugin) add_missing_options(added, defaults);
    scenario.components.push_back(std::move(added));
  }
}

void read_framework(const toml::table& root, const std::string& file, const Catalog& catalog, Scenario& scenario) {
  const toml::table* table = optional_table(root, "framework", file);
  const FrameworkProfile* profile = nullptr;
  std::vector<std::string> excluded;
  std::string version;  // empty: the latest the profile knows
  bool read_generic_values = true;  // [framework] readings: the profile reads generic values its framework's way
  if (table == nullptr) {
    profile = catalog.default_framework(scenario.mode);
    if (profile == nullptr) return;  // a catalog without profiles: the plan is what the scenario composes
    scenario.framework.version = profile->version;
  } else {
    TomlReader reader(*table, file, "[framework]");
    reader.reject_unknown_keys({"use", "version", "date", "exclude", "readings"});
    read_generic_values = reader.boolean("readings").value_or(true);
    const auto use = reader.string("use");
    if (!use)
      fail_at(reader.table_location(), "[framework] needs 'use = \"<framework profile>\"'; known profiles: " +
                                           join_alternatives(catalog.framework_names(), ", "));
    profile = catalog.find_framework(*use);
    if (profile == nullptr)
      reader.fail_key("use", "names no framework profile in the catalog (" + catalog.data_dir().string() +
                                 "/frameworks)" + did_you_mean(*use, catalog.framework_names()) +
                                 " Known profiles: " + join_alternatives(catalog.framework_names(), ", ") + ".");
    scenario.framework.from_scenario = true;
    scenario.framework.use_location = reader.value_location("use");
    // A version written as the run's day (or month) where the profile numbers its versions otherwise:
    // read as date, which the profile's dated versions place, and said (the number would otherwise
    // compare as a version later than every one the profile knows).
    std::string day_from_version;
    if (auto given = reader.string("version")) {
      bool has_number = false;
      for (char c : *given) has_number = has_number || (c >= '0' && c <= '9');
      if (!has_number) reader.fail_key("version", "must contain a version number, e.g. \"4.46\"");
      const DayInVersion written = day_written_as_version(*given, *profile);
      const std::string what = reader.value_location("version").str() + ": warning: in [framework], version \"" +
                               *given + "\" ";
      const std::string versions =
          "'" + profile->name + "'" +
          (profile->version.empty() ? std::string() : " (its versions read like \"" + profile->version + "\")");
      if (written.date_shaped && written.day.empty()) {
        // Date-shaped but no day ("2024-13", "0000-01"): still a version, as before, and said.
        scenario.warnings.push_back(what + "has a date's shape but is no day of 2000-2099, nor a version of " +
                                    versions + ": it is compared as a version number; give the version that ran, "
                                    "or date = YYYY-MM-DD");
      } else if (!written.day.empty() && !profile->dates_place_versions()) {
        // Only where the profile's versions all give their day can a date place the run; elsewhere the
        // text stays a version, as before, and the warning says what that means.
        const FrameworkVersionDefaults* undated = profile->undated_block();
        scenario.warnings.push_back(
            what + "is a day, not a version of " + versions + ", and " +
            (undated != nullptr ? "its [[since]] block of version " + undated->version + " gives no released day"
                                : std::string("it has no dated versions")) +
            " to place it among: it is compared as a version number; give the version that ran");
      } else if (!written.day.empty()) {
        if (table->get("date") != nullptr)
          reader.fail_key("version", "\"" + *given + "\" is a day, and date gives the run's day too; keep date");
        scenario.warnings.push_back(what + "is a day, not a version of " + versions + ": read as date = " +
                                    written.day + "; write date = " + written.day +
                                    " (or the version that ran) instead");
        day_from_version = written.day;
      }
      if (day_from_version.empty()) {
        version = *given;
        // A major version more than one past the profile's own runs as the profile's latest behaviour: said,
        // since such a number is likely another software's (a name that once meant the framework it builds on).
        const auto major = [](const std::string& text) {
          int value = 0;
          for (char c : text) {
            if (c < '0' || c > '9') break;
            value = std::min(value * 10 + (c - '0'), 1'000'000);
          }
          return value;
        };
        if (!profile->version.empty() && !written.date_shaped && profile->shares_versions(*use) &&
            major(*given) > major(profile->version) + 1)
          scenario.warnings.push_back(what + "is far past the versions of " + versions + " (memplan's reading ends "
                                      "at " + profile->version + "): read as its latest behaviour; if it is the "
                                      "version of other software, use that software's profile or give date = "
                                      "<the run's day>");
        // Software built on the profile's framework numbers its own versions: its number is read as the
        // profile's (as before), with a warning that says how to name the behaviour instead.
        if (!profile->shares_versions(*use))
          scenario.warnings.push_back(reader.value_location("version").str() + ": warning: in [framework], version \"" +
                                      *given + "\" is read as a version of '" + profile->name + "', but '" + *use +
                                      "' numbers its own versions; give date = <the run's day> (the behaviour '" +
                                      profile->name + "' had then), or use = \"" + profile->name +
                                      "\" with its own version");
      }
    }
    scenario.framework.version = version.empty() ? profile->version : version;
    const toml::node* date_node = table->get("date");
    if (date_node != nullptr || !day_from_version.empty()) {
      // The day of the run: the profile's dated [[since]] versions say which behaviour it had.
      const std::string day = date_node != nullptr ? day_text(*date_node) : day_from_version;
      if (!is_iso_date(day))
        reader.fail_key("date", "must be the day of the run, YYYY-MM-DD (e.g. date = 2024-03-14)");
      if (!version.empty())
        reader.fail_key("date", "and version both say which behaviour of '" + profile->name +
                                    "' the run had; keep one of them");
      if (const FrameworkVersionDefaults* undated = profile->undated_block())
        reader.fail_key("date", "cannot choose among the versions of framework '" + profile->name + "': its [[since]] "
                                "block of version " + undated->version + " gives no released day (" +
                                undated->location.str() + "); give version = \"<the run's version>\" instead");
      if (!profile->has_dated_versions())
        reader.fail_key("date", "has nothing to choose: framework '" + profile->name + "' describes one behaviour (" +
                                (profile->version.empty() ? std::string("no version") : "version " + profile->version) +
                                "), with no dated [[since]] versions; remove date (or give version, which the "
                                "report names)");
      // The checks above leave a profile whose [[since]] versions all give a day, one at least.
      version = profile->version_on(day);
      scenario.framework.date = day;
      scenario.framework.version = version != "0" ? version : "before " + profile->first_dated_version();
    }
    if (const toml::node* node = table->get("exclude")) {
      std::vector<std::string> brought;
      for (const ComponentSpec& component : profile->strategies) brought.push_back(component.use);
      if (!node->is_array())
        reader.fail_key("exclude", brought.empty() ? std::string("must be an array of the profile's components to leave "
                                                                 "out, but this profile brings none")
                                                   : "must be an array of the profile's components to leave out, e.g. "
                                                     "[\"" + brought.front() + "\"]");
      for (const toml::node& entry : *node->as_array()) {
        const SourceLocation location = location_of(file, entry.source());
        if (!entry.is_string()) fail_at(location, "in [framework], 'exclude' entries must be strings");
        const std::string name = entry.as_string()->get();
        if (std::find(brought.begin(), brought.end(), name) == brought.end())
          fail_at(location, "in [framework], 'exclude' names '" + name + "', which framework '" + profile->name +
                                "' does not bring" + did_you_mean(name, brought) + " It brings: " +
                                (brought.empty() ? std::string("nothing") : join_alternatives(brought, ", ")) +
                                ".");
        excluded.push_back(name);
      }
    }
  }
  scenario.framework.name = profile->name;
  scenario.framework.profile_file = profile->file;
  scenario.framework.summary = profile->summary;
  // A profile that counts as papers do (gpu_capacity = "nominal") compares with the GPU's nominal capacity,
  // whatever CUDA reports; a total the scenario gave is then not used, and it is told.
  if (profile->nominal_capacity.value_or(false) && scenario.hardware.nominal_bytes > 0) {
    scenario.hardware.memory_bytes = scenario.hardware.nominal_bytes;
    if (!scenario.hardware.cuda_total_location.file.empty())
      scenario.warnings.push_back(scenario.hardware.cuda_total_location.str() +
                                  ": warning: in [hardware], 'cuda_total_gib' is not used: profile '" + profile->name +
                                  "' compares with the GPU's nominal memory (gpu_capacity = \"nominal\")");
  }
  apply_framework(*profile, version, excluded, read_generic_values, scenario);
}

bool has_component(const Scenario& scenario, int32_t kind) {
  for (const ComponentSpec& component : scenario.components)
    if (component.kind == kind) return true;
  return false;
}

void check_required_components(const toml::table& root, const std::string& file, Scenario& scenario) {
  const SourceLocation top{file, 1, 1};
  if (!has_component(scenario, MEMPLAN_KIND_PRECISION))
    fail_at(top, "the scenario needs a [precision] table: [precision] use = \"<precision plugin>\" (`memplan "
                 "plugins` lists them)");
  if (scenario.mode == MEMPLAN_MODE_TRAIN) {
    if (!has_component(scenario, MEMPLAN_KIND_OPTIMIZER))
      fail_at(top, "a training scenario needs an [optimizer] table: [optimizer] use = \"<optimizer plugin>\" "
                   "(`memplan plugins` lists them)");
    if (!has_component(scenario, MEMPLAN_KIND_ACTIVATIONS))
      fail_at(top, "a training scenario needs an [activations] table: [activations] use = \"<activation model "
                   "plugin>\" (`memplan plugins` lists them; leaving activations out must be explicit too)");
  } else if (const toml::node* optimizer = root.get("optimizer")) {
    fail_at(location_of(file, optimizer->source()),
            "mode = \"infer\" runs no optimizer; remove the [optimizer] table or set mode = \"train\"");
  }
}

}  // namespace

std::string_view kind_name(int32_t kind) {
  switch (kind) {
    case MEMPLAN_KIND_OPTIMIZER: return "optimizer";
    case MEMPLAN_KIND_PRECISION: return "precision";
    case MEMPLAN_KIND_ACTIVATIONS: return "activations";
    case MEMPLAN_KIND_STRATEGY: return "strategy";
    default: return "unknown";
  }
}

Scenario parse_scenario(std::string_view text, const std::string& path, const Catalog& catalog,
                        const std::vector<std::string>& overrides) {
  toml::table root;
  try {
    root = parse_toml(text, path);
  } catch (const toml::parse_error& error) {
    fail_at(location_of(path, error.source()), "invalid TOML: " + std::string(error.description()));
  }
  apply_overrides(root, overrides);
  TomlReader reader(root, path, "the scenario's top level");
  reader.reject_unknown_keys({"name", "mode", "framework", "model", "batch", "precision", "optimizer", "activations",
                              "strategy", "hardware", "plugins", "search", "budget"});  // [search]: memplan search (search_space.cpp)
  Scenario scenario;
  scenario.file = path;
  scenario.name = reader.string("name").value_or(std::filesystem::path(path).stem().string());
  auto mode = reader.choice("mode", {"train", "infer"});
  if (!mode) fail_at(SourceLocation{path, 1, 1}, "the scenario needs mode = \"train\" or mode = \"infer\"");
  scenario.mode = *mode == "train" ? MEMPLAN_MODE_TRAIN : MEMPLAN_MODE_INFER;
  read_model(root, path, catalog, scenario);
  read_batch(root, path, scenario);
  read_hardware(root, path, catalog, scenario);
  if (const toml::table* budget = optional_table(root, "budget", path)) {
    TomlReader reader(*budget, path, "[budget]");
    reader.reject_unknown_keys({"tokens", "usd_per_gpu_hour"});
    scenario.budget_tokens = reader.positive_number("tokens").value_or(0);
    scenario.usd_per_gpu_hour = reader.positive_number("usd_per_gpu_hour").value_or(0);
    if (scenario.usd_per_gpu_hour > 0 && scenario.budget_tokens == 0)
      reader.fail_key("usd_per_gpu_hour", "prices a run of [budget] tokens; give tokens too (e.g. tokens = 2e12)");
  }
  read_plugins(root, path, scenario);
  read_components(root, path, scenario);
  check_required_components(root, path, scenario);
  read_framework(root, path, catalog, scenario);
  return scenario;
}

Scenario load_scenario(const std::string& path, const Catalog& catalog, const std::vector<std::string>& overrides) {
  if (path == "-") return parse_scenario(read_standard_input("scenario"), "<stdin>", catalog, overrides);
  return parse_scenario(read_input_file(path, "scenario file"), path, catalog, overrides);
}

}  // namespace memplan
