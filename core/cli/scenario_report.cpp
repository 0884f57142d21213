#include "scenario_report.hpp"

#include <iostream>
#include <sstream>

#include "memplan/bundle/bundle.hpp"
#include "memplan/core/estimator.hpp"
#include "memplan/core/limits.hpp"
#include "terminal_output.hpp"

namespace memplan::cli {

PluginLoadOptions cli_load_options(bool allow_unsigned) {
  PluginLoadOptions options;
  options.installed = bundle::installed_bundles_source(allow_unsigned);
  options.index_dir = plugin_index_dir_from_environment();
  return options;
}

Catalog load_catalog(const InstallLayout& layout, bool allow_unsigned) {
  std::vector<std::string> warnings;
  Catalog catalog = bundle::load_catalog_with_bundles(layout.data_dir, allow_unsigned, warnings);
  for (const std::string& warning : warnings) print_line(std::cerr, warning);
  return catalog;
}

void print_warnings(const PluginRegistry& registry) {
  for (const std::string& diagnostic : registry.diagnostics()) print_line(std::cerr, "memplan: warning: " + diagnostic);
}

ScenarioReport report_scenario(const Scenario& scenario, const InstallLayout& layout, ReportFormat format,
                               bool allow_unsigned) {
  PluginRegistry registry;
  load_plugins(registry, layout, &scenario, cli_load_options(allow_unsigned));
  print_warnings(registry);
  Estimator estimator(scenario, registry);
  const ScenarioLimits limits = evaluate_with_limits(estimator);
  std::ostringstream report;
  write_report(report, estimator.estimate(), limits, format);
  return ScenarioReport{report.str(), estimator.fits()};
}

}  // namespace memplan::cli
