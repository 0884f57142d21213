// Reading the HTML report back in the tests: its chart bars (each with its
// exact size in data-bytes) and the tags it uses, from memplan's own output
// or from the DOM a browser rendered of it.
#pragma once

#include <cctype>
#include <cstdint>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

namespace memplan::testing {

// One section's bars: "components/weights" or "timeline/forward" -> bytes.
using Bars = std::map<std::string, uint64_t>;

// The value of attribute `name` in one tag's text, or "" when absent.
inline std::string attribute(const std::string& tag, const std::string& name) {
  const std::regex pattern("\\s" + name + "=\"([^\"]*)\"");
  std::smatch match;
  return std::regex_search(tag, match, pattern) ? match[1].str() : std::string();
}

// The bars of each <section class="estimate"> in `html`, in page order;
// attributes are read one by one, so their order in the tag does not matter
// (a browser's serialization keeps it, but need not).
inline std::vector<Bars> section_bars(const std::string& html) {
  std::vector<Bars> sections;
  static const std::regex tags("<section[^>]*>|<rect[^>]*>");
  for (auto it = std::sregex_iterator(html.begin(), html.end(), tags); it != std::sregex_iterator(); ++it) {
    const std::string tag = it->str();
    if (tag.rfind("<section", 0) == 0) {
      sections.emplace_back();
      continue;
    }
    const std::string chart = attribute(tag, "data-chart");
    if (chart.empty() || sections.empty()) continue;
    const std::string key = chart + "/" + attribute(tag, chart == "components" ? "data-role" : "data-phase");
    sections.back()[key] = std::stoull(attribute(tag, "data-bytes"));
  }
  return sections;
}

// The capacity line's bytes in each section (0 when a section has none).
inline std::vector<uint64_t> section_capacities(const std::string& html) {
  std::vector<uint64_t> capacities;
  static const std::regex tags("<section[^>]*>|<line[^>]*class=\"capacity\"[^>]*>");
  for (auto it = std::sregex_iterator(html.begin(), html.end(), tags); it != std::sregex_iterator(); ++it) {
    const std::string tag = it->str();
    if (tag.rfind("<section", 0) == 0)
      capacities.push_back(0);
    else if (!capacities.empty())
      capacities.back() = std::stoull(attribute(tag, "data-bytes"));
  }
  return capacities;
}

// The tag names the page opens or closes that are not in the writer's own
// set: any one means a name from a file reached the page unescaped.
inline std::set<std::string> foreign_tags(const std::string& html) {
  static const std::set<std::string> known = {"html", "head", "meta", "title", "style", "body", "h1", "h2", "h3",
                                              "section", "span", "ul", "li", "code", "p", "table", "tr", "th", "td",
                                              "svg", "text", "rect", "line", "footer", "sup"};
  std::set<std::string> foreign;
  for (size_t at = html.find('<'); at != std::string::npos; at = html.find('<', at + 1)) {
    if (html.compare(at, 4, "<!--") == 0 || html.compare(at, 9, "<!DOCTYPE") == 0) continue;
    size_t start = at + 1;
    if (start < html.size() && html[start] == '/') ++start;
    size_t end = start;
    while (end < html.size() && (std::isalnum(static_cast<unsigned char>(html[end])) != 0)) ++end;
    const std::string name = html.substr(start, end - start);
    if (!known.count(name)) foreign.insert(name.empty() ? html.substr(at, 12) : name);
  }
  return foreign;
}

}  // namespace memplan::testing
