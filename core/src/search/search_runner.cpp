// The sweep of `memplan search`: every combination of the axes through the
// estimator's fast path, on several threads, rows delivered in index order.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>

#include <memplan/conventions.h>

#include "memplan/core/estimator.hpp"
#include "memplan/core/search.hpp"

namespace memplan {
namespace {

constexpr uint64_t kChunk = 256;  // indices a thread takes at a time

// An error message without the "file: error: " the scenario's errors start with.
std::string reason_of(const std::string& message, const std::string& file) {
  const std::string prefix = file + ":";
  std::string text = message;
  if (text.rfind(prefix, 0) == 0) {
    const size_t error = text.find("error: ");
    if (error != std::string::npos) text = text.substr(error + 7);
  }
  return text;
}

OptionValue integer_value(const std::string& key, int64_t value) {
  OptionValue option;
  option.key = key;
  option.type = OptionValue::Type::integer;
  option.integer = value;
  return option;
}

// One thread's estimator and what it last set, so that only changed options are set again.
class Worker {
 public:
  // One scenario per combination of the hardware axes (one without them), each with its price.
  Worker(std::vector<const Scenario*> scenarios, std::vector<double> prices, const SearchSpace& space,
         const PluginRegistry& registry)
      : scenarios_(std::move(scenarios)), prices_(std::move(prices)), space_(space), registry_(registry) {
    use_hardware(0);
  }

  SearchRow evaluate(uint64_t index) {
    SearchRow row;
    row.index = index;
    if (const size_t hardware = index / space_.per_hardware; hardware != hardware_ && !space_.hardware.empty())
      use_hardware(hardware);
    std::vector<size_t> choice(space_.axes.size());
    for (size_t a = space_.axes.size(); a-- > 0;) {
      choice[a] = index % space_.axes[a].values.size();
      index /= space_.axes[a].values.size();
    }
    for (size_t a = 0; a < choice.size(); ++a) row.values.push_back(option_value_text(space_.axes[a].values[choice[a]]));
    try {
      bool layout_changed = false;
      int64_t micro_batch = scenario().micro_batch;
      for (size_t a = 0; a < choice.size(); ++a)
        if (space_.axes[a].target == SearchAxis::Target::micro_batch) micro_batch = space_.axes[a].values[choice[a]].integer;
      // Each plugin's changed options are set together, with one create(): setting them one by one
      // would pass through combinations of new and old values the plugin may refuse.
      std::fill(plugin_done_.begin(), plugin_done_.end(), false);
      for (size_t a = 0; a < choice.size(); ++a) {
        if (space_.axes[a].plugin.empty() || applied_[a] == static_cast<int64_t>(choice[a])) continue;
        const size_t plugin = plugin_of_[a];
        if (plugin_done_[plugin]) continue;  // set with an earlier axis of the same plugin
        plugin_done_[plugin] = true;
        // A plugin refuses the same options the same way: a refusal seen before is the row's reason at
        // once (no create(), no exception; most of a wide sweep's invalid layouts repeat).
        const std::string key = refusal_key(plugin, choice);
        if (auto refused = refusals_.find(key); refused != refusals_.end()) {
          row.reason = refused->second;
          return row;
        }
        std::vector<OptionValue> values;
        for (size_t b = 0; b < choice.size(); ++b)
          if (!space_.axes[b].plugin.empty() && plugin_of_[b] == plugin &&
              applied_[b] != static_cast<int64_t>(choice[b]))
            values.push_back(space_.axes[b].values[choice[b]]);
        try {
          estimator_->set_options(plugin, std::move(values));
        } catch (const Error& error) {
          // The plugin keeps its configuration (Estimator::set_options): applied_ stays true.
          refusals_.emplace(key, reason_of(error.what(), scenario().file));
          throw;
        }
        for (size_t b = 0; b < choice.size(); ++b)
          if (!space_.axes[b].plugin.empty() && plugin_of_[b] == plugin) applied_[b] = static_cast<int64_t>(choice[b]);
        layout_changed = true;
      }
      if (layout_changed || !layout_known_) fill_layout();
      row.fill_value = fill_;
      if (!layout_error_.empty()) {
        row.reason = layout_error_;
        return row;
      }
      int64_t grad_accum = scenario().grad_accum;
      if (space_.global_batch > 0) {
        const int64_t per_step = micro_batch * data_ranks_;
        if (space_.global_batch % per_step != 0) {
          row.reason = "global batch " + std::to_string(space_.global_batch) + " is not a multiple of micro_batch " +
                       std::to_string(micro_batch) + " x " + std::to_string(data_ranks_) + " data ranks";
          return row;
        }
        grad_accum = space_.global_batch / per_step;
      }
      row.grad_accum = grad_accum;
      estimator_->set_grad_accum(grad_accum);
      const Breakdown& b = estimator_->evaluate_at(micro_batch, scenario().seq_len);
      row.peak_bytes = b.peak;
      row.capacity_bytes = b.capacity(scenario().hardware.memory_bytes);
      if (b.time.status == TimeStatus::timed) {
        row.step_seconds = b.time.seconds;
        row.tokens_per_second = b.time.tokens_per_second;
        row.mfu = b.time.mfu;
        // The job's cost as `memplan run` prices a run (run_budget): a million tokens, and [budget] tokens.
        if (price_ > 0 && row.tokens_per_second > 0) {
          row.usd_per_gpu_hour = price_;
          row.usd_per_million_tokens = run_budget(1e6, row.tokens_per_second, b.world_size, price_).usd;
          row.run_usd = run_budget(space_.budget_tokens, row.tokens_per_second, b.world_size, price_).usd;
        }
      }
      if (scenario().hardware.memory_bytes > 0 && b.peak > row.capacity_bytes) {
        row.status = SearchRow::Status::does_not_fit;
        char text[96];
        std::snprintf(text, sizeof text, "peak %.2f GiB exceeds %.2f GiB by %.2f GiB",
                      static_cast<double>(b.peak) / 1073741824.0, static_cast<double>(row.capacity_bytes) / 1073741824.0,
                      static_cast<double>(b.peak - row.capacity_bytes) / 1073741824.0);
        row.reason = text;
      } else {
        row.status = SearchRow::Status::fits;
      }
    } catch (const Error& error) {
      row.status = SearchRow::Status::invalid;
      row.reason = reason_of(error.what(), scenario().file);
    }
    return row;
  }

 private:
  // What a plugin's create() sees with the axes at `choice`: its options (its
  // axes' values, the fill when it is the plugin's) and the workload.
  // create() reads nothing else.
  std::string refusal_key(size_t plugin, const std::vector<size_t>& choice) const {
    std::string key = std::to_string(plugin);
    for (size_t b = 0; b < space_.axes.size(); ++b)
      if (!space_.axes[b].plugin.empty() && plugin_of_[b] == plugin) key += "," + std::to_string(choice[b]);
    if (space_.fill && fill_plugin_ == plugin) key += ",fill=" + std::to_string(fill_option_);
    key += ";" + std::to_string(estimator_->micro_batch()) + "," + std::to_string(estimator_->seq_len()) + "," +
           std::to_string(estimator_->grad_accum()) + "," + std::to_string(gpu_count_);
    return key;
  }

  size_t plugin_index(const SearchAxis& axis) const {
    // The first component the scenario lists with that `use`, by its place in phase order.
    for (size_t i = 0; i < estimator_->plugins().size(); ++i)
      if (estimator_->plugins()[i].component->use == axis.plugin) return i;
    throw Error(scenario().file + ": error: [search] names plugin '" + axis.plugin + "', which the scenario does not use");
  }

  // The fill axis's value: the GPUs over the world size the other axes make.
  void fill_layout() {
    layout_known_ = true;
    layout_error_.clear();
    fill_ = 0;
    try {
      if (space_.fill) {
        estimator_->set_option(fill_plugin_, integer_value(space_.fill->option, 1));
        fill_option_ = 1;
        estimator_->set_gpu_count(0);
        gpu_count_ = 0;
        const Breakdown& probe = estimator_->evaluate_at(scenario().micro_batch, scenario().seq_len);
        const int64_t world = probe.world_size;
        const int64_t data_before = estimator_->attribute_int(MEMPLAN_ATTR_RANKS_DATA).value_or(1);
        if (gpus_ % world != 0) {
          layout_error_ = "the other axes lay the job out on " + std::to_string(world) + " GPUs, which does not divide " +
                          std::to_string(gpus_);
          return;
        }
        fill_ = gpus_ / world;
        estimator_->set_option(fill_plugin_, integer_value(space_.fill->option, fill_));
        fill_option_ = fill_;
        estimator_->set_gpu_count(gpus_);
        gpu_count_ = gpus_;
        // Whether the filled option sets the data ranks: learned once, on the first layout that fills more than
        // one (at a fill of 1 both readings give the same data ranks).
        if (!fill_scales_data_known_ && fill_ > 1) {
          const Breakdown& after = estimator_->evaluate_at(scenario().micro_batch, scenario().seq_len);
          (void)after;
          fill_scales_data_ = estimator_->attribute_int(MEMPLAN_ATTR_RANKS_DATA).value_or(1) != data_before;
          fill_scales_data_known_ = true;
        }
        data_ranks_ = fill_scales_data_ ? data_before * fill_ : data_before;
      } else {
        estimator_->set_gpu_count(gpus_);
        gpu_count_ = gpus_;
        estimator_->evaluate_at(scenario().micro_batch, scenario().seq_len);
        data_ranks_ = estimator_->attribute_int(MEMPLAN_ATTR_RANKS_DATA).value_or(1);
      }
    } catch (const Error& error) {
      layout_error_ = reason_of(error.what(), scenario().file);
      layout_known_ = false;  // try again at the next combination
    }
  }

  const Scenario& scenario() const { return *scenarios_[hardware_]; }

  // A fresh estimator on the scenario of that hardware combination: nothing the last one set carries over.
  void use_hardware(size_t hardware) {
    hardware_ = hardware;
    estimator_.reset();
    estimator_ = std::make_unique<Estimator>(*scenarios_[hardware], registry_);
    gpus_ = space_.hardware.empty() ? space_.gpus : space_.hardware[hardware].gpus;
    price_ = prices_[hardware];
    plugin_of_.clear();
    for (const SearchAxis& axis : space_.axes)
      plugin_of_.push_back(axis.target == SearchAxis::Target::plugin ? plugin_index(axis) : 0);
    if (space_.fill) fill_plugin_ = plugin_index(*space_.fill);
    plugin_done_.assign(estimator_->plugins().size(), false);
    applied_.assign(space_.axes.size(), -1);
    layout_known_ = false;
    layout_error_.clear();
    fill_ = 0;
    data_ranks_ = 1;
    fill_scales_data_ = false;
    fill_scales_data_known_ = false;
    fill_option_ = -1;
    gpu_count_ = -1;
    refusals_.clear();
  }

  std::vector<const Scenario*> scenarios_;
  std::vector<double> prices_;
  const SearchSpace& space_;
  const PluginRegistry& registry_;
  size_t hardware_ = 0;
  int64_t gpus_ = 0;
  double price_ = 0;
  std::unique_ptr<Estimator> estimator_;
  std::vector<size_t> plugin_of_;
  std::vector<int64_t> applied_;  // per axis, the value index the plugin holds (-1: the scenario's value)
  size_t fill_plugin_ = 0;
  bool layout_known_ = false;
  std::string layout_error_;
  int64_t fill_ = 0;
  int64_t data_ranks_ = 1;
  bool fill_scales_data_ = false;
  bool fill_scales_data_known_ = false;
  int64_t fill_option_ = -1;  // the fill option's value as last set (-1: the scenario's)
  int64_t gpu_count_ = -1;    // the GPU count as last set (-1: the scenario's)
  std::unordered_map<std::string, std::string> refusals_;  // refusal_key -> the plugin's reason
  std::vector<bool> plugin_done_;  // per plugin, within one evaluate(): its changed options are set
};

}  // namespace

std::string_view search_status_name(SearchRow::Status status) {
  switch (status) {
    case SearchRow::Status::fits: return "fits";
    case SearchRow::Status::does_not_fit: return "does-not-fit";
    case SearchRow::Status::invalid: return "invalid";
  }
  return "invalid";
}

SearchSummary run_search(const Scenario& scenario, const SearchSpace& space, const PluginRegistry& registry,
                         const SearchOptions& options, const std::function<void(const SearchRow&)>& sink) {
  const auto start = std::chrono::steady_clock::now();
  Scenario base = scenario;
  base.hardware.count = space.gpus;
  std::vector<const Scenario*> scenarios{&base};
  std::vector<double> prices{space.usd_per_gpu_hour};
  if (!space.hardware.empty()) {
    scenarios.clear();
    prices.clear();
    for (const SearchHardware& hardware : space.hardware) {
      scenarios.push_back(&hardware.scenario);
      prices.push_back(hardware.usd_per_gpu_hour);
    }
  }
  const uint64_t total = space.combinations;
  const uint64_t chunks = (total + kChunk - 1) / kChunk;
  std::atomic<uint64_t> next_chunk{0};
  std::atomic<uint64_t> done{0};
  std::mutex mutex;  // guards the fields below
  std::map<uint64_t, std::vector<SearchRow>> finished;
  uint64_t flushed = 0;  // chunks delivered to the sink
  SearchRanking ranking(space.objective, space.top);
  std::exception_ptr failure;

  auto deliver = [&](uint64_t chunk, std::vector<SearchRow> rows) {
    std::lock_guard lock(mutex);
    finished.emplace(chunk, std::move(rows));
    for (auto it = finished.find(flushed); it != finished.end(); it = finished.find(flushed)) {
      for (const SearchRow& row : it->second) {
        ranking.add(row);
        sink(row);
      }
      finished.erase(it);
      ++flushed;
    }
  };
  auto work = [&] {
    try {
      Worker worker(scenarios, prices, space, registry);
      for (uint64_t chunk = next_chunk++; chunk < chunks; chunk = next_chunk++) {
        std::vector<SearchRow> rows;
        const uint64_t end = std::min(total, (chunk + 1) * kChunk);
        for (uint64_t index = chunk * kChunk; index < end; ++index)
          if (index % options.shards == options.shard) rows.push_back(worker.evaluate(index));
        done += end - chunk * kChunk;
        deliver(chunk, std::move(rows));
      }
    } catch (...) {
      std::lock_guard lock(mutex);
      if (!failure) failure = std::current_exception();
      next_chunk = chunks;  // the others stop at their next chunk
    }
  };
  std::vector<std::thread> threads;
  const int count = std::max(1, options.threads);
  for (int t = 1; t < count; ++t) threads.emplace_back(work);
  std::thread progress;
  std::atomic<bool> stop{false};
  if (options.progress)
    progress = std::thread([&] {
      while (!stop) {
        std::this_thread::sleep_for(std::chrono::milliseconds(250));
        const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        if (seconds < 1 || stop) continue;
        std::fprintf(stderr, "\rsearch: %llu of %llu combinations (%.0f/s)", static_cast<unsigned long long>(done.load()),
                     static_cast<unsigned long long>(total), static_cast<double>(done.load()) / seconds);
      }
    });
  work();
  for (std::thread& thread : threads) thread.join();
  stop = true;
  if (progress.joinable()) {
    progress.join();
    std::fprintf(stderr, "\r\033[K");
  }
  if (failure) std::rethrow_exception(failure);
  SearchSummary summary = ranking.summary();
  summary.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return summary;
}

bool SearchRanking::better(const SearchRow& a, const SearchRow& b) const {
  const bool a_timed = a.step_seconds > 0, b_timed = b.step_seconds > 0;
  if (objective_ == SearchObjective::cost) {
    const bool a_priced = a.usd_per_million_tokens > 0, b_priced = b.usd_per_million_tokens > 0;
    if (a_priced != b_priced) return a_priced;
    if (a.usd_per_million_tokens != b.usd_per_million_tokens) return a.usd_per_million_tokens < b.usd_per_million_tokens;
  }
  if (objective_ != SearchObjective::memory) {
    if (a_timed != b_timed) return a_timed;
    if (a.step_seconds != b.step_seconds) return a.step_seconds < b.step_seconds;
    if (a.peak_bytes != b.peak_bytes) return a.peak_bytes < b.peak_bytes;
  } else {
    if (a.peak_bytes != b.peak_bytes) return a.peak_bytes < b.peak_bytes;
    if (a_timed != b_timed) return a_timed;
    if (a.step_seconds != b.step_seconds) return a.step_seconds < b.step_seconds;
  }
  return a.index < b.index;
}

void SearchRanking::add(const SearchRow& row) {
  ++evaluated_;
  if (row.status == SearchRow::Status::invalid) {
    ++invalid_;
    return;
  }
  if (row.status == SearchRow::Status::does_not_fit) {
    ++does_not_fit_;
    return;
  }
  ++fitting_;
  auto at = std::lower_bound(best_.begin(), best_.end(), row, [&](const SearchRow& a, const SearchRow& b) {
    return better(a, b);
  });
  if (static_cast<int64_t>(at - best_.begin()) < top_) {
    best_.insert(at, row);
    if (static_cast<int64_t>(best_.size()) > top_) best_.pop_back();
  }
  // The front of peak memory against step time, over timed rows: none other is
  // at most as large in both and smaller in one (an exact tie keeps the first index).
  if (row.step_seconds <= 0) return;
  for (const SearchRow& kept : front_)
    if (kept.peak_bytes <= row.peak_bytes && kept.step_seconds <= row.step_seconds &&
        (kept.peak_bytes < row.peak_bytes || kept.step_seconds < row.step_seconds || kept.index < row.index))
      return;
  std::erase_if(front_, [&](const SearchRow& kept) {
    return row.peak_bytes <= kept.peak_bytes && row.step_seconds <= kept.step_seconds;
  });
  front_.insert(std::lower_bound(front_.begin(), front_.end(), row,
                                 [](const SearchRow& a, const SearchRow& b) {
                                   return a.peak_bytes != b.peak_bytes ? a.peak_bytes < b.peak_bytes
                                                                       : a.index < b.index;
                                 }),
                row);
}

SearchSummary SearchRanking::summary() const {
  SearchSummary summary;
  summary.evaluated = evaluated_;
  summary.fitting = fitting_;
  summary.does_not_fit = does_not_fit_;
  summary.invalid = invalid_;
  summary.best = best_;
  summary.pareto = front_;
  for (SearchRow& row : summary.best)
    for (const SearchRow& on_front : front_)
      if (on_front.index == row.index) row.pareto = true;
  for (SearchRow& row : summary.pareto) row.pareto = true;
  return summary;
}

}  // namespace memplan
