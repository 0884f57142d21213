// Steps of varying lengths in the caching allocator: each step longer than
// every one before maps new segments for the loss path's logits-sized
// requests, and the shorter steps' segments stay mapped
// (sdk/support/include/memplan/support/varying_lengths.hpp, the megatron
// plugin's loss_path_growth in plugins/activations/megatron/loss_requests.hpp,
// the allocator's length_* options; docs/formulas.md section 7, "Steps of
// varying lengths"). Measured: validation/measured/h100-2026-11-28-dynamic.jsonl
// (torch 2.11, transformers 5.17 on an H100).
#include <gtest/gtest.h>

#include <memplan/support/caching_allocator.hpp>
#include <memplan/support/varying_lengths.hpp>

#include <array>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "../../plugins/activations/megatron/loss_requests.hpp"
#include "../../plugins/strategies/allocator/step_lengths.hpp"
#include "test_support.hpp"

namespace memplan::testing {
namespace {

constexpr double kMiB = 1024.0 * 1024;
constexpr double kVocab = 151'936;  // Qwen-1.8B's vocabulary

// transformers 5.17's loss under the Trainer (upcast in the loss, the output
// dropped after it), bf16 head, 2,048 tokens x 151,936 = 311,164,928 logits:
// L = 622,329,856 B (a 594 MiB segment), 2L = 1,244,659,712 B (1,188 MiB).
//   first step: the logits L (new), the fp32 copy (new), the log-softmax
//     (new); the copy and the logits freed; nll's gradient takes the copy's
//     block, log_softmax's gradient maps a third fp32 segment; the cast back
//     (L) takes the logits' block. Requests that mapped segments: L + 3 x 2L =
//     4,356,308,992 B (segments 3 x 1,188 + 594 = 4,158 MiB);
//   after three steps at 60 % (fp32 segments of 714 MiB, a 16-bit one of 358):
//     the logits (593.5 MiB) split a free 714 MiB block; the fp32 copy, the
//     log-softmax and log_softmax's gradient find nothing of 1,187 MiB free and
//     map three segments (nll's gradient takes the copy's): 3 x 2L =
//     3,733,979,136 B.
TEST(VaryingLengths, ALongerStepMapsThreeFp32Segments) {
  const double n = 2048 * kVocab;
  const plugins::LossPathGrowth growth =
      plugins::loss_path_growth(plugins::CrossEntropy::upcast_in_loss, 2, plugins::HeldOutput::dropped, n, n);
  EXPECT_TRUE(growth.known);
  EXPECT_EQ(growth.first, 4'356'308'992.0);
  EXPECT_EQ(growth.longer, 3'733'979'136.0);
  EXPECT_EQ(growth.segments, 3);
  // An order that is not known gives nothing.
  EXPECT_FALSE(plugins::loss_path_growth(plugins::CrossEntropy::chunked, 2, plugins::HeldOutput::dropped, n, n).known);
  // 16 tokens x 128 vocabulary: requests below the replay's 1 MiB floor (the small pool): known, no growth.
  const plugins::LossPathGrowth tiny =
      plugins::loss_path_growth(plugins::CrossEntropy::upcast_in_loss, 2, plugins::HeldOutput::dropped, 16 * 128, 16 * 128);
  EXPECT_TRUE(tiny.known);
  EXPECT_EQ(tiny.segments, 0);
  // 2 MiB of fp32 logits (524,288 elements): both lengths' requests share one 20 MiB segment: known, no growth.
  const plugins::LossPathGrowth small =
      plugins::loss_path_growth(plugins::CrossEntropy::upcast_in_loss, 4, plugins::HeldOutput::dropped, 1 << 19, 1 << 19);
  EXPECT_TRUE(small.known);
  EXPECT_EQ(small.segments, 0);
}

// The measured run (validation/measured/h100-2026-11-28-dynamic.jsonl line 3,
// job qwen-1.8b-trainer-lora-r8-qkv-gcre-ga16-bs1-dyn2048): the first 128
// sample lengths the dataset served, in order (the 129th was fetched ahead and
// not trained). Steps longer than all before: 1,876, 1,897, 1,931 and 2,013
// tokens. The snapshot's logits-sized segments at the run's end: 3 x 1,088,
// 3 x 1,100, 3 x 1,120, 3 x 1,168 and one 544 MiB: 13,972 MiB. The replay of
// the loss path alone over the same lengths maps the same segments.
constexpr std::array<int64_t, 128> kMeasuredOrder{
  1876, 1414, 1287, 1897, 1045, 880, 1813, 1752, 1143, 1375, 265, 1133, 1080, 1318, 567, 226,
  721, 1494, 670, 1540, 1931, 1672, 639, 2013, 1657, 1024, 733, 1648, 1830, 449, 245, 882,
  284, 1196, 1300, 864, 1704, 1860, 1216, 1168, 1755, 1064, 651, 878, 559, 1638, 1314, 1163,
  679, 926, 280, 1541, 1469, 1977, 1141, 257, 1882, 1873, 1152, 1580, 1125, 762, 1984, 1263,
  1899, 1652, 829, 1600, 371, 1221, 1367, 890, 1029, 831, 793, 219, 268, 1998, 1630, 1003,
  1243, 520, 1478, 1740, 707, 986, 1086, 871, 538, 2009, 1833, 631, 1598, 1536, 1294, 292,
  621, 1004, 1934, 785, 209, 1648, 1814, 1336, 974, 1701, 1883, 709, 201, 1062, 1139, 896,
  98, 795, 1388, 1581, 2008, 1911, 159, 271, 1639, 288, 1466, 246, 1345, 588, 772, 1709,
};

TEST(VaryingLengths, ReplayingTheMeasuredLengthsGivesTheMeasuredSegments) {
  std::array<double, 128> scales{};
  for (size_t i = 0; i < kMeasuredOrder.size(); ++i) scales[i] = static_cast<double>(kMeasuredOrder[i]) / 2048;
  auto requests = std::make_unique<std::array<support::AllocatorRequest, 2048>>();
  const double n = 2048 * kVocab;
  const size_t count = plugins::loss_path_requests(plugins::CrossEntropy::upcast_in_loss, 2, plugins::HeldOutput::dropped, 128, n, n,
                                                   *requests, false, scales);
  ASSERT_GT(count, 0u);
  const support::AllocatorReplay replay =
      support::replay_caching_allocator(std::span<const support::AllocatorRequest>(requests->data(), count));
  ASSERT_TRUE(replay.valid);
  EXPECT_EQ(replay.reserved, 13'972 * kMiB);
  EXPECT_EQ(replay.segments, 13);
  // With the backward thread's cuBLAS workspace (32 MiB, the first step's head backward; loss_requests.hpp) the
  // same 13 segments: it splits one of the first step's 1,088 MiB blocks, as the snapshot shows (a 32 MiB block
  // in one), and no later step before the first longer one is within its size of 1,876 tokens (about 55
  // tokens: 32 MiB / (4 B x 151,936)).
  const size_t with_workspace = plugins::loss_path_requests(plugins::CrossEntropy::upcast_in_loss, 2, plugins::HeldOutput::dropped, 128, n,
                                                            n, *requests, false, scales, 32 * kMiB);
  ASSERT_EQ(with_workspace, count + 1);
  const support::AllocatorReplay pinned = support::replay_caching_allocator(
      std::span<const support::AllocatorRequest>(requests->data(), with_workspace));
  ASSERT_TRUE(pinned.valid);
  EXPECT_EQ(pinned.reserved, 13'972 * kMiB);
  EXPECT_EQ(pinned.segments, 13);
}

support::LossPoolAtMax toy_pool() { return {350 * kMiB, 300 * kMiB, 3}; }

// One length only: every step is the first step's size, whatever the run's
// length: three fp32 segments of 1,188 MiB (3,737,124,864 B) and the 16-bit
// request beyond them, L = 622,329,856 B: 4,359,454,720 B. A normal so tight
// that no other length has weight (mean 2,047.9, sd 0.001: every weight but
// 2,048's underflows), or a mean far above the range, gives the same.
TEST(VaryingLengths, OneLengthIsTheFirstStep) {
  const support::LossPoolAtMax pool{4'356'308'992.0, 3'733'979'136.0, 3};
  support::StepLengths lengths;
  lengths.min = lengths.max = 2048;
  lengths.steps = 1000;
  EXPECT_EQ(support::expected_varying_length_pool(lengths, pool), 4'359'454'720.0);
  lengths.min = 91;
  lengths.mean = 2047.9;
  lengths.sd = 0.001;
  EXPECT_EQ(support::expected_varying_length_pool(lengths, pool), 4'359'454'720.0);
  lengths.mean = 1e20;
  lengths.sd = 1;
  EXPECT_EQ(support::expected_varying_length_pool(lengths, pool), 4'359'454'720.0);
}

// Two lengths, 1 and 2 tokens, equally likely, two steps; at 2 tokens a first
// step maps 350 MiB and a longer step 3 x 100 MiB (at 1 token: 3 x 50, the
// first step 175). The four orders: (1,1) 175; (1,2) 175 + 300; (2,1) and (2,2)
// 350: the mean, 1,350 / 4 = 337.5 MiB. The formula: 1 is a record with
// probability 0.5 (75 MiB), 2 with 1 - 0.5^2 = 0.75 (225 MiB), the first step's
// 16-bit set (350 - 300) x 1.5 / 2 = 37.5.
TEST(VaryingLengths, TheMeanOverOrders) {
  support::StepLengths lengths;
  lengths.min = 1;
  lengths.max = 2;
  lengths.steps = 2;
  EXPECT_DOUBLE_EQ(support::expected_varying_length_pool(lengths, toy_pool()) / kMiB, 337.5);
  // A step pads two samples to the longer: 2 tokens with probability 0.75. One
  // step: 0.25 x 175 + 0.75 x 350 = 306.25 MiB.
  lengths.per_step = 2;
  lengths.steps = 1;
  EXPECT_DOUBLE_EQ(support::expected_varying_length_pool(lengths, toy_pool()) / kMiB, 306.25);
}

// Lengths 1, 2 and 3 equally likely, two steps; at 3 tokens a longer step
// maps 3 x 150 MiB and a first step 75 MiB more (its 16-bit set), both in
// proportion to the length. A step more than twice as long as every step
// before maps the 16-bit set too: (1, 3) gives 175 + 450 + 75. The nine orders:
// (1,1) 175, (1,2) 475, (1,3) 700, (2,1) 350, (2,2) 350, (2,3) 800, (3,*) 525
// three times: 4,425 / 9 = 491.667 MiB. The formula: records 50 + 133.33 +
// 250; 16-bit sets at the first step of at least half its length 8.33 +
// 16.67 + 33.33 (at 3: P(>= 2) = 2/3, (1/3)/(2/3) x (1 - (1/3)^2) = 4/9 of 75).
TEST(VaryingLengths, AStepTwiceAsLongMapsTheSixteenBitSetToo) {
  support::StepLengths lengths;
  lengths.min = 1;
  lengths.max = 3;
  lengths.steps = 2;
  const support::LossPoolAtMax pool{525 * kMiB, 450 * kMiB, 3};
  EXPECT_NEAR(support::expected_varying_length_pool(lengths, pool) / kMiB, 4425.0 / 9, 1e-9);
  EXPECT_EQ(support::varying_length_pool_quantile(lengths, pool, 1), 800 * kMiB);
  EXPECT_EQ(support::varying_length_pool_quantile(lengths, pool, 0), 175 * kMiB);
}

// The run's own order (step_lengths): the same rule step by step. The toy
// runs above, order by order: (1,1) 175, (1,2) 475, (2,1) and (2,2) 350 MiB,
// whose mean is the expectation's 337.5; and the three-length toy's nine
// orders, (1,3) 175 + 450 + 75 = 700 (the 3-token step more than twice the
// 1-token one maps the 16-bit set too), 4,425 MiB in all.
TEST(VaryingLengths, TheRunsOwnOrder) {
  const auto pool = [](std::initializer_list<int64_t> steps, int64_t max, const support::LossPoolAtMax& figures) {
    const std::vector<int64_t> list(steps);
    return support::pool_over_order(list, max, figures) / kMiB;
  };
  EXPECT_EQ(pool({1, 1}, 2, toy_pool()), 175);
  EXPECT_EQ(pool({1, 2}, 2, toy_pool()), 475);
  EXPECT_EQ(pool({2, 1}, 2, toy_pool()), 350);
  EXPECT_EQ(pool({2, 2}, 2, toy_pool()), 350);
  const support::LossPoolAtMax three{525 * kMiB, 450 * kMiB, 3};
  EXPECT_EQ(pool({1, 3}, 3, three), 700);
  EXPECT_EQ(pool({2, 3}, 3, three), 800);
  double all = 0;
  for (int64_t a = 1; a <= 3; ++a)
    for (int64_t b = 1; b <= 3; ++b) all += pool({a, b}, 3, three);
  EXPECT_NEAR(all, 4425, 1e-9);
  // A step outside [1, max], no step, or figures that describe no run: nothing.
  EXPECT_EQ(pool({1, 3}, 2, toy_pool()), 0);
  EXPECT_EQ(pool({0, 1}, 2, toy_pool()), 0);
  EXPECT_EQ(support::pool_over_order({}, 2, toy_pool()), 0);
  EXPECT_EQ(pool({1, 2}, 2, {350 * kMiB, 0, 3}), 0);
}

// The option's text: whole numbers between commas, spaces, tabs and new lines.
TEST(VaryingLengths, StepLengthsAreWholeNumbersInOrder) {
  std::vector<int64_t> steps;
  EXPECT_EQ(plugins::parse_step_lengths("1876, 1414,1287\n 1897\t\r\n,1045,", steps), "");
  EXPECT_EQ(steps, (std::vector<int64_t>{1876, 1414, 1287, 1897, 1045}));
  const std::string how = " (digits only; steps are separated by commas, spaces or new lines)";
  EXPECT_EQ(plugins::parse_step_lengths("12, 1.5e3", steps), "step 2 ('1.5e3') is not a whole number of tokens" + how);
  EXPECT_EQ(plugins::parse_step_lengths("12 -4", steps), "step 2 ('-4') is not a whole number of tokens" + how);
  EXPECT_EQ(plugins::parse_step_lengths("12;14", steps), "step 1 ('12;14') is not a whole number of tokens" + how);
  // A long step's text is cut at 24 bytes, or before, where a character starts (here a 2-byte 'é' at bytes
  // 24-25, 1-based, is left out whole).
  EXPECT_EQ(plugins::parse_step_lengths(std::string(23, '1') + "\xc3\xa9" + "999", steps),
            "step 1 ('" + std::string(23, '1') + "...') is not a whole number of tokens" + how);
  EXPECT_EQ(plugins::parse_step_lengths("7, 0", steps), "step 2 ('0') has no tokens; every step has at least 1");
  EXPECT_EQ(plugins::parse_step_lengths("9" + std::string(29, '9'), steps),
            "step 1 ('" + std::string(24, '9') + "...') is above 1000000000 tokens, longer than any sequence");
  EXPECT_EQ(plugins::parse_step_lengths(" ,\n", steps),
            "lists no step: give each micro-batch's tokens in order, e.g. [1876, 1414, 1287]");
}

// A normal of mean 2 and sd 1 over {1, 2}: weights e^-1/2 = 0.60653 and 1, so
// P(1) = 0.37754 cut to the range; truncated, the tail from 2.5 on,
// sqrt(pi / 2) erfc(0.5 / sqrt 2) = 0.773389, runs at 2: P(1) = 0.25485. One
// step: P(1) x 175 + P(2) x 350 MiB = 283.930 and 305.401 MiB.
TEST(VaryingLengths, ANormalCutOrTruncated) {
  support::StepLengths lengths;
  lengths.min = 1;
  lengths.max = 2;
  lengths.mean = 2;
  lengths.sd = 1;
  EXPECT_NEAR(support::expected_varying_length_pool(lengths, toy_pool()) / kMiB, 283.930, 0.001);
  lengths.truncated = true;
  EXPECT_NEAR(support::expected_varying_length_pool(lengths, toy_pool()) / kMiB, 305.401, 0.001);
  // A mean far above the range: every sample runs at the longest length, cut or truncated.
  lengths.mean = 1e6;
  EXPECT_EQ(support::expected_varying_length_pool(lengths, toy_pool()), 350 * kMiB);
  lengths.truncated = false;
  EXPECT_EQ(support::expected_varying_length_pool(lengths, toy_pool()), 350 * kMiB);
}

// The spread over orders, sampled (1,001 orders, a fixed seed): the toy run's
// three outcomes 175 (order (1,1), probability 1/4), 350 (1/2) and 475 MiB
// (1/4) are its lowest, middle and highest orders; one length gives the
// first step's figure at every quantile.
TEST(VaryingLengths, TheSpreadOverOrders) {
  support::StepLengths lengths;
  lengths.min = 1;
  lengths.max = 2;
  lengths.steps = 2;
  EXPECT_EQ(support::varying_length_pool_quantile(lengths, toy_pool(), 0), 175 * kMiB);
  EXPECT_EQ(support::varying_length_pool_quantile(lengths, toy_pool(), 0.5), 350 * kMiB);
  EXPECT_EQ(support::varying_length_pool_quantile(lengths, toy_pool(), 1), 475 * kMiB);
  EXPECT_EQ(support::varying_length_pool_quantile(lengths, toy_pool(), 1.5), 0);
  lengths.min = 2;
  lengths.steps = 1000;
  for (double q : {0.0, 0.1, 0.9, 1.0}) EXPECT_EQ(support::varying_length_pool_quantile(lengths, toy_pool(), q), 350 * kMiB);
}

TEST(VaryingLengths, FiguresThatDescribeNoRunGiveNothing) {
  support::StepLengths lengths;
  lengths.min = 1;
  lengths.max = 2;
  EXPECT_EQ(support::expected_varying_length_pool(lengths, {350 * kMiB, 0, 3}), 0);
  EXPECT_EQ(support::expected_varying_length_pool(lengths, {350 * kMiB, 300 * kMiB, 0}), 0);
  lengths.steps = 0.5;
  EXPECT_EQ(support::expected_varying_length_pool(lengths, toy_pool()), 0);
  lengths.steps = 1;
  lengths.min = 3;
  EXPECT_EQ(support::expected_varying_length_pool(lengths, toy_pool()), 0);
}

// The scenario: the allocator's options on the measured case, and what it reports.
std::string measured_case(const std::string& allocator_options) {
  std::string text = validation_case("H100-qwen-1.8b-trainer-lora-r8-qkv-gc-ga16-s2048-fixed");
  const std::string table = "use = \"allocator\"\n";
  text.replace(text.find(table), table.size(), table + allocator_options);
  return text;
}

double loss_segments_detail(const std::string& text) {
  const Evaluation e = evaluate(text, "a.toml");
  return std::stod(report_detail(e, "allocator_loss_segments"));
}

// With lengths that vary the reported pool is the expectation from the
// replay's figures at seq_len (run_samples over micro_batch steps).
TEST(VaryingLengths, TheAllocatorReportsTheExpectedPool) {
  const std::string options = "length_min = 91\nlength_mean = 3234.4\nlength_sd = 2547.5\nrun_samples = 128\n";
  const double n = 2048 * kVocab;
  const plugins::LossPathGrowth growth =
      plugins::loss_path_growth(plugins::CrossEntropy::upcast_in_loss, 2, plugins::HeldOutput::dropped, n, n);
  const support::LossPoolAtMax pool{growth.first, growth.longer, growth.segments};
  support::StepLengths lengths;
  lengths.min = 91;
  lengths.max = 2048;
  lengths.mean = 3234.4;
  lengths.sd = 2547.5;
  lengths.steps = 128;
  const double expected = support::expected_varying_length_pool(lengths, pool);
  EXPECT_DOUBLE_EQ(loss_segments_detail(measured_case(options)), std::round(expected));
  // The spread is reported beside it, and length_quantile plans with it.
  const Evaluation e = evaluate(measured_case(options), "a.toml");
  const double p10 = support::varying_length_pool_quantile(lengths, pool, 0.1);
  const double p90 = support::varying_length_pool_quantile(lengths, pool, 0.9);
  EXPECT_DOUBLE_EQ(std::stod(report_detail(e, "allocator_loss_segments_p10")), p10);
  EXPECT_DOUBLE_EQ(std::stod(report_detail(e, "allocator_loss_segments_p90")), p90);
  EXPECT_LT(p10, expected);
  EXPECT_GT(p90, expected);
  EXPECT_DOUBLE_EQ(loss_segments_detail(measured_case(options + "length_quantile = 0.9\n")), p90);
  // Far more than the fixed-length run's settled segments (4 x 1,188 + 594 MiB less the backward thread's
  // 32 MiB cuBLAS workspace in one of them: LossSegments.TheMeasuredTrainerJobsKeepAFourthFp32Segment).
  EXPECT_EQ(loss_segments_detail(measured_case("")), 5'572'132'864.0);
  EXPECT_GT(expected, 2 * 5'572'132'864.0);
  // Two samples a step: half the steps, each the longer of two samples.
  std::string two = measured_case(options);
  two.replace(two.find("micro_batch = 1\n"), 16, "micro_batch = 2\n");
  lengths.per_step = 2;
  lengths.steps = 64;
  const plugins::LossPathGrowth growth2 =
      plugins::loss_path_growth(plugins::CrossEntropy::upcast_in_loss, 2, plugins::HeldOutput::dropped, 2 * n, 2 * n);
  const Evaluation e2 = evaluate(two, "a.toml");
  const double two_samples =
      support::expected_varying_length_pool(lengths, {growth2.first, growth2.longer, growth2.segments});
  EXPECT_DOUBLE_EQ(std::stod(report_detail(e2, "allocator_loss_segments")), std::round(two_samples));
}

// The measured order itself (step_lengths, as the validation case writes it:
// 16 steps a line): the segments the snapshot showed at the run's end,
// 3 x (1,088 + 1,100 + 1,120 + 1,168) MiB, and the first step's 16-bit
// logits, 2 B x 1,876 x 151,936 = 570,063,872 B (its request, unrounded, as
// the expectation counts it): 14,650,342,400 B, 0.4 MB below the snapshot's
// 13,972 MiB (the 544 MiB segment's rounding). No spread is printed: the
// order is the run's.
TEST(VaryingLengths, TheAllocatorFollowsTheRunsOwnOrder) {
  std::string list = "step_lengths = [\n";
  for (size_t i = 0; i < kMeasuredOrder.size(); ++i)
    list += std::to_string(kMeasuredOrder[i]) + (i % 16 == 15 ? ",\n" : ", ");
  list += "]\n";
  const Evaluation e = evaluate(measured_case(list), "a.toml");
  EXPECT_EQ(std::stod(report_detail(e, "allocator_loss_segments")), 14'650'342'400.0);
  EXPECT_TRUE(report_detail(e, "allocator_loss_segments_p90").empty());
  // The same steps as one string, separated by spaces and new lines.
  std::string text = "step_lengths = \"\"\"\n";
  for (size_t i = 0; i < kMeasuredOrder.size(); ++i) text += std::to_string(kMeasuredOrder[i]) + (i % 16 == 15 ? "\n" : " ");
  text += "\"\"\"\n";
  EXPECT_EQ(loss_segments_detail(measured_case(text)), 14'650'342'400.0);
  // The plugin walks only the steps longer than all before (1,876, 1,897, 1,931, 2,013): the same figure as
  // the walk over all 128.
  const double n = 2048 * kVocab;
  const plugins::LossPathGrowth growth =
      plugins::loss_path_growth(plugins::CrossEntropy::upcast_in_loss, 2, plugins::HeldOutput::dropped, n, n);
  const support::LossPoolAtMax pool{growth.first, growth.longer, growth.segments};
  const std::vector<int64_t> records{1876, 1897, 1931, 2013};
  EXPECT_EQ(support::pool_over_order(kMeasuredOrder, 2048, pool), 14'650'342'400.0);
  EXPECT_EQ(support::pool_over_order(records, 2048, pool), 14'650'342'400.0);
  // Longest first (ms-swift's --test_oom_error sorts so): one step longer than all, the fixed-length run's
  // first step at 2,048 tokens, 3 x 1,188 MiB and its 16-bit logits, 622,329,856 B.
  EXPECT_EQ(loss_segments_detail(measured_case("step_lengths = \"2048, 1024, 2048, 512\"\n")),
            3 * 1188 * kMiB + 622'329'856.0);
}

// Short logits need no error: at 16 tokens (9.3 MiB of fp32 logits, requests
// in 20 MiB segments) a longer step maps one 20 MiB segment; at 4 tokens the
// 60 % step's 16-bit logits (0.7 MiB) are the small pool's, which the replay
// leaves out: no growth, the fixed-length figure stands and no spread is
// printed.
TEST(VaryingLengths, ShortLogitsNeedNoError) {
  for (const char* seq : {"seq_len = 16\n", "seq_len = 4\n"}) {
    std::string text = measured_case("length_min = 2\nrun_samples = 100\nlength_truncated = false\n");
    text.replace(text.find("seq_len = 2048\n"), 15, seq);
    const Evaluation e = evaluate(text, "a.toml");
    EXPECT_EQ(report_detail(e, "allocator_loss_segments_p90").empty(), std::string(seq) == "seq_len = 4\n") << seq;
  }
}

TEST(VaryingLengths, OptionErrors) {
  const std::string library = " (plugin library " + plugin_dir() + "/memplan-allocator.so)";
  const auto error = [](const std::string& options) { return error_of(measured_case(options), "a.toml"); };
  EXPECT_NE(error("run_samples = 10\n").find("option 'run_samples': describes steps of varying lengths: "
                                             "give length_min too"),
            std::string::npos)
      << error("run_samples = 10\n");
  EXPECT_NE(error("length_min = 10\n").find("option 'length_min': needs run_samples"), std::string::npos)
      << error("length_min = 10\n");
  EXPECT_NE(error("length_min = 0\nrun_samples = 10\n").find("must be at least 1 token, got 0"),
            std::string::npos);
  EXPECT_NE(error("length_min = 10\nrun_samples = 0\n").find("option 'run_samples': must be at least 1"),
            std::string::npos);
  EXPECT_NE(error("length_min = 10\nrun_samples = 5\nlength_mean = 100\n")
                .find("option 'length_mean': length_mean and length_sd go together"),
            std::string::npos);
  EXPECT_NE(error("length_min = 10\nrun_samples = 5\nlength_mean = 100\nlength_sd = -1\n")
                .find("option 'length_sd': must be a positive number of tokens, got -1"),
            std::string::npos);
  EXPECT_NE(error("length_min = 10\nrun_samples = 5\nlength_truncated = true\n")
                .find("option 'length_truncated': describes the normal's mass above seq_len"),
            std::string::npos);
  EXPECT_NE(error("length_quantile = 0.9\n").find("option 'length_quantile': describes steps of varying lengths"),
            std::string::npos);
  EXPECT_NE(error("length_min = 10\nrun_samples = 5\nlength_quantile = 90\n")
                .find("option 'length_quantile': must be a fraction from 0 to 1, got 90"),
            std::string::npos);
  EXPECT_NE(error("expandable_segments = true\nlength_min = 10\nrun_samples = 5\n")
                .find("option 'length_min': with expandable_segments = true the large pool is one segment"),
            std::string::npos);
  const std::string above = error("length_min = 4096\nrun_samples = 5\n");
  EXPECT_NE(above.find("'allocator': length_min (4096) is above [batch] seq_len (2048), the longest step"),
            std::string::npos)
      << above;
  EXPECT_NE(above.find(library), std::string::npos) << above;
  // The run's own order: alone, well formed, within seq_len.
  EXPECT_NE(error("step_lengths = \"100\"\nlength_min = 10\nrun_samples = 5\n")
                .find("option 'length_min': describes a random order of the samples, and step_lengths gives the "
                      "run's own order: keep one of them"),
            std::string::npos)
      << error("step_lengths = \"100\"\nlength_min = 10\nrun_samples = 5\n");
  EXPECT_NE(error("step_lengths = \"100\"\nlength_quantile = 0.9\n").find("option 'length_quantile': describes a random"),
            std::string::npos);
  EXPECT_NE(error("expandable_segments = true\nstep_lengths = \"100\"\n")
                .find("option 'step_lengths': with expandable_segments = true the large pool is one segment"),
            std::string::npos);
  const std::string bad = error("step_lengths = \"100, 2x0\"\n");
  EXPECT_NE(bad.find("option 'step_lengths': step 2 ('2x0') is not a whole number of tokens"), std::string::npos) << bad;
  EXPECT_NE(bad.find(library), std::string::npos) << bad;
  EXPECT_NE(error("step_lengths = \"\"\n").find("option 'step_lengths': lists no step"), std::string::npos);
  EXPECT_NE(error("step_lengths = [100, 0]\n").find("option 'step_lengths': step 2 ('0') has no tokens"),
            std::string::npos);
  const std::string longer = error("step_lengths = [100, 4096, 20]\n");
  EXPECT_NE(longer.find("'allocator': step_lengths holds a step of 4096 tokens (step 2), above [batch] seq_len "
                        "(2048), the longest step memplan prices: set seq_len to it (seq_len = \"max\" cannot be "
                        "solved for: the listed steps fix the lengths)"),
            std::string::npos)
      << longer;
  // A list that mixes integers and text is the scenario reader's error, at the value.
  EXPECT_NE(error("step_lengths = [100, \"200\"]\n").find("'step_lengths' is an array; a plugin option is"),
            std::string::npos)
      << error("step_lengths = [100, \"200\"]\n");
  // A serving plan has no training steps.
  const auto serving_error = [](const std::string& allocator_options) {
    return error_of("name = \"s\"\nmode = \"infer\"\n[model]\npreset = \"llama-3.1-8b\"\n[batch]\nmicro_batch = 1\n"
                    "seq_len = 1024\n[precision]\nuse = \"bf16\"\n[activations]\nuse = \"inference\"\n[[strategy]]\n"
                    "use = \"allocator\"\n" +
                        allocator_options + "[hardware]\ngpu = \"h100-sxm-80gb\"\n",
                    "a.toml");
  };
  const std::string serving = serving_error("length_min = 10\nrun_samples = 5\n");
  EXPECT_NE(serving.find("length_min describes training steps of varying lengths"), std::string::npos) << serving;
  const std::string listed = serving_error("step_lengths = \"10, 20\"\n");
  EXPECT_NE(listed.find("step_lengths describes training steps of varying lengths (the loss path's segments); this "
                        "plan serves: remove step_lengths"),
            std::string::npos)
      << listed;
}

}  // namespace
}  // namespace memplan::testing
