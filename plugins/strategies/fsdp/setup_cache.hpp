// What FullyShardedDataParallel (FSDP1) leaves on the GPU while it wraps the
// model, unit by unit, before the first step (torch/distributed/fsdp/
// _init_utils.py @ 00743e70, _init_param_handle_from_module and
// _init_param_handle_from_params; _flat_param.py, FlatParamHandle):
//
//   1. the unit's parameters come to the GPU whole (_move_module_to_device
//      from the CPU, or param_init_fn / to_empty from the meta device);
//   2. with sync_module_states, rank 0 broadcasts them
//      (_sync_module_params_and_buffers -> dist._broadcast_coalesced with
//      PARAM_BROADCAST_BUCKET_SIZE, 250 MiB): torch/csrc/distributed/c10d/
//      comm.cpp groups the tensors into buckets that close at 250 MiB, copies
//      each bucket of two or more tensors into one flat tensor (a bucket of
//      one is a view) and keeps at most two buckets in flight;
//   3. FlatParamHandle concatenates the parameters into one flat parameter
//      (torch.cat) and shard() clones the rank's chunk; the whole flat
//      parameter is freed, and the original parameters when the function
//      returns (its managed_params list holds them until then); with CPU
//      offload the shard then moves to the CPU.
//
// The caching allocator keeps every block freed there (nothing calls
// torch.cuda.empty_cache after wrapping in the runs this models), so the
// compute stream's pool starts the first step with them cached. The layer
// units come first (auto-wrapping wraps children first), each reusing the
// blocks of the one before (same sizes), then the root (embeddings, final
// norm, LM head), whose tensors reuse a cached layer block where one is
// large enough (best fit, split) and otherwise get segments of their own.
//
// Not modelled: with CPU offload, the shards' clones freed when they move to
// the CPU (one shard's block more); the layer units' own fragmentation across units (each
// unit's shard carved from the blocks the unit before freed), small units
// wrapped apart (LoRA linears), the parameters' blocks of the layer units
// being reused by the root (the root's tensors, vocabulary x hidden, are
// taken to be larger than any one layer matrix).
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <span>

namespace memplan::plugins::fsdp_setup {

inline constexpr double kBroadcastBucket = 250.0 * 1024 * 1024;  // PARAM_BROADCAST_BUCKET_SIZE

// The bytes the broadcast copies at its high point for tensors broadcast in
// this order: buckets close once they hold 250 MiB; a bucket of two or more
// tensors is copied (flatten_dense_tensors), one of a single tensor is a
// view; two buckets are in flight at once.
inline double broadcast_copies(std::span<const double> tensors) {
  double high = 0, previous = 0, bucket = 0;
  int in_bucket = 0;
  auto close = [&] {
    const double copy = in_bucket > 1 ? bucket : 0;
    high = std::max(high, previous + copy);
    previous = copy;
    bucket = 0;
    in_bucket = 0;
  };
  for (double bytes : tensors) {
    bucket += bytes;
    ++in_bucket;
    if (bucket >= kBroadcastBucket) close();
  }
  if (in_bucket > 0) close();
  return high;
}

struct SetupMemory {
  double transient = 0;  // allocated at the set-up's high point, beyond the shards it keeps
  double cached = 0;     // every block the set-up leaves cached, free when the first step starts
};

// `unit`: the largest layer unit's parameter bytes as stored; `unit_copies`:
// its broadcast's copies at their high point (0 without sync_module_states;
// a layer's tensors are many and each below 250 MiB, so the caller passes
// min(unit, two buckets)); `root`: the root unit's tensors in broadcast
// order (embeddings, final norm, LM head); `shard`: the ranks a flat
// parameter is split over; `sync`: sync_module_states.
inline SetupMemory setup_memory(double unit, double unit_copies, std::span<const double> root, double shard,
                                bool sync) {
  double root_bytes = 0;
  for (double bytes : root) root_bytes += bytes;
  const double root_copies = sync ? broadcast_copies(root) : 0.0;
  if (!sync) unit_copies = 0;
  // A unit's high point: its parameters, then the larger of the broadcast's
  // copies and the flat parameter (its shard's clone is the rank's weights,
  // counted there).
  const auto high_point = [](double params, double copies) { return params + std::max(copies, params); };
  SetupMemory memory;
  memory.transient = std::max(unit > 0 ? high_point(unit, unit_copies) : 0.0,
                              root_bytes > 0 ? high_point(root_bytes, root_copies) : 0.0);

  // The blocks: a small best-fit allocator over what is free.
  double created = 0;
  std::array<double, 8> free{};
  size_t free_count = 0;
  auto release = [&](double bytes) {
    if (bytes > 0 && free_count < free.size()) free[free_count++] = bytes;
  };
  auto allocate = [&](double bytes) {
    size_t best = free_count;
    for (size_t i = 0; i < free_count; ++i)
      if (free[i] >= bytes && (best == free_count || free[i] < free[best])) best = i;
    if (best == free_count)
      created += bytes;     // a new segment
    else
      free[best] -= bytes;  // split: the remainder stays free
  };
  if (unit > 0) {
    // The last layer unit (each one reuses the blocks of the one before):
    // its parameters' blocks (taken as too small for the root's tensors,
    // so not entered as free), the copies, and the flat parameter, which
    // fits the copies' block when the unit fits one bucket.
    created += unit + unit_copies;
    release(unit_copies);
    // A unit within one bucket is copied whole: its flat parameter takes
    // the copy's block (within the 2 MiB a segment is rounded to).
    if (!(unit < kBroadcastBucket && unit_copies >= unit)) {
      created += unit;
      release(unit);
    }
  }
  if (root_bytes > 0) {
    for (double bytes : root) allocate(bytes);
    // The broadcast's copies, taken as one allocation, freed before the flat parameter.
    if (root_copies > 0) {
      allocate(root_copies);
      release(root_copies);
    }
    allocate(root_bytes);  // the flat parameter
    // The root's shard, a clone kept as the rank's weights (counted there),
    // whether it took a fresh segment or part of a cached block.
    allocate(root_bytes / shard);
    created -= root_bytes / shard;
  }
  memory.cached = std::max(0.0, created);
  return memory;
}

}  // namespace memplan::plugins::fsdp_setup
