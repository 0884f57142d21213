// The 'ratio' activation model: activations = factor x the weights' bytes, the
// seeds' rule of thumb (seed 000: 0.7 to 1.0 x the weight size; seed 001:
// "roughly similar to or slightly larger than" the parameters' memory). In
// GB = 10^9 bytes.
#include <gtest/gtest.h>

#include <string>

#include "test_support.hpp"

namespace memplan::testing {
namespace {

constexpr int32_t kAct = MEMPLAN_ROLE_ACTIVATIONS;

// 10e9 parameters in fp16 (20 GB of weights), as seed 001's example.
// Lines: 1 name, 2 mode, 3 [model], 4 params, 5 [batch], 6 micro_batch, 7 seq_len, 8 [precision], 9 use,
// 10 master_weights, 11 [optimizer], 12 use, 13 [activations], 14 use, 15.. options, then strategies.
std::string scenario(const std::string& options, const std::string& strategies = "", int micro_batch = 32) {
  return "name = \"ratio\"\nmode = \"train\"\n[model]\nparams = 10e9\n[batch]\nmicro_batch = " +
         std::to_string(micro_batch) + "\nseq_len = 2048\n[precision]\nuse = \"mixed-fp16\"\nmaster_weights = \"none\"\n"
         "[optimizer]\nuse = \"adam\"\n[activations]\nuse = \"ratio\"\n" + options + strategies;
}

TEST(RatioActivations, FactorTimesTheModelsWeights) {
  EXPECT_EQ(evaluate_paper(scenario("factor = 1\n")).item_bytes("activations.ratio", kAct), 20'000'000'000u);
  EXPECT_EQ(evaluate_paper(scenario("factor = 0.7\n")).component(kAct), 14'000'000'000u);
  EXPECT_EQ(evaluate_paper(scenario("factor = 2\n")).component(kAct), 40'000'000'000u);
  EXPECT_EQ(evaluate_paper(scenario("factor = 0\n")).component(kAct), 0u);
}

// Seed 001: "Memory for activations does not scale down with the number of
// GPUs", so by default the model's weights count whatever the parallelism;
// of = "rank" takes the 10 GB a tensor-parallel rank of 2 holds.
TEST(RatioActivations, ModelOrRankWeights) {
  const std::string tp2 = "[[strategy]]\nuse = \"tensor-parallel\"\nsize = 2\n";
  EXPECT_EQ(evaluate_paper(scenario("factor = 1\n", tp2)).component(kAct), 20'000'000'000u);
  EXPECT_EQ(evaluate_paper(scenario("factor = 1\nof = \"rank\"\n", tp2)).component(kAct), 10'000'000'000u);
}

// Seed 001: doubling the batch (or the sequence) doubles the activations, when
// the factor was observed at a known batch (or sequence).
TEST(RatioActivations, ScalesWithTheBatchAndSequenceOnlyFromAReference) {
  EXPECT_EQ(evaluate_paper(scenario("factor = 1\n", "", 64)).component(kAct), 20'000'000'000u);
  EXPECT_EQ(evaluate_paper(scenario("factor = 1\nreference_micro_batch = 32\n", "", 64)).component(kAct),
            40'000'000'000u);
  EXPECT_EQ(evaluate_paper(scenario("factor = 1\nreference_micro_batch = 32\n", "", 16)).component(kAct),
            10'000'000'000u);
  EXPECT_EQ(evaluate_paper(scenario("factor = 1\nreference_seq_len = 4096\n")).component(kAct), 10'000'000'000u);
}

std::string library() { return " (plugin library " + plugin_dir() + "/memplan-ratio.so)"; }

TEST(RatioActivations, FactorIsRequiredAndChecked) {
  EXPECT_EQ(error_of(scenario(""), "r.toml"),
            "r.toml:14:7: error: in [activations], activations plugin 'ratio': needs factor = <activations / weight "
            "bytes>: seed 000 suggests 0.7 to 1.0, seed 001 about 1 (\"roughly similar to or slightly larger than\" "
            "the parameters' memory)" + library());
  EXPECT_EQ(error_of(scenario("factor = -0.5\n"), "r.toml"),
            "r.toml:15:10: error: in [activations], activations plugin 'ratio', option 'factor': must be a "
            "non-negative number, got -0.5" + library());
  EXPECT_EQ(error_of(scenario("factor = 1\nof = \"layer\"\n"), "r.toml"),
            "r.toml:16:6: error: in [activations], activations plugin 'ratio', option 'of': must be \"model\" or "
            "\"rank\", not \"layer\"" + library());
}

TEST(RatioActivations, TrainingOnly) {
  const std::string infer = "name = \"ratio\"\nmode = \"infer\"\n[model]\nparams = 10e9\n[precision]\nuse = \"bf16\"\n"
                            "[activations]\nuse = \"ratio\"\nfactor = 1\n";
  EXPECT_EQ(error_of(infer, "r.toml"),
            "r.toml:8:7: error: in [activations], activations plugin 'ratio': is a rule of thumb for training "
            "activations, but the scenario has mode = \"infer\"; use [activations] use = \"inference\" to model "
            "serving" + library());
}

}  // namespace
}  // namespace memplan::testing
