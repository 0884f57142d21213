// The optimizer step's temporaries, option `implementation` (torch.optim's
// for-loop / foreach / fused). Hand derivations beside each test; the counts
// of parameter-sized temporaries are read from the implementations' source
// (plugins/optimizers/*/plugin.cpp quote the lines):
//   optimizer   for-loop (x largest tensor)   foreach (x all)   fused
//   sgd, sgdm   0                             0                 0
//   adam(w)     3                             1                 0
//   lion        2                             1                 0
//   adafactor   2                             1                 (none exists)
#include <gtest/gtest.h>

#include <string>

#include "scenarios.hpp"

namespace memplan::testing::optimizers {
namespace {

constexpr int32_t kStates = MEMPLAN_ROLE_OPTIMIZER_STATES;

uint64_t temporaries(const Evaluation& evaluation) {
  return bytes_of(evaluation, kStates, MEMPLAN_LIFETIME_TRANSIENT_OPTIMIZER);
}

Evaluation tiny(const std::string& optimizer, const std::string& extra = "") {
  return evaluate_paper(train(kTinyModel, "use = \"fp32\"", optimizer, extra));
}

// 1e9 parameters, mixed bf16, Adam foreach: one fp32 list the size of all
// parameters, 4 x 1e9 bytes, alive only in the optimizer step:
//   persistent  weights 2 + master 4 + moments 8 = 14e9
//   optimizer   14e9 + gradients 2e9 + temporaries 4e9 = 20e9
//   backward    14e9 + gradients 2e9 = 16e9, as with the fused default
TEST(StepTemporaries, AdamForeachIsOneCopyOfTheParameters) {
  for (const char* adam : {"adam", "adamw"}) {
    const std::string optimizer = std::string("use = \"") + adam + "\"";
    const Evaluation foreach = evaluate_paper(
        train(params_model(1e9), "use = \"mixed-bf16\"", optimizer + "\nimplementation = \"foreach\""));
    EXPECT_EQ(temporaries(foreach), 4'000'000'000u) << adam;
    EXPECT_EQ(optimizer_step(foreach), 20'000'000'000u) << adam;
    EXPECT_EQ(foreach.breakdown().timeline[kBackward], 16'000'000'000u) << adam;
    EXPECT_EQ(foreach.breakdown().peak_phase, kOptimizerStep) << adam;

    const Evaluation fused_default = evaluate_paper(train(params_model(1e9), "use = \"mixed-bf16\"", optimizer));
    const Evaluation fused = evaluate_paper(
        train(params_model(1e9), "use = \"mixed-bf16\"", optimizer + "\nimplementation = \"fused\""));
    for (const Evaluation* e : {&fused_default, &fused}) {
      EXPECT_EQ(temporaries(*e), 0u) << adam;
      EXPECT_EQ(optimizer_step(*e), 16'000'000'000u) << adam;
    }
  }
}

// torch 2.0's _multi_tensor_adam(w) keeps two lists at the step: exp_avg_sq_sqrt and denom =
// torch._foreach_add(exp_avg_sq_sqrt, eps), out of place (in place from torch 2.1, pytorch PR #104780):
// foreach_lists = 2 doubles the list, 2 x 4 x 1e9 = 8e9; the optimizer step 16e9 + 8e9 = 24e9.
TEST(StepTemporaries, TorchTwoZeroForeachKeepsTwoLists) {
  const Evaluation two = evaluate_paper(train(params_model(1e9), "use = \"mixed-bf16\"",
                                              "use = \"adamw\"\nimplementation = \"foreach\"\nforeach_lists = 2"));
  EXPECT_EQ(temporaries(two), 8'000'000'000u);
  EXPECT_EQ(optimizer_step(two), 24'000'000'000u);
  EXPECT_NE(error_of(train(params_model(1e9), "use = \"fp32\"", "use = \"adam\"\nforeach_lists = 2"))
                .find("counts the lists of the \"foreach\" step, but implementation is \"fused\""),
            std::string::npos);
  EXPECT_NE(error_of(train(params_model(1e9), "use = \"fp32\"",
                           "use = \"adam\"\nimplementation = \"foreach\"\nforeach_lists = 9"))
                .find("from 0 to 8, got 9"),
            std::string::npos);
  EXPECT_NE(error_of(train(params_model(1e9), "use = \"fp32\"",
                           "use = \"sgdm\"\nimplementation = \"foreach\"\nforeach_lists = 2"))
                .find("sgdm's foreach step makes no parameter-sized lists"),
            std::string::npos);
}

// In the states' dtype: pure bf16 (2-byte states) makes a 2-byte list.
TEST(StepTemporaries, InTheStatesDtype) {
  const Evaluation e =
      evaluate_paper(train(params_model(1e9), "use = \"bf16\"", "use = \"adam\"\nimplementation = \"foreach\""));
  EXPECT_EQ(temporaries(e), 2'000'000'000u);
}

// With ZeRO stage 1 each rank steps only its shard: 4 x 1e9 / 4 = 1e9.
//   optimizer = 2e9 + (4 + 8) x 1e9 / 4 + gradients 2e9 + 1e9 = 8e9
TEST(StepTemporaries, ShardedWithTheStates) {
  const Evaluation e = evaluate_paper(train(params_model(1e9), "use = \"mixed-bf16\"",
                                      "use = \"adamw\"\nimplementation = \"foreach\"", data_parallel_zero(4, 1)));
  EXPECT_EQ(temporaries(e), 1'000'000'000u);
  EXPECT_EQ(optimizer_step(e), 8'000'000'000u);
}

// Tiny model, fp32 states. foreach: one list of all 202,048 parameters,
// 808,192 bytes, for every optimizer that has one.
TEST(StepTemporaries, ForeachOnTheTinyModel) {
  for (const char* optimizer : {"adam", "adamw", "lion", "adafactor"}) {
    const Evaluation e = tiny(std::string("use = \"") + optimizer + "\"\nimplementation = \"foreach\"");
    EXPECT_EQ(temporaries(e), 808'192u) << optimizer;
    EXPECT_EQ(e.item_bytes("layers.0-1.mlp.foreach_temps", kStates), 24'576u * 4 * 2) << optimizer;
  }
}

// for-loop: the largest tensor is the 1000 x 64 embedding (or LM head),
// 64,000 fp32 elements = 256,000 bytes. Adam: 3 of them, 768,000 (sqrt() and
// the quotient of this parameter, the previous parameter's denom); Lion and
// Adafactor: 2, 512,000. Adafactor's default is the for-loop, as
// torch.optim.Adafactor's.
TEST(StepTemporaries, ForLoopOnTheTinyModel) {
  EXPECT_EQ(temporaries(tiny("use = \"adam\"\nimplementation = \"for-loop\"")), 768'000u);
  EXPECT_EQ(temporaries(tiny("use = \"adamw\"\nimplementation = \"for-loop\"")), 768'000u);
  EXPECT_EQ(temporaries(tiny("use = \"lion\"\nimplementation = \"for-loop\"")), 512'000u);
  EXPECT_EQ(temporaries(tiny("use = \"adafactor\"\nimplementation = \"for-loop\"")), 512'000u);
  const Evaluation adafactor = tiny("use = \"adafactor\"");
  EXPECT_EQ(temporaries(adafactor), 512'000u);
  EXPECT_EQ(adafactor.item_bytes("optimizer.for_loop_temps", kStates), 512'000u);
}

// Tensor parallelism 2 halves the vocabulary: the largest tensor on a rank is
// 500 x 64 = 32,000 elements; Adam's 3 x 32,000 x 4 = 384,000 bytes.
TEST(StepTemporaries, ForLoopLargestTensorOnTheRank) {
  EXPECT_EQ(temporaries(tiny("use = \"adam\"\nimplementation = \"for-loop\"",
                             "[[strategy]]\nuse = \"tensor-parallel\"\nsize = 2\n")),
            384'000u);
}

// torch.optim.SGD (momentum or not) updates in place in every implementation.
TEST(StepTemporaries, SgdHasNone) {
  for (const char* sgd : {"sgd", "sgdm"}) {
    const Evaluation fused = tiny(std::string("use = \"") + sgd + "\"");
    for (const char* implementation : {"for-loop", "foreach", "fused"}) {
      const Evaluation e =
          tiny(std::string("use = \"") + sgd + "\"\nimplementation = \"" + implementation + "\"");
      EXPECT_EQ(temporaries(e), 0u) << sgd << " " << implementation;
      EXPECT_EQ(e.breakdown().sum, fused.breakdown().sum) << sgd << " " << implementation;
    }
  }
}

TEST(StepTemporaries, Errors) {
  // Line 18 of the tiny scenario is the first key after `use` in [optimizer].
  EXPECT_EQ(error_of(train(kTinyModel, "use = \"fp32\"", "use = \"adam\"\nimplementation = \"fast\""), "a.toml"),
            "a.toml:18:18: error: in [optimizer], optimizer plugin 'adam', option 'implementation': is \"fast\", not "
            "an implementation; use \"for-loop\", \"foreach\" or \"fused\" (plugin library " +
                plugin_dir() + "/memplan-adam.so)");
  EXPECT_EQ(
      error_of(train(kTinyModel, "use = \"fp32\"", "use = \"adafactor\"\nimplementation = \"fused\""), "a.toml"),
      "a.toml:18:18: error: in [optimizer], optimizer plugin 'adafactor', option 'implementation': is \"fused\", but "
      "adafactor has no fused implementation in torch.optim; use \"for-loop\" or \"foreach\" (plugin library " +
          plugin_dir() + "/memplan-adafactor.so)");
  // A params-only model has no tensor shapes to size a for-loop step by.
  EXPECT_EQ(error_of(train(params_model(1e9), "use = \"fp32\"", "use = \"adam\"\nimplementation = \"for-loop\""),
                     "a.toml"),
            "a.toml:12:18: error: in [optimizer], optimizer plugin 'adam', option 'implementation': is \"for-loop\", "
            "whose temporaries are the size of the largest parameter tensor, which a model given only as params does "
            "not tell; give the architecture (a preset, or layers, hidden, ...), or use \"foreach\" or \"fused\" "
            "(plugin library " + plugin_dir() + "/memplan-adam.so)");
  // SGD has no temporaries to size, so the for-loop needs no shapes.
  EXPECT_EQ(error_of(train(params_model(1e9), "use = \"fp32\"", "use = \"sgdm\"\nimplementation = \"for-loop\""),
                     "a.toml"),
            "");
}

}  // namespace
}  // namespace memplan::testing::optimizers

namespace memplan::testing {
namespace {

// Trained experts split off by 'freeze' are whole expert matrices: Mixtral
// with 2 of 8 experts training per layer, AdamW's for-loop step holds 3
// temporaries of the largest trainable tensor, one expert projection of
// 4096 x 14336 = 58,720,256 elements: 3 x 58,720,256 x 4 bytes = 704,643,072
// (not a quarter of it, as when the item was read as all 8 experts' shapes).
TEST(StepTemporaries, ForLoopOverFreezesTrainedExperts) {
  Evaluation e = evaluate_paper(
      "name = \"t\"\nmode = \"train\"\n[model]\npreset = \"mixtral-8x7b\"\n[batch]\nseq_len = 1024\n"
      "[precision]\nuse = \"mixed-bf16\"\n[optimizer]\nuse = \"adamw\"\nimplementation = \"for-loop\"\n"
      "[activations]\nuse = \"none\"\n[[strategy]]\nuse = \"freeze\"\ntrain = \"experts\"\nexperts = 2\n");
  EXPECT_EQ(e.item_bytes("optimizer.for_loop_temps", MEMPLAN_ROLE_OPTIMIZER_STATES), 704'643'072u);
}

}  // namespace
}  // namespace memplan::testing
