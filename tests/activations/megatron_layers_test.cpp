// The 'megatron' per-layer formula for mixture-of-experts layers (top-k
// routing), grouped-query attention, SwiGLU and FlashAttention, through the
// plugin. Table 2 itself is checked in tests/sources/korthikanti_table2_test.cpp.
#include <gtest/gtest.h>

#include <string>

#include "../../plugins/activations/megatron/transformer_activations.hpp"
#include "test_support.hpp"

namespace memplan::testing {
namespace {

constexpr int32_t kAct = MEMPLAN_ROLE_ACTIVATIONS;

std::string scenario(const std::string& preset, const std::string& strategies = "") {
  return "name = \"layers\"\nmode = \"train\"\n[model]\npreset = \"" + preset +
         "\"\n[batch]\nmicro_batch = 1\nseq_len = 4096\n[precision]\nuse = \"mixed-bf16\"\n[optimizer]\n"
         "use = \"adamw\"\n[activations]\nuse = \"megatron\"\nflash_attention = true\ndropout = false\n" + strategies;
}

// Mixtral 8x7B (h 4096, 32 heads, 8 kv heads of 128, 8 SwiGLU experts of
// 14336, top-2) at s 4096, b 1, bf16. Bytes per token and layer:
//   norms' inputs and outputs 4 x 2 x 4096                   32,768
//   Q and attention output 2 x 2 x 4096; K and V 2 x 2 x 1024 20,480
//   per routed token: the expert's input 2 x 4096, its SwiGLU
//     3 x 2 x 14336 = 86,016, its output (kept for the routing
//     weight's gradient) 2 x 4096: 102,400; x top-2          204,800
//   router probabilities 2 x 8                                   16
//   FlashAttention's log-sum-exp 4 x 32                          128
//   = 258,192 x 4096 = 1,057,554,432 per layer.
TEST(MegatronMoe, TopTwoRoutingStoresTwoExpertsPerToken) {
  Evaluation e = evaluate_paper(scenario("mixtral-8x7b"));
  EXPECT_EQ(e.item_bytes("layers.0-31.activations", kAct), uint64_t{32} * 1'057'554'432u);
  // Tensor parallelism 2 with sequence parallelism halves every term (8 kv heads >= 2 ranks) but the routed
  // tokens' hidden-width copies, which the dispatcher gathers over the expert tensor group (ETP = t = 2) before
  // fc1 (moe/token_dispatcher.py @ core_v0.13.0): 258,192 / 2 + 2 x 2 x 2 x 4096 / 2 = 129,096 + 16,384 = 145,480
  // x 4096 = 595,886,080 per layer.
  Evaluation tp = evaluate_paper(scenario("mixtral-8x7b", "[[strategy]]\nuse = \"tensor-parallel\"\nsize = 2\n"
                                                    "sequence_parallel = true\n"));
  EXPECT_EQ(tp.item_bytes("layers.0-31.activations", kAct), uint64_t{32} * 595'886'080u);
}

// Routing each token to one expert of the dense MLP's width costs what the
// dense MLP costs plus the expert's input and output copies (2 p sbh) and the
// router's probabilities (p sb E): with s b = 4096, h 4096, E 8, p 2, that is
// 2 x 2 x 4096 x 4096 + 2 x 4096 x 8 = 67,108,864 + 65,536.
TEST(MegatronMoe, OneExpertPerTokenCostsTheDenseMlpPlusTheRoutingCopies) {
  plugins::TransformerShape dense{4096, 1, 4096, 32, 4096, 1024, 14336, true, 0, 0, 8};
  plugins::TransformerShape routed = dense;
  routed.top_k = 1;
  routed.experts = 8;
  plugins::ActivationSettings settings;
  settings.dropout = false;
  settings.flash_attention = true;
  EXPECT_DOUBLE_EQ(plugins::stored_bytes_per_layer(routed, settings) - plugins::stored_bytes_per_layer(dense, settings),
                   67'108'864.0 + 65'536.0);
}

// Megatron-Core from core_r0.13.0 multiplies the routing probabilities into each expert's activation output
// (megatron/core/transformer/moe/experts.py @ 5fe3f06658; moe_probs_in_expert) and the unpermute keeps no expert
// output. Mixtral 8x7B as above, per routed token: the expert's input 2 x 4096 + SwiGLU's fused weighted function
// (its inputs 2 x 2 x 14336, the output down keeps 2 x 14336) = 8,192 + 86,016 = 94,208, 8,192 less than the
// 102,400 above: x top-2 = 16,384 less a token, 258,192 - 16,384 = 241,808 x 4096 = 990,445,568 per layer. A GELU
// expert MLP (two projections) keeps the activation's output for the multiply beside the weighted product:
// per routed token 2h + 2 x 2f (before) -> h: 2 h + 3 x 2 f (after), 2 (f - h) = 2 x (14336 - 4096) = 20,480 more.
TEST(MegatronMoe, ProbabilitiesInsideTheExpertKeepNoExpertOutput) {
  Evaluation e = evaluate_paper(scenario("mixtral-8x7b") + "moe_probs_in_expert = true\n");
  EXPECT_EQ(e.item_bytes("layers.0-31.activations", kAct), uint64_t{32} * 990'445'568u);
  plugins::TransformerShape gelu{4096, 1, 4096, 32, 4096, 1024, 14336, false, 0, 0, 8};
  gelu.top_k = 1;
  gelu.experts = 8;
  plugins::ActivationSettings before;
  before.dropout = false;
  before.flash_attention = true;
  plugins::ActivationSettings after = before;
  after.moe_probs_in_expert = true;
  EXPECT_DOUBLE_EQ(plugins::stored_bytes_per_layer(gelu, after) - plugins::stored_bytes_per_layer(gelu, before),
                   20'480.0 * 4096);
  // Eager layers (Hugging Face Mixtral weights the experts' outputs) are unchanged by it.
  Evaluation eager = evaluate_paper(scenario("mixtral-8x7b") + "layer = \"eager\"\nmoe_probs_in_expert = true\n");
  Evaluation eager_before = evaluate_paper(scenario("mixtral-8x7b") + "layer = \"eager\"\n");
  EXPECT_EQ(eager.item_bytes("layers.0-31.activations", kAct), eager_before.item_bytes("layers.0-31.activations", kAct));
}

// Grouped-query attention, SwiGLU and FlashAttention through the plugin:
// Llama-2-70B at s 4096, b 1 stores 1,125,122,048 bytes per layer (derived in
// korthikanti_table2_test.cpp, GeneralizedActivations), x 80 layers.
TEST(MegatronLayers, GroupedQueryAttentionSwiGluFlashAttention) {
  Evaluation e = evaluate_paper(scenario("llama-2-70b"));
  EXPECT_EQ(e.item_bytes("layers.0-79.activations", kAct), uint64_t{80} * 1'125'122'048u);
}

// Megatron's unfused fp32 softmax (megatron 1.35.0: softmax_upcast on its own layers): with
// --no-masked-softmax-fusion and attention_softmax_in_fp32 (--apply-query-key-layer-scaling forces it),
// FusedScaleMaskSoftmax.forward_torch_softmax (megatron/core/fusions/fused_softmax.py @ d98e8a64 299-341) casts
// the fp16 scores to fp32, torch's softmax saves its fp32 output, and the fp16 cast of it feeds the dropout (its
// mask kept) whose output the matmul with V keeps: 4 + 2 + 1 = 7 bytes a score against the fused kernel's
// 2 + 1 + 2 = 5; without dropout 4 + 2 against 2. At a = 8, s = 1024, b = 4 (Megatron-LM's CI test
// gpt3_mcore_tp2_pp2_uninstall_te, before its t = 2): 33,554,432 scores, +67,108,864 and +134,217,728 bytes.
TEST(MegatronLayers, UnfusedFp32SoftmaxKeepsItsFp32Output) {
  plugins::TransformerShape shape{1024, 4, 512, 8, 512, 512, 2048, false, 0, 0, 8};
  plugins::ActivationSettings fused;
  fused.bytes = 2;
  fused.dropout = true;
  fused.flash_attention = false;
  plugins::ActivationSettings unfused = fused;
  unfused.eager.softmax_upcast = true;
  EXPECT_DOUBLE_EQ(plugins::stored_bytes_per_layer(shape, unfused) - plugins::stored_bytes_per_layer(shape, fused),
                   67'108'864.0);
  fused.dropout = unfused.dropout = false;
  EXPECT_DOUBLE_EQ(plugins::stored_bytes_per_layer(shape, unfused) - plugins::stored_bytes_per_layer(shape, fused),
                   134'217'728.0);
  // With flash attention the option changes nothing (no score matrix).
  fused.flash_attention = unfused.flash_attention = true;
  EXPECT_DOUBLE_EQ(plugins::stored_bytes_per_layer(shape, unfused), plugins::stored_bytes_per_layer(shape, fused));
}

// --qk-layernorm in Megatron-Core's fused layer (megatron 1.32.0): q_layernorm and k_layernorm run per head
// after the split (megatron/core/transformer/attention.py lines 1029/1032 @ core_r0.14.0), Transformer Engine
// norms that keep their contiguous 16-bit input and one fp32 rstd per row (transformer_engine/pytorch/ops/basic/
// rmsnorm.py @ 02dc7709, RMSNorm.op_forward). Qwen3-8B (h 4096, 32 heads and 8 kv heads of 128, SwiGLU 12288,
// per-head q/k norms) at s 4096, b 1, bf16, flash attention, no dropout. Bytes per token and layer:
//   norms' inputs and outputs 4 x 2 x 4096                    32,768
//   Q and attention output 2 x 2 x 4096; K and V 2 x 2 x 1024  20,480
//   SwiGLU 3 x 2 x 12288                                       73,728
//   FlashAttention's log-sum-exp 4 x 32                           128
//   q norm: 2 x 4096 + 4 x 32 = 8,320; k norm: 2 x 1024 + 4 x 8 = 2,080   10,400
//   = 137,504 x 4096 = 563,216,384 per layer (126,976 + 128 = 127,104 a token without the q/k norms).
// Checked on a published run: LAION open-sci-ref 1.7B (24 layers, h 2048, 32 heads, --qk-layernorm, selective
// recomputation, micro-batch 4 x 4096) read 6.0 % below its logged max allocated without this term, +0.2 % with
// it (validation/OSR-1.7b-dp252-mbs4-s4096-selrecompute).
TEST(MegatronLayers, PerHeadQkNormsKeepTheirInputsInFusedLayers) {
  Evaluation e = evaluate_paper(scenario("qwen3-8b"));
  EXPECT_EQ(e.item_bytes("layers.0-35.activations", kAct), uint64_t{36} * 563'216'384u);
  // Compiled layers leave the norms' saves to AOTAutograd's partitioner, not counted: the fused 127,104 a token,
  // with K and V repeated to every head (2 x 2 x 4096 in place of 2 x 2 x 1024, +12,288) = 139,392 x 4096 =
  // 570,949,632 per layer.
  Evaluation compiled = evaluate_paper(scenario("qwen3-8b") + "layer = \"compiled\"\n");
  EXPECT_EQ(compiled.item_bytes("layers.0-35.activations", kAct), uint64_t{36} * 570'949'632u);
}

// fp8 1.3.0 (dtype.linear_inputs = 1) in the fused layer: Transformer Engine's fp8 modules save the fp8 cast of
// each linear layer's input (TE v1.9 layernorm_linear.py 137/317-327, linear.py 118-150/299-337, layernorm_mlp.py
// 264-275/462-478). Llama-2-7B (h 4096, 32 heads, SwiGLU 11008) at s 4096, b 1, bf16 activations, flash, no
// dropout: the fused 131,712 bytes a token (MegatronLegacy below) less the two norms' outputs at 1 byte instead of
// 2 (-2 x 4096), plus the output projection's fp8 copy of the attention output beside flash's own (+4096), less
// the activation's output at 1 byte (-11008): 131,712 - 15,104 = 116,608 x 4096 = 477,626,368 per layer.
// saved_inputs = "activations" keeps the 16-bit count: 131,712 x 4096 = 539,492,352.
TEST(MegatronLayers, Fp8ModulesSaveTheirInputsInFp8) {
  const auto run = [](const std::string& precision) {
    return "name = \"fp8\"\nmode = \"train\"\n[model]\npreset = \"llama-2-7b\"\n[batch]\nmicro_batch = 1\n"
           "seq_len = 4096\n[precision]\nuse = \"fp8\"\n" + precision + "[optimizer]\nuse = \"adamw\"\n"
           "[activations]\nuse = \"megatron\"\nflash_attention = true\ndropout = false\n";
  };
  EXPECT_EQ(evaluate_paper(run("")).item_bytes("layers.0-31.activations", kAct), uint64_t{32} * 477'626'368u);
  EXPECT_EQ(evaluate_paper(run("saved_inputs = \"activations\"\n")).item_bytes("layers.0-31.activations", kAct),
            uint64_t{32} * 539'492'352u);
  EXPECT_NE(error_of(run("saved_inputs = \"e4m3\"\n")).find("must be \"fp8\""), std::string::npos);
}

// Multi-token prediction's losses (megatron 1.32.0): Megatron-Core's MultiTokenPredictionBlock runs the output
// layer and the loss of each depth inside the forward (megatron/core/transformer/multi_token_prediction.py lines
// 667-689 @ core_v0.13.0) and MTPLossAutoScaler saves that loss on the main hidden states (line 256), so each
// depth's loss saves stand, as the main loss's do, at the forward's end and at the loss's moment in backward.
// Llama-2-7B with one MTP module, 4,096 tokens, V 32,000, the plugin's default loss ("unfused": the fp32 logits and
// the fp32 softmax, 4 + 4 bytes a logit): 8 x 4,096 x 32,000 = 1,048,576,000 B at each of the two moments.
TEST(MegatronLayers, MultiTokenPredictionKeepsEachDepthsLoss) {
  std::string with_mtp = scenario("llama-2-7b");
  const std::string preset = "preset = \"llama-2-7b\"\n";
  with_mtp.replace(with_mtp.find(preset), preset.size(), preset + "mtp_layers = 1\n");
  const Evaluation e = evaluate_paper(with_mtp);
  EXPECT_EQ(e.item_bytes_at("activations.mtp_loss", MEMPLAN_LIFETIME_FORWARD_END), 1'048'576'000u);
  EXPECT_EQ(e.item_bytes_at("activations.mtp_loss", MEMPLAN_LIFETIME_BACKWARD_START), 1'048'576'000u);
  EXPECT_EQ(evaluate_paper(scenario("llama-2-7b")).item_bytes("activations.mtp_loss", kAct), 0u);
}

// layer = "legacy": Megatron-LM's layers before Megatron-Core
// (megatron/model/transformer.py and rms_norm.py @ b35d061e). Llama-2-7B (h
// 4096, 32 heads, SwiGLU 11008, RMSNorm) at s 4096, bf16, flash attention, no
// dropout. The fused count per token and layer:
//   norms' inputs and outputs 4 x 2 x 4096                   32,768
//   Q, attention output, K, V 4 x 2 x 4096                   32,768
//   SwiGLU: gate and up outputs and the product 3 x 2 x 11008 66,048
//   FlashAttention's log-sum-exp 4 x 32                          128
//   = 131,712.
// Legacy adds: the two RMSNorms as PyTorch ops keep their fp32 input copies
// and rsqrt, 2 x (4 x 4096 + 4) = 32,776; ParallelMLP runs SwiGLU as
// F.silu(x[0]) * x[1], so silu's output is kept besides its operands,
// 2 x 11008 = 22,016; at micro-batch 2 the flash output's contiguous copy
// 's b (h d)' entering the dense projection is another 2 x 4096 = 8,192 (at
// micro-batch 1 that rearrangement is a view).
//   b 1: 186,504 x 4096 tokens = 763,920,384 per layer
//   b 2: 194,696 x 8192 tokens = 1,594,949,632 per layer (fused: 131,712 x 8192 = 1,078,984,704)
TEST(MegatronLegacy, EagerSwigluAndTheAttentionOutputCopy) {
  auto layers = [](int batch, const std::string& layer) {
    Evaluation e = evaluate_paper("name = \"l\"\nmode = \"train\"\n[model]\npreset = \"llama-2-7b\"\n[batch]\n"
                                  "micro_batch = " + std::to_string(batch) + "\nseq_len = 4096\n[precision]\n"
                                  "use = \"mixed-bf16\"\n[optimizer]\nuse = \"adamw\"\n[activations]\nuse = \"megatron\"\n"
                                  "flash_attention = true\ndropout = false\nlayer = \"" + layer + "\"\n");
    return e.item_bytes("layers.0-31.activations", kAct);
  };
  EXPECT_EQ(layers(1, "legacy"), uint64_t{32} * 763'920'384u);
  EXPECT_EQ(layers(2, "legacy"), uint64_t{32} * 1'594'949'632u);
  EXPECT_EQ(layers(2, "fused"), uint64_t{32} * 1'078'984'704u);
  // Grouped-query attention: legacy ParallelAttention repeat_interleaves K and V to every query head before
  // attention, which saves the repeated copies. Llama-3.1-8B (h 4096, 32 heads, 8 kv heads of 128, SwiGLU 14336)
  // at b 1, s 4096: the fused count keeps K and V at 2 x 2 x 1024 = 4,096 a token, legacy at 2 x 2 x 4096 =
  // 16,384, plus silu's output 2 x 14336 = 28,672 and the norms' 32,776: 12,288 + 28,672 + 32,776 = 73,736 more
  // a token, 302,022,656 a layer.
  auto llama3 = [](const std::string& layer) {
    Evaluation e = evaluate_paper("name = \"l\"\nmode = \"train\"\n[model]\npreset = \"llama-3.1-8b\"\n[batch]\n"
                                  "seq_len = 4096\n[precision]\nuse = \"mixed-bf16\"\n[optimizer]\nuse = \"adamw\"\n"
                                  "[activations]\nuse = \"megatron\"\nflash_attention = true\ndropout = false\n"
                                  "layer = \"" + layer + "\"\n");
    return e.item_bytes("layers.0-31.activations", kAct);
  };
  EXPECT_EQ(llama3("legacy") - llama3("fused"), uint64_t{32} * 302'022'656u);
  EXPECT_NE(error_of("name = \"l\"\nmode = \"train\"\n[model]\npreset = \"llama-2-7b\"\n[batch]\nseq_len = 64\n"
                     "[precision]\nuse = \"bf16\"\n[optimizer]\nuse = \"sgd\"\n[activations]\nuse = \"megatron\"\n"
                     "layer = \"old\"\n")
                .find("option 'layer': must be \"fused\", \"eager\", \"compiled\" or \"legacy\", not \"old\""),
            std::string::npos);
}

// The megatron-lm profile dates the layers (profile.toml; Megatron-LM's pretrain_gpt.py and arguments.py):
// before core_r0.6.0 (tag core_v0.6.0, 2024-04-18) the legacy layers of --transformer-impl "local", flash
// attention only under --use-flash-attn; from core_r0.6.0 Transformer Engine's layers (e7b74a4b, merged
// 2024-04-03), from core_r0.8.0 Megatron-Core's GPTModel with the TE spec (9ad1a56f, 2024-05-24): the fused
// count. Llama-2-7B, b 2, s 4096, flash attention stated: 1,594,949,632 a layer legacy, 1,078,984,704 fused
// (derived above). Validation MG1-MG4 (pull request #482's runs of 2023; the README's model print shows the
// local layers) are the legacy ones.
TEST(MegatronLegacy, TheProfileDatesTheLayers) {
  auto layers = [](const std::string& framework, const std::string& flash) {
    Evaluation e = evaluate("name = \"l\"\nmode = \"train\"\n[framework]\nuse = \"megatron-lm\"\n" + framework +
                            "[model]\npreset = \"llama-2-7b\"\n[batch]\nmicro_batch = 2\nseq_len = 4096\n[precision]\n"
                            "use = \"mixed-bf16\"\n[optimizer]\nuse = \"adamw\"\n[activations]\nuse = \"megatron\"\n"
                            "dropout = false\n" + flash);
    return e.item_bytes("layers.0-31.activations", kAct);
  };
  const std::string flash = "flash_attention = true\n";
  EXPECT_EQ(layers("date = 2024-04-17\n", flash), uint64_t{32} * 1'594'949'632u);
  EXPECT_EQ(layers("version = \"core_r0.5.0\"\n", flash), uint64_t{32} * 1'594'949'632u);
  EXPECT_EQ(layers("date = 2024-04-18\n", flash), uint64_t{32} * 1'078'984'704u);
  EXPECT_EQ(layers("version = \"core_r0.6.0\"\n", flash), uint64_t{32} * 1'078'984'704u);
  EXPECT_EQ(layers("", flash), uint64_t{32} * 1'078'984'704u);  // no version, no date: the latest
  // Unstated, the legacy layers attend without FlashAttention (--use-flash-attn is opt-in): the same as saying
  // so at the latest version; TE's layers attend with it.
  EXPECT_EQ(layers("date = 2023-10-12\n", ""), layers("", "layer = \"legacy\"\nflash_attention = false\n"));
  EXPECT_GT(layers("date = 2023-10-12\n", ""), layers("date = 2023-10-12\n", flash));
  EXPECT_EQ(layers("date = 2024-04-18\n", ""), uint64_t{32} * 1'078'984'704u);
  // Megatron-Core models (--use-mcore-models, NeMo: the megatron-core profile, aliases mcore, nemo) keep the
  // fused count with flash attention at every date: pretrain_gpt.py gave them the TE layer spec always up to
  // core_r0.5.0 and by the --transformer-impl default from core_r0.6.0.
  auto core_layers = [](const std::string& name, const std::string& framework) {
    Evaluation e = evaluate("name = \"l\"\nmode = \"train\"\n[framework]\nuse = \"" + name + "\"\n" + framework +
                            "[model]\npreset = \"llama-2-7b\"\n[batch]\nmicro_batch = 2\nseq_len = 4096\n[precision]\n"
                            "use = \"mixed-bf16\"\n[optimizer]\nuse = \"adamw\"\n[activations]\nuse = \"megatron\"\n"
                            "dropout = false\n");
    return e.item_bytes("layers.0-31.activations", kAct);
  };
  EXPECT_EQ(core_layers("megatron-core", "date = 2023-10-12\n"), uint64_t{32} * 1'078'984'704u);
  EXPECT_EQ(core_layers("mcore", "version = \"core_r0.5.0\"\n"), uint64_t{32} * 1'078'984'704u);
  EXPECT_EQ(core_layers("nemo", "date = 2023-12-01\n"), uint64_t{32} * 1'078'984'704u);
  EXPECT_EQ(core_layers("mcore", ""), uint64_t{32} * 1'078'984'704u);
}

// The legacy layers' global memory buffer (megatron/core/utils.py GlobalMemoryBuffer, "mpu"; Megatron-LM @
// 390c1c91): without flash attention CoreAttention hands baddbmm a (b np, s, s) buffer as its beta = 0 input
// (megatron/model/transformer.py:264), and with sequence parallelism the column-parallel linears all-gather
// into an (s, b, h) one of the same name: one tensor of the larger size, kept. GPT-345M (24 layers, h 1024,
// 16 heads), s 1024, fp16:
//   b 1, TP 1, no flash: 1 x 16 x 1024^2 x 2 B = 33,554,432 (measured in validation/MLM-gpt345m-fp16-dp4-mbs1)
//   b 4, TP 2 + SP:      scores 4 x 8 x 1024^2 x 2 = 67,108,864 > the gather 1024 x 4 x 1024 x 2 = 8,388,608
//   with flash, TP 2 + SP: the gather alone, 8,388,608; with flash and no SP: none.
TEST(MegatronLegacy, GlobalMemoryBufferHoldsTheScoresOrTheGather) {
  auto buffer = [](int batch, int tensor, bool flash, bool sp) {
    std::string text = "name = \"l\"\nmode = \"train\"\n[model]\nlayers = 24\nhidden = 1024\nheads = 16\n"
                       "ffn_hidden = 4096\nvocab = 50304\nmlp = \"gelu\"\nnorm = \"layernorm\"\n"
                       "position_embeddings = 1024\ntied_embeddings = true\n[batch]\nseq_len = 1024\nmicro_batch = " +
                       std::to_string(batch) + "\n[precision]\nuse = \"mixed-fp16\"\n[optimizer]\nuse = \"adam\"\n"
                       "[activations]\nuse = \"megatron\"\nlayer = \"legacy\"\nflash_attention = " +
                       std::string(flash ? "true" : "false") + "\n";
    if (tensor > 1)
      text += "[[strategy]]\nuse = \"tensor-parallel\"\nsize = " + std::to_string(tensor) +
              "\nsequence_parallel = " + std::string(sp ? "true" : "false") + "\n[hardware]\ncount = " +
              std::to_string(tensor) + "\n";
    return evaluate_paper(text).item_bytes("activations.global_memory_buffer", kAct);
  };
  EXPECT_EQ(buffer(1, 1, false, false), 33'554'432u);
  EXPECT_EQ(buffer(4, 2, false, true), 67'108'864u);
  EXPECT_EQ(buffer(4, 2, true, true), 8'388'608u);
  EXPECT_EQ(buffer(4, 2, true, false), 0u);
}

// The legacy final RMSNorm (megatron/model/rms_norm.py) keeps its fp32 input copy, rsqrt and normalized copy,
// and the output layer its input: Llama-2-7B at b 1, s 4096: 4096 x (4 x 4096 + 4 + 2 x 4096 + 2 x 4096)
// = 4096 x 32,772 = 134,234,112 (the fused count: 4096 x 2 x 2 x 4096 = 67,108,864).
// What the legacy layers do not run is refused, not counted as fused.
TEST(MegatronLegacy, FinalNormAndWhatItRefuses) {
  auto scenario = [](const std::string& preset, const std::string& more) {
    return "name = \"l\"\nmode = \"train\"\n[model]\npreset = \"" + preset + "\"\n[batch]\nseq_len = 4096\n"
           "[precision]\nuse = \"mixed-bf16\"\n[optimizer]\nuse = \"adamw\"\n[activations]\nuse = \"megatron\"\n"
           "flash_attention = true\ndropout = false\nlayer = \"legacy\"\n" + more;
  };
  EXPECT_EQ(evaluate_paper(scenario("llama-2-7b", "")).item_bytes("activations.final_norm", kAct), 134'234'112u);
  EXPECT_NE(error_of(paper(scenario("mixtral-8x7b", ""))).find("the model has experts"), std::string::npos);
  EXPECT_NE(error_of(paper(scenario("deepseek-v2-lite", ""))).find("multi-head latent attention"), std::string::npos);
  EXPECT_NE(error_of(paper(scenario("llama-2-7b", "offload = true\n"))).find("option 'offload': is torchtune's"),
            std::string::npos);
  EXPECT_NE(error_of(paper(scenario("llama-2-7b", "[[strategy]]\nuse = \"context-parallel\"\nsize = 2\n[hardware]\n"
                                                  "count = 2\n")))
                .find("legacy layers have no context parallelism"),
            std::string::npos);
  EXPECT_NE(error_of(paper(scenario("llama-2-7b", "[[strategy]]\nuse = \"recompute\"\npolicy = \"op\"\n")))
                .find("per-op activation checkpointing"),
            std::string::npos);
  EXPECT_NE(error_of(paper(scenario("llama-3.1-8b", "[[strategy]]\nuse = \"tensor-parallel\"\nsize = 16\n[hardware]\n"
                                                    "count = 16\n")))
                .find("needs the 8 query groups to divide over the 16 tensor-parallel ranks"),
            std::string::npos);
}

}  // namespace
}  // namespace memplan::testing
