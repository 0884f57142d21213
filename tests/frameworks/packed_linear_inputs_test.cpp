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

// bitsandbytes 0.43.2 (pull request #1270) stopped keeping MatMul4Bit's input
// (ctx.tensors = (None, B)); PEFT's Linear4bit still casts nothing for its
// adapters under autocast (packed_base), so an undropped lora_A keeps x itself.
// Llama-3.2-3B as above, fp32 adapters r 16 on q and v under autocast
// (adapter inputs 2h, one distinct, h): with the input kept (<= 0.43.1) the
// layer keeps the three packed inputs, 2h + 2h + 2f = 28,672 B a token, and
// lora_A nothing more; without (>= 0.43.2) lora_A keeps the shared q/v input,
// 2h = 6,144, and the MLP and down inputs go: 22,528 B a token less. A 16-bit
// base's adapters get autocast's 16-bit copy per matrix, 2 x 2h = 12,288:
// 6,144 more than the bitsandbytes base without kept inputs.
TEST(PackedLinearInputs, Bitsandbytes0432KeepsNoInputButPeftStillSkipsTheCast) {
  ActivationSettings o = eager_bf16_flash_frozen();
  const TransformerShape x = llama(3072, 24, 8, 8192);
  o.eager.adapter_rank = 2 * 16;
  o.eager.adapter_bytes = 4;
  o.eager.adapter_inputs = 2 * 3072;
  o.eager.adapter_distinct_inputs = 3072;
  o.eager.adapter_autocast = true;
  o.eager.packed_base = true;
  o.eager.packed_inputs_kept = true;
  const double kept = plugins::stored_bytes_per_layer(x, o);
  o.eager.packed_inputs_kept = false;
  const double not_kept = plugins::stored_bytes_per_layer(x, o);
  EXPECT_DOUBLE_EQ(kept - not_kept, 22'528.0);
  o.eager.packed_base = false;
  EXPECT_DOUBLE_EQ(plugins::stored_bytes_per_layer(x, o) - not_kept, 6'144.0);
}

// fp32 norm weights ahead of bitsandbytes 4-bit MLP linears (megatron 1.32.0; PEFT's
// prepare_model_for_kbit_training casts the non-quantized parameters to fp32): the norm's output is fp32 and
// Linear4bit returns its input's dtype (out.to(inp_dtype)), so gate, SiLU's output and up are kept in fp32, and
// down's fp32 output makes the residual stream fp32. Llama-3.2-3B as above, every weight frozen: the 98,408 bytes
// a token with SwiGLU's 6f at 2 bytes become 12f at 4: + 6 x 8192 = 49,152 -> 147,560 (the norms keep their
// fp32 input copy, 4h + 4, either way). Under full recomputation each layer keeps its input in the stream's
// dtype: 4 x 3072 = 12,288 bytes a token, not 6,144.
TEST(PackedLinearInputs, Fp32NormsMakeThe4BitMlpsOutputsFp32) {
  ActivationSettings o = eager_bf16_flash_frozen();
  const TransformerShape x = llama(3072, 24, 8, 8192);
  o.eager.packed_base = true;
  EXPECT_DOUBLE_EQ(plugins::stored_bytes_per_layer(x, o), 98'408.0);
  o.eager.packed_outputs_fp32 = true;
  o.residual_bytes = 4;
  EXPECT_DOUBLE_EQ(plugins::stored_bytes_per_layer(x, o), 147'560.0);
  // bitsandbytes <= 0.43.1 keeps MatMul4Bit's input, and its Linear4bit then computes in the fp32 input's dtype
  // (set_compute_type): the fp32 tensors themselves, shared, not 16-bit casts: the attention's input 4h, the MLP's
  // 4h and down's 4f, 12,288 + 12,288 + 32,768 = 57,344 -> 204,904 (at 2 bytes and shared: 28,672).
  o.eager.packed_inputs_kept = true;
  EXPECT_DOUBLE_EQ(plugins::stored_bytes_per_layer(x, o), 204'904.0);
  o.eager.packed_inputs_kept = false;
  o.recompute = plugins::RecomputePolicy::full;
  EXPECT_DOUBLE_EQ(plugins::stored_bytes_per_layer(x, o), 12'288.0);
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

// Through the plugin: Llama-2-7B QLoRA under the hf-transformers profile with full recomputation, unquantized
// "fp32" (the norms fp32) against "bf16": each of the 32 layers keeps its fp32 input, 4 x 4096 x 2048 =
// 33,554,432 bytes instead of 16,777,216.
TEST(PackedLinearInputs, Fp32NormsThroughTheProfile) {
  const auto stored = [](const std::string& unquantized) {
    const std::string nf4 = "use = \"quantized\"\nformat = \"nf4\"\ndouble_quant = true\nunquantized = \"" +
                            unquantized + "\"\nactivations = \"bf16\"\n";
    return evaluate(llama7b(nf4, "")).item_bytes("layers.0-31.activations", MEMPLAN_ROLE_ACTIVATIONS);
  };
  EXPECT_EQ(stored("bf16"), 32u * 16'777'216u);
  EXPECT_EQ(stored("fp32"), 32u * 33'554'432u);
}

// The same for 4-bit MoE experts (megatron 1.35.0): Mixtral-8x7B QLoRA, fp32 norms ahead of 4-bit experts,
// whose outputs take their fp32 input's dtype, and the sparse block's output buffer the hidden states'
// (MixtralSparseMoeBlock's torch.zeros(..., dtype=hidden_states.dtype)): each of the 32 recomputed layers keeps
// its fp32 input, 4 x 4096 x 2048 = 33,554,432 bytes instead of 16,777,216. Found by a blind test: fms-
// acceleration's Mixtral QLoRA baseline on one A100 (TRL's fp32 norms), -13.3 / -19.1 % -> -0.1 / -0.5 %.
TEST(PackedLinearInputs, Fp32NormsMakeThe4BitExpertsOutputsFp32) {
  const auto stored = [](const std::string& unquantized) {
    const std::string run =
        "name = \"q\"\nmode = \"train\"\n[framework]\nuse = \"hf-transformers\"\nversion = \"4.39\"\n[model]\n"
        "preset = \"mixtral-8x7b\"\n[batch]\nmicro_batch = 1\nseq_len = 2048\n[precision]\nuse = \"quantized\"\n"
        "format = \"nf4\"\ndouble_quant = true\nunquantized = \"" + unquantized + "\"\nactivations = \"bf16\"\n"
        "[optimizer]\nuse = \"adamw\"\n[activations]\nuse = \"megatron\"\n[[strategy]]\nuse = \"lora\"\nrank = 8\n"
        "targets = \"q,k,v,o\"\n[[strategy]]\nuse = \"recompute\"\npolicy = \"full\"\n";
    return evaluate(run).item_bytes("layers.0-31.activations", MEMPLAN_ROLE_ACTIVATIONS);
  };
  EXPECT_EQ(stored("bf16"), 32u * 16'777'216u);
  EXPECT_EQ(stored("fp32"), 32u * 33'554'432u);
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

// A loop that keeps its output keeps the graph (megatron 1.23.0): MatMul4Bit's
// ctx.tensors = (A, B) is a plain attribute (bitsandbytes autograd/
// _functions.py @ 0.42.0), which autograd does not release when the node has
// run, so each 4-bit matrix's input of the previous micro-batch lives through
// the optimizer step and the next forward (LitGPT's `logits = model(...)`,
// validation LGH-*-qlora-*). Llama-2-7B, every Linear 4-bit (the head too),
// 2 x 512 tokens, no recomputation, per token and layer: the attention input
// 2h, o's input 2 x 4096, the MLP input 2h and down's input 2 x 11008 =
// 8,192 + 8,192 + 8,192 + 22,016 = 46,592 B; 1,024 tokens x 32 layers =
// 1,526,726,656 B, and the head's input 1,024 x 2h = 8,388,608: 1,535,115,264 B,
// in the forward and in the optimizer step. Recomputation (reentrant: MatMul4Bit
// stores nothing under no_grad) or a loop that drops its output: none.
std::string litgpt_qlora(const std::string& activations, const std::string& strategies) {
  return "name = \"q\"\nmode = \"train\"\n[model]\npreset = \"llama-2-7b\"\n[batch]\nmicro_batch = 2\n"
         "seq_len = 512\n[precision]\nuse = \"quantized\"\nformat = \"nf4\"\nquantize = \"attention,mlp,lm_head\"\n"
         "[optimizer]\nuse = \"adamw\"\n[activations]\nuse = \"megatron\"\nlayer = \"eager\"\n"
         "packed_linear_keeps_input = true\ncross_entropy = \"unfused\"\n" +
         activations + "[[strategy]]\nuse = \"lora\"\nrank = 32\ntargets = \"q,v\"\n" + strategies;
}

TEST(PackedLinearInputs, AHeldOutputKeepsThePreviousMicroBatchsInputs) {
  const Evaluation held = evaluate_paper(litgpt_qlora("output_held = true\n", ""));
  EXPECT_EQ(held.item_bytes("activations.held_packed_inputs", MEMPLAN_ROLE_ACTIVATIONS), 2u * 1'535'115'264);
  EXPECT_EQ(held.item_bytes_at("activations.held_packed_inputs", MEMPLAN_LIFETIME_TRANSIENT_FORWARD), 1'535'115'264u);
  EXPECT_EQ(held.item_bytes_at("activations.held_packed_inputs", MEMPLAN_LIFETIME_TRANSIENT_OPTIMIZER), 1'535'115'264u);
  EXPECT_EQ(evaluate_paper(litgpt_qlora("", "")).item_bytes("activations.held_packed_inputs",
                                                            MEMPLAN_ROLE_ACTIVATIONS),
            0u);
  EXPECT_EQ(evaluate_paper(litgpt_qlora("output_held = true\n",
                                        "[[strategy]]\nuse = \"recompute\"\npolicy = \"full\"\nreentrant = true\n"))
                .item_bytes("activations.held_packed_inputs", MEMPLAN_ROLE_ACTIVATIONS),
            0u);
}

// Non-reentrant checkpointing (megatron 1.32.0) runs each layer's first forward with autograd on; its
// saved-tensor hooks (torch/utils/checkpoint.py, _checkpoint_hook) swap what save_for_backward keeps for
// recomputed tensors, but not MatMul4Bit's plain ctx.tensors = (A, B) (bitsandbytes 0.42.0 to 0.43.1): every
// 4-bit matrix's input stays with its node until the layer's backward frees it, as without recomputation
// (the fsdp_qlora README of 2024-03 asks for --reentrant_checkpointing True against "a bug in bitsandbytes
// which results in high memory usage"). The run above under full recomputation: per layer and micro-batch
// 1,024 tokens x 46,592 B = 47,710,208 B, x 32 layers = 1,526,726,656 B (layers.0-31.activations.checkpointed_packed_inputs,
// the head's input not among them: the head is outside the checkpointed layers), beside each layer's input the
// recomputation keeps; with the output held, the previous micro-batch's too (held_packed_inputs, as above).
// Reentrant checkpointing, or bitsandbytes >= 0.43.2 (packed_linear_keeps_input = false): none.
TEST(PackedLinearInputs, NonReentrantCheckpointingKeepsThe4BitInputs) {
  const std::string non_reentrant = "[[strategy]]\nuse = \"recompute\"\npolicy = \"full\"\nreentrant = false\n";
  const std::string reentrant = "[[strategy]]\nuse = \"recompute\"\npolicy = \"full\"\nreentrant = true\n";
  const char* item = "layers.0-31.activations.checkpointed_packed_inputs";
  const Evaluation kept = evaluate_paper(litgpt_qlora("", non_reentrant));
  EXPECT_EQ(kept.item_bytes(item, MEMPLAN_ROLE_ACTIVATIONS), 1'526'726'656u);
  EXPECT_EQ(evaluate_paper(litgpt_qlora("output_held = true\n", non_reentrant))
                .item_bytes("activations.held_packed_inputs", MEMPLAN_ROLE_ACTIVATIONS),
            2u * 1'535'115'264);
  EXPECT_EQ(evaluate_paper(litgpt_qlora("", reentrant)).item_bytes(item, MEMPLAN_ROLE_ACTIVATIONS), 0u);
  std::string after_0432 = litgpt_qlora("", non_reentrant);
  const std::string keeps = "packed_linear_keeps_input = true";
  after_0432.replace(after_0432.find(keeps), keeps.size(), "packed_linear_keeps_input = false");
  EXPECT_EQ(evaluate_paper(after_0432).item_bytes(item, MEMPLAN_ROLE_ACTIVATIONS), 0u);
  // recompute 1.4.0's reentrant_when_packed: reentrant for 4-bit layers, whatever `reentrant` says.
  const std::string when_packed = "[[strategy]]\nuse = \"recompute\"\npolicy = \"full\"\nreentrant_when_packed = true\n";
  EXPECT_EQ(evaluate_paper(litgpt_qlora("", when_packed)).item_bytes(item, MEMPLAN_ROLE_ACTIVATIONS), 0u);
  EXPECT_EQ(evaluate_paper(litgpt_qlora("", when_packed + "reentrant = false\n")).item_bytes(item, MEMPLAN_ROLE_ACTIVATIONS),
            0u);
}

// The fsdp-qlora profile (train.py's reentrant_checkpointing defaults to False, but its README @ 50efa1e adds
// --reentrant_checkpointing true to every bitsandbytes command): a QLoRA run is reentrant and keeps no 4-bit inputs;
// one that says reentrant_when_packed = false keeps them. Llama-2-7B, every linear of the layers 4-bit (the head
// 16-bit), 1 x 2048 tokens on each of 2 FSDP ranks: per layer 2048 x 46,592 B = 95,420,416 B, x 32 =
// 3,053,453,312 B. A 16-bit LoRA run stays non-reentrant, train.py's default: its estimate equals the same run
// with reentrant = false said, and differs from reentrant = true (the recomputed layer's high point).
TEST(PackedLinearInputs, FsdpQloraRunsBitsandbytesReentrantUnlessTold) {
  const std::string run =
      "name = \"q\"\nmode = \"train\"\n[framework]\nuse = \"fsdp-qlora\"\n[model]\npreset = \"llama-2-7b\"\n"
      "[batch]\nmicro_batch = 1\nseq_len = 2048\n[precision]\nuse = \"quantized\"\nformat = \"nf4\"\n"
      "double_quant = true\nunquantized = \"bf16\"\nadapters = \"bf16\"\noptimizer_states = \"bf16\"\n"
      "[optimizer]\nuse = \"adamw\"\n[activations]\nuse = \"megatron\"\nflash_attention = true\ndropout = false\n"
      "[[strategy]]\nuse = \"lora\"\n[[strategy]]\nuse = \"data-parallel\"\nsize = 2\n[[strategy]]\nuse = \"fsdp\"\n"
      "[[strategy]]\nuse = \"recompute\"\npolicy = \"full\"\n";
  const char* item = "layers.0-31.activations.checkpointed_packed_inputs";
  EXPECT_EQ(evaluate(run).item_bytes(item, MEMPLAN_ROLE_ACTIVATIONS), 0u);
  EXPECT_EQ(evaluate(run + "reentrant_when_packed = false\n").item_bytes(item, MEMPLAN_ROLE_ACTIVATIONS),
            3'053'453'312u);
  std::string lora = run;
  const std::string nf4 = "use = \"quantized\"\nformat = \"nf4\"\ndouble_quant = true\nunquantized = \"bf16\"\n"
                          "adapters = \"bf16\"\noptimizer_states = \"bf16\"\n";
  lora.replace(lora.find(nf4), nf4.size(), "use = \"bf16\"\n");
  const auto peak = [](const Evaluation& e) { return e.breakdown().quantities[kAllocated].peak; };
  EXPECT_EQ(peak(evaluate(lora)), peak(evaluate(lora + "reentrant = false\n")));
  EXPECT_NE(peak(evaluate(lora)), peak(evaluate(lora + "reentrant = true\n")));
}

// dequantized_copies = 2: MatMul4Bit's dequantize_4bit(B, state).to(A.dtype)
// with an fp16 quant_state under bf16 compute (Lightning Fabric quantizes
// from .to(torch.half)) holds both copies of the matrix. The same run: the
// 4-bit head's at the forward's end (32,000 x 4,096 x 2 B = 262,144,000), the
// layers' largest while the layers' forward runs and again in backward
// (4,096 x 11,008 x 2 B = 90,177,536 each) and the head's at the loss's
// backward: 704,643,072 B in all with one copy, twice that with two.
TEST(PackedLinearInputs, TwoDequantizedCopies) {
  const auto dequantized = [](const std::string& copies) {
    return evaluate_paper(litgpt_qlora(copies, ""))
        .item_bytes("activations.dequantized_weight", MEMPLAN_ROLE_ACTIVATIONS);
  };
  EXPECT_EQ(dequantized(""), 704'643'072u);
  EXPECT_EQ(dequantized("dequantized_copies = 2\n"), 2u * 704'643'072);
  EXPECT_EQ(error_of(litgpt_qlora("dequantized_copies = 3\n", ""), "a.toml"),
            "a.toml:19:22: error: in [activations], activations plugin 'megatron', option 'dequantized_copies': must "
            "be 1 or 2 (the dequantized matrix, and its cast to the compute dtype), got 3 (plugin library " +
                plugin_dir() + "/memplan-megatron.so)");
}

}  // namespace
}  // namespace memplan::testing
