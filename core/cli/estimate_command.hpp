// `memplan estimate MODEL [--task NAME] [options]`: a question by model name,
// without a scenario file. The task (plugins/tasks/<name>/task.toml; without
// --task, the one marked default) gives the scenario; the options give the model, the GPUs, the
// batch, the plugins and the task's own keys; the report is `memplan run`'s.
#pragma once

#include <string>
#include <vector>

namespace memplan::cli {

int estimate_command(const std::vector<std::string>& args);

}  // namespace memplan::cli
