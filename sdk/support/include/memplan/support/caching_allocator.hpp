// A replay of a short request sequence through the block rules of PyTorch's
// CUDA caching allocator (c10/cuda/CUDACachingAllocator.cpp), for requests
// of the large pool (above 1 MiB) on one stream:
//
//   best fit   a request takes the smallest cached free block at least its
//              size (get_free_block: the pool is ordered by size, then
//              address; lower_bound), whatever tensor freed it;
//   split      the block is split when more than 1 MiB would remain
//              (should_split, kSmallSize for the large pool); the rest stays
//              a free block of the same segment;
//   merge      a freed block merges with the free blocks beside it in its
//              segment (free_block, try_merge_blocks);
//   new        no free block fits: a new segment of the request's size
//              (get_allocation_size: 20 MiB below kMinLargeAlloc, 10 MiB;
//              from there rounded up to kRoundLarge, 2 MiB), which the step
//              never returns (segments go back only on empty_cache or when
//              cudaMalloc fails: release_cached_blocks).
//
// Sizes are rounded up to kMinBlockSize (512 B, round_size). What the rules
// leave out: max_split_size (unset by default), expandable segments
// (PYTORCH_CUDA_ALLOC_CONF expandable_segments, off by default), other
// streams and the small pool: a request of 1 MiB or less makes the replay
// invalid.
//
// Plugins use it where they know the order of a step's large requests (a
// loss path's logits-sized tensors): the segments they settle at, step after
// step, can exceed the most those requests hold at once, because a smaller
// request splits a larger free block that a later larger request then cannot
// use. It allocates nothing (a fixed table of blocks), so a plugin may
// replay inside an evaluation.
#pragma once

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>

namespace memplan::support {

// One request of a replay: allocate a tensor of `bytes` under the name `id`,
// or free the tensor allocated under `id` (which must be alive).
struct AllocatorRequest {
  enum class Kind : uint8_t { allocate, free };
  Kind kind = Kind::allocate;
  uint32_t id = 0;
  double bytes = 0;  // for an allocation
};

struct AllocatorReplay {
  double reserved = 0;    // the segments mapped when the sequence ends (never returned)
  double alive_high = 0;  // the most the requests hold at once (rounded sizes)
  int segments = 0;       // how many segments were mapped
  double mapped_requests = 0;  // the (rounded) requests that mapped them, before the segments' own rounding
  // false: a free of a tensor that is not alive, a size that is not finite or
  // not above 1 MiB, or more blocks than the table holds (kReplayBlocks)
  bool valid = true;
};

// Blocks the replay can track at once, over all segments (a loss path over
// steps of varying lengths keeps three segments per longer step).
inline constexpr size_t kReplayBlocks = 128;

namespace caching_allocator_detail {

constexpr double kMinBlockSize = 512;                  // round_size
constexpr double kSmallSize = 1024.0 * 1024;           // should_split: the large pool's split threshold
constexpr double kMinLargeAlloc = 10.0 * 1024 * 1024;  // get_allocation_size
constexpr double kLargeBuffer = 20.0 * 1024 * 1024;    // get_allocation_size below kMinLargeAlloc
constexpr double kRoundLarge = 2.0 * 1024 * 1024;      // get_allocation_size from kMinLargeAlloc

inline double round_up(double bytes, double granule) { return std::ceil(bytes / granule) * granule; }

// Blocks of one segment are neighbours in the table, in address order;
// segments in the order they were mapped (the pool's address order for ties).
struct Block {
  double size = 0;       // the block's bytes in its segment
  double requested = 0;  // the request's rounded bytes, while allocated
  uint32_t id = 0;
  uint32_t segment = 0;
  bool free = true;
};

}  // namespace caching_allocator_detail

// The segment the allocator maps for a request of `bytes` that no cached
// block holds (get_allocation_size, large pool): 20 MiB below 10 MiB, else the
// request rounded up to 2 MiB.
inline double segment_size(double bytes) {
  namespace d = caching_allocator_detail;
  return bytes < d::kMinLargeAlloc ? d::kLargeBuffer : d::round_up(bytes, d::kRoundLarge);
}

inline AllocatorReplay replay_caching_allocator(std::span<const AllocatorRequest> requests) {
  namespace d = caching_allocator_detail;
  AllocatorReplay result;
  std::array<d::Block, kReplayBlocks> blocks{};
  size_t count = 0;
  uint32_t segments = 0;
  double alive = 0;
  const auto invalid = [&result] {
    result.valid = false;
    return result;
  };
  for (const AllocatorRequest& request : requests) {
    if (request.kind == AllocatorRequest::Kind::allocate) {
      if (!std::isfinite(request.bytes) || request.bytes <= d::kSmallSize) return invalid();
      const double size = d::round_up(request.bytes, d::kMinBlockSize);
      // Best fit: the smallest free block that holds the request; ties go to
      // the earlier block in the table (the lower address).
      size_t best = count;
      for (size_t i = 0; i < count; ++i)
        if (blocks[i].free && blocks[i].size >= size && (best == count || blocks[i].size < blocks[best].size)) best = i;
      if (best == count) {
        if (count == blocks.size()) return invalid();
        blocks[count++] = d::Block{segment_size(size), 0, 0, segments++, true};
        result.mapped_requests += size;
      }
      const double rest = blocks[best].size - size;
      if (rest > d::kSmallSize) {
        if (count == blocks.size()) return invalid();
        for (size_t i = count; i > best + 1; --i) blocks[i] = blocks[i - 1];
        blocks[best + 1] = d::Block{rest, 0, 0, blocks[best].segment, true};
        ++count;
        blocks[best].size = size;
      }
      // Not split: the request keeps the whole block.
      blocks[best].requested = size;
      blocks[best].id = request.id;
      blocks[best].free = false;
      alive += size;
      if (alive > result.alive_high) result.alive_high = alive;
      continue;
    }
    size_t at = count;
    for (size_t i = 0; i < count && at == count; ++i)
      if (!blocks[i].free && blocks[i].id == request.id) at = i;
    if (at == count) return invalid();
    alive -= blocks[at].requested;
    blocks[at].free = true;
    blocks[at].requested = 0;
    // Merge with the free neighbours of the same segment.
    const auto merge_next = [&](size_t i) {
      if (i + 1 < count && blocks[i + 1].free && blocks[i + 1].segment == blocks[i].segment) {
        blocks[i].size += blocks[i + 1].size;
        for (size_t j = i + 1; j + 1 < count; ++j) blocks[j] = blocks[j + 1];
        --count;
      }
    };
    merge_next(at);
    if (at > 0 && blocks[at - 1].free && blocks[at - 1].segment == blocks[at].segment) merge_next(at - 1);
  }
  for (size_t i = 0; i < count; ++i) result.reserved += blocks[i].size;
  result.segments = static_cast<int>(segments);
  return result;
}

}  // namespace memplan::support
