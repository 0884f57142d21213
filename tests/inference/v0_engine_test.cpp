// vLLM's V0 engine (the vllm profile before 0.8): the prefill pass its start-up
// profile run sizes to the context length (the inference plugin's prefill_rule
// = "context") and the layer input its eager layer loop keeps
// (held_hidden_states = 1). Sources, read at v0.6.4 (vllm-project/vllm
// 02dbf30e9a; plugins/frameworks/vllm/README.md, "The V0 engine"):
//   vllm/config.py lines 1103-1118, SchedulerConfig: without chunked prefill
//     max_num_batched_tokens = max(max_model_len, 2048); with it 512;
//   vllm/engine/arg_utils.py lines 996-1020: chunked prefill on by default
//     when max_model_len > 32768;
//   PR #10544 (02a43f82a, 2024-11-22; v0.6.5): the chunked default 512 -> 2048;
//   vllm/model_executor/models/llama.py lines 338-342: `hidden_states,
//     residual = layer(...)`, the caller's hidden_states holding the layer's
//     input while the layer runs.
// Llama 3.1 8B in bf16: the layer transient over c tokens is its gated MLP,
// 2 x c x (2 x 4096 + 3 x 14336) = 102,400 c bytes (forward_transient_test.cpp).
#include <gtest/gtest.h>

#include <string>

#include "inference_scenarios.hpp"

namespace memplan::testing {
namespace {

std::string llama8b(const std::string& version, int64_t seq_len, const std::string& options = "") {
  return "name = \"v0\"\nmode = \"infer\"\n[framework]\nuse = \"vllm\"\nversion = \"" + version +
         "\"\n[model]\npreset = \"llama-3.1-8b\"\n[batch]\nmicro_batch = 1\nseq_len = " + std::to_string(seq_len) +
         "\n[precision]\nuse = \"bf16\"\n[activations]\nuse = \"inference\"\n" + options +
         "[hardware]\ngpu = \"rtx-3090-24gb\"\n";
}

uint64_t layer(const Evaluation& e) { return e.item_bytes("activations.layer", MEMPLAN_ROLE_ACTIVATIONS); }
uint64_t held(const Evaluation& e) { return e.item_bytes("activations.model_held", MEMPLAN_ROLE_ACTIVATIONS); }

// A short context: one pass of max(max_model_len, 2048) tokens (config.py @ 02dbf30e9a line 1118).
TEST(VllmV0, PrefillSizedToAShortContext) {
  // seq_len 1,024: max(1024, 2048) = 2,048 tokens, 102,400 x 2,048 = 209,715,200 B.
  EXPECT_EQ(layer(evaluate(llama8b("0.6", 1024))), 209'715'200u);
  // seq_len 20,000 (the RTX 3090 run of issue #10517 at --max-model-len 20000): 20,000 tokens,
  // 102,400 x 20,000 = 2,048,000,000 B.
  EXPECT_EQ(layer(evaluate(llama8b("0.6", 20'000))), 2'048'000'000u);
  // 32,768 is not above 32K (arg_utils.py line 996: max_model_len > 32768): one pass of 32,768,
  // 102,400 x 32,768 = 3,355,443,200 B.
  EXPECT_EQ(layer(evaluate(llama8b("0.7", 32'768))), 3'355'443'200u);
}

// A long context (> 32K): chunked prefill switched on, 512 tokens a pass at 0.6.4
// (config.py @ 02dbf30e9a line 1114), 2048 from 0.6.5 (PR #10544).
TEST(VllmV0, ChunksALongContext) {
  // 0.6 (0.6.4): 102,400 x 512 = 52,428,800 B.
  EXPECT_EQ(layer(evaluate(llama8b("0.6", 35'000))), 52'428'800u);
  // 0.7: 102,400 x 2,048 = 209,715,200 B.
  EXPECT_EQ(layer(evaluate(llama8b("0.7", 35'000))), 209'715'200u);
  // V1 (0.8 on) chunks every context at the profile's 2048 (the RTX 3090 is under 70 GiB).
  EXPECT_EQ(layer(evaluate(llama8b("0.8", 1024))), 209'715'200u);
  EXPECT_EQ(layer(evaluate(llama8b("0.11", 20'000))), 209'715'200u);
}

// The scenario's own prefill_chunk (vLLM's --max-num-batched-tokens) wins over the rule:
// 102,400 x 8,192 = 838,860,800 B at any context length.
TEST(VllmV0, ScenarioChunkWins) {
  EXPECT_EQ(layer(evaluate(llama8b("0.6", 1024, "prefill_chunk = 8192\n"))), 838'860'800u);
  EXPECT_EQ(layer(evaluate(llama8b("0.6", 65'536, "prefill_chunk = 8192\n"))), 838'860'800u);
  // A scenario can state the rule under another profile: paper's whole prompts become max(1024, 4096).
  EXPECT_EQ(layer(evaluate_paper(infer_scenario(preset("llama-3.1-8b"), 1, 1024,
                                                "prefill_rule = \"context\"\nprefill_min = 4096\n"))),
            102'400ull * 4096);
}

// V0's eager layer loop keeps the running layer's input: one tokens x h tensor beside the layer
// (llama.py @ 02dbf30e9a lines 338-342). At --max-model-len 20000 (one pass of 20,000 tokens):
// 20,000 x 4,096 x 2 B = 163,840,000 B. V1 (0.8 on) compiles the model, whose FX code drops each
// value after its last use: none.
TEST(VllmV0, HoldsTheRunningLayersInput) {
  EXPECT_EQ(held(evaluate(llama8b("0.6", 20'000))), 163'840'000u);
  EXPECT_EQ(held(evaluate(llama8b("0.8", 20'000))), 0u);
  EXPECT_EQ(held(evaluate(llama8b("0.17", 20'000))), 0u);
  // Under V1 with --enforce-eager a scenario says so: 2,048 x 4,096 x 2 B = 16,777,216 B.
  EXPECT_EQ(held(evaluate(llama8b("0.17", 20'000, "held_hidden_states = 1\n"))), 16'777'216u);
}

TEST(VllmV0, Errors) {
  const auto scenario = [](const std::string& options) {
    return paper(infer_scenario(preset("llama-3.1-8b"), 1, 40'000, options));
  };
  EXPECT_NE(error_of(scenario("prefill_rule = \"auto\"\n"))
                .find("option 'prefill_rule': must be \"whole\" (micro_batch x seq_len tokens a pass) or "
                      "\"context\""),
            std::string::npos);
  EXPECT_NE(error_of(scenario("prefill_min = 0\n")).find("option 'prefill_min': must be a positive integer, got 0"),
            std::string::npos);
  EXPECT_NE(error_of(scenario("prefill_long_above = -1\n"))
                .find("option 'prefill_long_above': must be 0 (never chunk) or a context length in tokens, got -1"),
            std::string::npos);
  EXPECT_NE(error_of(scenario("prefill_long_chunk = 0\n"))
                .find("option 'prefill_long_chunk': must be a positive integer, got 0"),
            std::string::npos);
  EXPECT_NE(error_of(scenario("prefill_rule = \"context\"\nprefill_long_above = 32768\n"))
                .find("option 'prefill_long_above': is 32768 but prefill_long_chunk is not set"),
            std::string::npos);
  // With the chunk given: 40,000 > 32,768, so 512 tokens a pass, 102,400 x 512 B.
  EXPECT_EQ(layer(evaluate(scenario("prefill_rule = \"context\"\nprefill_long_above = 32768\n"
                                    "prefill_long_chunk = 512\n"))),
            52'428'800u);
}

}  // namespace
}  // namespace memplan::testing
