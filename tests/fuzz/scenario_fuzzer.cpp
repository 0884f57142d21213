// Fuzz target: scenario text to an estimate, through the entry points
// `memplan run FILE` uses (core/cli/main.cpp, run_command): parse_scenario,
// which sends the text through parse_toml's guard before toml++ sees it (the
// guard that keeps toml++ 3.3.0 from its unreachable branch on some Unicode
// whitespace, toml_guard.hpp), the built-in plugins, evaluate_with_limits,
// and every report format; then the same text as a validation case's header
// (parse_validation_case, with its date reader, core/src/report/run_date.cpp).
//
// A memplan::Error is the normal answer to bad input (a refusal at
// file:line:column, which the CLI prints with exit status 1). Any other
// exception would reach the CLI's catch-all and print without a location,
// so it is a defect, as is every sanitizer report.
//
// Not done per input, unlike the CLI: loading plugins from the scenario's
// [plugins] search_path and installed bundles. The loader tests cover that
// path, and a fuzzer that opened the libraries an input names would run
// arbitrary code; the built-ins are loaded once (fuzz_host.hpp).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "defect.hpp"
#include "fuzz_host.hpp"
#include "memplan/core/error.hpp"
#include "memplan/core/estimator.hpp"
#include "memplan/core/limits.hpp"
#include "memplan/core/report.hpp"
#include "memplan/core/scenario.hpp"
#include "memplan/core/framework.hpp"
#include "memplan/core/validation.hpp"
#include "report/run_date.hpp"

namespace {

// Relative paths in the input (hf_config) resolve against examples/, where
// the example seeds live and the generated hf_config seeds point from
// (tests/fuzz/make_seeds.cmake). The file itself is never read or written.
constexpr const char* kScenarioFile = MEMPLAN_FUZZ_SOURCE_DIR "/examples/fuzz-input.toml";

void estimate_and_report(std::string_view text) {
  const memplan::fuzz::FuzzHost& host = memplan::fuzz::fuzz_host();
  const memplan::Scenario scenario = memplan::parse_scenario(text, kScenarioFile, host.catalog);
  memplan::Estimator estimator(scenario, host.registry);
  const memplan::ScenarioLimits limits = memplan::evaluate_with_limits(estimator);
  for (memplan::ReportFormat format : {memplan::ReportFormat::table, memplan::ReportFormat::json,
                                       memplan::ReportFormat::csv, memplan::ReportFormat::markdown,
                                       memplan::ReportFormat::html}) {
    std::ostringstream out;
    memplan::write_report(out, estimator, limits, format);
    // docs/json-output.md: --format json prints one JSON object, whatever the
    // scenario's names and numbers are.
    if (format == memplan::ReportFormat::json) {
      const nlohmann::json parsed = nlohmann::json::parse(out.str(), nullptr, false);
      if (parsed.is_discarded() || !parsed.is_object())
        memplan::fuzz::defect("--format json printed something that is not one JSON object:\n" + out.str());
    }
    // docs/html-report.md: names are text, never markup; the page is one section.
    if (format == memplan::ReportFormat::html) {
      const std::string page = out.str();
      if (page.find("<script") != std::string::npos || memplan::html_sections(page).find("<section") !=
                                                            memplan::html_sections(page).rfind("<section"))
        memplan::fuzz::defect("--format html let markup from the scenario into the page:\n" + page);
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  memplan::fuzz::fuzz_host();  // fail at start, not at the first input, when the build is incomplete
  return 0;
}

// The same text as a validation case's header (memplan validate reads the leading comment block:
// measured_bytes, quantity, framework, run_date, tolerance_percent, and the first date the prose gives).
// A date it reads is a real day, not after today, on a line of the text.
void read_as_validation_case(std::string_view text) {
  const memplan::ValidationCase test = memplan::parse_validation_case(text, kScenarioFile);
  if (test.run_date.empty()) return;
  if (!memplan::is_iso_date(test.run_date))
    memplan::fuzz::defect("the header's date '" + test.run_date + "' is not a day (from '" + test.run_date_text + "')");
  if (test.run_date > memplan::today_iso())
    memplan::fuzz::defect("the header's date " + test.run_date + " is after today");
  const auto lines = static_cast<int>(std::count(text.begin(), text.end(), '\n')) + 1;
  if (test.run_date_line < 1 || test.run_date_line > lines)
    memplan::fuzz::defect("the header's date is on line " + std::to_string(test.run_date_line) + " of " +
                          std::to_string(lines));
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  memplan::fuzz::refusal_is_an_error(estimate_and_report, text);
  memplan::fuzz::refusal_is_an_error(read_as_validation_case, text);
  return 0;
}
