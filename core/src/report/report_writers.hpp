// One writer per output format; report.cpp dispatches.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "memplan/core/estimate.hpp"
#include "memplan/core/limits.hpp"

namespace memplan {

void write_table(std::ostream& out, const Estimate& estimate, const ScenarioLimits& limits);
void write_json(std::ostream& out, const Estimate& estimate, const ScenarioLimits& limits);
void write_csv(std::ostream& out, const Estimate& estimate, const ScenarioLimits& limits);
void write_markdown(std::ostream& out, const Estimate& estimate, const ScenarioLimits& limits);
void write_html(std::ostream& out, const Estimate& estimate, const ScenarioLimits& limits);

// The fit verdict, computed in one place so that every format says the same.
// Without a GPU (no [hardware] gpu or memory_gib) there is none: has_gpu false.
struct FitFacts {
  bool has_gpu = false;
  uint64_t gpu_memory = 0;  // the GPU's nominal memory (the catalog's memory_gib, or the scenario's)
  uint64_t cuda_total = 0;  // what the job's capacity starts from: CUDA's total where known, else gpu_memory
  uint64_t capacity = 0;    // cuda_total x limits.memory_fraction
  bool fits = false;
  uint64_t headroom = 0;   // capacity - peak when it fits, else 0
  uint64_t shortfall = 0;  // peak - capacity when it does not, else 0
};
FitFacts fit_facts(const Estimate& estimate);

// The limits a report prints, in order: the largest micro-batch, then the
// longest sequence; a scenario's solved "max" takes its variable's place.
struct LimitRow {
  const char* key;    // "max_micro_batch" or "max_seq_len"
  bool solved;        // the scenario asked for "max" of this variable
  const SizeLimit* limit;
};
std::vector<LimitRow> limit_rows(const ScenarioLimits& limits);

// Why the step has no time although plugins reported its work, and what to
// give (empty when it is timed or no work was reported).
std::string untimed_reason(const Estimate& estimate);

// Where the model came from, as the reports name it: the preset, the
// hf_config path, or "inline".
std::string model_source(const Scenario& scenario);

}  // namespace memplan
