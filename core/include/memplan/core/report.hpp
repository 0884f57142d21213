// Reporters: the same estimate as a table for people, JSON for scripts
// (schema memplan.estimate/1, see docs/json-output.md), CSV and Markdown.
#pragma once

#include <optional>
#include <ostream>
#include <string_view>

#include "memplan/core/estimator.hpp"
#include "memplan/core/limits.hpp"

namespace memplan {

enum class ReportFormat { table, json, csv, markdown };

std::optional<ReportFormat> parse_report_format(std::string_view name);

// `limits` comes from evaluate_with_limits(), which also left `estimator` evaluated.
void write_report(std::ostream& out, const Estimator& estimator, const ScenarioLimits& limits, ReportFormat format);

}  // namespace memplan
