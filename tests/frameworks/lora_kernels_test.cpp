// Fused LoRA autograd functions in eager layers (the lora plugin's `kernels`):
// axolotl's LoRA_QKV, LoRA_O and LoRA_MLP (src/axolotl/kernels/lora.py @
// 8c6a6ea6e) and Unsloth's (unsloth/kernels/fast_lora.py @ 015bdef0d9), which
// keep their inputs in the activations' dtype, the MLP's gate and up outputs,
// and recompute the SwiGLU product in backward (docs/formulas.md, "Fused LoRA
// functions"), and Liger's SwiGLU (the activations' fused_swiglu). Every
// figure is the hand count written beside it.
#include <gtest/gtest.h>

#include <string>

#include "../../plugins/activations/megatron/transformer_activations.hpp"
#include "layer_shapes.hpp"
#include "test_support.hpp"

namespace memplan::testing {
namespace {

using plugins::ActivationSettings;
using plugins::RecomputePolicy;
using plugins::TransformerShape;

// Llama 3.1 8B's layer (h 4096, q 4096, kv 1024, f 14336, 32 heads), bf16,
// flash attention (K and V at the kv heads), every base weight frozen, LoRA on
// every linear through the fused functions, per token:
//   two RMSNorms computing in bf16 (Unsloth's Triton kernel: input and rstd,
//   rms_norm_upcast = false)            2 x (2h + 2)       = 16,388
//   LoRA_QKV's X and LoRA_MLP's X       2 x 2h             = 16,384
//   q and SDPA's output                 2 x 2q             = 16,384
//   k and v                             2 x 2kv            =  4,096
//   LoRA_MLP's gate and up              2 x 2f             = 57,344
//   the log-sum-exp                     4a                 =    128
// = 110,724 bytes (the fused layer's count is 139,392: its MLP keeps silu's
// output too, p f = 28,672, and its norms p h each without the rstd).
// HF's RMSNorm (upcast): 2 x (4h + 4) = 32,776 instead, 127,112 in all; a
// 4-bit base adds nothing (the functions keep their inputs anyway).
ActivationSettings kernel_layer() {
  ActivationSettings o = eager_bf16_flash_frozen();
  o.eager.repeat_kv = false;
  o.eager.rms_norm_upcast = false;
  o.eager.kernel_qkv = o.eager.kernel_o = o.eager.kernel_mlp = true;
  return o;
}

TEST(LoraKernels, WhatTheFusedFunctionsKeep) {
  const TransformerShape x = llama(4096, 32, 8, 14336);
  ActivationSettings o = kernel_layer();
  EXPECT_DOUBLE_EQ(plugins::stored_bytes_per_layer(x, o), 110'724.0);
  o.eager.rms_norm_upcast = true;
  EXPECT_DOUBLE_EQ(plugins::stored_bytes_per_layer(x, o), 127'112.0);
  // A 4-bit base changes nothing: the functions dequantize and keep their inputs anyway (no MatMul4Bit).
  o.eager.packed_base = true;
  o.eager.packed_inputs_kept = true;
  EXPECT_DOUBLE_EQ(plugins::stored_bytes_per_layer(x, o), 127'112.0);
}

// The recomputed layer's high point, per token, the larger of LoRA_MLP's
// forward (the SwiGLU product 2f = 28,672, which it does not keep, and down's
// output 2h = 8,192; the residual is what the norm keeps, no local) and its
// backward (DW = dY @ down^T, 2f, beside dY, 2h): 36,864 both with Unsloth's
// in-place addmm_; reentrant checkpointing holds the layer's output too (2h):
// 45,056. axolotl's matmul_lora adds through a temporary of the output's width:
// forward + 2h = 45,056, backward + 2f = 65,536 (73,728 reentrant). With HF's
// upcasting RMSNorm the residual is a local besides (2h): axolotl's forward
// 53,248, still below its backward; Unsloth's non-reentrant forward 8,192 +
// 36,864 = 45,056, above its backward (36,864).
TEST(LoraKernels, TheRecomputedLayersHighPoint) {
  const TransformerShape x = llama(4096, 32, 8, 14336);
  ActivationSettings o = kernel_layer();
  o.recompute = RecomputePolicy::full;
  o.eager.kernel_adds_in_place = true;
  EXPECT_DOUBLE_EQ(plugins::kernel_mlp_excess(x, o), 36'864.0);
  EXPECT_DOUBLE_EQ(plugins::recompute_working_set(x, o), 110'724.0 + 36'864.0);
  o.reentrant = true;
  EXPECT_DOUBLE_EQ(plugins::kernel_mlp_excess(x, o), 45'056.0);
  o.eager.kernel_adds_in_place = false;
  EXPECT_DOUBLE_EQ(plugins::kernel_mlp_excess(x, o), 73'728.0);
  o.reentrant = false;
  EXPECT_DOUBLE_EQ(plugins::kernel_mlp_excess(x, o), 65'536.0);
  o.eager.rms_norm_upcast = true;
  EXPECT_DOUBLE_EQ(plugins::kernel_mlp_excess(x, o), 65'536.0);
  o.eager.kernel_adds_in_place = true;
  EXPECT_DOUBLE_EQ(plugins::kernel_mlp_excess(x, o), 8'192.0 + 36'864.0);
}

// Through the plugins: the unsloth profile (eager layers with its Triton
// RMSNorm, flash attention without repeated K and V, kernels = "unsloth") on a
// Llama 3.1 8B QLoRA r 32 run of 4096 tokens, the profile's checkpoint
// reentrant: the working set is (110,724 + 45,056) x 4096 = 638,074,880
// bytes; the final norm keeps its bf16 input and rstd (2h + 2, the rstd priced
// at the input's bytes) and Cut Cross-Entropy the head's input (2h): 16,386 x
// 4096 = 67,117,056 bytes. The covered adapters keep nothing of their own, so
// adding through a temporary differs only by it: the backward's 73,728 against
// 45,056, 28,672 x 4096 = 117,440,512 bytes more.
//
// Unsloth before 2025.3.1 (the profile's base; version "2025.1.5") added that
// way (unsloth/kernels/utils.py @ e3162dc5bf: out += (X @ A.to(dtype)) @
// (s * B.to(dtype))), as axolotl does, until 4f166026d7 (2025-03-01); and
// before 2025.3.2 its Unsloth_Offloaded_Gradient_Checkpointer.backward copied
// each layer's input back when the layer's backward began (unsloth_zoo, called
// from models/llama.py 816-829 @ e3162dc5bf): backward holds the layer in
// flight only (offload_backward_layers = 1), where 2025.3.2's
// UnslothCheckpointFunction keeps a reload buffer and the last layer's input
// (2). The stored layer is its input, 2h = 8,192 bytes a token, 33,554,432 at
// 4096 tokens: the offload window is 2 x that in forward and in the later
// backward, 1 x in the old backward (134,217,728 -> 100,663,296 over both
// passes). lora_kernels says when Unsloth's kernels add through the
// temporary. axolotl's kernels add through it whatever the profile says of
// Unsloth's (unsloth_adds_in_place is read for kernels = "unsloth" only).
TEST(LoraKernels, ThroughTheUnslothProfile) {
  const auto scenario = [](const std::string& framework, const std::string& lora) {
    return "name = \"u\"\nmode = \"train\"\n[framework]\nuse = \"unsloth\"\n" + framework +
           "[model]\npreset = \"llama-3.1-8b\"\n[batch]\nmicro_batch = 1\nseq_len = 4096\n[precision]\n"
           "use = \"quantized\"\nunquantized = \"bf16\"\nadapters = \"fp32\"\n[optimizer]\nuse = \"adam-8bit\"\n"
           "[activations]\nuse = \"megatron\"\n[[strategy]]\nuse = \"lora\"\nrank = 32\ntargets = \"all-linear\"\n" +
           lora + "[hardware]\ngpu = \"h100-sxm-80gb\"\n";
  };
  const auto detail = [](const Evaluation& e) { return report_detail(e, "lora_kernels"); };
  const Evaluation unsloth = evaluate(scenario("", ""));
  EXPECT_EQ(unsloth.item_bytes("activations.recompute", MEMPLAN_ROLE_ACTIVATIONS), 638'074'880u);
  EXPECT_EQ(unsloth.item_bytes("activations.final_norm", MEMPLAN_ROLE_ACTIVATIONS), 67'117'056u);
  EXPECT_EQ(unsloth.item_bytes("activations.offload_window", MEMPLAN_ROLE_ACTIVATIONS), 134'217'728u);
  EXPECT_EQ(detail(unsloth), "\"unsloth\"");

  const Evaluation old = evaluate(scenario("version = \"2025.1.5\"\n", ""));
  EXPECT_EQ(old.item_bytes("activations.recompute", MEMPLAN_ROLE_ACTIVATIONS), 638'074'880u + 117'440'512u);
  EXPECT_EQ(old.item_bytes("activations.offload_window", MEMPLAN_ROLE_ACTIVATIONS), 100'663'296u);
  EXPECT_EQ(detail(old), "\"unsloth (adapters added through a temporary, as before 2025.3.1)\"");
  // 2025.3.1: the addition in place, the old checkpointer still.
  const Evaluation between = evaluate(scenario("version = \"2025.3.1\"\n", ""));
  EXPECT_EQ(between.item_bytes("activations.recompute", MEMPLAN_ROLE_ACTIVATIONS), 638'074'880u);
  EXPECT_EQ(between.item_bytes("activations.offload_window", MEMPLAN_ROLE_ACTIVATIONS), 100'663'296u);

  const Evaluation axolotl = evaluate(scenario("", "kernels = \"axolotl\"\n"));
  EXPECT_EQ(axolotl.item_bytes("activations.recompute", MEMPLAN_ROLE_ACTIVATIONS), 638'074'880u + 117'440'512u);
  EXPECT_EQ(detail(axolotl), "\"axolotl\"");
  const Evaluation told = evaluate(scenario("version = \"2025.1.5\"\n", "unsloth_adds_in_place = true\n"));
  EXPECT_EQ(told.item_bytes("activations.recompute", MEMPLAN_ROLE_ACTIVATIONS), 638'074'880u);
}

// Liger's SwiGLU (fused_swiglu; LigerSiLUMulFunction, liger_kernel/ops/swiglu.py
// @ ead96b61: ctx.save_for_backward(a, b)) keeps the gate and up outputs and
// recomputes silu in backward: Llama-3.2-3B (h 3072, f 8192, bf16) loses silu's
// output, 2f = 16,384 bytes a token: full fine-tuning 139,368 -> 122,984, a
// frozen base 98,408 -> 82,024 (the product is kept only where down trains).
TEST(LigerKernels, SwigluKeepsItsInputsOnly) {
  const TransformerShape x = llama(3072, 24, 8, 8192);
  ActivationSettings full = eager_bf16_flash();
  full.eager.fused_swiglu = true;
  EXPECT_DOUBLE_EQ(plugins::stored_bytes_per_layer(x, full), 122'984.0);
  ActivationSettings frozen = eager_bf16_flash_frozen();
  frozen.eager.fused_swiglu = true;
  EXPECT_DOUBLE_EQ(plugins::stored_bytes_per_layer(x, frozen), 82'024.0);
}

// Through the plugin (Llama-3.2-3B, 1024 tokens, 28 layers): 28 x 122,984 x
// 1024 bytes; refused on a two-projection MLP and outside eager layers.
TEST(LigerKernels, FusedSwigluThroughThePlugin) {
  const auto scenario = [](const std::string& preset, int seq_len, const std::string& activations) {
    return "name = \"l\"\nmode = \"train\"\n[model]\npreset = \"" + preset + "\"\n[batch]\nseq_len = " +
           std::to_string(seq_len) + "\n[precision]\nuse = \"bf16\"\n[optimizer]\nuse = \"sgd\"\n" +
           "[activations]\nuse = \"megatron\"\n" + activations;
  };
  const std::string base = scenario("llama-3.2-3b", 1024, "flash_attention = true\ndropout = false\n");
  EXPECT_EQ(evaluate_paper(base + "layer = \"eager\"\nfused_swiglu = true\n")
                .item_bytes("layers.0-27.activations", MEMPLAN_ROLE_ACTIVATIONS),
            28ull * 122'984 * 1024);
  EXPECT_NE(error_of(base + "fused_swiglu = true\n").find("option 'fused_swiglu': describes eager layers"),
            std::string::npos);
  const std::string gpt2 = scenario("gpt2-xl", 512, "layer = \"eager\"\nfused_swiglu = true\n");
  EXPECT_NE(error_of(gpt2).find("option 'fused_swiglu': sizes a gated MLP's SwiGLU, but the model's MLP has two "
                                "projections; remove fused_swiglu"),
            std::string::npos)
      << error_of(gpt2);
}

}  // namespace
}  // namespace memplan::testing
