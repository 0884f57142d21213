// Scenario text and plan queries shared by the optimizer tests.
#pragma once

#include <memplan/plugin_abi.h>

#include <string>
#include <string_view>

#include "test_support.hpp"

namespace memplan::testing::optimizers {

// A tiny dense model whose tensors are counted by hand below:
// L = 2 layers, h = 64, 4 heads, 2 kv heads (head_dim 16: q = 64, kv = 32),
// SwiGLU f = 128, V = 1000, RMSNorm, untied embeddings.
//   embed_tokens 1000 x 64 = 64,000        lm_head 64 x 1000 = 64,000
//   per layer    q 64 x 64 = 4,096         k, v 64 x 32 = 2,048 each
//                o 64 x 64 = 4,096         MLP 3 x 64 x 128 = 24,576
//                2 norms x 64 = 128        layer sum 36,992
//   final_norm 64
//   total 64,000 + 2 x 36,992 + 64 + 64,000 = 202,048 parameters
inline constexpr double kTinyParameters = 202'048;
inline const std::string kTinyModel =
    "[model]\nlayers = 2\nhidden = 64\nheads = 4\nkv_heads = 2\nffn_hidden = 128\nvocab = 1000\n"
    "mlp = \"swiglu\"\n";

// A training scenario: `model`, then [precision], [optimizer] and `extra`
// tables (strategies), activations "none" so model states stand alone.
inline std::string train(const std::string& model, const std::string& precision, const std::string& optimizer,
                         const std::string& extra = "") {
  return "name = \"t\"\nmode = \"train\"\n" + model + "[batch]\nmicro_batch = 1\nseq_len = 16\n[precision]\n" +
         precision + "\n[optimizer]\n" + optimizer + "\n[activations]\nuse = \"none\"\n" + extra;
}

inline std::string params_model(double params) { return "[model]\nparams = " + std::to_string(params) + "\n"; }

inline std::string data_parallel_zero(int size, int stage) {
  return "[[strategy]]\nuse = \"data-parallel\"\nsize = " + std::to_string(size) +
         "\n[[strategy]]\nuse = \"zero\"\nstage = " + std::to_string(stage) + "\n";
}

// GPU bytes of the items with `role` and `lifetime`.
inline uint64_t bytes_of(const Evaluation& evaluation, int32_t role, int32_t lifetime) {
  uint64_t bytes = 0;
  for (const PlanItem& item : evaluation.estimator().plan().items)
    if (item.device == MEMPLAN_DEVICE_GPU && item.role == role && item.lifetime == lifetime) bytes += item.bytes();
  return bytes;
}

// GPU bytes of the items whose name ends with `suffix`.
inline uint64_t bytes_named(const Evaluation& evaluation, std::string_view suffix) {
  uint64_t bytes = 0;
  for (const PlanItem& item : evaluation.estimator().plan().items) {
    const std::string_view name = item.name_view();
    if (item.device == MEMPLAN_DEVICE_GPU && name.size() >= suffix.size() &&
        name.substr(name.size() - suffix.size()) == suffix)
      bytes += item.bytes();
  }
  return bytes;
}

inline uint64_t optimizer_step(const Evaluation& evaluation) {
  return evaluation.breakdown().timeline[kOptimizerStep];
}

}  // namespace memplan::testing::optimizers
