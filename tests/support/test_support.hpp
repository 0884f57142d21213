// Test helpers: evaluate scenario text through the built plugins, capture
// errors, run the CLI.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "memplan/core/breakdown.hpp"
#include "memplan/core/catalog.hpp"
#include "memplan/core/estimator.hpp"
#include "memplan/core/plugin_registry.hpp"
#include "memplan/core/scenario.hpp"

namespace memplan::testing {

std::string plugin_dir();  // build/lib/memplan/plugins
std::string data_dir();    // build/share/memplan
std::string source_dir();  // the repository
std::string validation_case(const std::string& id);  // the text of validation/<id>.toml
std::string cli_path();    // build/bin/memplan

const Catalog& catalog();
const PluginRegistry& builtin_plugins();  // loaded once per test binary

// A parsed scenario and its estimator, evaluated once.
class Evaluation {
 public:
  explicit Evaluation(std::string_view toml, const std::string& file_name = "scenario.toml");
  const Scenario& scenario() const { return *scenario_; }
  const Breakdown& breakdown() const { return estimator_->breakdown(); }
  const Estimator& estimator() const { return *estimator_; }
  Estimator& estimator() { return *estimator_; }
  uint64_t component(int32_t role) const { return breakdown().components[static_cast<size_t>(role)]; }
  // Sum of bytes of the GPU items named `display_name` with `role`.
  uint64_t item_bytes(std::string_view display_name, int32_t role) const;
  // Sum of bytes of the items named `name` (as plugins name them) with `lifetime` (MEMPLAN_LIFETIME_*).
  uint64_t item_bytes_at(std::string_view name, int32_t lifetime) const;
  // The lifetime (MEMPLAN_LIFETIME_*) of the first item named `name`, or -1 when there is none.
  int32_t item_lifetime(std::string_view name) const;

 private:
  std::unique_ptr<Scenario> scenario_;
  std::unique_ptr<Estimator> estimator_;
};

Evaluation evaluate(std::string_view toml, const std::string& file_name = "scenario.toml");

// The value the report's details give for `key` (strings come quoted, as the
// JSON writes them), or "" when the plugins report none.
std::string report_detail(const Evaluation& evaluation, std::string_view key);

// The scenario as the papers and seeds count it: `toml` with [framework] use =
// "paper" inserted before its first table. Tests that reproduce a published
// table or a hand derivation of the model's tensors use it, and so state what
// they leave out: the CUDA context, the allocator's reserve and the NCCL
// buffers that memplan's default (device) view adds. Two lines are inserted,
// so located errors move down by two lines. A scenario that has a
// [framework] table is returned unchanged.
std::string paper(std::string_view toml);
// evaluate(paper(toml)): the model's tensors only, as papers and hand derivations count them.
Evaluation evaluate_paper(std::string_view toml, const std::string& file_name = "scenario.toml");

// The message of the memplan::Error that loading or evaluating `toml` throws,
// or "" if it succeeds.
std::string error_of(std::string_view toml, const std::string& file_name = "scenario.toml");

struct CommandResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};
// Runs `command` with /bin/sh, capturing stdout and stderr.
CommandResult run_command(const std::string& command);
// Runs the memplan CLI with `arguments` (shell-quoted by the caller).
CommandResult run_cli(const std::string& arguments);

// A temporary folder removed when the object goes away.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }
  std::string write(const std::string& name, std::string_view content) const;  // returns the file path

 private:
  std::string path_;
};

constexpr double kGB = 1e9;                       // decimal, as in the ZeRO paper and seeds 001-004
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;  // binary, as Korthikanti et al. and seed 000 use "GB"

}  // namespace memplan::testing
