// 'context-parallel' runtime = "torch": torch's context_parallel ring
// attention with its "allgather" rotate method (torch 2.6
// torch/distributed/tensor/experimental/_attention.py: _AllGatherRotater,
// _templated_ring_attention and its backward), sized by 'megatron'.
//
// Hand derivation, Llama 3.1 405B (128 query heads of 128: q width 16,384),
// torchtitan's Table 6 row FSDP 1, CP 8: micro-batch 1 x 262,144 tokens, cp 8,
// t 8, bf16, K and V repeated to the query heads before SDPA:
//   u = 1 x 262,144 / 8 x 16,384 / 8                       =    67,108,864 elements (one of K, V)
//   forward:  gathered K and V 2 cp u x 2 B = 32 u, fp32 merge 8 u  = 40 u = 2,684,354,560 B
//   backward: gathered again 32 u, fp32 dQ dK dV 12 u,
//             the dK/dV exchange sent and received 16 u          = 60 u = 4,026,531,840 B
// The ring's forward buffers live only while a layer's forward runs (lifetime
// forward_in_layers), and on the last stage the loss's forward runs after the
// layers' (forward_end), so the larger counts: the loss-parallel forward
// (10 B x 32,768 x 16,032 = 5,253,365,760 B) hides the ring's forward; in
// backward the loss's 12 B x 525,336,576 = 6,304,038,912 B, with its saved
// 4 B x 525,336,576 = 2,101,346,304 B (the last stage's one micro-batch in
// flight: autograd frees them once the loss has run backward, so they are
// part of the loss's moment at backward's start, lifetime backward_start, not
// stored activations): 16 B x 525,336,576 = 8,405,385,216 B, exceed the
// layer's working set plus the ring's by activations.loss_backward.
#include <gtest/gtest.h>

#include <string>

#include "test_support.hpp"

namespace memplan::testing {
namespace {

constexpr uint64_t kU = 67'108'864;  // 32768 tokens x 16384 / 8

std::string llama405b_cp8(const std::string& context, const std::string& stage) {
  return "name = \"cp-ring\"\nmode = \"train\"\n[model]\npreset = \"llama-3.1-405b\"\n[batch]\nmicro_batch = 1\n"
         "seq_len = 262144\nbeyond_context = true\ngrad_accum = 8\n[precision]\nuse = \"mixed-bf16\"\n"
         "[optimizer]\nuse = \"adamw\"\n[activations]\nuse = \"megatron\"\nflash_attention = true\n"
         "dropout = false\ncross_entropy = \"loss-parallel\"\n[[strategy]]\nuse = \"recompute\"\npolicy = \"full\"\n"
         "[[strategy]]\nuse = \"tensor-parallel\"\nsize = 8\nsequence_parallel = true\n"
         "[[strategy]]\nuse = \"context-parallel\"\nsize = 8\n" +
         context + "[[strategy]]\nuse = \"pipeline-parallel\"\nsize = 8\nfirst_stage_layers = 15\n" +
         "last_stage_layers = 15\n" + stage;
}

TEST(ContextRing, FirstStageHoldsTheGatheredKeysAndValues) {
  EXPECT_EQ(kU, 262144ull / 8 * 16384 / 8);
  Evaluation ring = evaluate_paper(llama405b_cp8("runtime = \"torch\"\n", ""));
  EXPECT_EQ(ring.item_bytes("context_parallel.ring_forward", MEMPLAN_ROLE_ACTIVATIONS), 40 * kU);
  EXPECT_EQ(ring.item_bytes("context_parallel.ring_backward", MEMPLAN_ROLE_ACTIVATIONS), 60 * kU);
  EXPECT_EQ(60 * kU, 4'026'531'840u);
  Evaluation plain = evaluate_paper(llama405b_cp8("", ""));
  EXPECT_EQ(plain.item_bytes("context_parallel.ring_backward", MEMPLAN_ROLE_ACTIVATIONS), 0u);
  EXPECT_EQ(ring.breakdown().quantities[kAllocated].timeline[kBackward] -
                plain.breakdown().quantities[kAllocated].timeline[kBackward],
            60 * kU);
}

TEST(ContextRing, OnTheLastStageTheLossOutweighsIt) {
  Evaluation ring = evaluate_paper(llama405b_cp8("runtime = \"torch\"\n", "stage = \"last\"\n"));
  Evaluation plain = evaluate_paper(llama405b_cp8("", "stage = \"last\"\n"));
  EXPECT_EQ(ring.item_bytes("context_parallel.ring_forward", MEMPLAN_ROLE_ACTIVATIONS), 40 * kU);
  EXPECT_EQ(ring.item_bytes("context_parallel.ring_backward", MEMPLAN_ROLE_ACTIVATIONS), 60 * kU);
  const uint64_t working_set = plain.item_bytes("activations.recompute", MEMPLAN_ROLE_ACTIVATIONS);
  EXPECT_EQ(plain.item_bytes("activations.loss_backward", MEMPLAN_ROLE_ACTIVATIONS),
            16ull * 525'336'576 - working_set);
  EXPECT_EQ(ring.item_bytes("activations.loss_backward", MEMPLAN_ROLE_ACTIVATIONS),
            16ull * 525'336'576 - working_set - 60 * kU);
  // The loss's backward is the larger transient: the high points do not move.
  EXPECT_EQ(ring.breakdown().quantities[kAllocated].timeline[kBackward],
            plain.breakdown().quantities[kAllocated].timeline[kBackward]);
  EXPECT_EQ(ring.breakdown().quantities[kAllocated].timeline[kForward],
            plain.breakdown().quantities[kAllocated].timeline[kForward]);
}

TEST(ContextRing, Errors) {
  EXPECT_NE(error_of(llama405b_cp8("runtime = \"ring\"\n", "")).find("must be \"megatron\" or \"torch\""),
            std::string::npos);
}

}  // namespace
}  // namespace memplan::testing
