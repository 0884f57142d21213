// The inference presets (issue 4): hand counts against the published totals,
// and the serving-related keys (GQA, sliding window, context).
#include <gtest/gtest.h>

#include "memplan/core/model.hpp"
#include "test_support.hpp"

namespace memplan::testing {
namespace {

const ModelSpec& spec(const char* name) {
  const ModelPreset* preset = catalog().find_model(name);
  if (preset == nullptr) throw std::runtime_error(std::string("no preset ") + name);
  return preset->spec;
}

double counted(const char* name) { return count_parameters(parameter_inventory(spec(name))); }

// Per layer, h = 4096, kv = 8 x 128 = 1024, f = 14336:
// q + o 2h^2 + k, v 2 h kv + MLP 3hf + 2 norms 2h = 218,112,000.
// Llama 3.1 8B: 32 x 218,112,000 + 2 x 128256 x 4096 + 4096 = 8,030,261,248,
// the count transformers reports for meta-llama/Llama-3.1-8B.
TEST(InferencePresets, Llama31EightBillion) {
  EXPECT_EQ(counted("llama-3.1-8b"), 8'030'261'248.0);
  EXPECT_EQ(spec("llama-3.1-8b").max_context, 131072);
}

// Llama 3.1 70B, h = 8192, f = 28672: per layer 2h^2 + 2 x 8192 x 1024 +
// 3hf + 2h = 855,654,400; x 80 + 2 x 128256 x 8192 + 8192 = 70,553,706,496.
TEST(InferencePresets, Llama31SeventyBillion) {
  EXPECT_EQ(counted("llama-3.1-70b"), 70'553'706'496.0);
  EXPECT_EQ(spec("llama-3.1-70b").effective_kv_heads(), 8);
}

// Mistral 7B v0.1: Llama 3.1 8B's layers with a 32000 vocabulary:
// 32 x 218,112,000 + 2 x 32000 x 4096 + 4096 = 7,241,732,096; every layer
// attends within 4096 tokens (Jiang et al. 2023, Table 1).
TEST(InferencePresets, Mistral7BWithSlidingWindow) {
  EXPECT_EQ(counted("mistral-7b"), 7'241'732'096.0);
  EXPECT_EQ(spec("mistral-7b").sliding_window, 4096);
  EXPECT_EQ(spec("mistral-7b").global_attention_every, 0);
  EXPECT_EQ(spec("mistral-7b").max_context, 32768);
}

// OPT-13B, h = 5120, f = 20480, biases everywhere, LayerNorm:
// per layer 4(h^2 + h) + 2hf + f + h + 4h = 314,639,360; x 40 +
// 50272h + 2050h (positions, 2048 + OPT's offset of 2) + 2h = 12,853,473,280,
// the "13B" of Zhang et al. 2022 (arXiv 2205.01068), Table 1: 12.85B.
TEST(InferencePresets, Opt13BHandCount) {
  const double h = 5120, f = 20480;
  const double layer = 4 * (h * h + h) + 2 * h * f + f + h + 4 * h;
  EXPECT_EQ(layer, 314'639'360.0);
  EXPECT_EQ(counted("opt-13b"), 40 * layer + 50272 * h + 2050 * h + 2 * h);
  EXPECT_EQ(counted("opt-13b"), 12'853'473'280.0);
  EXPECT_NEAR(counted("opt-13b") / 1e9, 12.85, 0.005);
}

}  // namespace
}  // namespace memplan::testing
