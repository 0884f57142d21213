// The KV cache and serving transients of multi-head latent attention
// (DeepSeek-V2, arXiv 2405.04434, section 2.1.2): one latent of kv_lora_rank
// plus the shared rope key of qk_rope_head_dim per token and layer, no
// separate value, whole on every tensor-parallel rank (vLLM: one kv head of
// head_size kv_lora_rank + qk_rope_head_dim, vllm/v1/kv_cache_interface.py @
// 001cabc1, MLAAttentionSpec.real_page_size_bytes; docs/inference.md).
#include <gtest/gtest.h>

#include <string>

#include "inference_scenarios.hpp"
#include "test_support.hpp"

namespace memplan::testing {
namespace {

uint64_t layer_bytes(const Evaluation& e) { return e.item_bytes("activations.layer", MEMPLAN_ROLE_ACTIVATIONS); }

// DeepSeek-V3: (512 + 64) x 2 bytes = 1,152 B per token and layer, x 61
// layers = 70,272 B per token. The DeepSeek-V2 paper, Table 1: MLA caches
// (d_c + d_h^R) l = 4.5 d_h l elements per token, d_h = 128: 576 per layer.
TEST(LatentKvCache, DeepSeekV3PerToken) {
  EXPECT_EQ(kv_cache_bytes(evaluate_paper(infer_scenario(preset("deepseek-v3"), 1, 1, "block_size = 1\n"))),
            70'272u);
  // fp8: 576 x 61 = 35,136 B per token; 4096 tokens (256 blocks of 16): 143,917,056 B.
  EXPECT_EQ(kv_cache_bytes(evaluate_paper(infer_scenario(preset("deepseek-v3"), 1, 4096, "kv_dtype = \"fp8\"\n"))),
            35'136u * 4096);
}

// The latent is shared by every head, so tensor parallelism does not divide
// it: each of 8 ranks holds the whole 70,272 B per token (vLLM's
// get_num_kv_heads is 1 for MLA whatever the TP size), where a GQA cache
// would shrink 8 ways.
TEST(LatentKvCache, WholeOnEveryTensorParallelRank) {
  const std::string tp8 = "[[strategy]]\nuse = \"tensor-parallel\"\nsize = 8\n";
  EXPECT_EQ(kv_cache_bytes(evaluate_paper(infer_scenario(preset("deepseek-v3"), 1, 1, "block_size = 1\n", tp8))),
            70'272u);
  // A paged block of 16 tokens on every layer of the rank: 16 x 1,152 x 61 =
  // 1,124,352 B (vLLM's page: block_size x 1 x 576 x 2 per layer, no factor 2 for V).
  const Evaluation e = evaluate_paper(infer_scenario(preset("deepseek-v3"), 1, 16, "", tp8));
  EXPECT_EQ(kv_cache_bytes(e), 1'124'352u);
}

// DeepSeek-V2-Lite: 27 layers x 576 x 2 B = 31,104 B per token.
TEST(LatentKvCache, DeepSeekV2LitePerToken) {
  EXPECT_EQ(kv_cache_bytes(evaluate_paper(infer_scenario(preset("deepseek-v2-lite"), 1, 1, "block_size = 1\n"))),
            31'104u);
}

// The forward transient of one DeepSeek-V2-Lite layer over a chunk of c = 512
// tokens, bf16 (p = 2), no tensor parallelism (inference_memory.hpp,
// layer_transient):
//   residual 2 p c h                     = 2 x 2 x 512 x 2048           =  4,194,304
//   attention p c (heads x (192 (Q) + 192 (K) + 128 (V)) + 512 + 64 (latents; no query latent))
//                                        = 2 x 512 x (16 x 512 + 576)  =  8,978,432
//   MLP: 6 routed experts of 1408, 3 projections, and the shared experts' 2816:
//     p c (6 x 1408 x 3 + 2816 x 3)      = 2 x 512 x 33,792            = 34,603,008
//     (the dense first layer's 2 x 512 x 10944 x 3 = 33,619,968 is smaller)
//   4,194,304 + 34,603,008                                             = 38,797,312
TEST(LatentKvCache, DeepSeekV2LitePrefillTransient) {
  const Evaluation e =
      evaluate_paper(infer_scenario(preset("deepseek-v2-lite"), 1, 4096, "prefill_chunk = 512\n"));
  EXPECT_EQ(layer_bytes(e), 38'797'312u);
}

// A pipeline stage holding only the dense first layer (V2-Lite cut after
// layer 0) has no expert on it: its MLP branch is the dense one, 2 x 512 x
// 10944 x 3 = 33,619,968, so 4,194,304 + 33,619,968 = 37,814,272 (the MoE
// branch, 34,603,008, belongs to the other stage).
TEST(LatentKvCache, DenseOnlyStageHasTheDenseTransient) {
  const std::string pp = "[[strategy]]\nuse = \"pipeline-parallel\"\nsize = 2\nfirst_stage_layers = 1\n";
  const Evaluation e =
      evaluate_paper(infer_scenario(preset("deepseek-v2-lite"), 1, 4096, "prefill_chunk = 512\n", pp));
  EXPECT_EQ(layer_bytes(e), 37'814'272u);
}

}  // namespace
}  // namespace memplan::testing
