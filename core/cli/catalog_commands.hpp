// `memplan presets`, `memplan gpus` and `memplan plugins NAME`: what a
// scenario can name, without reading error messages or source files.
#pragma once

#include <string>
#include <vector>

namespace memplan::cli {

int presets_command(const std::vector<std::string>& args);
int gpus_command(const std::vector<std::string>& args);
// One plugin in detail: kind, version, library, summary and every option with
// its type, default and help; and the framework profile of that name or alias
// (profile_detail.hpp), after the plugin when both answer to it. Exit status 1
// when neither does. `allow_unsigned` as for `memplan plugins`.
int plugin_detail_command(const std::string& name, bool allow_unsigned);

}  // namespace memplan::cli
