// 'offload': ZeRO-Offload (Ren et al. 2021, arXiv 2101.06840) and parameter
// offload. Items move to the CPU; per_cpu is the reported rank's share (a
// node's host memory is per_cpu x its GPUs).
//
// ZeRO-Offload as the paper runs it, on ZeRO-2: Psi = 7.5e9 parameters, mixed
// fp16 + Adam, 4 data-parallel ranks. Per GPU: the fp16 weights, 2 Psi = 15e9 B.
// Per rank on the CPU: fp32 master 4 Psi / 4 = 7.5e9, Adam moments
// 8 Psi / 4 = 15e9 and the fp16 gradient partition 2 Psi / 4 = 3.75e9:
// 26.25e9 B (14 Psi / N_d, the paper's 2 + 12 bytes per parameter).
#include <gtest/gtest.h>

#include <string>

#include "test_support.hpp"

namespace memplan::testing {
namespace {

std::string zero_offload(const std::string& offload, bool offload_first = false) {
  const std::string zero = "[[strategy]]\nuse = \"zero\"\nstage = 2\n";
  const std::string moved = "[[strategy]]\nuse = \"offload\"\n" + offload;
  return "name = \"offload\"\nmode = \"train\"\n[model]\nparams = 7.5e9\n[precision]\nuse = \"mixed-fp16\"\n"
         "[optimizer]\nuse = \"adam\"\n[activations]\nuse = \"none\"\n[[strategy]]\nuse = \"data-parallel\"\n"
         "size = 4\n" +
         (offload_first ? moved + zero : zero + moved);
}

TEST(Offload, ZeroOffloadKeepsOnlyTheSixteenBitWeightsOnTheGpu) {
  Evaluation e = evaluate_paper(zero_offload("optimizer = true\n"));
  const Breakdown& b = e.breakdown();
  EXPECT_EQ(b.sum, 15'000'000'000u);
  EXPECT_EQ(b.peak, 15'000'000'000u);
  EXPECT_EQ(e.component(MEMPLAN_ROLE_WEIGHTS), 15'000'000'000u);
  EXPECT_EQ(e.component(MEMPLAN_ROLE_GRADIENTS), 0u);
  EXPECT_EQ(b.cpu_components[MEMPLAN_ROLE_MASTER_WEIGHTS], 7'500'000'000u);
  EXPECT_EQ(b.cpu_components[MEMPLAN_ROLE_OPTIMIZER_STATES], 15'000'000'000u);
  EXPECT_EQ(b.cpu_components[MEMPLAN_ROLE_GRADIENTS], 3'750'000'000u);
  EXPECT_EQ(b.cpu_sum, 26'250'000'000u);
  // Runs after the sharding plugins whatever the scenario order.
  EXPECT_EQ(evaluate_paper(zero_offload("optimizer = true\n", true)).breakdown().cpu_sum, 26'250'000'000u);
}

TEST(Offload, GradientsCanStayOnTheGpu) {
  Evaluation e = evaluate_paper(zero_offload("optimizer = true\ngradients = false\n"));
  EXPECT_EQ(e.component(MEMPLAN_ROLE_GRADIENTS), 3'750'000'000u);
  EXPECT_EQ(e.breakdown().cpu_sum, 22'500'000'000u);
}

// ZeRO-3 with parameters and optimizer on the CPU (ZeRO-Infinity's CPU
// offload), Llama-2-7B over 8 ranks: the GPU keeps only the gathered modules
// (see zero3_gathered_test.cpp, PrefetchRunsAheadToTheLiveLimit): the 65
// persistent norms, 532,480 B, from the start; 2,061,500,416 B more in
// forward; 2,061,500,416 + 262,144,000 + 532,480 = 2,324,176,896 B in backward. The CPU holds the rank's shard of
// everything: 16 x 6,738,415,616 / 8 = 13,476,831,232 B.
TEST(Offload, ParametersWithZeroStageThree) {
  Evaluation e = evaluate_paper(
      "name = \"offload\"\nmode = \"train\"\n[model]\npreset = \"llama-2-7b\"\n[precision]\nuse = \"mixed-bf16\"\n"
      "[optimizer]\nuse = \"adamw\"\n[activations]\nuse = \"none\"\n[[strategy]]\nuse = \"data-parallel\"\nsize = 8\n"
      "[[strategy]]\nuse = \"zero\"\nstage = 3\ngathered_parameters = true\n"
      "[[strategy]]\nuse = \"offload\"\noptimizer = true\nparameters = true\n");
  EXPECT_EQ(e.breakdown().peak, 2'324'176'896u);
  EXPECT_EQ(e.breakdown().timeline[kInit], 532'480u);
  EXPECT_EQ(e.component(MEMPLAN_ROLE_WEIGHTS), 0u);
  EXPECT_EQ(e.breakdown().cpu_sum, 13'476'831'232u);
}

// FSDP with CPUOffload(offload_params=True) and the optimizer step on the
// CPU: the GPU keeps the gathered units (see fsdp_test.cpp), 1,333,829,632 B
// in forward; in backward, with no gradient on the GPU, the layers' moment:
// the root's 524,296,192 + 524,296,192 and the units' 809,533,440 +
// 404,766,720 = 2,262,892,544 B.
TEST(Offload, ParametersWithFsdp) {
  Evaluation e = evaluate_paper(
      "name = \"offload\"\nmode = \"train\"\n[model]\npreset = \"llama-2-7b\"\n[precision]\nuse = \"mixed-bf16\"\n"
      "[optimizer]\nuse = \"adamw\"\n[activations]\nuse = \"none\"\n[[strategy]]\nuse = \"data-parallel\"\nsize = 8\n"
      "[[strategy]]\nuse = \"offload\"\noptimizer = true\nparameters = true\n[[strategy]]\nuse = \"fsdp\"\n");
  EXPECT_EQ(e.breakdown().timeline[kForward], 1'333'829'632u);
  EXPECT_EQ(e.breakdown().peak, 2'262'892'544u);
  EXPECT_EQ(e.breakdown().cpu_sum, 13'476'831'232u);
}

// Outside the paper view the pool FSDP stages its shard copies in stays
// reserved (FSDP1 pre_unshard: flat_param_to(device) on the pre-unshard
// stream; the caching allocator reuses a block only on its own stream): the
// root's shard and one unit's, in bf16, over 8 ranks:
//   (524,296,192 + 202,383,360 x 2) / 8 = 116,132,864 B,
// in reserved and device memory, not in allocated.
TEST(Offload, FsdpStagesShardCopiesInAPoolOfItsOwn) {
  auto scenario = [](const std::string& offload) {
    return "name = \"offload\"\nmode = \"train\"\n[model]\npreset = \"llama-2-7b\"\n[precision]\nuse = "
           "\"mixed-bf16\"\n[optimizer]\nuse = \"adamw\"\n[activations]\nuse = \"none\"\n[[strategy]]\nuse = "
           "\"data-parallel\"\nsize = 8\n[[strategy]]\nuse = \"fsdp\"\n[[strategy]]\nuse = \"offload\"\n" +
           offload;
  };
  Evaluation staged = evaluate(scenario("optimizer = true\nparameters = true\n"));
  EXPECT_EQ(staged.item_bytes("offload.parameter_staging", MEMPLAN_ROLE_BUFFERS), 116'132'864u);
  EXPECT_EQ(evaluate(scenario("optimizer = true\nparameters = true\nstaging = false\n"))
                .item_bytes("offload.parameter_staging", MEMPLAN_ROLE_BUFFERS),
            0u);
  // Without parameter offload nothing is staged.
  EXPECT_EQ(evaluate(scenario("optimizer = true\n")).item_bytes("offload.parameter_staging", MEMPLAN_ROLE_BUFFERS),
            0u);
}

// ZeRO-3 with offload_optimizer (DeepSpeed stage3.py __partition_grads, v0.7.0
// lines 1239-1313, the same through v0.16.4): each reduced 16-bit gradient
// partition is copied to its host buffer, back to the GPU
// (grad_buffer.to(grad_partition.device)), and its norm is taken as
// part.data.double().norm(2) (_constant_buffered_norm2, 1188-1195): 2 + 8
// bytes per element of one partition at a time, in backward. By hand:
//   GPT-2 18.3B of validation/PLC-gpt2-18b-ds3-offload-1gpu-bs1.toml (h 4096,
//   ffn 16384, 90 layers, tied), one GPU: the largest module after the
//   (tied) embedding is an MLP projection, c_fc: memplan's MLP item holds
//   both projections with their biases, 2 x 4096 x 16384 + 16384 + 4096 =
//   134,238,208 elements, one module 67,119,104 (DeepSpeed's c_fc.weight
//   alone: 67,108,864); x (2 + 8) B = 671,191,040 B.
//   The same over 4 ranks: 67,119,104 / 4 = 16,779,776 elements, 167,797,760 B.
//   Llama-2-7B (untied): the LM head is the largest, 32,000 x 4096 =
//   131,072,000 elements x (2 + 8) = 1,310,720,000 B; the input embedding is
//   left out (its gradient is complete only at the end of backward).
TEST(Offload, ZeroThreeOptimizerOffloadCopiesEachGradientPartitionForItsNorm) {
  auto scenario = [](const std::string& model, int dp, const std::string& offload) {
    return "name = \"offload\"\nmode = \"train\"\n[model]\n" + model +
           "[batch]\nmicro_batch = 1\nseq_len = 1024\n[precision]\nuse = \"mixed-fp16\"\n[optimizer]\nuse = "
           "\"adam\"\n[activations]\nuse = \"none\"\n[[strategy]]\nuse = \"data-parallel\"\nsize = " +
           std::to_string(dp) + "\n[[strategy]]\nuse = \"zero\"\nstage = 3\n[[strategy]]\nuse = \"offload\"\n" +
           offload;
  };
  const std::string gpt2 = "preset = \"gpt2-xl\"\nlayers = 90\nhidden = 4096\nheads = 16\nffn_hidden = 16384\n";
  const std::string llama = "preset = \"llama-2-7b\"\n";
  constexpr const char* kItem = "offload.gradient_norm_copy";
  EXPECT_EQ(evaluate(scenario(gpt2, 1, "optimizer = true\nparameters = true\n")).item_bytes(kItem, MEMPLAN_ROLE_BUFFERS),
            671'191'040u);
  EXPECT_EQ(evaluate(scenario(gpt2, 4, "optimizer = true\n")).item_bytes(kItem, MEMPLAN_ROLE_BUFFERS), 167'797'760u);
  EXPECT_EQ(evaluate(scenario(llama, 1, "optimizer = true\n")).item_bytes(kItem, MEMPLAN_ROLE_BUFFERS),
            1'310'720'000u);
  // It is a backward transient of allocated memory: the forward high point does not move.
  const Evaluation with = evaluate(scenario(llama, 1, "optimizer = true\n"));
  const Evaluation without = evaluate(scenario(llama, 1, "optimizer = true\ngradient_norm_copy = false\n"));
  EXPECT_EQ(without.item_bytes(kItem, MEMPLAN_ROLE_BUFFERS), 0u);
  const StepPeak& allocated_with = with.breakdown().quantities[kAllocated];
  const StepPeak& allocated_without = without.breakdown().quantities[kAllocated];
  EXPECT_EQ(allocated_with.timeline[kForward], allocated_without.timeline[kForward]);
  EXPECT_EQ(allocated_with.timeline[kBackward], allocated_without.timeline[kBackward] + 1'310'720'000u);
  // Only without the optimizer on the GPU (DeepSpeed's offload_optimizer), and only under stage 3.
  EXPECT_EQ(evaluate(scenario(llama, 1, "gradients = true\n")).item_bytes(kItem, MEMPLAN_ROLE_BUFFERS), 0u);
  std::string stage2 = scenario(llama, 1, "optimizer = true\n");
  stage2.replace(stage2.find("stage = 3"), 9, "stage = 2");
  EXPECT_EQ(evaluate(stage2).item_bytes(kItem, MEMPLAN_ROLE_BUFFERS), 0u);
  // The paper view leaves it out (profile paper: gradient_norm_copy = false).
  EXPECT_EQ(evaluate_paper(scenario(llama, 1, "optimizer = true\n")).item_bytes(kItem, MEMPLAN_ROLE_BUFFERS), 0u);
}

// ZeRO-3 with the partitions in host memory (offload parameters): zero's
// replay sizes the staging copies of each all-gather call (coordinator.hpp,
// ZeroStage3Coordinator.StagingCopiesBesideTheGatheredSet); 'offload' counts
// the bytes beyond the gathered set as offload.gather_staging. By hand with
// prefetch_bucket_size = 0 and max_reuse_distance = 0: each module is
// gathered at its use, alone, and released after it, so a window's worst
// instant is its largest module gathered plus that module's partition staged.
// GPT-2 h 4096, 90 layers, tied head: the head (the embedding, 50,257 x 4096 =
// 205,852,672 elements, 411,705,344 B in fp16) is in both windows (the loss's
// forward and backward): on one rank 411,705,344 B, over 8 ranks an eighth,
// 51,463,168 B, in each window. Without parameter offload (.to() on a GPU
// partition copies nothing) there is none.
TEST(Offload, ZeroThreeStagesHostPartitionsBeforeEachGather) {
  auto scenario = [](int dp, const std::string& offload) {
    return "name = \"offload\"\nmode = \"train\"\n[model]\npreset = \"gpt2-xl\"\nlayers = 90\nhidden = 4096\n"
           "heads = 16\nffn_hidden = 16384\n[batch]\nmicro_batch = 1\nseq_len = 1024\n[precision]\nuse = "
           "\"mixed-fp16\"\n[optimizer]\nuse = \"adam\"\n[activations]\nuse = \"none\"\n[[strategy]]\nuse = "
           "\"data-parallel\"\nsize = " +
           std::to_string(dp) +
           "\n[[strategy]]\nuse = \"zero\"\nstage = 3\nprefetch_bucket_size = 0\nmax_reuse_distance = 0\n"
           "[[strategy]]\nuse = \"offload\"\n" +
           offload;
  };
  constexpr const char* kItem = "offload.gather_staging";
  // Two items, one per window.
  EXPECT_EQ(evaluate(scenario(1, "parameters = true\n")).item_bytes(kItem, MEMPLAN_ROLE_BUFFERS), 2 * 411'705'344u);
  EXPECT_EQ(evaluate(scenario(8, "parameters = true\n")).item_bytes(kItem, MEMPLAN_ROLE_BUFFERS), 2 * 51'463'168u);
  EXPECT_EQ(evaluate(scenario(1, "optimizer = true\n")).item_bytes(kItem, MEMPLAN_ROLE_BUFFERS), 0u);
}

TEST(Offload, Errors) {
  const std::string library = " (plugin library " + plugin_dir() + "/memplan-offload.so)";
  EXPECT_EQ(error_of(zero_offload("parameters = true\n"), "o.toml"),
            "o.toml:19:14: error: in [[strategy]] #3, strategy plugin 'offload', option 'parameters': moves the "
            "weights to the CPU, but no strategy gathers them back to the GPU before use; add [[strategy]] use = "
            "\"zero\" with stage = 3 and gathered_parameters = true, or use = \"fsdp\" (DeepSpeed offloads "
            "parameters only with ZeRO stage 3)" + library);
  std::string stage3 = zero_offload("parameters = true\n");
  stage3.replace(stage3.find("stage = 2"), 9, "stage = 3");
  EXPECT_EQ(error_of(stage3, "o.toml"),
            "o.toml:19:14: error: in [[strategy]] #3, strategy plugin 'offload', option 'parameters': moves the "
            "weights to the CPU, leaving only the gathered modules on the GPU, which zero does not count unless "
            "gathered_parameters = true; set it in the zero table" + library);
  EXPECT_EQ(error_of(zero_offload("optimizer = false\n"), "o.toml"),
            "o.toml:18:7: error: in [[strategy]] #3, strategy plugin 'offload': offloads nothing; set optimizer = "
            "true, gradients = true and/or parameters = true" + library);
}

}  // namespace
}  // namespace memplan::testing
