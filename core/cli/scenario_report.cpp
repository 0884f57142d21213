#include "scenario_report.hpp"

#include <iostream>
#include <sstream>

#include "memplan/bundle/bundle.hpp"
#include "memplan/core/estimator.hpp"
#include "memplan/core/limits.hpp"
#include "terminal_output.hpp"

namespace memplan::cli {

ScenarioReport report_scenario(const Scenario& scenario, const InstallLayout& layout, ReportFormat format,
                               bool allow_unsigned) {
  PluginRegistry registry;
  PluginLoadOptions load_options;
  load_options.installed = bundle::installed_bundles_source(allow_unsigned);
  load_options.index_dir = plugin_index_dir_from_environment();
  load_plugins(registry, layout, &scenario, load_options);
  for (const std::string& diagnostic : registry.diagnostics()) print_line(std::cerr, "memplan: warning: " + diagnostic);
  Estimator estimator(scenario, registry);
  const ScenarioLimits limits = evaluate_with_limits(estimator);
  std::ostringstream report;
  write_report(report, estimator.estimate(), limits, format);
  return ScenarioReport{report.str(), estimator.fits()};
}

}  // namespace memplan::cli
