// The experts' weights under a layout that pads their matrices: the one rule
// the quantized plugin (which pads them for one rank) and the layout plugins
// that split them (tensor-parallel, expert-parallel) share.
//
// vLLM's mxfp4 MoE method (vllm/model_executor/layers/quantization/mxfp4.py,
// Mxfp4MoEMethod.create_weights, @ 77cbc13bc in the 0.10 line and @
// f5897613f, 2026-02) allocates each rank's experts padded for its kernels:
// Marlin (GPUs below compute capability 9.0) rounds the rank's intermediate
// size up to a multiple of 128 and the hidden size to one of 256 ("the moe
// marlin kernel requires that for each linear n % 256 == 0 and k % 128 ==
// 0"); the Triton backend rounds the rank's intermediate size to 64 and leaves
// the hidden size. The padding is of the rank's share, so it depends on the
// split: gpt-oss-120b's intermediate 2880 is 720 a rank at TP 4, 768 padded.
//
// An item holds gate, up and down matrices (projections x h x f a rank after
// the split) and, with biases, the gate/up biases (2f, sharded with f) and the
// down bias (h; memplan splits it with the rest, as the tensor-parallel plugin
// splits every expert item).
#pragma once

#include <memplan/plugin_abi.h>

#include <cmath>
#include <cstdint>

namespace memplan::support {

struct ExpertPadding {
  int64_t intermediate = 1;  // a rank's intermediate size is a multiple of this
  int64_t hidden = 1;        // the hidden size is a multiple of this
  bool none() const { return intermediate <= 1 && hidden <= 1; }
};

inline double round_up_to(double value, int64_t multiple) {
  if (multiple <= 1) return value;
  const auto m = static_cast<double>(multiple);
  return std::ceil(value / m - 1e-9) * m;
}

// One rank's share of the experts' matrices (is_bias false) or biases (true),
// split over `split` ranks, as a fraction of the unpadded, unsplit item: 1 /
// split without padding.
inline double expert_share(const memplan_model& model, bool is_bias, int64_t split, ExpertPadding padding) {
  const auto f = static_cast<double>(model.expert_ffn_hidden);
  const auto h = static_cast<double>(model.hidden);
  const auto s = static_cast<double>(split);
  if (f <= 0 || h <= 0 || s <= 0) return 1.0 / (s > 0 ? s : 1.0);
  const double rank_f = round_up_to(f / s, padding.intermediate);
  const double rank_h = round_up_to(h, padding.hidden);
  if (!is_bias) return rank_f * rank_h / (f * h);
  const double up = model.gated_mlp ? 2.0 : 1.0;  // the gate and up biases, or the up bias alone
  return (up * rank_f + rank_h / s) / (up * f + h);
}

// The factor that takes an expert item sized for `from` ranks to `to` ranks.
inline double expert_resplit(const memplan_model& model, bool is_bias, int64_t from, int64_t to,
                             ExpertPadding padding) {
  if (padding.none()) return static_cast<double>(from) / static_cast<double>(to);
  return expert_share(model, is_bias, to, padding) / expert_share(model, is_bias, from, padding);
}

}  // namespace memplan::support
