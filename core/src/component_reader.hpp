// Reads component tables ([precision], [[strategy]], ...) into ComponentSpec:
// `use` and every other key as a located plugin option. Shared by scenarios
// and framework profiles, whose tables have the same shape.
#pragma once

#include <string>
#include <vector>

#include "memplan/core/component.hpp"
#include "toml_reader.hpp"

namespace memplan {

std::vector<OptionValue> read_options(const toml::table& table, const std::string& file, const std::string& section);
ComponentSpec read_component(const toml::table& table, int32_t kind, const std::string& file,
                             const std::string& section);

}  // namespace memplan
