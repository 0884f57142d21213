// The caching allocator's logits-sized segments over a run whose steps differ
// in length (a batch of one at each sample's own length, or padded to each
// batch's longest sample), over the order of the samples.
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
// step needs s (lengths binned by the segment each request rounds to:
// get_allocation_size, 2 MiB granules from 10 MiB, 20 MiB below). The first
// step maps its own set (`first`, which holds the 16-bit requests too) where a
// longer step maps only `longer`; a step more than twice as long as every step
// before maps the first step's set too (its 16-bit requests no longer fit the
// older fp32 blocks): the difference first - longer is added at each step of
// length l that is the first of the run at l / 2 or more with length l, with
// probability p_l / P(>= l/2) x (1 - P(< l/2)^steps) (the first step is such a
// step at its own length).
#pragma once

#include <memplan/support/caching_allocator.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>
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

// What the loss path maps at the longest length (max), as the requests that
// map segments (before the segments' rounding): `first`, a first step;
// `longer`, a step longer than every step before, in `segments` requests of
// equal size. Both scale with the step's length.
struct LossPoolAtMax {
  double first = 0;
  double longer = 0;
  int segments = 0;
};

// The segment one of a longer step's requests maps at `tokens` of `max`
// (get_allocation_size rounding): the requests scale with the step's length.
inline double longer_step_segment(const LossPoolAtMax& pool, double tokens, int64_t max) {
  return segment_size(pool.longer / pool.segments * tokens / static_cast<double>(max));
}

// A first step's requests beyond a longer step's (its 16-bit set), at `tokens` of `max`.
inline double first_step_extra(const LossPoolAtMax& pool, double tokens, int64_t max) {
  return std::max(0.0, pool.first - pool.longer) * tokens / static_cast<double>(max);
}

// The distribution and its bins, built once; the mean and the quantiles read them.
class VaryingLengthPool {
 public:
  VaryingLengthPool(const StepLengths& lengths, const LossPoolAtMax& pool) : lengths_(lengths), pool_(pool) {
    valid_ = lengths.min >= 1 && lengths.max >= lengths.min && lengths.per_step >= 1 && lengths.steps >= 1 &&
             std::isfinite(lengths.steps) && pool.longer > 0 && std::isfinite(pool.longer) && pool.segments >= 1 &&
             pool.first >= 0 && std::isfinite(pool.first) && std::isfinite(lengths.sd) && lengths.sd >= 0 &&
             std::isfinite(lengths.mean);
    if (!valid_) return;
    const size_t count = static_cast<size_t>(lengths.max - lengths.min + 1);
    cumulative_.resize(count);
    valid_ = sample_cumulative();
    if (!valid_) return;
    // A step's length is the longest of its samples: P(step <= l) = P(sample <= l)^per_step.
    for (double& c : cumulative_) c = std::pow(c, static_cast<double>(lengths.per_step));
    cumulative_.back() = 1;
    bin_end_.resize(count);
    for (size_t i = count; i-- > 0;)
      bin_end_[i] = i + 1 < count && segment_at(i + 1) == segment_at(i) ? bin_end_[i + 1] : i;
  }

  bool valid() const { return valid_; }

  // The expected bytes at the run's end (0 where not valid()).
  double mean() const {
    if (!valid_) return 0;
    double expected = 0, below = 0;
    for (size_t i = 0; i < cumulative_.size(); i = bin_end_[i] + 1) {
      const size_t end = bin_end_[i];
      const double in_bin = cumulative_[end] - below;
      if (in_bin > 0 && below < 1)
        expected += in_bin / (1 - below) * (1 - std::pow(below, lengths_.steps)) * pool_.segments * segment_at(i);
      below = cumulative_[end];
    }
    // The 16-bit set, at each step that is the first at half its length or more.
    for (size_t i = 0; i < cumulative_.size(); ++i) {
      const double p = cumulative_[i] - (i == 0 ? 0.0 : cumulative_[i - 1]);
      const double shorter = below_half(i);  // P(a step < half of this length)
      if (p > 0 && shorter < 1)
        expected += p / (1 - shorter) * (1 - std::pow(shorter, lengths_.steps)) * first_extra(tokens(i));
    }
    return expected;
  }

  // The bytes at the run's end at each of `quantiles` (0 to 1), over `runs`
  // random orders sampled with a fixed seed (the same figures every time),
  // into `out` (same size). A run is simulated by its steps longer than all
  // before only: after a step in bin k the next longer one comes after a
  // geometric number of steps (probability P(> k) each) and its length is
  // drawn above k. False where not valid() or a quantile is outside [0, 1].
  bool quantiles(std::span<const double> quantiles, std::span<double> out, int runs = 1001) const {
    if (!valid_ || runs < 1 || out.size() != quantiles.size()) return false;
    for (double q : quantiles)
      if (!(q >= 0 && q <= 1)) return false;
    const size_t count = cumulative_.size();
    uint64_t state = 0x9e3779b97f4a7c15ULL;  // splitmix64
    const auto uniform = [&state] {
      uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
      z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
      z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
      z ^= z >> 31;
      return (static_cast<double>(z >> 11) + 0.5) / 9007199254740992.0;  // in (0, 1)
    };
    const auto length_at = [&](double u) {  // the first length whose cumulative probability reaches u
      return std::min(static_cast<size_t>(std::lower_bound(cumulative_.begin(), cumulative_.end(), u) -
                                          cumulative_.begin()),
                      count - 1);
    };
    std::vector<double> totals(static_cast<size_t>(runs));
    for (double& total : totals) {
      size_t at = length_at(uniform());
      total = pool_.segments * segment_at(at) + first_extra(tokens(at));
      double steps_left = lengths_.steps - 1;
      double longest = tokens(at);  // the longest step so far
      for (;;) {
        const double below = cumulative_[bin_end_[at]];
        const double above = 1 - below;
        if (!(above > 0) || !(steps_left >= 1)) break;
        // Steps until the next longer one: geometric on {1, 2, ...}.
        const double wait = above >= 1 ? 1 : std::ceil(std::log(uniform()) / std::log1p(-above));
        if (!(wait <= steps_left)) break;
        steps_left -= wait;
        const size_t past = bin_end_[at];  // above > 0: a longer bin exists
        at = std::max(length_at(below + uniform() * above), past + 1);
        total += pool_.segments * segment_at(at);
        if (2 * longest < tokens(at)) total += first_extra(tokens(at));  // its 16-bit set finds no block either
        longest = tokens(at);
      }
    }
    std::sort(totals.begin(), totals.end());
    for (size_t i = 0; i < quantiles.size(); ++i)
      out[i] = totals[static_cast<size_t>(std::lround(quantiles[i] * (runs - 1)))];
    return true;
  }

 private:
  double tokens(size_t i) const { return static_cast<double>(lengths_.min + static_cast<int64_t>(i)); }

  // The segment one request maps at length index i (get_allocation_size).
  double segment_at(size_t i) const { return longer_step_segment(pool_, tokens(i), lengths_.max); }

  // P(a step is shorter than half the length at index i): lengths below ceil(l / 2).
  double below_half(size_t i) const {
    const int64_t half = (lengths_.min + static_cast<int64_t>(i) + 1) / 2;  // ceil(l / 2)
    if (half <= lengths_.min) return 0;
    return cumulative_[static_cast<size_t>(half - 1 - lengths_.min)];
  }

  // The first step's requests beyond a longer step's (its 16-bit set), at `length`.
  double first_extra(double length) const { return first_step_extra(pool_, length, lengths_.max); }

  // A sample's cumulative distribution over [min, max], one entry per token
  // count; false where the figures give none. The normal's weights are taken
  // relative to its density at the token count of [min, max] nearest the
  // mean (exponent (z - peak)(z + peak): no cancellation for a far mean), so
  // every weight is finite and the largest is 1; the mass above max (with
  // `truncated`) is the normal's tail integral in the same units.
  bool sample_cumulative() {
    const size_t count = cumulative_.size();
    double total = 0;
    if (!(lengths_.sd > 0)) {
      for (size_t i = 0; i < count; ++i) cumulative_[i] = total += 1;
    } else {
      const double nearest = std::clamp(std::round(lengths_.mean), static_cast<double>(lengths_.min),
                                        static_cast<double>(lengths_.max));
      const double peak = (nearest - lengths_.mean) / lengths_.sd;
      for (size_t i = 0; i < count; ++i) {
        // z^2 - peak^2 as (z - peak)(z + peak), each factor from the token counts directly.
        const double apart = (tokens(i) - nearest) / lengths_.sd;
        const double beside = (tokens(i) + nearest - 2 * lengths_.mean) / lengths_.sd;
        const double weight = tokens(i) == nearest ? 1.0 : std::exp(-0.5 * apart * beside);
        cumulative_[i] = total += std::isfinite(weight) ? weight : 0.0;  // an sd so small z overflows: 0
      }
      if (lengths_.truncated) {
        // The integral of the same weight from max + 1/2 on, with top the z
        // there: sd sqrt(pi/2) erfc(top / sqrt 2) e^(peak^2 / 2).
        const double top = (static_cast<double>(lengths_.max) + 0.5 - lengths_.mean) / lengths_.sd;
        const double tail_mass = std::erfc(top / std::sqrt(2.0));
        const double tail =
            tail_mass > 0 ? std::exp(std::log(lengths_.sd * std::sqrt(std::acos(-1.0) / 2)) + std::log(tail_mass) +
                                     0.5 * peak * peak)
                          : 0.0;  // nothing above max
        if (!std::isfinite(tail)) {  // all but nothing below max: every sample runs at max
          std::fill(cumulative_.begin(), cumulative_.end(), 0.0);
          cumulative_.back() = 1;
          return true;
        }
        total += tail;
        cumulative_.back() = total;
      }
    }
    if (!(total > 0) || !std::isfinite(total)) return false;
    for (double& c : cumulative_) c /= total;
    return true;
  }

  StepLengths lengths_;
  LossPoolAtMax pool_;
  bool valid_ = false;
  std::vector<double> cumulative_;  // per step, by length
  std::vector<size_t> bin_end_;     // the last length of each length's segment-size bin
};

// The expected bytes of the loss path's segments at the run's end; 0 where
// the inputs cannot describe a run (non-positive or non-finite figures).
inline double expected_varying_length_pool(const StepLengths& lengths, const LossPoolAtMax& pool) {
  return VaryingLengthPool(lengths, pool).mean();
}

// One quantile (0 to 1) of the same bytes over 1,001 sampled orders; 0 where
// the inputs cannot describe a run or the quantile is outside [0, 1].
inline double varying_length_pool_quantile(const StepLengths& lengths, const LossPoolAtMax& pool, double quantile) {
  double out = 0;
  const double q[1] = {quantile};
  return VaryingLengthPool(lengths, pool).quantiles(q, std::span<double>(&out, 1)) ? out : 0;
}

// The bytes of the loss path's segments at the end of a run whose steps'
// lengths are known in order (`steps`: each step's tokens, its padded
// length, 1 to `max`), where the expectation above averages over orders:
// the same rule followed step by step, as the sampled orders (quantiles)
// follow it. The first step maps its own set; a step whose requests' segment
// is larger than every step's before maps `segments` new ones and, if it is
// more than twice as long as every step before, the first step's 16-bit set
// too (below 10 MiB a request, where every length's segment is the same 20
// MiB, no step maps either; the expectation's second sum counts the 16-bit
// set there still, a few MiB at most). 0 where the inputs cannot describe a run
// (no step, a step outside [1, max], figures non-positive or not finite).
inline double pool_over_order(std::span<const int64_t> steps, int64_t max, const LossPoolAtMax& pool) {
  if (steps.empty() || max < 1 || !(pool.longer > 0) || !std::isfinite(pool.longer) || pool.segments < 1 ||
      !(pool.first >= 0) || !std::isfinite(pool.first))
    return 0;
  double total = 0, largest_segment = 0;
  int64_t longest = 0;  // the longest step so far, tokens
  for (const int64_t step : steps) {
    if (step < 1 || step > max) return 0;
    const double tokens = static_cast<double>(step);
    const double segment = longer_step_segment(pool, tokens, max);
    if (segment > largest_segment) {  // no cached block holds its requests: new segments
      total += pool.segments * segment;
      // The first step, or one whose 16-bit requests outgrow the older fp32 blocks.
      if (2 * longest < step) total += first_step_extra(pool, tokens, max);
      largest_segment = segment;
    }
    longest = std::max(longest, step);
  }
  return total;
}

}  // namespace memplan::support
