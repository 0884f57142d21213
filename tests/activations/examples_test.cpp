// The hand-checked figures in the header comments of
// examples/train-activations-*.toml and examples/train-overhead-*.toml (the
// derivations are in those comments), evaluated through the plugins.
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

constexpr int32_t kAct = MEMPLAN_ROLE_ACTIVATIONS;

TEST(ActivationExamples, LogitsOfLlama3EightBillion) {
  Evaluation e = example("train-activations-logits-llama3-8b.toml");
  EXPECT_EQ(e.item_bytes("activations.logits", kAct), 4'202'692'608u);
  EXPECT_EQ(e.item_bytes("activations.cross_entropy", kAct), 4'202'692'608u);
  // The logits and the softmax are the micro-batch's own, freed by the loss's and the head's
  // backward: at backward's start they are the loss's moment, less the head's gradient
  // 131,334,144: 8,274,051,072 (the example's header). Every activation item:
  // 45,080,379,392 + 8,274,051,072.
  EXPECT_EQ(e.item_bytes("activations.loss_backward", kAct), 8'274'051'072u);
  EXPECT_EQ(e.component(kAct), 53'354'430'464u);
  // The forward's end and backward's start are equal (59,133,336,576); the first is reported.
  EXPECT_EQ(e.breakdown().peak, 59'133'336'576u);
  EXPECT_EQ(e.breakdown().timeline[kBackward], 59'133'336'576u);
  EXPECT_EQ(e.breakdown().peak_phase, kForward);
  EXPECT_TRUE(e.estimator().fits());
}

TEST(ActivationExamples, OutputLayerOfGpt3LastStage) {
  Evaluation e = example("train-activations-output-layer-gpt3-tp8-pp8.toml");
  EXPECT_EQ(e.item_bytes("layers.84-95.activations", kAct), 1'283'457'024u);
  EXPECT_EQ(e.item_bytes("activations.final_norm", kAct) + e.item_bytes("activations.logits", kAct), 65'011'712u);
  EXPECT_EQ(e.item_bytes("activations.embedding_dropout", kAct), 0u);
  EXPECT_EQ(e.item_bytes("activations.loss_forward", kAct), 26'214'400u);  // 2 sbv / t
  // The loss's backward transient (2 sbv / t) ends before the first layer's attention core is
  // recomputed (251,658,240 B), which is larger: it adds nothing at the backward high point.
  EXPECT_EQ(e.item_bytes("activations.loss_backward", kAct), 0u);
  EXPECT_EQ(e.component(kAct), 1'626'341'376u);
  // The fp32 logits (52,428,800) are freed by the loss's and the head's backward, before the first
  // recomputation: with the gradients accumulating, backward = P + G + A + working set =
  // 39,162,654,720 + 5,594,664,960 + 1,296,039,936 + 251,658,240 = 46,305,017,856 (the loss's moment,
  // 78,643,200, is below the working set).
  EXPECT_EQ(e.breakdown().peak, 46'305'017'856u);
  EXPECT_TRUE(e.estimator().fits());
}

TEST(ActivationExamples, RatioSeed001TenBillion) {
  Evaluation e = example("train-activations-ratio-seed001-10b.toml");
  EXPECT_EQ(e.component(kAct), 20'000'000'000u);
  EXPECT_EQ(e.breakdown().peak, 140'000'000'000u);
  EXPECT_TRUE(e.estimator().fits());
}

TEST(OverheadExamples, CudaContext) {
  Evaluation e = example("train-overhead-cuda-context.toml");
  EXPECT_EQ(e.component(MEMPLAN_ROLE_OVERHEAD) + e.component(MEMPLAN_ROLE_BUFFERS), 570'425'344u);
  EXPECT_EQ(e.breakdown().peak, 50'806'136'832u);
}

TEST(OverheadExamples, Allocator) {
  Evaluation e = example("train-overhead-allocator.toml");
  EXPECT_EQ(e.item_bytes("layers.0-31.allocator.rounding", MEMPLAN_ROLE_OVERHEAD) +
                e.item_bytes("allocator.rounding", MEMPLAN_ROLE_OVERHEAD),
            243'269'632u);
  // The fp32 logits and the saved softmax (1,048,576,000 B each, live in
  // forward and backward) keep their segments through the optimizer step
  // (allocator 1.5, "Logits-sized requests"): allocator.stream_pools adds
  // 2,097,152,000 there, to 4,087,618,068 before; the peak (forward) stays.
  // The logits and the softmax are freed by the loss's and the head's backward, so backward's
  // start holds them as the loss's moment (lifetime backward_start), whose fragmentation,
  // 0.1 x 2,097,152,000 = 209,715,200, is an item of its own (alive then, not in forward):
  // 4,087,618,068 + 2,097,152,000 + 209,715,200 = 6,394,485,268.
  EXPECT_EQ(e.item_bytes("allocator.stream_pools", MEMPLAN_ROLE_OVERHEAD), 2'097'152'000u);
  EXPECT_EQ(e.component(MEMPLAN_ROLE_OVERHEAD), 6'394'485'268u);
  EXPECT_EQ(e.breakdown().peak, 54'323'329'556u);
}

TEST(OverheadExamples, CommBuffers) {
  Evaluation e = example("train-overhead-comm-buffers.toml");
  EXPECT_EQ(e.item_bytes("nccl.buffers", MEMPLAN_ROLE_BUFFERS), 308'281'344u);
  EXPECT_EQ(e.item_bytes("deepspeed.reduce_bucket", MEMPLAN_ROLE_BUFFERS), 2'000'000'000u);
  // The data-parallel communicator's own memory under cuMem: (3 x 32 p2p
  // channels + 2) x 2 MiB = 205,520,896 (plugins/strategies/comm-buffers/README.md).
  EXPECT_EQ(e.item_bytes("nccl.communicators", MEMPLAN_ROLE_BUFFERS), 205'520'896u);
  // On H100 SXM (NVLink SHARP) the 8-GPU data group also sets up NVLS: (24
  // collective channels + a credit buffer) x 2 MiB = 52,428,800; and ZeRO-2
  // all-reduces each flushed bucket (DeepSpeed v0.12.4 on: allreduce_bucket's
  // dist.all_reduce of the flattened gradients), a large sum all-reduce on 8
  // local GPUs that NCCL's tuner sends to NVLS: its buffer, 32 MiB x 8 =
  // 268,435,456 (plugins/strategies/comm-buffers/README.md, NVLS).
  EXPECT_EQ(e.item_bytes("nccl.nvls_setup", MEMPLAN_ROLE_BUFFERS), 52'428'800u);
  EXPECT_EQ(e.item_bytes("nccl.nvls", MEMPLAN_ROLE_BUFFERS), 268'435'456u);
  // The example's peak 30,257,682,944 (its header): the first layer's backward, with the buckets and a
  // flush's copy of one (3,000,000,000), above the loss's (509,083,648), which comes before any gradient hook.
  EXPECT_EQ(e.item_bytes("deepspeed.allreduce_copy", MEMPLAN_ROLE_BUFFERS), 1'000'000'000u);
  EXPECT_EQ(e.breakdown().peak, 30'257'682'944u + 205'520'896u + 52'428'800u + 268'435'456u);
}

TEST(OverheadExamples, Seed002ContinuumRule) {
  Evaluation e = example("train-overhead-seed002-continuum-rule-13b.toml");
  EXPECT_EQ(e.item_bytes("continuum.training_factor", MEMPLAN_ROLE_OVERHEAD), 156'000'000'000u);
  EXPECT_EQ(e.breakdown().peak, 436'800'000'000u);
}

}  // namespace
}  // namespace memplan::testing
