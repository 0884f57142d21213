#include "memplan/core/validation.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "memplan/core/breakdown.hpp"
#include "memplan/core/error.hpp"
#include "memplan/core/estimator.hpp"
#include "memplan/core/framework.hpp"
#include "report/run_date.hpp"
#include "memplan/core/plugin_registry.hpp"
#include "memplan/core/scenario.hpp"
#include "memplan/core/text.hpp"
#include "common/input_file.hpp"

namespace memplan {
namespace {

std::string trimmed(std::string_view text) {
  const size_t first = text.find_first_not_of(" \t\r");
  if (first == std::string_view::npos) return "";
  const size_t last = text.find_last_not_of(" \t\r");
  return std::string(text.substr(first, last - first + 1));
}

// `text` in a column of `width`, left-aligned (pad) or right-aligned (left).
std::string pad(const std::string& text, size_t width) { return text + std::string(width - std::min(width, text.size()), ' '); }
std::string left(const std::string& text, size_t width) { return std::string(width - std::min(width, text.size()), ' ') + text; }

// The median of a non-empty list.
double median_of(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

std::string percent(double value, bool sign) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, sign ? "%+.1f %%" : "%.1f %%", value);
  return buffer;
}

std::string gib(uint64_t bytes) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.2f", static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0));
  return buffer;
}

}  // namespace

std::vector<std::string> validation_files(const std::vector<std::string>& paths) {
  std::vector<std::string> files;
  for (const std::string& path : paths) {
    std::error_code error;
    if (std::filesystem::is_directory(path, error)) {
      std::vector<std::string> found;
      for (const auto& entry : std::filesystem::directory_iterator(path))
        if (entry.is_regular_file() && entry.path().extension() == ".toml") found.push_back(entry.path().string());
      std::sort(found.begin(), found.end());
      if (found.empty()) throw Error(path + ": error: the folder holds no validation case (*.toml)");
      files.insert(files.end(), found.begin(), found.end());
    } else if (std::filesystem::is_regular_file(path, error)) {
      files.push_back(path);
    } else {
      throw Error(path + ": error: no such validation case or folder");
    }
  }
  return files;
}

ValidationCase read_validation_case(const std::string& file) {
  return parse_validation_case(read_input_file(file, "validation case"), file);
}

ValidationCase parse_validation_case(std::string_view text, const std::string& file) {
  std::istringstream in{std::string(text)};
  ValidationCase test;
  test.file = file;
  test.id = std::filesystem::path(file).stem().string();
  bool has_measured = false, has_quantity = false;
  std::string prose_date, prose_date_text;  // the first date the prose gives (a run_date line wins)
  int prose_date_line = 0;
  std::string line;
  int number = 0;
  std::map<std::string, int> machine_lines;  // machine key -> the line that gave it
  // The leading comment block only: the first non-comment line ends it.
  while (std::getline(in, line)) {
    ++number;
    const std::string text = trimmed(line);
    if (text.empty()) continue;
    if (text[0] != '#') break;
    const std::string body = trimmed(std::string_view(text).substr(1));
    const size_t equals = body.find('=');
    const std::string key = equals == std::string::npos ? "" : trimmed(std::string_view(body).substr(0, equals));
    const bool machine_line = key == "measured_bytes" || key == "quantity" || key == "framework" ||
                              key == "tolerance_percent" || key == "near_capacity" || key == "run_date";
    if (!machine_line && prose_date.empty())
      if (const std::optional<RunDate> date = first_date_in(body)) {
        prose_date = date->day;
        prose_date_text = date->text;
        prose_date_line = number;
      }
    if (equals == std::string::npos) continue;
    const std::string value = trimmed(std::string_view(body).substr(equals + 1));
    const SourceLocation where{file, static_cast<uint32_t>(number), 1};
    // A machine key given twice would let a stale line decide (the last one read): refuse it.
    if (machine_line) {
      const auto [first, inserted] = machine_lines.emplace(key, number);
      if (!inserted)
        fail_at(where, "'" + key + "' is given twice in the case's leading comment block (first on line " +
                           std::to_string(first->second) + "): keep one");
    }
    if (key == "measured_bytes") {
      char* end = nullptr;
      const unsigned long long bytes = std::strtoull(value.c_str(), &end, 10);
      if (value.empty() || *end != '\0' || bytes == 0)
        fail_at(where, "measured_bytes must be a positive whole number of bytes, got '" + value + "'");
      test.measured = bytes;
      has_measured = true;
    } else if (key == "quantity") {
      const std::optional<int> quantity = quantity_from_name(value);
      if (!quantity) fail_at(where, "quantity must be allocated, reserved or device, got '" + value + "'");
      test.quantity = *quantity;
      has_quantity = true;
    } else if (key == "framework") {
      test.framework = value;
      // The words before any '(' (free text): a name of one to three words, then perhaps a version.
      std::istringstream words(value.substr(0, value.find('(')));
      for (std::string word; words >> word;) test.framework_words.push_back(word);
      test.framework_name = test.framework_words.empty() ? "" : test.framework_words.front();
    } else if (key == "run_date") {
      // The run's day, stated: it wins over any date the prose gives.
      if (!is_iso_date(value)) fail_at(where, "run_date must be the day of the run, YYYY-MM-DD, got '" + value + "'");
      // A measured run's day is past: a later one is a typing error, and would date the estimate after every
      // version the profiles know.
      if (const std::string today = today_iso(); value > today)
        fail_at(where, "run_date " + value + " is after today (" + today + "); give the day the run was made");
      test.run_date = value;
      test.run_date_text = value;
      test.run_date_line = number;
    } else if (key == "tolerance_percent") {
      char* end = nullptr;
      const double tolerance = std::strtod(value.c_str(), &end);
      if (value.empty() || *end != '\0' || !(tolerance > 0) || tolerance > 100)
        fail_at(where, "tolerance_percent must be a number in (0, 100], got '" + value + "'");
      test.tolerance_percent = tolerance;
    }
  }
  if (test.run_date.empty() && !prose_date.empty()) {
    test.run_date = prose_date;
    test.run_date_text = prose_date_text;
    test.run_date_line = prose_date_line;
  }
  if (!has_measured || !has_quantity)
    fail_at(SourceLocation{file, 1, 1}, std::string("a validation case needs '# measured_bytes = N' and '# quantity = "
                                                    "allocated|reserved|device' in its leading comment block") +
                                            (has_measured ? " (quantity is missing)" : " (measured_bytes is missing)"));
  return test;
}

ValidationResult validate_case(const ValidationCase& test, const Catalog& catalog, const InstallLayout& layout,
                               const PluginLoadOptions& options) {
  ValidationResult result;
  result.test = test;
  try {
    Scenario scenario = load_scenario(test.file, catalog);
    // A case states the framework that ran it; a scenario without a [framework] table would
    // otherwise be estimated under the default profile, whatever ran it.
    if (!scenario.framework.from_scenario && !test.framework_name.empty()) {
      // The longest run of leading words, joined by '-', that a profile answers to: "Hugging Face
      // Transformers 4.38" tries hugging-face-transformers, hugging-face, then hugging.
      const FrameworkProfile* profile = nullptr;
      std::string name;
      std::string word;  // the word after the name: perhaps its version
      for (size_t n = std::min<size_t>(3, test.framework_words.size()); n >= 1 && profile == nullptr; --n) {
        name.clear();
        for (size_t i = 0; i < n; ++i) name += (i ? "-" : "") + test.framework_words[i];
        profile = catalog.find_framework(name);
        word = n < test.framework_words.size() ? test.framework_words[n] : "";
      }
      if (profile != nullptr) {
        // A version starts with its number ("4.38", "v0.19.5") or the profile's own spelling
        // ("core_r0.13.0"); a word such as "Stage-3" is more of the name.
        std::string version;
        const size_t v = !word.empty() && (word[0] == 'v' || word[0] == 'V') ? 1 : 0;
        const size_t digit = profile->version.find_first_of("0123456789");
        const std::string prefix = digit == std::string::npos ? "" : profile->version.substr(0, digit);
        if (word.size() > v && std::isdigit(static_cast<unsigned char>(word[v])))
          version = word.substr(v);
        else if (!prefix.empty() && word.rfind(prefix, 0) == 0 && word.size() > prefix.size() &&
                 std::isdigit(static_cast<unsigned char>(word[prefix.size()])))
          version = word;
        // A version counts on the profile's name or an alias of the same software; software built
        // on it (a library, a recipe collection) numbers its versions its own way.
        std::string dropped;
        if (!profile->shares_versions(name) && !version.empty()) {
          dropped = "; the version '" + version + "' is " + name + "'s, not " + profile->name +
                    "'s, so the profile's latest stands (write '# framework = " + profile->name +
                    " <version>' or a [framework] table to give one)";
          version.clear();
        }
        // A day or a month in place of the version ("<name> 2023-07"), where the profile's versions
        // are not years and all give their day: the run's date (the scenario reader's rule for a
        // version written so), the header's day when it falls in that month (it says more than the
        // month's last day).
        std::string line_date;
        if (const DayInVersion written = day_written_as_version(version, *profile);
            !written.day.empty() && profile->dates_place_versions()) {
          line_date = version.size() == 7 && test.run_date.rfind(version + "-", 0) == 0 ? test.run_date : written.day;
          version.clear();
        }
        std::vector<std::string> overrides{"framework.use=\"" + profile->name + "\""};
        if (!version.empty()) overrides.push_back("framework.version=\"" + version + "\"");
        // No version: the run had the behaviour of its day, when the header dates it and the
        // profile dates its versions; else the profile's latest.
        const bool dated =
            line_date.empty() && version.empty() && !test.run_date.empty() && profile->dates_place_versions();
        if (dated) overrides.push_back("framework.date=\"" + test.run_date + "\"");
        if (!line_date.empty()) overrides.push_back("framework.date=\"" + line_date + "\"");
        scenario = load_scenario(test.file, catalog, overrides);
        result.notes.push_back(
            "no [framework] table: estimated under profile '" + profile->name + "'" +
            (version.empty() ? "" : " " + version) + ", which its '# framework = " + test.framework + "' line names" +
            dropped +
            (dated ? "; no version: as of " + test.run_date +
                         (test.run_date_text == test.run_date
                              ? ", the date its header gives (line " + std::to_string(test.run_date_line) + ")"
                              : ", the date its header gives first (line " + std::to_string(test.run_date_line) +
                                    ": '" + test.run_date_text + "')") +
                         ", so " + profile->name + " " + scenario.framework.version
                   : "") +
            (line_date.empty() ? ""
                               : "; its date: as of " + line_date + ", so " + profile->name + " " +
                                     scenario.framework.version));
      } else if (!scenario.framework.name.empty()) {
        result.notes.push_back("'# framework = " + test.framework + "' names no framework profile (known: " +
                               join_alternatives(catalog.framework_names(), ", ") + "); estimated under the default profile '" +
                               scenario.framework.name + "'. Add a [framework] table to say what ran it");
      }
    }
    // What the scenario reader warns about (a generic value read the framework's way, ...) is said here too.
    for (const std::string& warning : scenario.warnings) result.warnings.push_back(warning);
    PluginRegistry registry;
    load_plugins(registry, layout, &scenario, options);
    Estimator estimator(scenario, registry);
    const Breakdown& breakdown = estimator.evaluate();
    // The table names the profile memplan modelled the run with.
    if (!scenario.framework.name.empty()) result.test.framework = scenario.framework.name;
    result.estimate = breakdown.quantities[static_cast<size_t>(test.quantity)].peak;
  } catch (const Error& error) {
    result.failure = error.what();
    return result;
  }
  const double measured = static_cast<double>(test.measured);
  result.error_percent = (static_cast<double>(result.estimate) - measured) / measured * 100.0;
  result.within = std::fabs(result.error_percent) <= test.tolerance_percent;
  return result;
}

void write_validation_notes(std::ostream& out, const std::vector<ValidationResult>& results) {
  for (const ValidationResult& r : results) {
    for (const std::string& note : r.notes) out << r.test.file << ": note: " << note << "\n";
    for (const std::string& warning : r.warnings) out << warning << "\n";
  }
}

void write_validation_table(std::ostream& out, const std::vector<ValidationResult>& results, bool by_framework) {
  size_t id_width = 2, framework_width = 9;
  for (const ValidationResult& r : results) {
    id_width = std::max(id_width, r.test.id.size());
    framework_width = std::max(framework_width, r.test.framework.size());
  }
  out << pad("id", id_width) << "  " << pad("framework", framework_width) << "  " << pad("quantity", 9)
      << left("measured GiB", 12) << "  " << left("estimate GiB", 12) << "  " << left("error", 9) << "  "
      << left("tolerance", 9) << "\n";
  for (const ValidationResult& r : results) {
    out << pad(r.test.id, id_width) << "  " << pad(r.test.framework, framework_width) << "  "
        << pad(std::string(quantity_name(r.test.quantity)), 9) << left(gib(r.test.measured), 12) << "  ";
    if (!r.failure.empty()) {
      out << "FAILED: " << r.failure << "\n";
      continue;
    }
    out << left(gib(r.estimate), 12) << "  " << left(percent(r.error_percent, true), 9) << "  "
        << left(percent(r.test.tolerance_percent, false), 9) << (r.within ? "" : "  OUTSIDE") << "\n";
  }
  if (by_framework) out << "\n" << validation_by_framework(results) << "\n";
  out << validation_summary(results) << "\n";
}

std::string validation_by_framework(const std::vector<ValidationResult>& results) {
  struct Group {
    size_t cases = 0, below = 0, within_ten = 0;
    std::vector<double> signed_errors;
  };
  std::map<std::string, Group> groups;  // by name: the same order on every run
  size_t name_width = std::string("framework").size();
  for (const ValidationResult& r : results) {
    Group& group = groups[r.test.framework];  // the table's column: the profile the case ran under
    name_width = std::max(name_width, r.test.framework.size());
    ++group.cases;
    if (!r.failure.empty()) continue;
    group.signed_errors.push_back(r.error_percent);
    if (r.error_percent < 0) ++group.below;
    if (std::fabs(r.error_percent) <= 10.0) ++group.within_ten;
  }
  std::string text = pad("framework", name_width) + "  " + left("cases", 5) + "  " + left("median |error|", 14) + "  " +
                     left("median error", 12) + "  " + left("below", 5) + "  " + left("within 10 %", 11) + "\n";
  for (const auto& [name, group] : groups) {
    text += pad(name, name_width) + "  " + left(std::to_string(group.cases), 5) + "  ";
    if (group.signed_errors.empty()) {
      text += "none estimated\n";
      continue;
    }
    std::vector<double> magnitudes;
    for (double error : group.signed_errors) magnitudes.push_back(std::fabs(error));
    text += left(percent(median_of(magnitudes), false), 14) + "  " +
            left(percent(median_of(group.signed_errors), true), 12) + "  " + left(std::to_string(group.below), 5) +
            "  " + left(std::to_string(group.within_ten) + "/" + std::to_string(group.cases), 11) + "\n";
  }
  text.pop_back();  // the caller ends the block
  return text;
}

std::string validation_summary(const std::vector<ValidationResult>& results) {
  std::vector<double> errors;
  double worst = -1;
  std::string worst_id;
  size_t within_ten = 0, failed = 0;
  for (const ValidationResult& r : results) {
    if (!r.failure.empty()) {
      ++failed;
      continue;
    }
    const double error = std::fabs(r.error_percent);
    errors.push_back(error);
    if (error > worst) {
      worst = error;
      worst_id = r.test.id;
    }
    if (error <= 10.0) ++within_ten;
  }
  std::string line = "validation: " + std::to_string(results.size()) + " cases";
  if (errors.empty()) return line + ", none estimated";
  line += ", median |error| " + percent(median_of(errors), false) + ", max |error| " + percent(worst, false) + " (" + worst_id +
          "), within 10 %: " + std::to_string(within_ten) + "/" + std::to_string(results.size());
  if (failed > 0) line += ", failed: " + std::to_string(failed);
  return line;
}

}  // namespace memplan
