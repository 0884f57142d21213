#include "memplan/core/framework.hpp"

#include <memplan/plugin_abi.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "scenario/component_reader.hpp"
#include "common/input_file.hpp"
#include "common/toml_guard.hpp"
#include "common/toml_reader.hpp"

namespace memplan {

namespace {

std::vector<long long> version_numbers(const std::string& text) {
  std::vector<long long> numbers;
  long long current = -1;
  for (char c : text) {
    if (c >= '0' && c <= '9') {
      current = (current < 0 ? 0 : current) * 10 + (c - '0');
      if (current > 1'000'000'000) current = 1'000'000'000;  // a version part, not a number to overflow on
    } else if (current >= 0) {
      numbers.push_back(current);
      current = -1;
    }
  }
  if (current >= 0) numbers.push_back(current);
  return numbers;
}

std::vector<std::pair<std::string, std::vector<OptionValue>>> read_defaults(const toml::node* defaults,
                                                                              const std::string& path,
                                                                              const std::string& prefix) {
  std::vector<std::pair<std::string, std::vector<OptionValue>>> result;
  if (defaults == nullptr) return result;
  if (!defaults->is_table())
    fail_at(location_of(path, defaults->source()), "'" + prefix + "' must be tables [" + prefix + ".<plugin name>]");
  for (const auto& [plugin, node] : *defaults->as_table()) {
    const std::string plugin_name(plugin.str());
    const std::string section = "[" + prefix + "." + plugin_name + "]";
    if (!node.is_table()) fail_at(location_of(path, node.source()), section + " must be a table of that plugin's options");
    if (node.as_table()->contains("use"))
      fail_at(location_of(path, node.as_table()->get("use")->source()),
              "in " + section + ", 'use' is not an option: the table's name is the plugin");
    result.emplace_back(plugin_name, read_options(*node.as_table(), path, section));
  }
  return result;
}

void merge_defaults(std::vector<std::pair<std::string, std::vector<OptionValue>>>& into,
                    const std::vector<std::pair<std::string, std::vector<OptionValue>>>& from) {
  for (const auto& [plugin, options] : from) {
    // A named copy for the lambda: clang before 16 cannot capture a structured binding.
    const std::string& name = plugin;
    auto found = std::find_if(into.begin(), into.end(), [&](const auto& entry) { return entry.first == name; });
    if (found == into.end()) {
      into.emplace_back(plugin, options);
      continue;
    }
    for (const OptionValue& option : options) {
      auto same = std::find_if(found->second.begin(), found->second.end(),
                               [&](const OptionValue& existing) { return existing.key == option.key; });
      if (same == found->second.end()) found->second.push_back(option);
      else *same = option;
    }
  }
}

// [readings.<plugin>] tables: <option> = { <generic value> = "<the framework's value>" }.
FrameworkReadings read_readings(const toml::node* readings, const std::string& path, const std::string& prefix) {
  FrameworkReadings result;
  if (readings == nullptr) return result;
  const std::string form = "must be tables [" + prefix + ".<plugin name>] of <option> = { <generic value> = "
                           "\"<the framework's value>\" }";
  if (!readings->is_table()) fail_at(location_of(path, readings->source()), "'" + prefix + "' " + form);
  for (const auto& [plugin, node] : *readings->as_table()) {
    const std::string section = "[" + prefix + "." + std::string(plugin.str()) + "]";
    if (!node.is_table()) fail_at(location_of(path, node.source()), section + " " + form);
    std::vector<OptionValue> options;
    for (const auto& [option, values] : *node.as_table()) {
      if (!values.is_table())
        fail_at(location_of(path, values.source()),
                "in " + section + ", '" + std::string(option.str()) + "' must be a table { <generic value> = "
                "\"<the framework's value>\" }");
      for (const auto& [generic, reading] : *values.as_table()) {
        if (!reading.is_string() || reading.as_string()->get().empty())
          fail_at(location_of(path, reading.source()),
                  "in " + section + ", " + std::string(option.str()) + "." + std::string(generic.str()) +
                      " must be the framework's value, a non-empty string");
        OptionValue value;
        value.key = std::string(option.str()) + "=" + std::string(generic.str());
        value.type = OptionValue::Type::string;
        value.text = reading.as_string()->get();
        value.key_location = location_of(path, option.source());
        value.value_location = location_of(path, reading.source());
        options.push_back(std::move(value));
      }
    }
    result.emplace_back(std::string(plugin.str()), std::move(options));
  }
  return result;
}

// A [[since]] block's compute-capability bound: major.minor as NVIDIA writes
// it (8.0, 8.6, 9.0, 10.0), 0 when absent.
double read_capability(const TomlReader& block, std::string_view key) {
  const std::optional<double> value = block.positive_number(key);
  if (!value) return 0;
  const double tenths = *value * 10.0;
  if (*value < 1.0 || *value >= 100.0 || std::abs(tenths - std::round(tenths)) > 1e-9)
    block.fail_key(key, "must be an NVIDIA compute capability, major.minor (8.0 for an A100, 9.0 for an H100)");
  return *value;
}

// A [[since]] block's list of GPU name parts: an array of non-empty strings, kept lower-case.
// A [[since]] block's list of names (GPU name parts, strategy plugins): an array of non-empty strings, kept
// lower-case. `what` and `example` say in an error what the list holds.
std::vector<std::string> read_names(const toml::table& table, const TomlReader& block, std::string_view key,
                                    std::string_view what, std::string_view example) {
  std::vector<std::string> names;
  const toml::node* node = table.get(key);
  if (node == nullptr) return names;
  const std::string form =
      "must be an array of " + std::string(what) + ", e.g. " + std::string(key) + " = " + std::string(example);
  if (!node->is_array()) block.fail_key(key, form);
  for (const toml::node& entry : *node->as_array()) {
    if (!entry.is_string() || entry.as_string()->get().empty()) block.fail_key(key, form);
    std::string name = entry.as_string()->get();
    std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    names.push_back(std::move(name));
  }
  return names;
}

std::vector<std::string> read_gpu_names(const toml::table& table, const TomlReader& block, std::string_view key) {
  return read_names(table, block, key, "GPU name parts", "[\"a100\"]");
}

// An NVIDIA compute capability from the catalog's architecture ("sm_80" ->
// 8.0, "sm_86" -> 8.6, "sm_100" -> 10.0: the last digit is the minor
// number); nothing for other targets (AMD's "gfx942") or an unknown GPU. The
// plugins' rule for the major number is memplan/support/cublas_workspace.hpp's
// cuda_major; the core keeps its own reading, as it links no plugin support.
std::optional<double> compute_capability(std::string_view architecture) {
  if (!architecture.starts_with("sm_") || architecture.size() < 5) return std::nullopt;
  const std::string_view digits = architecture.substr(3);
  int value = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return std::nullopt;
    value = value * 10 + (c - '0');
  }
  return static_cast<double>(value / 10) + static_cast<double>(value % 10) / 10.0;
}

}  // namespace

std::string framework_key(std::string_view name) {
  std::string key(name);
  for (char& c : key) c = c == '_' ? '-' : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return key;
}

bool FrameworkProfile::shares_versions(std::string_view other) const {
  const std::string key = framework_key(other);
  if (key == framework_key(name)) return true;
  for (const Alias& alias : aliases)
    if (alias.name == key) return alias.shares_versions;
  return false;
}

bool FrameworkProfile::has_alias(std::string_view key) const {
  return std::any_of(aliases.begin(), aliases.end(), [&](const Alias& alias) { return alias.name == key; });
}

bool FrameworkVersionDefaults::applies_to(const ProfileFacts& facts) const {
  const auto named = [&](const std::string& part) { return facts.gpu_names.find(part) != std::string::npos; };
  if (gpu_memory_gib_at_least > 0 &&
      static_cast<double>(facts.gpu_memory_bytes) < gpu_memory_gib_at_least * 1073741824.0)
    return false;
  if (!with_strategy.empty() &&
      std::none_of(with_strategy.begin(), with_strategy.end(), [&](const std::string& strategy) {
        return std::find(facts.strategies.begin(), facts.strategies.end(), strategy) != facts.strategies.end();
      }))
    return false;
  if (gpu_compute_capability_at_least > 0 || gpu_compute_capability_below > 0) {
    const std::optional<double> capability = compute_capability(facts.architecture);
    if (!capability) return false;
    // Compared in tenths: 8.6 written in a profile is the catalog's sm_86.
    const auto tenths = [](double value) { return static_cast<long long>(value * 10.0 + 0.5); };
    if (gpu_compute_capability_at_least > 0 && tenths(*capability) < tenths(gpu_compute_capability_at_least))
      return false;
    if (gpu_compute_capability_below > 0 && tenths(*capability) >= tenths(gpu_compute_capability_below)) return false;
  }
  if (!gpu_name_contains.empty() && std::none_of(gpu_name_contains.begin(), gpu_name_contains.end(), named))
    return false;
  return std::none_of(gpu_name_excludes.begin(), gpu_name_excludes.end(), named);
}

void inherit_profile(FrameworkProfile& profile, const FrameworkProfile& base) {
  // Every base block up to extends_version becomes a block of version "0" (so it applies at any
  // version of this profile), in the base's order, conditions kept; then one unconditional block
  // holds this profile's own defaults and readings, so they win over everything inherited.
  std::vector<FrameworkVersionDefaults> since;
  for (const FrameworkVersionDefaults& block : base.since) {
    if (!profile.extends_version.empty() && compare_versions(block.version, profile.extends_version) > 0) continue;
    FrameworkVersionDefaults kept = block;
    kept.version = "0";
    kept.released.clear();  // it holds at every version of this profile, so at every date
    kept.note = base.name + " " + block.version + ": " + block.note;
    since.push_back(std::move(kept));
  }
  FrameworkVersionDefaults own_block;
  own_block.version = "0";
  own_block.note = profile.name + "'s own defaults over " + base.name;
  own_block.defaults = std::move(profile.defaults);
  own_block.readings = std::move(profile.readings);
  since.push_back(std::move(own_block));
  since.insert(since.end(), profile.since.begin(), profile.since.end());
  profile.since = std::move(since);
  profile.defaults = base.defaults;
  profile.readings = base.readings;
  if (!profile.nominal_capacity) profile.nominal_capacity = base.nominal_capacity;
  std::vector<ComponentSpec> strategies = base.strategies;
  for (const ComponentSpec& own : profile.strategies) {
    auto same = std::find_if(strategies.begin(), strategies.end(),
                             [&](const ComponentSpec& inherited) { return inherited.use == own.use; });
    if (same == strategies.end()) strategies.push_back(own);
    else *same = own;
  }
  profile.strategies = std::move(strategies);
}

bool is_iso_date(std::string_view text) {
  if (text.size() != 10 || text[4] != '-' || text[7] != '-') return false;
  for (size_t i : {0, 1, 2, 3, 5, 6, 8, 9})
    if (text[i] < '0' || text[i] > '9') return false;
  const int year = std::stoi(std::string(text.substr(0, 4)));
  const int month = std::stoi(std::string(text.substr(5, 2)));
  const int day = std::stoi(std::string(text.substr(8, 2)));
  return month >= 1 && month <= 12 && day >= 1 && day <= days_in_month(year, month);
}

DayInVersion day_written_as_version(const std::string& given, const FrameworkProfile& profile) {
  const std::vector<long long> own = version_numbers(profile.version);
  if (!own.empty() && own.front() >= 1000) return {};  // the profile's versions are years themselves
  const auto digits = [&](size_t from, size_t to) {
    for (size_t i = from; i < to; ++i)
      if (given[i] < '0' || given[i] > '9') return false;
    return true;
  };
  DayInVersion out;
  out.date_shaped = (given.size() == 7 || given.size() == 10) && given[4] == '-' && digits(0, 4) && digits(5, 7) &&
                    (given.size() == 7 || (given[7] == '-' && digits(8, 10)));
  if (!out.date_shaped) return out;
  const int year = std::stoi(given.substr(0, 4)), month = std::stoi(given.substr(5, 2));
  if (year < 2000 || year > 2099 || month < 1 || month > 12) return out;
  // A month is read as its last day, as a case's prose month is read.
  const std::string day = given.size() == 7 ? given + "-" + std::to_string(days_in_month(year, month)) : given;
  if (is_iso_date(day)) out.day = day;
  return out;
}

int days_in_month(int year, int month) {
  static constexpr int kDays[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  const bool leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
  return month == 2 && !leap ? 28 : kDays[month - 1];
}

const FrameworkVersionDefaults* FrameworkProfile::undated_block() const {
  for (const FrameworkVersionDefaults& block : since)
    if (block.version != "0" && block.released.empty()) return &block;
  return nullptr;
}

bool FrameworkProfile::has_dated_versions() const { return !first_dated_version().empty(); }

std::string FrameworkProfile::first_dated_version() const {
  for (const FrameworkVersionDefaults& block : since)
    if (block.version != "0" && !block.released.empty()) return block.version;
  return "";
}

std::string FrameworkProfile::version_on(const std::string& date) const {
  // ISO days order as text; [[since]] blocks are oldest first, their days too (the reader checks).
  std::string version = "0";
  for (const FrameworkVersionDefaults& block : since)
    if (block.version != "0" && !block.released.empty() && block.released <= date) version = block.version;
  return version;
}

int compare_versions(const std::string& a, const std::string& b) {
  const std::vector<long long> x = version_numbers(a), y = version_numbers(b);
  for (size_t i = 0; i < std::max(x.size(), y.size()); ++i) {
    const long long u = i < x.size() ? x[i] : 0, v = i < y.size() ? y[i] : 0;
    if (u != v) return u < v ? -1 : 1;
  }
  return 0;
}

FrameworkReadings FrameworkProfile::readings_for(const std::string& wanted, const ProfileFacts& facts) const {
  FrameworkReadings result = readings;
  for (const FrameworkVersionDefaults& block : since)
    if ((wanted.empty() || compare_versions(block.version, wanted) <= 0) && block.applies_to(facts))
      merge_defaults(result, block.readings);
  return result;
}

std::vector<std::pair<std::string, std::vector<OptionValue>>> FrameworkProfile::defaults_for(
    const std::string& wanted) const {
  return defaults_for(wanted, "", 0);
}

std::vector<std::pair<std::string, std::vector<OptionValue>>> FrameworkProfile::defaults_for(
    const std::string& wanted, const ProfileFacts& facts) const {
  std::vector<std::pair<std::string, std::vector<OptionValue>>> result = defaults;
  for (const FrameworkVersionDefaults& block : since)
    if ((wanted.empty() || compare_versions(block.version, wanted) <= 0) && block.applies_to(facts))
      merge_defaults(result, block.defaults);
  return result;
}

FrameworkProfile load_framework_profile(const std::string& path) {
  return parse_framework_profile(read_input_file(path, "framework profile"), path);
}

FrameworkProfile parse_framework_profile(std::string_view text, const std::string& path) {
  toml::table root;
  try {
    root = parse_toml(text, path);
  } catch (const toml::parse_error& error) {
    fail_at(location_of(path, error.source()), "invalid TOML in a framework profile: " +
                                                   std::string(error.description()));
  }
  FrameworkProfile profile;
  profile.file = path;
  profile.name = std::filesystem::path(path).stem().string();
  TomlReader top(root, path, "framework profile '" + profile.name + "'");
  top.reject_unknown_keys({"framework", "defaults", "readings", "strategy", "since"});
  const toml::node* header = root.get("framework");
  if (header == nullptr || !header->is_table())
    fail_at(SourceLocation{path, 1, 1}, "a framework profile needs a [framework] table with name and summary");
  TomlReader reader(*header->as_table(), path, "[framework]");
  reader.reject_unknown_keys({"name", "summary", "version", "source", "default", "default_for", "aliases",
                              "built_on_it", "extends", "extends_version", "gpu_capacity"});
  const auto name = reader.string("name");
  if (!name || *name != profile.name)
    fail_at(reader.table_location(), "[framework] name must equal the file name without .toml ('" + profile.name +
                                         "'): a profile is found by its file name");
  profile.summary = reader.string("summary").value_or("");
  if (profile.summary.empty()) reader.fail_key("summary", "must say in one line what the profile models");
  profile.version = reader.string("version").value_or("");
  profile.source = reader.string("source").value_or("");
  profile.is_default = reader.boolean("default").value_or(false);
  // What a GPU of the catalog holds for the job: what CUDA reports (the driver keeps the rest of the nominal
  // capacity, a runtime fact like the CUDA context), or the nominal capacity, as papers count it.
  if (auto capacity = reader.string("gpu_capacity")) {
    if (*capacity != "cuda-total" && *capacity != "nominal")
      reader.fail_key("gpu_capacity", "must be \"cuda-total\" (what CUDA reports: the catalog's cuda_total_gib) or "
                                      "\"nominal\" (the catalog's memory_gib), not \"" + *capacity + "\"");
    profile.nominal_capacity = *capacity == "nominal";
  }
  if (auto extends = reader.string("extends")) {
    if (extends->empty()) reader.fail_key("extends", "must name the profile this one builds on, e.g. extends = \"<profile>\"");
    profile.extends = *extends;
    profile.extends_location = reader.value_location("extends");
  }
  if (auto at = reader.string("extends_version")) {
    if (profile.extends.empty())
      reader.fail_key("extends_version", "needs extends = \"<profile>\": it is the version of that profile this one builds on");
    if (version_numbers(*at).empty()) reader.fail_key("extends_version", "must contain a version number, e.g. \"4.38\"");
    profile.extends_version = *at;
  }
  for (const std::string_view key : {std::string_view("aliases"), std::string_view("built_on_it")}) {
    const toml::node* aliases = header->as_table()->get(key);
    if (aliases == nullptr) continue;
    const std::string form = "must be an array of other names, e.g. " + std::string(key) + " = [\"" + profile.name +
                             "-core\"]";
    if (!aliases->is_array()) reader.fail_key(key, form);
    for (const toml::node& entry : *aliases->as_array()) {
      const SourceLocation where = location_of(path, entry.source());
      if (!entry.is_string() || entry.as_string()->get().empty())
        fail_at(where, "in [framework], '" + std::string(key) + "' " + form);
      const std::string alias = entry.as_string()->get();
      if (alias != framework_key(alias))
        fail_at(where, "in [framework], alias '" + alias + "' must be written '" + framework_key(alias) +
                           "' (lower case, '-' for '_'): names are matched that way");
      if (alias == framework_key(profile.name))
        fail_at(where, "in [framework], alias '" + alias + "' is the profile's own name");
      if (profile.has_alias(alias))
        fail_at(where, "in [framework], alias '" + alias + "' is listed twice (aliases and built_on_it together)");
      profile.aliases.push_back({alias, key == "aliases", where});
    }
  }
  if (auto mode = reader.choice("default_for", {"train", "infer"}))
    profile.default_for_mode = *mode == "train" ? MEMPLAN_MODE_TRAIN : MEMPLAN_MODE_INFER;

  profile.defaults = read_defaults(root.get("defaults"), path, "defaults");
  profile.readings = read_readings(root.get("readings"), path, "readings");
  if (const toml::node* since = root.get("since")) {
    if (!since->is_array_of_tables())
      fail_at(location_of(path, since->source()), "'since' must be written as [[since]] tables");
    for (const toml::node& entry : *since->as_array()) {
      TomlReader block(*entry.as_table(), path, "[[since]]");
      block.reject_unknown_keys({"version", "note", "released", "defaults", "readings", "gpu_memory_gib_at_least",
                                 "gpu_name_contains", "gpu_name_excludes", "gpu_compute_capability_at_least",
                                 "gpu_compute_capability_below", "with_strategy"});
      FrameworkVersionDefaults version;
      const auto number = block.string("version");
      if (!number || version_numbers(*number).empty())
        fail_at(block.table_location(), "[[since]] needs version = \"<the version the defaults below start at>\"");
      version.version = *number;
      version.location = block.table_location();
      version.note = block.string("note").value_or("");
      if (!profile.since.empty() && compare_versions(profile.since.back().version, version.version) > 0)
        block.fail_key("version", "is older than the [[since]] block before it; list them oldest first");
      if (const toml::node* released = entry.as_table()->get("released")) {
        // A TOML date (released = 2024-10-24) or the same as a string.
        const std::string day = day_text(*released);
        if (!is_iso_date(day))
          block.fail_key("released", "must be the day the version was first released, YYYY-MM-DD (e.g. 2024-10-24)");
        for (const FrameworkVersionDefaults& other : profile.since)
          if (!other.released.empty() && compare_versions(other.version, version.version) == 0 && other.released != day)
            block.fail_key("released", "is " + day + ", but the [[since]] block of the same version " + other.version +
                                           " says " + other.released + "; one version has one release day");
        for (auto previous = profile.since.rbegin(); previous != profile.since.rend(); ++previous)
          if (!previous->released.empty()) {
            if (previous->released > day)
              block.fail_key("released", "is before the day of the [[since]] block of version " + previous->version +
                                             " (" + previous->released + "); versions are released in order");
            break;
          }
        version.released = day;
      }
      version.defaults = read_defaults(entry.as_table()->get("defaults"), path, "since.defaults");
      version.readings = read_readings(entry.as_table()->get("readings"), path, "since.readings");
      version.gpu_memory_gib_at_least = block.positive_number("gpu_memory_gib_at_least").value_or(0);
      version.gpu_name_contains = read_gpu_names(*entry.as_table(), block, "gpu_name_contains");
      version.gpu_name_excludes = read_gpu_names(*entry.as_table(), block, "gpu_name_excludes");
      version.with_strategy = read_names(*entry.as_table(), block, "with_strategy", "strategy plugin names",
                                         "[\"<a [[strategy]] use>\"]");
      version.gpu_compute_capability_at_least = read_capability(block, "gpu_compute_capability_at_least");
      version.gpu_compute_capability_below = read_capability(block, "gpu_compute_capability_below");
      if (version.gpu_compute_capability_at_least > 0 && version.gpu_compute_capability_below > 0 &&
          version.gpu_compute_capability_below <= version.gpu_compute_capability_at_least)
        block.fail_key("gpu_compute_capability_below",
                       "is not above gpu_compute_capability_at_least: no GPU would meet both; write the range "
                       "low to high (e.g. at_least = 8.0, below = 9.0)");
      profile.since.push_back(std::move(version));
    }
  }
  read_strategies(root, path, " of framework '" + profile.name + "'", profile.strategies);
  return profile;
}

}  // namespace memplan
