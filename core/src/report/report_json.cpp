// JSON output, schema "memplan.estimate/1" (docs/json-output.md). All sizes in
// bytes; every component key is always present.
#include <cmath>
#include <cstdio>
#include <string>

#include "report/advice.hpp"
#include "memplan/core/text.hpp"
#include "report/report_writers.hpp"

namespace memplan {
namespace {

std::string number(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.17g", value);
  return buffer;
}

// "time": the step's time, when plugins report its work (ABI 1.2); absent otherwise.
void write_step_time(std::ostream& out, const Estimate& estimate) {
  const StepTime& time = estimate.breakdown.time;
  if (time.status == TimeStatus::no_work) return;
  static constexpr const char* kStatus[] = {"no_work", "timed", "no_efficiency", "no_peak", "no_bandwidth", "no_link"};
  const bool timed = time.status == TimeStatus::timed;
  auto timed_number = [&](double value) { return timed ? number(value) : std::string("null"); };
  out << "  \"time\": {\n    \"status\": " << json_string(kStatus[static_cast<int>(time.status)])
      << ", \"reason\": " << (timed ? std::string("null") : json_string(untimed_reason(estimate)))
      << ",\n    \"seconds_per_step\": " << timed_number(time.seconds)
      << ", \"compute_seconds\": " << timed_number(time.compute_seconds)
      << ", \"communication_seconds\": " << timed_number(time.communication_seconds)
      << ", \"exposed_communication_seconds\": " << timed_number(time.exposed_seconds)
      << ", \"bubble_seconds\": " << timed_number(time.bubble_seconds) << ",\n    \"passes\": {";
  for (int32_t pass = MEMPLAN_PASS_FORWARD; pass <= MEMPLAN_PASS_OPTIMIZER; ++pass)
    out << (pass == MEMPLAN_PASS_FORWARD ? " " : ", ") << json_string(pass_name(pass)) << ": "
        << timed_number(time.pass_seconds[static_cast<size_t>(pass - 1)]);
  out << " },\n    \"model_flops_per_gpu\": " << number(time.model_flops)
      << ", \"hardware_flops_per_gpu\": " << number(time.hardware_flops)
      << ", \"memory_bytes_per_gpu\": " << number(time.memory_bytes)
      << ", \"communication_bytes_per_gpu\": " << number(time.communication_bytes)
      << ", \"math\": " << json_string(math_name(time.math))
      << ",\n    \"mfu\": " << timed_number(time.mfu) << ", \"hfu\": " << timed_number(time.hfu)
      << ", \"tokens_per_step\": " << number(time.tokens_per_step)
      << ", \"tokens_per_second\": " << timed_number(time.tokens_per_second);
  const RunBudget budget = run_budget(estimate);
  if (budget.tokens > 0)
    out << ",\n    \"budget\": { \"tokens\": " << number(budget.tokens) << ", \"hours\": " << number(budget.hours)
        << ", \"gpu_hours\": " << number(budget.gpu_hours)
        << ", \"usd\": " << (budget.usd > 0 ? number(budget.usd) : std::string("null")) << " }";
  out << "\n  },\n";
}

void write_components(std::ostream& out, const std::array<uint64_t, MEMPLAN_ROLE_COUNT>& components) {
  out << "{";
  for (int32_t role = 0; role < MEMPLAN_ROLE_COUNT; ++role)
    out << (role ? ", " : " ") << json_string(role_name(role)) << ": " << components[static_cast<size_t>(role)];
  out << " }";
}

void write_items(std::ostream& out, const Estimate& estimate, int32_t device) {
  out << "[";
  bool first = true;
  for (const PlanItem& item : estimate.items) {
    if (item.device != device) continue;
    out << (first ? "\n" : ",\n") << "      { \"name\": " << json_string(item_display_name(item))
        << ", \"role\": " << json_string(role_name(item.role)) << ", \"bytes\": " << item.bytes()
        << ", \"count\": " << item.count << ", \"elements\": " << number(item.elements)
        << ", \"bytes_per_element\": " << number(item.bytes_per_element)
        << ", \"lifetime\": " << json_string(lifetime_name(item.lifetime))
        << ", \"quantity\": " << json_string(quantity_name(item_quantity(item.flags)))
        << ", \"added_by\": " << json_string(estimate.origin(item)) << " }";
    first = false;
  }
  out << (first ? "]" : "\n    ]");
}

std::string limit_json(const std::optional<SizeLimit>& limit) {
  if (!limit) return "null";
  const std::string other = limit->variable == SizeVariable::micro_batch ? "seq_len" : "micro_batch";
  return "{ \"variable\": " + json_string(variable_name(limit->variable)) + ", \"value\": " +
         (limit->unbounded ? std::string("null") : std::to_string(limit->value)) + ", \"" + other + "\": " + std::to_string(limit->other) +
         ", \"binding\": " + json_string(limit->binding) + ", \"capped\": " + (limit->capped ? "true" : "false") +
         ", \"unbounded\": " + (limit->unbounded ? "true" : "false") +
         ", \"peak\": " + std::to_string(limit->peak) + ", \"capacity\": " + std::to_string(limit->capacity) + " }";
}

}  // namespace

void write_json(std::ostream& out, const Estimate& estimate, const ScenarioLimits& limits) {
  const Scenario& scenario = estimate.scenario;
  const Breakdown& b = estimate.breakdown;
  const FitFacts fit = fit_facts(estimate);
  out << "{\n";
  out << "  \"schema\": \"memplan.estimate/1\",\n";
  out << "  \"scenario\": " << json_string(scenario.name) << ",\n";
  out << "  \"mode\": " << json_string(scenario.mode == MEMPLAN_MODE_TRAIN ? "train" : "infer") << ",\n";
  out << "  \"batch\": { \"micro_batch\": " << estimate.micro_batch << ", \"seq_len\": " << estimate.seq_len
      << ", \"grad_accum\": " << scenario.grad_accum << " },\n";
  const FrameworkSpec& framework = scenario.framework;
  if (framework.name.empty()) {
    out << "  \"framework\": null,\n";
  } else {
    out << "  \"framework\": { \"name\": " << json_string(framework.name) << ", \"version\": "
        << json_string(framework.version)
        << (framework.date.empty() ? "" : ", \"date\": " + json_string(framework.date))
        << ", \"profile\": " << json_string(framework.profile_file)
        << ", \"default\": " << (framework.from_scenario ? "false" : "true") << " },\n";
  }
  // What the scenario reader warned about (a generic value read the framework's way, ...), as on
  // standard error: a consumer of the JSON sees that its input was read differently than written.
  out << "  \"warnings\": [";
  for (size_t i = 0; i < scenario.warnings.size(); ++i) out << (i ? ", " : "") << json_string(scenario.warnings[i]);
  out << "],\n";
  out << "  \"parameters\": { \"total\": " << std::llround(b.params_total)
      << ", \"trainable\": " << std::llround(b.params_trainable) << " },\n";
  out << "  \"per_gpu\": {\n";
  out << "    \"peak\": " << b.peak << ", \"sum\": " << b.sum << ", \"peak_phase\": " << json_string(phase_name(b.peak_phase))
      << ",\n";
  out << "    \"timeline\": {";
  for (int phase = 0; phase < kStepPhaseCount; ++phase)
    out << (phase ? ", " : " ") << json_string(phase_name(phase)) << ": " << b.timeline[static_cast<size_t>(phase)];
  out << " },\n";
  out << "    \"fit_quantity\": " << json_string(quantity_name(b.fit_quantity)) << ",\n";
  out << "    \"reserve_released\": " << b.reserve_released << ",\n";
  out << "    \"quantities\": {";
  for (int quantity = 0; quantity < kQuantityCount; ++quantity) {
    const StepPeak& q = b.quantities[static_cast<size_t>(quantity)];
    out << (quantity ? ",\n" : "\n") << "      " << json_string(quantity_name(quantity)) << ": { \"peak\": " << q.peak
        << ", \"peak_phase\": " << json_string(phase_name(q.peak_phase)) << ", \"timeline\": {";
    for (int phase = 0; phase < kStepPhaseCount; ++phase)
      out << (phase ? ", " : " ") << json_string(phase_name(phase)) << ": " << q.timeline[static_cast<size_t>(phase)];
    out << " } }";
  }
  out << "\n    },\n";
  out << "    \"components\": ";
  write_components(out, b.components);
  out << ",\n    \"items\": ";
  write_items(out, estimate, MEMPLAN_DEVICE_GPU);
  out << "\n  },\n";
  out << "  \"per_cpu\": { \"sum\": " << b.cpu_sum << ", \"components\": ";
  write_components(out, b.cpu_components);
  out << ", \"items\": ";
  write_items(out, estimate, MEMPLAN_DEVICE_CPU);
  out << " },\n";
  out << "  \"world_size\": " << b.world_size << ",\n";
  if (fit.has_gpu) {
    out << "  \"gpu\": " << json_string(scenario.hardware.gpu.empty() ? scenario.hardware.label : scenario.hardware.gpu)
        << ",\n";
    out << "  \"gpu_memory\": " << fit.gpu_memory << ",\n";
    out << "  \"gpu_cuda_total\": " << fit.cuda_total << ",\n";
    char fraction[32];
    std::snprintf(fraction, sizeof fraction, "%.6g", b.memory_fraction);  // a setting, not a measurement
    out << "  \"memory_fraction\": " << fraction << ",\n";
    out << "  \"capacity\": " << fit.capacity << ",\n";
    out << "  \"fits\": " << (fit.fits ? "true" : "false") << ",\n";
    out << "  \"headroom\": " << fit.headroom << ",\n";
    out << "  \"shortfall\": " << fit.shortfall << ",\n";
  } else {
    out << "  \"gpu\": null,\n  \"gpu_memory\": null,\n  \"gpu_cuda_total\": null,\n  \"memory_fraction\": null,\n  \"capacity\": null,\n"
           "  \"fits\": null,\n  \"headroom\": null,\n  \"shortfall\": null,\n";
  }
  out << "  \"solved\": " << limit_json(limits.solved) << ",\n";
  out << "  \"limits\": { \"max_micro_batch\": " << limit_json(limits.max_micro_batch)
      << ", \"max_seq_len\": " << limit_json(limits.max_seq_len) << " },\n";
  write_step_time(out, estimate);
  out << "  \"details\": {";
  const auto details = estimate.details;
  for (size_t i = 0; i < details.size(); ++i)
    out << (i ? ", " : " ") << json_string(details[i].first) << ": " << details[i].second;
  out << (details.empty() ? "},\n" : " },\n");
  out << "  \"advice\": [";
  const std::vector<std::string> advice = advice_for(b, fit.capacity, scenario.mode == MEMPLAN_MODE_TRAIN);
  for (size_t i = 0; i < advice.size(); ++i) out << (i ? ", " : "") << json_string(advice[i]);
  out << "],\n";
  out << "  \"plugins\": [";
  bool first = true;
  for (const PluginUse& plugin : estimate.plugins) {
    out << (first ? "\n" : ",\n") << "    { \"kind\": " << json_string(kind_name(plugin.kind))
        << ", \"name\": " << json_string(plugin.name) << ", \"version\": " << json_string(plugin.version)
        << ", \"library\": " << json_string(plugin.library) << " }";
    first = false;
  }
  out << (first ? "]\n" : "\n  ]\n");
  out << "}\n";
}

}  // namespace memplan
