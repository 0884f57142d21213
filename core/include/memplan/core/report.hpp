// Reporters: the same estimate as a table for people, JSON for scripts
// (schema memplan.estimate/1, see docs/json-output.md), CSV, Markdown, and
// a self-contained HTML page with charts (docs/html-report.md).
#pragma once

#include <optional>
#include <ostream>
#include <string>
#include <string_view>

#include "memplan/core/estimate.hpp"
#include "memplan/core/estimator.hpp"
#include "memplan/core/limits.hpp"

namespace memplan {

enum class ReportFormat { table, json, csv, markdown, html };

std::optional<ReportFormat> parse_report_format(std::string_view name);

// Writes one evaluation (Estimator::estimate()) and its limits, which come
// from evaluate_with_limits(), which also left the estimator evaluated.
void write_report(std::ostream& out, const Estimate& estimate, const ScenarioLimits& limits, ReportFormat format);
// The same for the estimator's last evaluation.
void write_report(std::ostream& out, const Estimator& estimator, const ScenarioLimits& limits, ReportFormat format);

// HTML: write_report writes a whole page holding one <section> per scenario.
// A page for several scenarios is html_page_begin(title), then the
// html_sections() of each scenario's page, then html_page_end().
std::string html_page_begin(std::string_view title);
std::string html_page_end();
// The sections of a page that write_report wrote (empty for any other text).
std::string_view html_sections(std::string_view page);

}  // namespace memplan
