// The core's size solver (core/src/estimate/limits.cpp): "max" micro-batch or sequence
// length. Figures are hand-derived below for Llama-2-7B, ZeRO-3 over 8 ranks,
// mixed bf16 + AdamW, megatron activations with FlashAttention and no dropout,
// grad_accum 1, on an 80 GiB GPU (85,899,345,920 bytes).
//
// Persistent per GPU: (2 + 4 + 8) x 6,738,415,616 / 8       = 11,792,227,328
// Largest single gradient group (one layer): 202,383,360 x 2 / 8 = 50,595,840
// Activations per sequence per layer at s = 4096 (see korthikanti tests for
// the terms): 539,492,352 = 131,712 bytes per token; x 32 layers:
//   17,263,755,264 per sequence, 4,214,784 per token.
// Outside the layers, per sequence: the final norm's input and output
// 2 x 2 x 4096 x 4096 = 67,108,864, fp32 logits 4 x 4096 x 32000 = 524,288,000
// and the cross-entropy's saved fp32 softmax, the same again:
//   1,115,684,864 per sequence, 272,384 per token.
// Total: 18,379,440,128 per sequence, 4,487,168 per token.
// The logits and the softmax (1,048,576,000 per sequence, 256,000 per token) are
// the micro-batch's own: autograd frees them once the loss and the LM head have
// run, before any layer's backward, so they are not stored activations but part
// of backward's start (lifetime backward_start, plugin_abi.h): the loss's moment
// S = saves - the head's gradient 4096 x 32000 x 2 / 8 = 32,768,000 (the loss's
// fp32 tensors are freed before the head's weight gradient exists; floor: the
// head's input gradient 2 x b s x 32000, smaller here).
// Peak (start of backward) = P + G1 + A(stored) + S
//   = 11,842,823,168 + activations - 32,768,000 = 11,810,055,168 + activations.
//   micro_batch: (85,899,345,920 - 11,810,055,168) / 18,379,440,128 = 4.03 -> 4
//   seq_len at micro_batch 1: 74,089,290,752 / 4,487,168 = 16,511.37 -> 16,511
#include <gtest/gtest.h>

#include <string>

#include "memplan/core/limits.hpp"
#include "test_support.hpp"

namespace memplan::testing {
namespace {

std::string scenario(const std::string& micro_batch, const std::string& seq_len, bool with_gpu = true) {
  // Llama-2 supports 4096 tokens (max_context); lifted here so the memory, not the model, binds.
  return "name = \"limits\"\nmode = \"train\"\n[model]\npreset = \"llama-2-7b\"\nmax_context = 1000000\n"
         "[batch]\nmicro_batch = " +
         micro_batch + "\nseq_len = " + seq_len +
         "\n[precision]\nuse = \"mixed-bf16\"\n[optimizer]\nuse = \"adamw\"\n[activations]\nuse = \"megatron\"\n"
         "flash_attention = true\ndropout = false\n[[strategy]]\nuse = \"data-parallel\"\nsize = 8\n"
         "[[strategy]]\nuse = \"zero\"\nstage = 3\n" +
         (with_gpu ? "[hardware]\ngpu = \"h100-sxm-80gb\"\ncount = 8\n" : "");
}

constexpr uint64_t kCapacity = 85'899'345'920;

TEST(Limits, MaxMicroBatch) {
  Evaluation e = evaluate_paper(scenario("\"max\"", "4096"));
  const ScenarioLimits limits = evaluate_with_limits(e.estimator());
  ASSERT_TRUE(limits.solved.has_value());
  EXPECT_EQ(limits.solved->value, 4);
  EXPECT_EQ(limits.solved->binding, "activations");
  EXPECT_EQ(e.estimator().micro_batch(), 4);  // the report is at the solved size
  EXPECT_EQ(e.breakdown().peak, 11'810'055'168u + 4 * 18'379'440'128u);
  EXPECT_FALSE(limits.max_micro_batch.has_value());  // training: only what was asked
}

TEST(Limits, MaxSequenceLength) {
  Evaluation e = evaluate_paper(scenario("1", "\"max\""));
  const ScenarioLimits limits = evaluate_with_limits(e.estimator());
  ASSERT_TRUE(limits.solved.has_value());
  EXPECT_EQ(limits.solved->value, 16'511);
  EXPECT_EQ(limits.solved->other, 1);
}

// The contract of "max": the answer, fed back as a fixed value, fits; one more does not.
TEST(Limits, AnswerFitsAndOneMoreDoesNot) {
  for (const auto& [micro_batch, seq_len] : {std::pair<std::string, std::string>{"\"max\"", "8192"},
                                             std::pair<std::string, std::string>{"2", "\"max\""}}) {
    Evaluation solved = evaluate_paper(scenario(micro_batch, seq_len));
    const SizeLimit limit = *evaluate_with_limits(solved.estimator()).solved;
    ASSERT_GT(limit.value, 0);
    const bool batch = limit.variable == SizeVariable::micro_batch;
    auto peak_at = [&](int64_t value) {
      Evaluation fixed = evaluate_paper(batch ? scenario(std::to_string(value), seq_len)
                                        : scenario(micro_batch, std::to_string(value)));
      return fixed.breakdown().peak;
    };
    EXPECT_LE(peak_at(limit.value), kCapacity);
    EXPECT_GT(peak_at(limit.value + 1), kCapacity);
  }
}

TEST(Limits, NothingFitsGivesZeroAndNamesTheLargestComponent) {
  // Without sharding (ZeRO stage 0) the 7B model states alone (16 B x P = 100 GiB) exceed 80 GiB.
  std::string text = scenario("\"max\"", "4096");
  text.replace(text.find("stage = 3"), 9, "stage = 0");
  Evaluation e = evaluate_paper(text);
  const ScenarioLimits limits = evaluate_with_limits(e.estimator());
  EXPECT_EQ(limits.solved->value, 0);
  EXPECT_EQ(limits.solved->binding, "optimizer_states");
  EXPECT_EQ(e.estimator().micro_batch(), 1);
}

TEST(Limits, ModelMaxContextCapsTheLength) {
  std::string text = scenario("1", "\"max\"");
  text.replace(text.find("max_context = 1000000"), 21, "max_context = 4096");
  Evaluation e = evaluate_paper(text);
  const SizeLimit limit = *evaluate_with_limits(e.estimator()).solved;
  EXPECT_EQ(limit.value, 4096);
  EXPECT_TRUE(limit.capped);
  EXPECT_EQ(limit.binding, "model max_context");
}

TEST(Limits, Errors) {
  EXPECT_EQ(error_of(scenario("\"max\"", "\"max\""), "s.toml"),
            "s.toml:8:11: error: in [batch], 'seq_len' and 'micro_batch' are both \"max\"; solve for one and fix the "
            "other");
  EXPECT_EQ(error_of(scenario("\"most\"", "4096"), "s.toml"),
            "s.toml:7:15: error: in [batch], 'micro_batch' must be a positive integer or \"max\", not \"most\"");
  Evaluation no_gpu = evaluate_paper(scenario("\"max\"", "4096", false));
  try {
    evaluate_with_limits(no_gpu.estimator());
    ADD_FAILURE() << "expected an error";
  } catch (const Error& error) {
    EXPECT_STREQ(error.what(),
                 "scenario.toml:9:15: error: finding the largest micro_batch that fits needs the GPU's memory; set "
                 "[hardware] gpu or memory_gib");
  }
}

}  // namespace
}  // namespace memplan::testing

namespace memplan::testing {
namespace {

// A weights-only inference scenario: no memory depends on the batch or the
// length, so there is no limit to report (not 2^31, which would read as one).
TEST(Limits, NothingGrowsMeansUnbounded) {
  Evaluation e = evaluate_paper(
      "name = \"t\"\nmode = \"infer\"\n[model]\npreset = \"llama-2-7b\"\nmax_context = 1000000\n[batch]\nseq_len = 2048\n"
      "[precision]\nuse = \"bf16\"\n[activations]\nuse = \"none\"\n[hardware]\ngpu = \"h100-sxm-80gb\"\n");
  const ScenarioLimits limits = evaluate_with_limits(e.estimator());
  ASSERT_TRUE(limits.max_micro_batch.has_value());
  EXPECT_TRUE(limits.max_micro_batch->unbounded);
  EXPECT_EQ(limits.max_micro_batch->binding, "no component grows with micro_batch");
  // The length search stops at the model's max_context, a real cap.
  EXPECT_FALSE(limits.max_seq_len->unbounded);
  EXPECT_EQ(limits.max_seq_len->value, 1'000'000);
  EXPECT_EQ(limits.max_seq_len->binding, "model max_context");
}

}  // namespace
}  // namespace memplan::testing

namespace memplan::testing {
namespace {

// The "max" contract on a paged KV cache (16-token blocks): Llama-3.1-8B in
// bf16 on a 24 GiB GPU, prefill in fixed 2048-token chunks so that only the
// KV cache grows with the length. One more token past the answer opens a
// block that does not fit, so the answer is a whole number of blocks.
TEST(Limits, InferenceAnswerFitsAndOneMoreDoesNot) {
  auto scenario_at = [](const std::string& micro_batch, const std::string& seq_len) {
    return "name = \"t\"\nmode = \"infer\"\n[model]\npreset = \"llama-3.1-8b\"\n[batch]\nmicro_batch = " + micro_batch +
           "\nseq_len = " + seq_len +
           "\n[precision]\nuse = \"bf16\"\n[activations]\nuse = \"inference\"\nblock_size = 16\nprefill_chunk = 2048\n"
           "[hardware]\ngpu = \"rtx-4090-24gb\"\n";
  };
  constexpr uint64_t kRtx4090 = 24ull << 30;
  auto peak = [&](const std::string& micro_batch, const std::string& seq_len) {
    return evaluate_paper(scenario_at(micro_batch, seq_len)).breakdown().peak;
  };
  Evaluation by_length = evaluate_paper(scenario_at("1", "\"max\""));
  const SizeLimit length = *evaluate_with_limits(by_length.estimator()).solved;
  EXPECT_EQ(length.binding, "kv_cache");
  EXPECT_EQ(length.value % 16, 0);
  EXPECT_LE(peak("1", std::to_string(length.value)), kRtx4090);
  EXPECT_GT(peak("1", std::to_string(length.value + 1)), kRtx4090);

  Evaluation by_batch = evaluate_paper(scenario_at("\"max\"", "4096"));
  const SizeLimit batch = *evaluate_with_limits(by_batch.estimator()).solved;
  EXPECT_GT(batch.value, 1);
  EXPECT_LE(peak(std::to_string(batch.value), "4096"), kRtx4090);
  EXPECT_GT(peak(std::to_string(batch.value + 1), "4096"), kRtx4090);
}

}  // namespace
}  // namespace memplan::testing
