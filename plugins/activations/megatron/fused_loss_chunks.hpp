// How many chunks a fused head-and-loss splits its rows into, by the rule that
// sizes each chunk's fp32 logits to a target (cross_entropy = "chunked-fused").
//
// Source: unslothai/unsloth-zoo, unsloth_zoo/fused_losses/cross_entropy_loss.py,
// get_chunk_size and _get_chunk_multiplier. With F the fp32 logits of one call
// (rows x vocab x 4 bytes, in GiB) and T the target in GiB:
//   "nearest" (fc29e051, 2025-08-13, to zoo 2026.6.x):
//       n = max(round(F / T / 4) x 4, 1), Python's round (halves to even);
//   "up" (d9fe1f43, 2026-07-06, first in zoo 2026.7.1):
//       n = 1 where F <= T, else ceil(F / T / 4) x 4.
// T is the caller's target_gb, or half the free memory (torch.cuda.mem_get_info)
// where the caller passes none, capped at 4 GiB from d9fe1f43. The free memory
// at the first call is not known here: `free_share` takes that share of the
// GPU's whole memory instead, an upper bound of the free memory (fewer, larger
// chunks: the transient is not underestimated). torch.chunk then cuts the rows
// into pieces of ceil(rows / n) rows (fewer than n pieces where that divides
// them so).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace memplan::plugins {

enum class ChunkRounding : uint8_t { nearest, up };

struct FusedLossChunking {
  double fixed_chunks = 0;  // loss_chunks: a fixed count (UNSLOTH_CE_LOSS_N_CHUNKS, zoo 2025.11.6 on); 0: by the target
  double target_gib = 0;    // loss_chunk_target_gib: the fp32 chunk's target in GiB; 0: none
  double free_share = 0;    // loss_chunk_free_share: a share of the GPU's memory as a target; 0: none
  ChunkRounding rounding = ChunkRounding::up;
};

// The rows of the largest piece torch.chunk cuts: ceil(rows / n), n the rule's count (at most the rows). The
// pieces are ceil(rows / that) in number.
inline double fused_loss_piece_rows(const FusedLossChunking& rule, double rows, double vocab, double gpu_bytes) {
  constexpr double kGiB = 1073741824.0;
  if (rows <= 0 || vocab <= 0) return rows > 0 ? rows : 1;
  double n = 1;
  if (rule.fixed_chunks > 0) {
    n = rule.fixed_chunks;
  } else {
    double target = rule.target_gib;
    if (rule.free_share > 0 && gpu_bytes > 0) {
      const double share = rule.free_share * gpu_bytes / kGiB;
      target = target > 0 ? std::min(target, share) : share;
    }
    if (target > 0) {
      const double ratio = rows * vocab * 4 / kGiB / target;
      if (rule.rounding == ChunkRounding::nearest)
        n = std::max(std::nearbyint(ratio / 4) * 4, 1.0);  // the default rounding mode rounds halves to even
      else
        n = ratio <= 1 + 1e-9 ? 1 : std::ceil(ratio / 4 - 1e-9) * 4;
    }
  }
  return std::ceil(rows / std::min(n, rows));
}

// The chunks' count as the size ratio it gives: `rows` over the largest chunk's rows (so that bytes per logit
// element / chunks is that chunk's).
inline double fused_loss_chunks(const FusedLossChunking& rule, double rows, double vocab, double gpu_bytes) {
  if (rows <= 0 || vocab <= 0) return 1;
  return rows / fused_loss_piece_rows(rule, rows, vocab, gpu_bytes);
}

}  // namespace memplan::plugins
