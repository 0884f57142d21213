// Every preset's parameter count, exactly. Where the authors publish an exact
// count (Hugging Face transformers' num_parameters() of the checkpoint), the
// inventory must reproduce it to the parameter; where a paper only gives a
// rounded size (Korthikanti et al. 2022, Table 3: 22B, 175B, 530B, 1T), the
// hand count is pinned exactly and the rounded figure within 1%. Each preset
// file carries the hand count in a comment; tests/core/inventory_test.cpp
// checks every preset within 1% of its published_params.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "memplan/core/model.hpp"
#include "test_support.hpp"

namespace memplan::testing {
namespace {

struct Exact {
  const char* preset;
  double params;       // transformers' num_parameters() of the checkpoint
  int64_t max_context;  // config.json's max_position_embeddings
};

// Exact counts reported by transformers for the checkpoints named in each
// preset's `source`.
constexpr Exact kExact[] = {
    {"llama-2-7b", 6'738'415'616.0, 4096},
    {"llama-2-13b", 13'015'864'320.0, 4096},
    {"llama-2-70b", 68'976'648'192.0, 4096},
    {"llama-3.1-8b", 8'030'261'248.0, 131072},
    {"llama-3.1-70b", 70'553'706'496.0, 131072},
    {"llama-3.1-405b", 405'853'388'800.0, 131072},
    {"llama-3.2-1b", 1'235'814'400.0, 131072},
    {"llama-3.2-3b", 3'212'749'824.0, 131072},
    {"qwen2-0.5b", 494'032'768.0, 131072},
    {"qwen2-7b", 7'615'616'512.0, 131072},
    {"qwen2-72b", 72'706'203'648.0, 131072},
    {"mistral-7b", 7'241'732'096.0, 32768},
    {"mixtral-8x7b", 46'702'792'704.0, 32768},
    {"mixtral-8x22b", 140'630'071'296.0, 65536},
    {"gpt2-xl", 1'557'611'200.0, 1024},
    {"bert-large-uncased", 335'141'888.0, 512},
    // Issue 12: the hand counts beside each preset file (core/data/models/), equal to
    // what hf_config reads from the same config.json (hf_config_test.cpp).
    {"qwen3-4b", 4'022'468'096.0, 40960},
    {"qwen3-30b-a3b", 30'532'122'624.0, 40960},
    {"qwen1.5-moe-a2.7b", 14'315'784'192.0, 32768},
    {"phi-3-mini-4k", 3'821'079'552.0, 4096},
    {"gemma-3-12b-text", 11'766'034'176.0, 131072},
    {"gemma-2-9b", 9'241'705'984.0, 8192},
    {"gemma-2-27b", 27'227'128'320.0, 8192},
    {"olmo-2-7b", 7'298'617'344.0, 4096},
    {"mistral-nemo-12b", 12'247'782'400.0, 128000},
    {"mistral-small-24b", 23'572'403'200.0, 32768},
    {"phi-4", 14'659'507'200.0, 16384},
    {"qwen2.5-7b", 7'615'616'512.0, 131072},
    {"qwen2.5-72b-instruct", 72'706'203'648.0, 32768},
    {"llama-3.3-70b", 70'553'706'496.0, 131072},
    {"gpt-oss-20b", 20'914'757'184.0, 131072},
    {"gpt-oss-120b", 116'829'156'672.0, 131072},
    // The model cards round (hf_config_test.cpp checks the rounding): Qwen3
    // 0.6B, 8B, 32B, 235B-A22B; Phi-3.5-mini 3.8B; Llama 4 Scout's language
    // model (the checkpoint's 108,641,793,536 less the vision tower).
    {"qwen3-0.6b", 596'049'920.0, 40960},
    {"qwen3-8b", 8'190'735'360.0, 40960},
    {"qwen3-32b", 32'762'123'264.0, 40960},
    {"qwen3-235b-a22b", 235'093'634'560.0, 40960},
    {"phi-3.5-mini", 3'821'079'552.0, 131072},
    {"llama-4-scout-17b-16e", 107'769'861'120.0, 262144},
    // OPT (Zhang et al. 2022, Table 1, rounds: 125M ... 66B): the hand counts in the preset files, equal to
    // hf_config's (hf_config_test.cpp; OptThreeFiftyM derives 350m's, with its narrower embedding).
    {"opt-125m", 125'239'296.0, 2048},
    {"opt-350m", 331'196'416.0, 2048},
    {"opt-1.3b", 1'315'758'080.0, 2048},
    {"opt-2.7b", 2'651'596'800.0, 2048},
    {"opt-6.7b", 6'658'473'984.0, 2048},
    {"opt-30b", 29'974'540'288.0, 2048},
    {"opt-66b", 65'719'701'504.0, 2048},
};

struct Rounded {
  const char* preset;
  double counted;    // memplan's hand count (in the preset file's comment)
  double published;  // the paper's rounded size
  int64_t max_context;
};

constexpr Rounded kRounded[] = {
    {"megatron-22b", 22'074'273'792.0, 22e9, 2048},
    {"megatron-175b", 174'615'846'912.0, 175e9, 2048},
    {"megatron-530b", 529'600'819'200.0, 530e9, 2048},
    {"megatron-1t", 1'008'038'758'400.0, 1e12, 2048},
    {"gpt3-175b", 174'615'846'912.0, 175e9, 2048},
    {"opt-13b", 12'853'473'280.0, 12.85e9, 2048},
    // Issue 12, multi-head latent attention: DeepSeek publishes rounded totals
    // (README_WEIGHTS.md of deepseek-ai/DeepSeek-V3: 671B; the DeepSeek-V2-Lite
    // model card: 15.7B); the hand counts are in the preset files.
    {"deepseek-v3", 671'026'419'200.0, 671e9, 163840},
    {"deepseek-v2-lite", 15'706'484'224.0, 15.7e9, 163840},
};

const ModelPreset& preset(const char* name) {
  const ModelPreset* found = catalog().find_model(name);
  if (found == nullptr) throw std::runtime_error(std::string("no preset ") + name);
  return *found;
}

double counted(const char* name) { return count_parameters(parameter_inventory(preset(name).spec)); }

TEST(PresetTotals, ExactCountsOfTheCheckpoints) {
  for (const Exact& exact : kExact) {
    SCOPED_TRACE(exact.preset);
    EXPECT_EQ(counted(exact.preset), exact.params);
    EXPECT_EQ(preset(exact.preset).published_params, exact.params);
    EXPECT_EQ(preset(exact.preset).spec.max_context, exact.max_context);
    EXPECT_FALSE(preset(exact.preset).source.empty());
  }
}

TEST(PresetTotals, PaperSizesAreRoundedHandCounts) {
  for (const Rounded& rounded : kRounded) {
    SCOPED_TRACE(rounded.preset);
    EXPECT_EQ(counted(rounded.preset), rounded.counted);
    EXPECT_EQ(preset(rounded.preset).published_params, rounded.published);
    EXPECT_NEAR(rounded.counted, rounded.published, rounded.published * 0.01);
    EXPECT_EQ(preset(rounded.preset).spec.max_context, rounded.max_context);
    EXPECT_FALSE(preset(rounded.preset).source.empty());
  }
}

// A new preset needs a line in one of the two tables above.
TEST(PresetTotals, EveryPresetIsPinned) {
  std::set<std::string> pinned;
  for (const Exact& exact : kExact) pinned.insert(exact.preset);
  for (const Rounded& rounded : kRounded) pinned.insert(rounded.preset);
  for (const ModelPreset& model : catalog().models()) EXPECT_TRUE(pinned.count(model.name)) << model.name;
  EXPECT_EQ(catalog().models().size(), pinned.size());
}

// Korthikanti et al. 2022, Table 3: GPT blocks of 12h^2 + 13h per layer,
// embeddings (51200 + 2048) h, final LayerNorm 2h, output layer tied.
TEST(PresetTotals, KorthikantiTableThreeShapes) {
  struct Shape {
    const char* preset;
    double heads, hidden, layers;
  };
  for (Shape shape : {Shape{"megatron-22b", 64, 6144, 48}, Shape{"megatron-175b", 96, 12288, 96},
                      Shape{"megatron-530b", 128, 20480, 105}, Shape{"megatron-1t", 160, 25600, 128}}) {
    SCOPED_TRACE(shape.preset);
    const ModelSpec& spec = preset(shape.preset).spec;
    EXPECT_EQ(spec.heads, shape.heads);
    EXPECT_EQ(spec.hidden, shape.hidden);
    EXPECT_EQ(spec.layers, shape.layers);
    EXPECT_EQ(spec.vocab, 51200);
    const double h = shape.hidden;
    EXPECT_EQ(counted(shape.preset), shape.layers * (12 * h * h + 13 * h) + (51200 + 2048) * h + 2 * h);
  }
}

// Qwen2 carries biases on q, k and v: without them Qwen2-7B would count
// 28 x (3584 + 2 x 512) = 129,024 fewer parameters.
TEST(PresetTotals, QwenTwoQkvBiases) {
  ModelSpec spec = preset("qwen2-7b").spec;
  ASSERT_TRUE(spec.qkv_bias);
  spec.qkv_bias = false;
  EXPECT_EQ(7'615'616'512.0 - count_parameters(parameter_inventory(spec)), 129'024.0);
}

// Llama 3.2 ties the LM head to the embedding: untied, the 1B model would
// have 128256 x 2048 more parameters.
TEST(PresetTotals, LlamaThreeTwoIsTied) {
  ModelSpec spec = preset("llama-3.2-1b").spec;
  ASSERT_TRUE(spec.tied_embeddings);
  spec.tied_embeddings = false;
  EXPECT_EQ(count_parameters(parameter_inventory(spec)) - 1'235'814'400.0, 128256.0 * 2048);
}

// Mixtral 8x22B's count is that of the 32768-token vocabulary
// (mistralai/Mixtral-8x22B-v0.1); the first upload's 32000 gives 2 x 768 x
// 6144 fewer.
TEST(PresetTotals, MixtralEightByTwentyTwoVocabulary) {
  ModelSpec spec = preset("mixtral-8x22b").spec;
  EXPECT_EQ(spec.vocab, 32768);
  spec.vocab = 32000;
  EXPECT_EQ(count_parameters(parameter_inventory(spec)), 140'620'634'112.0);
}

}  // namespace
}  // namespace memplan::testing
