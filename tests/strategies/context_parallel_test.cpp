// 'context-parallel': Megatron-LM context parallelism splits every layer's
// sequence over cp ranks, so each rank stores 1/cp of every activation term
// of Korthikanti et al. 2022's Table 2 (the attention core included: a rank
// keeps the scores of its s/cp queries against all s keys, a s^2 b / cp).
// Hand derivations for GPT-3 175B (a = 96, h = 12288, s = 2048, b = 1, t = 8):
//   TP + SP, per layer:           sbh/t (34 + 5as/h) = 358,612,992; / cp 2 = 179,306,496
//   TP + SP + selective:          34 sbh/t = 106,954,752;           / cp 2 = 53,477,376
//   selective working set:        5as^2b/t = 251,658,240;           / cp 2 = 125,829,120
// Weights are replicated on the context-parallel ranks; ZeRO shards over the
// data-parallel x context-parallel group (Megatron-LM's dp-cp group).
#include <gtest/gtest.h>

#include <string>

#include "test_support.hpp"

namespace memplan::testing {
namespace {

std::string gpt3(int context, const std::string& policy, const std::string& hardware = "") {
  return "name = \"cp\"\nmode = \"train\"\n[model]\npreset = \"gpt3-175b\"\n[batch]\nmicro_batch = 1\nseq_len = 2048\n"
         "[precision]\nuse = \"mixed-fp16\"\n[optimizer]\nuse = \"adam\"\n[activations]\nuse = \"megatron\"\n"
         "[[strategy]]\nuse = \"tensor-parallel\"\nsize = 8\nsequence_parallel = true\n"
         "[[strategy]]\nuse = \"context-parallel\"\nsize = " +
         std::to_string(context) + "\n[[strategy]]\nuse = \"recompute\"\npolicy = \"" + policy + "\"\n" + hardware;
}

TEST(ContextParallel, DividesEveryLayersActivationsByCp) {
  EXPECT_EQ(evaluate_paper(gpt3(1, "none")).item_bytes("layers.0-95.activations", MEMPLAN_ROLE_ACTIVATIONS),
            96ull * 358'612'992);
  EXPECT_EQ(evaluate_paper(gpt3(2, "none")).item_bytes("layers.0-95.activations", MEMPLAN_ROLE_ACTIVATIONS),
            96ull * 179'306'496);
  Evaluation selective = evaluate_paper(gpt3(2, "selective"));
  EXPECT_EQ(selective.item_bytes("layers.0-95.activations", MEMPLAN_ROLE_ACTIVATIONS), 96ull * 53'477'376);
  EXPECT_EQ(selective.item_bytes("activations.recompute", MEMPLAN_ROLE_ACTIVATIONS), 125'829'120u);
}

TEST(ContextParallel, WeightsAreReplicatedAndCpCountsTowardsTheWorldSize) {
  Evaluation one = evaluate_paper(gpt3(1, "none"));
  Evaluation four = evaluate_paper(gpt3(4, "none", "[hardware]\ngpu = \"h100-sxm-80gb\"\ncount = 32\n"));
  EXPECT_EQ(four.component(MEMPLAN_ROLE_WEIGHTS), one.component(MEMPLAN_ROLE_WEIGHTS));
  EXPECT_EQ(four.component(MEMPLAN_ROLE_OPTIMIZER_STATES), one.component(MEMPLAN_ROLE_OPTIMIZER_STATES));
  EXPECT_EQ(four.breakdown().world_size, 32);
  EXPECT_EQ(error_of(gpt3(2, "none", "[hardware]\ngpu = \"h100-sxm-80gb\"\ncount = 8\n"), "cp.toml"),
            "cp.toml:26:9: error: [hardware] count = 8 but the strategies lay the job out on 16 GPUs (tensor 8 (set by "
            "'tensor-parallel') x context 2 (set by 'context-parallel')); change count, or the strategies' sizes so "
            "that their product equals count");
}

// ZeRO over N_d = dp x cp = 4 x 2 = 8 ranks, 7.5B parameters, mixed fp16 +
// Adam: master weights 4 x 7.5e9 / 8 = 3.75e9 B, Adam states 8 x 7.5e9 / 8 =
// 7.5e9 B (the ZeRO paper's P_os with N_d = 8), weights and gradients whole.
TEST(ContextParallel, ZeroShardsOverDataTimesContextRanks) {
  Evaluation e = evaluate_paper(
      "name = \"cp-zero\"\nmode = \"train\"\n[model]\nparams = 7.5e9\n[precision]\nuse = \"mixed-fp16\"\n"
      "[optimizer]\nuse = \"adam\"\n[activations]\nuse = \"none\"\n[[strategy]]\nuse = \"data-parallel\"\nsize = 4\n"
      "[[strategy]]\nuse = \"context-parallel\"\nsize = 2\n[[strategy]]\nuse = \"zero\"\nstage = 1\n");
  EXPECT_EQ(e.component(MEMPLAN_ROLE_MASTER_WEIGHTS), 3'750'000'000u);
  EXPECT_EQ(e.component(MEMPLAN_ROLE_OPTIMIZER_STATES), 7'500'000'000u);
  EXPECT_EQ(e.component(MEMPLAN_ROLE_WEIGHTS), 15'000'000'000u);
  EXPECT_EQ(e.component(MEMPLAN_ROLE_GRADIENTS), 15'000'000'000u);
  EXPECT_EQ(e.breakdown().world_size, 8);
}

TEST(ContextParallel, Errors) {
  EXPECT_EQ(error_of("name = \"cp\"\nmode = \"infer\"\n[model]\npreset = \"gpt3-175b\"\n[batch]\nseq_len = 2048\n"
                     "[precision]\nuse = \"bf16\"\n[activations]\nuse = \"inference\"\n"
                     "[[strategy]]\nuse = \"context-parallel\"\nsize = 2\n",
                     "cp.toml"),
            "cp.toml:13:8: error: in [[strategy]] #1, strategy plugin 'context-parallel', option 'size': splits "
            "training activations (Megatron-LM context parallelism); the scenario has mode = \"infer\", whose KV "
            "cache this plugin does not split (plugin library " + plugin_dir() + "/memplan-context-parallel.so)");
  EXPECT_EQ(error_of(gpt3(0, "none"), "cp.toml"),
            "cp.toml:20:8: error: in [[strategy]] #2, strategy plugin 'context-parallel', option 'size': must be a "
            "positive integer, got 0 (plugin library " + plugin_dir() + "/memplan-context-parallel.so)");
}

}  // namespace
}  // namespace memplan::testing
