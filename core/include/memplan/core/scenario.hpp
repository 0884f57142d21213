// A scenario file parsed and checked against the scenario contract
// (docs/scenario-reference.md). Plugin options are kept as located values;
// each plugin validates its own keys when the estimator configures it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "memplan/core/catalog.hpp"
#include "memplan/core/error.hpp"
#include "memplan/core/model.hpp"

namespace memplan {

struct OptionValue {
  enum class Type { integer, floating, boolean, string };
  std::string key;
  Type type = Type::integer;
  int64_t integer = 0;
  double floating = 0;
  bool boolean = false;
  std::string text;
  SourceLocation key_location;
  SourceLocation value_location;
};

// One component table: [precision], [optimizer], [activations] or one [[strategy]].
struct ComponentSpec {
  int32_t kind = 0;     // MEMPLAN_KIND_*
  std::string section;  // "[optimizer]", "[[strategy]] #2", for messages
  std::string use;      // the plugin's name
  SourceLocation use_location;
  SourceLocation table_location;
  std::vector<OptionValue> options;  // every key but `use`
};

struct HardwareSpec {
  std::string gpu;                  // catalog name, or empty
  uint64_t memory_bytes = 0;        // 0 when the scenario names no GPU
  std::string label;                // what the report calls it
  int64_t count = 0;                // 0 when not given: the strategies' world size
  SourceLocation count_location;
};

// One entry of [plugins] bundles: "acme-optimizers>=1.2" (bundle.hpp parses it).
struct BundleRequirementSpec {
  std::string text;
  std::string name;
  SourceLocation location;
};

struct Scenario {
  std::string file;
  std::string name;
  int32_t mode = MEMPLAN_MODE_TRAIN;
  ModelSpec model;
  SourceLocation model_location;
  int64_t micro_batch = 1;
  int64_t seq_len = 0;  // 0 when not given; activation models that need it say so
  // `micro_batch = "max"` or `seq_len = "max"`: solve for the largest value that
  // fits (the other is fixed); the field above then holds 1 until solved.
  bool micro_batch_max = false;
  bool seq_len_max = false;
  SourceLocation max_location;
  int64_t grad_accum = 1;
  std::vector<ComponentSpec> components;
  HardwareSpec hardware;
  std::vector<std::string> search_path;  // absolute, resolved against the scenario's folder
  SourceLocation search_path_location;
  std::vector<BundleRequirementSpec> bundles;  // [plugins] bundles: installed bundles the scenario needs
};

// Reads and checks a scenario; throws Error with file:line:column.
Scenario load_scenario(const std::string& path, const Catalog& catalog);
Scenario parse_scenario(std::string_view text, const std::string& path, const Catalog& catalog);

std::string_view kind_name(int32_t kind);  // "optimizer", "precision", ...

}  // namespace memplan
