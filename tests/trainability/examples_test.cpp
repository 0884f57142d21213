// The hand-checked figures in the header comments of examples/train-freeze-*,
// train-lora-* and train-qlora-*.toml (the derivations are in those comments),
// evaluated through the plugins.
#include <gtest/gtest.h>

#include "trainability_support.hpp"

namespace memplan::testing::trainability {
namespace {

TEST(TrainabilityExamples, FreezeLlama2LastEightLayers) {
  Evaluation evaluation = example("train-freeze-llama2-7b-last-8-layers.toml");
  EXPECT_EQ(evaluation.breakdown().params_trainable, 1'750'138'880.0);
  EXPECT_EQ(role(evaluation, MEMPLAN_ROLE_WEIGHTS), 13'476'831'232u);
  EXPECT_EQ(role(evaluation, MEMPLAN_ROLE_GRADIENTS), 3'500'277'760u);
  EXPECT_EQ(role(evaluation, MEMPLAN_ROLE_MASTER_WEIGHTS), 7'000'555'520u);
  EXPECT_EQ(role(evaluation, MEMPLAN_ROLE_OPTIMIZER_STATES), 14'001'111'040u);
  // The example's activations at the forward's end, plus the loss's moment at backward's start
  // (lifetime backward_start): the fp32 logits and softmax, 1,048,576,000, which autograd frees once
  // the loss and the head have run backward (with 8 micro-batches the head's gradient exists already:
  // nothing taken off). The peak, at the forward's end, does not move.
  EXPECT_EQ(role(evaluation, MEMPLAN_ROLE_ACTIVATIONS), 17'263'755'264u + 1'115'684'864u + 1'048'576'000u);
  EXPECT_EQ(evaluation.breakdown().peak, 56'358'215'680u);
  EXPECT_TRUE(evaluation.estimator().fits());
}

// bitsandbytes dequantizes each 4-bit matrix to bf16 for its matmul, in forward
// and in backward (MatMul4Bit): activations.dequantized_weight holds the largest
// at the forward's high point and while a layer's backward runs. Mixtral: an expert's 4,096 x 14,336 x 2 = 117,440,512
// bytes; Llama-65B: the MLP's 8,192 x 22,016 x 2 = 360,710,144 bytes.
constexpr uint64_t kMixtralDequantized = 4096ull * 14336 * 2;
constexpr uint64_t kLlama65Dequantized = 8192ull * 22016 * 2;

TEST(TrainabilityExamples, FreezeMixtralTwoExpertsOverAnNf4Base) {
  Evaluation evaluation = example("train-freeze-mixtral-2-experts-nf4-80gb.toml");
  EXPECT_EQ(evaluation.breakdown().params_trainable, 2'114'125'824.0);
  EXPECT_EQ(role(evaluation, MEMPLAN_ROLE_WEIGHTS), 27'620'884'480u);
  EXPECT_EQ(role(evaluation, MEMPLAN_ROLE_GRADIENTS), 4'228'251'648u);
  EXPECT_EQ(role(evaluation, MEMPLAN_ROLE_MASTER_WEIGHTS), 8'456'503'296u);
  EXPECT_EQ(role(evaluation, MEMPLAN_ROLE_OPTIMIZER_STATES), 16'913'006'592u);
  EXPECT_EQ(role(evaluation, MEMPLAN_ROLE_ACTIVATIONS), 811'745'280u + 2 * kMixtralDequantized);
  // The example's header: at backward's end the final norm (16,777,216), not the freed logits, is
  // the largest activation beside every gradient.
  EXPECT_EQ(evaluation.breakdown().peak, 57'499'811'840u + kMixtralDequantized);
  EXPECT_TRUE(evaluation.estimator().fits());
}

TEST(TrainabilityExamples, LoraLlama2RankEightQueryValue) {
  Evaluation evaluation = example("train-lora-llama2-7b-r8-qv.toml");
  EXPECT_EQ(evaluation.breakdown().params_trainable, 4'194'304.0);
  EXPECT_EQ(evaluation.breakdown().params_total, 6'742'609'920.0);
  EXPECT_EQ(role(evaluation, MEMPLAN_ROLE_WEIGHTS), 13'485'219'840u);
  EXPECT_EQ(role(evaluation, MEMPLAN_ROLE_GRADIENTS), 8'388'608u);
  EXPECT_EQ(role(evaluation, MEMPLAN_ROLE_MASTER_WEIGHTS), 16'777'216u);
  EXPECT_EQ(role(evaluation, MEMPLAN_ROLE_OPTIMIZER_STATES), 33'554'432u);
  // The example's 18,379,440,128 at the forward's end, plus the loss's moment at backward's start,
  // the fp32 logits and softmax again (1,048,576,000; the head is frozen: no gradient to take off).
  EXPECT_EQ(role(evaluation, MEMPLAN_ROLE_ACTIVATIONS), 18'379'440'128u + 1'048'576'000u);
  EXPECT_EQ(evaluation.breakdown().peak, 31'923'380'224u);
  EXPECT_TRUE(evaluation.estimator().fits());
}

// examples/train-lora-qwen3-30b-a3b.toml (issue 12 item 5): rank 16 on q, k,
// v and o of the 48 layers, the hand check in the file's header.
TEST(TrainabilityExamples, LoraQwen3MoeAttention) {
  Evaluation evaluation = example("train-lora-qwen3-30b-a3b.toml");
  EXPECT_EQ(evaluation.breakdown().params_trainable, 13'369'344.0);  // 278,528 x 48
  EXPECT_EQ(evaluation.breakdown().params_total, 30'545'491'968.0);
  EXPECT_EQ(role(evaluation, MEMPLAN_ROLE_WEIGHTS), 61'090'983'936u);
  EXPECT_EQ(role(evaluation, MEMPLAN_ROLE_GRADIENTS), 26'738'688u);
  EXPECT_EQ(role(evaluation, MEMPLAN_ROLE_MASTER_WEIGHTS), 53'477'376u);
  EXPECT_EQ(role(evaluation, MEMPLAN_ROLE_OPTIMIZER_STATES), 106'954'752u);
  EXPECT_TRUE(evaluation.estimator().fits());
}

TEST(TrainabilityExamples, QloraMixtralExpertsSeedCaseC) {
  Evaluation evaluation = example("train-qlora-mixtral-experts-r16-44gb.toml");
  EXPECT_EQ(evaluation.breakdown().params_trainable, 226'492'416.0);
  EXPECT_EQ(role(evaluation, MEMPLAN_ROLE_WEIGHTS), 23'956'619'264u + 526'917'632u + 452'984'832u);
  EXPECT_EQ(role(evaluation, MEMPLAN_ROLE_GRADIENTS), 452'984'832u);
  EXPECT_EQ(role(evaluation, MEMPLAN_ROLE_MASTER_WEIGHTS), 0u);
  EXPECT_EQ(role(evaluation, MEMPLAN_ROLE_OPTIMIZER_STATES), 1'811'939'328u);
  EXPECT_EQ(role(evaluation, MEMPLAN_ROLE_ACTIVATIONS), 811'745'280u + 2 * kMixtralDequantized);
  EXPECT_EQ(evaluation.breakdown().peak, 27'482'611'712u + kMixtralDequantized);  // the header's, as above
  EXPECT_TRUE(evaluation.estimator().fits());
}

TEST(TrainabilityExamples, QloraLlamaSixtyFiveBillionOnA48GigabyteGpu) {
  Evaluation evaluation = example("train-qlora-llama-65b-48gb.toml");
  EXPECT_EQ(evaluation.breakdown().params_trainable, 799'539'200.0);
  EXPECT_EQ(role(evaluation, MEMPLAN_ROLE_WEIGHTS), 33'407'713'280u + 1'051'213'824u + 1'599'078'400u);
  EXPECT_EQ(role(evaluation, MEMPLAN_ROLE_GRADIENTS), 1'599'078'400u);
  EXPECT_EQ(role(evaluation, MEMPLAN_ROLE_OPTIMIZER_STATES), 6'396'313'600u);
  EXPECT_EQ(role(evaluation, MEMPLAN_ROLE_ACTIVATIONS),
            1'342'177'280u + 295'698'432u + 403'701'760u + 2 * kLlama65Dequantized);
  // The example's header: the logits and softmax (262,144,000) are freed before the recomputation.
  EXPECT_EQ(evaluation.breakdown().peak, 45'832'830'976u + kLlama65Dequantized);
  EXPECT_LT(static_cast<double>(evaluation.breakdown().peak), 48 * kGB);
  EXPECT_TRUE(evaluation.estimator().fits());
}

}  // namespace
}  // namespace memplan::testing::trainability
