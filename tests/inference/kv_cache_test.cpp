// The 'inference' plugin's KV cache against cited figures and hand derivations
// written beside each test, in the source's unit. Per layer and token the
// cache holds a key and a value vector per kv head:
//   2 x kv_heads_per_rank x head_dim x kv_bytes
// (docs/inference.md, section 1).
#include <gtest/gtest.h>

#include <string>

#include "../../plugins/activations/inference/inference_memory.hpp"
#include <memplan/support/kv_heads.hpp>
#include "inference_scenarios.hpp"
#include "test_support.hpp"

namespace memplan::testing {
namespace {

constexpr uint64_t kKiB = 1024;
constexpr uint64_t kMiB = 1024 * kKiB;
constexpr uint64_t kGiBu = 1024 * kMiB;

// OPT-13B as the vLLM paper uses it (Zhang et al. 2022; facebook/opt-13b
// config.json): 40 layers, hidden 5120, 40 heads, learned positions, biases.
constexpr std::string_view kOpt13B =
    "layers = 40\nhidden = 5120\nheads = 40\nffn_hidden = 20480\nvocab = 50272\nmlp = \"gelu\"\n"
    "norm = \"layernorm\"\nqkv_bias = true\noutput_bias = true\nmlp_bias = true\nposition_embeddings = 2048\n";

// Kwon et al. 2023 (vLLM, arXiv 2309.06180), section 3: "the KV cache of a
// single token demands 800 KB of space, calculated as 2 (key and value
// vectors) x 5120 (hidden state size) x 40 (number of layers) x 2 (bytes per
// FP16)". 2 x 5120 x 40 x 2 = 819,200 B = 800 KiB: the paper's KB is 1024 B.
TEST(VllmPaper, Opt13BKvCacheIs800KBPerToken) {
  Evaluation e = evaluate_paper(infer_scenario(kOpt13B, 1, 1, "block_size = 1\n", "", "mixed-fp16"));
  EXPECT_EQ(kv_cache_bytes(e), 819'200u);
  EXPECT_EQ(kv_cache_bytes(e) / kKiB, 800u);
}

// Same section: "Since OPT can generate sequences up to 2048 tokens, the memory
// required to store the KV cache of one request can be as much as 1.6 GB."
// 819,200 B x 2048 = 1,677,721,600 B = 1,638,400 KB (of 1024 B), which the
// paper rounds to 1.6 GB, i.e. 10^6 of its KB (1.5625 GiB; 1.68 x 10^9 B).
TEST(VllmPaper, Opt13BRequestOf2048TokensIs1Point6GB) {
  Evaluation e = evaluate_paper(infer_scenario(kOpt13B, 1, 2048, "block_size = 1\n", "", "mixed-fp16"));
  EXPECT_EQ(kv_cache_bytes(e), 1'677'721'600u);
  EXPECT_EQ(kv_cache_bytes(e) / kKiB, 1'638'400u);
  EXPECT_NEAR(static_cast<double>(kv_cache_bytes(e)) / kKiB / 1e6, 1.6, 0.05);
}

// Llama-2-7B (preset; 32 layers, 32 kv heads of 128) in fp16:
// 2 x 32 layers x 4096 (32 x 128) x 2 B = 524,288 B = 0.5 MiB per token.
TEST(KvCache, Llama2_7BIsHalfAMiBPerToken) {
  Evaluation one = evaluate_paper(infer_scenario(preset("llama-2-7b"), 1, 1, "block_size = 1\n", "", "mixed-fp16"));
  EXPECT_EQ(kv_cache_bytes(one), 524'288u);
  EXPECT_EQ(kv_cache_bytes(one), kMiB / 2);
  // 4096 tokens (256 whole blocks of 16): 4096 x 0.5 MiB = 2 GiB.
  Evaluation full = evaluate_paper(infer_scenario(preset("llama-2-7b"), 1, 4096, "", "", "mixed-fp16"));
  EXPECT_EQ(kv_cache_bytes(full), 2 * kGiBu);
  // One item for all 32 layers, 64 MiB each.
  EXPECT_EQ(full.item_bytes("layers.0-31.kv_cache", MEMPLAN_ROLE_KV_CACHE), 2 * kGiBu);
}

// Grouped-query attention (Ainslie et al. 2023, arXiv 2305.13245): Llama-3.1-8B
// has 8 kv heads for 32 query heads. bf16: 2 x 32 layers x 8 x 128 x 2 B =
// 131,072 B per token (a quarter of multi-head attention's 524,288 B).
//   1k   = 1,024 tokens   x 131,072 B = 134,217,728 B     = 128 MiB
//   16k  = 16,384 tokens  x 131,072 B = 2,147,483,648 B   = 2 GiB
//   128k = 131,072 tokens x 131,072 B = 17,179,869,184 B  = 16 GiB
TEST(KvCache, GroupedQueryAttentionLlama31_8B) {
  EXPECT_EQ(kv_cache_bytes(evaluate_paper(infer_scenario(kLlama31_8B, 1, 1, "block_size = 1\n"))), 131'072u);
  EXPECT_EQ(kv_cache_bytes(evaluate_paper(infer_scenario(kLlama31_8B, 1, 1024))), 128 * kMiB);
  EXPECT_EQ(kv_cache_bytes(evaluate_paper(infer_scenario(kLlama31_8B, 1, 16384))), 2 * kGiBu);
  EXPECT_EQ(kv_cache_bytes(evaluate_paper(infer_scenario(kLlama31_8B, 1, 131072))), 16 * kGiBu);
  // Concurrent sequences multiply it: 8 sequences of 16k = 16 GiB.
  EXPECT_EQ(kv_cache_bytes(evaluate_paper(infer_scenario(kLlama31_8B, 8, 16384))), 16 * kGiBu);
}

// Multi-query attention (Shazeer 2019, arXiv 1911.02150): one kv head.
// Llama-3.1-8B's shape with kv_heads = 1: 2 x 32 x 1 x 128 x 2 = 16,384 B per token.
TEST(KvCache, MultiQueryAttentionKeepsOneKvHead) {
  const std::string mqa = "layers = 32\nhidden = 4096\nheads = 32\nkv_heads = 1\nffn_hidden = 14336\nvocab = 128256\n";
  EXPECT_EQ(kv_cache_bytes(evaluate_paper(infer_scenario(mqa, 1, 1024))), 1024u * 16'384);
}

// PagedAttention (Kwon et al. 2023, section 4.1) stores each sequence in
// blocks of block_size tokens. Llama-2-7B fp16, 1000 tokens:
//   block 16:  ceil(1000/16) = 63 blocks = 1008 tokens x 524,288 B = 528,482,304 B
//   block 1:   1000 tokens x 524,288 B = 524,288,000 B (no paging)
//   block 256: 4 blocks = 1024 tokens = 536,870,912 B
//   3 sequences, block 16: each rounds up on its own, 3 x 528,482,304 B
TEST(KvCache, PagedBlocksRoundEachSequenceUp) {
  EXPECT_EQ(kv_cache_bytes(evaluate_paper(infer_scenario(preset("llama-2-7b"), 1, 1000, "", "", "mixed-fp16"))),
            1008u * 524'288);
  EXPECT_EQ(kv_cache_bytes(evaluate_paper(infer_scenario(preset("llama-2-7b"), 1, 1000, "block_size = 1\n", "", "mixed-fp16"))),
            524'288'000u);
  EXPECT_EQ(kv_cache_bytes(evaluate_paper(infer_scenario(preset("llama-2-7b"), 1, 1000, "block_size = 256\n", "", "mixed-fp16"))),
            536'870'912u);
  EXPECT_EQ(kv_cache_bytes(evaluate_paper(infer_scenario(preset("llama-2-7b"), 3, 1000, "", "", "mixed-fp16"))),
            3u * 528'482'304);
}

// Mistral 7B v0.1 (Jiang et al. 2023, arXiv 2310.06825; mistralai/Mistral-7B-v0.1
// config.json): 32 layers, 8 kv heads of 128, sliding window W = 4096.
// Section 2, "Rolling Buffer Cache": the cache is limited to W tokens; "On a
// sequence length of 32k tokens, this reduces the cache memory usage by 8x".
constexpr std::string_view kMistral7B =
    "layers = 32\nhidden = 4096\nheads = 32\nkv_heads = 8\nffn_hidden = 14336\nvocab = 32000\nsliding_window = 4096\n";

// A decode step (a pass of 1 token) holds the window's W - 1 tokens and the
// new one: W. 16k context: every layer caches 4096 tokens x 131,072 B = 512 MiB.
constexpr std::string_view kDecodeStep = "prefill_chunk = 1\n";

TEST(SlidingWindow, CapsWindowedLayersAtTheWindow) {
  Evaluation e = evaluate_paper(infer_scenario(kMistral7B, 1, 16384, kDecodeStep));
  EXPECT_EQ(kv_cache_bytes(e), 512 * kMiB);
  EXPECT_EQ(e.item_bytes("layers.0-31.kv_cache", MEMPLAN_ROLE_KV_CACHE), 512 * kMiB);
  // A context shorter than the window is not padded to it: 1008 tokens (63 blocks).
  EXPECT_EQ(kv_cache_bytes(evaluate_paper(infer_scenario(kMistral7B, 1, 1000))), 1008u * 131'072);
}

// During a pass of c tokens a windowed layer still holds the W - 1 tokens
// before them (vLLM v1 vllm/v1/kv_cache_interface.py SlidingWindowSpec:
// min(W - 1 + max_num_batched_tokens, max_model_len) tokens).
//   whole 16,384-token prompt: min(16384, 4095 + 16384) = all 16,384 tokens = 2 GiB
//   chunks of 512: 4095 + 512 = 4,607 tokens, positions 11,777 to 16,383:
//     blocks 736 to 1023 = 288 blocks = 4,608 tokens x 131,072 B = 603,979,776 B
//   chunks of 500: 4,595 tokens, positions 11,789 to 16,383: blocks 736 to 1023 = 288 blocks
//     (the window does not start on a block boundary: one block more than 4,595 / 16 rounds to)
TEST(SlidingWindow, PrefillHoldsTheWindowAndThePass) {
  EXPECT_EQ(kv_cache_bytes(evaluate_paper(infer_scenario(kMistral7B, 1, 16384))), 2 * kGiBu);
  EXPECT_EQ(kv_cache_bytes(evaluate_paper(infer_scenario(kMistral7B, 1, 16384, "prefill_chunk = 512\n"))),
            603'979'776u);
  EXPECT_EQ(kv_cache_bytes(evaluate_paper(infer_scenario(kMistral7B, 1, 16384, "prefill_chunk = 500\n"))),
            288u * 16 * 131'072);
}

TEST(SlidingWindow, MistralPaperEightfoldAt32k) {
  // 32k = 32,768 tokens: 4 GiB without the window (option sliding_window = 0),
  // 512 MiB with it once the sequence decodes token by token: 8x.
  const uint64_t full = kv_cache_bytes(evaluate_paper(infer_scenario(kMistral7B, 1, 32768, "sliding_window = 0\n")));
  const uint64_t windowed = kv_cache_bytes(evaluate_paper(infer_scenario(kMistral7B, 1, 32768, kDecodeStep)));
  EXPECT_EQ(full, 4 * kGiBu);
  EXPECT_EQ(windowed, 512 * kMiB);
  EXPECT_EQ(full / windowed, 8u);
}

TEST(SlidingWindow, OptionOverridesTheModel) {
  // Llama-3.1-8B has no window; sliding_window = 4096 gives it one: 4096 x 131,072 B.
  EXPECT_EQ(kv_cache_bytes(evaluate_paper(
                infer_scenario(kLlama31_8B, 1, 16384, "sliding_window = 4096\nprefill_chunk = 1\n"))),
            512 * kMiB);
}

// Hybrid local/global attention, Gemma 2's shape (google/gemma-2-9b
// config.json: 42 layers, 8 kv heads of head_dim 256, window 4096, local and
// global layers alternating, the odd layers global): global_attention_every = 2
// makes layers 1, 3, ..., 41 global. bf16: 2 x 8 x 256 x 2 = 8,192 B per layer
// and token.
//   global: 21 layers x 8,192 tokens x 8,192 B = 1,409,286,144 B
//   window: 21 layers x 4,096 tokens x 8,192 B =   704,643,072 B
TEST(SlidingWindow, HybridModelsSplitGlobalAndWindowedLayers) {
  const std::string gemma2 =
      "layers = 42\nhidden = 3584\nheads = 16\nkv_heads = 8\nhead_dim = 256\nffn_hidden = 14336\nvocab = 256000\n"
      "tied_embeddings = true\nsliding_window = 4096\nglobal_attention_every = 2\n";
  Evaluation e = evaluate_paper(infer_scenario(gemma2, 1, 8192, kDecodeStep));
  const auto& items = e.estimator().plan().items;
  EXPECT_EQ(bytes_named(items, "kv_cache.global"), 1'409'286'144u);
  EXPECT_EQ(bytes_named(items, "kv_cache.window"), 704'643'072u);
  EXPECT_EQ(kv_cache_bytes(e), 1'409'286'144u + 704'643'072u);
  const PlanItem* global = find_named(items, "kv_cache.global");
  const PlanItem* window = find_named(items, "kv_cache.window");
  ASSERT_NE(global, nullptr);
  ASSERT_NE(window, nullptr);
  EXPECT_EQ(global->layer, 1);  // the first global layer
  EXPECT_EQ(global->count, 21u);
  EXPECT_EQ(window->layer, 0);
  EXPECT_EQ(window->count, 21u);
}

// A hybrid model cut by pipeline parallelism: 16 layers, every 3rd global
// (layers 2, 5, 8, 11, 14), window 512, 8 kv heads of 128, bf16, 2048 tokens:
// 2 x 8 x 128 x 2 = 4,096 B per layer and token.
//   first stage, layers 0-7:  global 2, 5 (2 layers)     2 x 2048 x 4096 = 16,777,216 B
//                             window 0,1,3,4,6,7 (6)     6 x  512 x 4096 = 12,582,912 B
//   last stage, layers 8-15:  global 8, 11, 14 (3)       3 x 2048 x 4096 = 25,165,824 B
//                             window 9,10,12,13,15 (5)   5 x  512 x 4096 = 10,485,760 B
TEST(SlidingWindow, PipelineStagesCountTheirOwnGlobalLayers) {
  const std::string model =
      "layers = 16\nhidden = 1024\nheads = 8\nffn_hidden = 4096\nvocab = 32000\nsliding_window = 512\n"
      "global_attention_every = 3\n";
  Evaluation first = evaluate_paper(
      infer_scenario(model, 1, 2048, kDecodeStep, "[[strategy]]\nuse = \"pipeline-parallel\"\nsize = 2\n"));
  const auto& a = first.estimator().plan().items;
  EXPECT_EQ(bytes_named(a, "kv_cache.global"), 16'777'216u);
  EXPECT_EQ(bytes_named(a, "kv_cache.window"), 12'582'912u);
  EXPECT_EQ(find_named(a, "kv_cache.global")->layer, 2);
  EXPECT_EQ(find_named(a, "kv_cache.window")->layer, 0);

  Evaluation last = evaluate_paper(infer_scenario(
      model, 1, 2048, kDecodeStep, "[[strategy]]\nuse = \"pipeline-parallel\"\nsize = 2\nstage = \"last\"\n"));
  const auto& b = last.estimator().plan().items;
  EXPECT_EQ(bytes_named(b, "kv_cache.global"), 25'165'824u);
  EXPECT_EQ(bytes_named(b, "kv_cache.window"), 10'485'760u);
  EXPECT_EQ(find_named(b, "kv_cache.global")->layer, 8);
  EXPECT_EQ(find_named(b, "kv_cache.global")->count, 3u);
  EXPECT_EQ(find_named(b, "kv_cache.window")->layer, 9);
  EXPECT_EQ(find_named(b, "kv_cache.window")->count, 5u);
}

TEST(SlidingWindow, LayerClassification) {
  using memplan::plugins::inference::classify_layers;
  // Gemma 3's pattern (5 local, then 1 global): layers 5, 11, 17, ... of 0-17.
  auto mix = classify_layers(0, 18, 1024, 6);
  EXPECT_EQ(mix.global_count, 3);
  EXPECT_EQ(mix.global_first, 5);
  EXPECT_EQ(mix.window_count, 15);
  EXPECT_EQ(mix.window_first, 0);
  // A stage starting on a global layer: layers 5-9 with every 6th global.
  mix = classify_layers(5, 5, 1024, 6);
  EXPECT_EQ(mix.global_first, 5);
  EXPECT_EQ(mix.global_count, 1);
  EXPECT_EQ(mix.window_first, 6);
  EXPECT_EQ(mix.window_count, 4);
  // Every layer global (N = 1), no window, or no global layer.
  EXPECT_EQ(classify_layers(0, 4, 1024, 1).window_count, 0);
  EXPECT_EQ(classify_layers(0, 4, 0, 6).global_count, 4);
  EXPECT_EQ(classify_layers(0, 4, 1024, 0).window_count, 4);
}

// Tensor parallelism: vLLM keeps max(1, kv_heads / t) kv heads per rank
// (ModelConfig.get_num_kv_heads), replicating a head when t exceeds them.
// Llama-2-70B (preset): 80 layers, 8 kv heads of 128; bf16, 4096 tokens.
//   t = 1:  8 heads: 2 x 80 x 8 x 128 x 2 = 327,680 B/token -> 1,342,177,280 B
//   t = 4:  2 heads:                        81,920 B/token ->   335,544,320 B
//   t = 8:  1 head:                         40,960 B/token ->   167,772,160 B
//   t = 16: 1 head (a replica; 16 ranks share 8 heads): 40,960 B/token -> 167,772,160 B
TEST(TensorParallel, KvHeadsPerRankWithReplication) {
  auto kv_at = [](int t) {
    return kv_cache_bytes(evaluate_paper(infer_scenario(
        preset("llama-2-70b"), 1, 4096, "", "[[strategy]]\nuse = \"tensor-parallel\"\nsize = " + std::to_string(t) + "\n")));
  };
  EXPECT_EQ(kv_at(1), 1'342'177'280u);
  EXPECT_EQ(kv_at(4), 335'544'320u);
  EXPECT_EQ(kv_at(8), 167'772'160u);
  EXPECT_EQ(kv_at(16), 167'772'160u);
  EXPECT_EQ(memplan::support::kv_heads_per_rank(8, 16), 1);
  EXPECT_EQ(memplan::support::kv_heads_per_rank(8, 4), 2);
}

// The KV dtype: fp8 (vLLM's kv_cache_dtype = "fp8") and int8 store 1 byte per
// element, half of bf16. Llama-3.1-8B at 16k: 2 GiB in bf16, 1 GiB in fp8.
TEST(KvDtype, Fp8HalvesBf16) {
  const uint64_t bf16 = kv_cache_bytes(evaluate_paper(infer_scenario(kLlama31_8B, 1, 16384)));
  const uint64_t fp8 = kv_cache_bytes(evaluate_paper(infer_scenario(kLlama31_8B, 1, 16384, "kv_dtype = \"fp8\"\n")));
  const uint64_t int8 = kv_cache_bytes(evaluate_paper(infer_scenario(kLlama31_8B, 1, 16384, "kv_dtype = \"int8\"\n")));
  EXPECT_EQ(bf16, 2 * kGiBu);
  EXPECT_EQ(fp8, 1 * kGiBu);
  EXPECT_EQ(int8, fp8);
  EXPECT_EQ(2 * fp8, bf16);
}

TEST(KvDtype, DefaultsToTheActivationDtype) {
  // [precision] activations = "fp32": 4 bytes per element, 4 GiB at 16k.
  const std::string text = "name = \"t\"\nmode = \"infer\"\n[model]\n" + std::string(kLlama31_8B) +
                           "[batch]\nseq_len = 16384\n[precision]\nuse = \"bf16\"\nactivations = \"fp32\"\n"
                           "[activations]\nuse = \"inference\"\n";
  EXPECT_EQ(kv_cache_bytes(evaluate_paper(text)), 4 * kGiBu);
}

// Errors, with their exact located messages.
std::string library() { return " (plugin library " + plugin_dir() + "/memplan-inference.so)"; }

TEST(InferenceErrors, TrainModeNamesTheFix) {
  EXPECT_EQ(error_of("name = \"t\"\nmode = \"train\"\n[model]\npreset = \"llama-2-7b\"\n[batch]\nseq_len = 1024\n"
                     "[precision]\nuse = \"bf16\"\n[optimizer]\nuse = \"adamw\"\n[activations]\nuse = \"inference\"\n",
                     "s.toml"),
            "s.toml:12:7: error: in [activations], activations plugin 'inference': models inference (a KV cache and "
            "forward-only activations) but the scenario has mode = \"train\"; set mode = \"infer\", or use "
            "[activations] use = \"megatron\" to model training" + library());
}

TEST(InferenceErrors, BadOptionValues) {
  // Line 12 is the [activations] option.
  EXPECT_EQ(error_of(infer_scenario(preset("llama-2-7b"), 1, 1024, "kv_dtype = \"fp4\"\n"), "s.toml"),
            "s.toml:12:12: error: in [activations], activations plugin 'inference', option 'kv_dtype': is \"fp4\", "
            "not a KV cache dtype; use fp32, fp16, bf16, fp8 or int8" + library());
  EXPECT_EQ(error_of(infer_scenario(preset("llama-2-7b"), 1, 1024, "block_size = 0\n"), "s.toml"),
            "s.toml:12:14: error: in [activations], activations plugin 'inference', option 'block_size': must be a "
            "positive integer, got 0" + library());
  EXPECT_EQ(error_of(infer_scenario(preset("llama-2-7b"), 1, 1024, "logits = \"first\"\n"), "s.toml"),
            "s.toml:12:10: error: in [activations], activations plugin 'inference', option 'logits': must be \"last\" "
            "or \"all\", not \"first\"" + library());
  EXPECT_EQ(error_of(infer_scenario(preset("llama-2-7b"), 1, 1024, "sliding_window = -1\n"), "s.toml"),
            "s.toml:12:18: error: in [activations], activations plugin 'inference', option 'sliding_window': must be "
            "0 (no window) or a positive number of tokens, got -1" + library());
  EXPECT_EQ(error_of(infer_scenario(preset("llama-2-7b"), 1, 1024, "prefill_chunk = 0\n"), "s.toml"),
            "s.toml:12:17: error: in [activations], activations plugin 'inference', option 'prefill_chunk': must be "
            "a positive integer, got 0" + library());
}

TEST(InferenceErrors, NeedsSeqLenAndArchitecture) {
  EXPECT_EQ(error_of("name = \"t\"\nmode = \"infer\"\n[model]\npreset = \"llama-2-7b\"\n[precision]\nuse = \"bf16\"\n"
                     "[activations]\nuse = \"inference\"\n",
                     "s.toml"),
            "s.toml:8:7: error: in [activations], activations plugin 'inference': needs the context length: set "
            "[batch] seq_len (tokens cached per sequence)" + library());
  EXPECT_EQ(error_of("name = \"t\"\nmode = \"infer\"\n[model]\nparams = 7e9\n[batch]\nseq_len = 1024\n[precision]\n"
                     "use = \"bf16\"\n[activations]\nuse = \"inference\"\n",
                     "s.toml"),
            "s.toml:10:7: error: in [activations], activations plugin 'inference': needs the model's architecture "
            "(layers, heads, kv_heads, head_dim) but the scenario gives only params; use a preset or an inline "
            "architecture in [model]" + library());
}

}  // namespace
}  // namespace memplan::testing
