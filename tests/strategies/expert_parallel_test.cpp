// 'expert-parallel': Mixtral 8x7B (preset mixtral-8x7b: 32 layers, h 4096,
// 8 SwiGLU experts of 14336, 32 heads / 8 kv heads, vocabulary 32000).
// Hand derivation, elements:
//   experts per layer  8 x 3 x 4096 x 14336 = 1,409,286,144; over ep = 8: 176,160,768
//   dense per layer    q 16,777,216 + k 4,194,304 + v 4,194,304 + o 16,777,216
//                      + router 32,768 + norms 8,192 = 41,984,000
//   dense in all       32 x 41,984,000 + embed 131,072,000 + LM head 131,072,000
//                      + final norm 4,096 = 1,605,636,096
//   (1,605,636,096 + 32 x 1,409,286,144 = 46,702,792,704, the preset's count)
// With ep = 8 a rank holds 1,605,636,096 + 32 x 176,160,768 = 7,242,780,672
// parameters. Megatron-LM's distributed optimizer (ZeRO-1 here) shards dense
// parameters over dp x cp ranks and the experts over the expert data-parallel
// group of dp x cp / ep ranks.
#include <gtest/gtest.h>

#include <string>

#include "test_support.hpp"

namespace memplan::testing {
namespace {

std::string mixtral(const std::string& strategies, const std::string& activations = "use = \"none\"\n") {
  return "name = \"ep\"\nmode = \"train\"\n[model]\npreset = \"mixtral-8x7b\"\n[batch]\nmicro_batch = 1\n"
         "seq_len = 4096\n[precision]\nuse = \"mixed-bf16\"\n[optimizer]\nuse = \"adamw\"\n[activations]\n" +
         activations + strategies;
}

const std::string kDp8 = "[[strategy]]\nuse = \"data-parallel\"\nsize = 8\n";
const std::string kEp8 = "[[strategy]]\nuse = \"expert-parallel\"\nsize = 8\n";
const std::string kZero1 = "[[strategy]]\nuse = \"zero\"\nstage = 1\n";

TEST(ExpertParallel, SplitsTheExpertsOnlyAndAddsNoGpus) {
  Evaluation e = evaluate_paper(mixtral(kDp8 + kEp8 + "[hardware]\ngpu = \"h100-sxm-80gb\"\ncount = 8\n"));
  EXPECT_EQ(e.item_bytes("layers.0-31.moe.experts", MEMPLAN_ROLE_WEIGHTS), 2ull * 32 * 176'160'768);
  EXPECT_EQ(e.item_bytes("layers.0-31.moe.experts", MEMPLAN_ROLE_GRADIENTS), 2ull * 32 * 176'160'768);
  EXPECT_EQ(e.item_bytes("layers.0-31.moe.router", MEMPLAN_ROLE_WEIGHTS), 2ull * 32 * 32'768);
  EXPECT_EQ(e.item_bytes("layers.0-31.attn.q", MEMPLAN_ROLE_WEIGHTS), 2ull * 32 * 16'777'216);
  EXPECT_EQ(e.component(MEMPLAN_ROLE_WEIGHTS), 2ull * 7'242'780'672);
  EXPECT_EQ(e.breakdown().world_size, 8);
  EXPECT_EQ(e.breakdown().params_total, 46'702'792'704.0);  // the model's, not the rank's
}

// ZeRO-1 over 8 ranks: dense states / 8, experts over dp / ep = 1 rank (whole).
// Master weights 4 x (1,605,636,096 / 8 + 32 x 176,160,768) = 23,351,396,352
// bytes: the same as without expert parallelism (4 x 46,702,792,704 / 8),
// because each rank's share of the experts is 1/8 either way; the weights and
// gradients are what expert parallelism saves.
TEST(ExpertParallel, ZeroShardsExpertsOverTheExpertDataParallelGroup) {
  Evaluation with_ep = evaluate_paper(mixtral(kDp8 + kEp8 + kZero1));
  EXPECT_EQ(with_ep.item_bytes("layers.0-31.moe.experts", MEMPLAN_ROLE_MASTER_WEIGHTS), 4ull * 32 * 176'160'768);
  EXPECT_EQ(with_ep.component(MEMPLAN_ROLE_MASTER_WEIGHTS), 23'351'396'352u);
  EXPECT_EQ(with_ep.component(MEMPLAN_ROLE_OPTIMIZER_STATES), 46'702'792'704u);
  Evaluation without_ep = evaluate_paper(mixtral(kDp8 + kZero1));
  EXPECT_EQ(without_ep.component(MEMPLAN_ROLE_MASTER_WEIGHTS), 23'351'396'352u);
  EXPECT_EQ(without_ep.component(MEMPLAN_ROLE_WEIGHTS), 2ull * 46'702'792'704);
  // 16 data-parallel ranks, ep 8: experts sharded over 16 / 8 = 2 ranks.
  Evaluation dp16 = evaluate_paper(mixtral("[[strategy]]\nuse = \"data-parallel\"\nsize = 16\n" + kEp8 + kZero1));
  EXPECT_EQ(dp16.item_bytes("layers.0-31.moe.experts", MEMPLAN_ROLE_MASTER_WEIGHTS), 4ull * 32 * 88'080'384);
  EXPECT_EQ(dp16.item_bytes("layers.0-31.attn.q", MEMPLAN_ROLE_MASTER_WEIGHTS), 4ull * 32 * 1'048'576);
}

// Experts keep Megatron-LM's default expert tensor parallelism (= the tensor-
// parallel size): with t = 2 and ep = 4 a rank holds 1,409,286,144 / 8.
TEST(ExpertParallel, ComposesWithTensorParallelism) {
  Evaluation e = evaluate_paper(mixtral("[[strategy]]\nuse = \"tensor-parallel\"\nsize = 2\n" +
                                  std::string("[[strategy]]\nuse = \"data-parallel\"\nsize = 4\n") +
                                  "[[strategy]]\nuse = \"expert-parallel\"\nsize = 4\n"));
  EXPECT_EQ(e.item_bytes("layers.0-31.moe.experts", MEMPLAN_ROLE_WEIGHTS), 2ull * 32 * 176'160'768);
  EXPECT_EQ(e.breakdown().world_size, 8);
}

// Megatron-Core's expert_tensor_parallel_size (tensor_size, ETP) with MoE parallel folding: t 2, dp 4, ep 4,
// ETP 1: each expert matrix is whole on its rank, a rank holds 1,409,286,144 / 4 = 352,321,536 expert elements a
// layer (twice the ETP-2 figure above), and the expert data-parallel group is t x dp / (ep x ETP) = 8 / 4 = 2
// ranks: ZeRO-1's fp32 master copy of the experts 4 x 32 x 352,321,536 / 2 = 22,548,578,304 B. The dense q
// stays split by t: 16,777,216 / 2 per layer, its master over dp 4.
// EP 2 x ETP 2 out of t 4 with no data parallelism (the run the old rule refused): 1,409,286,144 / 4 a layer.
TEST(ExpertParallel, ExpertTensorSizeFoldsTheGroups) {
  const std::string t2dp4 = "[[strategy]]\nuse = \"tensor-parallel\"\nsize = 2\n[[strategy]]\nuse = \"data-parallel\"\n"
                            "size = 4\n";
  Evaluation e = evaluate_paper(mixtral(t2dp4 + "[[strategy]]\nuse = \"expert-parallel\"\nsize = 4\ntensor_size = 1\n" +
                                        kZero1));
  EXPECT_EQ(e.item_bytes("layers.0-31.moe.experts", MEMPLAN_ROLE_WEIGHTS), 2ull * 32 * 352'321'536);
  EXPECT_EQ(e.item_bytes("layers.0-31.moe.experts", MEMPLAN_ROLE_MASTER_WEIGHTS), 22'548'578'304u);
  EXPECT_EQ(e.item_bytes("layers.0-31.attn.q", MEMPLAN_ROLE_WEIGHTS), 2ull * 32 * 8'388'608);
  EXPECT_EQ(e.item_bytes("layers.0-31.attn.q", MEMPLAN_ROLE_MASTER_WEIGHTS), 4ull * 32 * 2'097'152);
  // tensor_size equal to t is the default.
  Evaluation same = evaluate_paper(mixtral(t2dp4 + "[[strategy]]\nuse = \"expert-parallel\"\nsize = 4\ntensor_size = 2\n"));
  EXPECT_EQ(same.item_bytes("layers.0-31.moe.experts", MEMPLAN_ROLE_WEIGHTS), 2ull * 32 * 176'160'768);
  Evaluation folded = evaluate_paper(mixtral("[[strategy]]\nuse = \"tensor-parallel\"\nsize = 4\n[[strategy]]\nuse = "
                                             "\"data-parallel\"\nsize = 1\n[[strategy]]\nuse = \"expert-parallel\"\n"
                                             "size = 2\ntensor_size = 2\n"));
  EXPECT_EQ(folded.item_bytes("layers.0-31.moe.experts", MEMPLAN_ROLE_WEIGHTS), 2ull * 32 * 352'321'536);
}

// The step-time model sees the same work either way (transformer-step): with ETP 1 each whole-width expert
// takes 1 / (t / ETP) of the tokens the split ones took, so the model FLOPs per GPU are equal at ETP 1 and 2.
TEST(ExpertParallel, ExpertTensorSizeKeepsTheStepsWork) {
  const auto flops = [](const std::string& etp) {
    return evaluate_paper(mixtral("[[strategy]]\nuse = \"tensor-parallel\"\nsize = 2\n[[strategy]]\nuse = "
                                  "\"data-parallel\"\nsize = 4\n[[strategy]]\nuse = \"expert-parallel\"\nsize = 4\n"
                                  "tensor_size = " + etp + "\n[[strategy]]\nuse = \"transformer-step\"\n[hardware]\n"
                                  "gpu = \"h100-sxm-80gb\"\ncount = 8\n"))
        .breakdown()
        .time.model_flops;
  };
  EXPECT_NEAR(flops("1") / flops("2"), 1.0, 1e-12);
}

// Runs after every layout plugin: listed before data-parallel it still sees
// the data-parallel size, and gives the same plan.
TEST(ExpertParallel, ScenarioOrderDoesNotMatter) {
  Evaluation before = evaluate_paper(mixtral(kEp8 + kDp8 + kZero1));
  Evaluation after = evaluate_paper(mixtral(kDp8 + kEp8 + kZero1));
  EXPECT_EQ(before.breakdown().sum, after.breakdown().sum);
  EXPECT_EQ(before.component(MEMPLAN_ROLE_WEIGHTS), 2ull * 7'242'780'672);
}

// Balanced routing: each rank still processes top_k expert passes for each of
// its own tokens, so expert parallelism moves activations between ranks but
// does not change how many a rank stores.
TEST(ExpertParallel, ActivationsAreUnchanged) {
  const std::string megatron = "use = \"megatron\"\nflash_attention = true\ndropout = false\n";
  EXPECT_EQ(evaluate_paper(mixtral(kDp8 + kEp8, megatron)).component(MEMPLAN_ROLE_ACTIVATIONS),
            evaluate_paper(mixtral(kDp8, megatron)).component(MEMPLAN_ROLE_ACTIVATIONS));
}

TEST(ExpertParallel, Errors) {
  const std::string library = " (plugin library " + plugin_dir() + "/memplan-expert-parallel.so)";
  EXPECT_EQ(error_of(mixtral(kDp8 + "[[strategy]]\nuse = \"expert-parallel\"\nsize = 3\n"), "ep.toml"),
            "ep.toml:19:8: error: in [[strategy]] #2, strategy plugin 'expert-parallel', option 'size': 3 does not "
            "divide the 8 experts; choose a divisor of the expert count" + library);
  EXPECT_EQ(error_of(mixtral("[[strategy]]\nuse = \"data-parallel\"\nsize = 4\n" + kEp8), "ep.toml"),
            "ep.toml:19:8: error: in [[strategy]] #2, strategy plugin 'expert-parallel', option 'size': 8 "
            "expert-parallel ranks are taken from the data-parallel x context-parallel ranks, but there are 4 x 1 = "
            "4; make the data-parallel size (times the context-parallel size) a multiple of 8, or give tensor_size "
            "(the experts' own tensor size) to fold the expert groups out of tensor x context x data" + library);
  // Folded: ep 4 x ETP 1 out of t 2 x dp 1 = 2 ranks does not divide.
  EXPECT_NE(error_of(mixtral("[[strategy]]\nuse = \"tensor-parallel\"\nsize = 2\n[[strategy]]\nuse = \"data-parallel\"\n"
                             "size = 1\n[[strategy]]\nuse = \"expert-parallel\"\nsize = 4\ntensor_size = 1\n"))
                .find("option 'tensor_size': 4 expert-parallel x 1 expert tensor-parallel ranks are folded out of the "
                      "tensor x context x data ranks, but there are 2 x 1 x 1 = 2"),
            std::string::npos);
  EXPECT_EQ(error_of("name = \"ep\"\nmode = \"train\"\n[model]\npreset = \"llama-2-7b\"\n[precision]\nuse = "
                     "\"mixed-bf16\"\n[optimizer]\nuse = \"adamw\"\n[activations]\nuse = \"none\"\n"
                     "[[strategy]]\nuse = \"expert-parallel\"\nsize = 2\n",
                     "ep.toml"),
            "ep.toml:13:8: error: in [[strategy]] #1, strategy plugin 'expert-parallel', option 'size': splits the "
            "experts of a mixture-of-experts model, but the model has none; give [model.moe] experts (or a MoE "
            "preset), or remove this strategy" + library);
}

}  // namespace
}  // namespace memplan::testing
