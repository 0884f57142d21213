// 'pipeline-parallel' runtime = "torch": torch.distributed.pipelining's own
// tensors (torch 2.6: torch/distributed/pipelining/stage.py, schedules.py,
// _backward.py), sized by the 'megatron' activation model.
//
// Hand derivation, Llama 3.1 405B (h 16,384, vocab 128,256), torchtitan's
// Table 5 run: micro-batch 4 x 8,192 tokens, M = 8 micro-batches, t = 8 with
// sequence parallelism, p = 8 stages (1F1B), bf16 activations, loss parallel.
//   boundary B = 2 B x 4 x 8,192 x 16,384 / 8           =   134,217,728 B (128 MiB)
//   logits   L = 2 B x 4 x 8,192 x 128,256 / 8          = 1,050,673,152 B (the vocabulary shard)
// First stage (rank 0, 8 micro-batches in flight):
//   pipeline.grad_buffers   M B (a receive buffer per micro-batch's output gradient)  = 1,073,741,824
//   pipeline.kept_outputs   M B with stage_outputs = "every" (output_chunks, torch <= 2.7), else 0
// Last stage (rank 7, one micro-batch in flight):
//   pipeline.input_buffers  (M - 1) B (the in-flight micro-batch's buffer is its
//                           first layer's stored input)                                =   939,524,096
//   pipeline.input_grads    M B (the receive buffers' .grad to the step's end)         = 1,073,741,824
//   pipeline.kept_outputs   M L (output_chunks; the loss-parallel loss keeps no
//                           16-bit logits of its own)                                  = 8,405,385,216
//   pipeline.merged_outputs M L (merge_chunks' torch.cat, a segment of its own:
//                           reserved memory only)                                      = 8,405,385,216
// Context parallelism at the same tokens per rank (1 x 262,144 / cp 8) gives
// the same B and L.
#include <gtest/gtest.h>

#include <string>

#include "test_support.hpp"

namespace memplan::testing {
namespace {

constexpr uint64_t kBoundary = 134'217'728;  // 2 x 4 x 8192 x 16384 / 8
constexpr uint64_t kLogits = 1'050'673'152;  // 2 x 4 x 8192 x 128256 / 8

std::string llama405b(const std::string& pipeline, const std::string& batch = "micro_batch = 4\nseq_len = 8192\n",
                      const std::string& context = "") {
  return "name = \"pp-runtime\"\nmode = \"train\"\n[model]\npreset = \"llama-3.1-405b\"\n[batch]\n" + batch +
         "grad_accum = 8\n[precision]\nuse = \"mixed-bf16\"\n[optimizer]\nuse = \"adamw\"\n[activations]\n"
         "use = \"megatron\"\nflash_attention = true\ndropout = false\ncross_entropy = \"loss-parallel\"\n"
         "[[strategy]]\nuse = \"recompute\"\npolicy = \"full\"\n[[strategy]]\nuse = \"tensor-parallel\"\nsize = 8\n"
         "sequence_parallel = true\n" +
         context +
         "[[strategy]]\nuse = \"pipeline-parallel\"\nsize = 8\nfirst_stage_layers = 15\nlast_stage_layers = 15\n" +
         pipeline;
}

TEST(PipelineRuntime, HandDerivedBoundaryAndLogits) {
  EXPECT_EQ(kBoundary, 2ull * 4 * 8192 * 16384 / 8);
  EXPECT_EQ(kLogits, 2ull * 4 * 8192 * 128256 / 8);
}

TEST(PipelineRuntime, FirstStageHoldsGradientBuffersAndWithOldTorchItsOutputs) {
  Evaluation every = evaluate_paper(llama405b("runtime = \"torch\"\nstage_outputs = \"every\"\n"));
  EXPECT_EQ(every.item_bytes("pipeline.grad_buffers", MEMPLAN_ROLE_BUFFERS), 8 * kBoundary);
  EXPECT_EQ(every.item_bytes("pipeline.kept_outputs", MEMPLAN_ROLE_ACTIVATIONS), 8 * kBoundary);
  // The first stage receives token ids, not hidden states, and merges nothing.
  EXPECT_EQ(every.item_bytes("pipeline.input_buffers", MEMPLAN_ROLE_BUFFERS), 0u);
  EXPECT_EQ(every.item_bytes("pipeline.input_grads", MEMPLAN_ROLE_BUFFERS), 0u);
  EXPECT_EQ(every.item_bytes("pipeline.merged_outputs", MEMPLAN_ROLE_ACTIVATIONS), 0u);
  // torch 2.8 on keeps the last stage's outputs only.
  Evaluation last_only = evaluate_paper(llama405b("runtime = \"torch\"\n"));
  EXPECT_EQ(last_only.item_bytes("pipeline.grad_buffers", MEMPLAN_ROLE_BUFFERS), 8 * kBoundary);
  EXPECT_EQ(last_only.item_bytes("pipeline.kept_outputs", MEMPLAN_ROLE_ACTIVATIONS), 0u);
}

TEST(PipelineRuntime, LastStageKeepsEveryMicroBatchsLogitsAndMergesThem) {
  Evaluation last = evaluate_paper(llama405b("runtime = \"torch\"\nstage = \"last\"\n"));
  EXPECT_EQ(last.item_bytes("pipeline.input_buffers", MEMPLAN_ROLE_BUFFERS), 7 * kBoundary);
  EXPECT_EQ(last.item_bytes("pipeline.input_grads", MEMPLAN_ROLE_BUFFERS), 8 * kBoundary);
  EXPECT_EQ(last.item_bytes("pipeline.grad_buffers", MEMPLAN_ROLE_BUFFERS), 0u);
  EXPECT_EQ(last.item_bytes("pipeline.kept_outputs", MEMPLAN_ROLE_ACTIVATIONS), 8 * kLogits);
  EXPECT_EQ(last.item_bytes("pipeline.merged_outputs", MEMPLAN_ROLE_ACTIVATIONS), 8 * kLogits);
  EXPECT_EQ(8 * kLogits, 8'405'385'216u);

  // Against runtime "megatron" (nothing of the runtime's): the backward's
  // allocated memory holds the buffers, the inputs' gradients and the kept
  // logits; the merge's segment counts in reserved memory only.
  Evaluation plain = evaluate_paper(llama405b("stage = \"last\"\n"));
  const auto& with = last.breakdown().quantities;
  const auto& without = plain.breakdown().quantities;
  const uint64_t allocated = 7 * kBoundary + 8 * kBoundary + 8 * kLogits;
  EXPECT_EQ(with[kAllocated].timeline[kBackward] - without[kAllocated].timeline[kBackward], allocated);
  EXPECT_EQ(with[kReserved].timeline[kBackward] - without[kReserved].timeline[kBackward], allocated + 8 * kLogits);
}

TEST(PipelineRuntime, ContextParallelAtTheSameTokensPerRankHoldsTheSame) {
  Evaluation cp = evaluate_paper(llama405b("runtime = \"torch\"\nstage = \"last\"\n",
                                           "micro_batch = 1\nseq_len = 262144\n",
                                           "[[strategy]]\nuse = \"context-parallel\"\nsize = 8\n"));
  EXPECT_EQ(cp.item_bytes("pipeline.input_buffers", MEMPLAN_ROLE_BUFFERS), 7 * kBoundary);
  EXPECT_EQ(cp.item_bytes("pipeline.kept_outputs", MEMPLAN_ROLE_ACTIVATIONS), 8 * kLogits);
}

TEST(PipelineRuntime, MegatronRuntimeAddsNothing) {
  Evaluation plain = evaluate_paper(llama405b("stage = \"last\"\n"));
  EXPECT_EQ(plain.item_bytes("pipeline.kept_outputs", MEMPLAN_ROLE_ACTIVATIONS), 0u);
  EXPECT_EQ(plain.item_bytes("pipeline.merged_outputs", MEMPLAN_ROLE_ACTIVATIONS), 0u);
}

TEST(PipelineRuntime, Errors) {
  EXPECT_NE(error_of(llama405b("runtime = \"deepspeed\"\n")).find("must be \"megatron\" or \"torch\""),
            std::string::npos);
  EXPECT_NE(error_of(llama405b("stage_outputs = \"every\"\n")).find("needs runtime = \"torch\""), std::string::npos);
  EXPECT_NE(error_of(llama405b("runtime = \"torch\"\nstage_outputs = \"some\"\n")).find("\"last\" or \"every\""),
            std::string::npos);
  EXPECT_NE(error_of(llama405b("runtime = \"torch\"\nvirtual_stages = 3\n")).find("virtual_stages > 1"),
            std::string::npos);
}

}  // namespace
}  // namespace memplan::testing
