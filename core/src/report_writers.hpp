// One writer per output format; report.cpp dispatches.
#pragma once

#include <ostream>

#include "memplan/core/estimator.hpp"
#include "memplan/core/limits.hpp"

namespace memplan {

void write_table(std::ostream& out, const Estimator& estimator, const ScenarioLimits& limits);
void write_json(std::ostream& out, const Estimator& estimator, const ScenarioLimits& limits);
void write_csv(std::ostream& out, const Estimator& estimator);
void write_markdown(std::ostream& out, const Estimator& estimator);

}  // namespace memplan
