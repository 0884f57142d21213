// Reporters: the same estimate as a table for people, JSON for scripts
// (schema memplan.estimate/1, see docs/json-output.md), CSV and Markdown.
#pragma once

#include <optional>
#include <ostream>
#include <string_view>

#include "memplan/core/estimate.hpp"
#include "memplan/core/estimator.hpp"
#include "memplan/core/limits.hpp"

namespace memplan {

enum class ReportFormat { table, json, csv, markdown };

std::optional<ReportFormat> parse_report_format(std::string_view name);

// Writes one evaluation (Estimator::estimate()) and its limits, which come
// from evaluate_with_limits(), which also left the estimator evaluated.
void write_report(std::ostream& out, const Estimate& estimate, const ScenarioLimits& limits, ReportFormat format);
// The same for the estimator's last evaluation.
void write_report(std::ostream& out, const Estimator& estimator, const ScenarioLimits& limits, ReportFormat format);

}  // namespace memplan
