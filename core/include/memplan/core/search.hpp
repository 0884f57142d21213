// The configuration search (`memplan search`, docs/search.md): a scenario's
// [search] table names axes, each a plugin option (or the micro-batch) with a
// list of values, and one option the search fills so that the layout uses
// every GPU. Every combination is evaluated through the estimator's fast path
// (set_option, set_grad_accum, evaluate_at), kept or rejected with its reason,
// ranked by an objective, and streamed as rows; the ranking and the Pareto
// front of memory against time are kept in memory flat in the number of
// configurations. The core names no plugin: axes are "<plugin>.<option>"
// strings the scenario gives.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "memplan/core/component.hpp"
#include "memplan/core/error.hpp"
#include "memplan/core/plugin_registry.hpp"
#include "memplan/core/scenario.hpp"

namespace memplan {

// One axis: a plugin option ("<plugin>.<option>"), the batch's micro_batch,
// or the hardware's GPU type or count ("hardware.gpu", "hardware.count").
struct SearchAxis {
  enum class Target { plugin, micro_batch, hardware_gpu, hardware_count };
  std::string key;                  // as the scenario spells it
  std::string plugin;               // empty for batch.micro_batch and the hardware axes
  std::string option;               // the option's key, or "micro_batch", "gpu", "count"
  std::vector<OptionValue> values;  // in the scenario's order
  SourceLocation location;
  Target target = Target::plugin;
};

enum class SearchObjective { time, memory, cost };

// One combination of the hardware axes: the scenario as `--set hardware.gpu=...`
// reads it (the catalog's figures for that GPU, the framework's defaults for
// it), with [hardware] count = `gpus`, and the price of its GPU-hour.
struct SearchHardware {
  std::string gpu;              // the catalog name ("" when the scenario names none)
  int64_t gpus = 0;             // the job's GPUs
  Scenario scenario;
  double usd_per_gpu_hour = 0;  // 0: not priced
};

struct SearchSpace {
  std::vector<SearchAxis> axes;
  std::optional<SearchAxis> fill;  // its values are computed: gpus / the world size of the other axes
  int64_t gpus = 0;                // the job's GPUs ([search] gpus, else [hardware] count)
  int64_t global_batch = 0;        // sequences per step; 0: keep the scenario's grad_accum
  SearchObjective objective = SearchObjective::time;
  int64_t top = 10;
  uint64_t combinations = 1;       // product of the axes' sizes
  // The hardware axes vary slowest (they come first in `axes`): one entry per
  // combination of their values, in index order; empty without hardware axes.
  std::vector<SearchHardware> hardware;
  uint64_t per_hardware = 1;       // combinations of the other axes: index / per_hardware is the hardware's
  double usd_per_gpu_hour = 0;     // the price without hardware axes ([search.usd_per_gpu_hour], else [budget])
  bool priced = false;             // every GPU the search runs on has a price: rows carry costs
  double budget_tokens = 0;        // [budget] tokens: rows carry the run's cost
};

// Reads the scenario file's [search] table, after the same --set overrides as
// the scenario (a search.* key changes it too); errors are located
// (file:line:column). Axes name options the plugins declare (`registry`).
// Hardware axes and [search.usd_per_gpu_hour] name GPUs of `catalog`; the
// overload without one refuses them.
SearchSpace read_search_space(const std::string& file, const Scenario& scenario, const PluginRegistry& registry,
                              const std::vector<std::string>& overrides = {});
SearchSpace read_search_space(const std::string& file, const Scenario& scenario, const PluginRegistry& registry,
                              const Catalog& catalog, const std::vector<std::string>& overrides = {});

// One evaluated configuration.
struct SearchRow {
  uint64_t index = 0;                 // in the enumeration: the last axis varies fastest
  std::vector<std::string> values;    // per axis, as text
  int64_t fill_value = 0;             // the filled option's value (0 without a fill axis)
  int64_t grad_accum = 0;
  enum class Status { fits, does_not_fit, invalid } status = Status::invalid;
  uint64_t peak_bytes = 0;            // the peak `fits` compares (0 when invalid)
  uint64_t capacity_bytes = 0;
  double step_seconds = 0;            // 0 when no time could be derived
  double tokens_per_second = 0;
  double mfu = 0;
  std::string reason;                 // why it does not fit or is invalid
  // With prices (SearchSpace::priced) and a step time, else 0: the price of a
  // GPU-hour of the row's GPU, the job's cost per million tokens (price x GPUs
  // x the hours a million tokens take) and, with [budget] tokens, the run's.
  double usd_per_gpu_hour = 0;
  double usd_per_million_tokens = 0;
  double run_usd = 0;
  bool pareto = false;                // on the front of peak memory against step time (set at the end)
};

std::string_view search_status_name(SearchRow::Status status);  // "fits", "does-not-fit", "invalid"

struct SearchOptions {
  int threads = 1;
  uint64_t shard = 0;         // this shard, 0-based
  uint64_t shards = 1;        // of so many: rows with index % shards == shard
  bool progress = false;      // a progress line on stderr
};

struct SearchSummary {
  uint64_t evaluated = 0;
  uint64_t fitting = 0;
  uint64_t does_not_fit = 0;
  uint64_t invalid = 0;
  std::vector<SearchRow> best;    // the top rows by the objective, fitting ones only
  std::vector<SearchRow> pareto;  // the front, by peak memory
  double seconds = 0;             // wall time of the sweep
};

// Runs the sweep. `sink` receives every row in index order (from one thread
// at a time); the summary keeps the best and the front.
SearchSummary run_search(const Scenario& scenario, const SearchSpace& space, const PluginRegistry& registry,
                         const SearchOptions& options, const std::function<void(const SearchRow&)>& sink);

// Rows as CSV (a header, then one line each) and back.
std::string search_csv_header(const SearchSpace& space);
std::string search_csv_line(const SearchRow& row);
// Reads rows written by search_csv_line (shards' outputs, for --merge); throws Error naming file:line.
std::vector<SearchRow> read_search_csv(const std::string& file, const std::string& header);

// Keeps the best and the front over rows in any order: what run_search does
// as rows arrive, and what --merge does over shards' rows.
class SearchRanking {
 public:
  SearchRanking(SearchObjective objective, int64_t top) : objective_(objective), top_(top) {}
  void add(const SearchRow& row);
  SearchSummary summary() const;  // best in order, front by memory

 private:
  bool better(const SearchRow& a, const SearchRow& b) const;
  SearchObjective objective_;
  int64_t top_;
  std::vector<SearchRow> best_;
  std::vector<SearchRow> front_;
  uint64_t evaluated_ = 0, fitting_ = 0, does_not_fit_ = 0, invalid_ = 0;
};

}  // namespace memplan
