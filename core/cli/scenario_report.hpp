// What `memplan run` does with one scenario once it is read, shared with
// `memplan estimate`: load the plugins it needs (with the plugin index),
// print their warnings, evaluate with the limits, and write the report.
#pragma once

#include <string>

#include "memplan/core/install_layout.hpp"
#include "memplan/core/report.hpp"
#include "memplan/core/scenario.hpp"

namespace memplan::cli {

struct ScenarioReport {
  std::string text;  // the report in the asked format
  bool fits = true;
};

// How every command loads plugins: the installed bundles (unsigned ones only
// with --allow-unsigned) and the user's plugin index.
PluginLoadOptions cli_load_options(bool allow_unsigned);
// The registry's rejections, one "memplan: warning:" line each, on stderr.
void print_warnings(const PluginRegistry& registry);

ScenarioReport report_scenario(const Scenario& scenario, const InstallLayout& layout, ReportFormat format,
                               bool allow_unsigned);

}  // namespace memplan::cli
