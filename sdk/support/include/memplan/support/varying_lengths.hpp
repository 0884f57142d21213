// The caching allocator's logits-sized segments over a run whose steps differ
// in length (a batch of one at each sample's own length, or padded to each
// batch's longest sample), in expectation over the order of the samples.
//
// The rule, from PyTorch's CUDA caching allocator (c10/cuda/
// CUDACachingAllocator.cpp: get_free_block takes only a cached block at least
// the request's size; alloc_block maps a new segment when none fits; segments
// go back only on empty_cache or a failed cudaMalloc): a step longer than
// every step before it finds no cached block large enough for its
// logits-sized requests and maps new segments for them, and the segments of
// the earlier, shorter steps stay mapped. Measured on an H100
// (validation/measured/h100-2026-11-28-dynamic.jsonl, a Qwen-1.8B-shaped LoRA
// run of 128 micro-batches at the samples' own lengths): the loss path's pool
// ended at 3 x 1088 + 544 MiB from its first step (1,876 tokens) and three
// more fp32-sized segments at each of the three later steps longer than all
// before (1,897, 1,931 and 2,013 tokens: 1100, 1120, 1168 MiB each), 13,972
// MiB, where a run at a fixed 2,048 tokens keeps 5,346 MiB.
//
// In expectation over a random order of `steps` steps whose lengths are drawn
// independently: a segment size s is mapped (`segments` times) if some step
// needs s and the first step that needs s or more needs exactly s, with
// probability q_s / P(>= s) x (1 - P(< s)^steps), q_s the probability that a
// step needs s (lengths binned by the segment size they round to, 2 MiB).
// The first step maps its own set (`first`, which holds the 16-bit requests
// too) where a longer step maps only `longer`: the difference is added at the
// first step's expected length.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace memplan::support {

// The lengths of a run's steps: each sample's tokens uniform on [min, max],
// or (sd > 0) a normal of `mean` and `sd` over [min, max]: cut there (the
// samples above max dropped), or with `truncated` the normal's mass above max
// at max (samples cut to max tokens); a step pads `per_step` samples to the
// longest.
struct StepLengths {
  int64_t min = 1;
  int64_t max = 1;
  double mean = 0;
  double sd = 0;  // 0: uniform
  bool truncated = false;
  int64_t per_step = 1;
  double steps = 1;  // steps in the run (micro-batches on one GPU)
};

namespace varying_lengths_detail {

// A sample's cumulative distribution over [min, max], one entry per token
// count; false where the figures give none. The normal's weights are taken
// relative to its density at the point of [min, max] nearest the mean, so a
// mean far outside the range still gives weights; the mass above max (with
// `truncated`) is the normal's tail integral in the same units.
inline bool sample_cumulative(const StepLengths& lengths, std::vector<double>& cumulative) {
  const size_t count = cumulative.size();
  double total = 0;
  if (!(lengths.sd > 0)) {
    for (size_t i = 0; i < count; ++i) cumulative[i] = total += 1;
  } else {
    const double nearest = std::clamp(lengths.mean, static_cast<double>(lengths.min), static_cast<double>(lengths.max));
    const double peak = (nearest - lengths.mean) / lengths.sd;
    for (size_t i = 0; i < count; ++i) {
      const double z = (static_cast<double>(lengths.min + static_cast<int64_t>(i)) - lengths.mean) / lengths.sd;
      total += std::exp(-0.5 * (z * z - peak * peak));
      cumulative[i] = total;
    }
    if (lengths.truncated) {
      // The integral of the same weight from max + 1/2 on: sd sqrt(pi/2) erfc(z / sqrt 2) e^(peak^2 / 2).
      const double top = (static_cast<double>(lengths.max) + 0.5 - lengths.mean) / lengths.sd;
      const double log_tail = std::log(lengths.sd * std::sqrt(std::acos(-1.0) / 2)) +
                              std::log(std::erfc(top / std::sqrt(2.0))) + 0.5 * peak * peak;
      const double tail = std::exp(log_tail);
      if (!std::isfinite(tail)) {  // all but nothing above max: every sample runs at max
        std::fill(cumulative.begin(), cumulative.end(), 0.0);
        cumulative.back() = 1;
        return true;
      }
      total += tail;
      cumulative.back() = total;
    }
  }
  if (!(total > 0) || !std::isfinite(total)) return false;
  for (double& c : cumulative) c /= total;
  return true;
}

}  // namespace varying_lengths_detail

// What the loss path maps, at the longest length (max): `first`, a first step;
// `longer`, a step longer than every step before, in `segments` segments of
// equal size. Both scale with the step's length.
struct LossPoolAtMax {
  double first = 0;
  double longer = 0;
  int segments = 0;
};

// The expected bytes of the loss path's segments at the run's end. 0 where
// the inputs cannot describe a run (non-positive or non-finite figures).
inline double expected_varying_length_pool(const StepLengths& lengths, const LossPoolAtMax& pool) {
  constexpr double kRoundLarge = 2.0 * 1024 * 1024;  // get_allocation_size from 10 MiB: 2 MiB granules
  if (lengths.min < 1 || lengths.max < lengths.min || lengths.per_step < 1 || !(lengths.steps >= 1) ||
      !std::isfinite(lengths.steps) || !(pool.longer > 0) || pool.segments < 1 || !(pool.first >= 0) ||
      !std::isfinite(pool.first) || !std::isfinite(pool.longer) || !std::isfinite(lengths.sd) || lengths.sd < 0 ||
      !std::isfinite(lengths.mean))
    return 0;
  const size_t count = static_cast<size_t>(lengths.max - lengths.min + 1);
  std::vector<double> cumulative(count);
  if (!varying_lengths_detail::sample_cumulative(lengths, cumulative)) return 0;
  // A step's length is the longest of its samples: P(step <= l) = P(sample <= l)^per_step.
  const double per_step = static_cast<double>(lengths.per_step);
  for (double& c : cumulative) c = std::pow(c, per_step);
  cumulative.back() = 1;
  const double max = static_cast<double>(lengths.max);
  const double one_segment = pool.longer / pool.segments;  // at max
  const auto segment_at = [&](size_t i) {
    const double tokens = static_cast<double>(lengths.min + static_cast<int64_t>(i));
    return std::ceil(one_segment * tokens / max / kRoundLarge) * kRoundLarge;
  };
  double expected = 0, mean_length = 0, below = 0;
  for (size_t i = 0; i < count;) {
    const double size = segment_at(i);
    size_t end = i;  // the last length of the bin (the same segment size)
    while (end + 1 < count && segment_at(end + 1) == size) ++end;
    for (size_t j = i; j <= end; ++j)
      mean_length += static_cast<double>(lengths.min + static_cast<int64_t>(j)) *
                     (cumulative[j] - (j == 0 ? 0.0 : cumulative[j - 1]));
    const double in_bin = cumulative[end] - below;
    const double at_or_above = 1 - below;
    if (in_bin > 0 && at_or_above > 0)
      expected += in_bin / at_or_above * (1 - std::pow(below, lengths.steps)) * pool.segments * size;
    below = cumulative[end];
    i = end + 1;
  }
  return expected + std::max(0.0, pool.first - pool.longer) * mean_length / max;
}

// The same pool's spread over the orders: the `quantile` (0 to 1) of the
// bytes over `runs` random orders, sampled with a fixed seed (the same figure
// every time). A run is simulated by its steps longer than all before only:
// after a step in size bin k the next longer one comes after a geometric
// number of steps (probability P(> k) each) and its length is drawn above k.
// 0 where expected_varying_length_pool gives 0.
inline double varying_length_pool_quantile(const StepLengths& lengths, const LossPoolAtMax& pool, double quantile,
                                           int runs = 1001) {
  constexpr double kRoundLarge = 2.0 * 1024 * 1024;
  if (!(quantile >= 0 && quantile <= 1) || runs < 1 || expected_varying_length_pool(lengths, pool) <= 0) return 0;
  const size_t count = static_cast<size_t>(lengths.max - lengths.min + 1);
  std::vector<double> cumulative(count);
  varying_lengths_detail::sample_cumulative(lengths, cumulative);
  for (double& c : cumulative) c = std::pow(c, static_cast<double>(lengths.per_step));
  cumulative.back() = 1;
  const double max = static_cast<double>(lengths.max);
  const double one_segment = pool.longer / pool.segments;
  const auto tokens = [&](size_t i) { return static_cast<double>(lengths.min + static_cast<int64_t>(i)); };
  const auto segment_at = [&](size_t i) { return std::ceil(one_segment * tokens(i) / max / kRoundLarge) * kRoundLarge; };
  // The last length of each length's bin (the lengths whose segments round alike).
  std::vector<size_t> bin_end(count);
  for (size_t i = count; i-- > 0;)
    bin_end[i] = i + 1 < count && segment_at(i + 1) == segment_at(i) ? bin_end[i + 1] : i;
  uint64_t state = 0x9e3779b97f4a7c15ULL;  // splitmix64
  const auto uniform = [&state] {
    uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return (static_cast<double>(z >> 11) + 0.5) / 9007199254740992.0;  // in (0, 1)
  };
  const auto length_at = [&](double u) {  // the first length whose cumulative probability reaches u
    return static_cast<size_t>(std::lower_bound(cumulative.begin(), cumulative.end(), u) - cumulative.begin());
  };
  std::vector<double> totals(static_cast<size_t>(runs));
  for (double& total : totals) {
    size_t at = std::min(length_at(uniform()), count - 1);
    total = pool.segments * segment_at(at) + std::max(0.0, pool.first - pool.longer) * tokens(at) / max;
    double steps_left = lengths.steps - 1;
    for (;;) {
      const double below = cumulative[bin_end[at]];
      const double above = 1 - below;
      if (!(above > 0) || !(steps_left >= 1)) break;
      // Steps until the next longer one: geometric on {1, 2, ...}.
      const double wait = above >= 1 ? 1 : std::ceil(std::log(uniform()) / std::log1p(-above));
      if (!(wait <= steps_left)) break;
      steps_left -= wait;
      const size_t past = bin_end[at];  // above > 0: a longer bin exists
      at = std::max(std::min(length_at(below + uniform() * above), count - 1), past + 1);
      total += pool.segments * segment_at(at);
    }
  }
  std::sort(totals.begin(), totals.end());
  return totals[static_cast<size_t>(std::lround(quantile * (runs - 1)))];
}

}  // namespace memplan::support
