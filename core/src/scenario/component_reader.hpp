// Reads component tables ([precision], [[strategy]], ...) into ComponentSpec:
// `use` and every other key as a located plugin option. Shared by scenarios
// and framework profiles, whose tables have the same shape.
#pragma once

#include <string>
#include <vector>

#include "memplan/core/component.hpp"
#include "common/toml_reader.hpp"

namespace memplan {

std::vector<OptionValue> read_options(const toml::table& table, const std::string& file, const std::string& section);
ComponentSpec read_component(const toml::table& table, int32_t kind, const std::string& file,
                             const std::string& section);
// The [[strategy]] tables of `root`, appended to `out`; `suffix` ends each
// section name in messages (e.g. " of framework 'x'").
void read_strategies(const toml::table& root, const std::string& file, const std::string& suffix,
                     std::vector<ComponentSpec>& out);

}  // namespace memplan
