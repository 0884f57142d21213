// The 'rule-of-thumb' precision plugin: seed 001's serving rule
// M = P x 4 bytes / (32 / Q) x 1.2, in the seed's unit (GB = 10^9 bytes).
#include <gtest/gtest.h>

#include <string>

#include "test_support.hpp"

namespace memplan::testing {
namespace {

std::string scenario(const std::string& model, const std::string& options) {
  return "name = \"rule\"\nmode = \"infer\"\n[model]\n" + model + "[precision]\nuse = \"rule-of-thumb\"\n" + options;
}

const std::string kSeventyBillion = "params = 70e9\n";

// Seed 001, "GPU memory is required for serving Llama 70B in 16-bit" (the
// formula and result are images in the seed; its first reference,
// continuumlabs.ai, gives both): 70e9 x 4 bytes / (32 / 16) x 1.2 = 140 GB of
// weights + 28 GB = 168 GB.
TEST(Seed001ServingRule, Llama70BIn16BitNeeds168GB) {
  Evaluation evaluation = evaluate_paper(scenario(kSeventyBillion, ""));
  EXPECT_EQ(evaluation.component(MEMPLAN_ROLE_WEIGHTS), 140'000'000'000u);
  EXPECT_EQ(evaluation.component(MEMPLAN_ROLE_OVERHEAD), 28'000'000'000u);
  EXPECT_EQ(evaluation.item_bytes("parameters.overhead", MEMPLAN_ROLE_OVERHEAD), 28'000'000'000u);
  EXPECT_DOUBLE_EQ(static_cast<double>(evaluation.breakdown().peak) / kGB, 168);
  EXPECT_DOUBLE_EQ(static_cast<double>(evaluation.breakdown().sum) / kGB, 168);
}

// The seed's Q = 8 and 4 bits (and 32): 70e9 x 4 / (32 / Q) x 1.2 =
// 84 GB, 42 GB and 336 GB.
TEST(Seed001ServingRule, EightFourAndThirtyTwoBitVariants) {
  auto total_gb = [](int bits) {
    Evaluation evaluation = evaluate_paper(scenario(kSeventyBillion, "bits = " + std::to_string(bits) + "\n"));
    return static_cast<double>(evaluation.breakdown().sum) / kGB;
  };
  EXPECT_DOUBLE_EQ(total_gb(8), 84);
  EXPECT_DOUBLE_EQ(total_gb(4), 42);
  EXPECT_DOUBLE_EQ(total_gb(32), 336);
}

// overhead = 1 is the bare P x Q/8: no overhead item at all; 1.5 adds half.
TEST(Seed001ServingRule, OverheadFactor) {
  Evaluation bare = evaluate_paper(scenario(kSeventyBillion, "overhead = 1\n"));
  EXPECT_EQ(bare.breakdown().sum, 140'000'000'000u);
  EXPECT_EQ(bare.component(MEMPLAN_ROLE_OVERHEAD), 0u);
  Evaluation half = evaluate_paper(scenario(kSeventyBillion, "overhead = 1.5\n"));
  EXPECT_EQ(half.breakdown().sum, 210'000'000'000u);
}

// The seed divides M by the GPU count; the overhead follows the weights it
// is taken from, so on 4 tensor-parallel ranks each holds 168 / 4 = 42 GB.
TEST(Seed001ServingRule, TensorParallelDividesWeightsAndOverhead) {
  Evaluation evaluation = evaluate_paper(scenario(kSeventyBillion, "") +
                                   "[[strategy]]\nuse = \"tensor-parallel\"\nsize = 4\n[hardware]\n"
                                   "gpu = \"h100-sxm-80gb\"\ncount = 4\n");
  EXPECT_DOUBLE_EQ(static_cast<double>(evaluation.breakdown().peak) / kGB, 42);
}

// With an architecture, every weight item gets its own overhead item of the
// same class, so layout plugins split it alike and the rank's overhead stays
// 20% of the rank's weights. Llama 3.1 70B in 16 bits: 70,553,706,496 x 2 =
// 141,107,412,992 bytes of weights, 28,221,482,598.4 of overhead (each item
// rounds up per layer: under 1 byte x 80 layers x 8 layered items).
TEST(Seed001ServingRule, WithAnArchitectureTheOverheadFollowsEachWeight) {
  Evaluation whole = evaluate_paper(scenario("preset = \"llama-3.1-70b\"\n", ""));
  EXPECT_EQ(whole.component(MEMPLAN_ROLE_WEIGHTS), 141'107'412'992u);
  EXPECT_NEAR(static_cast<double>(whole.component(MEMPLAN_ROLE_OVERHEAD)), 28'221'482'598.4, 1000);
  Evaluation split = evaluate_paper(scenario("preset = \"llama-3.1-70b\"\n", "") +
                              "[[strategy]]\nuse = \"tensor-parallel\"\nsize = 4\n");
  const double weights = static_cast<double>(split.component(MEMPLAN_ROLE_WEIGHTS));
  EXPECT_LT(weights, 141'107'412'992.0 / 3);
  EXPECT_NEAR(static_cast<double>(split.component(MEMPLAN_ROLE_OVERHEAD)), 0.2 * weights, 1000);
}

std::string library() { return " (plugin library " + plugin_dir() + "/memplan-rule-of-thumb.so)"; }

// Lines: 1 name, 2 mode, 3 [model], 4 params, 5 [precision], 6 use, 7 option.
TEST(RuleOfThumbErrors, TrainingIsRefusedBecauseTheRuleIsForServing) {
  const std::string train = "name = \"rule\"\nmode = \"train\"\n[model]\nparams = 70e9\n[precision]\n"
                            "use = \"rule-of-thumb\"\n[optimizer]\nuse = \"adamw\"\n[activations]\nuse = \"none\"\n";
  EXPECT_EQ(error_of(train, "r.toml"),
            "r.toml:6:7: error: in [precision], precision plugin 'rule-of-thumb': seed 001's rule M = P x 4 bytes / "
            "(32 / Q) x 1.2 is for serving a model, so it needs mode = \"infer\"; to estimate training use a "
            "precision recipe such as mixed-bf16 with an [optimizer]" + library());
}

TEST(RuleOfThumbErrors, BitsAndOverheadAreChecked) {
  EXPECT_EQ(error_of(scenario(kSeventyBillion, "bits = 12\n"), "r.toml"),
            "r.toml:7:8: error: in [precision], precision plugin 'rule-of-thumb', option 'bits': must be 4, 8, 16 "
            "or 32 (the seed's Q), got 12" + library());
  EXPECT_EQ(error_of(scenario(kSeventyBillion, "overhead = 0.8\n"), "r.toml"),
            "r.toml:7:12: error: in [precision], precision plugin 'rule-of-thumb', option 'overhead': must be a "
            "factor of at least 1 (1.2 adds 20%), got 0.8" + library());
}

}  // namespace
}  // namespace memplan::testing
