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
  time_step({record(MEMPLAN_WORK_MEMORY, MEMPLAN_PASS_OPTIMIZER, 0, false, 1e9, 0.5)}, gpu, 1, 1, time);
  EXPECT_EQ(time.status, TimeStatus::no_bandwidth);
  time_step({record(MEMPLAN_WORK_COMPUTE, MEMPLAN_PASS_FORWARD, MEMPLAN_MATH_BF16, true, 1e12, 0)}, gpu, 1, 1, time);
  EXPECT_EQ(time.status, TimeStatus::no_efficiency);
  time_step({}, gpu, 1, 1, time);
  EXPECT_EQ(time.status, TimeStatus::no_work);
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
    if (gpu->performance.any()) EXPECT_FALSE(gpu->performance.source.empty()) << name;
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

}  // namespace
}  // namespace memplan::testing
