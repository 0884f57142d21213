// What `memplan run` does with one scenario once it is read, shared with
// `memplan estimate`: load the plugins it needs (with the plugin index),
// print their warnings, evaluate with the limits, and write the report.
#pragma once

#include <string>

#include "memplan/core/catalog.hpp"
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

// The catalog every command reads: the built-in data files and the catalog files of the installed bundles
// that load time accepts (unsigned ones only with --allow-unsigned); a refused bundle's files are left out
// with a "memplan: warning:" line on stderr naming the file and the fix.
Catalog load_catalog(const InstallLayout& layout, bool allow_unsigned);

ScenarioReport report_scenario(const Scenario& scenario, const InstallLayout& layout, ReportFormat format,
                               bool allow_unsigned);

}  // namespace memplan::cli
