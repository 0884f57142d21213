// Seed 002: Continuum Labs, "Calculating GPU memory" (training section), in
// GB = 10^9 bytes (13e9 x 4 bytes = "52 GB"). The rule: M_inf ~ S = P x bytes;
// M_train ~ 4 x M_inf; plus gradients (P) and AdamW states (2P); x 1.2. Its
// 13B example double counts (docs/seed-notes.md): the factor 4 already covers
// the gradients and states. The 'continuum-rule' plugin applies the rule on top
// of the plan the precision and optimizer plugins build.
#include <gtest/gtest.h>

#include <string>

#include "test_support.hpp"

namespace memplan::testing {
namespace {

double gb(uint64_t bytes) { return static_cast<double>(bytes) / kGB; }

std::string training(const std::string& params, const std::string& rule_options, bool with_rule = true) {
  return "name = \"seed002\"\nmode = \"train\"\n[model]\nparams = " + params +
         "\n[precision]\nuse = \"fp32\"\n[optimizer]\nuse = \"adamw\"\n[activations]\nuse = \"none\"\n" +
         (with_rule ? "[[strategy]]\nuse = \"continuum-rule\"\n" + rule_options : "");
}

// "Storage size (S) = 13 billion * 4 bytes = 52 GB; M_train = 52 GB * 4 =
// 208 GB; gradients 52 GB; AdamW states 104 GB; 208 + 52 + 104 = 364 GB;
// x 1.2 = 437 GB" (436.8).
TEST(Seed002, ThirteenBillionWorkedExampleIs437GB) {
  Evaluation e = evaluate_paper(training("13e9", ""));
  EXPECT_EQ(e.component(MEMPLAN_ROLE_WEIGHTS), 52'000'000'000u);
  EXPECT_EQ(e.component(MEMPLAN_ROLE_GRADIENTS), 52'000'000'000u);
  EXPECT_EQ(e.component(MEMPLAN_ROLE_OPTIMIZER_STATES), 104'000'000'000u);
  EXPECT_EQ(e.item_bytes("continuum.training_factor", MEMPLAN_ROLE_OVERHEAD), 156'000'000'000u);  // 3 x 52
  EXPECT_EQ(e.item_bytes("continuum.margin", MEMPLAN_ROLE_OVERHEAD), 72'800'000'000u);            // 0.2 x 364
  EXPECT_DOUBLE_EQ(gb(e.breakdown().sum), 436.8);
  EXPECT_DOUBLE_EQ(gb(e.breakdown().peak), 436.8);
}

// Counted once: fp32 weights and gradients and AdamW's two fp32 states are
// 16 bytes per parameter = 208 GB, the seed's own M_train; with its margin,
// 249.6 GB. The worked example's extra 156 GB is the double count.
TEST(Seed002, CountedOnceTheSameModelNeeds208GB) {
  EXPECT_DOUBLE_EQ(gb(evaluate_paper(training("13e9", "", false)).breakdown().peak), 208);
  EXPECT_DOUBLE_EQ(gb(evaluate_paper(training("13e9", "gradients_and_states = \"included\"\n")).breakdown().peak), 249.6);
}

// "Training a 7B model using float parameters would require: M_train ~
// 7 billion * 4 bytes * 4 = 112 GB" (no margin, nothing added yet).
TEST(Seed002, SevenBillionTrainingIs112GB) {
  Evaluation e = evaluate_paper(training("7e9", "gradients_and_states = \"included\"\nmargin = 0\n"));
  EXPECT_EQ(e.item_bytes("continuum.training_factor", MEMPLAN_ROLE_OVERHEAD), 0u);  // the plan already holds 4 x 28
  EXPECT_DOUBLE_EQ(gb(e.breakdown().peak), 112);
  // The full rule on the same model: (4 x 28 + 28 + 56) x 1.2 = 235.2 GB.
  EXPECT_DOUBLE_EQ(gb(evaluate_paper(training("7e9", "")).breakdown().peak), 235.2);
}

// "A 7B model using BF16 would have a storage size of 14 billion bytes ~
// 14 GB", and M_inf ~ S: the rule adds nothing to serving.
TEST(Seed002, SevenBillionInBf16Is14GBToServe) {
  Evaluation e = evaluate_paper("name = \"seed002-infer\"\nmode = \"infer\"\n[model]\nparams = 7e9\n[precision]\n"
                          "use = \"bf16\"\n[[strategy]]\nuse = \"continuum-rule\"\n");
  EXPECT_EQ(e.breakdown().peak, 14'000'000'000u);
  EXPECT_EQ(e.component(MEMPLAN_ROLE_OVERHEAD), 0u);
}

std::string library() { return " (plugin library " + plugin_dir() + "/memplan-continuum-rule.so)"; }

// Lines: 1 name, 2 mode, 3 [model], 4 params, 5 [precision], 6 use, 7 [optimizer], 8 use, 9 [activations],
// 10 use, 11 [[strategy]], 12 use, 13 option.
TEST(Seed002, RuleOptionsAreChecked) {
  EXPECT_EQ(error_of(training("7e9", "training_factor = 0.5\n"), "c.toml"),
            "c.toml:13:19: error: in [[strategy]] #1, strategy plugin 'continuum-rule', option 'training_factor': "
            "must be at least 1 (M_train >= M_inf), got 0.5" + library());
  EXPECT_EQ(error_of(training("7e9", "gradients_and_states = \"twice\"\n"), "c.toml"),
            "c.toml:13:24: error: in [[strategy]] #1, strategy plugin 'continuum-rule', option 'gradients_and_states': "
            "must be \"added\" or \"included\", not \"twice\"" + library());
}

}  // namespace
}  // namespace memplan::testing
