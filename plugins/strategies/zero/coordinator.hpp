// DeepSpeed ZeRO-3's parameter coordinator, replayed over the module trace of
// one step to find which parameters are gathered at once. Read at
// microsoft/DeepSpeed v0.14.0, deepspeed/runtime/zero/
// partitioned_param_coordinator.py (PartitionedParameterCoordinator):
//
// - fetch_sub_module: before a module runs, its parameters are all-gathered
//   if they are not available; then parameters are prefetched in trace order,
//   whole, while the elements prefetched stay below
//   min(stage3_max_live_parameters - available, stage3_prefetch_bucket_size);
//   parameters already available are skipped but marked as fetched for that
//   later use.
// - release_sub_module / __params_to_release: after the module, each of its
//   parameters is released (partitioned again) unless
//     it is persistent (ds_persist: at most stage3_param_persistence_threshold
//       elements, partition_parameters.py; gathered once, never released),
//     a prefetch already scanned a later use of it, or
//     it is used again before stage3_max_reuse_distance elements of other
//       modules' parameters have gone by in the trace.
// The trace is the order in which modules fetch: forward, then backward in
// reverse, with each checkpointed layer's forward replayed before its backward.
//
// Each gather is one all_gather_coalesced call (partition_parameters.py,
// v0.7.0 lines 806-880, the same in v0.14.0): the fetched parameters' flat
// buffer is allocated, then `torch.cat([p.ds_tensor.to(cuda) ...], out=...)`
// copies each rank's partition to the GPU first when it lives in host memory
// (parameter offload, or zero.Init(remote_device="cpu")): for the instant of
// the cat the call's partitions exist twice. The replay records, per window,
// the most bytes gathered at such an instant: after the call, plus
// staging_share x the call's bytes (staging_share = 1 / ranks; 0 when the
// partitions are on the GPU and .to() copies nothing). A step makes at most
// two calls: the module's own parameters, then the prefetched ones.
//
// In backward, each step that readies gradients (TraceStep::gradient_elements)
// is recorded with the gathered bytes it holds (Workspace::gradients), where
// DeepSpeed's gradient hooks hand its gradients to the reduce bucket
// (stage3.py reduce_independent_p_g_buckets_and_remove_grads).
//
// One parameter per module here: a module's weight and bias are counted
// together. Cost: linear in the trace (each queue entry is popped once; reuse
// distances come from prefix sums instead of the walk the code does), and no
// allocation once a Workspace has grown to the trace's size.
#pragma once

#include <memplan/support/backward_gradients.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

namespace memplan::plugins::zero3 {

struct Parameter {
  double numel = 0;  // ds_numel: elements of the stored tensor (what the limits count)
  double bytes = 0;  // bytes of the whole tensor once gathered
};

// Where a step counts towards a reported working set: the steps around which
// the activations peak, at the end of forward and at the start of backward.
enum class Window : int8_t { none = -1, forward = 0, backward = 1 };

struct TraceStep {
  int32_t parameter = -1;          // index into the parameters; -1: a module without parameters
  Window window = Window::none;
  // Elements whose gradients become ready at this step (the module's backward, for a trainable module); the
  // replay records the gathered bytes beside them (Workspace::gradients).
  double gradient_elements = 0;
};

// One backward step that readies gradients: their elements, and the non-persistent bytes gathered while the
// module's backward runs (after its fetch and prefetch, before its release), where DeepSpeed's gradient hooks
// hand them to the reduce bucket (stage3.py reduce_independent_p_g_buckets_and_remove_grads). The record's
// step type, which the plugin publishes as it is (support/backward_gradients.hpp).
using GradientStep = memplan::support::backward_gradients::Step;

struct Settings {
  double prefetch_bucket = 5e7;        // stage3_prefetch_bucket_size
  double max_live = 1e9;               // stage3_max_live_parameters
  double max_reuse_distance = 1e9;     // stage3_max_reuse_distance
  double persistence_threshold = 1e5;  // stage3_param_persistence_threshold
  double staging_share = 0;            // the share of a gathered parameter staged from host memory (1 / ranks)
};

struct Result {
  // Per window (forward, backward): the most bytes of non-persistent parameters gathered at once over its
  // steps, and the elements gathered then (persistent ones included).
  double gathered_bytes[2] = {0, 0};
  double gathered_numel[2] = {0, 0};
  double persistent_bytes = 0;  // persistent parameters, gathered whole for good
  // Per window: the most bytes at the instant of an all-gather call's staging copies (the gathered
  // parameters after the call plus staging_share x its bytes); at least gathered_bytes.
  double staged_bytes[2] = {0, 0};
};

inline bool persistent(const Parameter& parameter, const Settings& settings) {
  return parameter.numel <= settings.persistence_threshold;
}

// The replay's scratch arrays, kept between replays so that a plugin that
// replays on every evaluation allocates only while the trace grows.
struct Workspace {
  std::vector<bool> available;
  std::vector<double> numel_before;
  std::vector<size_t> next_use;
  std::vector<size_t> seen;
  std::vector<size_t> queue;
  std::vector<double> fetched_for;
  std::vector<GradientStep> gradients;  // filled by the replay: the steps with gradient_elements, in trace order
};

inline Result replay(const std::vector<Parameter>& parameters, const std::vector<TraceStep>& trace,
                     const Settings& settings, Workspace& workspace) {
  Result result;
  const size_t steps = trace.size();
  std::vector<bool>& available = workspace.available;
  available.assign(parameters.size(), false);
  double available_numel = 0;  // __n_available_params (persistent ones included)
  double available_bytes = 0;  // of non-persistent parameters
  for (size_t p = 0; p < parameters.size(); ++p) {
    if (!persistent(parameters[p], settings)) continue;
    available[p] = true;
    available_numel += parameters[p].numel;
    result.persistent_bytes += parameters[p].bytes;
  }
  // numel_before[i]: elements of the steps before i; next_use[i]: the next step using the same parameter.
  std::vector<double>& numel_before = workspace.numel_before;
  numel_before.assign(steps + 1, 0.0);
  for (size_t i = 0; i < steps; ++i)
    numel_before[i + 1] = numel_before[i] + (trace[i].parameter >= 0 ? parameters[trace[i].parameter].numel : 0.0);
  std::vector<size_t>& next_use = workspace.next_use;
  next_use.assign(steps, steps);
  std::vector<size_t>& seen = workspace.seen;
  seen.assign(parameters.size(), steps);
  for (size_t i = steps; i-- > 0;) {
    if (trace[i].parameter < 0) continue;
    next_use[i] = seen[static_cast<size_t>(trace[i].parameter)];
    seen[static_cast<size_t>(trace[i].parameter)] = i;
  }
  // The fetch queue (__param_order): the trace's parameter uses, in order.
  // Filled once and only popped at the front, so a vector read from `head`.
  std::vector<size_t>& queue = workspace.queue;
  queue.clear();
  for (size_t i = 0; i < steps; ++i)
    if (trace[i].parameter >= 0) queue.push_back(i);
  size_t head = 0;
  constexpr double kNever = -1e18;
  std::vector<double>& fetched_for = workspace.fetched_for;  // __most_recent_step_id_param_fetched_for
  fetched_for.assign(parameters.size(), kNever);
  workspace.gradients.clear();

  auto gather = [&](size_t p) {
    if (available[p]) return;
    available[p] = true;
    available_numel += parameters[p].numel;
    available_bytes += parameters[p].bytes;
  };
  for (size_t i = 0; i < steps; ++i) {
    const int32_t current = trace[i].parameter;
    double staged = 0;  // this step's most bytes at a call's staging instant
    if (current >= 0) {
      const size_t p = static_cast<size_t>(current);
      const double before_module = available_bytes;
      gather(p);
      staged = available_bytes + settings.staging_share * (available_bytes - before_module);
      // This use leaves the queue unless a prefetch already took it.
      if (fetched_for[p] < static_cast<double>(i)) {
        while (head < queue.size() && queue[head] <= i) {
          fetched_for[static_cast<size_t>(trace[queue[head]].parameter)] = static_cast<double>(queue[head]);
          ++head;
        }
      }
      const double limit = std::min(settings.max_live - available_numel, settings.prefetch_bucket);
      double prefetching = 0;
      const double before_prefetch = available_bytes;
      while (head < queue.size() && prefetching < limit) {
        const size_t use = queue[head++];
        const size_t q = static_cast<size_t>(trace[use].parameter);
        fetched_for[q] = std::max(fetched_for[q], static_cast<double>(use));
        if (available[q]) continue;
        gather(q);
        prefetching += parameters[q].numel;
      }
      staged = std::max(staged, available_bytes + settings.staging_share * (available_bytes - before_prefetch));
    }
    if (trace[i].gradient_elements > 0) workspace.gradients.push_back({trace[i].gradient_elements, available_bytes});
    if (trace[i].window != Window::none) {
      const size_t w = static_cast<size_t>(trace[i].window);
      if (available_bytes > result.gathered_bytes[w]) {
        result.gathered_bytes[w] = available_bytes;
        result.gathered_numel[w] = available_numel;
      }
      result.staged_bytes[w] = std::max({result.staged_bytes[w], staged, available_bytes});
    }
    if (current < 0) continue;
    const size_t p = static_cast<size_t>(current);
    if (persistent(parameters[p], settings)) continue;
    const size_t step_id = i + 1;  // the coordinator's step counter after this fetch
    if (fetched_for[p] > static_cast<double>(step_id)) continue;
    const size_t next = next_use[i];
    // The walk discards the parameter when it reaches its next use before the distance is spent.
    if (next < steps && numel_before[next] - numel_before[step_id] < settings.max_reuse_distance) continue;
    available[p] = false;
    available_numel -= parameters[p].numel;
    available_bytes -= parameters[p].bytes;
  }
  return result;
}

inline Result replay(const std::vector<Parameter>& parameters, const std::vector<TraceStep>& trace,
                     const Settings& settings) {
  Workspace workspace;
  return replay(parameters, trace, settings, workspace);
}

}  // namespace memplan::plugins::zero3
