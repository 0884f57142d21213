#include "estimate_command.hpp"

#include <boost/program_options.hpp>

#include <algorithm>
#include <cstdint>
#include <iostream>
#include <optional>

#include "memplan/core/catalog.hpp"
#include "memplan/core/error.hpp"
#include "memplan/core/install_layout.hpp"
#include "memplan/core/report.hpp"
#include "memplan/core/scenario.hpp"
#include "memplan/core/task.hpp"
#include "memplan/core/text.hpp"
#include "scenario_report.hpp"
#include "terminal_output.hpp"

namespace memplan::cli {

namespace po = boost::program_options;

namespace {

constexpr int kExitDoesNotFit = 3;
constexpr const char* kDefaultGpu = "h100-sxm-80gb";

// The --task value, read before the options are declared: a task's own
// options depend on which task it is. Without one, the task marked default.
std::string task_argument(const std::vector<std::string>& args, const std::vector<TaskTemplate>& tasks) {
  std::string name;
  for (const TaskTemplate& task : tasks)
    if (task.is_default) name = task.name;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--task" && i + 1 < args.size()) name = args[i + 1];
    if (args[i].rfind("--task=", 0) == 0) name = args[i].substr(7);
  }
  return name;
}

void print_usage(const po::options_description& options, const std::vector<TaskTemplate>& tasks) {
  std::cout << "usage: memplan estimate MODEL [--task NAME] [options]\n\n"
               "MODEL is a model preset (memplan presets), a Hugging Face config.json, or a folder holding one.\n"
               "The task gives the scenario (plugins/tasks/<name>/task.toml); the report is memplan run's.\n\n"
               "tasks:\n";
  for (const TaskTemplate& task : tasks)
    print_line(std::cout, "  " + task.name + "\t" + task.summary + (task.is_default ? " (the default)" : ""));
  std::cout << "\n" << options;
}

}  // namespace

int estimate_command(const std::vector<std::string>& args) {
  const InstallLayout layout = layout_beside(current_executable());
  // Read before the options are (the tasks' options depend on the catalog's tasks): --allow-unsigned by hand.
  const Catalog catalog =
      load_catalog(layout, std::find(args.begin(), args.end(), "--allow-unsigned") != args.end());
  const std::vector<TaskTemplate> tasks = load_tasks(layout.data_dir);
  const std::string task_name = task_argument(args, tasks);
  const auto task = std::find_if(tasks.begin(), tasks.end(), [&](const TaskTemplate& t) { return t.name == task_name; });
  if (task == tasks.end()) {
    std::vector<std::string> names;
    for (const TaskTemplate& known : tasks) names.push_back(known.name);
    if (task_name.empty()) {
      print_line(std::cerr, "memplan: error: no task is marked default = true; name one with --task (tasks: " +
                                (names.empty() ? std::string("none installed") : join_alternatives(names, ", ")) + ")");
      return 2;
    }
    print_line(std::cerr, "memplan: error: no task named '" + task_name + "'" + did_you_mean(task_name, names) +
                              " Tasks: " + (names.empty() ? std::string("none installed") : join_alternatives(names, ", ")) +
                              " (memplan estimate --help says what each asks).");
    return 2;
  }

  po::options_description options("estimate options");
  options.add_options()("help,h", "show help")(
      "task", po::value<std::string>()->default_value(task->name), "the question: one of the tasks above")(
      "gpu", po::value<std::string>()->default_value(kDefaultGpu), "a GPU of the catalog (memplan gpus)")(
      "gpus", po::value<int64_t>(), "GPU count; the strategies' layout must use exactly this many")(
      "micro-batch", po::value<std::string>(), "micro-batch (serving: concurrent sequences), or max")(
      "seq-len", po::value<std::string>(), "tokens per sequence, or max")(
      "grad-accum", po::value<std::string>(), "micro-batches per optimizer step")(
      "precision", po::value<std::string>(), "the precision plugin (memplan plugins)")(
      "optimizer", po::value<std::string>(), "the optimizer plugin")(
      "framework", po::value<std::string>(), "a framework profile (memplan plugins lists them)")(
      "set", po::value<std::vector<std::string>>(), "key.path=value: set any scenario key, after the options")(
      "format,f", po::value<std::string>()->default_value("table"), "table, json, csv, markdown or html")(
      "check", "exit with status 3 when the job does not fit")(
      "print-scenario", "print the scenario instead of the estimate (a file memplan run reads)")(
      "allow-unsigned", "load installed bundles that are unsigned or signed by keys you do not trust");
  po::options_description task_options("options of task '" + task->name + "'");
  for (const TaskOption& option : task->options)
    task_options.add_options()(option.name.c_str(), po::value<std::string>(),
                               (option.help + " (sets " + option.key + ")").c_str());
  po::options_description hidden;
  hidden.add_options()("model", po::value<std::string>());
  po::options_description all;
  all.add(options).add(task_options).add(hidden);
  po::positional_options_description positional;
  positional.add("model", 1);
  po::variables_map vm;
  po::store(po::command_line_parser(args).options(all).positional(positional).run(), vm);
  po::notify(vm);
  if (vm.count("help")) {
    po::options_description shown;
    shown.add(options).add(task_options);
    print_usage(shown, tasks);
    return 0;
  }
  if (!vm.count("model")) {
    print_line(std::cerr, "memplan: error: `memplan estimate` needs a model, e.g. memplan estimate llama-2-7b "
                          "(memplan presets lists them; a config.json or its folder works too)");
    return 2;
  }
  const std::string format_name = vm["format"].as<std::string>();
  const auto format = parse_report_format(format_name);
  if (!format) {
    print_line(std::cerr, "memplan: error: unknown --format '" + format_name + "'; use table, json, csv, markdown or html");
    return 2;
  }

  EstimateRequest request;
  request.model = vm["model"].as<std::string>();
  request.gpu = vm["gpu"].as<std::string>();
  if (vm.count("gpus")) {
    request.gpus = vm["gpus"].as<int64_t>();
    if (*request.gpus < 1) {
      print_line(std::cerr, "memplan: error: --gpus must be at least 1, got " + std::to_string(*request.gpus));
      return 2;
    }
  }
  // Options become --set overrides, in this order; --set itself comes last and wins.
  const std::pair<const char*, const char*> keys[] = {
      {"micro-batch", "batch.micro_batch"}, {"seq-len", "batch.seq_len"}, {"grad-accum", "batch.grad_accum"},
      {"precision", "precision.use"},       {"optimizer", "optimizer.use"}, {"framework", "framework.use"}};
  for (const auto& [option, key] : keys)
    if (vm.count(option)) request.overrides.push_back(std::string(key) + "=" + vm[option].as<std::string>());
  for (const TaskOption& option : task->options)
    if (vm.count(option.name)) request.overrides.push_back(option.key + "=" + vm[option.name].as<std::string>());
  if (vm.count("set"))
    for (const std::string& set : vm["set"].as<std::vector<std::string>>()) request.overrides.push_back(set);

  const std::string text = task_scenario_text(*task, catalog, request);
  if (vm.count("print-scenario")) {
    std::cout << text;
    return 0;
  }
  const bool check = vm.count("check") > 0;
  // Errors point into the built scenario: say where to see it.
  const std::string source = "memplan estimate " + request.model;
  auto located = [&](const Error& error) {
    const std::string what = error.what();
    if (what.rfind(source + ":", 0) != 0) throw;
    return Error(what + " (the line and column of the scenario --print-scenario prints)");
  };
  std::optional<Scenario> scenario;
  ScenarioReport report;
  try {
    scenario.emplace(parse_scenario(text, source, catalog));
    for (const std::string& warning : scenario->warnings) print_line(std::cerr, warning);
    report = report_scenario(*scenario, layout, *format, vm.count("allow-unsigned") > 0);
  } catch (const Error& error) {
    throw located(error);
  }
  std::cout << report.text;
  if (check && !report.fits) {
    std::cout.flush();
    print_line(std::cerr, "memplan: " + scenario->name + " does not fit (--check): exit status 3");
    return kExitDoesNotFit;
  }
  return 0;
}

}  // namespace memplan::cli
