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
  EXPECT_EQ(e.component(kAct), 45'080'379'392u);
  EXPECT_EQ(e.breakdown().peak, 59'264'670'720u);
  EXPECT_EQ(e.breakdown().peak_phase, kBackward);
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
  EXPECT_EQ(e.breakdown().peak, 46'357'446'656u);
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
  // 2,097,152,000 there, to 4,087,618,068 before; the peak (backward) stays.
  EXPECT_EQ(e.item_bytes("allocator.stream_pools", MEMPLAN_ROLE_OVERHEAD), 2'097'152'000u);
  EXPECT_EQ(e.component(MEMPLAN_ROLE_OVERHEAD), 6'184'770'068u);
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
  // collective channels + a credit buffer) x 2 MiB = 52,428,800; ZeRO
  // reduce-scatters its gradients, which NCCL keeps on rings: no NVLS buffer.
  EXPECT_EQ(e.item_bytes("nccl.nvls_setup", MEMPLAN_ROLE_BUFFERS), 52'428'800u);
  EXPECT_EQ(e.item_bytes("nccl.nvls", MEMPLAN_ROLE_BUFFERS), 0u);
  EXPECT_EQ(e.breakdown().peak, 30'306'258'944u + 205'520'896u + 52'428'800u);
}

TEST(OverheadExamples, Seed002ContinuumRule) {
  Evaluation e = example("train-overhead-seed002-continuum-rule-13b.toml");
  EXPECT_EQ(e.item_bytes("continuum.training_factor", MEMPLAN_ROLE_OVERHEAD), 156'000'000'000u);
  EXPECT_EQ(e.breakdown().peak, 436'800'000'000u);
}

}  // namespace
}  // namespace memplan::testing
