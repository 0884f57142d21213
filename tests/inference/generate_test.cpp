// A generate-style run (the inference plugin's new_tokens and
// previous_cache_held, 1.9.0) and eager attention's softmax (eager_softmax).
//
// new_tokens = n: the prompt is p = seq_len - n tokens. The prefill's
// transients run over the prompt's cache (p tokens); decode step k (1 <= k < n)
// feeds generated token k and leaves p + k tokens cached, so the last step
// holds seq_len - 1 (the n-th token is never fed back). transformers' generate
// before PR #30536 (squash commit bd5091df, "Reduce by 2 the memory requirement
// in generate()") keeps the previous step's past_key_values in model_kwargs
// while each layer builds its new cache with torch.cat (LlamaAttention:
// `key_states = torch.cat([past_key_value[0], key_states], dim=2)`; from 4.36
// DynamicCache.update after from_legacy_cache), so the last step also holds
// the cache of seq_len - 2 tokens (item kv_cache.previous). The two moments do
// not overlap: the items are those of the larger.
//
// eager_softmax (pytorch aten/src/ATen/native/SoftMax.cpp, softmax(input_,
// dim_, dtype)): "fp32", a bf16 input converted to fp32 before _softmax, p + 4 +
// 4 = 10 bytes a score at p = 2 (AutoAWQ 0.1.6's softmax(scores.float()) the
// same); "half-to-float", an fp16 CUDA input (_softmax(input, dim, true), no
// copy): the input, the fp32 output and the .to(fp16) cast, 2 + 4 + 2 = 8.
#include <gtest/gtest.h>

#include <string>

#include "../../plugins/activations/inference/inference_memory.hpp"
#include "inference_scenarios.hpp"
#include "test_support.hpp"

namespace memplan::testing {
namespace {

namespace inf = memplan::plugins::inference;

// Llama-2-13B (40 layers, h 5120, 40 heads of 128, no GQA, ffn 13824, vocab
// 32000) in fp16: 16 sequences, a 512-token prompt prefilled in one pass of
// 8192 tokens, eager attention over fp16 scores, logits of every position
// (transformers 4.32's LlamaForCausalLM): optimum's benchmark_gptq.py rows.
std::string llama2_13b_generate(const std::string& options, int64_t seq_len = 1024) {
  return "name = \"g\"\nmode = \"infer\"\n[model]\npreset = \"llama-2-13b\"\n[batch]\nmicro_batch = 16\nseq_len = " +
         std::to_string(seq_len) +
         "\n[precision]\nuse = \"mixed-fp16\"\n[activations]\nuse = \"inference\"\nblock_size = 1\n"
         "prefill_chunk = 8192\nlogits = \"all\"\nflash_attention = false\n" + options;
}

uint64_t kv(const Evaluation& e) { return kv_cache_bytes(e); }
uint64_t layer(const Evaluation& e) { return e.item_bytes("activations.layer", MEMPLAN_ROLE_ACTIVATIONS); }
uint64_t logits(const Evaluation& e) { return e.item_bytes("activations.logits", MEMPLAN_ROLE_ACTIVATIONS); }

TEST(EagerSoftmax, BytesPerScore) {
  EXPECT_EQ(inf::eager_score_bytes(inf::EagerSoftmax::dtype, 2), 2);           // the former figure
  EXPECT_EQ(inf::eager_score_bytes(inf::EagerSoftmax::fp32, 2), 10);           // 2 input + 4 copy + 4 output
  EXPECT_EQ(inf::eager_score_bytes(inf::EagerSoftmax::half_to_float, 2), 8);   // 2 input + 4 output + 2 cast
  EXPECT_EQ(inf::eager_score_bytes(inf::EagerSoftmax::fp32, 4), 8);            // fp32 input: no copy, no cast
  EXPECT_EQ(inf::eager_score_bytes(inf::EagerSoftmax::half_to_float, 4), 8);
}

// The prefill of the 16 x 512 prompt (new_tokens 1: no decode step), c = 8192
// tokens over 512 keys, 40 heads:
//   residual   2 x 2 x 8192 x 5120                          =   167,772,160
//   attention  2 x 8192 x (5120 + 2 x 5120)                 =   251,658,240
//              + e x 40 x 8192 x 512 (e bytes a score):  e = 2:  335,544,320
//                                                         e = 8: 1,342,177,280
//                                                         e = 10: 1,677,721,600
//   MLP        2 x 8192 x 3 x 13824                         =   679,477,248
//   the layer: residual + the larger branch; at e = 2 the attention branch
//   (587,202,560) is below the MLP, at e = 8 and 10 above it.
TEST(EagerSoftmax, LayerTransientOfThePrefill) {
  const auto prefill = [](const std::string& rule) {
    return layer(evaluate_paper(llama2_13b_generate("new_tokens = 1\n" + rule, 513)));
  };
  EXPECT_EQ(prefill(""), 167'772'160u + 679'477'248u);
  EXPECT_EQ(prefill("eager_softmax = \"dtype\"\n"), 167'772'160u + 679'477'248u);
  EXPECT_EQ(prefill("eager_softmax = \"half-to-float\"\n"), 167'772'160u + 251'658'240u + 1'342'177'280u);
  EXPECT_EQ(prefill("eager_softmax = \"fp32\"\n"), 167'772'160u + 251'658'240u + 1'677'721'600u);
  // With flash attention no score matrix: the option changes nothing (the MLP branch wins: 679,477,248).
  std::string flash = llama2_13b_generate("new_tokens = 1\neager_softmax = \"fp32\"\n", 513);
  flash.replace(flash.find("flash_attention = false"), 23, "flash_attention = true");
  EXPECT_EQ(layer(evaluate_paper(flash)), 167'772'160u + 679'477'248u);
}

// The KV cache: 2 x 40 heads x 128 x 2 B = 20,480 B a token and layer, x 40
// layers = 819,200 B a token, x 16 sequences = 13,107,200 B a token position.
//   prefill moment: cache 512 positions 6,710,886,400 + layer (e = 8) 1,761,607,680
//                   + logits 4 x 8192 x 32000 = 1,048,576,000          =  9,521,070,080
//   last decode step (c = 16 tokens over 1023 keys):
//     cache 1023 positions                                   13,408,665,600
//     previous cache 1022 positions (previous_cache_held)    13,395,558,400
//     layer: 2 x 2 x 16 x 5120 = 327,680 + 2 x 16 x 15360 = 491,520 + 8 x 40 x 16 x 1023 = 5,237,760
//                                                            =  6,056,960 (MLP 1,327,104 below)
//     logits 4 x 16 x 32000                                  =      2,048,000
TEST(Generate, LastDecodeStepHoldsTwoCaches) {
  const Evaluation e = evaluate_paper(
      llama2_13b_generate("eager_softmax = \"half-to-float\"\nnew_tokens = 512\nprevious_cache_held = true\n"));
  EXPECT_EQ(e.item_bytes("layers.0-39.kv_cache", MEMPLAN_ROLE_KV_CACHE), 13'408'665'600u);
  EXPECT_EQ(e.item_bytes("kv_cache.previous", MEMPLAN_ROLE_KV_CACHE), 13'395'558'400u);
  EXPECT_EQ(kv(e), 13'408'665'600u + 13'395'558'400u);
  EXPECT_EQ(layer(e), 6'056'960u);
  EXPECT_EQ(logits(e), 2'048'000u);
}

// Without the previous copy (transformers 4.42 on, or a static cache) the last
// step is 13,408,665,600 + 6,056,960 + 2,048,000 = 13,416,770,560, still above
// the prefill moment's 9,521,070,080.
TEST(Generate, WithoutThePreviousCopy) {
  const Evaluation e = evaluate_paper(llama2_13b_generate("eager_softmax = \"half-to-float\"\nnew_tokens = 512\n"));
  EXPECT_EQ(kv(e), 13'408'665'600u);
  EXPECT_EQ(e.item_bytes("kv_cache.previous", MEMPLAN_ROLE_KV_CACHE), 0u);
  EXPECT_EQ(layer(e), 6'056'960u);
}

// A long prompt and few new tokens: 2 sequences, 1000-token prompts in one
// pass (prefill_chunk 2000), 24 new tokens (seq_len 1024).
//   prefill: cache 2 x 1000 x 819,200                                   =  1,638,400,000
//            layer 2 x 2 x 2000 x 5120 = 40,960,000 + 2 x 2000 x 15360 = 61,440,000
//                  + 8 x 40 x 2000 x 1000 = 640,000,000                 =    742,400,000
//            logits 4 x 2000 x 32000                                    =    256,000,000
//            total                                                         2,636,800,000
//   last step: cache 2 x 1023 x 819,200 = 1,676,083,200, layer 4 x 2 x 5120 = 40,960
//            + 2 x 2 x 15360 = 61,440 + 8 x 40 x 2 x 1023 = 654,720 (757,120), logits 256,000:
//            1,677,096,320 < the prefill; with the previous copy (2 x 1022 x 819,200 =
//            1,674,444,800) 3,351,541,120, the larger.
TEST(Generate, PrefillIsThePeakWhenItHoldsMore) {
  std::string s = llama2_13b_generate("eager_softmax = \"half-to-float\"\nnew_tokens = 24\n");
  s.replace(s.find("micro_batch = 16"), 16, "micro_batch = 2");
  s.replace(s.find("prefill_chunk = 8192"), 20, "prefill_chunk = 2000");
  const Evaluation e = evaluate_paper(s);
  EXPECT_EQ(kv(e), 1'638'400'000u);  // the prompt's 1000 positions
  EXPECT_EQ(layer(e), 742'400'000u);
  EXPECT_EQ(logits(e), 256'000'000u);
  // With the previous copy the last step (3,351,541,120) is the larger.
  std::string held = s;
  held += "previous_cache_held = true\n";
  const Evaluation d = evaluate_paper(held);
  EXPECT_EQ(kv(d), 1'676'083'200u + 1'674'444'800u);
  EXPECT_EQ(layer(d), 757'120u);
}

// new_tokens = 0 (the default) keeps the former reading: the cache of seq_len
// beside the larger pass's transients.
TEST(Generate, DefaultKeepsSeqLenAsTheCache) {
  const Evaluation e = evaluate_paper(llama2_13b_generate(""));
  EXPECT_EQ(kv(e), 1024ull * 13'107'200u);
  // prefill 8192 tokens over 1024 keys, e = 2: 167,772,160 + 251,658,240 + 2 x 40 x 8192 x 1024 = 671,088,640
  EXPECT_EQ(layer(e), 167'772'160u + 251'658'240u + 671'088'640u);
}

// The hf-transformers profile by version: up to 4.35 eager attention
// (flash_attention = false, eager_softmax = "fp32"), SDPA from 4.36; the
// previous cache held up to 4.41, not from 4.42 (PR #30536). The scenario
// leaves flash_attention and eager_softmax to the profile.
std::string hf_generate(const std::string& version, const std::string& options = "") {
  std::string s = llama2_13b_generate("new_tokens = 512\n" + options);
  s.replace(s.find("flash_attention = false\n"), 24, "");
  s.insert(s.find("[model]"), "[framework]\nuse = \"hf-transformers\"\nversion = \"" + version + "\"\n");
  return s;
}

TEST(Generate, TheHfTransformersProfileByVersion) {
  // 4.32: the last step holds 1022 positions more (above); the 16-token step's eager layer at e = 10:
  // 327,680 + 491,520 + 10 x 40 x 16 x 1023 = 6,547,200 -> 7,366,400.
  const Evaluation v432 = evaluate(hf_generate("4.32"));
  EXPECT_EQ(v432.item_bytes("kv_cache.previous", MEMPLAN_ROLE_KV_CACHE), 13'395'558'400u);
  EXPECT_EQ(layer(v432), 7'366'400u);
  // 4.36: SDPA (no scores; the MLP branch 1,327,104 over the attention's 491,520): 327,680 + 1,327,104.
  const Evaluation v436 = evaluate(hf_generate("4.36"));
  EXPECT_EQ(v436.item_bytes("kv_cache.previous", MEMPLAN_ROLE_KV_CACHE), 13'395'558'400u);
  EXPECT_EQ(layer(v436), 1'654'784u);
  // 4.42: one cache.
  const Evaluation v442 = evaluate(hf_generate("4.42"));
  EXPECT_EQ(v442.item_bytes("kv_cache.previous", MEMPLAN_ROLE_KV_CACHE), 0u);
  EXPECT_EQ(v442.item_bytes("layers.0-39.kv_cache", MEMPLAN_ROLE_KV_CACHE), 13'408'665'600u);
}

// `run` searches the longest seq_len too, evaluating lengths at or below new_tokens: there the generated
// tokens are what fits after a one-token prompt (before inference 1.10.1 the prompt went negative and the run
// failed: "gave plan item 'kv_cache' an element count that is negative or not finite"). A scenario of 512
// generated tokens after a 512-token prompt still reads them so.
TEST(Generate, TheLongestSeqLenSearchPassesLengthsBelowNewTokens) {
  TempDir dir;
  // Qwen3-8B, a 30,720-token prompt prefilled in one pass and 2,048 generated (the Qwen3 speed benchmark's
  // longest row): the search reaches lengths below the prefill chunk and new_tokens.
  const std::string file = dir.write(
      "g.toml", "name = \"g\"\nmode = \"infer\"\n[model]\npreset = \"qwen3-8b\"\n[batch]\nmicro_batch = 1\n"
                "seq_len = 32768\n[precision]\nuse = \"bf16\"\n[activations]\nuse = \"inference\"\nblock_size = 1\n"
                "prefill_chunk = 30720\nnew_tokens = 2048\nlogits = \"last\"\nflash_attention = true\n"
                "[hardware]\ngpu = \"h20-96gb\"\ncount = 1\n");
  const CommandResult result = run_cli("run " + file);
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("max seq_len (tokens)"), std::string::npos) << result.out;
  Evaluation short_run = evaluate_paper(llama2_13b_generate("new_tokens = 512\n", 1024));
  EXPECT_GT(kv(short_run), 0u);
}

// A projection's dequantization (the quantized plugin's dequantize_copies, weights.dequantized_transient;
// inference 1.11.0) stands beside what is alive while that projection runs, not beside the MLP's product
// moment. Qwen2.5-7B (h 3584, f 18944, gated) prefilling c = 6144 tokens in fp16, flash attention, t 1:
//   f-sized tensor p c f = 2 x 6144 x 18944 = 232,783,872; p c h = 44,040,192; residual 2 p c h = 88,080,384
//   attention: Q, K, V outputs p c (3584 + 2 x 512) = 56,623,104
//   AutoGPTQ's 8-bit torch-ops dequantization of down (6 B a weight, D = 6 x 3584 x 18944 = 407,371,776):
//     product moment 3 p c f = 698,351,616; up's 2 p c f + D = 872,939,520; down's p c f + D + p c h =
//     684,195,840: the high point is up's, and the item is it less D: 88,080,384 + 872,939,520 - 407,371,776
//     = 553,648,128 (with D beside it, 961,019,904 in all, where the product moment plus D gave 1,193,803,776).
TEST(Generate, DequantizationAtItsProjectionsMoment) {
  inf::ForwardShape x;
  x.hidden = 3584;
  x.heads = 28;
  x.head_dim = 128;
  x.kv_heads_rank = 4;
  x.ffn = 18944;
  x.gated = true;
  x.bytes = 2;
  const double c = 6144;
  EXPECT_DOUBLE_EQ(inf::layer_transient(x, c, c), 88'080'384.0 + 698'351'616.0);
  x.dequantized = 407'371'776;
  EXPECT_DOUBLE_EQ(inf::layer_transient(x, c, c), 553'648'128.0);
  // Without a gate (up, its activation, down): max(2 p c f, p c f + D + p c h) - D.
  x.gated = false;
  EXPECT_DOUBLE_EQ(inf::layer_transient(x, c, c), 88'080'384.0 + 232'783'872.0 + 44'040'192.0);
}

TEST(Generate, BadOptionValuesNameTheOption) {
  const std::string softmax = error_of(llama2_13b_generate("eager_softmax = \"fp16\"\n"), "s.toml");
  EXPECT_NE(softmax.find("option 'eager_softmax': must be \"dtype\""), std::string::npos) << softmax;
  EXPECT_NE(softmax.find("not \"fp16\""), std::string::npos) << softmax;
  const std::string all = error_of(llama2_13b_generate("new_tokens = 1024\n"), "s.toml");
  EXPECT_NE(all.find("option 'new_tokens': must be 0"), std::string::npos) << all;
  EXPECT_NE(all.find("got 1024"), std::string::npos) << all;
  const std::string negative = error_of(llama2_13b_generate("new_tokens = -1\n"), "s.toml");
  EXPECT_NE(negative.find("option 'new_tokens'"), std::string::npos) << negative;
  const std::string held = error_of(llama2_13b_generate("previous_cache_held = \"yes\"\n"), "s.toml");
  EXPECT_NE(held.find("previous_cache_held"), std::string::npos) << held;
}

}  // namespace
}  // namespace memplan::testing

namespace memplan::testing {
namespace {

// torchtune's KVCache held K and V at the query heads before 0.5 (modules/kv_cache.py @ v0.4.0: cache_shape =
// (batch_size, num_heads, max_seq_len, head_dim); num_kv_heads from PR #1961, first in v0.5.0): the torchtune
// profile's cache_heads = "query" before 0.5 (inference 1.9.0). Llama-3.1-8B (32 layers, 32 query heads, 8 kv heads
// of 128), one sequence of 4,096 tokens, bf16: at the query heads 32 x 2 x 32 x 128 x 4,096 x 2 B = 2,147,483,648 B;
// at the kv heads a quarter, 536,870,912 B.
std::string torchtune_generate(const std::string& version) {
  return "name = \"g\"\nmode = \"infer\"\n[framework]\nuse = \"torchtune\"\n" + version +
         "[model]\npreset = \"llama-3.1-8b\"\n[batch]\nmicro_batch = 1\nseq_len = 4096\n[precision]\nuse = \"bf16\"\n"
         "[activations]\nuse = \"inference\"\nblock_size = 1\n";
}

TEST(Generate, TorchtuneCachedTheQueryHeadsBefore05) {
  EXPECT_EQ(evaluate(torchtune_generate("version = \"0.4\"\n")).item_bytes("layers.0-31.kv_cache", MEMPLAN_ROLE_KV_CACHE),
            2'147'483'648u);
  EXPECT_EQ(evaluate(torchtune_generate("version = \"0.5\"\n")).item_bytes("layers.0-31.kv_cache", MEMPLAN_ROLE_KV_CACHE),
            536'870'912u);
  EXPECT_NE(error_of(torchtune_generate("") + "cache_heads = \"all\"\n").find("must be \"kv\""), std::string::npos);
}

}  // namespace
}  // namespace memplan::testing
