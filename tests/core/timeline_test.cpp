// The step timeline (core/src/estimate/breakdown.cpp) on hand-built plans. Sizes are
// chosen so each phase's value can be read off by hand.
#include <gtest/gtest.h>

#include "memplan/core/breakdown.hpp"

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

}  // namespace
}  // namespace memplan
