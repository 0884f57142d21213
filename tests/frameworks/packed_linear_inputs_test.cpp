// bitsandbytes' 4-bit linear layers keep their input for backward though their
// weight is frozen: MatMul4Bit.forward (bitsandbytes/autograd/_functions.py @
// 0.43.0) sets ctx.tensors = (A, B) whenever A or the weight needs a gradient,
// and its backward uses A only for the weight's gradient, which it never
// computes ("not supported by PyTorch"). A frozen nn.Linear keeps nothing for
// its input gradient but the weight (autograd saves a tensor only when the
// gradient that uses it is computed). The megatron option
// packed_linear_keeps_input (the hf-transformers profile sets it) counts, in
// eager layers whose linear weights are packed below one byte, each such
// layer's input as a trained layer's: the q/k/v input and the MLP input (p h
// each) and the down projection's input (p f); the o projection's input is
// the attention output, already kept by SDPA/flash.
#include <gtest/gtest.h>

#include <string>

#include "../../plugins/activations/megatron/transformer_activations.hpp"
#include "layer_shapes.hpp"
#include "test_support.hpp"

namespace memplan::testing {
namespace {

using plugins::ActivationSettings;
using plugins::TransformerShape;

// Llama-3.2-3B (h 3072, 24 heads, 8 kv heads, f 8192), bf16, flash, K/V
// repeated, every weight frozen: 98,408 bytes per token
// (EagerLayers.LoraFrozenBaseAndDroppedOutAdapterInputs: two norms 2 x (4h + 4)
// = 24,584, q 2h, the attention output 2h, repeated K and V 4h, lse 4a = 96,
// SwiGLU's gate, silu and up 6f). A 4-bit base keeps beside them the q/k/v
// input 2h = 6,144, the MLP input 2h = 6,144 and the down input 2f = 16,384:
// 98,408 + 28,672 = 127,080 bytes.
TEST(PackedLinearInputs, FourBitLayersKeepTheirInputs) {
  ActivationSettings o = eager_bf16_flash_frozen();
  const TransformerShape x = llama(3072, 24, 8, 8192);
  EXPECT_DOUBLE_EQ(plugins::stored_bytes_per_layer(x, o), 98'408.0);
  o.eager.packed_inputs_kept = true;
  EXPECT_DOUBLE_EQ(plugins::stored_bytes_per_layer(x, o), 127'080.0);
  // A trained base keeps those inputs anyway: the flag adds nothing.
  ActivationSettings full = eager_bf16_flash();
  const double trained = plugins::stored_bytes_per_layer(x, full);
  full.eager.packed_inputs_kept = true;
  EXPECT_DOUBLE_EQ(plugins::stored_bytes_per_layer(x, full), trained);
}

// Through the plugin and the hf-transformers profile: Llama-2-7B QLoRA (nf4
// base, r 8 on q,k,v,o and the MLP, lora dropout 0), micro-batch 1 x 2048
// tokens, full recomputation (the profile's reentrant checkpointing). The
// profile's default (packed_linear_keeps_input = true) adds to the layer's
// saves one layer's three inputs,
//   (2 x 4096 + 2 x 4096 + 2 x 11008) x 2048 = 38,400 x 2048 = 78,643,200 bytes.
// bf16 adapters: those are the very tensors the uncast, undropped adapters'
// lora_A keep (bnb.py casts nothing when the dtypes match; o's input is SDPA's
// saved output either way), so the flag changes nothing.
// fp32 adapters: their cast copies stay theirs, and the flag adds the 78,643,200
// bytes to the saves; the working set's high point (at down's adapter, reentrant)
// holds the residual (2h), the MLP's input unless MatMul4Bit keeps it (2h), the
// product unless MatMul4Bit keeps it (2f), down's output (2h) and lora_B's two
// fp32 outputs (8h): 14h + 2f = 79,360 a token without the flag, 12h = 49,152
// with it (up's moment, 2h + 8f - 2f - 4f = 30,208, stays below). In all the flag
// adds 78,643,200 - (79,360 - 49,152) x 2048 = 16,777,216 bytes.
std::string llama7b(const std::string& precision, const std::string& activations) {
  return "name = \"q\"\nmode = \"train\"\n[framework]\nuse = \"hf-transformers\"\nversion = \"4.39\"\n[model]\n"
         "preset = \"llama-2-7b\"\n[batch]\nmicro_batch = 1\nseq_len = 2048\n[precision]\n" +
         precision + "[optimizer]\nuse = \"adamw\"\n[activations]\nuse = \"megatron\"\n" + activations +
         "[[strategy]]\nuse = \"lora\"\nrank = 8\ntargets = \"q,k,v,o,mlp\"\n[[strategy]]\nuse = \"recompute\"\n"
         "policy = \"full\"\n";
}

TEST(PackedLinearInputs, ThroughTheHfTransformersProfile) {
  const auto working_set = [](const std::string& adapters, const std::string& activations) {
    const std::string nf4 = "use = \"quantized\"\nformat = \"nf4\"\ndouble_quant = true\nunquantized = \"bf16\"\n" +
                            adapters;
    return evaluate(llama7b(nf4, activations)).item_bytes("activations.recompute", MEMPLAN_ROLE_ACTIVATIONS);
  };
  const std::string off = "packed_linear_keeps_input = false\n";
  EXPECT_EQ(working_set("adapters = \"bf16\"\n", ""), working_set("adapters = \"bf16\"\n", off));
  EXPECT_EQ(working_set("adapters = \"fp32\"\n", "") - working_set("adapters = \"fp32\"\n", off), 16'777'216u);
  const std::string bf16 = "use = \"bf16\"\n";
  EXPECT_EQ(evaluate(llama7b(bf16, "")).item_bytes("activations.recompute", MEMPLAN_ROLE_ACTIVATIONS),
            evaluate(llama7b(bf16, off)).item_bytes("activations.recompute", MEMPLAN_ROLE_ACTIVATIONS));
}

}  // namespace
}  // namespace memplan::testing
