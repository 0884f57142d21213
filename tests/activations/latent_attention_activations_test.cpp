// The 'megatron' activation model for DeepSeek's layers: multi-head latent
// attention (MLA), the dense first layers (first_k_dense_replace) and the
// shared experts, fused (Megatron-Core MLASelfAttention with Transformer
// Engine) and eager (transformers' DeepseekV3Attention), with and without
// tensor parallelism; and the shared expert of Qwen1.5-MoE, which the model
// now counts. The derivation, tensor by tensor, with its sources, is in
// docs/formulas.md, section 6, "megatron: multi-head latent attention, dense
// first layers and shared experts"; each test repeats the sums it asserts.
#include <gtest/gtest.h>

#include <string>

#include "../../plugins/activations/megatron/transformer_activations.hpp"
#include "test_support.hpp"

namespace memplan::testing {
namespace {

constexpr int32_t kAct = MEMPLAN_ROLE_ACTIVATIONS;

std::string scenario(const std::string& preset, const std::string& activations, const std::string& strategies = "") {
  return "name = \"mla\"\nmode = \"train\"\n[model]\npreset = \"" + preset +
         "\"\n[batch]\nmicro_batch = 1\nseq_len = 4096\n[precision]\nuse = \"mixed-bf16\"\n[optimizer]\n"
         "use = \"adamw\"\n[activations]\nuse = \"megatron\"\nflash_attention = true\ndropout = false\n" +
         activations + strategies;
}

const std::string kTensorParallel = "[[strategy]]\nuse = \"tensor-parallel\"\nsize = 2\n";
const std::string kSequenceParallel = "[[strategy]]\nuse = \"tensor-parallel\"\nsize = 2\nsequence_parallel = true\n";

// DeepSeek-V2-Lite (core/data/models/deepseek-v2-lite.toml): h 2048, 16 heads,
// q/k heads of 128 + 64 rope (192), v heads of 128, kv_lora_rank 512, no query
// latent; layer 0 dense (SwiGLU 10944), layers 1-26 MoE: 64 experts of 1408,
// top 6, shared experts of 2816 together. s 4096, b 1, bf16 (p 2),
// FlashAttention, no dropout. Widths: Q and K 16 x 192 = 3072, V and the
// attention output 16 x 128 = 2048, kv_b's output 16 x (128 + 128) = 4096.
//
// Fused (Megatron-Core), bytes per token and layer:
//   input norm's input and output, pre-MLP norm's input and output 4 x 2 x 2048   16,384
//   kv latent: kv_layernorm's input and output (fused into linear_kv_up_proj)
//     2 x 2 x 512                                                                  2,048
//     (replicated: 18,432; split t ways only with sequence parallelism)
//   Q 2 x 3072 and attention output 2 x 2048                                      10,240
//   K 2 x 3072 and V 2 x 2048                                                     10,240
//   FlashAttention's log-sum-exp 4 x 16                                               64
//   dense layer: SwiGLU's gate and up outputs and silu's output 3 x 2 x 10944     65,664
//     = 104,640 x 4096 = 428,605,440 bytes
//   MoE layer: per routed token the expert's input and output copies 2 x 2 x 2048
//     and its SwiGLU 3 x 2 x 1408 = 8,192 + 8,448 = 16,640; x top-6               99,840
//     router probabilities 2 x 64                                                    128
//     shared expert: SwiGLU of 2816, 3 x 2 x 2816                                 16,896
//     = 155,840 x 4096 = 638,320,640 bytes
TEST(LatentAttentionActivations, FusedDeepSeekV2LiteDenseAndMoeLayers) {
  Evaluation e = evaluate_paper(scenario("deepseek-v2-lite", ""));
  EXPECT_EQ(e.item_bytes("layers.0.activations", kAct), 428'605'440u);
  EXPECT_EQ(e.item_bytes("layers.1-26.activations", kAct), uint64_t{26} * 638'320'640u);
}

// Tensor parallelism 2 without sequence parallelism: the latents and norms
// (18,432 per token) stay whole on each rank (the down-projections are
// replicated linears); the heads' tensors, the MLPs and the attention core
// halve (16 heads >= 2 ranks):
//   dense: 18,432 + (10,240 + 10,240 + 65,664 + 64) / 2 = 61,536 x 4096 = 252,051,456
//   MoE:   18,432 + (10,240 + 10,240 + 116,864 + 64) / 2 = 87,136, and the routed tokens' input and output
//          copies (2 x 2 x 2048 x top-6 = 49,152), gathered over the expert tensor group (ETP = t = 2) before
//          the experts, stay whole: + 49,152 / 2 = 111,712 x 4096 = 457,572,352
// With sequence parallelism every other term halves: 52,320 and 77,920 + 24,576 = 102,496 per token.
TEST(LatentAttentionActivations, FusedTensorParallelKeepsTheLatentsWhole) {
  Evaluation tp = evaluate_paper(scenario("deepseek-v2-lite", "", kTensorParallel));
  EXPECT_EQ(tp.item_bytes("layers.0.activations", kAct), 252'051'456u);
  EXPECT_EQ(tp.item_bytes("layers.1-26.activations", kAct), uint64_t{26} * 457'572'352u);
  Evaluation sp = evaluate_paper(scenario("deepseek-v2-lite", "", kSequenceParallel));
  EXPECT_EQ(sp.item_bytes("layers.0.activations", kAct), uint64_t{52'320} * 4096);
  EXPECT_EQ(sp.item_bytes("layers.1-26.activations", kAct), uint64_t{26} * 102'496 * 4096);
}

// Eager (transformers' DeepseekV3Attention through SDPA, every weight
// training), bytes per token and layer:
//   two RMSNorms: fp32 input copy 4 x 2048, rsqrt 4, normed copy 2 x 2048:
//     2 x 12,292                                                                  24,584
//   their outputs, kept by q_proj/kv_a_proj and by the MLP 2 x 2 x 2048            8,192
//   kv_a_layernorm over the 512-wide latent: 4 x 512 + 4 + 2 x 512 = 3,076, and
//     its output kept by kv_b_proj 2 x 512 = 1,024                                 4,100
//     (replicated: 36,876)
//   SDPA's q 2 x 3072 and k 2 x 3072 (torch.cat copies), v: the split view of
//     kv_b's output, which keeps all of it alive 2 x 4096, its output (o_proj's
//     input) 2 x 2048: 2 x (3072 + 3072 + 4096 + 2048)                            24,576
//   log-sum-exp 4 x 16                                                                64
//   dense layer: gate, silu and up outputs and their product 4 x 2 x 10944        87,552
//     = 149,068 x 4096 = 610,582,528 bytes
//   MoE layer: per routed token input and output copies 8,192 and SwiGLU
//     4 x 2 x 1408 = 11,264: 19,456 x 6 = 116,736; router 2 x 64 = 128; shared
//     expert 4 x 2 x 2816 = 22,528                                               139,392
//     = 200,908 x 4096 = 822,919,168 bytes
TEST(LatentAttentionActivations, EagerDeepSeekV2LiteDenseAndMoeLayers) {
  Evaluation e = evaluate_paper(scenario("deepseek-v2-lite", "layer = \"eager\"\n"));
  EXPECT_EQ(e.item_bytes("layers.0.activations", kAct), 610'582'528u);
  EXPECT_EQ(e.item_bytes("layers.1-26.activations", kAct), uint64_t{26} * 822'919'168u);
}

// Eager with tensor parallelism 2 (memplan's tensor-parallel keeps the latent
// down-projection whole on every rank, class attention_latent, and splits q,
// kv_b, o and the MLPs by heads and width; transformers' own base_model_tp_plan
// for DeepSeek has varied between versions, recent ones giving
// kv_a_proj_with_mqa a style of its own, "mla_kv_a_proj"): the norms and the
// latent (36,876 per token) stay whole, the rest halves:
//   dense: 36,876 + (24,576 + 87,552 + 64) / 2 = 92,972 x 4096 = 380,813,312
//   MoE:   36,876 + (24,576 + 139,392 + 64) / 2 = 118,892 x 4096 = 486,981,632
TEST(LatentAttentionActivations, EagerTensorParallel) {
  Evaluation e = evaluate_paper(scenario("deepseek-v2-lite", "layer = \"eager\"\n", kTensorParallel));
  EXPECT_EQ(e.item_bytes("layers.0.activations", kAct), 380'813'312u);
  EXPECT_EQ(e.item_bytes("layers.1-26.activations", kAct), uint64_t{26} * 486'981'632u);
}

// Eager attention without SDPA (flash_attention = false): matmul(probs, v)
// keeps a contiguous copy of V (2 x 2048, not kv_b's whole output), o_proj its
// input (2 x 2048); the scores cost 16 x 4096 x (4 + 2) bytes per token (fp32
// softmax and its 16-bit copy: transformers' DeepSeek-V2 upcasts the softmax, softmax_upcast) instead of the log-sum-exp. Per token of the
// dense layer: 36,876 + 2 x (3072 + 3072 + 2048 + 2048) + 87,552 + 393,216
// = 538,124 x 4096 = 2,204,155,904.
TEST(LatentAttentionActivations, EagerWithoutSdpaCopiesV) {
  std::string text = scenario("deepseek-v2-lite", "layer = \"eager\"\nsoftmax_upcast = true\n");
  text.replace(text.find("flash_attention = true"), 22, "flash_attention = false");
  Evaluation e = evaluate_paper(text);
  EXPECT_EQ(e.item_bytes("layers.0.activations", kAct), 2'204'155'904u);
}

// DeepSeek-V3's query latent (q_lora_rank 1536) through the header: the fused
// layer adds q_layernorm's input and output (2 x 2 x 1536 = 6,144 per token) to
// the replicated terms; the eager layer its RMSNorm (4 x 1536 + 4 + 2 x 1536 =
// 9,220) and q_b_proj's input (2 x 1536 = 3,072): 12,292 per token.
TEST(LatentAttentionActivations, QueryLatentAddsItsNormsTerms) {
  plugins::TransformerShape with{4096, 1, 7168, 128, 128 * 192, 128 * 192, 18432, true, 0, 0, 128};
  with.q_latent = 1536;
  with.kv_latent = 512;
  with.rope = 64;
  with.v_width = 128 * 128;
  with.kv_up_width = 128 * 256;
  plugins::TransformerShape without = with;
  without.q_latent = 0;
  plugins::ActivationSettings fused;
  fused.dropout = false;
  fused.flash_attention = true;
  EXPECT_DOUBLE_EQ(plugins::layer_activation_terms(with, fused).replicated -
                       plugins::layer_activation_terms(without, fused).replicated,
                   6'144.0 * 4096);
  plugins::ActivationSettings eager = fused;
  eager.layer = plugins::LayerImplementation::eager;
  EXPECT_DOUBLE_EQ(plugins::layer_activation_terms(with, eager).replicated -
                       plugins::layer_activation_terms(without, eager).replicated,
                   12'292.0 * 4096);
}

// torchtitan's op-level checkpointing (recompute policy "op") of an MLA layer
// (torchtitan models/deepseek_v3/model/model.py @ ab033dde: wq, wkv_a, wkv_b,
// wo, then the MLP's w1, w3, w2; the odd multiplies' outputs are saved).
// DeepSeek-V2-Lite's dense layer 0, bytes per token: the layer's input 2 x 2048
// = 4,096; q's output 2 x 3072 and kv_b's 2 x 4096 = 14,336; gate's 2 x 10944
// and down's 2 x 2048 = 25,984; SDPA's output 2 x 2048 and log-sum-exp 4 x 16
// = 4,160: 48,576 x 4096 = 198,967,296.
// DeepSeek-V3's layer (query latent 1536, kv latent 512 + rope 64, h 7168,
// SwiGLU 18432, 128 heads, v 128), through the header: input 7168, q_a 1536,
// kv_a 576 (whole), o 7168, up 18432 (the MLP starts at the 6th multiply), all
// x 2; SDPA 2 x 16384 + 4 x 128: 2 x (7168 + 1536 + 576 + 7168 + 18432) + 33,280
// = 103,040 x 4096 = 422,051,840.
TEST(LatentAttentionActivations, OpLevelCheckpointingFollowsTorchtitansOrder) {
  const std::string recompute = "[[strategy]]\nuse = \"recompute\"\npolicy = \"op\"\n";
  Evaluation e = evaluate_paper(scenario("deepseek-v2-lite", "", recompute));
  EXPECT_EQ(e.item_bytes("layers.0.activations", kAct), 198'967'296u);
  plugins::TransformerShape v3{4096, 1, 7168, 128, 128 * 192, 128 * 192, 18432, true, 0, 0, 128};
  v3.q_latent = 1536;
  v3.kv_latent = 512;
  v3.rope = 64;
  v3.v_width = 128 * 128;
  v3.kv_up_width = 128 * 256;
  plugins::ActivationSettings settings;
  settings.dropout = false;
  settings.flash_attention = true;
  settings.recompute = plugins::RecomputePolicy::per_op;
  EXPECT_DOUBLE_EQ(plugins::stored_bytes_per_layer(v3, settings), 422'051'840.0);
}

// Pipeline parallelism over 3 stages of 9 layers: the first stage holds the
// dense layer 0 and MoE layers 1-8, the last stage MoE layers 18-26 only (1F1B,
// one micro-batch in flight: grad_accum 1).
TEST(LatentAttentionActivations, PipelineStagesCountTheirDenseLayers) {
  const std::string pipeline = "[[strategy]]\nuse = \"pipeline-parallel\"\nsize = 3\n";
  Evaluation first = evaluate_paper(scenario("deepseek-v2-lite", "", pipeline));
  EXPECT_EQ(first.item_bytes("layers.0.activations", kAct), 428'605'440u);
  EXPECT_EQ(first.item_bytes("layers.1-8.activations", kAct), uint64_t{8} * 638'320'640u);
  Evaluation last = evaluate_paper(scenario("deepseek-v2-lite", "", pipeline + "stage = \"last\"\n"));
  EXPECT_EQ(last.item_bytes("layers.18-26.activations", kAct), uint64_t{9} * 638'320'640u);
  EXPECT_EQ(last.item_bytes("layers.18.activations", kAct), 0u);
}

// Full recomputation keeps each layer's input (2 x 2048 x 4096 = 16,777,216)
// and recomputes one layer at a time: the working set is the largest layer's
// stored bytes, a MoE layer's 638,320,640.
TEST(LatentAttentionActivations, RecomputeWorkingSetIsTheLargestLayerKind) {
  const std::string recompute = "[[strategy]]\nuse = \"recompute\"\npolicy = \"full\"\n";
  Evaluation e = evaluate_paper(scenario("deepseek-v2-lite", "", recompute));
  EXPECT_EQ(e.item_bytes("layers.0.activations", kAct), 16'777'216u);
  EXPECT_EQ(e.item_bytes("layers.1-26.activations", kAct), uint64_t{26} * 16'777'216u);
  EXPECT_EQ(e.item_bytes("activations.recompute", kAct), 638'320'640u);
}

// Offloading (torchtune's OffloadActivations) keeps two neighbouring layers on
// the GPU: with layer 0 dense (428,605,440) and MoE layers of 638,320,640, the
// largest pair is two MoE layers, 1,276,641,280 bytes, in forward and in
// backward; the layers' stored activations live in host memory.
TEST(LatentAttentionActivations, OffloadWindowIsTheLargestNeighbourPair) {
  Evaluation e = evaluate_paper(scenario("deepseek-v2-lite", "offload = true\n"));
  EXPECT_EQ(e.item_bytes("activations.offload_window", kAct), uint64_t{2} * 1'276'641'280u);
  EXPECT_EQ(e.item_bytes("layers.0.activations", kAct), 0u);
}

// Qwen1.5-MoE-A2.7B's shared expert (SwiGLU of 5632) is now counted: before
// ABI 1.3 the plugin could not see it. Fused, s 4096, b 1, bf16, flash, no
// dropout; bytes per token and layer: norms 4 x 2 x 2048 = 16,384; Q and the
// attention output, K and V 4 x 2 x 2048 = 16,384; log-sum-exp 64; 4 routed
// tokens of (2 x 2 x 2048 + 3 x 2 x 1408) = 66,560; router 2 x 60 = 120; the
// shared expert 3 x 2 x 5632 = 33,792: 133,304 x 4096 = 546,013,184 per layer
// (407,601,152 without the shared expert, as memplan counted before). The
// shared expert's sigmoid gate keeps 2 x (2048 + 1) more per token in
// Megatron-Core and transformers; the ABI does not carry the gate to the
// plugin, and it is left out (4,098 bytes, 3.1 % of the layer).
TEST(LatentAttentionActivations, QwenMoeCountsItsSharedExpert) {
  Evaluation e = evaluate_paper(scenario("qwen1.5-moe-a2.7b", ""));
  EXPECT_EQ(e.item_bytes("layers.0-23.activations", kAct), uint64_t{24} * 546'013'184u);
}

}  // namespace
}  // namespace memplan::testing

namespace memplan::testing {
namespace {

// transformers 4.38's per-layer rotary tables (rope_cache) under latent
// attention cover only the rotary part of a head: DeepSeek's attention builds
// its rotary embedding over qk_rope_head_dim (64; the remote code's
// DeepseekV2Attention.rotary_emb, and transformers' DeepseekV3Config sets
// head_dim = qk_rope_head_dim for it), not over the q/k head width (192). V2-Lite,
// max_position_embeddings 163,840, bf16: 2 (cos, sin) x 163,840 x 64 x 2 B =
// 41,943,040 B per layer, x 27 layers = 1,132,462,080 B (3 times less than
// 2 x 163,840 x 192 x 2 would give).
TEST(LatentAttentionActivations, RopeTablesCoverTheRotaryPartOnly) {
  Evaluation e = evaluate_paper(scenario("deepseek-v2-lite", "rope_cache = true\n"));
  EXPECT_EQ(e.item_bytes("layers.0-26.rope_cache", MEMPLAN_ROLE_WEIGHTS), 1'132'462'080u);
}

}  // namespace
}  // namespace memplan::testing
