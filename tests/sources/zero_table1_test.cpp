// ZeRO paper (Rajbhandari et al. 2020, arXiv 1910.02054), Table 1: per-device
// memory of model states for a 7.5B-parameter model trained with mixed
// precision Adam (K = 12), for N_d data-parallel devices, in GB = 10^9 bytes.
//   baseline:   (2 + 2 + K) Psi
//   P_os:       2 Psi + 2 Psi + K Psi / N_d
//   P_os+g:     2 Psi + (2 + K) Psi / N_d
//   P_os+g+p:   (2 + 2 + K) Psi / N_d
// The paper prints three significant figures (e.g. 41.25 -> 41.3, 35.625 ->
// 35.6, 1.875 -> 1.88), so each printed cell is checked to half a unit of its
// last digit; the exact formula is checked to the byte.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "test_support.hpp"

namespace memplan::testing {
namespace {

constexpr double kPsi = 7.5e9;
constexpr double kK = 12;

std::string zero_scenario(int data_parallel, int stage) {
  return "name = \"zero-table1\"\nmode = \"train\"\n[model]\nparams = 7.5e9\n"
         "[precision]\nuse = \"mixed-fp16\"\n[optimizer]\nuse = \"adam\"\n[activations]\nuse = \"none\"\n"
         "[[strategy]]\nuse = \"data-parallel\"\nsize = " + std::to_string(data_parallel) +
         "\n[[strategy]]\nuse = \"zero\"\nstage = " + std::to_string(stage) + "\n";
}

double formula_bytes(int stage, double n) {
  switch (stage) {
    case 0: return (2 + 2 + kK) * kPsi;
    case 1: return 2 * kPsi + 2 * kPsi + kK * kPsi / n;
    case 2: return 2 * kPsi + (2 + kK) * kPsi / n;
    default: return (2 + 2 + kK) * kPsi / n;
  }
}

struct Row {
  int devices;
  // Printed in Table 1 for the 7.5B model: baseline, P_os, P_os+g, P_os+g+p.
  double printed[4];
  int decimals[4];
};

constexpr Row kTable1[] = {
    {1, {120, 120, 120, 120}, {0, 0, 0, 0}},
    {4, {120, 52.5, 41.3, 30}, {0, 1, 1, 0}},
    {16, {120, 35.6, 21.6, 7.5}, {0, 1, 1, 1}},
    {64, {120, 31.4, 16.6, 1.88}, {0, 1, 1, 2}},
    {256, {120, 30.4, 15.4, 0.47}, {0, 1, 1, 2}},
    {1024, {120, 30.1, 15.1, 0.12}, {0, 1, 1, 2}},
};

TEST(ZeroPaperTable1, SevenPointFiveBillionModelMatchesEveryCell) {
  for (const Row& row : kTable1) {
    for (int stage = 0; stage <= 3; ++stage) {
      SCOPED_TRACE("N_d = " + std::to_string(row.devices) + ", ZeRO stage " + std::to_string(stage));
      Evaluation evaluation = evaluate_paper(zero_scenario(row.devices, stage));
      const Breakdown& b = evaluation.breakdown();
      EXPECT_NEAR(static_cast<double>(b.sum), formula_bytes(stage, row.devices), 8.0);  // per-item ceil only
      EXPECT_EQ(b.peak, b.sum);  // no activations: the optimizer step holds every model state
      const double half_unit = 0.5 * std::pow(10.0, -row.decimals[stage]);
      EXPECT_NEAR(static_cast<double>(b.sum) / kGB, row.printed[stage], half_unit + 1e-9);
      EXPECT_EQ(b.world_size, row.devices);
    }
  }
}

TEST(ZeroPaperTable1, StageOneShardsMasterWeightsWithOptimizerStates) {
  // K = 12 is the fp32 master copy (4) plus Adam's two fp32 moments (8): all
  // three are "optimizer states" in the paper and P_os divides all of them.
  Evaluation evaluation = evaluate_paper(zero_scenario(4, 1));
  EXPECT_EQ(evaluation.component(MEMPLAN_ROLE_MASTER_WEIGHTS), static_cast<uint64_t>(4 * kPsi / 4));
  EXPECT_EQ(evaluation.component(MEMPLAN_ROLE_OPTIMIZER_STATES), static_cast<uint64_t>(8 * kPsi / 4));
  EXPECT_EQ(evaluation.component(MEMPLAN_ROLE_WEIGHTS), static_cast<uint64_t>(2 * kPsi));
  EXPECT_EQ(evaluation.component(MEMPLAN_ROLE_GRADIENTS), static_cast<uint64_t>(2 * kPsi));
}

}  // namespace
}  // namespace memplan::testing
