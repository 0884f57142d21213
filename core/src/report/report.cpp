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

FitFacts fit_facts(const Estimate& estimate) {
  FitFacts facts;
  facts.gpu_memory = estimate.scenario.hardware.memory_bytes;
  if (facts.gpu_memory == 0) return facts;
  const Breakdown& b = estimate.breakdown;
  facts.has_gpu = true;
  facts.capacity = b.capacity(facts.gpu_memory);
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
