// Korthikanti et al. 2022, "Reducing Activation Recomputation in Large
// Transformer Models" (arXiv 2205.05198), Table 2: activation bytes per
// transformer layer, for the GPT-3 175B configuration of their Table 3
// (a = 96 heads, h = 12288, L = 96, s = 2048), micro-batch b = 1, t = 8,
// 16-bit activations and 1-byte dropout masks. Hand derivation:
//   sbh    = 2048 * 1 * 12288            = 25,165,824
//   5as^2b = 5 * 96 * 2048^2 * 1         = 2,013,265,920
//   no parallelism:        34 sbh + 5as^2b            = 2,868,903,936
//   tensor parallel:       10 sbh + 24 sbh/8 + 5as^2b/8 = 578,813,952
//   + sequence parallel:   (34 sbh + 5as^2b) / 8     = 358,612,992
//   TP + selective:        10 sbh + 24 sbh/8          = 327,155,712
//   TP + SP + selective:   34 sbh / 8                 = 106,954,752
//   full recompute:        2 sbh                      = 50,331,648
//   full recompute + SP:   2 sbh / 8                  = 6,291,456
#include <gtest/gtest.h>

#include <string>

#include "../../plugins/activations/megatron/transformer_activations.hpp"
#include "test_support.hpp"

namespace memplan::testing {
namespace {

constexpr uint64_t kLayers = 96;

std::string gpt3_scenario(int tensor_parallel, bool sequence_parallel, const std::string& recompute,
                          int pipeline = 1, int grad_accum = 1, const std::string& stage = "first") {
  std::string toml = "name = \"korthikanti-table2\"\nmode = \"train\"\n[model]\npreset = \"gpt3-175b\"\n"
                     "[batch]\nmicro_batch = 1\nseq_len = 2048\ngrad_accum = " + std::to_string(grad_accum) +
                     "\n[precision]\nuse = \"mixed-fp16\"\n[optimizer]\nuse = \"adam\"\n"
                     "[activations]\nuse = \"megatron\"\n"
                     "[[strategy]]\nuse = \"tensor-parallel\"\nsize = " + std::to_string(tensor_parallel) +
                     "\nsequence_parallel = " + (sequence_parallel ? "true" : "false") +
                     "\n[[strategy]]\nuse = \"recompute\"\npolicy = \"" + recompute + "\"\n";
  if (pipeline > 1)
    toml += "[[strategy]]\nuse = \"pipeline-parallel\"\nsize = " + std::to_string(pipeline) + "\nstage = \"" + stage +
            "\"\n";
  return toml;
}

uint64_t per_layer(const std::string& toml) {
  Evaluation evaluation = evaluate_paper(toml);
  const uint64_t total = evaluation.item_bytes("layers.0-95.activations", MEMPLAN_ROLE_ACTIVATIONS);
  EXPECT_EQ(total % kLayers, 0u);
  return total / kLayers;
}

TEST(KorthikantiTable2, NoParallelism) { EXPECT_EQ(per_layer(gpt3_scenario(1, false, "none")), 2'868'903'936u); }
TEST(KorthikantiTable2, TensorParallel) { EXPECT_EQ(per_layer(gpt3_scenario(8, false, "none")), 578'813'952u); }
TEST(KorthikantiTable2, TensorAndSequenceParallel) {
  EXPECT_EQ(per_layer(gpt3_scenario(8, true, "none")), 358'612'992u);
}
TEST(KorthikantiTable2, TensorParallelSelectiveRecompute) {
  EXPECT_EQ(per_layer(gpt3_scenario(8, false, "selective")), 327'155'712u);
}
TEST(KorthikantiTable2, TensorSequenceParallelSelectiveRecompute) {
  EXPECT_EQ(per_layer(gpt3_scenario(8, true, "selective")), 106'954'752u);
}
TEST(KorthikantiTable2, FullRecompute) {
  EXPECT_EQ(per_layer(gpt3_scenario(8, false, "full")), 50'331'648u);
  EXPECT_EQ(per_layer(gpt3_scenario(8, true, "full")), 6'291'456u);
}

// Section 4.2.3: under 1F1B the first pipeline stage holds p micro-batches of
// L/p layers, i.e. L layers' worth. p = 8 stages of 12 layers, 16 micro-batches:
// 12 layers x 8 in flight x 578,813,952 = 96 x 578,813,952 bytes.
TEST(KorthikantiPipeline, FirstStageHoldsPMicroBatches) {
  Evaluation first = evaluate_paper(gpt3_scenario(8, false, "none", 8, 16));
  EXPECT_EQ(first.item_bytes("layers.0-11.activations", MEMPLAN_ROLE_ACTIVATIONS), uint64_t{96} * 578'813'952u);
  // The last stage holds one micro-batch: 12 x 578,813,952.
  Evaluation last = evaluate_paper(gpt3_scenario(8, false, "none", 8, 16, "last"));
  EXPECT_EQ(last.item_bytes("layers.84-95.activations", MEMPLAN_ROLE_ACTIVATIONS), uint64_t{12} * 578'813'952u);
  // Fewer micro-batches than stages: only grad_accum = 2 are ever in flight.
  Evaluation short_pipeline = evaluate_paper(gpt3_scenario(8, false, "none", 8, 2));
  EXPECT_EQ(short_pipeline.item_bytes("layers.0-11.activations", MEMPLAN_ROLE_ACTIVATIONS), uint64_t{24} * 578'813'952u);
}

// The generalized formula reduces to sbh(34 + 5as/h) for any GPT shape, e.g.
// the 22B model of Table 3 (a = 64, h = 6144, s = 2048, b = 4):
//   sbh = 50,331,648; 34 sbh = 1,711,276,032; 5as^2b = 5,368,709,120 -> 7,079,985,152.
TEST(KorthikantiFormula, ReducesToPaperForTheTwentyTwoBillionModel) {
  plugins::TransformerShape shape{2048, 4, 6144, 64, 6144, 6144, 4 * 6144, false, 0, 0};
  plugins::ActivationSettings settings;
  EXPECT_DOUBLE_EQ(plugins::stored_bytes_per_layer(shape, settings), 7'079'985'152.0);
}

// Grouped-query attention stores K and V at kv width: Llama-2-70B (h = 8192,
// 64 heads, 8 kv heads of 128, SwiGLU ffn 28672), s = 4096, b = 1, bf16, no
// dropout, flash attention, no parallelism. Per layer, in units of sb = 4096:
//   norm inputs 2*2*8192 + norm outputs 2*2*8192      = 65,536
//   Q,K 2*(8192+1024) + V 2*1024 + attention out 2*8192 = 36,864
//   MLP gate+up 2*2*28672 + SwiGLU output 2*28672      = 172,032
//   -> 274,432 * 4096 = 1,124,073,472, plus log-sum-exp 4*64*4096 = 1,048,576
//   -> 1,125,122,048 bytes.
TEST(GeneralizedActivations, GroupedQueryAttentionAndSwiGlu) {
  plugins::TransformerShape shape{4096, 1, 8192, 64, 8192, 1024, 28672, true, 0, 0};
  plugins::ActivationSettings settings;
  settings.dropout = false;
  settings.flash_attention = true;
  EXPECT_DOUBLE_EQ(plugins::stored_bytes_per_layer(shape, settings), 1'125'122'048.0);
}

}  // namespace
}  // namespace memplan::testing

namespace memplan::testing {
namespace {

// With more tensor-parallel ranks than kv heads, each rank keeps one whole kv
// head: Llama-2-70B at t = 16 holds K and V at 1/8 (8 kv heads), not 1/16.
// Per layer, s = 4096, b = 1, bf16, flash attention, no dropout, in units of sb:
//   replicated norms 4*8192*2 = 65,536 (no sequence parallelism)
//   Q and attention out 2*2*8192 / 16 = 2,048; K and V 2*2*1024 / 8 = 512
//   MLP 3*2*28672 / 16 = 10,752 -> 78,848 * 4096 = 322,961,408
//   log-sum-exp 4*64*4096 / 16 = 65,536 -> 323,026,944 bytes.
TEST(GeneralizedActivations, KvHeadsReplicatedBeyondTheirCount) {
  plugins::TransformerShape shape{4096, 1, 8192, 64, 8192, 1024, 28672, true, 0, 0, 8};
  plugins::ActivationSettings settings;
  settings.dropout = false;
  settings.flash_attention = true;
  settings.tensor_parallel = 16;
  EXPECT_DOUBLE_EQ(plugins::stored_bytes_per_layer(shape, settings), 323'026'944.0);
}

}  // namespace
}  // namespace memplan::testing
