// The hand-checked figures in the header comments of examples/infer-*.toml
// (the derivations are in those comments), evaluated through the plugins.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "test_support.hpp"

namespace memplan::testing {
namespace {

Evaluation example(const std::string& name) {
  const std::string path = source_dir() + "/examples/" + name;
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  std::ostringstream text;
  text << in.rdbuf();
  return evaluate_paper(text.str(), path);
}

// Llama 3.1 70B, AWQ-style int4 (g128, fp16 scale, 4-bit zero), 8 x 8192
// tokens of bf16 KV cache, on one 80 GB GPU.
TEST(InferExamples, Llama31SeventyBillionInt4OnOneGpu) {
  Evaluation evaluation = example("infer-llama-3.1-70b-int4-1gpu.toml");
  EXPECT_EQ(evaluation.component(MEMPLAN_ROLE_WEIGHTS), 39'767'785'472u);
  EXPECT_EQ(evaluation.component(MEMPLAN_ROLE_KV_CACHE), 21'474'836'480u);
  EXPECT_EQ(evaluation.component(MEMPLAN_ROLE_ACTIVATIONS), 1'677'721'600u + 4'104'192u);
  EXPECT_EQ(evaluation.breakdown().peak, 62'924'447'744u);
  EXPECT_TRUE(evaluation.estimator().fits());
}

// gpt-oss-120b with MXFP4 experts (the rest bf16) on one 80 GB GPU, 8 x
// 32768 tokens of bf16 KV cache, half the layers windowed (128 tokens).
TEST(InferExamples, GptOss120bMxfp4OnOneGpu) {
  Evaluation evaluation = example("infer-gpt-oss-120b-mxfp4-1gpu.toml");
  EXPECT_EQ(evaluation.component(MEMPLAN_ROLE_WEIGHTS), 60'914'073'600u + 4'334'742'144u);
  EXPECT_NEAR(static_cast<double>(evaluation.component(MEMPLAN_ROLE_WEIGHTS)) / kGiB, 60.8, 0.05);  // the model card
  EXPECT_EQ(evaluation.item_bytes("layers.1-18.kv_cache.global", MEMPLAN_ROLE_KV_CACHE), 9'663'676'416u);
  EXPECT_EQ(evaluation.item_bytes("layers.0-17.kv_cache.window", MEMPLAN_ROLE_KV_CACHE), 2'453'667'840u);
  EXPECT_EQ(evaluation.component(MEMPLAN_ROLE_ACTIVATIONS), 660'602'880u + 6'434'816u);
  EXPECT_EQ(evaluation.breakdown().peak, 78'033'197'696u);
  EXPECT_TRUE(evaluation.estimator().fits());
}

// Seed 001: 168 GB for Llama 70B in 16-bit, 42 GB on each of 4 GPUs.
TEST(InferExamples, Seed001RuleOfThumbOnFourGpus) {
  Evaluation evaluation = example("infer-llama-70b-rule-of-thumb.toml");
  EXPECT_EQ(evaluation.component(MEMPLAN_ROLE_WEIGHTS), 35'000'000'000u);
  EXPECT_EQ(evaluation.component(MEMPLAN_ROLE_OVERHEAD), 7'000'000'000u);
  EXPECT_EQ(evaluation.breakdown().peak, 42'000'000'000u);
  EXPECT_DOUBLE_EQ(4.0 * static_cast<double>(evaluation.breakdown().peak) / kGB, 168);
}

// The detailed bf16 estimate beside it: preset llama-3.1-70b, TP 4.
TEST(InferExamples, Llama31SeventyBillionBf16OnFourGpus) {
  Evaluation evaluation = example("infer-llama-3.1-70b-bf16-tp4.toml");
  EXPECT_EQ(evaluation.component(MEMPLAN_ROLE_WEIGHTS), 35'278'831'616u);
  EXPECT_EQ(evaluation.component(MEMPLAN_ROLE_KV_CACHE), 5'368'709'120u);
  EXPECT_EQ(evaluation.component(MEMPLAN_ROLE_ACTIVATIONS), 620'756'992u + 1'026'048u);
  EXPECT_EQ(evaluation.breakdown().peak, 41'269'323'776u);
}

// DeepSeek-V3 (multi-head latent attention) on 8 H200, TP 8, fp8-block
// weights, fp8 latent cache, 32 x 32,768 tokens: the header's hand check.
TEST(InferExamples, DeepSeekV3Fp8OnEightH200) {
  Evaluation evaluation = example("infer-deepseek-v3-fp8-h200x8.toml");
  EXPECT_EQ(evaluation.component(MEMPLAN_ROLE_WEIGHTS), 84'461'850'992u + 678'243'328u);
  EXPECT_EQ(evaluation.component(MEMPLAN_ROLE_KV_CACHE), 576ull * 61 * 32768 * 32);
  EXPECT_EQ(evaluation.component(MEMPLAN_ROLE_ACTIVATIONS), 403'701'760u + 2'068'480u);
  EXPECT_EQ(evaluation.breakdown().peak, 122'388'630'896u);
  EXPECT_TRUE(evaluation.estimator().fits());
}

}  // namespace
}  // namespace memplan::testing
