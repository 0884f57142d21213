#include "memplan/core/task.hpp"

#include <algorithm>
#include <sstream>

#include "common/input_file.hpp"
#include "common/toml_guard.hpp"
#include "common/toml_reader.hpp"
#include "memplan/core/catalog.hpp"
#include "memplan/core/error.hpp"
#include "memplan/core/text.hpp"
#include "scenario/scenario_overrides.hpp"

namespace memplan {

namespace {

bool valid_option_name(const std::string& name) {
  if (name.empty() || name.size() > 32 || name[0] < 'a' || name[0] > 'z' || name.back() == '-') return false;
  return std::all_of(name.begin(), name.end(),
                     [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'; });
}

}  // namespace

const std::vector<std::string>& estimate_option_names() {
  static const std::vector<std::string> names = {
      "help",       "task",       "gpu",     "gpus",      "micro-batch", "seq-len",          "grad-accum",
      "precision",  "optimizer",  "framework", "set",      "format",      "check",            "print-scenario",
      "allow-unsigned"};
  return names;
}

TaskTemplate read_task(const std::string& file) {
  const std::string text = read_input_file(file, "task file");
  toml::table root;
  try {
    root = parse_toml(text, file);
  } catch (const toml::parse_error& error) {
    fail_at(location_of(file, error.source()), std::string(error.description()));
  }
  TomlReader top(root, file, "the task file");
  top.reject_unknown_keys({"task", "options"});
  const toml::table* task_table = root["task"].as_table();
  if (task_table == nullptr) fail_at(top.table_location(), "a task file needs a [task] table");
  TomlReader task(*task_table, file, "[task]");
  task.reject_unknown_keys({"name", "summary", "source", "default", "scenario"});
  TaskTemplate result;
  result.file = file;
  auto required = [&](const char* key) {
    std::optional<std::string> value = task.string(key);
    if (!value || value->empty()) fail_at(task.table_location(), std::string("[task] needs '") + key + "'");
    return *value;
  };
  result.name = required("name");
  if (!valid_option_name(result.name))
    task.fail_key("name", "must be 1 to 32 lower-case letters, digits and dashes, starting with a letter");
  result.summary = required("summary");
  result.source = required("source");
  result.scenario = required("scenario");
  result.is_default = task.boolean("default").value_or(false);

  // The scenario must parse, and leave to the command what the command gives.
  toml::table scenario;
  try {
    scenario = parse_toml(result.scenario, file + " [task] scenario");
  } catch (const toml::parse_error& error) {
    fail_at(task.value_location("scenario"), "the scenario does not parse: " + std::string(error.description()) +
                                                 " (line " + std::to_string(error.source().begin.line) +
                                                 " of the scenario)");
  }
  for (const char* given : {"name", "model", "hardware"})
    if (scenario.contains(given))
      fail_at(task.value_location("scenario"), std::string("the scenario sets '") + given +
                                                   "', which `memplan estimate` writes from its MODEL, --gpu and "
                                                   "--gpus; remove it");

  if (const toml::node* options = root.get("options")) {
    if (!options->is_table()) fail_at(location_of(file, options->source()), "'options' must be tables [options.NAME]");
    for (const auto& [name, node] : *options->as_table()) {
      TaskOption option;
      option.name = std::string(name.str());
      const std::string section = "[options." + option.name + "]";
      if (!node.is_table()) fail_at(location_of(file, node.source()), section + " must be a table with key and help");
      TomlReader reader(*node.as_table(), file, section);
      if (!valid_option_name(option.name))
        fail_at(reader.table_location(), section + ": an option name is lower-case letters, digits and dashes");
      const auto& taken = estimate_option_names();
      if (std::find(taken.begin(), taken.end(), option.name) != taken.end())
        fail_at(reader.table_location(), section + ": --" + option.name + " is an option of `memplan estimate` itself; "
                                         "name it otherwise");
      reader.reject_unknown_keys({"key", "help"});
      const std::optional<std::string> key = reader.string("key");
      const std::optional<std::string> help = reader.string("help");
      if (!key || key->empty() || !help || help->empty())
        fail_at(reader.table_location(), section + " needs 'key' (the scenario key it sets) and 'help'");
      option.key = *key;
      option.help = *help;
      result.options.push_back(std::move(option));
    }
  }
  return result;
}

std::vector<TaskTemplate> load_tasks(const std::filesystem::path& data_dir) {
  std::vector<TaskTemplate> tasks;
  std::error_code error;
  const std::filesystem::path folder = data_dir / "tasks";
  if (!std::filesystem::is_directory(folder, error)) return tasks;
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(folder, error))
    if (entry.is_regular_file() && entry.path().extension() == ".toml") files.push_back(entry.path().string());
  std::sort(files.begin(), files.end());
  const TaskTemplate* default_task = nullptr;
  for (const std::string& file : files) {
    TaskTemplate task = read_task(file);
    for (const TaskTemplate& earlier : tasks)
      if (earlier.name == task.name)
        throw Error(file + ": error: task '" + task.name + "' is also defined by " + earlier.file +
                    "; rename one of them");
    tasks.push_back(std::move(task));
  }
  for (const TaskTemplate& task : tasks) {
    if (!task.is_default) continue;
    if (default_task != nullptr)
      throw Error(task.file + ": error: task '" + task.name + "' and task '" + default_task->name + "' (" +
                  default_task->file + ") are both marked default = true; keep one");
    default_task = &task;
  }
  std::sort(tasks.begin(), tasks.end(), [](const TaskTemplate& a, const TaskTemplate& b) { return a.name < b.name; });
  return tasks;
}

std::string task_scenario_text(const TaskTemplate& task, const Catalog& catalog, const EstimateRequest& request) {
  toml::table root = parse_toml(task.scenario, task.file);  // read_task parsed it already
  root.insert_or_assign("name", request.model + " " + task.name);

  toml::table model;
  if (catalog.find_model(request.model) != nullptr) {
    model.insert_or_assign("preset", request.model);
  } else {
    std::error_code error;
    std::filesystem::path config(request.model);
    if (std::filesystem::is_directory(config, error)) config /= "config.json";
    if (!std::filesystem::is_regular_file(config, error))
      throw Error("memplan estimate: error: '" + request.model + "' is neither a model preset nor a config.json" +
                  (std::filesystem::is_directory(request.model, error) ? " (the folder holds no config.json)" : "") +
                  did_you_mean(request.model, catalog.model_names()) +
                  " `memplan presets` lists the presets; a Hugging Face model is its config.json or its folder.");
    model.insert_or_assign("hf_config", std::filesystem::absolute(config, error).lexically_normal().string());
  }
  root.insert_or_assign("model", std::move(model));

  if (catalog.find_gpu(request.gpu) == nullptr)
    throw Error("memplan estimate: error: --gpu '" + request.gpu + "' is not in the GPU catalog" +
                did_you_mean(request.gpu, catalog.gpu_names()) + " `memplan gpus` lists them.");
  toml::table hardware;
  hardware.insert_or_assign("gpu", request.gpu);
  if (request.gpus) hardware.insert_or_assign("count", *request.gpus);
  root.insert_or_assign("hardware", std::move(hardware));

  apply_overrides(root, request.overrides);
  std::ostringstream text;
  text << "# memplan estimate " << request.model << " --task " << task.name << " (" << task.file << ")\n" << root
       << "\n";
  return text.str();
}

}  // namespace memplan
