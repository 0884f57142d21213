// `memplan run FILE --set key.path=value`: command-line values that replace or
// add keys of the scenario before it is read, so a sweep or a quick question
// does not need a copy of the file per variant.
#pragma once

#include <toml++/toml.h>

#include <string>
#include <vector>

namespace memplan {

// Applies each "key.path=value" to `root`, in order (a later one wins).
// Keys are dotted bare keys; a number after an array of tables picks its
// element, counted from 1 as error messages count them ("strategy.2.size").
// The value is TOML (4, 1.5e9, true, "text", ["a", "b"]); anything that is
// not valid TOML is taken as a string, so model.preset=llama-2-7b works
// unquoted. Values keep a source named after the override, so an error in
// one is reported at "--set key.path=value:1:N". Throws Error for a malformed
// override or a path that runs into a value that is not a table.
void apply_overrides(toml::table& root, const std::vector<std::string>& overrides);

}  // namespace memplan
