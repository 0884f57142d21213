// 'transformer-step' for DeepSeek's layers: multi-head latent attention's
// core (QK^T over the q/k head width, softmax(QK^T) V over v_head_dim), the
// dense first layers, the routed and shared experts, against Megatron-LM's
// num_floating_point_operations (megatron/training/training.py @
// d98e8a64ddf3, transformer_flops, multi_latent_attention branch) and hand
// derivations written beside each test.
#include <gtest/gtest.h>

#include <string>
#include <string_view>

#include "test_support.hpp"

namespace memplan::testing {
namespace {

std::string step(const std::string& preset, const std::string& strategies, const std::string& flops_options = "") {
  return "name = \"mla-step\"\nmode = \"train\"\n[model]\npreset = \"" + preset +
         "\"\n[batch]\nmicro_batch = 1\nseq_len = 4096\n[precision]\nuse = \"mixed-bf16\"\n[optimizer]\n"
         "use = \"adamw\"\n[activations]\nuse = \"none\"\n" + strategies +
         "[[strategy]]\nuse = \"transformer-step\"\n" + flops_options + "[hardware]\ngpu = \"h100-sxm-80gb\"\n";
}

// Megatron-LM's formula for DeepSeek-V3 (61 layers, 3 dense; h 7168; 128
// heads; q_lora_rank 1536, kv_lora_rank 512, qk_head_dim (no-rope) 128,
// qk_pos_emb_head_dim 64, v_head_dim 128; SwiGLU 18432 dense, 256 experts of
// 2048 top 8, one shared expert of 2048; vocabulary 129,280; no MTP layers),
// for one sequence of s = 4096 tokens, written as training.py writes it:
//   self_attn_term = 3 x 2 x (q_lora x (h + heads (nope + rope) + 1)
//                             + kv_lora x (h + heads (nope + v) + 1) + h rope + heads v h)
//   self_attn_core_term = 3 x 2 x (heads (nope + rope) / 2 + heads v / 2)
//   total = tokens x (3 x 2 x h x (3 ffn x dense + 3 moe_ffn x top_k x moe + 3 shared x moe)
//                     + self_attn_term x layers + 3 x 2 x h x vocab)
//           + s^2 x self_attn_core_term x layers
// memplan counts the same matrix multiplies from the inventory's weights, but
//   - not the latent norms Megatron-LM adds (the "+ 1" terms: 6 x (1536 + 512)
//     per token and layer): norms are element-wise work, not matrix multiplies;
//   - the router (h x experts + the routing bias, 2 FLOPs per element and token,
//     x 3 for backward), which Megatron-LM leaves out;
//   - the causal core over the s (s + 1) / 2 pairs a causal mask keeps (the
//     diagonal included), where Megatron-LM takes s^2 / 2: its core x (s + 1) / s.
TEST(LatentAttentionStep, DeepSeekV3MatchesMegatronLmFormula) {
  Evaluation e = evaluate_paper(step("deepseek-v3", ""));
  const double h = 7168, heads = 128, q_lora = 1536, kv_lora = 512, nope = 128, rope = 64, v = 128;
  const double layers = 61, dense = 3, moe = 58, ffn = 18432, moe_ffn = 2048, top_k = 8, shared = 2048;
  const double experts = 256, vocab = 129280, s = 4096, tokens = 4096;
  const double self_attn_term = 3 * 2 *
                                (q_lora * (h + heads * (nope + rope) + 1) + kv_lora * (h + heads * (nope + v) + 1) +
                                 h * rope + heads * v * h);
  const double self_attn_core_term = 3 * 2 * (heads * (nope + rope) / 2 + heads * v / 2);
  const double megatron =
      tokens * (3 * 2 * h * (3 * ffn * dense + 3 * moe_ffn * top_k * moe + 3 * shared * moe) + self_attn_term * layers +
                3 * 2 * h * vocab) +
      s * s * self_attn_core_term * layers;
  const double norms = tokens * layers * 3 * 2 * (q_lora + kv_lora);
  const double router = tokens * moe * 3 * 2 * (h * experts + experts);
  const double diagonal = s * s * self_attn_core_term * layers / s;
  const StepTime& time = e.breakdown().time;
  EXPECT_NEAR(time.model_flops / (megatron - norms + router + diagonal), 1.0, 1e-12);
  // The attention core is 122,880 s^2 FLOPs per layer and sequence in Megatron-LM's count:
  // 3 x 2 x (128 x 192 / 2 + 128 x 128 / 2); a model with 128 x 192 value heads would have 147,456.
  EXPECT_EQ(self_attn_core_term, 122'880);
}

// DeepSeek-V2-Lite by hand (27 layers, layer 0 dense; h 2048; 16 heads of
// 128 + 64, values of 128; kv_lora_rank 512, no query latent), s = 4096, one
// GPU, every weight training. Matrix-multiply weights each token passes:
//   attention per layer: q 2048 x 3072 = 6,291,456, kv_a 2048 x 576 = 1,179,648,
//     kv_b 512 x 4096 = 2,097,152, o 2048 x 2048 = 4,194,304: 13,762,560 x 27 = 371,589,120
//   dense MLP (layer 0): 3 x 2048 x 10944 = 67,239,936
//   MoE layers 1-26: 6 of 64 experts 6 x 3 x 2048 x 1408 = 51,904,512, the shared experts
//     3 x 2048 x 2816 = 17,301,504, the router 2048 x 64 = 131,072: 69,337,088 x 26 = 1,802,764,288
//   LM head 2048 x 102,400 = 209,715,200
//   = 2,451,308,544; forward and backward 6 x 2,451,308,544 x 4096 = 60,243,358,777,344
// Attention core, causal: 3 x 2 x (16 x 192 + 16 x 128) x 4096 x 4097 / 2 x 27
//   = 15,360 x 4096 x 4097 x 27 = 6,959,545,712,640.
// Total 67,202,904,489,984.
TEST(LatentAttentionStep, DeepSeekV2LiteByHand) {
  Evaluation e = evaluate_paper(step("deepseek-v2-lite", ""));
  EXPECT_NEAR(e.breakdown().time.model_flops / 67'202'904'489'984.0, 1.0, 1e-12);
}

// Tensor parallelism 2 splits the heads: the core over all pairs minus the
// causal one is 3 x 2 x (3072 + 2048) / 2 x (4096^2 - 4096 x 4097 / 2) x 27
// = 15,360 x 27 x 4096 x 4095 / 2 = 3,478,074,163,200 per GPU.
TEST(LatentAttentionStep, DeepSeekV2LiteCoreUnderTensorParallelism) {
  const std::string tp = "[[strategy]]\nuse = \"tensor-parallel\"\nsize = 2\n";
  const double full = evaluate_paper(step("deepseek-v2-lite", tp, "causal = false\n")).breakdown().time.model_flops;
  const double causal = evaluate_paper(step("deepseek-v2-lite", tp)).breakdown().time.model_flops;
  EXPECT_NEAR((full - causal) / 3'478'074'163'200.0, 1.0, 1e-12);
}

// Expert parallelism's dispatch and combine run on the MoE layers only: 26 of
// DeepSeek-V2-Lite's 27 (layer 0 is dense). Per pass 2 all-to-alls of
// tokens x top_k x h x 2 bytes per MoE layer: 2 x 26 x 4096 x 6 x 2048 x 2 =
// 5,234,491,392 bytes, forward and backward.
TEST(LatentAttentionStep, ExpertAllToAllSkipsTheDenseLayers) {
  Evaluation e = evaluate_paper(step("deepseek-v2-lite",
                                     "[[strategy]]\nuse = \"data-parallel\"\nsize = 8\n[[strategy]]\n"
                                     "use = \"expert-parallel\"\nsize = 8\n"));
  double all_to_all = 0;
  for (const WorkRecord& work : e.estimator().plan().work)
    if (std::string_view(work.name) == "expert_parallel") all_to_all += work.amount;
  EXPECT_DOUBLE_EQ(all_to_all, 2 * 5'234'491'392.0);
}

}  // namespace
}  // namespace memplan::testing
