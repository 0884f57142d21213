// The step timeline (core/src/estimate/breakdown.cpp) on hand-built plans. Sizes are
// chosen so each phase's value can be read off by hand.
#include <gtest/gtest.h>

#include "memplan/core/breakdown.hpp"
#include "memplan/core/plan.hpp"

namespace memplan {
namespace {

PlanItem item(int32_t role, int32_t lifetime, double bytes, int32_t layer = -1, uint32_t count = 1,
              int32_t device = MEMPLAN_DEVICE_GPU) {
  PlanItem result;
  result.set_name("x");
  result.role = role;
  result.lifetime = lifetime;
  result.elements = bytes;
  result.bytes_per_element = 1;
  result.layer = layer;
  result.count = count;
  result.device = device;
  return result;
}

// Weights 100; 10 layers with 5 bytes of gradients and 20 of activations each;
// an LM head gradient of 30 outside the layers.
Plan layered_plan() {
  Plan plan;
  plan.items.push_back(item(MEMPLAN_ROLE_WEIGHTS, MEMPLAN_LIFETIME_PERSISTENT, 100));
  plan.items.push_back(item(MEMPLAN_ROLE_GRADIENTS, MEMPLAN_LIFETIME_GRADIENT, 5, 0, 10));
  plan.items.push_back(item(MEMPLAN_ROLE_GRADIENTS, MEMPLAN_LIFETIME_GRADIENT, 30));
  plan.items.push_back(item(MEMPLAN_ROLE_ACTIVATIONS, MEMPLAN_LIFETIME_ACTIVATION, 20, 0, 10));
  return plan;
}

TEST(Timeline, BackwardWithoutAccumulation) {
  Breakdown b;
  summarize(layered_plan(), 1, b);
  EXPECT_EQ(b.sum, 100u + 50 + 30 + 200);
  EXPECT_EQ(b.timeline[kInit], 100u);
  EXPECT_EQ(b.timeline[kForward], 100u + 200);
  // Start of backward: all activations (200) + the first gradient produced, the
  // largest single group (the LM head's 30) -> 230. End: all gradients (80) +
  // one layer's activations (20) -> 100. The larger, 230, is the high point.
  EXPECT_EQ(b.timeline[kBackward], 100u + 230);
  EXPECT_EQ(b.timeline[kOptimizerStep], 100u + 80);
  EXPECT_EQ(b.peak, 330u);
  EXPECT_EQ(b.peak_phase, kBackward);
}

TEST(Timeline, AccumulationKeepsGradientsThroughForward) {
  Breakdown b;
  summarize(layered_plan(), 4, b);
  EXPECT_EQ(b.timeline[kForward], 100u + 80 + 200);
  EXPECT_EQ(b.timeline[kBackward], 100u + 80 + 200);
  EXPECT_EQ(b.peak, 380u);
  EXPECT_EQ(b.peak_phase, kForward);  // ties go to the earlier phase
}

TEST(Timeline, TransientsCountOnlyInTheirPhase) {
  Plan plan = layered_plan();
  plan.items.push_back(item(MEMPLAN_ROLE_BUFFERS, MEMPLAN_LIFETIME_TRANSIENT_OPTIMIZER, 500));
  plan.items.push_back(item(MEMPLAN_ROLE_ACTIVATIONS, MEMPLAN_LIFETIME_TRANSIENT_BACKWARD, 7));
  Breakdown b;
  summarize(plan, 1, b);
  EXPECT_EQ(b.timeline[kBackward], 100u + 230 + 7);
  EXPECT_EQ(b.timeline[kOptimizerStep], 100u + 80 + 500);
  EXPECT_EQ(b.peak_phase, kOptimizerStep);
  EXPECT_EQ(b.sum, 380u + 507);
}

// Lifetime backward_start (plugin_abi.h memplan_step_high_points_n): what backward's
// start adds before any layer's backward runs (the loss's moment), alive at the start
// only. The step rule is
//   backward = P + T_b + max(min(G + A, A + G1) + S, min(G + A, G + A1)),
//   or P + T_b + G + A + S with accumulation (every gradient exists from the start).
// A plan whose gradients outweigh its activations: weights 100; 10 layers with 20
// bytes of gradients and 5 of activations each; an LM head gradient of 30; a
// backward transient of 7. G = 230, A = 50, G1 = 30 (the head), A1 = 5. With
// `start` bytes of lifetime backward_start and `end` of backward_end.
Plan gradients_outweigh_activations(double start, double end = 0) {
  Plan plan;
  plan.items.push_back(item(MEMPLAN_ROLE_WEIGHTS, MEMPLAN_LIFETIME_PERSISTENT, 100));
  plan.items.push_back(item(MEMPLAN_ROLE_GRADIENTS, MEMPLAN_LIFETIME_GRADIENT, 20, 0, 10));
  plan.items.push_back(item(MEMPLAN_ROLE_GRADIENTS, MEMPLAN_LIFETIME_GRADIENT, 30));
  plan.items.push_back(item(MEMPLAN_ROLE_ACTIVATIONS, MEMPLAN_LIFETIME_ACTIVATION, 5, 0, 10));
  plan.items.push_back(item(MEMPLAN_ROLE_ACTIVATIONS, MEMPLAN_LIFETIME_TRANSIENT_BACKWARD, 7));
  plan.items.push_back(item(MEMPLAN_ROLE_ACTIVATIONS, MEMPLAN_LIFETIME_BACKWARD_START, start));
  if (end > 0) plan.items.push_back(item(MEMPLAN_ROLE_GRADIENTS, MEMPLAN_LIFETIME_BACKWARD_END, end));
  return plan;
}

TEST(Timeline, BackwardStartMeetsOnlyTheStart) {
  // S = 40, no accumulation: start min(280, 50 + 30) + 40 = 120; end min(280, 230 + 5) = 235.
  // The end is the high point and S is not in it: 100 + 7 + 235 = 342 (as a transient_backward
  // item, alive throughout backward, the 40 would have made it 382).
  Breakdown small;
  summarize(gradients_outweigh_activations(40), 1, small);
  EXPECT_EQ(small.timeline[kForward], 100u + 50);
  EXPECT_EQ(small.timeline[kBackward], 342u);
  EXPECT_EQ(small.timeline[kOptimizerStep], 100u + 230);
  EXPECT_EQ(small.sum, 100u + 230 + 50 + 7 + 40);
  // S = 200: start 80 + 200 = 280 > 235: 100 + 7 + 280 = 387.
  Breakdown large;
  summarize(gradients_outweigh_activations(200), 1, large);
  EXPECT_EQ(large.timeline[kBackward], 387u);
  EXPECT_EQ(large.peak_phase, kBackward);
  // With accumulation over 4 micro-batches: forward P + G + A = 380 (S is not in it);
  // backward P + T_b + G + A + S = 100 + 7 + 230 + 50 + 40 = 427; optimizer P + G = 330.
  Breakdown accumulating;
  summarize(gradients_outweigh_activations(40), 4, accumulating);
  EXPECT_EQ(accumulating.timeline[kForward], 380u);
  EXPECT_EQ(accumulating.timeline[kBackward], 427u);
  EXPECT_EQ(accumulating.timeline[kOptimizerStep], 330u);
}

// Lifetime backward_end: what backward's end adds beside all the gradients (a tied
// embedding's second gradient), alive at the end only:
//   backward = P + T_b + max(min(G + A, A + G1) + S, min(G + A, G + A1) + E),
//   or P + T_b + G + A + max(S, E) with accumulation.
// The plan above with S = 200 and E = 60: start 80 + 200 = 280; end 235 + 60 = 295:
// 100 + 7 + 295 = 402. With accumulation: 100 + 7 + 280 + max(200, 60) = 587.
TEST(Timeline, BackwardEndMeetsOnlyTheEnd) {
  const Plan plan = gradients_outweigh_activations(200, 60);
  Breakdown once;
  summarize(plan, 1, once);
  EXPECT_EQ(once.timeline[kBackward], 402u);
  EXPECT_EQ(once.timeline[kOptimizerStep], 100u + 230);  // E is gone by the optimizer step
  EXPECT_EQ(once.components[MEMPLAN_ROLE_GRADIENTS], 230u + 60);
  Breakdown accumulating;
  summarize(plan, 4, accumulating);
  EXPECT_EQ(accumulating.timeline[kBackward], 587u);
  EXPECT_EQ(lifetime_name(MEMPLAN_LIFETIME_BACKWARD_END), "transient_backward_end");
  EXPECT_EQ(lifetime_name(MEMPLAN_LIFETIME_BACKWARD_START), "transient_backward_start");
}

// Lifetime backward_layers: what the layers' backward holds from the first layer's backward to backward's
// end, but not at the loss's backward before it (FSDP2's reduce-scatter input, kept until the next unit's
// post-backward):
//   backward = P + T_b + max(min(G + A, A + G1) + max(S, L), min(G + A, G + A1) + E + L),
//   or P + T_b + G + A + max(S, E + L) with accumulation.
// The plan above with S = 200, E = 60: start 80 + 200 = 280, end 235 + 60 = 295 (402 in all). L = 30: start
// 80 + max(200, 30) = 280, end 295 + 30 = 325: 100 + 7 + 325 = 432. With S = 40, E = 0 and L = 30: start
// 80 + max(40, 30) = 120, end 235 + 30 = 265: 100 + 7 + 265 = 372. Neither is in forward or the optimizer
// step. With accumulation (S = 200, E = 60, L = 30): 100 + 7 + 280 + max(200, 60 + 30) = 587; (S = 40, E = 60,
// L = 30): 100 + 7 + 280 + max(40, 90) = 477. Where the start
// is the high point, L and S do not meet: Timeline.BackwardLayersReplaceTheLossAtTheStart.
TEST(Timeline, BackwardLayersMeetTheEndAndTheFirstLayer) {
  Plan plan = gradients_outweigh_activations(200, 60);
  plan.items.push_back(item(MEMPLAN_ROLE_BUFFERS, MEMPLAN_LIFETIME_BACKWARD_LAYERS, 30));
  Breakdown once;
  summarize(plan, 1, once);
  EXPECT_EQ(once.timeline[kBackward], 432u);
  EXPECT_EQ(once.timeline[kForward], 100u + 50);        // not in forward
  EXPECT_EQ(once.timeline[kOptimizerStep], 100u + 230);  // nor in the optimizer step
  Breakdown accumulating;
  summarize(plan, 4, accumulating);
  EXPECT_EQ(accumulating.timeline[kBackward], 587u);
  // Accumulating where E + L passes S: S = 40, E = 60, L = 30: 100 + 7 + 280 + max(40, 90) = 477.
  Plan end_heavy = gradients_outweigh_activations(40, 60);
  end_heavy.items.push_back(item(MEMPLAN_ROLE_BUFFERS, MEMPLAN_LIFETIME_BACKWARD_LAYERS, 30));
  Breakdown end_accumulating;
  summarize(end_heavy, 4, end_accumulating);
  EXPECT_EQ(end_accumulating.timeline[kBackward], 477u);
  Plan small = gradients_outweigh_activations(40);
  small.items.push_back(item(MEMPLAN_ROLE_BUFFERS, MEMPLAN_LIFETIME_BACKWARD_LAYERS, 30));
  Breakdown s;
  summarize(small, 1, s);
  EXPECT_EQ(s.timeline[kBackward], 372u);
  EXPECT_EQ(lifetime_name(MEMPLAN_LIFETIME_BACKWARD_LAYERS), "transient_backward_layers");
}

// Lifetime backward_in_layers (plugin_abi.h): alive only while a layer's backward runs. At backward's start
// it is the first layer's moment with backward_layers, in place of the loss's S where L + Y is the larger; at
// backward's end it is the last layer's moment, in place of the embedding's E where it is the larger (the two
// never meet). The plan above with S = 40 and E = 60 (G = 230, A = 50, G1 = 30, A1 = 5, T = 7): start
// min(280, 80) + max(S, L + Y), end min(280, 235) + L + max(E, Y).
//   Y = 100: start 80 + 100 = 180, end 235 + 100 = 335: 100 + 7 + 335 = 442 (as backward_layers, beside E at
//     the end, or as transient_backward, the 100 would have made it 502);
//   Y = 50: below E at the end and beside nothing there: 235 + 60 = 295, start 80 + 50: 100 + 7 + 295 = 402;
//   Y = 200: start 280, end 235 + 200 = 435: 100 + 7 + 435 = 542;
//   L = 30, Y = 100: start 80 + 130 = 210, end 235 + 30 + 100 = 365: 100 + 7 + 365 = 472;
//   accumulating (every gradient from the start), L = 30, Y = 100: G + A + max(S, L + max(E, Y)) =
//     280 + 130: 100 + 7 + 410 = 517.
uint64_t backward_high_point(const Plan& plan, int64_t grad_accum = 1) {
  Breakdown b;
  summarize(plan, grad_accum, b);
  return b.timeline[kBackward];
}

TEST(Timeline, BackwardInLayersMeetsNeitherTheLossNorTheEmbedding) {
  const auto plan = [](double layers, double in_layers) {
    Plan p = gradients_outweigh_activations(40, 60);
    if (layers > 0) p.items.push_back(item(MEMPLAN_ROLE_BUFFERS, MEMPLAN_LIFETIME_BACKWARD_LAYERS, layers));
    p.items.push_back(item(MEMPLAN_ROLE_BUFFERS, MEMPLAN_LIFETIME_BACKWARD_IN_LAYERS, in_layers));
    return p;
  };
  Breakdown in_layers_only;
  summarize(plan(0, 100), 1, in_layers_only);
  EXPECT_EQ(in_layers_only.timeline[kBackward], 442u);
  EXPECT_EQ(in_layers_only.timeline[kForward], 100u + 50);        // not in forward
  EXPECT_EQ(in_layers_only.timeline[kOptimizerStep], 100u + 230);  // nor in the optimizer step
  EXPECT_EQ(backward_high_point(plan(0, 50)), 402u);
  EXPECT_EQ(backward_high_point(plan(0, 200)), 542u);
  EXPECT_EQ(backward_high_point(plan(30, 100)), 472u);
  EXPECT_EQ(backward_high_point(plan(30, 100), 4), 517u);
  EXPECT_EQ(lifetime_name(MEMPLAN_LIFETIME_BACKWARD_IN_LAYERS), "transient_backward_in_layers");
}

// Lifetimes forward_in_layers (F) and forward_end (H) (plugin_abi.h): a layer's forward working set and
// the head's and loss's at the forward's end never meet, so forward = P + A + T + max(F, H) (+ G when
// accumulating). The plan above (P = 100, A = 50, G = 230, S = 40, and its transient_backward 7, which the
// sum counts but no forward does) with T = 3 through the forward:
//   F = 20, H = 60: 100 + 50 + 3 + 60 = 213 (summed, as transient_forward items, it would be 233);
//   F = 90, H = 60: 100 + 50 + 3 + 90 = 243;
//   accumulating over 4 micro-batches: 243 + G 230 = 473.
// Neither is alive in backward or at the optimizer step: backward stays 342 (BackwardStartMeetsOnlyTheStart).
TEST(Timeline, ForwardInLayersAndForwardEndDoNotMeet) {
  const auto plan = [](double in_layers, double end) {
    Plan p = gradients_outweigh_activations(40);
    p.items.push_back(item(MEMPLAN_ROLE_BUFFERS, MEMPLAN_LIFETIME_TRANSIENT_FORWARD, 3));
    p.items.push_back(item(MEMPLAN_ROLE_BUFFERS, MEMPLAN_LIFETIME_FORWARD_IN_LAYERS, in_layers));
    p.items.push_back(item(MEMPLAN_ROLE_ACTIVATIONS, MEMPLAN_LIFETIME_FORWARD_END, end));
    return p;
  };
  Breakdown end_larger;
  summarize(plan(20, 60), 1, end_larger);
  EXPECT_EQ(end_larger.timeline[kForward], 213u);
  EXPECT_EQ(end_larger.timeline[kBackward], 342u);
  EXPECT_EQ(end_larger.timeline[kOptimizerStep], 100u + 230);
  EXPECT_EQ(end_larger.sum, 100u + 230 + 50 + 7 + 40 + 3 + 20 + 60);
  Breakdown layers_larger;
  summarize(plan(90, 60), 1, layers_larger);
  EXPECT_EQ(layers_larger.timeline[kForward], 243u);
  Breakdown accumulating;
  summarize(plan(90, 60), 4, accumulating);
  EXPECT_EQ(accumulating.timeline[kForward], 473u);
  EXPECT_EQ(lifetime_name(MEMPLAN_LIFETIME_FORWARD_IN_LAYERS), "transient_forward_in_layers");
  EXPECT_EQ(lifetime_name(MEMPLAN_LIFETIME_FORWARD_END), "transient_forward_end");
}

// Activations outweigh gradients (weights 100; 10 layers of 2 bytes of gradients and 50 of activations:
// G = 20, A = 500, G1 = 2, A1 = 50; no other transients): the start is the high point, min(520, 502) = 502.
// The loss's S = 40 and the layers' L = 30 do not meet there: 100 + 502 + max(40, 30) = 642, not 672; with
// L = 60 the first layer's moment is the higher: 100 + 502 + 60 = 662. The end, 20 + 50 + L, stays below.
TEST(Timeline, BackwardLayersReplaceTheLossAtTheStart) {
  const auto plan = [](double start, double layers) {
    Plan p;
    p.items.push_back(item(MEMPLAN_ROLE_WEIGHTS, MEMPLAN_LIFETIME_PERSISTENT, 100));
    p.items.push_back(item(MEMPLAN_ROLE_GRADIENTS, MEMPLAN_LIFETIME_GRADIENT, 2, 0, 10));
    p.items.push_back(item(MEMPLAN_ROLE_ACTIVATIONS, MEMPLAN_LIFETIME_ACTIVATION, 50, 0, 10));
    p.items.push_back(item(MEMPLAN_ROLE_ACTIVATIONS, MEMPLAN_LIFETIME_BACKWARD_START, start));
    p.items.push_back(item(MEMPLAN_ROLE_BUFFERS, MEMPLAN_LIFETIME_BACKWARD_LAYERS, layers));
    return p;
  };
  EXPECT_EQ(backward_high_point(plan(40, 30)), 642u);
  EXPECT_EQ(backward_high_point(plan(40, 60)), 662u);
}

// Source compatibility: memplan_step_high_points reads the MEMPLAN_LIFETIME_SETUP + 1 entries ABI 1.3 first
// wrote (an array sized so stays in bounds, and its backward_start and backward_end bytes count as none);
// memplan_step_high_points_n reads as many as it is given. The plan above as sums by lifetime
// (P 100, G 230, A 50, T_b 7, S 200, E 60; G1 30, A1 5): 100 + 7 + 235 = 342 against 402.
TEST(Timeline, StepRuleOfSevenEntriesIgnoresTheLaterLifetimes) {
  double sums[MEMPLAN_LIFETIME_COUNT] = {};
  sums[MEMPLAN_LIFETIME_PERSISTENT] = 100;
  sums[MEMPLAN_LIFETIME_GRADIENT] = 230;
  sums[MEMPLAN_LIFETIME_ACTIVATION] = 50;
  sums[MEMPLAN_LIFETIME_TRANSIENT_BACKWARD] = 7;
  sums[MEMPLAN_LIFETIME_BACKWARD_START] = 200;
  sums[MEMPLAN_LIFETIME_BACKWARD_END] = 60;
  double seven[3], all[3];
  memplan_step_high_points(sums, 30, 5, 0, seven);
  memplan_step_high_points_n(sums, MEMPLAN_LIFETIME_COUNT, 30, 5, 0, all);
  EXPECT_EQ(seven[1], 342.0);
  EXPECT_EQ(all[1], 402.0);
  EXPECT_EQ(seven[0], all[0]);
  EXPECT_EQ(seven[2], all[2]);
}

TEST(Timeline, CpuItemsAreReportedApart) {
  Plan plan = layered_plan();
  plan.items.push_back(item(MEMPLAN_ROLE_OPTIMIZER_STATES, MEMPLAN_LIFETIME_PERSISTENT, 1000, -1, 1, MEMPLAN_DEVICE_CPU));
  Breakdown b;
  summarize(plan, 1, b);
  EXPECT_EQ(b.sum, 380u);
  EXPECT_EQ(b.cpu_sum, 1000u);
  EXPECT_EQ(b.cpu_components[MEMPLAN_ROLE_OPTIMIZER_STATES], 1000u);
  EXPECT_EQ(b.peak, 330u);
}

TEST(Timeline, FractionalBytesRoundUpPerInstance) {
  Plan plan;
  PlanItem int4 = item(MEMPLAN_ROLE_WEIGHTS, MEMPLAN_LIFETIME_PERSISTENT, 3, 0, 4);
  int4.bytes_per_element = 0.5;  // 3 int4 values need 2 bytes, in each of 4 layers
  plan.items.push_back(int4);
  Breakdown b;
  summarize(plan, 1, b);
  EXPECT_EQ(b.sum, 8u);
}

// Releasable reserve (MEMPLAN_ITEM_RELEASABLE: the caching allocator's free
// segments, which release_cached_blocks frees before an allocation fails)
// gives way where device memory would exceed the GPU's. Weights 100, a
// forward transient of 40, 30 bytes outside the allocator, and a releasable
// reserve of 50 in forward and 20 in the optimizer step:
//   forward: allocated 140, reserved 190, device 220; on a GPU of 200 the
//     reserve drops by 20: reserved 170, device 200;
//   optimizer: device 100 + 20 + 30 = 150 fits, nothing changes;
//   on a GPU of 150 forward would need 70 off but only 50 can go: reserved
//     140, device 170 (the plan still does not fit).
TEST(Timeline, ReleasableReserveGivesWayAtTheGpusMemory) {
  Plan plan;
  plan.items.push_back(item(MEMPLAN_ROLE_WEIGHTS, MEMPLAN_LIFETIME_PERSISTENT, 100));
  plan.items.push_back(item(MEMPLAN_ROLE_ACTIVATIONS, MEMPLAN_LIFETIME_TRANSIENT_FORWARD, 40));
  PlanItem context = item(MEMPLAN_ROLE_OVERHEAD, MEMPLAN_LIFETIME_PERSISTENT, 30);
  context.flags = MEMPLAN_ITEM_OUTSIDE_ALLOCATOR;
  plan.items.push_back(context);
  for (auto [lifetime, bytes] : {std::pair{MEMPLAN_LIFETIME_TRANSIENT_FORWARD, 50.0},
                                 std::pair{MEMPLAN_LIFETIME_TRANSIENT_OPTIMIZER, 20.0}}) {
    PlanItem pools = item(MEMPLAN_ROLE_OVERHEAD, lifetime, bytes);
    pools.flags = MEMPLAN_ITEM_ALLOCATOR_RESERVE | MEMPLAN_ITEM_RELEASABLE;
    plan.items.push_back(pools);
  }
  Breakdown uncapped;
  summarize(plan, 1, uncapped);
  EXPECT_EQ(uncapped.quantities[kDevice].timeline[kForward], 220u);
  Breakdown b;
  summarize(plan, 1, b, 200);
  EXPECT_EQ(b.quantities[kAllocated].timeline[kForward], 140u);
  EXPECT_EQ(b.quantities[kReserved].timeline[kForward], 170u);
  EXPECT_EQ(b.quantities[kDevice].timeline[kForward], 200u);
  EXPECT_EQ(b.quantities[kReserved].timeline[kOptimizerStep], 120u);
  EXPECT_EQ(b.quantities[kDevice].timeline[kOptimizerStep], 150u);
  EXPECT_EQ(b.peak, 200u);
  EXPECT_EQ(b.reserve_released, 20u);
  EXPECT_EQ(uncapped.reserve_released, 0u);
  Breakdown small;
  summarize(plan, 1, small, 150);
  EXPECT_EQ(small.quantities[kReserved].timeline[kForward], 140u);
  EXPECT_EQ(small.quantities[kDevice].timeline[kForward], 170u);
  EXPECT_EQ(small.reserve_released, 50u);
  // A reserve that is not releasable (rounding, fragmentation) stays.
  plan.items[3].flags = MEMPLAN_ITEM_ALLOCATOR_RESERVE;
  Breakdown kept;
  summarize(plan, 1, kept, 200);
  EXPECT_EQ(kept.quantities[kDevice].timeline[kForward], 220u);
  EXPECT_EQ(kept.reserve_released, 0u);
}

// Only the allocator's reserve can be released: a releasable item outside it
// is a plugin error (plan.cpp item_problem), caught by the fast check too.
TEST(Timeline, ReleasableOutsideTheReserveIsRefused) {
  PlanItem pools = item(MEMPLAN_ROLE_OVERHEAD, MEMPLAN_LIFETIME_TRANSIENT_FORWARD, 50);
  pools.flags = MEMPLAN_ITEM_RELEASABLE;
  EXPECT_FALSE(item_values_valid(pools));
  const auto problem = item_problem(pools, ItemCheck::values, nullptr);
  ASSERT_TRUE(problem.has_value());
  EXPECT_EQ(*problem,
            "MEMPLAN_ITEM_RELEASABLE without MEMPLAN_ITEM_ALLOCATOR_RESERVE (rule: only the allocator's reserve, its "
            "free cached segments, can be released; set the item's pool to reserve)");
  pools.flags |= MEMPLAN_ITEM_ALLOCATOR_RESERVE;
  EXPECT_TRUE(item_values_valid(pools));
  EXPECT_FALSE(item_problem(pools, ItemCheck::values, nullptr).has_value());
}

}  // namespace
}  // namespace memplan
