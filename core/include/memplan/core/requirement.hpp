// Versions and version requirements of installed plugin packages (bundles):
// "acme-optimizers>=1.2" in a scenario's [plugins] bundles, and the same
// rule when a bundle is installed or upgraded (docs/bundles.md).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace memplan {

// 1 to 4 dot-separated decimal numbers: "1", "1.2", "1.2.3". Missing parts
// compare as 0, so "1.2" == "1.2.0".
struct Version {
  std::vector<uint64_t> parts;
  std::string text;
};
std::optional<Version> parse_version(std::string_view text);
int compare_versions(const Version& a, const Version& b);  // <0, 0, >0

struct Requirement {
  std::string name;
  std::string op;  // "", ">=", ">", "==", "<", "<="; "" (a bare name) accepts any version
  Version version;
  std::string text;  // as written
};
// Parses `name[OP VERSION]` (spaces around OP allowed); on failure returns
// nullopt and sets `why` to what is wrong, e.g. "'=>' is not an operator".
std::optional<Requirement> parse_requirement(std::string_view text, std::string& why);
bool satisfies(const Version& installed, const Requirement& requirement);

// Bundle names follow the plugin name rule: 1 to 64 lower-case letters,
// digits and dashes, starting with a letter, not ending with a dash.
bool valid_bundle_name(std::string_view name);

}  // namespace memplan
