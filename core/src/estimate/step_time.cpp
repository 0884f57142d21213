#include "memplan/core/step_time.hpp"

#include <algorithm>

namespace memplan {

bool GpuPerformance::any() const {
  for (double peak : peak_flops)
    if (peak > 0) return true;
  return memory_bandwidth > 0 || gpus_per_node > 0 || intra_node_bandwidth > 0 || inter_node_bandwidth > 0;
}

std::string_view math_name(int32_t math) {
  static constexpr std::array<std::string_view, MEMPLAN_MATH_COUNT> kNames MEMPLAN_MATH_NAMES;
  return math >= 0 && math < MEMPLAN_MATH_COUNT ? kNames[static_cast<size_t>(math)] : std::string_view("unknown");
}

std::string_view pass_name(int32_t pass) {
  switch (pass) {
    case MEMPLAN_PASS_FORWARD: return "forward";
    case MEMPLAN_PASS_BACKWARD: return "backward";
    case MEMPLAN_PASS_OPTIMIZER: return "optimizer";
    default: return "unknown";
  }
}

std::string_view collective_name(int32_t collective) {
  switch (collective) {
    case MEMPLAN_COLLECTIVE_ALL_REDUCE: return "all-reduce";
    case MEMPLAN_COLLECTIVE_ALL_GATHER: return "all-gather";
    case MEMPLAN_COLLECTIVE_REDUCE_SCATTER: return "reduce-scatter";
    case MEMPLAN_COLLECTIVE_ALL_TO_ALL: return "all-to-all";
    case MEMPLAN_COLLECTIVE_SEND_RECV: return "send/receive";
    default: return "unknown";
  }
}

double ring_volume(int32_t collective, double amount, int64_t ranks) {
  if (ranks <= 1) return 0;
  const double n = static_cast<double>(ranks);
  switch (collective) {
    case MEMPLAN_COLLECTIVE_ALL_REDUCE: return 2 * (n - 1) / n * amount;  // reduce-scatter, then all-gather
    case MEMPLAN_COLLECTIVE_ALL_GATHER:
    case MEMPLAN_COLLECTIVE_REDUCE_SCATTER:
    case MEMPLAN_COLLECTIVE_ALL_TO_ALL: return (n - 1) / n * amount;
    case MEMPLAN_COLLECTIVE_SEND_RECV: return amount;
    default: return 0;
  }
}

namespace {

// The bandwidth a collective's group moves at: the intra-node link when the
// whole group sits in one node, else the inter-node one (its slowest hop). 0: not known.
double link_bandwidth(const WorkRecord& record, const GpuPerformance& gpu) {
  if (gpu.gpus_per_node <= 0) return 0;
  const bool one_node = static_cast<double>(record.ranks) * static_cast<double>(record.stride) <=
                        static_cast<double>(gpu.gpus_per_node);
  return one_node ? gpu.intra_node_bandwidth : gpu.inter_node_bandwidth;
}

}  // namespace

void time_step(const std::vector<WorkRecord>& work, const GpuPerformance& gpu, int64_t micro_batches,
               double tokens_per_step, StepTime& time) {
  time = StepTime{};
  if (work.empty()) return;
  time.status = TimeStatus::timed;
  time.tokens_per_step = tokens_per_step;
  const double per_step = static_cast<double>(micro_batches > 0 ? micro_batches : 1);
  std::array<double, MEMPLAN_MATH_COUNT> flops_by_math{};
  double forward_backward_compute = 0;  // what a bubble is a fraction of
  std::array<double, 3> overlappable{};  // per pass: collective seconds that may hide behind compute
  std::array<double, 3> pass_compute{};  // per pass: compute and memory-bound seconds
  double bubble_fraction = 0;
  bool passes_work = false;  // compute or memory work in the forward or backward pass
  for (size_t index = 0; index < work.size(); ++index) {
    const WorkRecord& record = work[index];
    if (record.kind == MEMPLAN_WORK_BUBBLE) {
      bubble_fraction += record.amount;
      continue;
    }
    const double repeats = record.pass == MEMPLAN_PASS_OPTIMIZER ? 1.0 : per_step;
    const double amount = record.amount * repeats;
    double peak = 0;
    if (record.kind == MEMPLAN_WORK_COLLECTIVE) {
      const double volume = ring_volume(record.collective, amount, record.ranks);
      time.communication_bytes += volume;
      const double bandwidth = link_bandwidth(record, gpu);
      if (!(bandwidth > 0) && time.status == TimeStatus::timed) {
        time.status = TimeStatus::no_link;
        time.cause = static_cast<int64_t>(index);
      }
      if (!(record.efficiency > 0) && time.status == TimeStatus::timed) {
        time.status = TimeStatus::no_efficiency;
        time.cause = static_cast<int64_t>(index);
      }
      if (time.status == TimeStatus::timed) {
        const double seconds = volume / (bandwidth * record.efficiency);
        time.communication_seconds += seconds;
        // What may overlap hides only behind compute of its pass (below); the rest is exposed.
        overlappable[static_cast<size_t>(record.pass - 1)] += seconds * record.overlap;
        time.exposed_seconds += seconds * (1 - record.overlap);
        time.pass_seconds[static_cast<size_t>(record.pass - 1)] += seconds * (1 - record.overlap);
      }
      continue;
    }
    if (record.pass != MEMPLAN_PASS_OPTIMIZER && amount > 0) passes_work = true;
    if (record.kind == MEMPLAN_WORK_COMPUTE) {
      time.hardware_flops += amount;
      if (record.flags & MEMPLAN_WORK_MODEL_FLOPS) time.model_flops += amount;
      flops_by_math[static_cast<size_t>(record.math)] += amount;
      peak = gpu.peak_flops[static_cast<size_t>(record.math)];
      if (!(peak > 0) && time.status == TimeStatus::timed) {
        time.status = TimeStatus::no_peak;
        time.cause = static_cast<int64_t>(index);
      }
    } else {
      time.memory_bytes += amount;
      peak = gpu.memory_bandwidth;
      if (!(peak > 0) && time.status == TimeStatus::timed) {
        time.status = TimeStatus::no_bandwidth;
        time.cause = static_cast<int64_t>(index);
      }
    }
    if (!(record.efficiency > 0) && time.status == TimeStatus::timed) {
      time.status = TimeStatus::no_efficiency;
      time.cause = static_cast<int64_t>(index);
    }
    if (time.status == TimeStatus::timed) {
      const double seconds = amount / (peak * record.efficiency);
      time.compute_seconds += seconds;
      pass_compute[static_cast<size_t>(record.pass - 1)] += seconds;
      time.pass_seconds[static_cast<size_t>(record.pass - 1)] += seconds;
      if (record.pass != MEMPLAN_PASS_OPTIMIZER) forward_backward_compute += seconds;
    }
  }
  for (int32_t math = 0; math < MEMPLAN_MATH_COUNT; ++math)
    if (flops_by_math[static_cast<size_t>(math)] > flops_by_math[static_cast<size_t>(time.math)]) time.math = math;
  // Collectives and the optimizer's update alone make no step (a sharding
  // plugin and an optimizer without the plugin that reports the passes'
  // computation): a step timed from them would be all communication, with 0
  // model FLOPs. Nothing to say.
  if (!passes_work) {
    time = StepTime{};
    return;
  }
  if (time.status != TimeStatus::timed) {
    time.pass_seconds = {};
    time.compute_seconds = time.communication_seconds = time.exposed_seconds = 0;
    return;
  }
  // Overlap: a pass's collectives hide behind that pass's compute, at most all
  // of it. Once-per-step collectives (the optimizer pass: the gradients'
  // reduction across replicas) hide behind one micro-batch's backward and
  // forward: the gradients are reduced during the last micro-batch's backward
  // and the updated weights gathered during the next step's first forward,
  // however many micro-batches the step has (docs/step-time.md, section 4,
  // cites the frameworks that do so).
  const double one_micro_batch =
      (pass_compute[MEMPLAN_PASS_BACKWARD - 1] + pass_compute[MEMPLAN_PASS_FORWARD - 1]) / per_step;
  for (size_t pass = 0; pass < overlappable.size(); ++pass) {
    const double cover = pass + 1 == MEMPLAN_PASS_OPTIMIZER ? one_micro_batch : pass_compute[pass];
    const double exposed = std::max(0.0, overlappable[pass] - cover);
    time.exposed_seconds += exposed;
    time.pass_seconds[pass] += exposed;
  }
  time.bubble_seconds = bubble_fraction * forward_backward_compute;
  for (double seconds : time.pass_seconds) time.seconds += seconds;
  time.seconds += time.bubble_seconds;
  if (!(time.seconds > 0)) return;
  const double peak = gpu.peak_flops[static_cast<size_t>(time.math)];
  if (peak > 0) {
    time.mfu = time.model_flops / (time.seconds * peak);
    time.hfu = time.hardware_flops / (time.seconds * peak);
  }
  time.tokens_per_second = tokens_per_step / time.seconds;
}

}  // namespace memplan
