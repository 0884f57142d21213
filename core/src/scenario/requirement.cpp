#include "memplan/core/requirement.hpp"

#include <algorithm>
#include <charconv>
#include <set>

namespace memplan {
namespace {

// The plugin-name rule, at most 64 characters (docs/bundles.md, "Bundle names and requirements").
constexpr size_t kMaxPackageName = 64;

}  // namespace

bool valid_bundle_name(std::string_view name) {
  if (name.empty() || name.size() > kMaxPackageName || name[0] < 'a' || name[0] > 'z' || name.back() == '-')
    return false;
  for (char c : name)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return false;
  return true;
}

std::optional<Version> parse_version(std::string_view text) {
  Version version;
  version.text = std::string(text);
  size_t start = 0;
  while (true) {
    size_t end = text.find('.', start);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view part = text.substr(start, end - start);
    uint64_t value = 0;
    if (part.empty() || part.size() > 9) return std::nullopt;
    auto [rest, error] = std::from_chars(part.data(), part.data() + part.size(), value);
    if (error != std::errc() || rest != part.data() + part.size()) return std::nullopt;
    version.parts.push_back(value);
    if (version.parts.size() > 4) return std::nullopt;
    if (end == text.size()) break;
    start = end + 1;
  }
  return version;
}

int compare_versions(const Version& a, const Version& b) {
  const size_t count = std::max(a.parts.size(), b.parts.size());
  for (size_t i = 0; i < count; ++i) {
    const uint64_t x = i < a.parts.size() ? a.parts[i] : 0;
    const uint64_t y = i < b.parts.size() ? b.parts[i] : 0;
    if (x != y) return x < y ? -1 : 1;
  }
  return 0;
}

std::optional<Requirement> parse_requirement(std::string_view text, std::string& why) {
  Requirement requirement;
  requirement.text = std::string(text);
  size_t i = 0;
  while (i < text.size() && ((text[i] >= 'a' && text[i] <= 'z') || (text[i] >= '0' && text[i] <= '9') ||
                             text[i] == '-'))
    ++i;
  requirement.name = std::string(text.substr(0, i));
  if (!valid_bundle_name(requirement.name)) {
    why = "'" + std::string(text) +
          "' does not start with a bundle name (lower-case letters, digits and dashes, starting with a letter)";
    return std::nullopt;
  }
  while (i < text.size() && text[i] == ' ') ++i;
  if (i == text.size()) return requirement;
  size_t op_end = i;
  while (op_end < text.size() && (text[op_end] == '<' || text[op_end] == '>' || text[op_end] == '=' ||
                                  text[op_end] == '!' || text[op_end] == '~' || text[op_end] == '^'))
    ++op_end;
  requirement.op = std::string(text.substr(i, op_end - i));
  static const std::set<std::string> kOperators{">=", ">", "==", "<", "<="};
  if (!kOperators.contains(requirement.op)) {
    why = "'" + std::string(text) + "' has " +
          (requirement.op.empty() ? "'" + std::string(text.substr(i)) + "' after the name, which does not start with"
                                  : "'" + requirement.op + "', which is not") +
          " an operator; write NAME, or NAME followed by >=, >, ==, < or <= and a version, e.g. \"" +
          requirement.name + ">=1.2\"";
    return std::nullopt;
  }
  size_t version_start = op_end;
  while (version_start < text.size() && text[version_start] == ' ') ++version_start;
  size_t version_end = text.size();
  while (version_end > version_start && text[version_end - 1] == ' ') --version_end;
  auto version = parse_version(text.substr(version_start, version_end - version_start));
  if (!version) {
    why = "'" + std::string(text) + "' has '" + std::string(text.substr(version_start)) +
          "' where a version belongs (1 to 4 numbers separated by dots, e.g. 1.2.0)";
    return std::nullopt;
  }
  requirement.version = *version;
  return requirement;
}

bool satisfies(const Version& installed, const Requirement& requirement) {
  if (requirement.op.empty()) return true;
  const int order = compare_versions(installed, requirement.version);
  if (requirement.op == ">=") return order >= 0;
  if (requirement.op == ">") return order > 0;
  if (requirement.op == "==") return order == 0;
  if (requirement.op == "<") return order < 0;
  return order <= 0;  // "<="
}

}  // namespace memplan
