// `memplan explain FILE`: for a job that does not fit, what fills the GPU and
// the smallest changes that make it fit, each with its cost in step time
// (docs/search.md, "Explain"). The changes come from the plugins' own levers
// (memplan_option_spec.levers: option values that trade time for memory) and
// from halving the micro-batch while grad_accum doubles (the global batch
// stays); single changes first, pairs when no single one fits. Beside them,
// the layouts at the same GPU count that fit: the configuration search over
// the integer options the plugins declare as layout sizes ("@layout" among
// their levers), each over the values that divide the GPUs, with the option
// declared "@fill" filling the rest. The core names no plugin: levers are
// what each plugin declares.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "memplan/core/breakdown.hpp"
#include "memplan/core/plugin_registry.hpp"
#include "memplan/core/scenario.hpp"

namespace memplan {

// An option spec's lever string (memplan_option_spec.levers, docs/plugin-abi.md "Option specs"):
// comma-separated values to try, and the words "@layout" (a layout size) and "@fill" (the size that
// fills the GPUs a layout leaves). Spaces are ignored; nullptr is no levers.
struct OptionLevers {
  std::vector<std::string> values;
  bool layout = false;
  bool fill = false;
};
OptionLevers parse_levers(const char* levers);

struct ExplainChange {
  std::vector<std::string> changes;  // "recompute.policy: none -> selective", ...
  uint64_t peak_bytes = 0;
  double step_seconds = 0;           // 0 when no step time is derived
  bool fits = false;
};

struct Explanation {
  bool has_gpu = false;
  bool fits = false;
  uint64_t peak_bytes = 0;
  uint64_t capacity_bytes = 0;
  int peak_phase = kInit;
  int fit_quantity = kDevice;
  std::array<uint64_t, MEMPLAN_ROLE_COUNT> components{};
  double step_seconds = 0;
  size_t candidates = 0;              // changes evaluated
  std::vector<ExplainChange> fixes;   // changes that fit: cheapest in step time first (else least memory)
  std::vector<ExplainChange> closest; // when nothing fits: the single changes that save the most
  // Layouts at the same GPU count that fit (the plugins' "@layout" sizes searched, "@fill" filling):
  // fastest first (least memory when untimed); layouts_tried = 0 when the scenario has no such size.
  int64_t layout_gpus = 0;
  uint64_t layouts_tried = 0;
  std::vector<ExplainChange> layouts;
};

Explanation explain(const Scenario& scenario, const PluginRegistry& registry);

}  // namespace memplan
