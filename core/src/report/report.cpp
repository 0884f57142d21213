#include "memplan/core/report.hpp"

#include "report/report_writers.hpp"

namespace memplan {

std::optional<ReportFormat> parse_report_format(std::string_view name) {
  if (name == "table") return ReportFormat::table;
  if (name == "json") return ReportFormat::json;
  if (name == "csv") return ReportFormat::csv;
  if (name == "markdown") return ReportFormat::markdown;
  if (name == "html") return ReportFormat::html;
  return std::nullopt;
}

void write_report(std::ostream& out, const Estimate& estimate, const ScenarioLimits& limits, ReportFormat format) {
  switch (format) {
    case ReportFormat::table: write_table(out, estimate, limits); break;
    case ReportFormat::json: write_json(out, estimate, limits); break;
    case ReportFormat::csv: write_csv(out, estimate, limits); break;
    case ReportFormat::markdown: write_markdown(out, estimate, limits); break;
    case ReportFormat::html: write_html(out, estimate, limits); break;
  }
}

void write_report(std::ostream& out, const Estimator& estimator, const ScenarioLimits& limits, ReportFormat format) {
  write_report(out, estimator.estimate(), limits, format);
}

std::string untimed_reason(const Estimate& estimate) {
  const StepTime& time = estimate.breakdown.time;
  if (time.status == TimeStatus::timed || time.status == TimeStatus::no_work || time.cause < 0 ||
      static_cast<size_t>(time.cause) >= estimate.work.size())
    return "";
  const WorkRecord& work = estimate.work[static_cast<size_t>(time.cause)];
  const std::string who = "plugin '" + estimate.origin(work) + "' reports " + std::string(pass_name(work.pass)) +
                          " work '" + std::string(work.name) + "'";
  const std::string gpu = estimate.scenario.hardware.label.empty() ? std::string("no GPU is given")
                                                                    : "the GPU (" + estimate.scenario.hardware.label + ")";
  switch (time.status) {
    case TimeStatus::no_efficiency:
      return who + " without an efficiency (the fraction of the GPU's peak it reaches); give that plugin its "
                   "efficiency, e.g. a model FLOPs utilisation published for the framework and GPU";
    case TimeStatus::no_peak:
      return who + " in " + std::string(math_name(work.math)) + ", but " + gpu + " has no " +
             std::string(math_name(work.math)) + " peak; give [hardware] tflops = { " +
             std::string(math_name(work.math)) + " = <dense TFLOP/s> }";
    case TimeStatus::no_link:
      return who + ", " + (work.collective == MEMPLAN_COLLECTIVE_ALL_REDUCE || work.collective == MEMPLAN_COLLECTIVE_ALL_GATHER || work.collective == MEMPLAN_COLLECTIVE_ALL_TO_ALL ? "an " : "a ") + std::string(collective_name(work.collective)) + " over " + std::to_string(work.ranks) +
             " GPUs, but " + gpu + " has no " +
             (estimate.scenario.hardware.performance.gpus_per_node <= 0
                  ? std::string("GPUs per node; give [hardware] gpus_per_node")
                  : std::string("bandwidth for the link it crosses; give [hardware] intra_node_gbs and inter_node_gbs"));
    case TimeStatus::no_bandwidth:
      return who + " bound by memory bandwidth, but " + gpu +
             " has no memory bandwidth; give [hardware] memory_bandwidth_gbs";
    default: return "";
  }
}

FitFacts fit_facts(const Estimate& estimate) {
  FitFacts facts;
  facts.cuda_total = estimate.scenario.hardware.memory_bytes;
  if (facts.cuda_total == 0) return facts;
  facts.gpu_memory = estimate.scenario.hardware.nominal_bytes;
  const Breakdown& b = estimate.breakdown;
  facts.has_gpu = true;
  facts.capacity = b.capacity(facts.cuda_total);
  facts.fits = b.peak <= facts.capacity;
  // Both are sizes, so neither is ever negative: one of them is zero.
  facts.headroom = facts.fits ? facts.capacity - b.peak : 0;
  facts.shortfall = facts.fits ? 0 : b.peak - facts.capacity;
  return facts;
}

std::vector<LimitRow> limit_rows(const ScenarioLimits& limits) {
  std::vector<LimitRow> rows;
  const bool solved_batch = limits.solved && limits.solved->variable == SizeVariable::micro_batch;
  const bool solved_length = limits.solved && limits.solved->variable == SizeVariable::seq_len;
  const std::optional<SizeLimit>& batch = solved_batch ? limits.solved : limits.max_micro_batch;
  const std::optional<SizeLimit>& length = solved_length ? limits.solved : limits.max_seq_len;
  if (batch) rows.push_back({"max_micro_batch", solved_batch, &*batch});
  if (length) rows.push_back({"max_seq_len", solved_length, &*length});
  return rows;
}

std::string model_source(const Scenario& scenario) {
  if (!scenario.model.preset.empty()) return scenario.model.preset;
  if (!scenario.model.hf_config.empty()) return scenario.model.hf_config;
  return "inline";
}

}  // namespace memplan
