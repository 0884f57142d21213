// What eager PyTorch layers keep for backward (docs/formulas.md, "Eager
// layers"), per token and layer, from the autograd rules of each op
// (PyTorch tools/autograd/derivatives.yaml; transformers
// models/llama/modeling_llama.py, models/bert/modeling_bert.py; torchtune
// modules/), and the loss paths' bytes per logit element. Every figure is
// the hand count written beside it.
#include <gtest/gtest.h>

#include <string>

#include "../../plugins/activations/megatron/transformer_activations.hpp"
#include "layer_shapes.hpp"
#include "test_support.hpp"

namespace memplan::testing {
namespace {

using plugins::ActivationSettings;
using plugins::CrossEntropy;
using plugins::LayerImplementation;
using plugins::RecomputePolicy;

// Bytes of the activation items named `name` with `lifetime` (MEMPLAN_LIFETIME_*).
uint64_t with_lifetime(const Evaluation& e, std::string_view name, int32_t lifetime) {
  uint64_t bytes = 0;
  for (const PlanItem& item : e.estimator().plan().items)
    if (item.role == MEMPLAN_ROLE_ACTIVATIONS && item.lifetime == lifetime && item.name_view() == name)
      bytes += item.bytes();
  return bytes;
}
using plugins::TransformerShape;

// Llama-3.2-3B (h 3072, 24 heads, 8 kv heads, f 8192), bf16, SDPA flash, full
// fine-tuning, K/V repeated: two RMSNorms 2 x (4h fp32 input + 4 rsqrt + 2h
// normalized) + the q/k/v input 2h + the MLP input 2h + q 2h + repeated k, v
// 4h + SDPA output 2h + log-sum-exp 4a + gate, silu, up, product 8f
// = 24h + 8f + 4a + 8 = 73,728 + 65,536 + 96 + 8 = 139,368 bytes.
TEST(EagerLayers, HuggingFaceLlamaSdpaPerToken) {
  EXPECT_DOUBLE_EQ(plugins::stored_bytes_per_layer(llama(3072, 24, 8, 8192), eager_bf16_flash()), 139'368.0);
}

// Llama-2-7B (h 4096, 32 heads = kv heads, f 11008): 24 x 4096 + 8 x 11008 +
// 4 x 32 + 8 = 98,304 + 88,064 + 128 + 8 = 186,504 bytes (repeat_kv changes
// nothing when kv heads = heads).
TEST(EagerLayers, LlamaTwoSevenBillionPerToken) {
  EXPECT_DOUBLE_EQ(plugins::stored_bytes_per_layer(llama(4096, 32, 32, 11008), eager_bf16_flash()), 186'504.0);
}

// SDPA reading the kv heads directly (enable_gqa): K and V at 2 x 1024 instead
// of 2 x 3072: 139,368 - 2 x 2 x (3072 - 1024) = 131,176 bytes.
TEST(EagerLayers, NativeGqaKeepsKvAtItsWidth) {
  ActivationSettings o = eager_bf16_flash();
  o.eager.repeat_kv = false;
  EXPECT_DOUBLE_EQ(plugins::stored_bytes_per_layer(llama(3072, 24, 8, 8192), o), 131'176.0);
}

// BERT-large in fp32 (h 1024, 16 heads, f 4096, s 512), eager attention, dropout
// 0.1, LayerNorm, GELU: 34h + 8f + 9as + 16 per token = 34,816 + 32,768 +
// 73,728 + 16 = 141,328 bytes; Korthikanti et al.'s tensors in fp32 with
// 1-byte masks, plus LayerNorm's fp32 mean and rstd.

TEST(EagerLayers, HuggingFaceBertFp32PerToken) {
  EXPECT_DOUBLE_EQ(plugins::stored_bytes_per_layer(bert_large_layer(), bert_eager(4)), 141'328.0 * 512);
}

// gelu_new as transformers writes it (NewGELUActivation, tensor ops; megatron 1.36.0): beside GELU's input and
// output autograd keeps tanh's output, 0.5 x and 1 + tanh, three tensors of the MLP's width more. GPT-2 XL's MLP
// (f 6400) in fp16: 3 x 2 x 6400 = 38,400 bytes a token and layer; at s 1024, b 1: 39,321,600 bytes a layer.
// Measured: transformers' GPT-2 large SDPA table (PR #31172) grows 3.0 GiB per 1,024 tokens where memplan's
// count without these grew 1.9 (a blind test; 27 h bytes a token and layer missing, 24 h of them these).
TEST(EagerLayers, CompositeGeluNewKeepsThreeMoreTensors) {
  plugins::TransformerShape gpt2{1024, 1, 1600, 25, 1600, 1600, 6400, false};
  ActivationSettings o;
  o.layer = plugins::LayerImplementation::eager;
  o.bytes = 2;
  o.flash_attention = true;
  o.dropout = false;
  const double plain = plugins::stored_bytes_per_layer(gpt2, o);
  o.eager.composite_gelu = true;
  EXPECT_DOUBLE_EQ(plugins::stored_bytes_per_layer(gpt2, o) - plain, 39'321'600.0);
  // Through the plugin: the gpt2-xl preset (activation = "gelu_new") under the hf-transformers profile, against
  // composite_gelu_new = false (a fused GELU): 48 layers x 39,321,600.
  const auto layers = [](const std::string& option) {
    return evaluate("name = \"g\"\nmode = \"train\"\n[framework]\nuse = \"hf-transformers\"\nversion = \"4.42\"\n"
                    "[model]\npreset = \"gpt2-xl\"\n[batch]\nseq_len = 1024\n[precision]\nuse = \"bf16\"\n"
                    "[optimizer]\nuse = \"sgd\"\n[activations]\nuse = \"megatron\"\ndropout = false\n" + option)
        .item_bytes("layers.0-47.activations", MEMPLAN_ROLE_ACTIVATIONS);
  };
  EXPECT_EQ(layers("") - layers("composite_gelu_new = false\n"), 48ull * 39'321'600);
}

// PyTorch up to 1.10 also keeps the softmax's input (the scaled, masked scores
// in fp32) for _softmax_backward_data, which took the input only for its dtype
// (tools/autograd/derivatives.yaml `_softmax`; pytorch PR #66018, released in
// 1.11, passes the dtype instead): BERT-large in fp32 at s 512 keeps 4as =
// 4 x 16 x 512 = 32,768 bytes more per token, 141,328 + 32,768 = 174,096.
TEST(EagerLayers, SoftmaxInputKeptUpToTorch110) {
  ActivationSettings o = bert_eager(4);
  o.eager.softmax_keeps_input = true;
  EXPECT_DOUBLE_EQ(plugins::stored_bytes_per_layer(bert_large_layer(), o), 174'096.0 * 512);
  // Flash attention runs no softmax op: the option changes nothing there (4a = 64 bytes of lse instead of 9as).
  o.flash_attention = true;
  ActivationSettings without = o;
  without.eager.softmax_keeps_input = false;
  EXPECT_DOUBLE_EQ(plugins::stored_bytes_per_layer(bert_large_layer(), o),
                   plugins::stored_bytes_per_layer(bert_large_layer(), without));
}

// OPT-1.3B's layer (h 2048, 32 heads, f 8192, ReLU, LayerNorm, biases) at s 512, b 1, fp16, eager attention,
// every weight trained, no dropout: two LayerNorms 2 x (2h + 8) + the q/k/v and MLP inputs 2 x 2h + q, k, v and
// o's input 4 x 2h + the fp32 softmax and fp16 probabilities (4 + 2) a s + GELU's input and output 2 x 2f
// = 8,208 + 8,192 + 16,384 + 98,304 + 32,768 = 163,856 bytes a token.
// transformers' OPTAttention (modeling_opt.py) clamps the masked fp16 scores with torch.max(scores, finfo.min)
// before the softmax; maximum saves both inputs (derivatives.yaml), so the masked scores stay: + 2 a s = 32,768
// (196,624). ReLU saves only its result, which fc2 keeps as its input: - 2f = 16,384 (147,472 alone; 180,240
// with the clamp). OPT's dropout 0.1 with attention_dropout 0.0: the two residual masks 2h = 4,096 and no
// attention mask: 184,336; with the probabilities dropped out as well (attention_dropout on, the default) the
// 1-byte mask a s = 16,384 joins: 200,720. Validation: DSX-chat-opt-1.3b-sft-z2-16gpu-bs8.
TEST(EagerLayers, OptClampReluAndResidualOnlyDropout) {
  plugins::TransformerShape x = bert_large_layer();
  x.hidden = 2048;
  x.heads = 32;
  x.q_width = 2048;
  x.kv_width = 2048;
  x.ffn = 8192;
  ActivationSettings o = bert_eager(2);
  o.dropout = false;
  // GPT-2's and BERT's eager attention in pure fp16 run the softmax in fp16: its one 2-byte output is also the
  // PV matmul's input, 2 a s in place of (4 + 2) a s: 163,856 - 4 x 32 x 512 = 98,320 bytes a token.
  EXPECT_DOUBLE_EQ(plugins::stored_bytes_per_layer(x, o), 98'320.0 * 512);
  o.eager.softmax_upcast = true;  // OPTAttention upcasts fp16 scores to fp32 for the softmax (PR #17437)
  EXPECT_DOUBLE_EQ(plugins::stored_bytes_per_layer(x, o), 163'856.0 * 512);
  o.eager.masked_scores_kept = true;
  EXPECT_DOUBLE_EQ(plugins::stored_bytes_per_layer(x, o), 196'624.0 * 512);
  o.eager.relu_mlp = true;
  EXPECT_DOUBLE_EQ(plugins::stored_bytes_per_layer(x, o), 180'240.0 * 512);
  o.eager.masked_scores_kept = false;
  EXPECT_DOUBLE_EQ(plugins::stored_bytes_per_layer(x, o), 147'472.0 * 512);
  o.eager.masked_scores_kept = true;
  o.dropout = true;
  o.eager.attention_dropout = false;
  EXPECT_DOUBLE_EQ(plugins::stored_bytes_per_layer(x, o), 184'336.0 * 512);
  o.eager.attention_dropout = true;
  EXPECT_DOUBLE_EQ(plugins::stored_bytes_per_layer(x, o), 200'720.0 * 512);
  // With the second projection frozen GELU keeps only its input (p f: its output, fc2's input, is kept for fc2's
  // weight gradient only) and ReLU its result (p f): the two are equal.
  ActivationSettings relu_frozen = o;
  relu_frozen.eager.down_trainable = false;
  ActivationSettings gelu_frozen = relu_frozen;
  gelu_frozen.eager.relu_mlp = false;
  EXPECT_DOUBLE_EQ(plugins::stored_bytes_per_layer(x, relu_frozen), plugins::stored_bytes_per_layer(x, gelu_frozen));
  EXPECT_DOUBLE_EQ(plugins::stored_bytes_per_layer(x, o) - plugins::stored_bytes_per_layer(x, relu_frozen), 0.0);
  // Flash attention keeps no scores: the plugin refuses the clamp option there (EagerLayers.OptOptionsRefused).
}

// OPT's options are refused where they would size nothing: outside eager layers, the clamp's scores under
// flash attention, the attention dropout without dropout.
TEST(EagerLayers, OptOptionsRefused) {
  const std::string base = "name = \"o\"\nmode = \"train\"\n[model]\npreset = \"gpt2-xl\"\n[batch]\n"
                           "seq_len = 512\n[precision]\nuse = \"bf16\"\n[optimizer]\nuse = \"sgd\"\n"
                           "[activations]\nuse = \"megatron\"\n";
  for (const char* key : {"masked_scores_kept", "relu_mlp", "attention_dropout"})
    EXPECT_NE(error_of(base + key + " = true\n").find("option '" + std::string(key) +
                                                       "': describes eager layers; it needs layer = \"eager\""),
              std::string::npos)
        << key;
  EXPECT_NE(error_of(base + "layer = \"eager\"\nflash_attention = true\nmasked_scores_kept = true\n")
                .find("option 'masked_scores_kept': sizes the explicit attention scores the clamp keeps, but "
                      "flash_attention = true keeps none"),
            std::string::npos);
  EXPECT_NE(error_of(base + "layer = \"eager\"\ndropout = false\nattention_dropout = true\n")
                .find("option 'attention_dropout': drops out the attention probabilities, but dropout = false"),
            std::string::npos);
  // attention_dropout = false with dropout: accepted (OPT: residual dropout only).
  EXPECT_EQ(error_of(base + "layer = \"eager\"\ndropout = true\nattention_dropout = false\n"), "");
  // A profile's output_held beside Cut Cross-Entropy (which returns no logits) holds nothing of their size
  // (megatron 1.30.1; it was refused before).
  EXPECT_EQ(error_of("name = \"c\"\nmode = \"train\"\n[framework]\nuse = \"fsdp-qlora\"\n" +
                     base.substr(base.find("[model]")) + "cross_entropy = \"cut\"\n"),
            "");
}

// relu_mlp sizes a two-projection MLP: a gated (SwiGLU) model is refused.
TEST(EagerLayers, ReluMlpRefusesAGatedMlp) {
  const std::string scenario =
      "name = \"r\"\nmode = \"train\"\n[model]\npreset = \"llama-3.2-1b\"\n[batch]\nseq_len = 512\n"
      "[precision]\nuse = \"bf16\"\n[optimizer]\nuse = \"sgd\"\n[activations]\nuse = \"megatron\"\n"
      "layer = \"eager\"\nrelu_mlp = true\n";
  EXPECT_NE(error_of(scenario, "r.toml").find("option 'relu_mlp': sizes a two-projection MLP's activation, but the "
                                              "model's MLP is gated (SwiGLU)"),
            std::string::npos);
}

// The hf-transformers profile sets it for the runs before transformers 4.18
// (the first release after torch 1.11): BERT-large, fp32, one sequence of 512,
// eager attention with dropout: 24 layers x 174,096 x 512 bytes at 4.16,
// 24 x 141,328 x 512 at 4.18 and at the profile's latest version.
TEST(EagerLayers, HfTransformersProfileKeepsTheSoftmaxInputBefore418) {
  auto layers = [](const std::string& version) {
    Evaluation e = evaluate("name = \"b\"\nmode = \"train\"\n[framework]\nuse = \"hf-transformers\"\n" + version +
                            "[model]\npreset = \"bert-large-uncased\"\n[batch]\nseq_len = 512\n[precision]\nuse = "
                            "\"fp32\"\n[optimizer]\nuse = \"sgd\"\n[activations]\nuse = \"megatron\"\n"
                            "flash_attention = false\ndropout = true\n");
    return e.item_bytes("layers.0-23.activations", MEMPLAN_ROLE_ACTIVATIONS);
  };
  EXPECT_EQ(layers("version = \"4.16\"\n"), 24ull * 174'096 * 512);
  EXPECT_EQ(layers("version = \"4.18\"\n"), 24ull * 141'328 * 512);
  EXPECT_EQ(layers(""), 24ull * 141'328 * 512);
}

// LoRA on a frozen base (Llama-3.2-3B): no linear keeps its input for a weight
// gradient and the frozen norms keep no normalized copy: norms 2 x (4h + 4),
// q 2h, repeated k and v 4h, SDPA output 2h, lse 4a, gate, silu and up 6f
// = 16h + 6f + 4a + 8 = 49,152 + 49,152 + 96 + 8 = 98,408 bytes. Adapters on
// q, k, v and the MLP (r 64, bf16) with dropout 0.1 add a 1-byte mask and a
// 2-byte dropped copy of each adapted input (q, k, v: h each; gate, up: h;
// down: f = 5h + f = 23,552 elements x 3 bytes = 70,656) and lora_B's r-wide
// inputs (64 x 6 matrices x 2 bytes = 768): 169,832 bytes.
TEST(EagerLayers, LoraFrozenBaseAndDroppedOutAdapterInputs) {
  ActivationSettings o = eager_bf16_flash_frozen();
  const TransformerShape x = llama(3072, 24, 8, 8192);
  EXPECT_DOUBLE_EQ(plugins::stored_bytes_per_layer(x, o), 98'408.0);
  o.eager.adapter_inputs = 5 * 3072 + 8192;
  o.eager.adapter_distinct_inputs = 2 * 3072 + 8192;
  o.eager.adapter_rank = 64 * 6;
  o.eager.adapter_bytes = 2;
  o.eager.adapter_dropout = 0.1;
  EXPECT_DOUBLE_EQ(plugins::stored_bytes_per_layer(x, o), 98'408.0 + 70'656 + 768);
  // Without dropout the adapters keep their inputs once per distinct input
  // (2h + f = 14,336 x 2 bytes = 28,672) and lora_B's inputs (768).
  o.eager.adapter_dropout = 0;
  EXPECT_DOUBLE_EQ(plugins::stored_bytes_per_layer(x, o), 98'408.0 + 28'672 + 768);
}

// Adapters in another dtype than the activations (PEFT's fp32 adapters on a
// bf16 base, autocast_adapter_dtype): each adapted layer casts its input
// itself (peft src/peft/tuners/lora/layer.py @ d787f51b, Linear.forward:
// x = self._cast_input_dtype(x, lora_A.weight.dtype), x.to(dtype) when the
// dtypes differ), so q and v keep one fp32 copy each of the shared normed
// input: 2 x h x 4 = 24,576 bytes (not h x 4 once), and lora_B's fp32 r-wide
// inputs 2 x 32 x 4 = 256 (r 32 on q and v): 98,408 + 24,576 + 256 = 123,240.
// On the MLP (r 10): gate and up cast the hidden state each, down its f-wide
// input: (2h + f) x 4 = 57,344, lora_B 3 x 10 x 4 = 120: 155,872 bytes.
TEST(EagerLayers, LoraAdaptersInAnotherDtypeCastTheirInputEach) {
  ActivationSettings o = eager_bf16_flash_frozen();
  const TransformerShape x = llama(3072, 24, 8, 8192);
  o.eager.adapter_inputs = 2 * 3072;
  o.eager.adapter_distinct_inputs = 3072;
  o.eager.adapter_rank = 32 * 2;
  o.eager.adapter_bytes = 4;
  EXPECT_DOUBLE_EQ(plugins::stored_bytes_per_layer(x, o), 123'240.0);
  o.eager.adapter_inputs = 2 * 3072 + 8192;
  o.eager.adapter_distinct_inputs = 3072 + 8192;
  o.eager.adapter_rank = 10 * 3;
  EXPECT_DOUBLE_EQ(plugins::stored_bytes_per_layer(x, o), 155'872.0);
}

// torchtitan's per-op checkpointing (Llama 3.1 8B: h 4096, kv 1024, f 14336,
// 32 heads): the layer input 2h, the odd matmuls' outputs q (h), v (kv), gate
// (f), down (h) at 2 bytes, SDPA's output 2h and lse 4a:
// 8,192 + 2 x 23,552 + 8,192 + 128 = 63,616 bytes; backward recomputes one
// whole layer, beside which its forward holds the residual, 2h: the per-op
// checkpoint reruns the block's forward as the full one does (measured under
// full recomputation: HfMeasuredLayers.TheRecomputedLayerHoldsItsResidual).
TEST(EagerLayers, PerOpSelectiveCheckpointing) {
  ActivationSettings o = eager_bf16_flash();
  o.recompute = RecomputePolicy::per_op;
  const TransformerShape x = llama(4096, 32, 8, 14336);
  EXPECT_DOUBLE_EQ(plugins::stored_bytes_per_layer(x, o), 63'616.0);
  ActivationSettings none = eager_bf16_flash();
  EXPECT_DOUBLE_EQ(plugins::recompute_working_set(x, o), plugins::stored_bytes_per_layer(x, none) + 2 * 4096);
}

// Llama-3.2-3B's frozen bf16 layer with PEFT's fp32 LoRA r 16 on every linear:
// the adapted inputs q, k, v, gate, up (h each), o (q = h) and down (f), the
// distinct ones h (q, k, v), h (o), h (gate, up) and f, and 7 lora_B inputs of
// r = 16.
ActivationSettings llama_32_3b_fp32_lora_everywhere() {
  ActivationSettings o = eager_bf16_flash_frozen();
  o.eager.adapter_inputs = 6 * 3072 + 8192;
  o.eager.adapter_distinct_inputs = 3 * 3072 + 8192;
  o.eager.adapter_rank = 16 * 7;
  o.eager.adapter_bytes = 4;
  o.eager.adapter_mlp = true;
  o.eager.adapter_o = true;
  return o;
}

// A recomputed layer with PEFT's LoRA on its MLP (Llama-3.2-3B: h 3072, f
// 8192; base bf16 and frozen, HF's upcasting RMSNorm, adapters fp32 on every
// linear, no dropout, non-reentrant checkpointing). Beside its saves the
// layer's forward holds the residual (its norm saves an fp32 copy) and the
// MLP's normed input (nothing saves it): 2 x 2h = 12,288 bytes a token.
//   up's adapter: lora_B's fp32 output and its scaled copy (8f), down's fp32
//   input cast (4f) not saved yet: 4h + 8f - 4f = 45,056;
//   down's adapter (the recomputation stops at down's lora_A): the SwiGLU
//   product, which nothing keeps (2f), and down's base output (2h): 6h + 2f =
//   34,816; reentrant (down runs to its end): + lora_B's two fp32 outputs (8h):
//   14h + 2f = 59,392.
// 16-bit adapters (a = p; gate's and up's lora_A keep the MLP's input itself,
// down's the product, so neither is a local): up 2h + 4f - 2f = 22,528, down
// 4h = 12,288. lora_dropout (down keeps a dropped fp32 copy and a mask, 5f; the
// fp32 cast copies are locals, h wide at up, f wide at down): up 4h + 4h + 8f -
// 5f = 49,152, down 6h + 2f + 4f = 67,584. A 4-bit base (bitsandbytes keeps
// the MLP's input and the product): up 2h + 8f - 2f - 4f = 22,528, down 4h =
// 12,288. Without an MLP adapter, nothing.
TEST(EagerLayers, AdaptedMlpRecomputationHoldsTwoAdapterOutputs) {
  ActivationSettings o = llama_32_3b_fp32_lora_everywhere();
  o.recompute = RecomputePolicy::full;
  const TransformerShape x = llama(3072, 24, 8, 8192);
  ActivationSettings saved = o;
  saved.recompute = RecomputePolicy::none;
  const double saves = plugins::stored_bytes_per_layer(x, saved);
  EXPECT_DOUBLE_EQ(plugins::peft_mlp_excess(x, saved), 45'056.0);
  EXPECT_DOUBLE_EQ(plugins::recompute_working_set(x, o), saves + 45'056.0);
  o.reentrant = true;
  EXPECT_DOUBLE_EQ(plugins::peft_mlp_excess(x, o), 59'392.0);
  o.reentrant = false;
  o.eager.adapter_bytes = 2;
  EXPECT_DOUBLE_EQ(plugins::peft_mlp_excess(x, o), 22'528.0);
  o.eager.adapter_bytes = 4;
  o.eager.adapter_dropout = 0.05;
  EXPECT_DOUBLE_EQ(plugins::peft_mlp_excess(x, o), 67'584.0);
  o.eager.adapter_dropout = 0;
  o.eager.packed_base = true;  // a 4-bit base whose MatMul4Bit keeps its input (bitsandbytes <= 0.43.1)
  o.eager.packed_inputs_kept = true;
  EXPECT_DOUBLE_EQ(plugins::peft_mlp_excess(x, o), 22'528.0);
  o.eager.adapter_mlp = false;
  EXPECT_DOUBLE_EQ(plugins::peft_mlp_excess(x, o), 0.0);
}

// Under autocast over the bf16 base (the Trainer with bf16: megatron's
// autocast) fp32 adapters compute in bf16 (Llama-3.2-3B, frozen base, r 16 on
// every linear: inputs 6h + f = 26,624 a token, 7 matrices x 16 = 112 rank
// inputs). The Linear casts x to fp32 and lora_A keeps autocast's bf16 copy,
// one per matrix: 2 x 26,624 + 2 x 112 = 53,472 beside the frozen layer's
// 98,408 (without autocast the fp32 copies, 4 x 26,624 + 4 x 112 = 106,944).
// With dropout each matrix keeps a bf16 copy of its dropped input and the
// mask: 3 x 26,624. A 4-bit base's Linear4bit casts nothing and lora_A keeps x
// itself, the tensor MatMul4Bit keeps (the frozen layer with the 4-bit base's
// inputs 2h + 2h + 2f: 98,408 + 28,672 = 127,080): + 224 only. bf16 adapters
// are cast by neither: lora_A keeps the distinct inputs themselves, q/k/v's,
// the MLP's and down's (o's is SDPA's saved output): 2 x (2h + f) = 28,672.
// The recomputed MLP's high point (non-reentrant, no dropout), the Linear path
// at down's adapter: the product (2f) and its fp32 cast (4f) beside the
// residual, the MLP's input (4h) and down's output (2h): 6h + 6f = 67,584;
// reentrant: + lora_B's two bf16 outputs (4h), 79,872; with dropout instead:
// + the fp32 dropped copy (4f), 6h + 10f = 100,352. The 4-bit path at up's
// adapter: lora_B's two bf16 outputs (4f) less the product MatMul4Bit keeps
// later (2f), beside the residual (2h): 22,528; with dropout down's adapter
// (4h: the residual and down's output; up's 2h + 4f - 2f - 3f is below it).
TEST(EagerLayers, AutocastAdaptersComputeInTheActivationsDtype) {
  ActivationSettings o = llama_32_3b_fp32_lora_everywhere();
  const TransformerShape x = llama(3072, 24, 8, 8192);
  EXPECT_DOUBLE_EQ(plugins::stored_bytes_per_layer(x, o), 98'408.0 + 106'944.0);
  o.eager.adapter_autocast = true;
  EXPECT_DOUBLE_EQ(plugins::stored_bytes_per_layer(x, o), 98'408.0 + 53'472.0);
  EXPECT_DOUBLE_EQ(plugins::peft_mlp_excess(x, o), 67'584.0);
  o.reentrant = true;
  EXPECT_DOUBLE_EQ(plugins::peft_mlp_excess(x, o), 79'872.0);
  o.reentrant = false;
  o.eager.adapter_dropout = 0.1;
  EXPECT_DOUBLE_EQ(plugins::stored_bytes_per_layer(x, o), 98'408.0 + 3 * 26'624.0 + 224.0);
  EXPECT_DOUBLE_EQ(plugins::peft_mlp_excess(x, o), 100'352.0);
  o.eager.packed_base = true;  // a 4-bit base whose MatMul4Bit keeps its input (bitsandbytes <= 0.43.1)
  o.eager.packed_inputs_kept = true;
  EXPECT_DOUBLE_EQ(plugins::peft_mlp_excess(x, o), 12'288.0);
  o.eager.adapter_dropout = 0;
  EXPECT_DOUBLE_EQ(plugins::stored_bytes_per_layer(x, o), 127'080.0 + 224.0);
  EXPECT_DOUBLE_EQ(plugins::peft_mlp_excess(x, o), 22'528.0);
  o.eager.packed_base = false;
  o.eager.packed_inputs_kept = false;
  o.eager.adapter_bytes = 2;
  EXPECT_DOUBLE_EQ(plugins::stored_bytes_per_layer(x, o), 98'408.0 + 28'672.0 + 224.0);
}

// The measured job (validation/H100-llama-3.2-3b-lora-r16-all-gc-bs8-s2048, its
// snapshot in validation/measured; non-reentrant checkpointing): 8 x 2048 =
// 16,384 tokens. Replaying the snapshot's alloc / free_completed events, the
// last layer's recomputation rises 3,967,418,384 B above its start (event 7941)
// at the up projection's adapter (event 8100), and holds 3,230,269,456 B of
// saves when backward takes over (event 8122, before backward's first
// allocation): 737,148,928 above the saves. memplan: saves 3,230,269,440 B,
// 45,056 x 16,384 = 738,197,504 B above them, 3,968,466,944 B in all (+0.03 %).
TEST(EagerLayers, TheMeasuredRecomputationOfAnAdaptedLayer) {
  const std::string id = "H100-llama-3.2-3b-lora-r16-all-gc-bs8-s2048";
  const std::string text = validation_case(id);
  ASSERT_NE(text.find("targets = \"all-linear\"\ndropout = 0.0\n"), std::string::npos);
  ASSERT_NE(text.find("policy = \"full\"\nreentrant = false\n"), std::string::npos);
  const Evaluation e = evaluate(text, id + ".toml");
  const uint64_t working_set =
      with_lifetime(e, "activations.recompute", MEMPLAN_LIFETIME_TRANSIENT_BACKWARD);
  EXPECT_EQ(working_set, 3'968'466'944ull);
  EXPECT_NEAR(static_cast<double>(working_set), 3'967'418'384.0, 0.001 * 3'967'418'384.0);
}

// Bytes per logit element (saved; extra at the forward and backward high
// points), p = 2: Megatron-LM 4; +2, +2 (its 16-bit logits beside the fp32
// copy, its 16-bit gradient beside the fp32 one); transformers <= 4.45 4;
// forward 12, backward 12 in all (fp32 logits in the output, shifted copy,
// log-softmax; log-softmax and two fp32 gradients); 4.46-4.48 forward 14;
// >= 4.49 forward 10; torchtune forward 8; chunked by 8: forward 2 + 4 + 0.5 =
// 6.5, backward 4 + 1 = 5; compiled (torch.compile'd cross_entropy on upcast
// logits): the 16-bit logits kept (2), nothing more in forward, their 16-bit
// gradient in backward (4); loss-parallel (DTensor loss_parallel(), torch's
// tensor/parallel/loss.py): log-softmax kept (4); forward 16-bit logits, fp32
// copy, shifted and exp(shifted) beside the result: 2 + 4 + 4 + 4 = 14;
// backward the log-softmax, zeros_like, exp and two results: 16.
// shift-copy (the 16-bit loss: GPT-2 before 4.46): the log-softmax kept (2);
// forward + the logits and their shifted copy 2 + 2 = 6; backward + two 16-bit
// gradients = 6.
// torchtune's losses compiled (AOTAutograd saves the loss's input):
// upcast: the fp32 logits 4; forward + the 16-bit projection output 2 = 6,
// backward + the fp32 gradient 4 = 8; chunked by 8: the 16-bit chunks 2;
// forward 2, backward 2 + 2/8 = 2.25.
TEST(LossPaths, BytesPerLogitElement) {
  struct Case {
    CrossEntropy mode;
    double saved, forward_peak, backward_peak;
  };
  for (const Case& c : {Case{CrossEntropy::vocab_parallel, 4, 6, 6}, Case{CrossEntropy::upcast_shift_copy, 4, 12, 12},
                        Case{CrossEntropy::upcast_in_loss_shift_copy, 4, 14, 12},
                        Case{CrossEntropy::upcast_in_loss, 4, 10, 12}, Case{CrossEntropy::upcast, 4, 8, 12},
                        Case{CrossEntropy::chunked, 4, 6.5, 5}, Case{CrossEntropy::unfused, 8, 8, 8},
                        Case{CrossEntropy::compiled, 2, 2, 4}, Case{CrossEntropy::loss_parallel, 4, 14, 16},
                        Case{CrossEntropy::upcast_compiled, 4, 6, 8}, Case{CrossEntropy::shift_copy, 2, 6, 6},
                        Case{CrossEntropy::chunked_compiled, 2, 2, 2.25}, Case{CrossEntropy::cut, 0, 0, 0}}) {
    const plugins::LossBytes b = plugins::loss_bytes(c.mode, 2, 8);
    const double saved = b.saved_logits + b.saved_loss;
    EXPECT_DOUBLE_EQ(saved, c.saved) << static_cast<int>(c.mode);
    EXPECT_DOUBLE_EQ(saved + b.forward_extra, c.forward_peak) << static_cast<int>(c.mode);
    EXPECT_DOUBLE_EQ(saved + b.backward_extra, c.backward_peak) << static_cast<int>(c.mode);
  }
}

// Through the plugins: Llama-3.2-3B eager (layer = "eager"), one sequence of
// 1024 tokens, full fine-tuning in bf16: 28 layers x 139,368 x 1024 bytes
// = 3,995,992,064.
TEST(EagerLayers, ThroughThePlugin) {
  Evaluation e = evaluate_paper(
      "name = \"e\"\nmode = \"train\"\n[model]\npreset = \"llama-3.2-3b\"\n[batch]\nseq_len = 1024\n"
      "[precision]\nuse = \"bf16\"\n[optimizer]\nuse = \"sgd\"\n[activations]\nuse = \"megatron\"\n"
      "layer = \"eager\"\nflash_attention = true\ndropout = false\ncross_entropy = \"upcast\"\n");
  EXPECT_EQ(e.item_bytes("layers.0-27.activations", MEMPLAN_ROLE_ACTIVATIONS), 28ull * 139'368 * 1024);
  // The loss: 1024 x 128,256 = 131,334,144 logit elements; saved 4, forward +4, backward +8 bytes each. The
  // saved 4 are this micro-batch's, freed once the loss has run backward (autograd releases a node's saves):
  // a transient of the forward's end (lifetime forward_end), and part of the loss's moment at backward's start (lifetime backward_start),
  // whose transients are freed before the tied head's gradient (128,256 x 3,072 x 2 = 788,004,864 B, which
  // the host adds at backward's start) is allocated: the item is the larger of (8 + 4) x 131,334,144 -
  // 788,004,864 = 788,004,864 and the 16-bit logits gradient the head's backward holds, 2 x 131,334,144 =
  // 262,668,288.
  EXPECT_EQ(e.item_bytes("activations.cross_entropy", MEMPLAN_ROLE_ACTIVATIONS), 4ull * 1024 * 128'256);
  EXPECT_EQ(with_lifetime(e, "activations.cross_entropy", MEMPLAN_LIFETIME_FORWARD_END), 4ull * 1024 * 128'256);
  EXPECT_EQ(e.item_bytes("activations.loss_forward", MEMPLAN_ROLE_ACTIVATIONS), 4ull * 1024 * 128'256);
  EXPECT_EQ(with_lifetime(e, "activations.loss_backward", MEMPLAN_LIFETIME_BACKWARD_START),
            12ull * 1024 * 128'256 - 788'004'864);
}

// cross_entropy = "compiled" through the plugin, same run: the loss keeps the
// 16-bit logits the model returned (activations.logits) (2 x 1024 x 128,256 = 262,668,288 bytes), adds nothing at its
// forward high point and their 16-bit gradient (as much again) at its backward one. The kept logits are
// freed once the loss has run backward: a transient of the forward's end (forward_end), and at backward's start (lifetime
// backward_start) the loss's moment holds them beside their gradient: 2 x 262,668,288 = 525,336,576 (this
// path's loss is not freed before the head's gradient is allocated: nothing is taken off).
TEST(LossPaths, CompiledLossThroughThePlugin) {
  Evaluation e = evaluate_paper(
      "name = \"e\"\nmode = \"train\"\n[model]\npreset = \"llama-3.2-3b\"\n[batch]\nseq_len = 1024\n"
      "[precision]\nuse = \"bf16\"\n[optimizer]\nuse = \"sgd\"\n[activations]\nuse = \"megatron\"\n"
      "layer = \"eager\"\nflash_attention = true\ndropout = false\ncross_entropy = \"compiled\"\n");
  EXPECT_EQ(e.item_bytes("activations.logits", MEMPLAN_ROLE_ACTIVATIONS), 262'668'288u);
  EXPECT_EQ(with_lifetime(e, "activations.logits", MEMPLAN_LIFETIME_FORWARD_END), 262'668'288u);
  EXPECT_EQ(e.item_bytes("activations.loss_forward", MEMPLAN_ROLE_ACTIVATIONS), 0u);
  EXPECT_EQ(with_lifetime(e, "activations.loss_backward", MEMPLAN_LIFETIME_BACKWARD_START), 525'336'576u);
}

// The compiled chunked loss through the plugin (torchtune compile: True with
// CEWithChunkedOutputLoss): 1024 x 128,256 logit elements; the 16-bit chunks
// saved, 2 bytes each = 262,668,288; nothing more at the forward high point;
// one chunk's 16-bit gradient in backward, 2/8 byte each = 32,833,536. The
// chunks are freed once the loss has run backward: a transient of the forward's end, and
// at backward's start (lifetime backward_start) the loss's moment holds them
// beside the chunk's gradient: 262,668,288 + 32,833,536 = 295,501,824.
TEST(LossPaths, CompiledChunkedThroughThePlugin) {
  Evaluation e = evaluate_paper(
      "name = \"e\"\nmode = \"train\"\n[model]\npreset = \"llama-3.2-3b\"\n[batch]\nseq_len = 1024\n"
      "[precision]\nuse = \"bf16\"\n[optimizer]\nuse = \"sgd\"\n[activations]\nuse = \"megatron\"\n"
      "layer = \"eager\"\nflash_attention = true\ndropout = false\ncross_entropy = \"chunked-compiled\"\n");
  EXPECT_EQ(e.item_bytes("activations.logits", MEMPLAN_ROLE_ACTIVATIONS), 2ull * 1024 * 128'256);
  EXPECT_EQ(with_lifetime(e, "activations.logits", MEMPLAN_LIFETIME_FORWARD_END), 2ull * 1024 * 128'256);
  EXPECT_EQ(e.item_bytes("activations.loss_forward", MEMPLAN_ROLE_ACTIVATIONS), 0u);
  EXPECT_EQ(with_lifetime(e, "activations.loss_backward", MEMPLAN_LIFETIME_BACKWARD_START),
            2ull * 1024 * 128'256 + 1024ull * 128'256 / 4);
}

// Cut Cross-Entropy through the plugin (apple/ml-cross-entropy @ d42911f9 cut_cross_entropy/cce.py:
// LinearCrossEntropyFunction saves e, c, bias, lse, targets, valids; the patched forward returns
// logits=None): nothing of the logits' size, and on a frozen head (LoRA) the head's input e is still
// kept. Llama-3.1-8B (untied head, h 4096), 1024 tokens, LoRA on the attention: the final norm's eager
// activations are its fp32 input copy and rsqrt (4h + 4 = 16,388 bytes a token) plus, with "cut" only, the
// head's 16-bit input (2h = 8,192): 1024 x 24,580 = 25,169,920 bytes against 1024 x 16,388 = 16,781,312 with
// the framework's own loss, whose frozen head keeps no input.
TEST(LossPaths, CutCrossEntropyThroughThePlugin) {
  auto run = [](const std::string& loss) {
    return evaluate_paper(
        "name = \"e\"\nmode = \"train\"\n[model]\npreset = \"llama-3.1-8b\"\n[batch]\nseq_len = 1024\n"
        "[precision]\nuse = \"bf16\"\n[optimizer]\nuse = \"adamw\"\n[activations]\nuse = \"megatron\"\n"
        "layer = \"eager\"\nflash_attention = true\ndropout = false\ncross_entropy = \"" + loss +
        "\"\n[[strategy]]\nuse = \"lora\"\nrank = 8\ntargets = \"attention\"\n");
  };
  const Evaluation cut = run("cut"), upcast = run("upcast-in-loss");
  for (const char* item : {"activations.logits", "activations.cross_entropy", "activations.loss_forward",
                           "activations.loss_backward"})
    EXPECT_EQ(cut.item_bytes(item, MEMPLAN_ROLE_ACTIVATIONS), 0u) << item;
  EXPECT_GT(upcast.item_bytes("activations.cross_entropy", MEMPLAN_ROLE_ACTIVATIONS), 0u);
  EXPECT_EQ(cut.item_bytes("activations.final_norm", MEMPLAN_ROLE_ACTIVATIONS), 1024ull * 24'580);
  EXPECT_EQ(upcast.item_bytes("activations.final_norm", MEMPLAN_ROLE_ACTIVATIONS), 1024ull * 16'388);
}

// Cut Cross-Entropy on a trained tied head (Llama-3.2-1B full fine-tuning, h 2048, V 128,256, 1024 tokens):
// still nothing of the logits' size; the final norm keeps its fp32 input copy and rsqrt (4h + 4), its
// normalized copy for the trained norm weight (2h) and the head's 16-bit input e (2h): 8h + 4 = 16,388 bytes
// a token, 16,781,312 in all. CCE's backward writes the gradient of c (the shared weight) at backward's start;
// at backward's end the embedding's gradient joins it in the leaf's input buffer: 128,256 x 2048 x 2 =
// 525,336,576 bytes (lifetime backward_end; docs/formulas.md, "Logits and loss").
TEST(LossPaths, CutCrossEntropyOnATrainedTiedHead) {
  const Evaluation e = evaluate_paper(
      "name = \"e\"\nmode = \"train\"\n[model]\npreset = \"llama-3.2-1b\"\n[batch]\nseq_len = 1024\n"
      "[precision]\nuse = \"bf16\"\n[optimizer]\nuse = \"adamw\"\n[activations]\nuse = \"megatron\"\n"
      "layer = \"eager\"\nflash_attention = true\ndropout = false\ncross_entropy = \"cut\"\n");
  for (const char* item : {"activations.logits", "activations.cross_entropy", "activations.loss_forward",
                           "activations.loss_backward"})
    EXPECT_EQ(e.item_bytes(item, MEMPLAN_ROLE_ACTIVATIONS), 0u) << item;
  EXPECT_EQ(e.item_bytes("activations.final_norm", MEMPLAN_ROLE_ACTIVATIONS), 1024ull * 16'388);
  EXPECT_EQ(e.item_bytes("activations.tied_embedding_gradient", MEMPLAN_ROLE_GRADIENTS), 525'336'576u);
}

// The norm kind comes from the model (memplan_model.layer_norm), not from the
// norms' sizes, which FSDP has divided by the time activations are counted:
// BERT-large's eager layers keep the same 141,328 bytes per token at s 512
// with or without FSDP over 2 ranks (24 layers x 141,328 x 512).
TEST(EagerLayers, LayerNormSurvivesSharding) {
  const std::string bert = "name = \"b\"\nmode = \"train\"\n[model]\npreset = \"bert-large-uncased\"\n[batch]\n"
                           "seq_len = 512\n[precision]\nuse = \"fp32\"\n[optimizer]\nuse = \"sgd\"\n[activations]\n"
                           "use = \"megatron\"\nlayer = \"eager\"\n";
  const uint64_t expected = 24ull * 141'328 * 512;
  EXPECT_EQ(evaluate_paper(bert).item_bytes("layers.0-23.activations", MEMPLAN_ROLE_ACTIVATIONS), expected);
  EXPECT_EQ(evaluate_paper(bert + "[[strategy]]\nuse = \"data-parallel\"\nsize = 2\n[[strategy]]\nuse = \"fsdp\"\n")
                .item_bytes("layers.0-23.activations", MEMPLAN_ROLE_ACTIVATIONS),
            expected);
}

// Lines 11 [activations], 12 use, 13 the option under test.
TEST(EagerLayers, OptionErrors) {
  const std::string base = "name = \"e\"\nmode = \"train\"\n[model]\npreset = \"llama-3.2-3b\"\n[batch]\n"
                           "seq_len = 1024\n[precision]\nuse = \"bf16\"\n[optimizer]\nuse = \"sgd\"\n"
                           "[activations]\nuse = \"megatron\"\n";
  const std::string library = " (plugin library " + plugin_dir() + "/memplan-megatron.so)";
  EXPECT_EQ(error_of(base + "layer = \"jit\"\n", "e.toml"),
            "e.toml:13:9: error: in [activations], activations plugin 'megatron', option 'layer': must be \"fused\", "
            "\"eager\", \"compiled\" or \"legacy\", not \"jit\"" + library);
  EXPECT_EQ(error_of(base + "repeat_kv = true\n", "e.toml"),
            "e.toml:13:13: error: in [activations], activations plugin 'megatron', option 'repeat_kv': describes eager "
            "and compiled layers; it needs layer = \"eager\" or \"compiled\"" + library);
  EXPECT_EQ(error_of(base + "rms_norm_upcast = true\n", "e.toml"),
            "e.toml:13:19: error: in [activations], activations plugin 'megatron', option 'rms_norm_upcast': describes "
            "eager layers; it needs layer = \"eager\"" + library);
  EXPECT_EQ(error_of(base + "autocast = true\n", "e.toml"),
            "e.toml:13:12: error: in [activations], activations plugin 'megatron', option 'autocast': describes eager "
            "layers; it needs layer = \"eager\"" + library);
  // false says what fused layers do anyway (K and V at the kv heads, the norm in its input's dtype): accepted, so
  // a profile that sets them for its eager layers (unsloth) still lets a scenario choose layer = "fused".
  EXPECT_EQ(error_of(base + "repeat_kv = false\nrms_norm_upcast = false\n", "e.toml"), "");
  EXPECT_EQ(error_of(base + "loss_chunks = 4\n", "e.toml"),
            "e.toml:13:15: error: in [activations], activations plugin 'megatron', option 'loss_chunks': applies to "
            "cross_entropy = \"chunked\", \"chunked-compiled\", \"chunked-fused\" or \"chunked-fused-eager\" only" + library);
}

}  // namespace
}  // namespace memplan::testing

namespace memplan::testing {
namespace {

// layer = "compiled": eager modules under torch.compile save what fused
// kernels save (Inductor's min-cut partitioner recomputes the pointwise ops;
// docs/formulas.md, "Compiled layers"), so they count as layer = "fused",
// but for K and V where the model repeats them to every query head
// (torchtune's expand and reshape, torchtitan's repeat_kv; repeat_kv = true,
// the default): attention's backward reads the copies, and the partitioner
// never recomputes a node the backward materializes (partitioners.py
// should_ban_recomputation). Llama-3.2-3B at 1024 tokens in bf16 (q 3072,
// kv 1024, 28 layers): 2 x 2 x (3072 - 1024) = 8,192 bytes a token and layer
// more, 28 x 1024 x 8,192 = 234,881,024; with repeat_kv = false the fused
// count, and either way fewer than the eager layer's 139,368 per token and
// layer.
TEST(EagerLayers, CompiledLayersCountAsFused) {
  auto run = [](const std::string& layer, const std::string& more = "") {
    return evaluate_paper(
        "name = \"e\"\nmode = \"train\"\n[model]\npreset = \"llama-3.2-3b\"\n[batch]\nseq_len = 1024\n"
        "[precision]\nuse = \"bf16\"\n[optimizer]\nuse = \"sgd\"\n[activations]\nuse = \"megatron\"\n"
        "flash_attention = true\ndropout = false\nlayer = \"" + layer + "\"\n" + more)
        .item_bytes("layers.0-27.activations", MEMPLAN_ROLE_ACTIVATIONS);
  };
  EXPECT_EQ(run("compiled", "repeat_kv = false\n"), run("fused"));
  EXPECT_EQ(run("compiled") - run("fused"), 234'881'024u);
  EXPECT_LT(run("compiled"), 28ull * 139'368 * 1024);
  // Under the hf-transformers profile (use_cache, and from 4.53 mask_bias_per_layer, set for its eager
  // modules) a torch.compile'd run says layer = "compiled": those options size nothing there, and the layers
  // keep the compiled count (megatron 1.30.1; refused before), K and V at the kv heads as the profile's 4.54
  // block says (SDPA's enable_gqa: repeat_kv = false).
  const Evaluation hf = evaluate(
      "name = \"e\"\nmode = \"train\"\n[framework]\nuse = \"hf-transformers\"\n[model]\npreset = \"llama-3.2-3b\"\n"
      "[batch]\nseq_len = 1024\n[precision]\nuse = \"bf16\"\n[optimizer]\nuse = \"sgd\"\n[activations]\n"
      "use = \"megatron\"\nflash_attention = true\ndropout = false\nlayer = \"compiled\"\n");
  EXPECT_EQ(hf.item_bytes("layers.0-27.activations", MEMPLAN_ROLE_ACTIVATIONS), run("compiled", "repeat_kv = false\n"));
  // The same code compiled still repeats K and V where SDPA gets a mask (padding_mask: transformers'
  // use_gqa_in_sdpa passes no enable_gqa with a mask), as the eager layer does: 234,881,024 B more.
  EXPECT_EQ(run("compiled", "repeat_kv = false\npadding_mask = true\n"), run("compiled"));
}

// Compiled layers keep no input of a frozen projection: AOTAutograd's partitioner saves only what the
// backward graph reads (torch/_functorch/partitioners.py), and a frozen weight's backward computes its input's
// gradient alone (grad @ W). LoRA r 8 on q and v of Llama-3.2-3B (h 3072, f 8192; 28 layers, 1024 tokens,
// bf16), per token and layer against the full fine-tune: the MLP's normed input (2h = 6,144) and the SwiGLU
// product that enters down (2f = 16,384) are not kept; q's and v's lora_A read the attention's normed input,
// which stays; the two lora_A outputs (2 x 8 x 2 B = 32) are kept for lora_B: 22,496 B less, 28 x 1024 x
// 22,496 = 645,005,312. On every linear the adapters read all three inputs again: only their 7 r-wide
// outputs are added, 28 x 1024 x 7 x 8 x 2 = 3,211,264. With lora_dropout 0.1 on q and v each lora_A reads its
// own dropped copy, which the partitioner does not recompute (dropout is random): the copy and its 1-byte mask,
// (2 + 1) x (3072 + 3072) = 18,432 bytes a token and layer, 28 x 1024 x 18,432 = 528,482,304.
TEST(EagerLayers, CompiledLayersKeepNoFrozenProjectionsInput) {
  auto run = [](const std::string& lora) {
    return evaluate_paper(
        "name = \"e\"\nmode = \"train\"\n[model]\npreset = \"llama-3.2-3b\"\n[batch]\nseq_len = 1024\n"
        "[precision]\nuse = \"bf16\"\n[optimizer]\nuse = \"sgd\"\n[activations]\nuse = \"megatron\"\n"
        "flash_attention = true\ndropout = false\nlayer = \"compiled\"\n" + lora)
        .item_bytes("layers.0-27.activations", MEMPLAN_ROLE_ACTIVATIONS);
  };
  const std::string lora = "[[strategy]]\nuse = \"lora\"\nrank = 8\nalpha = 16\ntargets = ";
  const uint64_t full = run("");
  EXPECT_EQ(full - run(lora + "\"q,v\"\n"), 645'005'312u);
  EXPECT_EQ(run(lora + "\"all-linear\"\n") - full, 3'211'264u);
  EXPECT_EQ(run(lora + "\"q,v\"\ndropout = 0.1\n") - run(lora + "\"q,v\"\n"), 528'482'304u);
}

// Answer.AI fsdp_qlora's LoRA rows (validation/AA-7b-lora-*-s2048: train.py
// @ 50efa1e, transformers 4.38, PEFT LoRA r 64 with dropout 0.1 on q, k, v
// and the MLP, bf16, reentrant checkpointing of every layer, FSDP over 2
// ranks): what one 2048-token sample adds at the step's high point, the
// loss's backward, counted from the code (h 4096, f 11008, r 64, a 32, s 2048,
// V 32000):
//   the recomputed layer (frozen base linears and norms keep no input; each
//   adapted matrix keeps PEFT's dropout mask and dropped copy, lora_B its
//   r-wide input): 16h + 6f + 4a + 8 + 3 (5h + f) + 2 x 6r
//   = 31h + 9f + 12r + 136 = 226,952 bytes a token; its high point, at down's
//   adapter under the profile's reentrant checkpointing
//   (EagerLayers.AdaptedMlpRecomputationHoldsTwoAdapterOutputs), adds the
//   residual and the MLP's input (4h), the SwiGLU product nothing keeps (2f),
//   down's base output (2h) and lora_B's two bf16 outputs (4h): 10h + 2f =
//   62,976, so 289,928 bytes a token, 593,772,544 a sample;
//   the loss (logits.float() kept in `output`; log_softmax's saved output,
//   nll_loss_backward's zeros and _log_softmax_backward_data's result, all
//   fp32): 4 x 4sV = 1,048,576,000, which covers the recomputed layer;
//   the 32 layer checkpoints 32 x 2sh = 536,870,912 and the 4-D causal mask
//   [b, 1, 4096, 4096] in bf16, 33,554,432:
//   1,619,001,344 bytes (1.51 GiB) beside the final norm's activations. The
//   run's reserve grows 1.97 GiB a sample from batch 1 to 4: the rest is the
//   caching allocator's (validation/AA-7b-lora-bs6-s2048.toml).
// Measured from batch 5 to 6: below batch 5 the first layer's moment (FSDP1's
// two gathered layer units, 827,424,768 B, beside the recomputed layer, the
// loss's tensors freed) is the higher one, and a sample adds the recomputed
// layer and the checkpoints there, not the loss.
TEST(EagerLayers, FsdpQloraLoraSampleAtTheLossBackward) {
  auto run = [](int batch) {
    return evaluate(
        "name = \"aa\"\nmode = \"train\"\n[framework]\nuse = \"hf-transformers\"\nversion = \"4.38\"\n"
        "[model]\npreset = \"llama-2-7b\"\n[batch]\nmicro_batch = " + std::to_string(batch) +
        "\nseq_len = 2048\n[precision]\nuse = \"bf16\"\n[optimizer]\nuse = \"adamw\"\n"
        "implementation = \"foreach\"\n[activations]\nuse = \"megatron\"\nflash_attention = true\n"
        "dropout = false\noutput_held = true\n[[strategy]]\nuse = \"lora\"\nrank = 64\nalpha = 16\n"
        "targets = \"q,k,v,mlp\"\ndropout = 0.1\n[[strategy]]\nuse = \"recompute\"\npolicy = \"full\"\n"
        "[[strategy]]\nuse = \"data-parallel\"\nsize = 2\n[[strategy]]\nuse = \"fsdp\"\n"
        "sync_module_states = true\n[hardware]\ngpu = \"rtx-3090-24gb\"\ncount = 2\n");
  };
  const Evaluation one = run(1), five = run(5), six = run(6);
  EXPECT_EQ(one.item_bytes("activations.recompute", MEMPLAN_ROLE_ACTIVATIONS), 289'928ull * 2048);
  const uint64_t growth = six.breakdown().quantities[kAllocated].timeline[kBackward] -
                          five.breakdown().quantities[kAllocated].timeline[kBackward];
  const uint64_t final_norm = six.item_bytes("activations.final_norm", MEMPLAN_ROLE_ACTIVATIONS) -
                              five.item_bytes("activations.final_norm", MEMPLAN_ROLE_ACTIVATIONS);
  EXPECT_EQ(growth - final_norm, 1'048'576'000ull + 536'870'912 + 33'554'432);
}

// torchtitan's op SAC on compiled layers (layer = "compiled", recompute policy
// "op"): Inductor's partitioner (torch/_functorch/partitioners.py @ c28ba8e5,
// solve_min_cut) saves only what the backward graph reads, and no backward op
// reads the down projection's output (the 7th multiply, on the save list), so
// it is not kept; eager SAC (torch/utils/checkpoint.py) stores it as it runs.
// Llama 3.1 8B (h 4096, q 4096, kv 1024, f 14336, 32 heads, bf16), per token:
// input 2 x 4096 = 8,192; q 8,192; v 2,048; gate 2 x 14336 = 28,672; SDPA's
// output 8,192 and lse 4 x 32 = 128: 55,424 (eager: + down's 8,192 = 63,616).
// DeepSeek-V2-Lite's dense layer (no query latent; 48,576 per token with the
// down output, LatentAttentionActivations.OpLevelCheckpointingFollowsTorchtitansOrder)
// loses down's 2 x 2048: 44,480. A GELU MLP's down is the 6th multiply, not
// saved in either: no change. Through the plugin, the torchtitan B200 row's
// run (Llama 3.1 8B, one sequence of 8192 tokens, 32 layers): 32 x 55,424 x
// 8192 = 14,529,069,056 bytes.
TEST(EagerLayers, CompiledOpCheckpointingDropsTheDownOutput) {
  plugins::ActivationSettings o;
  o.bytes = 2;
  o.dropout = false;
  o.flash_attention = true;
  o.recompute = plugins::RecomputePolicy::per_op;
  o.compiled = true;
  const plugins::TransformerShape x = llama(4096, 32, 8, 14336);
  EXPECT_DOUBLE_EQ(plugins::stored_bytes_per_layer(x, o), 55'424.0);
  plugins::ActivationSettings eager = o;
  eager.compiled = false;
  EXPECT_DOUBLE_EQ(plugins::stored_bytes_per_layer(x, eager), 63'616.0);

  plugins::TransformerShape lite = llama(2048, 16, 16, 10944);
  lite.q_width = 16 * 192;
  lite.kv_width = 16 * 192;
  lite.kv_latent = 512;
  lite.rope = 64;
  lite.v_width = 16 * 128;
  lite.kv_up_width = 16 * 256;
  EXPECT_DOUBLE_EQ(plugins::stored_bytes_per_layer(lite, eager), 48'576.0);
  EXPECT_DOUBLE_EQ(plugins::stored_bytes_per_layer(lite, o), 44'480.0);

  plugins::TransformerShape gelu = x;
  gelu.gated = false;
  EXPECT_DOUBLE_EQ(plugins::stored_bytes_per_layer(gelu, o), plugins::stored_bytes_per_layer(gelu, eager));

  auto run = [](const std::string& layer) {
    return evaluate_paper(
               "name = \"e\"\nmode = \"train\"\n[model]\npreset = \"llama-3.1-8b\"\n[batch]\nseq_len = 8192\n"
               "[precision]\nuse = \"bf16\"\n[optimizer]\nuse = \"sgd\"\n[activations]\nuse = \"megatron\"\n"
               "flash_attention = true\ndropout = false\nlayer = \"" +
               layer + "\"\n[[strategy]]\nuse = \"recompute\"\npolicy = \"op\"\n")
        .item_bytes("layers.0-31.activations", MEMPLAN_ROLE_ACTIVATIONS);
  };
  EXPECT_EQ(run("compiled"), 14'529'069'056u);
  EXPECT_EQ(run("eager"), 32ull * 63'616 * 8192);
  EXPECT_EQ(run("fused"), 32ull * 63'616 * 8192);
}

// Compiled layers leave the final norm and the LM head eager (torchtitan
// apply_compile, torchtune compile_model: the decoder blocks only), so the
// final norm keeps what the eager one keeps: its fp32 input copy and rsqrt
// (4h + 4), its normalized bf16 copy (2h), on the rank's tokens, and the LM
// head's input (2h), whole (DTensor's ColwiseParallel gathers the
// sequence-parallel input before the matmul). Llama 3.1 8B, 8192 tokens, no
// tensor parallelism: 8192 x (16,388 + 8,192 + 8,192) = 268,468,224 (the fused
// count, input and output, 8192 x 4 x 4096 = 134,217,728). Llama 3.1 70B (h
// 8192), 16 x 8192 = 131,072 tokens, TP 8 with sequence parallelism:
// 131,072 x ((32,772 + 16,384) / 8 + 16,384) = 2,952,855,552 (fused:
// 131,072 x 4 x 8192 / 8 = 536,870,912).
TEST(EagerLayers, CompiledLayersLeaveTheFinalNormEager) {
  plugins::ActivationSettings o;
  o.bytes = 2;
  o.dropout = false;
  o.flash_attention = true;
  o.compiled = true;
  plugins::ActivationSettings fused = o;
  fused.compiled = false;
  const plugins::OutputShape small{8192, 1, 4096, 128'256};
  EXPECT_DOUBLE_EQ(plugins::output_activations(small, o, CrossEntropy::compiled).final_norm, 268'468'224.0);
  EXPECT_DOUBLE_EQ(plugins::output_activations(small, fused, CrossEntropy::compiled).final_norm, 134'217'728.0);
  o.tensor_parallel = fused.tensor_parallel = 8;
  o.sequence_parallel = fused.sequence_parallel = true;
  const plugins::OutputShape big{8192, 16, 8192, 128'256};
  EXPECT_DOUBLE_EQ(plugins::output_activations(big, o, CrossEntropy::loss_parallel).final_norm, 2'952'855'552.0);
  EXPECT_DOUBLE_EQ(plugins::output_activations(big, fused, CrossEntropy::loss_parallel).final_norm, 536'870'912.0);
}

// Gemma's RMSNorm (transformers modeling_gemma.py GemmaRMSNorm, and Gemma 2's
// and 3's: output = self._norm(x.float()); output * (1.0 + self.weight.float());
// then type_as(x)) multiplies by its weight in fp32: a trained norm's weight
// gradient reads the fp32 normalized tensor, 4h, where Llama's reads the 16-bit
// cast, 2h (the model's norm_scale_fp32). Gemma 3 12B's text layers, full
// fine-tuning in bf16, 1,024 tokens: per token and layer the four norms 4 x 2h
// = 30,720 more and the per-head q/k norms 2 (q + kv) = 2 x (4,096 + 2,048) =
// 12,288 more; the final norm 2h = 7,680. Frozen norms (LoRA) keep no
// normalized tensor either way.
TEST(EagerLayers, GemmaNormsMultiplyInFp32) {
  const auto gemma3 = [](const std::string& model, const std::string& lora) {
    return evaluate("name = \"g\"\nmode = \"train\"\n[framework]\nuse = \"hf-transformers\"\nversion = \"5.17\"\n"
                    "[model]\npreset = \"gemma-3-12b-text\"\n" + model +
                    "[batch]\nseq_len = 1024\n[precision]\nuse = \"bf16\"\n[optimizer]\nuse = \"sgd\"\n"
                    "[activations]\nuse = \"megatron\"\nuse_cache = false\n" + lora);
  };
  constexpr uint64_t kTokens = 1024;
  const auto layers = [](const Evaluation& e) {
    return e.item_bytes("layers.0-47.activations", MEMPLAN_ROLE_ACTIVATIONS);
  };
  const auto final_norm = [](const Evaluation& e) {
    return e.item_bytes("activations.final_norm", MEMPLAN_ROLE_ACTIVATIONS);
  };
  const Evaluation gemma = gemma3("", "");
  const Evaluation llama_like = gemma3("norm_scale_fp32 = false\n", "");
  EXPECT_EQ(layers(gemma) - layers(llama_like), 48 * (30'720 + 12'288) * kTokens);
  EXPECT_EQ(final_norm(gemma) - final_norm(llama_like), 7'680 * kTokens);
  const std::string lora = "[[strategy]]\nuse = \"lora\"\nrank = 16\nalpha = 32\ntargets = \"all-linear\"\n";
  EXPECT_EQ(layers(gemma3("", lora)), layers(gemma3("norm_scale_fp32 = false\n", lora)));
}

}  // namespace
// Eager attention's fp32 softmax (megatron softmax_upcast, the hf-transformers profile's; eager_attention_transients):
// Llama-2-7B, bf16, 4 x 2048 tokens, no flash attention. One layer's scores: 4 x 32 x 2048^2 = 536,870,912.
//   recomputed (full): the forward holds the 16-bit input, the fp32 copy and the fp32 output at the softmax,
//     (2 + 4 + 4) x 536,870,912 = 5,368,709,120 B (activations.attention_forward, transient_forward_in_layers); the
//     backward's 12 B a score, 6 beyond the layer's saves (4 + 2), 3,221,225,472 B, go into the recomputed layer's
//     working set as the larger of it and the residual the recomputation holds there (2 x 4 x 2048 x 4096 =
//     67,108,864): the working set grows by 3,221,225,472 - 67,108,864 = 3,154,116,608 B
//   the layer's saves themselves: the fp32 probabilities beside their 16-bit cast (4 + 2 B a score) where the
//     16-bit softmax without the upcast keeps its 2 B output alone, 4 x 536,870,912 = 2,147,483,648 B more in the
//     recomputed layer: 3,154,116,608 + 2,147,483,648 = 5,301,600,256 B beside the run without softmax_upcast
//   not recomputed: the forward's copy only, 4 x 536,870,912 = 2,147,483,648 B; the backward's 6 B a score,
//     3,221,225,472 B (activations.attention_backward, transient_backward_in_layers)
//   without softmax_upcast (the plugin's default): neither item.
// cache_under_recompute (torch's checkpoint_wrapper, which transformers does not see): use_cache's K and V of the 32
// layers, 32 x 2 x 4 x 2048 x 4096 x 2 B = 4,294,967,296 B, at the forward's end beside the recomputed layers' inputs.
TEST(EagerLayers, SoftmaxUpcastTransientsAndTheCacheUnderAWrapper) {
  auto run = [](const std::string& activations, const std::string& strategies) {
    return evaluate_paper("name = \"e\"\nmode = \"train\"\n[model]\npreset = \"llama-2-7b\"\n[batch]\nmicro_batch = 4\n"
                          "seq_len = 2048\n[precision]\nuse = \"bf16\"\n[optimizer]\nuse = \"sgd\"\n[activations]\n"
                          "use = \"megatron\"\nlayer = \"eager\"\nflash_attention = false\ndropout = false\n" +
                          activations + strategies);
  };
  const std::string full = "[[strategy]]\nuse = \"recompute\"\npolicy = \"full\"\n";
  const Evaluation recomputed = run("softmax_upcast = true\n", full);
  EXPECT_EQ(with_lifetime(recomputed, "activations.attention_forward", MEMPLAN_LIFETIME_FORWARD_IN_LAYERS),
            5'368'709'120u);
  EXPECT_EQ(recomputed.item_bytes("activations.recompute", MEMPLAN_ROLE_ACTIVATIONS) -
                run("", full).item_bytes("activations.recompute", MEMPLAN_ROLE_ACTIVATIONS),
            5'301'600'256u);
  const Evaluation stored = run("softmax_upcast = true\n", "");
  EXPECT_EQ(with_lifetime(stored, "activations.attention_forward", MEMPLAN_LIFETIME_FORWARD_IN_LAYERS), 2'147'483'648u);
  EXPECT_EQ(with_lifetime(stored, "activations.attention_backward", MEMPLAN_LIFETIME_BACKWARD_IN_LAYERS),
            3'221'225'472u);
  const Evaluation plain = run("", "");
  EXPECT_EQ(plain.item_bytes("activations.attention_forward", MEMPLAN_ROLE_ACTIVATIONS), 0u);
  EXPECT_EQ(plain.item_bytes("activations.attention_backward", MEMPLAN_ROLE_ACTIVATIONS), 0u);
  const Evaluation wrapped = run("use_cache = true\ncache_under_recompute = true\n", full);
  EXPECT_EQ(with_lifetime(wrapped, "activations.kv_cache", MEMPLAN_LIFETIME_TRANSIENT_FORWARD), 4'294'967'296u);
  EXPECT_EQ(run("use_cache = true\n", full).item_bytes("activations.kv_cache", MEMPLAN_ROLE_ACTIVATIONS), 0u);
  EXPECT_NE(error_of("name = \"e\"\nmode = \"train\"\n[model]\npreset = \"llama-2-7b\"\n[precision]\nuse = \"bf16\"\n"
                     "[optimizer]\nuse = \"sgd\"\n[activations]\nuse = \"megatron\"\nlayer = \"eager\"\n"
                     "cache_under_recompute = true\n")
                .find("keeps the KV cache on under recomputation, but use_cache is off"),
            std::string::npos);
}

}  // namespace memplan::testing
