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

// The bytes the allocator books for a request of `bytes` (round_size: a
// multiple of 512 B).
inline double round_size(double bytes) {
  namespace d = caching_allocator_detail;
  return d::round_up(bytes, d::kMinBlockSize);
}

// The segment the allocator maps for a request of `bytes` that no cached
// block holds (get_allocation_size, large pool): 20 MiB below 10 MiB, else the
// request rounded up to 2 MiB.
inline double segment_size(double bytes) {
  namespace d = caching_allocator_detail;
  return bytes < d::kMinLargeAlloc ? d::kLargeBuffer : d::round_up(bytes, d::kRoundLarge);
}

// The block table the replay runs on, for callers that generate their
// requests as they go (a model's whole set-up: thousands of requests, more
// blocks than a loss path's). Capacity is the blocks it can track at once;
// past it, and on a bad request, the replay turns invalid and stays so.
// Requests of 1 MiB or less belong to the small pool, which this table does
// not model: allocate() refuses them (invalid) unless `skip_small` was given,
// when they are left out (their frees too: pass the id allocate() returned).
template <size_t Capacity>
class CachingAllocatorBlocks {
 public:
  explicit CachingAllocatorBlocks(bool skip_small = false) : skip_small_(skip_small) {}

  // Allocates `bytes` under `id` (nonzero); returns id, or 0 where the
  // request was left out (small pool, skip_small) or the replay is invalid.
  uint32_t allocate(uint32_t id, double bytes) {
    namespace d = caching_allocator_detail;
    if (!result_.valid) return 0;
    if (!std::isfinite(bytes) || bytes < 0 || id == 0) return invalid();
    if (bytes <= d::kSmallSize) return skip_small_ ? 0 : invalid();
    const double size = round_size(bytes);
    // Best fit: the smallest free block that holds the request; ties go to
    // the earlier block in the table (the lower address).
    size_t best = count_;
    for (size_t i = 0; i < count_; ++i)
      if (blocks_[i].free && blocks_[i].size >= size && (best == count_ || blocks_[i].size < blocks_[best].size))
        best = i;
    if (best == count_) {
      if (count_ == Capacity) return invalid();
      blocks_[count_++] = d::Block{segment_size(size), 0, 0, segments_++, true};
      result_.mapped_requests += size;
      result_.reserved += blocks_[best].size;
    }
    const double rest = blocks_[best].size - size;
    if (rest > d::kSmallSize) {
      if (count_ == Capacity) return invalid();
      for (size_t i = count_; i > best + 1; --i) blocks_[i] = blocks_[i - 1];
      blocks_[best + 1] = d::Block{rest, 0, 0, blocks_[best].segment, true};
      ++count_;
      blocks_[best].size = size;
    }
    // Not split: the request keeps the whole block.
    blocks_[best].requested = size;
    blocks_[best].id = id;
    blocks_[best].free = false;
    alive_ += size;
    if (alive_ > result_.alive_high) result_.alive_high = alive_;
    return id;
  }

  // Frees what allocate() returned under `id`; 0 (a request left out) is a no-op.
  void release(uint32_t id) {
    if (!result_.valid || id == 0) return;
    size_t at = count_;
    for (size_t i = 0; i < count_ && at == count_; ++i)
      if (!blocks_[i].free && blocks_[i].id == id) at = i;
    if (at == count_) {
      invalid();
      return;
    }
    alive_ -= blocks_[at].requested;
    blocks_[at].free = true;
    blocks_[at].requested = 0;
    // Merge with the free neighbours of the same segment.
    const auto merge_next = [&](size_t i) {
      if (i + 1 < count_ && blocks_[i + 1].free && blocks_[i + 1].segment == blocks_[i].segment) {
        blocks_[i].size += blocks_[i + 1].size;
        for (size_t j = i + 1; j + 1 < count_; ++j) blocks_[j] = blocks_[j + 1];
        --count_;
      }
    };
    merge_next(at);
    if (at > 0 && blocks_[at - 1].free && blocks_[at - 1].segment == blocks_[at].segment) merge_next(at - 1);
  }

  // The replay so far; `alive` the bytes allocated now (rounded sizes).
  AllocatorReplay result() const {
    AllocatorReplay out = result_;
    out.segments = static_cast<int>(segments_);
    return out;
  }
  double alive() const { return alive_; }
  // The largest free block now, in any segment (0 when none): what a later
  // request of that size or less is served from without mapping a segment.
  double largest_free() const {
    double largest = 0;
    for (size_t i = 0; i < count_; ++i)
      if (blocks_[i].free && blocks_[i].size > largest) largest = blocks_[i].size;
    return largest;
  }

 private:
  uint32_t invalid() {
    result_.valid = false;
    return 0;
  }

  std::array<caching_allocator_detail::Block, Capacity> blocks_{};
  size_t count_ = 0;
  uint32_t segments_ = 0;
  double alive_ = 0;
  AllocatorReplay result_{};
  bool skip_small_ = false;
};

// A replay of `requests` through a table of kReplayBlocks blocks.
inline AllocatorReplay replay_caching_allocator(std::span<const AllocatorRequest> requests) {
  CachingAllocatorBlocks<kReplayBlocks> blocks;
  for (const AllocatorRequest& request : requests) {
    if (request.kind == AllocatorRequest::Kind::allocate) {
      // Ids are the caller's; the table reserves 0 for "left out": shift them by one.
      if (request.id == UINT32_MAX) return AllocatorReplay{.valid = false};
      blocks.allocate(request.id + 1, request.bytes);
    } else {
      blocks.release(request.id + 1);
    }
    if (!blocks.result().valid) return blocks.result();
  }
  return blocks.result();
}

}  // namespace memplan::support
