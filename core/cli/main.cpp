// memplan command line: `memplan run FILE [--format ...]`, `memplan plugins`.
// Exit status: 0 success, 1 an estimate or plugin error, 2 a usage error.
#include <boost/program_options.hpp>
#include <iostream>
#include <string>
#include <vector>

#include "memplan/core/catalog.hpp"
#include "memplan/core/error.hpp"
#include "memplan/core/estimator.hpp"
#include "memplan/core/install_layout.hpp"
#include "memplan/core/limits.hpp"
#include "memplan/core/report.hpp"

namespace po = boost::program_options;

namespace {

constexpr const char* kUsage =
    "usage: memplan <command> [options]\n"
    "\n"
    "commands:\n"
    "  run FILE [--format table|json|csv|markdown]   estimate the per-GPU memory of a scenario\n"
    "  plugins                                       list every plugin found: kind, name, version, library\n"
    "\n"
    "options:\n"
    "  -h, --help      show this help (or `memplan <command> --help`)\n"
    "  --version       print the version\n"
    "\n"
    "Plugins are searched beside the binary (../lib/memplan/plugins), then in MEMPLAN_PLUGIN_PATH\n"
    "(folders separated by ':'), then in the scenario's [plugins] search_path.\n";

void print_warnings(const memplan::PluginRegistry& registry) {
  for (const std::string& diagnostic : registry.diagnostics()) std::cerr << "memplan: warning: " << diagnostic << "\n";
}

int run_command(const std::vector<std::string>& args) {
  po::options_description options("run options");
  options.add_options()("help,h", "show help")("format,f", po::value<std::string>()->default_value("table"),
                                               "table, json, csv or markdown")("file", po::value<std::string>(),
                                                                                "scenario file");
  po::positional_options_description positional;
  positional.add("file", 1);
  po::variables_map vm;
  po::store(po::command_line_parser(args).options(options).positional(positional).run(), vm);
  po::notify(vm);
  if (vm.count("help")) {
    std::cout << "usage: memplan run FILE [--format table|json|csv|markdown]\n\n" << options;
    return 0;
  }
  if (!vm.count("file")) {
    std::cerr << "memplan: error: `memplan run` needs a scenario file, e.g. memplan run examples/llama2-7b-single-gpu.toml\n";
    return 2;
  }
  const std::string format_name = vm["format"].as<std::string>();
  const auto format = memplan::parse_report_format(format_name);
  if (!format) {
    std::cerr << "memplan: error: unknown --format '" << format_name << "'; use table, json, csv or markdown\n";
    return 2;
  }
  const memplan::InstallLayout layout = memplan::layout_beside(memplan::current_executable());
  const memplan::Catalog catalog = memplan::Catalog::load(layout.data_dir);
  const memplan::Scenario scenario = memplan::load_scenario(vm["file"].as<std::string>(), catalog);
  memplan::PluginRegistry registry;
  memplan::load_plugins(registry, layout, &scenario);
  print_warnings(registry);
  memplan::Estimator estimator(scenario, registry);
  const memplan::ScenarioLimits limits = memplan::evaluate_with_limits(estimator);
  memplan::write_report(std::cout, estimator, limits, *format);
  return 0;
}

int plugins_command(const std::vector<std::string>& args) {
  if (!args.empty()) {
    if (args[0] == "--help" || args[0] == "-h") {
      std::cout << "usage: memplan plugins\n\nLists every plugin found; exit status 1 if a library was rejected.\n";
      return 0;
    }
    std::cerr << "memplan: error: `memplan plugins` takes no arguments, got '" << args[0] << "'\n";
    return 2;
  }
  const memplan::InstallLayout layout = memplan::layout_beside(memplan::current_executable());
  memplan::PluginRegistry registry;
  memplan::load_plugins(registry, layout, nullptr);
  for (int32_t kind : {MEMPLAN_KIND_PRECISION, MEMPLAN_KIND_OPTIMIZER, MEMPLAN_KIND_ACTIVATIONS,
                       MEMPLAN_KIND_STRATEGY}) {
    for (const auto& plugin : registry.plugins()) {
      if (plugin->descriptor.kind != kind) continue;
      std::cout << memplan::kind_name(kind) << "\t" << plugin->name << "\t" << plugin->version << "\t" << plugin->path
                << "\n";
    }
  }
  print_warnings(registry);
  return registry.diagnostics().empty() ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  try {
    if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
      std::cout << kUsage;
      return args.empty() ? 2 : 0;
    }
    if (args[0] == "--version") {
      std::cout << "memplan " << MEMPLAN_VERSION << " (plugin ABI " << MEMPLAN_ABI_MAJOR << "." << MEMPLAN_ABI_MINOR
                << ")\n";
      return 0;
    }
    const std::string command = args[0];
    args.erase(args.begin());
    if (command == "run") return run_command(args);
    if (command == "plugins") return plugins_command(args);
    std::cerr << "memplan: error: unknown command '" << command << "'; the commands are run and plugins (see --help)\n";
    return 2;
  } catch (const memplan::Error& error) {
    std::cerr << error.what() << "\n";
    return 1;
  } catch (const po::error& error) {
    std::cerr << "memplan: error: " << error.what() << " (see memplan --help)\n";
    return 2;
  } catch (const std::exception& error) {
    std::cerr << "memplan: error: " << error.what() << "\n";
    return 1;
  }
}
