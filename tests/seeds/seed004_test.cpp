// Seed 004: "LLM Training Acceleration" notes, section 15.1. Unit GB = 10^9
// bytes (its 16-bytes-per-parameter table, 0.5B -> 8 GB, is checked in
// tests/sources/bytes_per_parameter_test.cpp, Seed004SixteenBytesPerParameter;
// Example 15.1, 31.4 GB, in tests/sources/zero_table1_test.cpp).
//
// Its activation formula, per layer with p bytes per value:
//   FFN 9bsdp + bsd, MHA 5bsdp + 2bs^2Hp + bsd + bs^2H, two norms 2bsdp
//   M = L (16 bsdp + 2 bsd + 2 bs^2 H p + bs^2 H) = L bsd (34 + 5sH/d) at p = 2
// is Korthikanti et al.'s sbh (34 + 5as/h) for multi-head attention, a 4d
// GELU MLP, dropout and no FlashAttention, i.e. the 'megatron' plugin's
// per-layer item for that shape. Its Qwen2 table (b = 1, s = 4096) does not
// follow from it: see docs/seed-notes.md.
#include <gtest/gtest.h>

#include <string>

#include "test_support.hpp"

namespace memplan::testing {
namespace {

// The seed's shape assumptions for a Qwen2 size: L layers, d hidden, H heads,
// MLP 4d with two projections, dropout on, the s x s scores stored, p = 2.
uint64_t seed_formula_bytes(int layers, int hidden, int heads) {
  const std::string toml =
      "name = \"seed004-qwen2\"\nmode = \"train\"\n[model]\nlayers = " + std::to_string(layers) +
      "\nhidden = " + std::to_string(hidden) + "\nheads = " + std::to_string(heads) +
      "\nffn_hidden = " + std::to_string(4 * hidden) +
      "\nvocab = 151936\nmlp = \"gelu\"\n[batch]\nmicro_batch = 1\nseq_len = 4096\n[precision]\nuse = \"mixed-bf16\"\n"
      "[optimizer]\nuse = \"adamw\"\n[activations]\nuse = \"megatron\"\ndropout = true\nflash_attention = false\n";
  Evaluation e = evaluate_paper(toml);
  return e.item_bytes("layers.0-" + std::to_string(layers - 1) + ".activations", MEMPLAN_ROLE_ACTIVATIONS);
}

// L bsd (34 + 5sH/d) with b = 1, s = 4096:
//   0.5B: 24 x (34 x 4096 x 896 + 5 x 4096^2 x 14)  = 31,180,455,936 (31.2 GB; the seed prints 2.9 + 2 = 4.9 GB)
//   7B:   28 x (34 x 4096 x 3584 + 5 x 4096^2 x 28) = 79,742,107,648 (79.7 GB; the seed prints 3.9 + 4 = 7.9 GB)
//   72B:  64 x (34 x 4096 x 8192 + 5 x 4096^2 x 64) = 416,611,827,712 (416.6 GB; the seed prints 71 + 8 = 79 GB)
TEST(Seed004, QwenActivationTableFromTheSeedsOwnFormula) {
  EXPECT_EQ(seed_formula_bytes(24, 896, 14), 31'180'455'936u);
  EXPECT_EQ(seed_formula_bytes(28, 3584, 28), 79'742'107'648u);
  EXPECT_EQ(seed_formula_bytes(64, 8192, 64), 416'611'827'712u);
}


// What memplan's 'megatron' model gives for Qwen2-0.5B's real architecture
// (Qwen2 technical report, arXiv 2407.10671, Table 1: 24 layers, d 896, 14
// heads, 2 kv heads of 64, SwiGLU 4864, vocabulary 151936, tied embeddings),
// trained as Qwen2 is, with FlashAttention and no dropout, b 1, s 4096, bf16.
// Per token and layer: norms 4 x 2 x 896 = 7,168; Q and attention output
// 2 x 2 x 896 = 3,584; K and V 2 x 2 x 128 = 512; SwiGLU 3 x 2 x 4864 =
// 29,184; log-sum-exp 4 x 14 = 56: 40,504 x 4096 x 24 layers = 3,981,705,216.
// Final norm 2 x 2 x 4096 x 896 = 14,680,064; fp32 logits and softmax
// 2 x 4 x 4096 x 151936 = 4,978,638,848. In all 8,975,024,128 (8.98 GB) at
// the forward's end: the vocabulary's logits are more than the 24 layers.
// The logits and the softmax are freed once the loss and the LM head have run
// backward (transients of the forward's end); backward's start holds them as the loss's
// moment (lifetime backward_start) less the tied head's gradient 151936 x 896
// x 2 = 272,269,312: 4,706,369,536, an item of its own, so the activations
// component (every activation item) is 8,975,024,128 + 4,706,369,536 =
// 13,681,393,664.
TEST(Seed004, QwenHalfBillionWithItsRealArchitecture) {
  Evaluation e = evaluate_paper(
      "name = \"qwen2-0.5b\"\nmode = \"train\"\n[model]\nlayers = 24\nhidden = 896\nheads = 14\nkv_heads = 2\n"
      "ffn_hidden = 4864\nvocab = 151936\ntied_embeddings = true\nmlp = \"swiglu\"\nqkv_bias = true\n[batch]\n"
      "micro_batch = 1\nseq_len = 4096\n[precision]\nuse = \"mixed-bf16\"\n[optimizer]\nuse = \"adamw\"\n"
      "[activations]\nuse = \"megatron\"\nflash_attention = true\ndropout = false\n");
  EXPECT_DOUBLE_EQ(e.breakdown().params_total, 494'032'768);  // Qwen2-0.5B's published count, with q/k/v biases
  EXPECT_EQ(e.item_bytes("layers.0-23.activations", MEMPLAN_ROLE_ACTIVATIONS), 3'981'705'216u);
  uint64_t forward_end = 0;
  for (const PlanItem& item : e.estimator().plan().items)
    if (item.role == MEMPLAN_ROLE_ACTIVATIONS &&
        (item.lifetime == MEMPLAN_LIFETIME_ACTIVATION || item.lifetime == MEMPLAN_LIFETIME_TRANSIENT_FORWARD ||
         item.lifetime == MEMPLAN_LIFETIME_FORWARD_END))
      forward_end += item.bytes();
  EXPECT_EQ(forward_end, 8'975'024'128u);
  EXPECT_EQ(e.item_bytes("activations.loss_backward", MEMPLAN_ROLE_ACTIVATIONS), 4'706'369'536u);
  EXPECT_EQ(e.component(MEMPLAN_ROLE_ACTIVATIONS), 13'681'393'664u);
}

}  // namespace
}  // namespace memplan::testing
