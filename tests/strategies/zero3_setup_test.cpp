// 'zero' stage 3 with setup = "whole": the module reaches deepspeed.initialize
// with whole parameters (transformers skips deepspeed.zero.Init for quantized
// models: huggingface/transformers PR #29587, "Disable zero.init when using
// DeepSpeed with QLoRA"; its quantized weights wait on the CPU). DeepSpeed
// v0.14.0 engine.py _configure_distributed_model moves the whole module onto
// the GPU (self.module.to(self.device): no parameter has a ds_id), then the
// stage-3 optimizer partitions it parameter by parameter
// (parameter_offload.py _convert_to_zero_parameters -> partition_parameters.py
// Init(module=...) -> _zero_init_param -> _partition_param: the rank's
// partition is allocated and filled, then the whole tensor is freed), and
// stage3.py's defragment empties the cache (gc.collect, empty_cache).
#include <gtest/gtest.h>

#include <string>

#include "test_support.hpp"

namespace memplan::testing {
namespace {

// Llama-2-7B (P = 6,738,415,616; token embedding 32,000 x 4,096 =
// 131,072,000 elements), mixed bf16 + AdamW, 8 data-parallel ranks, no
// activations.
std::string llama7b(const std::string& zero, int stage = 3, const std::string& extra = "") {
  return "name = \"z3\"\nmode = \"train\"\n[model]\npreset = \"llama-2-7b\"\n[batch]\nmicro_batch = 1\n"
         "seq_len = 4096\n[precision]\nuse = \"mixed-bf16\"\n[optimizer]\nuse = \"adamw\"\n[activations]\n"
         "use = \"none\"\n[[strategy]]\nuse = \"data-parallel\"\nsize = 8\n[[strategy]]\nuse = \"zero\"\nstage = " +
         std::to_string(stage) + "\n" + zero + extra;
}

// Hand derivation. The high point of the set-up is the first parameter's
// partition (the embedding's, first in module order), allocated while every
// parameter is still whole: each later step frees a whole tensor larger than
// the partition it allocates.
//   whole bf16 weights: 6,738,415,616 x 2 = 13,476,831,232 B
//   the rank's partitions (persistent, counted by the host at init):
//     13,476,831,232 / 8 = 1,684,603,904 B
//   the embedding's partition: 131,072,000 x 2 / 8 = 32,768,000 B
//   zero3.setup_whole = 13,476,831,232 - 1,684,603,904 + 32,768,000 = 11,824,995,328 B
// The init phase (docs/estimate.md section 4) adds the persistent items that
// exist at set-up (not the optimizer states): the partitions 1,684,603,904
// and the fp32 master partitions 6,738,415,616 x 4 / 8 = 3,369,207,808 (the
// paper view counts no gathered parameters, so no persistent norms):
//   11,824,995,328 + 1,684,603,904 + 3,369,207,808 = 16,878,807,040 B
// (DeepSpeed creates the fp32 partitions after partitioning, so the host's
// rule counts them 3,369,207,808 B early; see plugins/strategies/zero/README.md.)
// The default (setup = "partitioned", zero.Init) adds nothing and leaves the
// step untouched.
TEST(ZeroStage3Setup, WholeModuleMovedOntoTheGpuThenPartitioned) {
  Evaluation whole = evaluate_paper(llama7b("setup = \"whole\"\n"));
  EXPECT_EQ(whole.item_bytes("zero3.setup_whole", MEMPLAN_ROLE_BUFFERS), 11'824'995'328u);
  EXPECT_EQ(whole.breakdown().timeline[kInit], 16'878'807'040u);
  EXPECT_EQ(whole.breakdown().peak_phase, kInit);
  Evaluation partitioned = evaluate_paper(llama7b("setup = \"partitioned\"\n"));
  EXPECT_EQ(partitioned.item_bytes("zero3.setup_whole", MEMPLAN_ROLE_BUFFERS), 0u);
  EXPECT_EQ(evaluate_paper(llama7b("")).item_bytes("zero3.setup_whole", MEMPLAN_ROLE_BUFFERS), 0u);
  for (int phase : {kForward, kBackward, kOptimizerStep})
    EXPECT_EQ(whole.breakdown().timeline[phase], partitioned.breakdown().timeline[phase]) << phase;
}

// With the 'allocator' plugin: module.to allocates the parameters one after
// another into fresh segments: no fragmentation margin on the set-up item, only
// its rounding (memplan takes an item as one allocation: 11,824,995,328 B is
// 5,638.6 blocks of 2 MiB, rounded up to 5,639 x 2,097,152 = 11,825,840,128 B,
// 844,800 B more). stage3.py empties the cache after partitioning, so no
// floor lifts the step: forward, backward and the optimizer step are those of
// the default set-up.
TEST(ZeroStage3Setup, NoFloorNorMarginUnderTheAllocator) {
  const std::string allocator = "[[strategy]]\nuse = \"allocator\"\n";
  Evaluation whole = evaluate_paper(llama7b("setup = \"whole\"\n", 3, allocator));
  Evaluation partitioned = evaluate_paper(llama7b("", 3, allocator));
  for (int phase : {kForward, kBackward, kOptimizerStep})
    EXPECT_EQ(whole.breakdown().timeline[phase], partitioned.breakdown().timeline[phase]) << phase;
  EXPECT_EQ(whole.item_bytes("allocator.stream_pools", MEMPLAN_ROLE_OVERHEAD), 0u);
  const uint64_t rounding = whole.item_bytes("allocator.rounding", MEMPLAN_ROLE_OVERHEAD) -
                            partitioned.item_bytes("allocator.rounding", MEMPLAN_ROLE_OVERHEAD);
  EXPECT_EQ(rounding, 844'800u);
  EXPECT_EQ(whole.item_bytes("allocator.fragmentation", MEMPLAN_ROLE_OVERHEAD),
            partitioned.item_bytes("allocator.fragmentation", MEMPLAN_ROLE_OVERHEAD));
}

TEST(ZeroStage3Setup, Errors) {
  const std::string library = " (plugin library " + plugin_dir() + "/memplan-zero.so)";
  EXPECT_EQ(error_of(llama7b("setup = \"whole\"\n", 2), "z.toml"),
            "z.toml:20:9: error: in [[strategy]] #2, strategy plugin 'zero', option 'setup': \"whole\" sizes stage 3's "
            "partitioning of a whole module; stage 2 keeps whole weights on every rank for good" + library);
  EXPECT_EQ(error_of(llama7b("setup = \"eager\"\n"), "z.toml"),
            "z.toml:20:9: error: in [[strategy]] #2, strategy plugin 'zero', option 'setup': must be \"partitioned\" "
            "(built under deepspeed.zero.Init) or \"whole\" (the module reaches deepspeed.initialize whole), got "
            "\"eager\"" + library);
  // With parameter offload DeepSpeed partitions onto the CPU and skips defragment: not modelled, refused.
  EXPECT_EQ(error_of(llama7b("setup = \"whole\"\n", 3, "[[strategy]]\nuse = \"offload\"\nparameters = true\n"),
                     "z.toml"),
            "z.toml:23:14: error: in [[strategy]] #3, strategy plugin 'offload', option 'parameters': moves the weights "
            "to the CPU, but zero's setup = \"whole\" is modelled without parameter offload (DeepSpeed then "
            "partitions onto the CPU and stage3.py skips defragment's empty_cache, so the whole model's freed blocks "
            "stay cached on the GPU); remove one of the two (plugin library " + plugin_dir() + "/memplan-offload.so)");
}

}  // namespace
}  // namespace memplan::testing
