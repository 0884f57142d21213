// 'zero' stage 3 with gathered_parameters = true: DeepSpeed ZeRO-3's working
// set, the module in use gathered to full size plus up to
// stage3_prefetch_bucket_size (default 5e7) elements prefetched, at most
// stage3_max_live_parameters (default 1e9) resident
// (deepspeed/runtime/zero/config.py):
//   gathered = u + min(B, max(0, M - u), W - u)
// Llama-2-7B (P = 6,738,415,616), mixed bf16 + AdamW, 8 data-parallel ranks,
// no activations. The largest module is the token embedding (or the LM head),
// u = 32,000 x 4,096 = 131,072,000 elements (an MLP projection is 4096 x 11008
// = 45,088,768). Hand derivation:
//   zero3.gathered_forward / _backward (131,072,000 + 50,000,000) x 2 B = 362,144,000 B each
//   zero3.module_gradient              131,072,000 x 2 B               = 262,144,000 B
//   persistent (2 + 4 + 8) x P / 8 = 11,792,227,328; gradients 2 x P / 8 = 1,684,603,904
//   backward = 11,792,227,328 + 1,684,603,904 + 362,144,000 + 262,144,000 = 14,101,119,232 B
// The ZeRO paper's Table 1 counts model states only; its test
// (tests/sources/zero_table1_test.cpp) uses a params-only model, for which
// the working set cannot be sized and the option is refused, and the default
// (gathered_parameters = false) adds nothing.
#include <gtest/gtest.h>

#include <string>

#include "test_support.hpp"

namespace memplan::testing {
namespace {

std::string llama7b(const std::string& zero, int data_parallel = 8, const std::string& extra = "") {
  return "name = \"z3\"\nmode = \"train\"\n[model]\npreset = \"llama-2-7b\"\n[batch]\nmicro_batch = 1\n"
         "seq_len = 4096\n[precision]\nuse = \"mixed-bf16\"\n[optimizer]\nuse = \"adamw\"\n[activations]\n"
         "use = \"none\"\n[[strategy]]\nuse = \"data-parallel\"\nsize = " +
         std::to_string(data_parallel) + "\n[[strategy]]\nuse = \"zero\"\nstage = 3\n" + zero + extra;
}

TEST(ZeroStage3Gathered, ModulePlusPrefetchBucket) {
  Evaluation e = evaluate_paper(llama7b("gathered_parameters = true\n"));
  EXPECT_EQ(e.item_bytes("zero3.gathered_forward", MEMPLAN_ROLE_BUFFERS), 362'144'000u);
  EXPECT_EQ(e.item_bytes("zero3.gathered_backward", MEMPLAN_ROLE_BUFFERS), 362'144'000u);
  EXPECT_EQ(e.item_bytes("zero3.module_gradient", MEMPLAN_ROLE_BUFFERS), 262'144'000u);
  EXPECT_EQ(e.breakdown().timeline[kForward], 11'792'227'328u + 362'144'000u);
  EXPECT_EQ(e.breakdown().peak, 14'101'119'232u);
  EXPECT_EQ(e.breakdown().peak_phase, kBackward);
  const auto details = e.estimator().report_details();
  ASSERT_EQ(details.size(), 2u);
  EXPECT_EQ(details[0], (std::pair<std::string, std::string>{"zero3_largest_module", "131072000"}));
  EXPECT_EQ(details[1], (std::pair<std::string, std::string>{"zero3_gathered_parameters", "181072000"}));
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

TEST(ZeroStage3Gathered, LiveLimitAndBucketBoundThePrefetch) {
  // M = 150,000,000: prefetch min(5e7, 150e6 - 131,072,000 = 18,928,000) -> 150,000,000 gathered.
  EXPECT_EQ(evaluate_paper(llama7b("gathered_parameters = true\nmax_live_parameters = 150000000\n"))
                .item_bytes("zero3.gathered_forward", MEMPLAN_ROLE_BUFFERS),
            300'000'000u);
  // M below the module: the module is still gathered whole, nothing prefetched.
  EXPECT_EQ(evaluate_paper(llama7b("gathered_parameters = true\nmax_live_parameters = 100000000\n"))
                .item_bytes("zero3.gathered_forward", MEMPLAN_ROLE_BUFFERS),
            262'144'000u);
  EXPECT_EQ(evaluate_paper(llama7b("gathered_parameters = true\nprefetch_bucket_size = 0\n"))
                .item_bytes("zero3.gathered_forward", MEMPLAN_ROLE_BUFFERS),
            262'144'000u);
}

// Tensor parallelism 2 over 8 GPUs (4 data-parallel ranks): the vocabulary-
// parallel embedding is 65,536,000 elements per rank, still the largest
// module: (65,536,000 + 50,000,000) x 2 = 231,072,000 B.
TEST(ZeroStage3Gathered, ModulesAreTheTensorParallelShards) {
  Evaluation e = evaluate_paper(
      llama7b("gathered_parameters = true\n", 4, "[[strategy]]\nuse = \"tensor-parallel\"\nsize = 2\n"));
  EXPECT_EQ(e.item_bytes("zero3.gathered_forward", MEMPLAN_ROLE_BUFFERS), 231'072'000u);
  EXPECT_EQ(e.item_bytes("zero3.module_gradient", MEMPLAN_ROLE_BUFFERS), 131'072'000u);
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
