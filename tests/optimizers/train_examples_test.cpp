// The hand-checked figures in the header comments of
// examples/train-optimizer-*.toml and examples/train-precision-*.toml (the
// derivations are in those comments), evaluated through the plugins.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "scenarios.hpp"

namespace memplan::testing::optimizers {
namespace {

constexpr int32_t kStates = MEMPLAN_ROLE_OPTIMIZER_STATES;
constexpr uint64_t kLlama2Params = 6'738'415'616;

Evaluation example(const std::string& name) {
  const std::string path = source_dir() + "/examples/" + name;
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  std::ostringstream text;
  text << in.rdbuf();
  return evaluate_paper(text.str(), path);
}

TEST(TrainExamples, Lion) {
  const Evaluation e = example("train-optimizer-lion.toml");
  EXPECT_EQ(e.component(MEMPLAN_ROLE_WEIGHTS), 13'476'831'232u);
  EXPECT_EQ(e.component(MEMPLAN_ROLE_GRADIENTS), 13'476'831'232u);
  EXPECT_EQ(e.component(MEMPLAN_ROLE_MASTER_WEIGHTS), 13'476'831'232u);
  EXPECT_EQ(e.component(kStates), 13'476'831'232u);
  EXPECT_EQ(optimizer_step(e), 8 * kLlama2Params);
  EXPECT_EQ(optimizer_step(e), 53'907'324'928u);
}

TEST(TrainExamples, Adafactor) {
  const Evaluation e = example("train-optimizer-adafactor.toml");
  EXPECT_EQ(bytes_of(e, kStates, MEMPLAN_LIFETIME_PERSISTENT), 2'836'992u * 4);
  EXPECT_EQ(e.item_bytes("optimizer.for_loop_temps", kStates), 1'048'576'000u);
  EXPECT_EQ(e.component(MEMPLAN_ROLE_WEIGHTS), 2 * kLlama2Params);
  EXPECT_EQ(optimizer_step(e), 28'013'586'432u);
}

TEST(TrainExamples, Adam8bit) {
  const Evaluation e = example("train-optimizer-adam-8bit.toml");
  EXPECT_EQ(e.component(kStates), 13'687'406'720u);
  EXPECT_EQ(e.component(kStates), 2 * kLlama2Params + 8 * kLlama2Params / 256);
  EXPECT_EQ(optimizer_step(e), 40'641'069'184u);
}

// examples/train-optimizer-adam-4bit.toml's hand check: torchao's packed
// 4-bit codes and one fp32 scale per 128 elements, 1.0625 B per parameter,
// and the compiled step's two fp32 moments of the 131,072,000-element
// embedding.
TEST(TrainExamples, Adam4bit) {
  const Evaluation e = example("train-optimizer-adam-4bit.toml");
  EXPECT_EQ(bytes_of(e, kStates, MEMPLAN_LIFETIME_PERSISTENT), 7'159'566'592u);
  EXPECT_EQ(bytes_of(e, kStates, MEMPLAN_LIFETIME_PERSISTENT), kLlama2Params + kLlama2Params / 16);
  EXPECT_EQ(bytes_of(e, kStates, MEMPLAN_LIFETIME_TRANSIENT_OPTIMIZER), 1'048'576'000u);
  EXPECT_EQ(optimizer_step(e), 35'161'805'056u);
}

TEST(TrainExamples, AdamWForeach) {
  const Evaluation e = example("train-optimizer-adamw-foreach.toml");
  EXPECT_EQ(bytes_of(e, kStates, MEMPLAN_LIFETIME_TRANSIENT_OPTIMIZER), 3'369'207'808u);
  EXPECT_EQ(e.component(MEMPLAN_ROLE_MASTER_WEIGHTS), 3'369'207'808u);
  EXPECT_EQ(bytes_of(e, kStates, MEMPLAN_LIFETIME_PERSISTENT), 6'738'415'616u);
  EXPECT_EQ(optimizer_step(e), 6 * kLlama2Params);
  EXPECT_EQ(optimizer_step(e), 40'430'493'696u);
  // The example's claim: the step, not backward, is the peak.
  EXPECT_EQ(e.breakdown().peak_phase, kOptimizerStep);
}

TEST(TrainExamples, Fp8) {
  const Evaluation e = example("train-precision-fp8.toml");
  EXPECT_EQ(e.component(MEMPLAN_ROLE_BUFFERS), 12'952'010'752u);
  EXPECT_EQ(e.component(MEMPLAN_ROLE_WEIGHTS), 13'476'831'232u);
  EXPECT_EQ(e.component(MEMPLAN_ROLE_GRADIENTS), 26'953'662'464u);
  EXPECT_EQ(e.component(MEMPLAN_ROLE_MASTER_WEIGHTS), 3'369'207'808u);
  EXPECT_EQ(e.component(kStates), 6'738'415'616u);
  EXPECT_EQ(optimizer_step(e), 63'490'127'872u);
}

// PyTorch AMP over fp32 weights (examples/train-precision-autocast.toml):
// BERT-large, P = 335,141,888; 4 B weights, 4 B gradients, 8 B AdamW moments,
// no master copy; the fp16 casts 2 x (24 x 12,592,128 + 1,049,600) =
// 606,521,344 B, alive from forward to backward (lifetime activation).
TEST(TrainExamples, Autocast) {
  const Evaluation e = example("train-precision-autocast.toml");
  EXPECT_EQ(e.component(MEMPLAN_ROLE_WEIGHTS), 1'340'567'552u);
  EXPECT_EQ(e.component(MEMPLAN_ROLE_GRADIENTS), 1'340'567'552u);
  EXPECT_EQ(e.component(MEMPLAN_ROLE_MASTER_WEIGHTS), 0u);
  EXPECT_EQ(bytes_of(e, kStates, MEMPLAN_LIFETIME_PERSISTENT), 2'681'135'104u);
  EXPECT_EQ(bytes_named(e, ".autocast"), 606'521'344u);
  EXPECT_EQ(bytes_of(e, MEMPLAN_ROLE_BUFFERS, MEMPLAN_LIFETIME_ACTIVATION), 606'521'344u);
}

TEST(TrainExamples, MegatronFp16MainGrads) {
  const Evaluation e = example("train-precision-megatron-fp16-main-grads.toml");
  // 4 + 16/8 = 6 bytes per parameter, 1e9 parameters.
  EXPECT_EQ(e.breakdown().sum, 6'000'000'000u);
  EXPECT_EQ(e.breakdown().peak, 6'000'000'000u);
  EXPECT_EQ(e.breakdown().peak_phase, kOptimizerStep);
}

}  // namespace
}  // namespace memplan::testing::optimizers
