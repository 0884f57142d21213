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
// streams and the small pool.
//
// Plugins use it where they know the order of a step's large requests (a
// loss path's logits-sized tensors): the segments they settle at, step after
// step, can exceed the most those requests hold at once, because a smaller
// request splits a larger free block that a later larger request then cannot
// use.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>
#include <vector>

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
  bool valid = true;      // false: a free of a tensor that is not alive, or a size that is not finite and positive
};

namespace caching_allocator_detail {

constexpr double kMinBlockSize = 512;                  // round_size
constexpr double kSmallSize = 1024.0 * 1024;           // should_split: the large pool's split threshold
constexpr double kMinLargeAlloc = 10.0 * 1024 * 1024;  // get_allocation_size
constexpr double kLargeBuffer = 20.0 * 1024 * 1024;    // get_allocation_size below kMinLargeAlloc
constexpr double kRoundLarge = 2.0 * 1024 * 1024;      // get_allocation_size from kMinLargeAlloc

inline double round_up(double bytes, double granule) { return std::ceil(bytes / granule) * granule; }

struct Block {
  double size = 0;       // the block's bytes in its segment
  double requested = 0;  // the request's rounded bytes, while allocated
  uint32_t id = 0;
  bool free = true;
};

}  // namespace caching_allocator_detail

inline AllocatorReplay replay_caching_allocator(std::span<const AllocatorRequest> requests) {
  namespace d = caching_allocator_detail;
  AllocatorReplay result;
  std::vector<std::vector<d::Block>> segments;  // in mapping order (the address order of the blocks' ties)
  double alive = 0;
  for (const AllocatorRequest& request : requests) {
    if (request.kind == AllocatorRequest::Kind::allocate) {
      if (!std::isfinite(request.bytes) || request.bytes <= 0) {
        result.valid = false;
        return result;
      }
      const double size = d::round_up(request.bytes, d::kMinBlockSize);
      // Best fit: the smallest free block that holds the request; ties go to the
      // earlier segment and the lower offset (the pool's address order).
      size_t best_segment = segments.size(), best_block = 0;
      for (size_t s = 0; s < segments.size(); ++s)
        for (size_t b = 0; b < segments[s].size(); ++b) {
          const d::Block& block = segments[s][b];
          if (block.free && block.size >= size &&
              (best_segment == segments.size() || block.size < segments[best_segment][best_block].size)) {
            best_segment = s;
            best_block = b;
          }
        }
      if (best_segment == segments.size()) {
        const double mapped = size < d::kMinLargeAlloc ? d::kLargeBuffer : d::round_up(size, d::kRoundLarge);
        segments.push_back({d::Block{mapped, 0, 0, true}});
        best_block = 0;
      }
      std::vector<d::Block>& segment = segments[best_segment];
      const double rest = segment[best_block].size - size;
      segment[best_block] = d::Block{size, size, request.id, false};
      if (rest > d::kSmallSize)
        segment.insert(segment.begin() + static_cast<std::ptrdiff_t>(best_block) + 1, d::Block{rest, 0, 0, true});
      else
        segment[best_block].size += rest;  // not split: the request keeps the whole block
      alive += size;
      result.alive_high = std::max(result.alive_high, alive);
      continue;
    }
    bool found = false;
    for (std::vector<d::Block>& segment : segments) {
      for (size_t b = 0; b < segment.size() && !found; ++b) {
        if (segment[b].free || segment[b].id != request.id) continue;
        found = true;
        alive -= segment[b].requested;
        segment[b].free = true;
        // Merge with the free neighbours of the same segment.
        if (b + 1 < segment.size() && segment[b + 1].free) {
          segment[b].size += segment[b + 1].size;
          segment.erase(segment.begin() + static_cast<std::ptrdiff_t>(b) + 1);
        }
        if (b > 0 && segment[b - 1].free) {
          segment[b - 1].size += segment[b].size;
          segment.erase(segment.begin() + static_cast<std::ptrdiff_t>(b));
        }
      }
      if (found) break;
    }
    if (!found) {
      result.valid = false;
      return result;
    }
  }
  for (const auto& segment : segments)
    for (const d::Block& block : segment) result.reserved += block.size;
  return result;
}

}  // namespace memplan::support
