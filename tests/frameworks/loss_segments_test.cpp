// The loss path's logits-sized segments in the caching allocator: a replay of
// the order of their requests through the allocator's block rules
// (sdk/support/include/memplan/support/caching_allocator.hpp, after
// c10/cuda/CUDACachingAllocator.cpp: get_free_block's best fit,
// should_split's 1 MiB threshold for the large pool, free_block's merge,
// get_allocation_size's rounding), the orders of Hugging Face Transformers'
// eager losses (plugins/activations/megatron/loss_requests.hpp) and the
// allocator's use of the result (docs/formulas.md, "The loss path's
// segments"). Measured: validation/measured (snapshots of torch 2.11 and
// transformers 5.17 on an H100; plugins/strategies/allocator/README.md).
#include <gtest/gtest.h>

#include <memplan/support/caching_allocator.hpp>

#include <array>
#include <string>
#include <vector>

#include "../../plugins/activations/megatron/loss_requests.hpp"
#include "test_support.hpp"

namespace memplan::testing {
namespace {

using support::AllocatorRequest;
using Kind = AllocatorRequest::Kind;
constexpr double kMiB = 1024.0 * 1024;

AllocatorRequest alloc(uint32_t id, double mib) { return {Kind::allocate, id, mib * kMiB}; }
AllocatorRequest release(uint32_t id) { return {Kind::free, id, 0}; }

support::AllocatorReplay replay(const std::vector<AllocatorRequest>& requests) {
  return support::replay_caching_allocator(requests);
}

// A freed 100 MiB block serves a 60 MiB request and is split (40 MiB remain,
// more than 1 MiB); the 50 MiB request finds only that 40 MiB block and maps
// a segment of its own: 100 + 50 MiB.
TEST(CachingAllocatorReplay, BestFitSplitsAndMapsWhatDoesNotFit) {
  const auto r = replay({alloc(1, 100), release(1), alloc(2, 60), alloc(3, 50)});
  ASSERT_TRUE(r.valid);
  EXPECT_EQ(r.reserved, 150 * kMiB);
  EXPECT_EQ(r.alive_high, 110 * kMiB);
}

// Two free blocks, 100 and 60 MiB: a 50 MiB request takes the smaller one
// that holds it (60), so a 100 MiB request still fits after it: 160 MiB.
TEST(CachingAllocatorReplay, TheSmallestFreeBlockThatHoldsTheRequest) {
  const auto r = replay({alloc(1, 100), alloc(2, 60), release(1), release(2), alloc(3, 50), alloc(4, 100)});
  ASSERT_TRUE(r.valid);
  EXPECT_EQ(r.reserved, 160 * kMiB);
}

// A split block merges back with its free neighbour: 40 + 60 MiB freed in one
// 100 MiB segment serve a 100 MiB request without a new segment.
TEST(CachingAllocatorReplay, FreedNeighboursMerge) {
  const auto r = replay({alloc(1, 100), release(1), alloc(2, 40), alloc(3, 60), release(2), release(3), alloc(4, 100)});
  ASSERT_TRUE(r.valid);
  EXPECT_EQ(r.reserved, 100 * kMiB);
}

// No split when 1 MiB or less would remain: the 99.5 MiB request keeps the
// whole 100 MiB block, and a 2 MiB request maps a new segment, 20 MiB below
// 10 MiB (kLargeBuffer); 10 MiB + 512 B rounds up to 12 MiB (kRoundLarge).
TEST(CachingAllocatorReplay, SplitThresholdAndSegmentRounding) {
  auto r = replay({alloc(1, 100), release(1), alloc(2, 99.5), alloc(3, 2)});
  ASSERT_TRUE(r.valid);
  EXPECT_EQ(r.reserved, 120 * kMiB);
  r = replay({{Kind::allocate, 1, 10 * kMiB + 512}});
  EXPECT_EQ(r.reserved, 12 * kMiB);
  // Sizes round up to 512 B (round_size).
  r = replay({{Kind::allocate, 1, 100 * kMiB + 1}});
  EXPECT_EQ(r.alive_high, 100 * kMiB + 512);
}

TEST(CachingAllocatorReplay, BadSequencesAreRefused) {
  EXPECT_FALSE(replay({release(7)}).valid);
  EXPECT_FALSE(replay({alloc(1, 10), release(1), release(1)}).valid);
  EXPECT_FALSE(replay({{Kind::allocate, 1, 0}}).valid);
  // The small pool (1 MiB and less) has rules of its own, not replayed.
  EXPECT_FALSE(replay({alloc(1, 1)}).valid);
  EXPECT_TRUE(replay({alloc(1, 1.5)}).valid);
  // More blocks than the table holds (kReplayBlocks, no allocation): refused.
  std::vector<AllocatorRequest> many;
  for (uint32_t i = 0; i <= support::kReplayBlocks; ++i) many.push_back(alloc(i, 2));
  EXPECT_FALSE(replay(many).valid);
}

// The loop's output held into the next forward, or dropped after the loss.
plugins::HeldOutput held_until(bool held) {
  return held ? plugins::HeldOutput::next_forward : plugins::HeldOutput::dropped;
}

// Bytes per logit element the path settles at where every request fits a
// block of its own size exactly (2^30 logits: every size a multiple of the
// 2 MiB rounding; the shifted copy as large as the logits, s -> infinity).
double settled(plugins::CrossEntropy mode, double p, bool held) {
  constexpr double kElements = 1024.0 * 1024 * 1024;
  return plugins::loss_segments(mode, p, held_until(held), kElements, kElements) / kElements;
}

// transformers >= 4.49 (ForCausalLMLoss upcasts), 16-bit head (p = 2), in
// bytes per logit element, L = 2 (the 16-bit logits), F = 4 (fp32):
//   dropped output (the Trainer): ret L [s1]; copy F [s2]; log-softmax F [s3];
//     the copy and the output freed (s2, s1); backward: nll's gradient F -> s2;
//     log_softmax's F: s1 is too small -> new s4; s2 and s3 freed; the cast
//     back L -> s1 (exact); => L + 3F = 14 (alive at most 3F = 12)
//   held output: step 0 as above but s1 holds the output, so the cast back
//     splits s2; 14 after step 0. Step 1: the new output L splits s2 (all free
//     blocks are F, s2 the first); copy F -> s3; log-softmax -> s4; the old
//     output frees s1; backward: F -> s3; F: only L blocks free -> new s5;
//     => L + 4F = 18 from then on (alive at most L + 3F = 14, in backward)
// Measured: 4 x 2L + L of logits-sized segments against 3 x 2L + L alive with
// the held output (Llama-3.2-3B LoRA, 4 x 1504 + 752 MiB; Qwen3-0.6B, 4 x 9496
// + 4748; the recomputed job, 4 x 8016 + 4008), and the Trainer's job's
// max_memory_reserved steady from its first step.
TEST(LossSegments, UpcastInLoss) {
  using plugins::CrossEntropy;
  EXPECT_DOUBLE_EQ(settled(CrossEntropy::upcast_in_loss, 2, true), 18);
  EXPECT_DOUBLE_EQ(settled(CrossEntropy::upcast_in_loss, 2, false), 14);
  // fp32 logits (p = 4): .float() returns them, no copy and no cast back:
  //   held: ret F, log-softmax F, two gradients F: 4F = 16 = what is alive
  //   at once in backward; dropped: 3F = 12.
  EXPECT_DOUBLE_EQ(settled(CrossEntropy::upcast_in_loss, 4, true), 16);
  EXPECT_DOUBLE_EQ(settled(CrossEntropy::upcast_in_loss, 4, false), 12);
}

// A loop that drops its output after the step (fsdp_qlora train.py's
// `output = None`; output_held_until = "step-end"): the returned logits are
// freed after the step's backward, before the next forward.
//   upcast_in_loss, p = 2: ret L [s1]; upcast F [s2]; log-softmax F [s3]; the
//   upcast freed (s2); backward nll's F -> s2, log_softmax's F -> new s4; s2
//   and s3 freed; the cast back L splits s2 (the earlier of the two F blocks);
//   s4 and the cast freed (s2 whole again); then the output (s1). The next
//   step finds s1 for its L and the same blocks for the rest: L + 3F = 14, as
//   the dropped output's (the held-into-next-forward loop's 18 keeps a second
//   L block for the next step's logits beside the held ones).
//   fp32 logits (p = 4): ret F beside log-softmax F and the two gradients F,
//   all alive at once in backward: 4F = 16, as held.
//   upcast_shift_copy (transformers <= 4.45), p = 2: the returned F is alive
//   through backward as when held into the next forward: 18 (ShiftedCopies).
TEST(LossSegments, AnOutputDroppedAfterTheStep) {
  using plugins::CrossEntropy;
  constexpr double n = 1024.0 * 1024 * 1024;
  const auto through_step = [&](CrossEntropy mode, double p) {
    return plugins::loss_segments(mode, p, plugins::HeldOutput::through_step, n, n) / n;
  };
  EXPECT_DOUBLE_EQ(through_step(CrossEntropy::upcast_in_loss, 2), 14);
  EXPECT_DOUBLE_EQ(through_step(CrossEntropy::upcast_in_loss, 4), 16);
  EXPECT_DOUBLE_EQ(through_step(CrossEntropy::upcast_shift_copy, 2), 18);
  // The plugin: the held logits are alive in backward and the optimizer step only (not in the next forward),
  // and the option needs output_held.
  const std::string job =
      "name = \"h\"\nmode = \"train\"\n[framework]\nuse = \"hf-transformers\"\nversion = \"4.38\"\n[model]\n"
      "preset = \"llama-3.2-1b\"\n[batch]\nseq_len = 1024\n[precision]\nuse = \"bf16\"\n[optimizer]\n"
      "use = \"sgd\"\n[activations]\nuse = \"megatron\"\noutput_held = true\n";
  const Evaluation next = evaluate(job);
  const Evaluation step_end = evaluate(job + "output_held_until = \"step-end\"\n");
  EXPECT_EQ(next.item_lifetime("activations.held_output"), MEMPLAN_LIFETIME_PERSISTENT);
  EXPECT_EQ(step_end.item_lifetime("activations.held_output"), MEMPLAN_LIFETIME_TRANSIENT_BACKWARD);
  // 1,024 x 128,256 fp32 logits held (transformers 4.38 returns them upcast): 525,336,576 B in each phase it
  // is held, one item per phase when dropped after the step.
  EXPECT_EQ(next.item_bytes("activations.held_output", MEMPLAN_ROLE_ACTIVATIONS), 525'336'576u);
  EXPECT_EQ(step_end.item_bytes("activations.held_output", MEMPLAN_ROLE_ACTIVATIONS), 2 * 525'336'576u);
  // Without a held output the option has nothing to qualify: a profile that sets it (fsdp-qlora) composes with
  // a scenario that says output_held = false, which then holds nothing.
  const std::string unheld = job.substr(0, job.find("output_held")) + "output_held = false\n";
  const Evaluation dropped = evaluate(unheld + "output_held_until = \"step-end\"\n");
  EXPECT_EQ(dropped.item_bytes("activations.held_output", MEMPLAN_ROLE_ACTIVATIONS), 0u);
  EXPECT_EQ(dropped.breakdown().quantities[kAllocated].peak, evaluate(unheld).breakdown().quantities[kAllocated].peak);
  for (const std::string loss : {"", "cross_entropy = \"cut\"\n"}) {
    const std::string fsdp_qlora =
        "name = \"q\"\nmode = \"train\"\n[framework]\nuse = \"fsdp-qlora\"\n[model]\npreset = \"llama-3.2-1b\"\n"
        "[batch]\nseq_len = 1024\n[precision]\nuse = \"bf16\"\n[optimizer]\nuse = \"sgd\"\n[activations]\n"
        "use = \"megatron\"\noutput_held = false\n" + loss + "[[strategy]]\nuse = \"lora\"\n";
    EXPECT_EQ(evaluate(fsdp_qlora).item_bytes("activations.held_output", MEMPLAN_ROLE_ACTIVATIONS), 0u) << loss;
  }
  EXPECT_NE(error_of(job + "output_held_until = \"later\"\n").find("must be \"next-forward\" or \"step-end\""),
            std::string::npos);
}

// Gemma 2's soft-capped logits (final_logit_softcapping), upcast_in_loss,
// p = 2, the output dropped (the Trainer): forward the head's L [s1], the
// division L [s2], s1 freed, tanh's L -> s1 (saved), s2 freed, the product L
// -> s2 (the logits), copy F [s3], log-softmax F [s4], the copy and the
// product freed (s3, s2); backward nll's F -> s3, log_softmax's F: s2 is too
// small -> new s5; s3, s4 freed; the cast back L -> s2; then the product's
// gradient L splits s3, tanh's L and the division's L take the L blocks freed
// before them: 2L + 3F = 16 (alive at most L + 3F = 14: tanh's saved output
// beside the loss's three F), 2 more than without the capping. With the
// output held, the uncapped path's L + 4F (UpcastInLoss) and tanh's L in a
// block of its own: 2L + 4F = 20.
TEST(LossSegments, SoftCappedLogits) {
  constexpr double kElements = 1024.0 * 1024 * 1024;
  const auto capped = [&](bool held) {
    return plugins::loss_segments(plugins::CrossEntropy::upcast_in_loss, 2, held_until(held), kElements, kElements, true) /
           kElements;
  };
  EXPECT_DOUBLE_EQ(capped(false), 16);
  EXPECT_DOUBLE_EQ(capped(true), 20);
  // Every known order replays with the capping's requests (the request table holds the longest, the shifted
  // paths' 28 a step, for the four steps replayed): never the 0 of an overflow, and never below the path
  // without the capping, whose requests are a subset.
  for (plugins::CrossEntropy mode : {plugins::CrossEntropy::upcast_in_loss, plugins::CrossEntropy::upcast_in_loss_shift_copy,
                                     plugins::CrossEntropy::upcast_shift_copy})
    for (double p : {2.0, 4.0})
      for (bool held : {false, true}) {
        const double with = plugins::loss_segments(mode, p, held_until(held), kElements, kElements, true);
        EXPECT_GE(with, plugins::loss_segments(mode, p, held_until(held), kElements, kElements)) << p << held;
        EXPECT_GT(with, 0) << p << held;
      }
}

// transformers <= 4.45 (the model upcasts and the loss copies the shifted
// logits), p = 2: the head's L [s1] is freed once upcast to the returned F
// [s2]; shifted copy F [s3]; log-softmax F [s4]; the copy freed (s3);
//   held: backward nll F -> s3, log_softmax F -> new s5; s3, s4 freed; the
//     slice's zeros F -> s3; the cast back L -> s1 (exact): L + 4F = 18 from
//     the first step (alive at most 4F = 16);
//   dropped: the output freed (s2) before backward: F -> s2, F -> s3, slice
//     -> s2, cast -> s1: L + 3F = 14 (alive 3F = 12).
// transformers 4.46-4.48 (the loss upcasts and copies the shifted logits):
//   dropped: ret L, copy F, shifted F, log-softmax F (L + 3F = 14, which the
//   backward's F, F, F, L reuse); held: 18 from the second step, when the new
//   output splits a free F block (as upcast_in_loss).
TEST(LossSegments, ShiftedCopies) {
  using plugins::CrossEntropy;
  EXPECT_DOUBLE_EQ(settled(CrossEntropy::upcast_shift_copy, 2, true), 18);
  EXPECT_DOUBLE_EQ(settled(CrossEntropy::upcast_shift_copy, 2, false), 14);
  EXPECT_DOUBLE_EQ(settled(CrossEntropy::upcast_in_loss_shift_copy, 2, true), 18);
  EXPECT_DOUBLE_EQ(settled(CrossEntropy::upcast_in_loss_shift_copy, 2, false), 14);
}

// At real sizes the shifted copy is b (s - 1) V logits: b 8, s 2048, V 128,256
// (n = 2,101,346,304 logits = 2004 MiB), transformers <= 4.45, held output:
// L = 4008 MiB, F = 8016 MiB, the shifted F' = F - 4 b V B = 8012.09 MiB,
// whose segments round up to 8014 MiB and split (1.91 MiB > 1 MiB remain).
// Step 0: head L [s1]; returned F [s2]; head freed; shifted copy F' -> new
// s3 (8014, split); log-softmax F' -> new s4; the copy freed (s3 whole);
// backward: nll F' -> s3; log_softmax F' -> new s5; s3, s4 freed; the
// slice's whole-size F (8016) fits none of the 8014 MiB blocks -> new s6;
// the cast back L -> s1. Segments 4008 + 8016 + 3 x 8014 + 8016 = 44,082 MiB,
// 22.0 B per logit (18 where the sizes fit exactly); step 1 reuses them all.
TEST(LossSegments, ShiftedCopiesAtRealSizesSplitTheirBlocks) {
  const double n = 8.0 * 2048 * 128256, shifted = 8.0 * 2047 * 128256;
  EXPECT_EQ(plugins::loss_segments(plugins::CrossEntropy::upcast_shift_copy, 2, plugins::HeldOutput::next_forward, n, shifted), 44'082 * kMiB);
  // A path without a shifted copy is unchanged by it.
  EXPECT_EQ(plugins::loss_segments(plugins::CrossEntropy::upcast_in_loss, 2, plugins::HeldOutput::next_forward, n, shifted), 18 * n);
  // Logits of 1 MiB or less go to the small pool, which the replay does not model: nothing published.
  EXPECT_EQ(plugins::loss_segments(plugins::CrossEntropy::upcast_in_loss, 2, plugins::HeldOutput::next_forward, 1000, 999), 0);
}

// Where the order is not written down, nothing is published (the allocator
// keeps the requests' high point).
TEST(LossSegments, UnknownOrdersPublishNothing) {
  using plugins::CrossEntropy;
  for (CrossEntropy mode : {CrossEntropy::unfused, CrossEntropy::vocab_parallel, CrossEntropy::chunked,
                            CrossEntropy::compiled, CrossEntropy::chunked_compiled, CrossEntropy::loss_parallel})
    EXPECT_EQ(settled(mode, 2, true), 0);
}

// The measured job (validation/H100-llama-3.2-3b-lora-r16-all-gc-bs8-s2048):
// 8 x 2048 tokens x 128,256 logits = 2,101,346,304 elements, held output,
// transformers 5.17 (upcast in the loss): 18 B each = 37,824,233,472 B, the
// five logits-sized segments the snapshot shows (4 x 8016 + 4008 MiB =
// 36,072 MiB = 37,824,233,472 B), reported under details.
TEST(LossSegments, TheMeasuredJobsSegmentsAreReported) {
  const std::string id = "H100-llama-3.2-3b-lora-r16-all-gc-bs8-s2048";
  const std::string text = validation_case(id);
  ASSERT_NE(text.find("micro_batch = 8\nseq_len = 2048\n"), std::string::npos);
  const Evaluation e = evaluate(text, id + ".toml");
  double figure = 0;
  for (const auto& [key, value] : e.estimator().report_details())
    if (key == "allocator_loss_segments") figure = std::stod(value);
  EXPECT_DOUBLE_EQ(figure, 37'824'233'472.0);
  EXPECT_DOUBLE_EQ(figure, 36'072 * kMiB);
}

// The backward thread's cuBLAS workspace (W, PyTorch's per handle and
// stream; 32 MiB from Hopper on: support/cublas_workspace.hpp), taken once,
// at the head's backward in the first step, after the loss freed its fp32
// gradients (loss_requests.hpp). n = 2^30 logits (sizes fit exactly):
//   dropped output (the Trainer), p = 2: step 0 as in UpcastInLoss leaves
//     three free F blocks when the head's GEMM runs; W splits the first (s2),
//     for good. Step 1: ret L -> s1; copy F -> s3; log-softmax F -> s4; the
//     copy and the output freed; nll's F -> s3; log_softmax's F finds only
//     s2's F - W: new s5 => L + 4F = 18 n, less W (allocated, which
//     cuda-context counts): 18 n - W, where 14 n without it.
//   held output, p = 2: the cast back has split s2 (L and L remain) when
//     the GEMM runs; W takes the L remainder (the smallest block it fits),
//     and the steps after settle at L + 4F as without it: 18 n - W.
//   fp32 logits (p = 4), dropped: ret F [s1]; log-softmax F [s2]; ret freed;
//     nll's F -> s1; log_softmax's F -> new s3; W splits s1. Step 1: ret F ->
//     s2; log-softmax F -> s3; nll's F -> s2; log_softmax's F: new s4 =>
//     4F = 16 n - W, where 12 n without it.
// Measured (validation/measured/h100-2026-11-28-dynamic.jsonl, segments_at_end):
// 4 x 1,188 + 594 MiB with a 32 MiB block inside one 1,188 MiB segment at
// 2,048 tokens; 4 x 298 + 150 at 512.
TEST(LossSegments, TheBackwardThreadsWorkspaceCanPinAnFp32Block) {
  using plugins::CrossEntropy;
  constexpr double n = 1024.0 * 1024 * 1024, w = 32 * kMiB;
  EXPECT_EQ(plugins::loss_segments(CrossEntropy::upcast_in_loss, 2, plugins::HeldOutput::dropped, n, n, false, w), 18 * n - w);
  EXPECT_EQ(plugins::loss_segments(CrossEntropy::upcast_in_loss, 2, plugins::HeldOutput::next_forward, n, n, false, w), 18 * n - w);
  EXPECT_EQ(plugins::loss_segments(CrossEntropy::upcast_in_loss, 4, plugins::HeldOutput::dropped, n, n, false, w), 16 * n - w);
  // No workspace: the paths as UpcastInLoss replays them.
  EXPECT_EQ(plugins::loss_segments(CrossEntropy::upcast_in_loss, 2, plugins::HeldOutput::dropped, n, n, false, 0), 14 * n);
}

// The measured jobs (validation/H100-qwen-1.8b-trainer-lora-r8-qkv-gc-ga16-s2048-fixed and -s512-fixed): Qwen-1.8B's
// shape, LoRA on q, k, v, flash attention, an H100 (sm_90: W = 33,554,432 B). The layers' largest request is
// the MLP's 2,048 x 5,504 x 2 B = 21.5 MiB (a 22 MiB segment), under W: the workspace lands in a logits-sized
// block. segments_at_end: 4 x 1,245,708,288 + 622,854,144 B, less W: 5,572,132,864 B; at 512 tokens 4 x
// 312,475,648 + 157,286,400 - W = 1,373,634,560 B. At 4,096 tokens the MLP's 43 MiB segment holds W (the
// replay without the workspace, 3 F + L: 3 x 2,489,319,424 + 1,245,708,288 B, F = 4,096 x 151,936 x 4 B being 1,187
// MiB exactly and L rounding up to 594 MiB), and on an
// A100 (sm_80, W = 8,519,680 B) the layers' 20 MiB segments do: 3 x 1,245,708,288 + 622,854,144 B.
TEST(LossSegments, TheMeasuredTrainerJobsKeepAFourthFp32Segment) {
  const auto segments = [](const std::string& id, const std::string& from = {}, const std::string& to = {}) {
    std::string text = validation_case(id);
    if (!from.empty()) {
      const size_t at = text.find(from);
      EXPECT_NE(at, std::string::npos) << from;
      if (at != std::string::npos) text.replace(at, from.size(), to);
    }
    const Evaluation e = evaluate(text, id + ".toml");
    double figure = 0;
    for (const auto& [key, value] : e.estimator().report_details())
      if (key == "allocator_loss_segments") figure = std::stod(value);
    return figure;
  };
  const std::string at2048 = "H100-qwen-1.8b-trainer-lora-r8-qkv-gc-ga16-s2048-fixed";
  EXPECT_DOUBLE_EQ(segments(at2048), 5'572'132'864.0);
  EXPECT_DOUBLE_EQ(segments("H100-qwen-1.8b-trainer-lora-r8-qkv-gc-ga16-s512-fixed"), 1'373'634'560.0);
  EXPECT_DOUBLE_EQ(segments(at2048, "seq_len = 2048", "seq_len = 4096"), 3 * 2'489'319'424.0 + 1'245'708'288.0);
  EXPECT_DOUBLE_EQ(segments(at2048, "gpu = \"h100-sxm-80gb\"", "gpu = \"a100-sxm-80gb\""),
                   3 * 1'245'708'288.0 + 622'854'144.0);
}

}  // namespace
}  // namespace memplan::testing
