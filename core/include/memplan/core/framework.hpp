// Framework profiles: the software that runs a job, as data.
//
// A profile is a TOML file in the catalog's frameworks/ folder. It names no
// code of its own: it says which plugins' options the framework implies (a
// table [defaults.<plugin>] of option defaults, applied when the scenario uses
// that plugin and does not set the key) and which runtime components it brings
// ([[strategy]] tables, added unless the scenario has a table with the same
// `use` or excludes it). What each behaviour allocates is modelled, with its
// sources, by the plugins the profile composes; the core only merges tables.
// docs/frameworks.md gives the format and why profiles are data.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "memplan/core/component.hpp"

namespace memplan {

// How a framework reads a generic option value: [readings.<plugin>] <option> =
// { <generic value> = "<the framework's value>" }, kept as options whose key is
// "<option>=<generic value>" and whose text is the framework's value (so that
// later versions replace earlier ones like defaults do).
using FrameworkReadings = std::vector<std::pair<std::string, std::vector<OptionValue>>>;

// What a [[since]] block's conditions read of a scenario: its GPU and the
// strategy plugins it names.
struct ProfileFacts {
  std::string gpu_names;                // the catalog GPU's name and label, lower-case; "" for none
  uint64_t gpu_memory_bytes = 0;        // its nominal memory; 0 for none
  std::string architecture;             // the catalog's compute target ("sm_90"); "" when not known
  std::vector<std::string> strategies;  // the `use` of each [[strategy]] the scenario writes
};

// Option defaults that changed in a framework version: applied, on top of the
// profile's own, when the scenario's [framework] version is that version or
// later (or names no version: the profile describes the latest it knows).
struct FrameworkVersionDefaults {
  std::string version;  // e.g. "4.46"
  std::string note;     // what changed, with its source
  // The day that version was first released ("YYYY-MM-DD", `released`), so that a
  // run known by its date finds the behaviour it had; empty when not given.
  std::string released;
  SourceLocation location;  // the [[since]] table in its profile, for errors
  std::vector<std::pair<std::string, std::vector<OptionValue>>> defaults;
  FrameworkReadings readings;
  // Optional conditions on the scenario's GPU (a framework whose defaults
  // depend on the device it runs on): the block applies only when all hold.
  // Names are matched, lower-case, as substrings of the catalog GPU's name or
  // label; a scenario that gives memory_gib names no GPU (memory only).
  double gpu_memory_gib_at_least = 0;         // 0: any memory
  std::vector<std::string> gpu_name_contains;  // empty: any GPU; else one of them must match
  std::vector<std::string> gpu_name_excludes;  // none of them may match
  // NVIDIA compute capability bounds (8.0, 9.0; 0: no bound), read from the
  // catalog GPU's architecture ("sm_80" -> 8.0): a kernel a framework picks by
  // GPU generation. A GPU whose capability is not known (AMD, a scenario's own
  // memory_gib) meets neither bound.
  double gpu_compute_capability_at_least = 0;
  double gpu_compute_capability_below = 0;
  // Strategy plugins one of which the scenario must use (`with_strategy`): a
  // framework that sets itself up differently when the job is sharded. Empty:
  // any scenario.
  std::vector<std::string> with_strategy;
  bool applies_to(const ProfileFacts& facts) const;
  bool applies_to(const std::string& gpu_names, uint64_t gpu_memory_bytes, std::string_view architecture = {}) const {
    return applies_to(ProfileFacts{gpu_names, gpu_memory_bytes, std::string(architecture), {}});
  }
};

struct FrameworkProfile {
  std::string name;     // the profile's folder name under plugins/frameworks/
  std::string summary;  // one line for `memplan plugins` and reports
  std::string version;  // the framework version its behaviour was read from
  std::string source;   // where that behaviour is documented (code, commits)
  std::string file;
  std::string origin;   // "" for the built-in catalog, else who provides it (CatalogSource::origin)
  // Other names that find the profile in [framework] use and a validation
  // case's framework line. Lower case, '-' for '_' (framework_key). From
  // [framework] aliases (other names of the same software, whose versions are
  // the profile's) and built_on_it (software on top of it that runs the same
  // code, a library or a recipe collection, whose version numbers are its own).
  struct Alias {
    std::string name;
    bool shares_versions = true;  // from `aliases` (true) or `built_on_it` (false)
    SourceLocation location;      // where it is written, for errors
  };
  std::vector<Alias> aliases;
  // Whether `key` (a framework_key) is one of the aliases.
  bool has_alias(std::string_view key) const;
  // Whether a version written next to `name` (the profile's name or one of its
  // aliases) is a version of this profile.
  bool shares_versions(std::string_view name) const;
  // A profile may build on another ([framework] extends, at extends_version,
  // empty: its latest): the catalog resolves it once every profile is loaded
  // (inherit_profile), so that a script on top of a framework states only
  // what it changes.
  std::string extends;
  std::string extends_version;
  SourceLocation extends_location;
  bool is_default = false;  // used by scenarios without a [framework] table
  // gpu_capacity = "nominal": a catalog GPU holds its memory_gib, not CUDA's total ("cuda-total", the
  // default). Unset when the profile does not say: what the profile it extends says, else cuda-total.
  std::optional<bool> nominal_capacity;
  // `default_for = "train"` or "infer": the default of scenarios of that mode
  // without a [framework] table, in place of the `default = true` profile.
  int32_t default_for_mode = -1;
  // Option defaults by plugin name, located in the profile's file.
  std::vector<std::pair<std::string, std::vector<OptionValue>>> defaults;
  // Generic option values the framework computes its own way: a scenario that says
  // the generic value (written before profiles existed, or for any framework) is
  // estimated with the framework's, and told so in a warning.
  FrameworkReadings readings;
  // Runtime components the framework brings (CUDA context, allocator, communication buffers, ...).
  std::vector<ComponentSpec> strategies;
  // [[since]] blocks, in file order (each version no older than the one before).
  std::vector<FrameworkVersionDefaults> since;

  // The option defaults for `version` (empty: the latest): the profile's own,
  // then each [[since]] block up to that version, a later value replacing an earlier one.
  std::vector<std::pair<std::string, std::vector<OptionValue>>> defaults_for(const std::string& version) const;
  // The same for a scenario: [[since]] blocks with conditions apply only when
  // its facts (the GPU's names, memory and architecture, its strategies) meet them.
  std::vector<std::pair<std::string, std::vector<OptionValue>>> defaults_for(const std::string& version,
                                                                             const ProfileFacts& facts) const;
  std::vector<std::pair<std::string, std::vector<OptionValue>>> defaults_for(const std::string& version,
                                                                             const std::string& gpu_names,
                                                                             uint64_t gpu_memory_bytes) const {
    return defaults_for(version, ProfileFacts{gpu_names, gpu_memory_bytes, "", {}});
  }
  // The readings for `version` (empty: the latest) for that scenario, merged like the defaults.
  FrameworkReadings readings_for(const std::string& version, const ProfileFacts& facts) const;

  // A run of a known date ([framework] date, a validation case's header): the
  // version whose behaviour it had is the newest [[since]] version released on
  // or before that day, "0" when the day is before them all (the profile's own
  // defaults alone). Blocks of version "0" (a base profile's, inherited) hold at
  // any date. The first [[since]] block (version "0" ones aside) without a
  // `released` day, or nullptr when every block has one: then a date can place
  // a run among the versions.
  const FrameworkVersionDefaults* undated_block() const;
  // Whether the profile has [[since]] versions a date chooses among (version "0" blocks aside).
  bool has_dated_versions() const;
  // Whether a date places a run among them: dated versions, every one with its day.
  bool dates_place_versions() const { return has_dated_versions() && undated_block() == nullptr; }
  // The oldest of them ("4.18"): a day before it gets the profile's own defaults.
  std::string first_dated_version() const;
  // The version for `date` ("YYYY-MM-DD"); call only when undated_block() is nullptr.
  std::string version_on(const std::string& date) const;
};

// Whether `text` is a calendar day written "YYYY-MM-DD" (a real month and day).
bool is_iso_date(std::string_view text);
// A version written as a day ("2023-07-16") or a month ("2023-07": its last
// day) for a profile whose own versions are not numbered by the year ("4.46",
// "core_r0.14.0"). `day` is that day (years 2000-2099, as the dates a case's
// prose gives), which the profile's dated versions place; `date_shaped` says
// the text has a date's shape (YYYY-MM or YYYY-MM-DD) whether or not it is a
// day ("2024-13" is not). Both empty/false where the profile numbers its
// versions by the year ("2024.03.26"): there such text is a version like any other.
struct DayInVersion {
  std::string day;
  bool date_shaped = false;
};
DayInVersion day_written_as_version(const std::string& given, const FrameworkProfile& profile);
// The days of `month` (1-12) in `year`, leap years counted.
int days_in_month(int year, int month);

// Makes `profile`, which names `base` in its extends, hold the base's behaviour at
// profile.extends_version beneath its own: the base's defaults, then each of its
// [[since]] blocks up to that version in order (GPU-conditional ones still
// conditions), then the profile's own defaults and readings over all of them;
// the base's [[strategy]] tables, a profile table with the same `use` replacing
// the base's. The profile's [[since]] blocks follow its own versions.
void inherit_profile(FrameworkProfile& profile, const FrameworkProfile& base);

// A framework name as profiles are looked up by it: lower case, '_' read as '-'
// ("Team_Trainer" and "team-trainer" are one name).
std::string framework_key(std::string_view name);

// Orders versions by their numbers ("4.38" < "4.46" < "4.100"; "core_r0.14.0" is 0.14.0): negative, 0, positive.
int compare_versions(const std::string& a, const std::string& b);

// Reads one profile file; throws Error with file:line:column.
FrameworkProfile load_framework_profile(const std::string& path);
// The same for a profile's bytes read elsewhere; `path` names it in messages and gives its name (the stem).
FrameworkProfile parse_framework_profile(std::string_view text, const std::string& path);

}  // namespace memplan
