// Precision recipes of issue 3: the Megatron-LM distributed optimizer table
// (bytes per parameter, the documentation's unit), `main_grads`, and the fp8
// recipe's weight copies.
#include <gtest/gtest.h>

#include <string>

#include "scenarios.hpp"

namespace memplan::testing::optimizers {
namespace {

// ---------------------------------------------------------------------------
// Megatron-LM, "Distributed Optimizer" (docs/source/api-guide/dist_optimizer.md;
// docs.nvidia.com/megatron-core/developer-guide/latest/distrib_optimizer.html):
// "the theoretical number of bytes per parameter is (where 'd' is the data
// parallel size):
//   |                              | Non-distributed optim | Distributed optim |
//   | float16 param, float16 grads | 20                    | 4 + 16/d          |
//   | float16 param, fp32 grads    | 18                    | 6 + 12/d          |
//   | fp32 param, fp32 grads       | 16                    | 8 + 8/d           |"
// The distributed optimizer shards what the optimizer owns (fp32 main params,
// fp32 main grads of 16-bit grads, Adam's moments), as ZeRO stage 1 does, and
// not the model's params and grads. Each row as a recipe:
//   float16/float16  mixed-fp16 (or mixed-bf16) + main_grads = "fp32":
//                    params 2 + grads 2 | main params 4 + main grads 4 + moments 8
//   float16/fp32     mixed-bf16 + gradients = "fp32" (Megatron's bf16 default):
//                    params 2 + grads 4 | main params 4 + moments 8
//   fp32/fp32        fp32: params 4 + grads 4 | moments 8 (no separate main params)
// Psi = 1e9 parameters, divisible by every d below; bytes per parameter =
// the plan's sum / Psi.
struct Row {
  const char* name;
  std::string precision;
  double non_distributed;
  double whole;    // the distributed column's constant
  double sharded;  // its numerator over d
};

const Row kRows[] = {
    {"float16 param, float16 grads (fp16)", "use = \"mixed-fp16\"\nmain_grads = \"fp32\"", 20, 4, 16},
    {"float16 param, float16 grads (bf16)", "use = \"mixed-bf16\"\nmain_grads = \"fp32\"", 20, 4, 16},
    {"float16 param, fp32 grads", "use = \"mixed-bf16\"\ngradients = \"fp32\"", 18, 6, 12},
    {"fp32 param, fp32 grads", "use = \"fp32\"", 16, 8, 8},
};

double bytes_per_parameter(const std::string& precision, const std::string& strategies) {
  const Evaluation e = evaluate_paper(train(params_model(1e9), precision, "use = \"adam\"", strategies));
  return static_cast<double>(e.breakdown().sum) / 1e9;
}

TEST(MegatronDistributedOptimizerTable, NonDistributedColumn) {
  for (const Row& row : kRows) {
    EXPECT_DOUBLE_EQ(bytes_per_parameter(row.precision, ""), row.non_distributed) << row.name;
    // Data parallelism alone replicates everything.
    EXPECT_DOUBLE_EQ(bytes_per_parameter(row.precision, "[[strategy]]\nuse = \"data-parallel\"\nsize = 8\n"),
                     row.non_distributed)
        << row.name;
  }
}

TEST(MegatronDistributedOptimizerTable, DistributedColumnIsZeroStageOne) {
  for (const Row& row : kRows)
    for (int d : {1, 2, 8, 64}) {
      EXPECT_DOUBLE_EQ(bytes_per_parameter(row.precision, data_parallel_zero(d, 1)), row.whole + row.sharded / d)
          << row.name << ", d = " << d;
    }
}

// The fp32 main grads exist from the copy at the step until zero_grad: the
// step timeline counts them in the optimizer phase only. mixed-fp16 with
// main_grads, 1e9 parameters, no sharding:
//   init 2 + 4 + 8 = 14e9; backward + gradients 2 = 16e9; optimizer + 4 = 20e9
TEST(MainGrads, OnlyInTheOptimizerStep) {
  const Evaluation e =
      evaluate_paper(train(params_model(1e9), "use = \"mixed-fp16\"\nmain_grads = \"fp32\"", "use = \"adam\""));
  EXPECT_EQ(e.breakdown().timeline[kInit], 14'000'000'000u);
  EXPECT_EQ(e.breakdown().timeline[kBackward], 16'000'000'000u);
  EXPECT_EQ(optimizer_step(e), 20'000'000'000u);
  EXPECT_EQ(bytes_named(e, ".main_grad"), 4'000'000'000u);
  // Not set: no copy (the recipes' default).
  EXPECT_EQ(bytes_named(evaluate_paper(train(params_model(1e9), "use = \"mixed-fp16\"", "use = \"adam\"")), ".main_grad"),
            0u);
}

// ---------------------------------------------------------------------------
// fp8 (Transformer Engine; Micikevicius et al. 2022, arXiv 2209.05433).
// The tiny model's linear layers (q, k, v, o, MLP) hold
// 2 layers x (4,096 + 2,048 + 2,048 + 4,096 + 24,576) = 73,728 elements; the
// embedding, LM head and norms (128,320) have no fp8 copy.
constexpr uint64_t kTinyLinear = 73'728;

Evaluation tiny_fp8(const std::string& options, const std::string& extra = "") {
  return evaluate_paper(train(kTinyModel, "use = \"fp8\"\n" + options, "use = \"adam\"", extra));
}

// Defaults: bf16 weights, fp32 gradients (Megatron-LM accumulates bf16
// models' gradients in fp32), fp32 master weights, and a cached fp8 weight
// plus its fp8 transpose per linear weight, 2 bytes x 73,728 = 147,456.
TEST(Fp8Recipe, CachedCopiesAndTransposes) {
  const Evaluation e = tiny_fp8("");
  EXPECT_EQ(e.component(MEMPLAN_ROLE_WEIGHTS), 2u * 202'048);
  EXPECT_EQ(e.component(MEMPLAN_ROLE_GRADIENTS), 4u * 202'048);
  EXPECT_EQ(e.component(MEMPLAN_ROLE_MASTER_WEIGHTS), 4u * 202'048);
  EXPECT_EQ(e.component(MEMPLAN_ROLE_BUFFERS), 2 * kTinyLinear);
  EXPECT_EQ(e.item_bytes("layers.0-1.mlp.fp8", MEMPLAN_ROLE_BUFFERS), 2u * 24'576 * 2);
  EXPECT_EQ(e.item_bytes("embed_tokens.fp8", MEMPLAN_ROLE_BUFFERS), 0u);
  // Persistent: already there before the first forward.
  EXPECT_EQ(e.breakdown().timeline[kInit], 2u * 202'048 + 4u * 202'048 + 8u * 202'048 + 2 * kTinyLinear);
  // The copies are not parameters: the counts stay the model's.
  EXPECT_DOUBLE_EQ(e.breakdown().params_total, kTinyParameters);
}

// Not cached: only the transpose each layer saves for its backward, 1 byte x
// 73,728, alive from forward to backward (not at init, not in the step).
TEST(Fp8Recipe, UncachedTransposesLiveFromForwardToBackward) {
  const Evaluation cached = tiny_fp8("");
  const Evaluation e = tiny_fp8("cache_fp8_weights = false");
  EXPECT_EQ(e.component(MEMPLAN_ROLE_BUFFERS), kTinyLinear);
  EXPECT_EQ(e.item_bytes("layers.0-1.mlp.fp8_t", MEMPLAN_ROLE_BUFFERS), 24'576u * 2);
  EXPECT_EQ(e.breakdown().timeline[kInit], cached.breakdown().timeline[kInit] - 2 * kTinyLinear);
  EXPECT_EQ(e.breakdown().timeline[kForward], e.breakdown().timeline[kInit] + kTinyLinear);
  EXPECT_EQ(optimizer_step(e), optimizer_step(cached) - 2 * kTinyLinear);
}

// Without a transpose the cached copy is 1 byte; with fp8 primary weights
// (weights = "fp8", Transformer Engine's fp8_model_init) only the transpose
// remains, and with neither nothing does. fp8_model_init makes only TE's
// modules' matrices fp8: the embedding, LM head and norms (128,320 elements)
// stay in the 16-bit dtype, 73,728 x 1 + 128,320 x 2 = 330,368 bytes.
TEST(Fp8Recipe, TransposeAndFp8PrimaryWeights) {
  EXPECT_EQ(tiny_fp8("fp8_transpose = false").component(MEMPLAN_ROLE_BUFFERS), kTinyLinear);
  const Evaluation primary = tiny_fp8("weights = \"fp8\"");
  EXPECT_EQ(primary.component(MEMPLAN_ROLE_WEIGHTS), 330'368u);
  EXPECT_EQ(primary.component(MEMPLAN_ROLE_BUFFERS), kTinyLinear);
  EXPECT_EQ(tiny_fp8("weights = \"fp8\"\nfp8_transpose = false").component(MEMPLAN_ROLE_BUFFERS), 0u);
}

// The copies follow their weights through the layout: tensor parallelism 2
// halves every linear layer, 2 bytes x 36,864 = 73,728.
TEST(Fp8Recipe, SplitWithTheirWeights) {
  EXPECT_EQ(tiny_fp8("", "[[strategy]]\nuse = \"tensor-parallel\"\nsize = 2\n").component(MEMPLAN_ROLE_BUFFERS),
            kTinyLinear);
}

// A params-only model's one item counts as linear layers: 2 x 1e9 bytes.
TEST(Fp8Recipe, ParamsOnlyModel) {
  const Evaluation e = evaluate_paper(train(params_model(1e9), "use = \"fp8\"", "use = \"adam\""));
  EXPECT_EQ(e.component(MEMPLAN_ROLE_BUFFERS), 2'000'000'000u);
}

TEST(Fp8Recipe, TrainingOnly) {
  const std::string infer =
      "name = \"t\"\nmode = \"infer\"\n" + kTinyModel +
      "[batch]\nmicro_batch = 1\nseq_len = 16\n[precision]\nuse = \"fp8\"\n[activations]\nuse = \"none\"\n";
  EXPECT_EQ(error_of(infer, "a.toml"),
            "a.toml:15:7: error: in [precision], precision plugin 'fp8': the fp8 recipe models Transformer Engine's "
            "fp8 training (fp8 weight copies next to bf16 weights and fp32 master weights), so it needs mode = "
            "\"train\"; for fp8 weights in inference use [precision] use = \"bf16\" with weights = \"fp8\", or the "
            "quantized plugin (plugin library " + plugin_dir() + "/memplan-fp8.so)");
}

}  // namespace
}  // namespace memplan::testing::optimizers
