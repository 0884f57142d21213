// Validation against measured runs: `memplan validate [FOLDER|FILE ...]`.
//
// A case is a scenario file whose leading comment block carries machine-
// readable lines (docs/validation.md):
//   # measured_bytes = N            the published figure, in bytes
//   # quantity = allocated | reserved | device
//   # framework = NAME [VERSION]    the software that ran it: a case without a [framework]
//                                   table is estimated under the profile NAME answers to
//                                   (a profile's name or alias), at VERSION when given on the
//                                   profile's own name (a second word that starts with a number,
//                                   v and a number, or the profile's own version prefix)
//   # tolerance_percent = T         optional; the |error| the case must stay within (default 10)
// The estimate of the case's quantity is compared with the measurement.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "memplan/core/catalog.hpp"
#include "memplan/core/install_layout.hpp"

namespace memplan {

inline constexpr double kDefaultTolerancePercent = 10.0;

struct ValidationCase {
  std::string id;  // the file name without .toml
  std::string file;
  std::string framework;          // the framework line as written (after '=')
  std::string framework_name;     // its first word (validate_case tries up to three words, framework_words)
  std::vector<std::string> framework_words;  // its words before any '(': a name of up to three words, then a version
  // The first date its header's prose gives (first_date_in, report/run_date.hpp), the day the
  // run is taken to be from when the framework line names no version: "YYYY-MM-DD", the text
  // as written and its line; empty when the header gives none.
  std::string run_date;
  std::string run_date_text;
  int run_date_line = 0;
  int quantity = 2;  // Quantity (breakdown.hpp)
  uint64_t measured = 0;
  double tolerance_percent = kDefaultTolerancePercent;
};

struct ValidationResult {
  ValidationCase test;
  uint64_t estimate = 0;
  double error_percent = 0;  // (estimate - measured) / measured x 100
  bool within = false;       // |error| <= tolerance
  std::string failure;       // non-empty when the case could not be estimated
  std::vector<std::string> notes;     // how the framework line was read, when it decided or could not decide the profile
  std::vector<std::string> warnings;  // the scenario reader's warnings ("file:line:column: warning: ...")
};

// The case files named by `paths`: files as given, folders' *.toml in name order.
std::vector<std::string> validation_files(const std::vector<std::string>& paths);
// Reads the header of one case; throws Error (file:line) when a required line is missing or malformed.
ValidationCase read_validation_case(const std::string& file);
// The same for a case's text read elsewhere; `file` names it in messages and gives its id.
ValidationCase parse_validation_case(std::string_view text, const std::string& file);
// Estimates one case through the plugins found from `layout` (and the scenario's own search path).
// `options` adds installed packages (the command line passes the bundle store's).
ValidationResult validate_case(const ValidationCase& test, const Catalog& catalog, const InstallLayout& layout,
                               const PluginLoadOptions& options = {});
// Each result's notes as "FILE: note: ..." lines and its scenario warnings as they are, for
// standard error (the table and its last line stay parseable on standard output).
void write_validation_notes(std::ostream& out, const std::vector<ValidationResult>& results);
// The table, then one summary line; returns the results' summary figures through the stream only.
// With `by_framework`, a table per framework profile between them (validation_by_framework).
void write_validation_table(std::ostream& out, const std::vector<ValidationResult>& results,
                            bool by_framework = false);
// Per framework (the table's framework column: the profile each case ran under): cases, median |error|, median
// signed error, how many estimates are below the measurement, and within 10 %; failed cases count
// in `cases` only. One header line, then one line per framework in name order.
std::string validation_by_framework(const std::vector<ValidationResult>& results);
// "validation: N cases, median |error| X %, max |error| Y % (ID), within 10 %: K/N"
std::string validation_summary(const std::vector<ValidationResult>& results);

}  // namespace memplan
