// The human-readable report: components, timeline, fit, and what to change.
#include <cmath>
#include <cstdio>
#include <string>

#include "report/advice.hpp"
#include "memplan/core/text.hpp"
#include "report/report_writers.hpp"

namespace memplan {
namespace {

std::string gib_column(uint64_t bytes) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%12.2f GiB", static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0));
  return buffer;
}

std::string billions(double count) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.3f B", count / 1e9);
  return buffer;
}

std::string padded(std::string_view text, size_t width) {
  std::string out(text);
  if (out.size() < width) out.append(width - out.size(), ' ');
  return out;
}

void write_limits(std::ostream& out, const ScenarioLimits& limits) {
  const std::vector<LimitRow> rows = limit_rows(limits);
  if (rows.empty()) return;
  out << "\nlimits\n";
  for (const LimitRow& row : rows) {
    const SizeLimit& limit = *row.limit;
    const bool batch = limit.variable == SizeVariable::micro_batch;
    const std::string title = std::string(batch ? "max micro_batch" : "max seq_len") +
                              (row.solved ? " (solved)" : batch ? " (sequences)" : " (tokens)");
    out << "  " << padded(title, 30);
    if (limit.unbounded) {
      out << "unbounded   (" << limit.binding << ")\n";
      continue;
    }
    out << limit.value << "   (" << (batch ? "at seq_len " : "at micro_batch ") << limit.other << "; "
        << (limit.capped ? "capped by " : "bound by ") << limit.binding << ")\n";
  }
}

std::string seconds_column(double seconds) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%12.3f s", seconds);
  return buffer;
}

// The step's time, when plugins report its work (ABI 1.2).
void write_step_time(std::ostream& out, const Estimate& estimate) {
  const StepTime& time = estimate.breakdown.time;
  if (time.status == TimeStatus::no_work) return;
  out << "\nstep time (the work plugins report; docs/step-time.md)\n";
  if (time.status != TimeStatus::timed) {
    out << "  not derived: " << terminal_text(untimed_reason(estimate)) << "\n";
    char flops[64];
    std::snprintf(flops, sizeof flops, "%.4g", time.model_flops);
    out << "  " << padded("FLOPs / GPU", 18) << flops << " model FLOPs per step\n";
    return;
  }
  for (int32_t pass = MEMPLAN_PASS_FORWARD; pass <= MEMPLAN_PASS_OPTIMIZER; ++pass) {
    const double seconds = time.pass_seconds[static_cast<size_t>(pass - 1)];
    if (seconds > 0 || pass != MEMPLAN_PASS_OPTIMIZER)
      out << "  " << padded(pass_name(pass), 18) << seconds_column(seconds) << "\n";
  }
  if (time.bubble_seconds > 0) out << "  " << padded("pipeline bubble", 18) << seconds_column(time.bubble_seconds) << "\n";
  out << "  " << padded("step", 18) << seconds_column(time.seconds) << "\n";
  if (time.communication_seconds > 0) {
    char comm[160];
    std::snprintf(comm, sizeof comm, "%.3f s, of which %.3f s not hidden by compute (%.4g GB moved per GPU)",
                  time.communication_seconds, time.exposed_seconds, time.communication_bytes / 1e9);
    out << "  " << padded("communication", 18) << comm << "\n";
  }
  char line[160];
  std::snprintf(line, sizeof line, "%.4g model FLOPs per step (MFU %.1f %%, HFU %.1f %% of the %s peak)", time.model_flops,
                100.0 * time.mfu, 100.0 * time.hfu, std::string(math_name(time.math)).c_str());
  out << "  " << padded("FLOPs / GPU", 18) << line << "\n";
  std::snprintf(line, sizeof line, "%.0f (the job's %.4g tokens per step)", time.tokens_per_second,
                time.tokens_per_step);
  out << "  " << padded("tokens / s", 18) << line << "\n";
  const RunBudget budget = run_budget(estimate);
  if (budget.tokens > 0) {
    std::snprintf(line, sizeof line, "%.4g tokens: %.1f days on %lld GPUs, %.4g GPU-hours", budget.tokens,
                  budget.hours / 24, static_cast<long long>(estimate.breakdown.world_size), budget.gpu_hours);
    out << "  " << padded("budget", 18) << line;
    if (budget.usd > 0) {
      std::snprintf(line, sizeof line, ", %.4g USD at %.2f USD per GPU-hour", budget.usd,
                    estimate.scenario.usd_per_gpu_hour);
      out << line;
    }
    out << "\n";
  }
}

}  // namespace

void write_table(std::ostream& out, const Estimate& estimate, const ScenarioLimits& limits) {
  const Scenario& scenario = estimate.scenario;
  const Breakdown& b = estimate.breakdown;
  // Names and paths come from files: shown with control characters escaped.
  out << "memplan estimate: " << terminal_text(scenario.name) << " (" << (scenario.mode == MEMPLAN_MODE_TRAIN ? "train" : "infer")
      << ")\n";
  out << "model: " << terminal_text(model_source(scenario)) << ", "
      << billions(b.params_total) << " parameters, " << billions(b.params_trainable) << " trainable\n";
  // The sizes the estimate used (a solved "max" included); no length when the scenario sets none.
  out << "batch: micro_batch " << estimate.micro_batch << ", seq_len "
      << (estimate.seq_len > 0 ? std::to_string(estimate.seq_len) : std::string("not set")) << ", grad_accum "
      << scenario.grad_accum << "; world size " << b.world_size << " GPU" << (b.world_size == 1 ? "" : "s") << "\n";
  if (!scenario.framework.name.empty())
    out << "framework: " << scenario.framework.name
        << (scenario.framework.version.empty() || scenario.framework.version == "-" ? "" : " " + scenario.framework.version)
        << (scenario.framework.date.empty() ? "" : " (as of " + scenario.framework.date + ")")
        << (scenario.framework.from_scenario ? "" : " (the default profile; name the software with [framework])") << "\n";
  out << "plugins:";
  for (const PluginUse& plugin : estimate.plugins) out << " " << plugin.name << "@" << terminal_text(plugin.version);
  out << "\n\nper GPU (1 GiB = 2^30 bytes)\n";
  for (int32_t role = 0; role < MEMPLAN_ROLE_COUNT; ++role)
    out << "  " << padded(role_name(role), 18) << gib_column(b.components[static_cast<size_t>(role)]) << "\n";
  out << "  " << padded("sum", 18) << gib_column(b.sum) << "\n";
  out << "  " << padded("peak", 18) << gib_column(b.peak) << "   (" << phase_name(b.peak_phase) << ", "
      << quantity_name(b.fit_quantity) << " memory)\n";
  // What each way of measuring would show at its own high point.
  static constexpr const char* kMeasuredBy[kQuantityCount] = {"torch.cuda.max_memory_allocated",
                                                              "torch.cuda.max_memory_reserved", "nvidia-smi"};
  out << "\npeak as measured by\n";
  for (int quantity = 0; quantity < kQuantityCount; ++quantity) {
    const StepPeak& q = b.quantities[static_cast<size_t>(quantity)];
    out << "  " << padded(quantity_name(quantity), 18) << gib_column(q.peak) << "   (" << phase_name(q.peak_phase)
        << "; " << kMeasuredBy[quantity] << ")\n";
  }
  // The allocator gave back cached free segments to stay within the GPU:
  // the step runs at its limit, retrying cudaMalloc (release_cached_blocks).
  if (b.reserve_released > 0)
    out << "  (" << format_gib(static_cast<double>(b.reserve_released))
        << " of the allocator's cached free segments released to stay within the GPU's memory: "
           "the step runs at the caching allocator's limit, with cudaMalloc retries)\n";
  out << "\nstep timeline (" << quantity_name(b.fit_quantity) << " memory)\n";
  // Inference has no backward pass and no optimizer step.
  const int phases = scenario.mode == MEMPLAN_MODE_TRAIN ? kStepPhaseCount : kBackward;
  for (int phase = 0; phase < phases; ++phase)
    out << "  " << padded(phase_name(phase), 18) << gib_column(b.timeline[static_cast<size_t>(phase)]) << "\n";
  if (b.cpu_sum > 0) out << "\nper host CPU\n  " << padded("sum", 18) << gib_column(b.cpu_sum) << "\n";
  write_step_time(out, estimate);

  const auto details = estimate.details;
  if (!details.empty()) out << "\ndetails\n";
  for (const auto& [key, value] : details) out << "  " << padded(key, 30) << value << "\n";
  write_limits(out, limits);

  const FitFacts fit = fit_facts(estimate);
  out << "\n";
  if (!fit.has_gpu) {
    out << "fit: no GPU given ([hardware] gpu or memory_gib)\n";
    return;
  }
  out << "GPU: " << terminal_text(scenario.hardware.label) << ", " << format_gib(static_cast<double>(fit.cuda_total));
  if (fit.cuda_total < fit.gpu_memory)
    out << " as CUDA reports it (" << format_gib(static_cast<double>(fit.gpu_memory)) << " nominal)";
  if (fit.capacity < fit.cuda_total)
    out << ", of which " << format_gib(static_cast<double>(fit.capacity)) << " usable (memory fraction "
        << b.memory_fraction << ")";
  out << "\n";
  if (fit.fits) {
    out << "fits (" << quantity_name(b.fit_quantity) << " memory): yes, " << format_gib(static_cast<double>(fit.headroom))
        << " to spare (" << std::lround(100.0 * static_cast<double>(b.peak) / static_cast<double>(fit.capacity))
        << "% used at peak)\n";
    return;
  }
  out << "fits (" << quantity_name(b.fit_quantity) << " memory): no\n\nwhat to change:\n";
  for (const std::string& line : advice_for(b, fit.capacity, scenario.mode == MEMPLAN_MODE_TRAIN))
    out << "  - " << line << "\n";
}

}  // namespace memplan
