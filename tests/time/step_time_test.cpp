// The host's side of the step time: time_step over work records, the GPU
// catalog's performance figures and a scenario's [hardware] overrides.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "memplan/core/catalog.hpp"
#include "memplan/core/step_time.hpp"
#include "test_support.hpp"

namespace memplan::testing {
namespace {

WorkRecord record(int32_t kind, int32_t pass, int32_t math, bool model, double amount, double efficiency) {
  memplan_work work{};
  work.struct_size = sizeof work;
  work.name = intern_name("test");
  work.kind = kind;
  work.pass = pass;
  work.math = math;
  work.flags = model ? MEMPLAN_WORK_MODEL_FLOPS : 0u;
  work.amount = amount;
  work.efficiency = efficiency;
  return WorkRecord(work, 0);
}

// 1e12 bf16 FLOPs forward and 2e12 backward per micro-batch at half of a 100
// TFLOP/s peak, 4 micro-batches: (1e12 + 2e12) x 4 / 50e12 = 0.24 s; 1e11
// recomputed FLOPs per micro-batch add 0.008 s; 8e9 bytes of optimizer update
// at 0.8 of 1e12 B/s add 0.01 s once. MFU = 12e12 / (0.258 x 100e12).
TEST(StepTime, SumsRecordsAtTheirPeaks) {
  GpuPerformance gpu;
  gpu.peak_flops[MEMPLAN_MATH_BF16] = 100e12;
  gpu.memory_bandwidth = 1e12;
  std::vector<WorkRecord> work{
      record(MEMPLAN_WORK_COMPUTE, MEMPLAN_PASS_FORWARD, MEMPLAN_MATH_BF16, true, 1e12, 0.5),
      record(MEMPLAN_WORK_COMPUTE, MEMPLAN_PASS_BACKWARD, MEMPLAN_MATH_BF16, true, 2e12, 0.5),
      record(MEMPLAN_WORK_COMPUTE, MEMPLAN_PASS_BACKWARD, MEMPLAN_MATH_BF16, false, 1e11, 0.5),
      record(MEMPLAN_WORK_MEMORY, MEMPLAN_PASS_OPTIMIZER, MEMPLAN_MATH_FP32, false, 8e9, 0.8)};
  StepTime time;
  time_step(work, gpu, 4, 65536, time);
  ASSERT_EQ(time.status, TimeStatus::timed);
  EXPECT_NEAR(time.pass_seconds[0], 0.08, 1e-12);
  EXPECT_NEAR(time.pass_seconds[1], 0.168, 1e-12);
  EXPECT_NEAR(time.pass_seconds[2], 0.01, 1e-12);
  EXPECT_NEAR(time.seconds, 0.258, 1e-12);
  EXPECT_EQ(time.model_flops, 12e12);
  EXPECT_EQ(time.hardware_flops, 12.4e12);
  EXPECT_EQ(time.memory_bytes, 8e9);
  EXPECT_NEAR(time.mfu, 12e12 / (0.258 * 100e12), 1e-12);
  EXPECT_NEAR(time.hfu, 12.4e12 / (0.258 * 100e12), 1e-12);
  EXPECT_NEAR(time.tokens_per_second, 65536 / 0.258, 1e-6);
}

// What cannot be timed says which record and why, and gives no seconds.
TEST(StepTime, UntimedRecordsNameTheirCause) {
  GpuPerformance gpu;
  gpu.peak_flops[MEMPLAN_MATH_BF16] = 100e12;
  StepTime time;
  time_step({record(MEMPLAN_WORK_COMPUTE, MEMPLAN_PASS_FORWARD, MEMPLAN_MATH_BF16, true, 1e12, 0.5),
             record(MEMPLAN_WORK_COMPUTE, MEMPLAN_PASS_FORWARD, MEMPLAN_MATH_FP8, true, 1e12, 0.5)},
            gpu, 1, 1, time);
  EXPECT_EQ(time.status, TimeStatus::no_peak);
  EXPECT_EQ(time.cause, 1);
  EXPECT_EQ(time.seconds, 0);
  EXPECT_EQ(time.model_flops, 2e12);
  time_step({record(MEMPLAN_WORK_COMPUTE, MEMPLAN_PASS_FORWARD, MEMPLAN_MATH_BF16, true, 1e12, 0.5),
             record(MEMPLAN_WORK_MEMORY, MEMPLAN_PASS_OPTIMIZER, 0, false, 1e9, 0.5)},
            gpu, 1, 1, time);
  EXPECT_EQ(time.status, TimeStatus::no_bandwidth);
  EXPECT_EQ(time.cause, 1);
  time_step({record(MEMPLAN_WORK_COMPUTE, MEMPLAN_PASS_FORWARD, MEMPLAN_MATH_BF16, true, 1e12, 0)}, gpu, 1, 1, time);
  EXPECT_EQ(time.status, TimeStatus::no_efficiency);
  time_step({}, gpu, 1, 1, time);
  EXPECT_EQ(time.status, TimeStatus::no_work);
}

// The optimizer's update and the collectives alone make no step: without the
// passes' compute (no transformer-step) a step would be all communication with
// 0 model FLOPs (examples/train-parallel-llama2-70b-fsdp-hybrid.toml printed a
// 21.4 s step of 0 FLOPs before this rule).
TEST(StepTime, OptimizerAndCollectivesAloneAreNoStep) {
  GpuPerformance gpu;
  gpu.peak_flops[MEMPLAN_MATH_BF16] = 100e12;
  gpu.memory_bandwidth = 1e12;
  gpu.gpus_per_node = 8;
  gpu.intra_node_bandwidth = 100e9;
  WorkRecord gather = record(MEMPLAN_WORK_COLLECTIVE, MEMPLAN_PASS_FORWARD, 0, false, 1e9, 0.5);
  gather.collective = MEMPLAN_COLLECTIVE_ALL_GATHER;
  gather.ranks = 8;
  gather.stride = 1;
  StepTime time;
  time_step({gather, record(MEMPLAN_WORK_MEMORY, MEMPLAN_PASS_OPTIMIZER, 0, false, 1e9, 0.5)}, gpu, 1, 1, time);
  EXPECT_EQ(time.status, TimeStatus::no_work);
  EXPECT_EQ(time.seconds, 0);
  // With the forward's compute the same records make a step: 1e12 / (100e12 x
  // 0.5) = 0.02 s forward compute, the update 1e9 / (1e12 x 0.5) = 0.002 s.
  time_step({gather, record(MEMPLAN_WORK_MEMORY, MEMPLAN_PASS_OPTIMIZER, 0, false, 1e9, 0.5),
             record(MEMPLAN_WORK_COMPUTE, MEMPLAN_PASS_FORWARD, MEMPLAN_MATH_BF16, true, 1e12, 0.5)},
            gpu, 1, 1, time);
  EXPECT_EQ(time.status, TimeStatus::timed);
  EXPECT_DOUBLE_EQ(time.compute_seconds, 0.022);
}

// Every catalog GPU with figures names their source; the H100 SXM's are its
// datasheet's dense figures (989.4 TFLOP/s bf16, 3.35 TB/s, NVLink 900 GB/s
// both directions: 450 per direction).
TEST(StepTime, CatalogFigures) {
  const Catalog catalog = Catalog::load(data_dir());
  const GpuEntry* h100 = catalog.find_gpu("h100-sxm-80gb");
  ASSERT_NE(h100, nullptr);
  EXPECT_EQ(h100->performance.peak_flops[MEMPLAN_MATH_BF16], 989.4e12);
  EXPECT_EQ(h100->performance.peak_flops[MEMPLAN_MATH_FP8], 1978.9e12);
  EXPECT_EQ(h100->performance.memory_bandwidth, 3350e9);
  EXPECT_EQ(h100->performance.intra_node_bandwidth, 450e9);
  EXPECT_EQ(h100->performance.gpus_per_node, 8);
  for (const std::string& name : catalog.gpu_names()) {
    const GpuEntry* gpu = catalog.find_gpu(name);
    if (gpu->performance.any()) {
      EXPECT_FALSE(gpu->performance.source.empty()) << name;
    }
  }
  // No bf16 matrix units on a V100.
  EXPECT_EQ(catalog.find_gpu("v100-sxm-32gb")->performance.peak_flops[MEMPLAN_MATH_BF16], 0);
}

std::string scenario(const std::string& hardware) {
  return "name = \"hw\"\nmode = \"train\"\n[model]\npreset = \"llama-2-7b\"\n[batch]\nmicro_batch = 1\n"
         "seq_len = 512\n[precision]\nuse = \"bf16\"\n[optimizer]\nuse = \"sgd\"\n[activations]\nuse = \"megatron\"\n"
         "[[strategy]]\nuse = \"transformer-step\"\nefficiency = 0.5\n[hardware]\n" + hardware;
}

// A scenario's figures replace the catalog's one by one; a GPU the catalog
// lacks can be given whole; a missing peak is named with what to give.
// tflops is line 19 of scenario().
TEST(StepTime, HardwareOverrides) {
  Evaluation measured = evaluate_paper(scenario("gpu = \"h100-sxm-80gb\"\ntflops = { bf16 = 700 }\n"));
  // The step = the FLOPs at 0.5 x the overridden 700 TFLOP/s + SGD's memory traffic at the catalog's
  // 3,350 GB/s (pure bf16, no master copy: gradient 2 + weight read and written 4 = 6 B per parameter).
  const StepTime& time = measured.breakdown().time;
  EXPECT_NEAR(time.memory_bytes, 6'738'415'616.0 * 6, 1);
  EXPECT_NEAR((time.seconds - time.memory_bytes / 3350e9) * 700e12 * 0.5, time.hardware_flops, 1e3);
  EXPECT_NEAR(time.hfu, time.hardware_flops / (time.seconds * 700e12), 1e-12);
  Evaluation custom =
      evaluate_paper(scenario("memory_gib = 48\ntflops = { bf16 = 200 }\nmemory_bandwidth_gbs = 864\n"));
  EXPECT_EQ(custom.breakdown().time.status, TimeStatus::timed);
  // Without its memory bandwidth the optimizer step's traffic cannot be timed, and the report says what to give.
  Evaluation no_bandwidth = evaluate_paper(scenario("memory_gib = 48\ntflops = { bf16 = 200 }\n"));
  EXPECT_EQ(no_bandwidth.breakdown().time.status, TimeStatus::no_bandwidth);
  EXPECT_EQ(no_bandwidth.estimator().scenario().hardware.label, "48 GiB GPU");
  Evaluation v100 = evaluate_paper(scenario("gpu = \"v100-sxm-32gb\"\n"));
  EXPECT_EQ(v100.breakdown().time.status, TimeStatus::no_peak);
  EXPECT_EQ(error_of(scenario("gpu = \"h100-sxm-80gb\"\ntflops = { int4 = 1 }\n"), "h.toml"),
            "h.toml:19:12: error: [hardware] tflops has no math 'int4'; use fp32, tf32, bf16, fp16 or fp8");
  EXPECT_EQ(error_of(scenario("gpu = \"h100-sxm-80gb\"\ntflops = { bf16 = -1 }\n"), "h.toml"),
            "h.toml:19:12: error: [hardware] tflops.bf16 must be a positive number of TFLOP/s (dense, without "
            "sparsity)");
}

// Llama-2-7B (h 4096, f 11008, V 32000, 32 layers, untied) on one H100, for
// the optimizers whose step traffic depends on the tensors: its 6,738,415,616
// parameters are 6,738,149,376 in matrices (32 x (4 x 4096^2 + 3 x 4096 x
// 11008) + 2 x 32000 x 4096) and 266,240 in 1-D norm weights (32 x 2 x 4096 +
// 4096); every tensor has at least 4096 elements and a multiple of 256.
std::string optimizer_scenario(const std::string& precision, const std::string& optimizer) {
  return "name = \"opt\"\nmode = \"train\"\n[model]\npreset = \"llama-2-7b\"\n[batch]\nmicro_batch = 1\n"
         "seq_len = 512\n[precision]\nuse = \"" + precision + "\"\n[optimizer]\n" + optimizer +
         "[activations]\nuse = \"megatron\"\n[[strategy]]\nuse = \"transformer-step\"\nefficiency = 0.5\n"
         "[hardware]\ngpu = \"h100-sxm-80gb\"\n";
}

// Hugging Face's Adafactor, op by op (optimizer_traffic.hpp,
// hf_adafactor_bytes_per_element; transformers/optimization.py @ 005edacb6b5d),
// f = 4 bytes of its fp32 arithmetic. Common to both kinds of tensor: rms(p) f,
// grad**2 and + eps 4 f, rms(update) f, div_ and mul_(lr) 4 f, -update and
// add_ 5 f: 15 f. Factored matrices: the two means 2 f, the rebuilt second
// moment r x c f, update.mul_(grad) 3 f: 21 f = 84 B. 1-D: exp_avg_sq's mul_
// and add_ 5 f, rsqrt and mul_(grad) 5 f: 25 f = 100 B. bf16 weights and
// gradients add the gradient's upcast (2 + 4), the weight's upcast (2 + 4) and
// its copy back (4 + 2): 18 B, so 102 and 118 B; a first moment (mul_, add_)
// 20 B more.
TEST(StepTime, AdafactorTraffic) {
  const StepTime bf16 = evaluate_paper(optimizer_scenario("bf16", "use = \"adafactor\"\n")).breakdown().time;
  ASSERT_EQ(bf16.status, TimeStatus::timed);
  // 6,738,149,376 x 102 + 266,240 x 118 = 687,291,236,352 + 31,416,320
  EXPECT_NEAR(bf16.memory_bytes, 687'322'652'672.0, 1);
  // fp32 weights and gradients: no casts, 84 and 100 B: 566,004,547,584 + 26,624,000
  const StepTime fp32 = evaluate_paper(optimizer_scenario("fp32", "use = \"adafactor\"\n")).breakdown().time;
  EXPECT_NEAR(fp32.memory_bytes, 566'031'171'584.0, 1);
  // beta1 keeps a first moment: 20 B more per parameter, 6,738,415,616 x 20 = 134,768,312,320
  const StepTime momentum =
      evaluate_paper(optimizer_scenario("bf16", "use = \"adafactor\"\nbeta1 = 0.9\n")).breakdown().time;
  EXPECT_NEAR(momentum.memory_bytes - bf16.memory_bytes, 134'768'312'320.0, 1);
  // The step's time is that traffic at the H100's 3,350 GB/s, once per step.
  EXPECT_NEAR(bf16.pass_seconds[MEMPLAN_PASS_OPTIMIZER - 1], 687'322'652'672.0 / 3350e9, 1e-9);
}

// bitsandbytes' blockwise 8-bit Adam (kOptimizerStatic8bit2StateBlockwise,
// csrc/kernels.cu @ 95f9af309d4d) reads the bf16 gradient (2 B), the weight
// (2), both 1-byte codes (2) and the block's two fp32 absmax (8 / 256), and
// writes the weight (2), both codes (2) and both absmax (8 / 256): 10.0625 B
// per parameter, against fp32 AdamW's 2 + 16 + 4 = 22 B.
// Every tensor is whole blocks, so the states are 2.03125 B per parameter
// (13,687,406,720 B, the plugin's README) and the step 6 x 6,738,415,616 + 2 x
// 13,687,406,720 = 67,805,307,136 B = 6,738,415,616 x 10.0625.
TEST(StepTime, Adam8bitTraffic) {
  const StepTime e = evaluate_paper(optimizer_scenario("bf16", "use = \"adam-8bit\"\n")).breakdown().time;
  ASSERT_EQ(e.status, TimeStatus::timed);
  EXPECT_NEAR(e.memory_bytes, 6'738'415'616.0 * 6 + 2 * 13'687'406'720.0, 1);
  EXPECT_NEAR(e.memory_bytes / 6'738'415'616.0, 10.0625, 1e-12);
  // The paper's (and bitsandbytes <= 0.43's) block of 2048: 2 x 8 / 2048 B of absmax per parameter.
  const StepTime wide =
      evaluate_paper(optimizer_scenario("bf16", "use = \"adam-8bit\"\nblock_size = 2048\n")).breakdown().time;
  EXPECT_NEAR(wide.memory_bytes / 6'738'415'616.0, 10.0 + 16.0 / 2048, 1e-12);
}

// torchao's 4-bit Adam (adam-4bit) counted the same way: the bf16 gradient and
// weight (6 B) and both moments' packed codes and fp32 scales read and written
// once, 2 x (0.5 + 4 / 128) = 1.0625 B a parameter each way: 6 + 2 x 1.0625 =
// 8.125 B per parameter, 54,749,626,880 B for Llama-2-7B (the compiled step's
// fp32 moments are not in the record: plugins/optimizers/adam-4bit/README.md).
TEST(StepTime, Adam4bitTraffic) {
  const StepTime e = evaluate_paper(optimizer_scenario("bf16", "use = \"adam-4bit\"\n")).breakdown().time;
  ASSERT_EQ(e.status, TimeStatus::timed);
  EXPECT_NEAR(e.memory_bytes, 54'749'626'880.0, 1);
  EXPECT_NEAR(e.memory_bytes / 6'738'415'616.0, 8.125, 1e-12);
}

}  // namespace
}  // namespace memplan::testing
