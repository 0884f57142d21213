// Hugging Face Transformers 5.17 layers as one H100 showed them: the tensors
// alive at the allocated peak of a training step (the start of backward),
// recorded by torch.cuda.memory._record_memory_history and grouped by the
// Python frame that allocated them (tools/measure/hf_memory.py @ d9b65ed;
// validation/measured/h100-2026-11-26.jsonl, `peak_analysis`; the histories
// are validation/measured/snapshot-*.pickle.gz). torch 2.11.0, transformers
// 5.17.0, peft 0.21.0; bf16 weights, SDPA. Each figure below is the sum of
// one layer's groups in bytes per token, and the estimate is derived beside
// it (docs/formulas.md, "Eager layers": K and V in the KV cache, q/k norms,
// SDPA with a padding mask).
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "test_support.hpp"

namespace memplan::testing {
namespace {

// The bytes of the `activations.kv_cache` items of one lifetime.
uint64_t cache_bytes(const Evaluation& e, int32_t lifetime) {
  uint64_t bytes = 0;
  for (const PlanItem& item : e.estimator().plan().items)
    if (item.name_view() == "activations.kv_cache" && item.lifetime == lifetime) bytes += item.bytes();
  return bytes;
}

// The plan's item named `name` (the last one added), or null.
const PlanItem* plan_item(const Evaluation& e, std::string_view name) {
  const PlanItem* found = nullptr;
  for (const PlanItem& it : e.estimator().plan().items)
    if (it.name_view() == name) found = &it;
  return found;
}

std::string hf_517(const std::string& model, const std::string& batch, const std::string& precision,
                   const std::string& extra_activations, const std::string& strategies = "") {
  return "name = \"m\"\nmode = \"train\"\n[framework]\nuse = \"hf-transformers\"\nversion = \"5.17\"\n[model]\npreset = \"" +
         model + "\"\n[batch]\n" + batch + "[precision]\n" + precision +
         "[optimizer]\nuse = \"adamw\"\n[activations]\nuse = \"megatron\"\nflash_attention = true\ndropout = false\n"
         "output_held = true\n" +
         extra_activations + strategies + "[hardware]\ngpu = \"h100-sxm-80gb\"\n";
}

// Qwen3-0.6B (h 1024, 16 heads, 8 kv heads of 128: q 2048, kv 1024, f 3072),
// full fine-tuning, micro-batch 8 x 2048 tokens, no padding (transformers
// passes no mask: SDPA reads K and V at the kv heads, enable_gqa). Measured per
// token and layer (snapshot-qwen3-0.6b-full-bs8-s2048): gate and up outputs
// 12,288 (modeling_qwen3.py:82), silu 6,144, the product down keeps 6,144, two
// RMSNorms each with the fp32 input 4,096 + rsqrt 4 + the normalized copy
// cast back 2,048 and the norm's output 2,048 (the projections' input) =
// 16,392, q_norm's fp32 input 8,192 + 64 rsqrt + its bf16 normalized copy 4,096,
// k_norm's 4,096 + 32 + 2,048, q after RoPE 4,096, SDPA's output 4,096 and
// log-sum-exp 64, and K and V at the kv heads, 2 x 2,048, which
// cache_utils.py:146-147 (DynamicLayer.update's torch.cat) allocated and
// the held output's cache keeps: 71,848 bytes.
// The estimate: the layer's tensors without K and V, 67,752 (two norms
// 2 x (4h + 4 + 2h) = 12,296, their outputs 2 x 2h = 4,096, q and the output
// 8,192, lse 64, SwiGLU 8f = 24,576, q_norm 4 x 2,048 + 4 x 16 + 2 x 2,048 =
// 12,352, k_norm 4 x 1,024 + 4 x 8 + 2 x 1,024 = 6,176), and the cache,
// 4,096 a token and layer, held from step to step (persistent) and built anew
// beside it during the forward (transient_forward).
TEST(HfMeasuredLayers, Qwen3QkNormsAndTheCacheAsMeasured) {
  Evaluation e = evaluate(hf_517("qwen3-0.6b", "micro_batch = 8\nseq_len = 2048\n", "use = \"bf16\"\n", ""));
  const uint64_t tokens = 8 * 2048;
  EXPECT_EQ(e.item_bytes("layers.0-27.activations", MEMPLAN_ROLE_ACTIVATIONS), 28 * 67'752 * tokens);
  EXPECT_EQ(cache_bytes(e, MEMPLAN_LIFETIME_PERSISTENT), 28 * 4'096 * tokens);
  EXPECT_EQ(cache_bytes(e, MEMPLAN_LIFETIME_TRANSIENT_FORWARD), 28 * 4'096 * tokens);
  // The measured groups as listed add up to the layer's tensors and the cache.
  static_assert(12'288 + 6'144 + 6'144 + 2 * (4'096 + 4 + 2'048 + 2'048) + (8'192 + 64 + 4'096) +
                    (4'096 + 32 + 2'048) + 4'096 + 4'096 + 64 + 2 * 2'048 ==
                67'752 + 4'096);
}

// Llama-3.2-3B (h 3072, 24 heads, 8 kv heads: q 3072, kv 1024, f 8192), LoRA
// r 32 on q and v with PEFT's fp32 adapters, 4 x 768 tokens padded on the
// right (lengths 768, 741, 702, 655). Measured per token and layer
// (snapshot-llama-3.2-3b-lora-r32-qv-bs4-s768): gate and up 32,768, the two
// fp32 casts of the normed input for q's and v's adapters 24,576 (PEFT's
// _cast_input_dtype), silu 16,384, the norms' fp32 inputs 24,576 and rsqrt 8,
// SDPA's output 6,144, its log-sum-exp 96 and the 16-bit bias it made of the
// boolean mask 1,536 (4,718,592 bytes a layer = 4 x 768 x 768 x 2), q after
// RoPE 6,144, K and V repeated to 24 heads 12,288 (sdpa_attention.py:24,
// repeat_kv: a mask rules out enable_gqa), K and V in the cache 4,096, lora_A's
// outputs 256: 128,872 bytes.
// The estimate: the frozen layer 16h + 6f + 4a + 8 = 49,152 + 49,152 + 96 + 8
// = 98,408, the adapters' casts 24,576 and lora_B's inputs 256, the bias
// s x 2 = 1,536 a token: 124,776, and the cache 4,096 (the repeated copies are
// what SDPA saves, so the cache's K and V are more).
TEST(HfMeasuredLayers, PaddedBatchRepeatsKvAndKeepsTheMaskBias) {
  const std::string lora =
      "[[strategy]]\nuse = \"lora\"\nrank = 32\nalpha = 64\ntargets = \"q,v\"\ndropout = 0.0\n";
  const std::string precision = "use = \"bf16\"\nadapters = \"fp32\"\noptimizer_states = \"fp32\"\n";
  const std::string batch = "micro_batch = 4\nseq_len = 768\n";
  Evaluation padded = evaluate(hf_517("llama-3.2-3b", batch, precision, "padding_mask = true\n", lora));
  const uint64_t tokens = 4 * 768;
  EXPECT_EQ(padded.item_bytes("layers.0-27.activations", MEMPLAN_ROLE_ACTIVATIONS), 28 * 124'776 * tokens);
  EXPECT_EQ(cache_bytes(padded, MEMPLAN_LIFETIME_PERSISTENT), 28 * 4'096 * tokens);
  EXPECT_EQ(cache_bytes(padded, MEMPLAN_LIFETIME_TRANSIENT_FORWARD), 28 * 4'096 * tokens);
  static_assert(32'768 + 24'576 + 16'384 + 24'576 + 8 + 6'144 + 96 + 1'536 + 6'144 + 12'288 + 4'096 + 256 ==
                124'776 + 4'096);
  // The same batch unpadded (no mask): K and V at the kv heads, in the cache,
  // and no bias: 124,776 - 12,288 (repeated K, V) - 1,536 = 110,952 a token.
  // Measured (job ...-nopad, no history): max_memory_allocated 22,018,879,488
  // against the padded job's 23,207,964,672, 1,189,085,184 bytes less; the
  // estimate's difference, 28 x 13,824 x 3,072 = 1,189,085,184 bytes: the same.
  Evaluation unpadded = evaluate(hf_517("llama-3.2-3b", batch, precision, "", lora));
  EXPECT_EQ(unpadded.item_bytes("layers.0-27.activations", MEMPLAN_ROLE_ACTIVATIONS), 28 * 110'952 * tokens);
}

// transformers' versions: before 4.54 SDPA always repeated K and V (PR #39412
// added enable_gqa without a mask), and before 4.53 the padding mask was one
// float tensor the layers shared (masking_utils' boolean masks came with 4.53):
// at 4.50 the unpadded layer keeps repeated copies (110,952 + 12,288), and a
// padded one no per-layer bias (124,776 - 1,536).
TEST(HfMeasuredLayers, VersionsBeforeEnableGqaAndBooleanMasks) {
  const std::string lora =
      "[[strategy]]\nuse = \"lora\"\nrank = 32\nalpha = 64\ntargets = \"q,v\"\ndropout = 0.0\n";
  const std::string precision = "use = \"bf16\"\nadapters = \"fp32\"\noptimizer_states = \"fp32\"\n";
  auto layers = [&](const std::string& extra) {
    std::string toml = hf_517("llama-3.2-3b", "micro_batch = 4\nseq_len = 768\n", precision, extra, lora);
    toml.replace(toml.find("5.17"), 4, "4.50");
    return evaluate(toml).item_bytes("layers.0-27.activations", MEMPLAN_ROLE_ACTIVATIONS);
  };
  const uint64_t tokens = 4 * 768;
  EXPECT_EQ(layers(""), 28 * (110'952 + 12'288) * tokens);
  EXPECT_EQ(layers("padding_mask = true\n"), 28 * (124'776 - 1'536) * tokens);
}

// OLMo 3 7B's shape (olmo-2-7b with dolma2's 100,278 entries, three windowed
// layers in four, window 4,096) under the 5.17 Trainer with gradient
// checkpointing, one unpadded 4,096-token row (snapshot-olmo3-7b-trainer-lora-
// r32-all-d0.05-gcdefault-bs1-s4096). masking_utils builds no mask for the
// full-attention layers (SDPA runs is_causal) but one for the windowed layers,
// whose keys are not fewer than the window: and_mask's 4,096 x 4,096 bool =
// 16,777,216 bytes, alive at the loss's backward (the checkpointed layers'
// arguments hold it). Recomputing layer 30 (windowed) rises 1,602,027,536
// bytes, layer 31 (full attention) 1,568,473,104: 33,554,432 apart, SDPA's
// bf16 bias of the mask (4,096 x 4,096 x 2). At 4,095 tokens, fewer than the
// window, transformers skips the mask: neither is counted. Without
// recomputation each of the 24 windowed layers keeps its bias
// (`activations.windowed_attention`), and the mask is
// freed when the forward returns (the padded 3B snapshot frees its mask after
// the last layer's forward). A padded batch gives every layer a mask (the bias
// in the layer's stored bytes, above) and builds one per kind: 2 x 16,777,216.
TEST(HfMeasuredLayers, WindowedLayersMaskFromTheWindowOn) {
  const auto olmo3 = [](int seq, const std::string& activations, bool recompute, bool window = true) {
    return evaluate("name = \"o\"\nmode = \"train\"\n[framework]\nuse = \"hf-transformers\"\nversion = \"5.17\"\n"
                    "[model]\npreset = \"olmo-2-7b\"\nvocab = 100278\nmax_context = 65536\n" +
                    std::string(window ? "sliding_window = 4096\nglobal_attention_every = 4\n" : "") +
                    "[batch]\nseq_len = " + std::to_string(seq) +
                    "\n[precision]\nuse = \"bf16\"\n[optimizer]\nuse = \"adamw\"\n[activations]\nuse = "
                    "\"megatron\"\nuse_cache = false\n" + activations +
                    (recompute ? "[[strategy]]\nuse = \"recompute\"\npolicy = \"full\"\n" : ""));
  };
  const auto item = plan_item;
  const Evaluation windowed = olmo3(4096, "", true);
  const PlanItem* mask = item(windowed, "activations.sdpa_masks");
  ASSERT_NE(mask, nullptr);
  EXPECT_EQ(mask->bytes(), 16'777'216u);
  EXPECT_EQ(mask->lifetime, MEMPLAN_LIFETIME_ACTIVATION);
  const Evaluation unwindowed = olmo3(4096, "", true, false);
  EXPECT_EQ(windowed.item_bytes("activations.recompute", MEMPLAN_ROLE_ACTIVATIONS) -
                unwindowed.item_bytes("activations.recompute", MEMPLAN_ROLE_ACTIVATIONS),
            1'602'027'536u - 1'568'473'104u);
  EXPECT_EQ(item(unwindowed, "activations.sdpa_masks"), nullptr);
  const Evaluation short_row = olmo3(4095, "", true);
  EXPECT_EQ(item(short_row, "activations.sdpa_masks"), nullptr);
  EXPECT_EQ(short_row.item_bytes("activations.recompute", MEMPLAN_ROLE_ACTIVATIONS),
            olmo3(4095, "", true, false).item_bytes("activations.recompute", MEMPLAN_ROLE_ACTIVATIONS));

  const Evaluation saved = olmo3(4096, "", false);
  const PlanItem* bias = item(saved, "activations.windowed_attention");
  ASSERT_NE(bias, nullptr);
  EXPECT_EQ(bias->count, 24u);
  EXPECT_EQ(bias->bytes(), 24u * 33'554'432u);  // OLMo's 32 kv heads: nothing to repeat
  const PlanItem* saved_mask = item(saved, "activations.sdpa_masks");
  ASSERT_NE(saved_mask, nullptr);
  EXPECT_EQ(saved_mask->lifetime, MEMPLAN_LIFETIME_FORWARD_IN_LAYERS);  // freed when the layers' forward returns

  const Evaluation padded = olmo3(4096, "padding_mask = true\n", false);
  const PlanItem* padded_masks = item(padded, "activations.sdpa_masks");
  ASSERT_NE(padded_masks, nullptr);
  EXPECT_EQ(padded_masks->bytes(), 2u * 16'777'216u);
  EXPECT_EQ(item(padded, "activations.windowed_attention"), nullptr);
  // flash_attention_2 takes no mask (and transformers before 4.53 built none per layer): mask_bias_per_layer false.
  EXPECT_EQ(item(olmo3(4096, "mask_bias_per_layer = false\n", false), "activations.sdpa_masks"), nullptr);
}

// Gemma 3 12B's text layers (h 3840, 16 heads and 8 kv heads of 256: q 4096,
// kv 2048; five windowed layers of 1,024 tokens in six), LoRA r 16 on every
// linear, 2,048 tokens: a windowed layer's mask rules out enable_gqa, so its
// SDPA call repeats K and V to 16 heads (sdpa_attention.py:24 repeat_kv,
// 2 x 8,192 bytes a token) and keeps the bias (4,096). Measured
// (snapshot-gemma3-12b-lora-r16-all-bs1-s2048, PEFT's loop, no
// checkpointing, the output held: K and V at the kv heads are the cache's):
// repeat_kv's two copies, 2 x 671,088,640 bytes over the 40 windowed layers
// (2 x 16,777,216 a layer), and the 40 biases among SDPA's allocations:
// 40 x (33,554,432 + 8,388,608) beyond what the full-attention layers keep.
// The Trainer's job at 2 x 2,048 tokens with checkpointing
// (snapshot-gemma3-12b-trainer-lora-r16-all-gcdefault-bs2-s2048): recomputing
// a windowed layer rises 1,673,731,088 bytes, the full-attention layer 47
// 1,623,399,440: 50,331,648 apart, 12,288 a token (the bias 4,096 and the
// repeated copies 16,384 in place of K and V at the kv heads, 8,192).
TEST(HfMeasuredLayers, Gemma3WindowedLayersRepeatKvUnderTheirMask) {
  const auto gemma3 = [](const std::string& batch, const std::string& activations, const std::string& strategies) {
    return evaluate("name = \"g\"\nmode = \"train\"\n[framework]\nuse = \"hf-transformers\"\nversion = \"5.17\"\n"
                    "[model]\npreset = \"gemma-3-12b-text\"\n[batch]\n" + batch +
                    "[precision]\nuse = \"bf16\"\nadapters = \"fp32\"\n[optimizer]\nuse = \"adamw\"\n"
                    "[activations]\nuse = \"megatron\"\n" + activations +
                    "[[strategy]]\nuse = \"lora\"\nrank = 16\nalpha = 32\ntargets = \"all-linear\"\n" + strategies);
  };
  const auto windowed = [](const Evaluation& e) -> uint64_t {
    const PlanItem* found = plan_item(e, "activations.windowed_attention");
    if (found == nullptr) return 0;
    EXPECT_EQ(found->count, 40u);
    return found->bytes();
  };
  const Evaluation loop = gemma3("seq_len = 2048\n", "output_held = true\n", "");
  EXPECT_EQ(windowed(loop), 40u * (2u * 671'088'640u / 40u + 8'388'608u));
  const std::string trainer = "autocast = true\nuse_cache = false\n";
  const std::string recompute = "[[strategy]]\nuse = \"recompute\"\npolicy = \"full\"\n";
  const Evaluation masked = gemma3("micro_batch = 2\nseq_len = 2048\n", trainer, recompute);
  const Evaluation unmasked =
      gemma3("micro_batch = 2\nseq_len = 2048\n", trainer + "mask_bias_per_layer = false\n", recompute);
  EXPECT_EQ(masked.item_bytes("activations.recompute", MEMPLAN_ROLE_ACTIVATIONS) -
                unmasked.item_bytes("activations.recompute", MEMPLAN_ROLE_ACTIVATIONS),
            1'673'731'088u - 1'623'399'440u);
  EXPECT_EQ(windowed(masked), 0u);  // recomputed: only the layer in backward holds it
  // Without checkpointing and with the output dropped after the loss (the Trainer), the cache's K and V at the
  // kv heads (2 x 4,096 bytes a token and layer) are beside what attention saves at the forward's end only in
  // the 40 windowed layers, whose SDPA saved repeated copies: 40 x 8,192 x 2,048.
  uint64_t beside = 0;
  const Evaluation dropped = gemma3("seq_len = 2048\n", "", "");
  for (const PlanItem& it : dropped.estimator().plan().items)
    if (it.name_view() == "activations.kv_cache" && it.lifetime == MEMPLAN_LIFETIME_TRANSIENT_FORWARD)
      beside += it.bytes();
  EXPECT_EQ(beside, 40u * 8'192u * 2'048u);
}

// Gemma 2 9B (16 heads, vocabulary 256,000, soft-capping 50 and 30) under
// the Trainer with LoRA on every linear, gradient checkpointing and eager
// attention (its model card's), one 4,096-token row
// (snapshot-gemma2-9b-trainer-lora-r16-all-gcdefault-eager-bs1-s4096):
// - the logits' capping keeps tanh's bf16 output from the head's forward to
//   its backward: 2,097,152,000 bytes (4,096 x 256,000 x 2) from
//   modeling_gemma2.py alive at the loss's backward;
// - the scores' capping keeps tanh's bf16 scores in the recomputed layer:
//   16 x 4,096 x 4,096 x 2 = 536,870,912 bytes (the layer's recomputation rose
//   3,577,128,960 bytes; memplan's working set 3,574,530,048 with it);
// - eager attention's float masks, full and windowed: 2 x 33,554,432 bytes
//   (4,096^2 x 2) from masking_utils' eager_mask, alive at the loss's backward.
TEST(HfMeasuredLayers, Gemma2SoftCappingAndEagerMasks) {
  const auto gemma2 = [](const std::string& model) {
    return evaluate("name = \"g\"\nmode = \"train\"\n[framework]\nuse = \"hf-transformers\"\nversion = \"5.17\"\n"
                    "[model]\npreset = \"gemma-2-9b\"\n" + model +
                    "[batch]\nseq_len = 4096\n[precision]\nuse = \"bf16\"\nadapters = \"fp32\"\n[optimizer]\nuse = "
                    "\"adamw\"\n[activations]\nuse = \"megatron\"\nautocast = true\nflash_attention = false\n"
                    "use_cache = false\n[[strategy]]\nuse = \"lora\"\nrank = 16\nalpha = 32\ntargets = \"all-linear\"\n"
                    "[[strategy]]\nuse = \"recompute\"\npolicy = \"full\"\n");
  };
  const Evaluation capped = gemma2("");
  uint64_t softcap = 0, masks = 0;
  for (const PlanItem& it : capped.estimator().plan().items) {
    if (it.name_view() == "activations.logit_softcap") {
      EXPECT_EQ(it.bytes(), 2'097'152'000u);
      softcap += 1;
    }
    if (it.name_view() == "activations.sdpa_masks") masks += it.bytes();
  }
  EXPECT_EQ(softcap, 2u);  // at the forward's end and at the loss's moment in backward
  EXPECT_EQ(masks, 2u * 33'554'432u);
  const Evaluation uncapped = gemma2("attn_logit_softcapping = 0\nfinal_logit_softcapping = 0\n");
  EXPECT_EQ(capped.item_bytes("activations.recompute", MEMPLAN_ROLE_ACTIVATIONS) -
                uncapped.item_bytes("activations.recompute", MEMPLAN_ROLE_ACTIVATIONS),
            16ull * 4096 * 4096 * 2);
  EXPECT_EQ(uncapped.item_bytes("activations.logit_softcap", MEMPLAN_ROLE_ACTIVATIONS), 0u);
}

// Llama-3.2-3B full fine-tuning under the 5.17 Trainer (bf16, autocast) with
// checkpointing, 4 x 2,048 tokens (snapshot-llama-3.2-3b-trainer-full-gcdefault-
// bs4-s2048): recomputing a layer rises 1,124,925,456 bytes, 137,320 a token
// (and 16 bytes more), where the layer saves 131,176: the recomputation stops
// at down's input, the MLP's last saved tensor, while the layer's forward still
// holds the residual as a local beside the post-attention norm's fp32 copy of
// it, 2h = 6,144 a token.
TEST(HfMeasuredLayers, TheRecomputedLayerHoldsItsResidual) {
  const auto full = [](const std::string& strategies) {
    return evaluate("name = \"f\"\nmode = \"train\"\n[framework]\nuse = \"hf-transformers\"\nversion = \"5.17\"\n"
                    "[model]\npreset = \"llama-3.2-3b\"\n[batch]\nmicro_batch = 4\nseq_len = 2048\n[precision]\nuse = "
                    "\"bf16\"\n[optimizer]\nuse = \"adamw\"\n[activations]\nuse = \"megatron\"\nautocast = true\n"
                    "use_cache = false\n" + strategies);
  };
  constexpr uint64_t kTokens = 4 * 2048;
  const uint64_t saves = full("").item_bytes("layers.0-27.activations", MEMPLAN_ROLE_ACTIVATIONS) / 28;
  EXPECT_EQ(saves, 131'176 * kTokens);
  const uint64_t recomputed = full("[[strategy]]\nuse = \"recompute\"\npolicy = \"full\"\n")
                                  .item_bytes("activations.recompute", MEMPLAN_ROLE_ACTIVATIONS);
  EXPECT_EQ(recomputed, 137'320 * kTokens);
  EXPECT_EQ(recomputed - saves, 2 * 3072 * kTokens);
}

// The example examples/train-framework-hf-trainer-gemma2-9b-lora.toml is the
// measured Gemma 2 job's scenario: its allocated peak within 0.1 % of the
// H100's max_memory_allocated, 35,242,418,176 bytes
// (validation/measured/h100-2026-11-27-gemma2.jsonl line 2).
TEST(HfMeasuredLayers, TheGemma2ExampleAsMeasured) {
  const std::string path = source_dir() + "/examples/train-framework-hf-trainer-gemma2-9b-lora.toml";
  std::ifstream in(path);
  ASSERT_TRUE(in.good()) << path;
  std::ostringstream text;
  text << in.rdbuf();
  const Evaluation e = evaluate(text.str(), path);
  constexpr double kMeasured = 35'242'418'176.0;
  const double estimate = static_cast<double>(e.breakdown().quantities[kAllocated].peak);
  EXPECT_NEAR(estimate / kMeasured, 1.0, 0.001);
}

// Gradient checkpointing turns use_cache off (transformers: "`use_cache=True`
// is incompatible with gradient checkpointing"): no cache under recompute.
// Without a held output the cache lives until the loop drops the output after
// the loss (the Trainer's compute_loss returns the loss only): only the
// forward's end sees it, and only where attention saved repeated copies
// instead of the cache's K and V.
TEST(HfMeasuredLayers, CacheLifetimes) {
  const auto scenario = [](const std::string& preset, const std::string& activations,
                           const std::string& strategies = "") {
    return "name = \"c\"\nmode = \"train\"\n[framework]\nuse = \"hf-transformers\"\nversion = \"5.17\"\n"
           "[model]\npreset = \"" + preset + "\"\n[batch]\nmicro_batch = 2\nseq_len = 1024\n"
           "[precision]\nuse = \"bf16\"\n[optimizer]\nuse = \"adamw\"\n[activations]\nuse = \"megatron\"\n" +
           activations + strategies;
  };
  // Llama-3.2-1B: 16 layers, 8 kv heads of 64 (kv 512): 2 x 512 x 2 = 2,048 bytes a token and layer.
  const uint64_t cache = 16ull * 2'048 * 2 * 1024;
  const std::string one_b = "llama-3.2-1b";
  EXPECT_EQ(evaluate(scenario(one_b, "", "[[strategy]]\nuse = \"recompute\"\npolicy = \"full\"\n"))
                .item_bytes("activations.kv_cache", MEMPLAN_ROLE_ACTIVATIONS),
            0u);
  EXPECT_EQ(evaluate(scenario(one_b, "")).item_bytes("activations.kv_cache", MEMPLAN_ROLE_ACTIVATIONS), 0u);
  const Evaluation padded = evaluate(scenario(one_b, "padding_mask = true\n"));
  EXPECT_EQ(cache_bytes(padded, MEMPLAN_LIFETIME_TRANSIENT_FORWARD), cache);
  EXPECT_EQ(cache_bytes(padded, MEMPLAN_LIFETIME_PERSISTENT), 0u);
  EXPECT_EQ(evaluate(scenario(one_b, "use_cache = false\npadding_mask = true\n"))
                .item_bytes("activations.kv_cache", MEMPLAN_ROLE_ACTIVATIONS),
            0u);
  // Eager attention repeats K and V whatever the version: the cache is more at the forward's end.
  EXPECT_EQ(cache_bytes(evaluate(scenario(one_b, "flash_attention = false\n")), MEMPLAN_LIFETIME_TRANSIENT_FORWARD),
            cache);
  // Held, across tensor-parallel ranks: each keeps its kv heads' share (8 kv heads over 2 ranks).
  const Evaluation split = evaluate(scenario(one_b, "output_held = true\n",
                                             "[[strategy]]\nuse = \"tensor-parallel\"\nsize = 2\n"));
  EXPECT_EQ(cache_bytes(split, MEMPLAN_LIFETIME_PERSISTENT), cache / 2);
  EXPECT_EQ(cache_bytes(split, MEMPLAN_LIFETIME_TRANSIENT_FORWARD), cache / 2);
  // As many kv heads as heads (Llama-2-7B: 32 layers, K and V 4096 wide): nothing is repeated, so a padded batch's
  // cache held by no one is what attention saves; held, it is 32 x 2 x 4096 x 2 bytes a token.
  EXPECT_EQ(evaluate(scenario("llama-2-7b", "padding_mask = true\n"))
                .item_bytes("activations.kv_cache", MEMPLAN_ROLE_ACTIVATIONS),
            0u);
  EXPECT_EQ(cache_bytes(evaluate(scenario("llama-2-7b", "output_held = true\n")), MEMPLAN_LIFETIME_PERSISTENT),
            32ull * 2 * 4'096 * 2 * 2 * 1024);
}

// The loss's backward transients and the LM head's weight gradient never meet:
// the head's backward, which allocates the first parameter gradient, runs after
// the loss's fp32 gradients are freed. Measured (snapshot-llama-3.2-3b-full-
// bs4-s768): the step's allocated peak is at the loss's backward, the two fp32
// gradients (2 x 1,576,009,728 B, "no python frame") alive and no parameter
// gradient (zero_grad set them to None). Llama-3.2-3B full fine-tuning, 4 x 768
// tokens: the loss's backward adds 2 x 4 x 3,072 x 128,256 = 3,152,019,456
// bytes beside the loss's saved fp32 log-softmax, 4 x 3,072 x 128,256 =
// 1,576,009,728, which autograd frees once the loss has run backward (a forward
// transient; at backward's start part of the loss's moment, lifetime
// backward_start): 4,728,029,184. The tied head's gradient is 128,256 x 3,072 x
// 2 = 788,004,864, which the host's step rule adds at backward's start (the
// largest layer's gradients), so the item is 4,728,029,184 - 788,004,864 =
// 3,940,024,320 (above the 16-bit logits gradient the head's backward holds
// beside its own, 2 x 4 x 768 x 128,256 = 788,004,864, its floor). With
// gradient accumulation every gradient is alive from the earlier micro-batches:
// the whole 4,728,029,184.
TEST(HfMeasuredLayers, LossBackwardDoesNotMeetTheHeadsGradient) {
  const auto loss_backward = [](int accumulation) {
    return evaluate(hf_517("llama-3.2-3b",
                           "micro_batch = 4\nseq_len = 768\ngrad_accum = " + std::to_string(accumulation) + "\n",
                           "use = \"bf16\"\n", "padding_mask = true\n"))
        .item_bytes("activations.loss_backward", MEMPLAN_ROLE_ACTIVATIONS);
  };
  EXPECT_EQ(loss_backward(1), 3'152'019'456ull + 1'576'009'728u - 788'004'864u);
  EXPECT_EQ(loss_backward(2), 3'152'019'456ull + 1'576'009'728u);
}

// The new options describe what Hugging Face's modules build around eager layers: on fused layers they
// size nothing, and are not refused (megatron 1.30.1: the hf-transformers profile sets them, and a scenario
// under it may choose compiled or fused layers).
TEST(HfMeasuredLayers, OptionsSizeNothingOutsideEagerLayers) {
  const std::string base = "name = \"o\"\nmode = \"train\"\n[model]\npreset = \"llama-3.2-1b\"\n[batch]\nseq_len = 128\n"
                           "[precision]\nuse = \"bf16\"\n[optimizer]\nuse = \"sgd\"\n[activations]\nuse = \"megatron\"\n";
  const uint64_t plain = evaluate_paper(base).breakdown().quantities[kAllocated].peak;
  for (const char* key : {"padding_mask", "mask_bias_per_layer", "use_cache"})
    EXPECT_EQ(evaluate_paper(base + std::string(key) + " = true\n").breakdown().quantities[kAllocated].peak, plain)
        << key;
}

}  // namespace
}  // namespace memplan::testing
