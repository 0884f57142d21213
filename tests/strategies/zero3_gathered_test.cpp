// 'zero' stage 3 with gathered_parameters = true: what DeepSpeed ZeRO-3's
// parameter coordinator holds gathered (microsoft/DeepSpeed v0.14.0,
// deepspeed/runtime/zero/partitioned_param_coordinator.py, replayed by
// plugins/strategies/zero/coordinator.hpp; defaults from config.py:
// stage3_prefetch_bucket_size B = 5e7, stage3_max_live_parameters M = 1e9,
// stage3_max_reuse_distance R = 1e9, stage3_param_persistence_threshold 1e5).
// The ZeRO paper's Table 1 counts model states only; its test
// (tests/sources/zero_table1_test.cpp) uses a params-only model, for which
// the working set cannot be sized and the option is refused, and the default
// (gathered_parameters = false) adds nothing.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "../../plugins/strategies/zero/coordinator.hpp"
#include "test_support.hpp"

namespace memplan::testing {
namespace {

namespace zero3 = memplan::plugins::zero3;

// Four modules, one parameter each (elements; bytes = 2 x elements): A 100,
// N 5 (persistent under a threshold of 10), B 40, C 40. Trace: A N B C
// forward, C B N A backward; the forward window is steps 1-3 (N B C), the
// backward window steps 4-6 (C B N). Hand-traced with B = 50, M = 1000,
// R = 100:
//   step 0 A: gather A; prefetch (limit min(1000 - 105, 50) = 50) skips N,
//     gathers B (40) and C (80 >= 50: stop). Release A? its next use is step
//     7, after N B C C B N = 170 >= R elements: released.
//   step 1 N: prefetch walks the backward uses of C and B (gathered: marked
//     as fetched for steps 4 and 5, no cost), N, then gathers A (100): stop.
//     Gathered: B C A = 360 bytes.
//   step 2 B: kept (a prefetch marked its use at step 5). step 3 C: its next
//     use is the next step (0 < R): kept.
//   step 4 C: 360 bytes; then released (no later use), as B at step 5.
// Forward and backward: 360 bytes each; persistent: N's 10 bytes.
// Without prefetch (B = 0): step 0 holds A alone and releases it; B (kept:
// C C = 80 < R before its next use) and C: 160 bytes in both windows. With
// R = 0 as well every parameter goes after its module: the largest one in a
// window, 80 bytes.
TEST(ZeroStage3Coordinator, HandTracedSteps) {
  const std::vector<zero3::Parameter> parameters{{100, 200}, {5, 10}, {40, 80}, {40, 80}};
  using W = zero3::Window;
  const std::vector<zero3::TraceStep> trace{{0, W::none},     {1, W::forward},  {2, W::forward},  {3, W::forward},
                                            {3, W::backward}, {2, W::backward}, {1, W::backward}, {0, W::none}};
  auto run = [&](double bucket, double reuse) {
    return zero3::replay(parameters, trace, zero3::Settings{bucket, 1000, reuse, 10});
  };
  const zero3::Result prefetching = run(50, 100);
  EXPECT_EQ(prefetching.gathered_bytes[0], 360);
  EXPECT_EQ(prefetching.gathered_bytes[1], 360);
  EXPECT_EQ(prefetching.gathered_numel[0], 185);  // 5 + 40 + 40 + 100
  EXPECT_EQ(prefetching.persistent_bytes, 10);
  const zero3::Result reuse_only = run(0, 100);
  EXPECT_EQ(reuse_only.gathered_bytes[0], 160);
  EXPECT_EQ(reuse_only.gathered_bytes[1], 160);
  const zero3::Result module_only = run(0, 0);
  EXPECT_EQ(module_only.gathered_bytes[0], 80);
  EXPECT_EQ(module_only.gathered_bytes[1], 80);
}

// The replay's record of the backward's gradients (Workspace::gradients, for
// comm-buffers' flushes): the trace above, where backward's C, B and N ready
// gradients of 40, 40 and 5 elements (A, frozen, none). With B = 50, M = 1000,
// R = 100 (the hand trace above) step 4 holds B C A, 360 bytes, and releases
// C after its record; step 5 holds B and A, 280, and releases B; step 6 holds
// A alone, 200 (A stays for step 7; N is persistent and not counted). With
// B = 0 and R = 0 each step holds its own module only: 80, 80 and 0.
TEST(ZeroStage3Coordinator, RecordsTheGatheredSetAtEachGradient) {
  const std::vector<zero3::Parameter> parameters{{100, 200}, {5, 10}, {40, 80}, {40, 80}};
  using W = zero3::Window;
  const std::vector<zero3::TraceStep> trace{
      {0, W::none},         {1, W::forward},      {2, W::forward},     {3, W::forward},
      {3, W::backward, 40}, {2, W::backward, 40}, {1, W::backward, 5}, {0, W::none}};
  zero3::Workspace workspace;
  zero3::replay(parameters, trace, zero3::Settings{50, 1000, 100, 10}, workspace);
  ASSERT_EQ(workspace.gradients.size(), 3u);
  EXPECT_EQ(workspace.gradients[0].elements, 40);
  EXPECT_EQ(workspace.gradients[0].gathered_bytes, 360);
  EXPECT_EQ(workspace.gradients[1].gathered_bytes, 280);
  EXPECT_EQ(workspace.gradients[2].elements, 5);
  EXPECT_EQ(workspace.gradients[2].gathered_bytes, 200);
  zero3::replay(parameters, trace, zero3::Settings{0, 1000, 0, 10}, workspace);
  ASSERT_EQ(workspace.gradients.size(), 3u);  // cleared by each replay
  EXPECT_EQ(workspace.gradients[0].gathered_bytes, 80);
  EXPECT_EQ(workspace.gradients[1].gathered_bytes, 80);
  EXPECT_EQ(workspace.gradients[2].gathered_bytes, 0);
}

// The staging copies of all_gather_coalesced (partition_parameters.py,
// v0.7.0 lines 836-880: each rank's partition copied from host memory to the
// GPU before the gather, beside the call's flat buffer). The trace above with
// B = 50, M = 1000, R = 100 and one rank (staging_share 1): the prefetch at
// step 1 gathers A (200 bytes) after B and C (160): at its staging instant
// 360 + 200 = 560 bytes; no other call in the windows (B and C were gathered
// at step 0, outside them; the backward window gathers nothing): forward 560,
// backward 360 = the gathered set. Over two ranks each staged partition is
// half: 360 + 100 = 460. With the partitions on the GPU (share 0): 360.
TEST(ZeroStage3Coordinator, StagingCopiesBesideTheGatheredSet) {
  const std::vector<zero3::Parameter> parameters{{100, 200}, {5, 10}, {40, 80}, {40, 80}};
  using W = zero3::Window;
  const std::vector<zero3::TraceStep> trace{{0, W::none},     {1, W::forward},  {2, W::forward},  {3, W::forward},
                                            {3, W::backward}, {2, W::backward}, {1, W::backward}, {0, W::none}};
  auto run = [&](double share) {
    zero3::Settings settings{50, 1000, 100, 10};
    settings.staging_share = share;
    return zero3::replay(parameters, trace, settings);
  };
  EXPECT_EQ(run(1).staged_bytes[0], 560);
  EXPECT_EQ(run(1).staged_bytes[1], 360);
  EXPECT_EQ(run(0.5).staged_bytes[0], 460);
  EXPECT_EQ(run(0).staged_bytes[0], 360);
  EXPECT_EQ(run(1).gathered_bytes[0], 360);  // the gathered set itself does not move
}

// Llama-2-7B (P = 6,738,415,616), mixed bf16 + AdamW, 8 data-parallel ranks,
// no activations, no recomputation. Modules (elements): embedding and LM head
// 131,072,000 each; per layer q, k, v, o 16,777,216 each, gate, up, down
// 45,088,768 each (202,375,168 in all) and 2 norms of 4,096 (persistent: 65
// norms, 532,480 B whole on every rank).
std::string llama7b(const std::string& zero, int data_parallel = 8, const std::string& extra = "") {
  return "name = \"z3\"\nmode = \"train\"\n[model]\npreset = \"llama-2-7b\"\n[batch]\nmicro_batch = 1\n"
         "seq_len = 4096\n[precision]\nuse = \"mixed-bf16\"\n[optimizer]\nuse = \"adamw\"\n[activations]\n"
         "use = \"none\"\n[[strategy]]\nuse = \"data-parallel\"\nsize = " +
         std::to_string(data_parallel) + "\n[[strategy]]\nuse = \"zero\"\nstage = 3\n" + zero + extra;
}

// Reuse distance alone (prefetch_bucket_size = 0). A module used in forward
// stays gathered when its backward use comes within R = 1e9 elements. From
// the last layer (31) to the loss and back: the final norm and the LM head
// twice, 262,152,192. Layer 31's modules: down 262,152,192 apart, up
// 352,329,728, gate 442,507,264, o 532,692,992 (with the norm), v and k, q
// up to 633,356,288: all kept. Layer 30: down 202,383,360 x 2 + 262,152,192 =
// 666,918,912, up 757,096,448, gate 847,273,984, o 937,459,712, v
// 971,014,144 kept; k 1,004,568,576 and q beyond R: released. Layer 29: beyond.
// At the loss the LM head joins them: 131,072,000 + 202,375,168 (layer 31) +
// 168,820,736 (layer 30's down, up, gate, o, v) = 502,267,904 elements =
// 1,004,535,808 B, at the end of forward and at the start of backward.
// With max_live_parameters = 150,000,000 the reuse alone holds more than M,
// so nothing is prefetched: the same.
TEST(ZeroStage3Gathered, ReuseDistanceKeepsTheLastLayers) {
  for (const char* option : {"prefetch_bucket_size = 0\n", "max_live_parameters = 150000000\n"}) {
    Evaluation e = evaluate_paper(llama7b(std::string("gathered_parameters = true\n") + option));
    EXPECT_EQ(e.item_bytes("zero3.gathered_forward", MEMPLAN_ROLE_BUFFERS), 1'004'535'808u) << option;
    EXPECT_EQ(e.item_bytes("zero3.gathered_backward", MEMPLAN_ROLE_BUFFERS), 1'004'535'808u) << option;
  }
}

// The defaults. The prefetcher fetches whole parameters ahead while it has
// fetched under min(B, M - gathered) in a call, so it runs about M = 1e9
// elements ahead of the module in use. Near the end of forward it reaches the
// backward part of the trace and walks over the backward uses of the last
// layers, still gathered: those parameters are marked as fetched for their
// backward use and are not released. At the start of the last layer's
// forward: layer 27's up and down, layers 28-31 whole and the LM head,
// 2 x 45,088,768 + 4 x 202,375,168 + 131,072,000 = 1,030,750,208 elements =
// 2,061,500,416 B (the forward and the backward window peak alike).
//   zero3.module_gradient  the largest module's gradient, 131,072,000 x 2 B = 262,144,000 B
//   persistent (2 + 4 + 8) x P / 8 = 11,792,227,328; gradients 2 x P / 8 = 1,684,603,904
//   backward = 11,792,227,328 + 1,684,603,904 + 2,061,500,416 + 262,144,000 + 532,480 = 15,801,008,128 B
TEST(ZeroStage3Gathered, PrefetchRunsAheadToTheLiveLimit) {
  Evaluation e = evaluate_paper(llama7b("gathered_parameters = true\n"));
  EXPECT_EQ(e.item_bytes("zero3.gathered_forward", MEMPLAN_ROLE_BUFFERS), 2'061'500'416u);
  EXPECT_EQ(e.item_bytes("zero3.gathered_backward", MEMPLAN_ROLE_BUFFERS), 2'061'500'416u);
  EXPECT_EQ(e.item_bytes("zero3.module_gradient", MEMPLAN_ROLE_BUFFERS), 262'144'000u);
  EXPECT_EQ(e.item_bytes("zero3.persistent_parameters", MEMPLAN_ROLE_BUFFERS), 532'480u);
  EXPECT_EQ(e.breakdown().timeline[kForward], 11'792'227'328u + 2'061'500'416u + 532'480u);
  EXPECT_EQ(e.breakdown().peak, 15'801'008'128u);
  EXPECT_EQ(e.breakdown().peak_phase, kBackward);
  const auto details = e.estimator().report_details();
  ASSERT_EQ(details.size(), 2u);
  EXPECT_EQ(details[0], (std::pair<std::string, std::string>{"zero3_largest_module", "131072000"}));
  // With the 266,240 persistent norm elements.
  EXPECT_EQ(details[1], (std::pair<std::string, std::string>{"zero3_gathered_parameters", "1031016448"}));
}

// Parameters of at most 20,000,000 elements are persistent: q, k, v, o
// (16,777,216) of 32 layers and the 65 norms stay whole on every rank:
// (128 x 16,777,216 + 266,240) x 2 B = 4,295,499,776 B.
TEST(ZeroStage3Gathered, SmallParametersPersist) {
  Evaluation e = evaluate_paper(llama7b("gathered_parameters = true\nparam_persistence_threshold = 20000000\n"));
  EXPECT_EQ(e.item_bytes("zero3.persistent_parameters", MEMPLAN_ROLE_BUFFERS), 4'295'499'776u);
}

// LoRA matrices persist too (DeepSpeed v0.14.0 partition_parameters.py marks
// every parameter of at most the threshold ds_persist at Init; its gradient and
// optimizer state stay partitioned). Each adapted d_in x d_out weight has
// lora_A r x d_in and lora_B d_out x r; h = 4096, f = 11008.
//   r = 8, q k v o mlp: q, k, v, o 2 x 32,768 each (262,144); gate, up:
//     A 32,768 + B 88,064; down: A 88,064 + B 32,768 (all <= 1e5): 362,496;
//     624,640 per layer x 32 x 2 B (bf16 adapters) = 39,976,960 B
//   r = 16: q, k, v, o 2 x 65,536 each (524,288); gate and up A 65,536 each,
//     down B 65,536 (the 176,128-element matrices do not persist): 196,608;
//     720,896 x 32 x 2 B = 46,137,344 B
// beside the 65 norms' 532,480 B.
TEST(ZeroStage3Gathered, SmallAdapterMatricesPersist) {
  auto persistent = [](int rank) {
    const std::string lora =
        "[[strategy]]\nuse = \"lora\"\nrank = " + std::to_string(rank) + "\ntargets = \"q,k,v,o,mlp\"\n";
    return evaluate_paper(llama7b("gathered_parameters = true\n", 8, lora))
        .item_bytes("zero3.persistent_parameters", MEMPLAN_ROLE_BUFFERS);
  };
  EXPECT_EQ(persistent(8), 532'480u + 39'976'960u);
  EXPECT_EQ(persistent(16), 532'480u + 46'137'344u);
}

// The paper view (ZeRO Table 1 counts model states only) leaves them out; any
// framework's view counts them by default, as DeepSpeed gathers every module.
TEST(ZeroStage3Gathered, OnByDefaultOffInThePaperView) {
  Evaluation device = evaluate(llama7b(""));
  Evaluation on = evaluate_paper(llama7b("gathered_parameters = true\n"));
  EXPECT_GT(device.item_bytes("zero3.gathered_forward", MEMPLAN_ROLE_BUFFERS), 0u);
  EXPECT_EQ(device.item_bytes("zero3.gathered_forward", MEMPLAN_ROLE_BUFFERS),
            on.item_bytes("zero3.gathered_forward", MEMPLAN_ROLE_BUFFERS));
  Evaluation e = evaluate_paper(llama7b(""));
  EXPECT_EQ(e.component(MEMPLAN_ROLE_BUFFERS), 0u);
  EXPECT_EQ(e.breakdown().sum, 11'792'227'328u + 1'684'603'904u);
  EXPECT_EQ(e.breakdown().peak, 11'792'227'328u + 1'684'603'904u);
}

// Tensor parallelism 2 over 8 GPUs (4 data-parallel ranks): the modules are
// the rank's shards. Without prefetch or reuse each parameter is released
// after its module: the largest in the windows is the vocabulary-parallel LM
// head, 65,536,000 x 2 B = 131,072,000 B; its gradient as much.
TEST(ZeroStage3Gathered, ModulesAreTheTensorParallelShards) {
  Evaluation e = evaluate_paper(llama7b("gathered_parameters = true\nprefetch_bucket_size = 0\nmax_reuse_distance = 0\n", 4,
                                        "[[strategy]]\nuse = \"tensor-parallel\"\nsize = 2\n"));
  EXPECT_EQ(e.item_bytes("zero3.gathered_forward", MEMPLAN_ROLE_BUFFERS), 131'072'000u);
  EXPECT_EQ(e.item_bytes("zero3.gathered_backward", MEMPLAN_ROLE_BUFFERS), 131'072'000u);
  EXPECT_EQ(e.item_bytes("zero3.module_gradient", MEMPLAN_ROLE_BUFFERS), 131'072'000u);
}

// A tied LM head: its gradient (from the loss's backward) waits in autograd's
// input buffer for the embedding's, which comes at the end of backward (one
// AccumulateGrad node for the shared parameter), and DeepSpeed reduces only
// from that node's hook (stage3.py create_reduce_and_remove_grad_hooks), so
// each layer's backward holds it beside its own module's gradient. By hand,
// GPT-2 with h 4096, ffn 16384, 90 layers (validation/PLC-gpt2-18b-ds3-*):
// head = embedding 50,257 x 4096 = 205,852,672 elements; the largest layer
// module an MLP projection, (2 x 4096 x 16384 + 16384 + 4096) / 2 =
// 67,119,104 (memplan's MLP item holds both with their biases); fp16
// gradients: (205,852,672 + 67,119,104) x 2 B = 545,943,552 B. Untied
// (Llama-2-7B above) it stays the largest module's alone: 262,144,000 B.
TEST(ZeroStage3Gathered, TiedHeadGradientWaitsBesideTheLayersGradient) {
  Evaluation e = evaluate_paper(
      "name = \"z3\"\nmode = \"train\"\n[model]\npreset = \"gpt2-xl\"\nlayers = 90\nhidden = 4096\nheads = 16\n"
      "ffn_hidden = 16384\n[batch]\nmicro_batch = 1\nseq_len = 1024\n[precision]\nuse = \"mixed-fp16\"\n"
      "[optimizer]\nuse = \"adam\"\n[activations]\nuse = \"none\"\n[[strategy]]\nuse = \"data-parallel\"\n"
      "size = 1\n[[strategy]]\nuse = \"zero\"\nstage = 3\ngathered_parameters = true\n");
  EXPECT_EQ(e.item_bytes("zero3.module_gradient", MEMPLAN_ROLE_BUFFERS), 545'943'552u);
  EXPECT_EQ(evaluate_paper(llama7b("gathered_parameters = true\n")).item_bytes("zero3.module_gradient",
                                                                               MEMPLAN_ROLE_BUFFERS),
            262'144'000u);
}

TEST(ZeroStage3Gathered, Errors) {
  const std::string library = " (plugin library " + plugin_dir() + "/memplan-zero.so)";
  std::string stage2 = llama7b("gathered_parameters = true\n");
  stage2.replace(stage2.find("stage = 3"), 9, "stage = 2");
  EXPECT_EQ(error_of(stage2, "z.toml"),
            "z.toml:20:23: error: in [[strategy]] #2, strategy plugin 'zero', option 'gathered_parameters': counts "
            "the parameters ZeRO stage 3 gathers; stage 2 keeps whole weights on every rank" + library);
  // Stage 3 counts the gathered modules by default; turned off, its sizes are an error.
  EXPECT_EQ(error_of(llama7b("gathered_parameters = false\nprefetch_bucket_size = 1000\n"), "z.toml"),
            "z.toml:21:24: error: in [[strategy]] #2, strategy plugin 'zero', option 'prefetch_bucket_size': sizes "
            "the stage-3 gathered parameters, which are not counted; set gathered_parameters = true with stage = 3" +
                library);
  EXPECT_EQ(error_of(llama7b("gathered_parameters = true\nmax_live_parameters = -1\n"), "z.toml"),
            "z.toml:21:23: error: in [[strategy]] #2, strategy plugin 'zero', option 'max_live_parameters': must be 0 "
            "or more elements, got -1" + library);
  EXPECT_EQ(error_of("name = \"z3\"\nmode = \"train\"\n[model]\nparams = 7.5e9\n[precision]\nuse = \"mixed-fp16\"\n"
                     "[optimizer]\nuse = \"adam\"\n[activations]\nuse = \"none\"\n[[strategy]]\nuse = "
                     "\"data-parallel\"\nsize = 64\n[[strategy]]\nuse = \"zero\"\nstage = 3\n"
                     "gathered_parameters = true\n",
                     "z.toml"),
            "z.toml:17:23: error: in [[strategy]] #2, strategy plugin 'zero', option 'gathered_parameters': needs the "
            "model's architecture to size the gathered modules, but the scenario gives only params; give a preset or "
            "the architecture in [model]" + library);
}

}  // namespace
}  // namespace memplan::testing
