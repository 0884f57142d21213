#include "memplan/core/report.hpp"

#include "report_writers.hpp"

namespace memplan {

std::optional<ReportFormat> parse_report_format(std::string_view name) {
  if (name == "table") return ReportFormat::table;
  if (name == "json") return ReportFormat::json;
  if (name == "csv") return ReportFormat::csv;
  if (name == "markdown") return ReportFormat::markdown;
  return std::nullopt;
}

void write_report(std::ostream& out, const Estimator& estimator, const ScenarioLimits& limits, ReportFormat format) {
  switch (format) {
    case ReportFormat::table: write_table(out, estimator, limits); break;
    case ReportFormat::json: write_json(out, estimator, limits); break;
    case ReportFormat::csv: write_csv(out, estimator); break;
    case ReportFormat::markdown: write_markdown(out, estimator); break;
  }
}

}  // namespace memplan
