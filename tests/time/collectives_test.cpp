// Collectives and the pipeline bubble in the step time (ABI 1.2 work
// records): ring volumes against seed 004's table, the layout's collectives
// of 'transformer-step', FSDP's rewrite of the gradient reduction, the
// bubble of 'pipeline-parallel'. Figures derived beside each test.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "memplan/core/estimate.hpp"
#include "memplan/core/step_time.hpp"
#include "test_support.hpp"

namespace memplan::testing {
namespace {

// Seed 004 (section 15.5.2) gives the total volume over the N devices of a
// ring collective of Phi: all-gather and reduce-scatter (N - 1) Phi, all-reduce
// 2 (N - 1) Phi. Per rank: a 1/N share.
TEST(Collectives, RingVolumesAreSeed004sPerRank) {
  const double phi = 1e9;
  for (int64_t n : {2, 4, 8, 64}) {
    const double total_gather = static_cast<double>(n - 1) * phi;
    EXPECT_DOUBLE_EQ(ring_volume(MEMPLAN_COLLECTIVE_ALL_GATHER, phi, n) * static_cast<double>(n), total_gather);
    EXPECT_DOUBLE_EQ(ring_volume(MEMPLAN_COLLECTIVE_REDUCE_SCATTER, phi, n) * static_cast<double>(n), total_gather);
    EXPECT_DOUBLE_EQ(ring_volume(MEMPLAN_COLLECTIVE_ALL_REDUCE, phi, n) * static_cast<double>(n), 2 * total_gather);
  }
  EXPECT_EQ(ring_volume(MEMPLAN_COLLECTIVE_ALL_REDUCE, phi, 1), 0);
  EXPECT_EQ(ring_volume(MEMPLAN_COLLECTIVE_SEND_RECV, phi, 2), phi);
}

std::string read_example(const std::string& name) {
  std::ifstream in(source_dir() + "/examples/" + name);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// examples/train-time-llama2-70b-h100.toml, its header's hand check:
//   tensor    2 x 20 x (4096 x 8192 x 2) x 2 x 7/8 x 2 passes x 32 = 300,647,710,720 B at 450e9 B/s
//   pipeline  4096 x 8192 x 2 / 8 x 2 passes x 32                   =     536,870,912 B at 50e9 B/s
//   data      2 x 3/4 x 2,172,190,720 x 2                           =   6,516,572,160 B at 50e9 B/s
//   bubble    3/32 of the forward and backward compute time.
//   optimizer the step's memory traffic (optimizer_traffic.hpp): the stage's
//             2,172,190,720 parameters x 28 B (bf16 gradient 2, AdamW's two
//             fp32 states read and written 16, the fp32 master copy read and
//             written 8, the bf16 weight written 2) / 4 (ZeRO-1's partition)
//             = 15,205,335,040 B at the H100's 3,350 GB/s.
TEST(Collectives, Llama70bExampleByHand) {
  Evaluation e = evaluate(read_example("train-time-llama2-70b-h100.toml"));
  const StepTime& time = e.breakdown().time;
  ASSERT_EQ(time.status, TimeStatus::timed);
  const double tensor = 2.0 * 20 * (4096.0 * 8192 * 2) * 2 * 7 / 8 * 2 * 32;
  const double pipeline = 4096.0 * 8192 * 2 / 8 * 2 * 32;
  const double data = 2 * 0.75 * 2'172'190'720.0 * 2;
  EXPECT_NEAR(time.communication_bytes / (tensor + pipeline + data), 1.0, 1e-12);
  EXPECT_NEAR(time.communication_seconds, tensor / 450e9 + pipeline / 50e9 + data / 50e9, 1e-9);
  const double memory = 2'172'190'720.0 * 28 / 4;
  EXPECT_NEAR(time.memory_bytes / memory, 1.0, 1e-12);
  EXPECT_NEAR(time.bubble_seconds, 3.0 / 32 * (time.compute_seconds - memory / 3350e9), 1e-12);
  EXPECT_NEAR(time.compute_seconds, 1.7483e15 / (0.47 * 989.4e12) + memory / 3350e9, 1e-3);
  EXPECT_NEAR(time.seconds, time.compute_seconds + time.exposed_seconds + time.bubble_seconds, 1e-12);
}

// pipeline_comm_overlap (Megatron-LM's overlap_p2p_comm): that fraction of the
// pipeline's send/receive may hide behind its pass's compute. The example's
// transfers, 4096 x 8192 x 2 / 8 B each way per micro-batch to a stage in
// another node, x 2 passes x 32 micro-batches = 536,870,912 B at 50 GB/s:
// 0.01073741824 s, far below each pass's compute (1.2 s and more), so all of
// what may hide does: exposed 0.0107, 0.0054 and 0 s at 0, 0.5 and 1.
std::string with_step_option(std::string text, const std::string& option) {
  text.replace(text.find("efficiency = 0.47\n"), 18, "efficiency = 0.47\n" + option);
  return text;
}

TEST(Collectives, PipelineCommOverlap) {
  const std::string example = read_example("train-time-llama2-70b-h100.toml");
  const double pipeline_seconds = 4096.0 * 8192 * 2 / 8 * 2 * 32 / 50e9;
  const double others = 2.0 * 20 * (4096.0 * 8192 * 2) * 2 * 7 / 8 * 2 * 32 / 450e9 +  // tensor
                        2 * 0.75 * 2'172'190'720.0 * 2 / 50e9;                            // data parallel
  const StepTime plain = evaluate(example).breakdown().time;
  const StepTime off = evaluate(with_step_option(example, "pipeline_comm_overlap = 0\n")).breakdown().time;
  const StepTime half = evaluate(with_step_option(example, "pipeline_comm_overlap = 0.5\n")).breakdown().time;
  const StepTime all = evaluate(with_step_option(example, "pipeline_comm_overlap = 1\n")).breakdown().time;
  EXPECT_NEAR(off.exposed_seconds, others + pipeline_seconds, 1e-9);
  EXPECT_NEAR(half.exposed_seconds, others + pipeline_seconds / 2, 1e-9);
  EXPECT_NEAR(all.exposed_seconds, others, 1e-9);
  EXPECT_NEAR(all.communication_seconds, others + pipeline_seconds, 1e-9);  // still moved, now hidden
  // Plain 1F1B: Megatron-LM overlaps nothing (arguments.py turns overlap_p2p_comm off without
  // interleaving), so the default is 0.
  EXPECT_NEAR(plain.exposed_seconds, off.exposed_seconds, 1e-12);
  // Interleaved, v = 5 chunks of 4 layers on the first stage (r = 0) of p = 4, M = 32: the warm-up's
  // w = 2 (p - 1) + (v - 1) p = 22 chunk passes of M v = 160 send without overlap, and the flush's 22
  // backward ones; the steady state's 138 / 160 = 0.8625 overlap (schedules.py, overlap_p2p_comm on by
  // default): 0.1375 of the transfers exposed. Each of the 5 chunks sends its output on (and its
  // gradient back), so the stage moves 5 times the plain schedule's bytes (layout.pipeline_chunks).
  std::string interleaved = example;
  interleaved.replace(interleaved.find("stage = \"first\"\n"), 16, "stage = \"first\"\nvirtual_stages = 5\n");
  const StepTime v5 = evaluate(interleaved).breakdown().time;
  const StepTime v5_off = evaluate(with_step_option(interleaved, "pipeline_comm_overlap = 0\n")).breakdown().time;
  EXPECT_NEAR(v5_off.exposed_seconds, others + 5 * pipeline_seconds, 1e-9);
  EXPECT_NEAR(v5.exposed_seconds, others + 5 * pipeline_seconds * (1 - 138.0 / 160), 1e-9);
}

// [budget]: 2e12 tokens at the example's throughput, on its 128 GPUs; a price of 2 USD per GPU-hour
// (this test's) gives the cost: hours = 2e12 / tokens/s / 3600, GPU-hours x 128, USD x 2.
TEST(Collectives, BudgetOfTheLlama70bExample) {
  std::string text = read_example("train-time-llama2-70b-h100.toml");
  text.replace(text.find("tokens = 2e12\n"), 14, "tokens = 2e12\nusd_per_gpu_hour = 2\n");
  Evaluation e = evaluate(text);
  const Estimate estimate = e.estimator().estimate();
  const RunBudget budget = run_budget(estimate);
  const double hours = 2e12 / e.breakdown().time.tokens_per_second / 3600;
  EXPECT_NEAR(budget.hours, hours, 1e-9);
  EXPECT_NEAR(hours / 24, 217.5, 0.05);  // the example's header
  EXPECT_NEAR(budget.gpu_hours, 128 * hours, 1e-6);
  EXPECT_NEAR(budget.usd, 2 * 128 * hours, 1e-6);
  EXPECT_EQ(error_of(text + "[budget]\n", "b.toml").find("b.toml:"), 0u);
}

// Llama-2-7B in bf16 on 8 GPUs of one H100 node, one micro-batch per step:
// plain data parallelism all-reduces the gradients (2 x 7/8 x Psi bytes per
// GPU); FSDP gathers the weights before forward and again before backward and
// reduce-scatters the gradients (3 x 7/8 x Psi): 1.5 times as much, the ZeRO
// paper's 3 Psi against 2 Psi (Rajbhandari et al. 2020, section 7.2.2). Psi =
// 6,738,415,616 parameters x 2 bytes.
std::string llama7b(const std::string& sharding) {
  return "name = \"dp\"\nmode = \"train\"\n[model]\npreset = \"llama-2-7b\"\n[batch]\nmicro_batch = 1\n"
         "seq_len = 2048\n[precision]\nuse = \"bf16\"\n[optimizer]\nuse = \"adamw\"\n[activations]\n"
         "use = \"megatron\"\n[[strategy]]\nuse = \"data-parallel\"\nsize = 8\n" + sharding +
         "[[strategy]]\nuse = \"transformer-step\"\nefficiency = 0.4\n[hardware]\ngpu = \"h100-sxm-80gb\"\ncount = 8\n";
}

TEST(Collectives, FsdpMovesThreeHalvesOfDataParallel) {
  const double psi = 6'738'415'616.0 * 2;
  const StepTime ddp = evaluate_paper(llama7b("")).breakdown().time;
  const StepTime fsdp = evaluate_paper(llama7b("[[strategy]]\nuse = \"fsdp\"\n")).breakdown().time;
  EXPECT_NEAR(ddp.communication_bytes / (2 * 7.0 / 8 * psi), 1.0, 1e-12);
  EXPECT_NEAR(fsdp.communication_bytes / (3 * 7.0 / 8 * psi), 1.0, 1e-12);
  // All inside one node of 8: at NVLink's 450 GB/s per direction.
  EXPECT_NEAR(fsdp.communication_seconds, 3 * 7.0 / 8 * psi / 450e9, 1e-12);
}

// DeepSpeed's ZeRO stage 3 moves what FSDP moves (the same rule, sharding.hpp
// fully_sharded_communication): 3 x 7/8 x Psi at one micro-batch.
TEST(Collectives, ZeroStage3MovesThreeHalvesOfDataParallel) {
  const double psi = 6'738'415'616.0 * 2;
  const StepTime zero3 = evaluate_paper(llama7b("[[strategy]]\nuse = \"zero\"\nstage = 3\n")).breakdown().time;
  EXPECT_NEAR(zero3.communication_bytes / (3 * 7.0 / 8 * psi), 1.0, 1e-12);
  // Stages 1 and 2 reduce-scatter the gradients and all-gather the updated weights once per step: the
  // all-reduce's volume (ZeRO paper section 7.2.1), which the step-work plugin's record keeps.
  const StepTime zero1 = evaluate_paper(llama7b("[[strategy]]\nuse = \"zero\"\nstage = 1\n")).breakdown().time;
  EXPECT_NEAR(zero1.communication_bytes / (2 * 7.0 / 8 * psi), 1.0, 1e-12);
}

// HYBRID_SHARD over 2 nodes of 8 (shard_size 8, 16 replicas): the gathers and
// the gradients' reduce-scatter stay in the shard group, one node (7/8 x Psi
// each, 3 of them, at NVLink's 450 GB/s); the gradient shard, Psi / 8, is then
// all-reduced over the 2 copies, 8 ranks apart: across nodes, 2 x 1/2 x Psi / 8
// at 50 GB/s (PyTorch FSDP _runtime_utils.py, _reduce_grad: reduce-scatter in
// the shard group, all-reduce in the replicate group).
TEST(Collectives, HybridShardReducesInTwoSteps) {
  const double psi = 6'738'415'616.0 * 2;
  std::string hybrid = llama7b("[[strategy]]\nuse = \"fsdp\"\nshard_size = 8\n");
  hybrid.replace(hybrid.find("size = 8\n"), 9, "size = 16\n");
  hybrid.replace(hybrid.find("count = 8\n"), 10, "count = 16\n");
  const StepTime time = evaluate_paper(hybrid).breakdown().time;
  EXPECT_NEAR(time.communication_bytes / (3 * 7.0 / 8 * psi + psi / 8), 1.0, 1e-12);
  EXPECT_NEAR(time.communication_seconds, 3 * 7.0 / 8 * psi / 450e9 + psi / 8 / 50e9, 1e-12);
}

// The same at two micro-batches: FSDP gathers and reduce-scatters every
// micro-batch (2 x 3 x 7/8 Psi); data parallelism reduces once per step.
TEST(Collectives, FsdpReducesEveryMicroBatch) {
  const double psi = 6'738'415'616.0 * 2;
  std::string two = llama7b("[[strategy]]\nuse = \"fsdp\"\n");
  two.replace(two.find("seq_len = 2048\n"), 15, "seq_len = 2048\ngrad_accum = 2\n");
  EXPECT_NEAR(evaluate_paper(two).breakdown().time.communication_bytes / (2 * 3 * 7.0 / 8 * psi), 1.0, 1e-12);
}

// A pipeline's bubble: (p - 1) / (v m) of the forward and backward compute
// (Narayanan et al. 2021, arXiv 2104.04473, sections 2.2.1 and 2.2.2).
TEST(Collectives, PipelineBubble) {
  std::string scenario = read_example("train-time-llama2-70b-h100.toml");
  scenario.replace(scenario.find("schedule = \"1f1b\"\n"), 18, "schedule = \"1f1b\"\nvirtual_stages = 5\n");
  const StepTime time = evaluate(scenario).breakdown().time;
  EXPECT_NEAR(time.bubble_seconds, 3.0 / (5 * 32) * (time.compute_seconds - time.memory_bytes / 3350e9), 1e-12);
}

}  // namespace
}  // namespace memplan::testing
