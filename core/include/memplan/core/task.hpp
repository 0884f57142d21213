// Question templates for `memplan estimate MODEL --task NAME` (issue 13): a
// task is a scenario without its model and hardware (a fine-tuning recipe, a
// serving setup), plus command-line options that set its keys (a task may
// bind --tp to one of its strategies' size). Tasks are data, shipped
// beside the plugins they name (plugins/tasks/<name>/task.toml, installed as
// <prefix>/share/memplan/tasks/<name>.toml), so the core names no plugin and
// a team adds its own questions by adding a file. Format: docs/estimate-command.md.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace memplan {

class Catalog;

struct TaskOption {
  std::string name;  // the command-line option, without "--"
  std::string key;   // the scenario key it sets, as --set names it ("strategy.1.size")
  std::string help;
};

struct TaskTemplate {
  std::string name;
  std::string summary;
  std::string source;    // where its defaults come from
  std::string file;
  bool is_default = false;  // the task of `memplan estimate MODEL` without --task
  std::string scenario;  // TOML: top-level keys and tables, without name, [model] and [hardware]
  std::vector<TaskOption> options;
};

// The command's own options, which a task may not redefine.
const std::vector<std::string>& estimate_option_names();

// Reads one task file; Error at file:line:column for anything malformed.
TaskTemplate read_task(const std::string& file);
// Every <data_dir>/tasks/*.toml, sorted by name; none when the folder is
// missing. Error when two tasks share a name or more than one is the default.
std::vector<TaskTemplate> load_tasks(const std::filesystem::path& data_dir);

// A question of `memplan estimate`: which model, on which GPUs, with which keys set.
struct EstimateRequest {
  std::string model;  // a preset name, a config.json, or a folder holding one
  std::string gpu;    // a catalog GPU
  std::optional<int64_t> gpus;  // [hardware] count; none: the layout's world size is not checked
  std::vector<std::string> overrides;  // "key.path=value", as `memplan run --set` takes them
};

// The scenario the request asks about, as TOML text that `memplan run` reads:
// the task's scenario with name, [model] and [hardware] added and the
// overrides applied. Error for a model that is neither a preset nor a
// config.json, a GPU not in the catalog, or a malformed override.
std::string task_scenario_text(const TaskTemplate& task, const Catalog& catalog, const EstimateRequest& request);

}  // namespace memplan
