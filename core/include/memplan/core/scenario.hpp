// A scenario file parsed and checked against the scenario contract
// (docs/scenario-reference.md). Plugin options are kept as located values;
// each plugin validates its own keys when the estimator configures it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "memplan/core/step_time.hpp"
#include "memplan/core/catalog.hpp"
#include "memplan/core/component.hpp"
#include "memplan/core/error.hpp"
#include "memplan/core/model.hpp"

namespace memplan {

struct HardwareSpec {
  std::string gpu;                  // catalog name, or empty
  uint64_t memory_bytes = 0;        // 0 when the scenario names no GPU; what CUDA reports where the catalog knows it
  uint64_t nominal_bytes = 0;       // the catalog's memory_gib (memory_bytes for a scenario's own memory_gib)
  SourceLocation cuda_total_location;  // where the scenario gave cuda_total_gib (empty file when it did not)
  std::string label;                // what the report calls it
  bool nvlink_sharp = false;        // the catalog's fact about the GPU's node (hardware.nvlink_sharp)
  std::string architecture;         // the catalog's compute target (hardware.architecture), "" when unknown
  GpuPerformance performance;       // the catalog's figures, overridden by the scenario's keys
  int64_t count = 0;                // 0 when not given: the strategies' world size
  SourceLocation count_location;
  int fit_quantity = 2;             // the quantity `fits` compares (Quantity in breakdown.hpp): device by default
};

// The software that runs the job ([framework]): a profile from the catalog
// whose option defaults and runtime components were merged into the scenario.
struct FrameworkSpec {
  std::string name;     // empty when the catalog has no profile at all
  std::string version;  // as the scenario gives it, or the profile's
  // [framework] date ("YYYY-MM-DD"): the day of the run, whose behaviour the
  // profile's dated [[since]] versions give (version then names that version,
  // or "before <the first>"); empty when not given.
  std::string date;
  std::string profile_file;
  std::string summary;
  bool from_scenario = false;  // false: the catalog's default profile
  SourceLocation use_location;
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
  FrameworkSpec framework;
  std::vector<std::string> search_path;  // absolute, resolved against the scenario's folder
  SourceLocation search_path_location;
  std::vector<BundleRequirementSpec> bundles;  // [plugins] bundles: installed bundles the scenario needs
  // [budget]: a training run's tokens and the price of a GPU-hour, for its
  // duration, GPU-hours and cost from the step time (0: not given).
  double budget_tokens = 0;
  double usd_per_gpu_hour = 0;
  // "file:line:column: warning: ..." for what is accepted but probably a slip;
  // the CLI prints them on stderr.
  std::vector<std::string> warnings;
};

// Reads and checks a scenario; throws Error with file:line:column.
// `overrides` are `--set key.path=value` texts applied before anything is read
// (scenario_overrides.hpp). The path "-" reads standard input.
Scenario load_scenario(const std::string& path, const Catalog& catalog, const std::vector<std::string>& overrides = {});
Scenario parse_scenario(std::string_view text, const std::string& path, const Catalog& catalog,
                        const std::vector<std::string>& overrides = {});

std::string_view kind_name(int32_t kind);  // "optimizer", "precision", ...

}  // namespace memplan
