// LitGPT's Llama layer as lit_gpt/model.py, lit_gpt/rmsnorm.py and lit_gpt/lora.py write it at commit 8641822
// (the code behind LitGPT's resource tables, validation/LITGPT-*.toml), under PyTorch 2.1 with bf16 weights,
// SDPA's flash kernel, LoRA r 8 on q and v (lora_dropout 0.05), every base weight frozen. Per token of a layer,
// tensor by tensor (autograd saves a tensor only for a gradient it computes; tools/autograd/derivatives.yaml):
//   RMSNorm x2       x * rsqrt(mean(x * x) + eps) in bf16, no upcast: its input 2h and the rsqrt 2   16,388
//   LoRAQKVLinear    one dropout mask h and one dropped copy 2h (lora_A's input), after_A 2 x 16 (conv1d's
//                    input), zero_pad's index_copy source 2 x (q + v) = 2 x 8,192                     28,704
//   attention        q and k (RoPE's torch.cat copies) 2h each, the fused qkv output 2 x 3h that SDPA's
//                    saved v (a view) holds, SDPA's output 2h, fp32 log-sum-exp 4a                     49,280
//   SwiGLU           fc_1's output, silu's output, fc_2's output: 3 x 2f                               66,048
// Llama-2-7B (h 4096, a 32, f 11008): 160,420 bytes, where the eager HF layer with the PEFT-style adapters
// counts 156,328 (fp32 norm inputs 2 x (4h + 4), a mask and dropped copy per adapter 2 x 3h, v alone).
// With a 4-bit base (bitsandbytes MatMul4Bit keeps every linear's input): the qkv input 2h, the MLP input 2h,
// the down input 2f and o's input, at micro-batch 1 a copy of SDPA's output (PyTorch 2.1's flash path allocates
// its output like the (B*T, heads, head_dim) view of q, head-major, so y.transpose(1, 2).reshape(B, T, C) copies),
// 2h: 160,420 + 8,192 + 8,192 + 22,016 + 8,192 = 207,012; at micro-batch 2 the reshape is a view: 2 x 198,820.
#include <gtest/gtest.h>

#include "../../plugins/activations/megatron/transformer_activations.hpp"
#include "layer_shapes.hpp"
#include "test_support.hpp"

#include <string>

namespace memplan::testing {
namespace {

using plugins::ActivationSettings;
using plugins::TransformerShape;

ActivationSettings litgpt_lora(bool litgpt) {
  ActivationSettings o = eager_bf16_flash_frozen();
  o.eager.repeat_kv = false;  // MHA: 32 kv heads
  o.eager.adapter_bytes = 2;
  o.eager.adapter_dropout = 0.05;
  // PEFT-style: q and v adapters, each its own input (2h) and rank (r 8 each).
  o.eager.adapter_inputs = 2 * 4096;
  o.eager.adapter_distinct_inputs = 4096;
  o.eager.adapter_rank = 16;
  if (litgpt) {
    // The lora plugin's fused_qkv: the shared input once, zero_pad's source (q + v widths) beside the rank.
    o.eager.adapter_inputs = 4096;
    o.eager.adapter_rank = 16 + 8192;
    o.eager.rms_norm_upcast = false;
    o.eager.fused_qkv = true;
  }
  return o;
}

TEST(LitgptLayers, Llama2SevenBLoraQv) {
  const TransformerShape x = llama(4096, 32, 32, 11008);
  EXPECT_DOUBLE_EQ(plugins::stored_bytes_per_layer(x, litgpt_lora(false)), 156'328.0);
  EXPECT_DOUBLE_EQ(plugins::stored_bytes_per_layer(x, litgpt_lora(true)), 160'420.0);
}

TEST(LitgptLayers, Llama2SevenBQloraKeepsOsCopiedInput) {
  const TransformerShape x = llama(4096, 32, 32, 11008);
  ActivationSettings o = litgpt_lora(true);
  o.eager.packed_base = true;
  o.eager.packed_inputs_kept = true;
  EXPECT_DOUBLE_EQ(plugins::stored_bytes_per_layer(x, o), 207'012.0);
  TransformerShape two = x;
  two.batch = 2;
  EXPECT_DOUBLE_EQ(plugins::stored_bytes_per_layer(two, o), 2 * 198'820.0);
}

// Under GQA LitGPT expands k and v to every query head and reshape copies them (repeat_kv): no qkv output is
// held beyond what repeat_kv counts, so fused_qkv adds only o's copied input (micro-batch 1), when o keeps it.
TEST(LitgptLayers, GroupedQueryHoldsNoFusedOutput) {
  const TransformerShape x = llama(3072, 24, 8, 8192);
  ActivationSettings o = eager_bf16_flash_frozen();
  const double base = plugins::stored_bytes_per_layer(x, o);
  o.eager.fused_qkv = true;
  EXPECT_DOUBLE_EQ(plugins::stored_bytes_per_layer(x, o), base);
  o.eager.output_trainable = true;
  EXPECT_DOUBLE_EQ(plugins::stored_bytes_per_layer(x, o), base + 2 * 3072);
}

// Through the plugins: the lora plugin's fused_qkv reports the shared input once and zero_pad's source beside
// the rank inputs, and megatron's rms_norm_upcast / fused_qkv read them; Llama-2-7B at 1304 tokens, micro-batch 1:
// 32 layers x 160,420 x 1304 = 6,694,005,760 bytes (156,328 x 32 x 1304 = 6,523,254,784 without the three options).
std::string litgpt_scenario(bool litgpt) {
  const std::string flags = litgpt ? "rms_norm_upcast = false\nfused_qkv = true\n" : "";
  return "mode = \"train\"\n[model]\npreset = \"llama-2-7b\"\n[batch]\nmicro_batch = 1\nseq_len = 1304\n"
         "[precision]\nuse = \"bf16\"\n[optimizer]\nuse = \"adamw\"\n"
         "[activations]\nuse = \"megatron\"\nflash_attention = true\ndropout = false\nlayer = \"eager\"\n" +
         flags + "[[strategy]]\nuse = \"lora\"\nrank = 8\ntargets = \"q,v\"\ndropout = 0.05\n" +
         (litgpt ? "fused_qkv = true\n" : "") + "[hardware]\ngpu = \"a100-sxm-40gb\"\n";
}

TEST(LitgptLayers, ThroughThePlugins) {
  EXPECT_EQ(evaluate_paper(litgpt_scenario(false)).item_bytes("layers.0-31.activations", MEMPLAN_ROLE_ACTIVATIONS),
            6'523'254'784u);
  EXPECT_EQ(evaluate_paper(litgpt_scenario(true)).item_bytes("layers.0-31.activations", MEMPLAN_ROLE_ACTIVATIONS),
            6'694'005'760u);
}

TEST(LitgptLayers, OptionsNeedEagerLayers) {
  std::string toml = litgpt_scenario(true);
  toml.replace(toml.find("layer = \"eager\""), 15, "layer = \"fused\"");
  // fused_qkv is named, with its place and the fix; rms_norm_upcast = false (line 16) says what fused layers do
  // anyway and is accepted (EagerLayers.OptionErrors).
  const std::string error = error_of(toml);
  EXPECT_NE(error.find("scenario.toml:17:13"), std::string::npos) << error;
  EXPECT_NE(error.find("option 'fused_qkv': describes eager layers; it needs layer = \"eager\""), std::string::npos)
      << error;
}

}  // namespace
}  // namespace memplan::testing
