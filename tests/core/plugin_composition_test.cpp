// How the built-in plugins compose on the plan: layouts split the right
// parameter groups, sharding divides the right roles, and parameter counts are
// the model's. Expected figures are hand derivations written next to them.
#include <gtest/gtest.h>

#include <string>

#include "test_support.hpp"

namespace memplan::testing {
namespace {

std::string llama70b(const std::string& strategies, const std::string& precision = "use = \"mixed-bf16\"") {
  return "name = \"t\"\nmode = \"train\"\n[model]\npreset = \"llama-2-70b\"\n[batch]\nseq_len = 4096\n"
         "[precision]\n" + precision + "\n[optimizer]\nuse = \"adamw\"\n[activations]\nuse = \"none\"\n" + strategies;
}

// Llama-2-70B attention per layer: q and o are 8192 x 8192 = 67,108,864 each,
// k and v are 8192 x 1024 = 8,388,608 each (8 kv heads of 128).
TEST(TensorParallel, SplitsKvHeadsWhenTheyDivide) {
  Evaluation e = evaluate(llama70b("[[strategy]]\nuse = \"tensor-parallel\"\nsize = 8\n"));
  // bf16 weights, 80 layers: q -> 67,108,864 / 8 * 2 bytes * 80.
  EXPECT_EQ(e.item_bytes("layers.0-79.attn.q", MEMPLAN_ROLE_WEIGHTS), 67'108'864ull / 8 * 2 * 80);
  EXPECT_EQ(e.item_bytes("layers.0-79.attn.k", MEMPLAN_ROLE_WEIGHTS), 8'388'608ull / 8 * 2 * 80);
  // Norms are replicated: two RMSNorms of 8192 per layer.
  EXPECT_EQ(e.item_bytes("layers.0-79.norms", MEMPLAN_ROLE_WEIGHTS), 2ull * 8192 * 2 * 80);
  // The vocabulary-parallel embedding: 32000 x 8192 / 8.
  EXPECT_EQ(e.item_bytes("embed_tokens", MEMPLAN_ROLE_WEIGHTS), 32000ull * 8192 / 8 * 2);
  EXPECT_EQ(e.breakdown().world_size, 8);
}

TEST(TensorParallel, ReplicatesKvHeadsWhenRanksOutnumberThem) {
  // t = 16 > 8 kv heads: each rank keeps one whole kv head, 1/8 of k and v.
  Evaluation e = evaluate(llama70b("[[strategy]]\nuse = \"tensor-parallel\"\nsize = 16\n"));
  EXPECT_EQ(e.item_bytes("layers.0-79.attn.k", MEMPLAN_ROLE_WEIGHTS), 8'388'608ull / 8 * 2 * 80);
  EXPECT_EQ(e.item_bytes("layers.0-79.attn.q", MEMPLAN_ROLE_WEIGHTS), 67'108'864ull / 16 * 2 * 80);
}

TEST(TensorParallel, RejectsASizeThatDoesNotDivideTheHeads) {
  EXPECT_EQ(error_of(llama70b("[[strategy]]\nuse = \"tensor-parallel\"\nsize = 3\n"), "s.toml"),
            "s.toml:15:8: error: in [[strategy]] #1, strategy plugin 'tensor-parallel', option 'size': 3 does not "
            "divide the 64 attention heads; choose a divisor of the head count (plugin library " + plugin_dir() +
                "/memplan-tensor-parallel.so)");
}

TEST(PipelineParallel, FirstStageHoldsTheEmbeddingLastTheHead) {
  // 80 layers over 4 stages: 20 layers each.
  Evaluation first = evaluate(llama70b("[[strategy]]\nuse = \"pipeline-parallel\"\nsize = 4\n"));
  EXPECT_EQ(first.item_bytes("layers.0-19.attn.q", MEMPLAN_ROLE_WEIGHTS), 67'108'864ull * 2 * 20);
  EXPECT_EQ(first.item_bytes("embed_tokens", MEMPLAN_ROLE_WEIGHTS), 32000ull * 8192 * 2);
  EXPECT_EQ(first.item_bytes("lm_head", MEMPLAN_ROLE_WEIGHTS), 0u);
  Evaluation last = evaluate(llama70b("[[strategy]]\nuse = \"pipeline-parallel\"\nsize = 4\nstage = \"last\"\n"));
  EXPECT_EQ(last.item_bytes("layers.60-79.attn.q", MEMPLAN_ROLE_WEIGHTS), 67'108'864ull * 2 * 20);
  EXPECT_EQ(last.item_bytes("embed_tokens", MEMPLAN_ROLE_WEIGHTS), 0u);
  EXPECT_EQ(last.item_bytes("lm_head", MEMPLAN_ROLE_WEIGHTS), 32000ull * 8192 * 2);
  EXPECT_EQ(last.item_bytes("final_norm", MEMPLAN_ROLE_WEIGHTS), 8192ull * 2);
}

TEST(Parameters, CountsAreTheModelsNotTheRanks) {
  Evaluation e = evaluate(llama70b("[[strategy]]\nuse = \"tensor-parallel\"\nsize = 8\n"
                                   "[[strategy]]\nuse = \"pipeline-parallel\"\nsize = 4\n"));
  EXPECT_EQ(e.breakdown().params_total, 68'976'648'192.0);
  EXPECT_EQ(e.breakdown().params_trainable, 68'976'648'192.0);
  EXPECT_EQ(e.breakdown().world_size, 32);
}

TEST(Zero, StageTwoShardsGradientsButNotWeights) {
  // 7B params-only, 8 ranks, mixed bf16 + AdamW: weights 2 x 7e9 stay, gradients
  // 2 x 7e9 / 8, master 4 x 7e9 / 8, states 8 x 7e9 / 8.
  Evaluation e = evaluate(
      "name = \"t\"\nmode = \"train\"\n[model]\nparams = 7e9\n[precision]\nuse = \"mixed-bf16\"\n[optimizer]\nuse = "
      "\"adamw\"\n[activations]\nuse = \"none\"\n[[strategy]]\nuse = \"zero\"\nstage = 2\n[[strategy]]\nuse = "
      "\"data-parallel\"\nsize = 8\n");
  EXPECT_EQ(e.component(MEMPLAN_ROLE_WEIGHTS), 14'000'000'000u);
  EXPECT_EQ(e.component(MEMPLAN_ROLE_GRADIENTS), 1'750'000'000u);
  EXPECT_EQ(e.component(MEMPLAN_ROLE_MASTER_WEIGHTS), 3'500'000'000u);
  EXPECT_EQ(e.component(MEMPLAN_ROLE_OPTIMIZER_STATES), 7'000'000'000u);
}

TEST(Precision, RoleOverridesAndUnknownDtypes) {
  // fp8 weights (1 byte) with the rest of mixed-bf16: 7e9 bytes of weights.
  Evaluation e = evaluate(
      "name = \"t\"\nmode = \"train\"\n[model]\nparams = 7e9\n[precision]\nuse = \"mixed-bf16\"\nweights = \"fp8\"\n"
      "master_weights = \"none\"\n[optimizer]\nuse = \"sgd\"\n[activations]\nuse = \"none\"\n");
  EXPECT_EQ(e.component(MEMPLAN_ROLE_WEIGHTS), 7'000'000'000u);
  EXPECT_EQ(e.component(MEMPLAN_ROLE_MASTER_WEIGHTS), 0u);
  EXPECT_EQ(e.component(MEMPLAN_ROLE_OPTIMIZER_STATES), 0u);
  EXPECT_EQ(error_of("name = \"t\"\nmode = \"train\"\n[model]\nparams = 7e9\n[precision]\nuse = \"mixed-bf16\"\n"
                     "weights = \"fp9\"\n[optimizer]\nuse = \"sgd\"\n[activations]\nuse = \"none\"\n",
                     "s.toml"),
            "s.toml:7:11: error: in [precision], precision plugin 'mixed-bf16', option 'weights': is \"fp9\", not a "
            "known dtype; use fp32, fp16, bf16, fp8, int8, int4 (plugin library " + plugin_dir() +
                "/memplan-mixed-bf16.so)");
}

TEST(Inference, OnlyWeights) {
  // Llama-2-7B in fp16 for inference: 6,738,415,616 x 2 bytes, nothing else (the paper view).
  Evaluation e = evaluate_paper(
      "name = \"t\"\nmode = \"infer\"\n[model]\npreset = \"llama-2-7b\"\n[precision]\nuse = \"mixed-fp16\"\n");
  EXPECT_EQ(e.breakdown().sum, 13'476'831'232u);
  EXPECT_EQ(e.breakdown().peak, 13'476'831'232u);
  EXPECT_EQ(e.component(MEMPLAN_ROLE_GRADIENTS), 0u);
}

TEST(Evaluation, RepeatsIdentically) {
  Evaluation e = evaluate(llama70b("[[strategy]]\nuse = \"tensor-parallel\"\nsize = 8\n"));
  const Breakdown first = e.breakdown();
  const Breakdown& again = e.estimator().evaluate();
  EXPECT_EQ(first.sum, again.sum);
  EXPECT_EQ(first.peak, again.peak);
  EXPECT_EQ(first.components, again.components);
}

}  // namespace
}  // namespace memplan::testing

namespace memplan::testing {
namespace {

TEST(Zero, NeedsADeclaredDataParallelGroup) {
  EXPECT_EQ(error_of("name = \"t\"\nmode = \"train\"\n[model]\nparams = 7e9\n[precision]\nuse = \"mixed-bf16\"\n"
                     "[optimizer]\nuse = \"adamw\"\n[activations]\nuse = \"none\"\n[[strategy]]\nuse = \"zero\"\n"
                     "stage = 3\n",
                     "s.toml"),
            "s.toml:12:7: error: in [[strategy]] #1, strategy plugin 'zero': stage 3 shards over the data-parallel "
            "group, but no strategy declares its size; add [[strategy]] use = \"data-parallel\" with its size (size "
            "= 1 on a single GPU) (plugin library " + plugin_dir() + "/memplan-zero.so)");
}

TEST(Inference, NothingIsTrainable) {
  Evaluation e = evaluate(
      "name = \"t\"\nmode = \"infer\"\n[model]\npreset = \"llama-2-7b\"\n[precision]\nuse = \"mixed-fp16\"\n");
  EXPECT_EQ(e.breakdown().params_total, 6'738'415'616.0);
  EXPECT_EQ(e.breakdown().params_trainable, 0.0);
}

}  // namespace
}  // namespace memplan::testing

namespace memplan::testing {
namespace {

// The embedding's norm (BERT-style embedding_norm) stays with the embedding on
// the first stage; the final norm goes with the head to the last.
TEST(PipelineParallel, EmbeddingNormOnFirstStageFinalNormOnLast) {
  auto stage = [](const char* which) {
    return evaluate("name = \"t\"\nmode = \"infer\"\n[model]\npreset = \"llama-2-7b\"\nembedding_norm = true\n"
                    "[precision]\nuse = \"fp32\"\n[[strategy]]\nuse = \"pipeline-parallel\"\nsize = 2\nstage = \"" +
                    std::string(which) + "\"\n");
  };
  Evaluation first = stage("first");
  Evaluation last = stage("last");
  // Llama's RMSNorm: 4096 elements x 4 bytes.
  EXPECT_EQ(first.item_bytes("embed_norm", MEMPLAN_ROLE_WEIGHTS), 16'384u);
  EXPECT_EQ(first.item_bytes("final_norm", MEMPLAN_ROLE_WEIGHTS), 0u);
  EXPECT_EQ(last.item_bytes("embed_norm", MEMPLAN_ROLE_WEIGHTS), 0u);
  EXPECT_EQ(last.item_bytes("final_norm", MEMPLAN_ROLE_WEIGHTS), 16'384u);
}

}  // namespace
}  // namespace memplan::testing
