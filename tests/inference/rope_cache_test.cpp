// vLLM's rotary table (the inference plugin's rope_cache, item rope_cache):
// RotaryEmbedding.__init__ computes cos and sin of max_position_embeddings x
// rotary_dim / 2 in fp32, concatenates them (max_position_embeddings x
// rotary_dim) and casts them to get_rope's dtype, the model dtype, as the
// buffer cos_sin_cache (vllm-project/vllm
// vllm/model_executor/layers/rotary_embedding/base.py @
// 04458da08417899fc04046216c986d28abeb85af and @
// 072d10a084c2b89e63323c781eacd7d7e218ba2b). get_rope returns one instance per
// configuration, so the layers share it, and tensor parallelism leaves it
// whole. It is built with the model, so vLLM's "weights memory" holds it. The
// vllm profile sets rope_cache = true.
#include <gtest/gtest.h>

#include <string>

#include "test_support.hpp"

namespace memplan::testing {
namespace {

std::string serve(const std::string& model, int tensor, const std::string& options) {
  std::string text = "name = \"s\"\nmode = \"infer\"\n[framework]\nuse = \"vllm\"\nversion = \"0.19\"\n[model]\n" +
                     model + "[batch]\nmicro_batch = 1\nseq_len = 16\n[precision]\nuse = \"bf16\"\n"
                     "[activations]\nuse = \"inference\"\n" + options;
  if (tensor > 1) text += "[[strategy]]\nuse = \"tensor-parallel\"\nsize = " + std::to_string(tensor) + "\n";
  return text + "[hardware]\ngpu = \"h100-sxm-80gb\"\ncount = " + std::to_string(tensor) + "\n";
}

uint64_t rope(const Evaluation& e) { return e.item_bytes("rope_cache", MEMPLAN_ROLE_WEIGHTS); }

// Llama-3.1-8B: max_position_embeddings 131072, head_dim 128, bf16:
// 131072 x 128 x 2 = 33,554,432 bytes, the same on each of 4 tensor ranks.
TEST(RopeCache, OneTableOfMaxContextByHeadDimOnEveryRank) {
  EXPECT_EQ(rope(evaluate(serve("preset = \"llama-3.1-8b\"\n", 1, ""))), 33'554'432u);
  EXPECT_EQ(rope(evaluate(serve("preset = \"llama-3.1-8b\"\n", 4, ""))), 33'554'432u);
  // Off: no item.
  EXPECT_EQ(rope(evaluate(serve("preset = \"llama-3.1-8b\"\n", 1, "rope_cache = false\n"))), 0u);
}

// Llama-4-Scout-17B-16E-Instruct's text_config gives max_position_embeddings
// 10,485,760 (40 x the base model's 262,144): 10,485,760 x 128 x 2 =
// 2,684,354,560 bytes = 2.5 GiB on every rank (validation/VLLM-v019-llama-4-scout-tp4.toml).
TEST(RopeCache, Llama4ScoutInstructsTenMillionPositions) {
  EXPECT_EQ(rope(evaluate(serve("preset = \"llama-4-scout-17b-16e\"\nmax_context = 10485760\n", 4, ""))),
            2'684'354'560u);
}

// DeepSeek-V2-Lite (latent attention): the rope part of the head,
// qk_rope_head_dim 64, over max_position_embeddings 163840:
// 163840 x 64 x 2 = 20,971,520 bytes.
TEST(RopeCache, LatentAttentionRotatesTheRopePart) {
  EXPECT_EQ(rope(evaluate(serve("preset = \"deepseek-v2-lite\"\n", 1, ""))), 20'971'520u);
}

}  // namespace
}  // namespace memplan::testing
