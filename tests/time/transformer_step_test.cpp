// 'transformer-step': a step's FLOPs per GPU against the closed forms of the
// papers and Megatron-LM, each derived beside its test.
#include <gtest/gtest.h>

#include <string>

#include "test_support.hpp"

namespace memplan::testing {
namespace {

// Korthikanti et al. 2022 (arXiv 2205.05198), section 6 / appendix: model
// FLOPs per iteration = 72 B s l h^2 (1 + s / (6h) + V / (12 h l)) (the
// attention core over all s^2 pairs). Their 22B model (Table 3: l 48, h 6144,
// 64 heads, V 51200) at B 4, s 2048 on 8 GPUs (TP 8):
//   72 x 4 x 2048 x 48 x 6144^2 = 1.068771e15
//   1 + 2048 / 36864 + 51200 / (12 x 6144 x 48) = 1 + 0.0555556 + 0.0144676
//   = 1.1436324e15 per iteration, 1.4295405e14 per GPU.
// memplan counts the biases too (13 h per layer of 12 h^2: 0.0002 %).
std::string korthikanti_22b(const std::string& flops_options) {
  return "name = \"k22\"\nmode = \"train\"\n[model]\npreset = \"megatron-22b\"\n[batch]\nmicro_batch = 4\n"
         "seq_len = 2048\n[precision]\nuse = \"mixed-fp16\"\n[optimizer]\nuse = \"adam\"\n[activations]\n"
         "use = \"megatron\"\n[[strategy]]\nuse = \"tensor-parallel\"\nsize = 8\nsequence_parallel = true\n"
         "[[strategy]]\nuse = \"recompute\"\npolicy = \"selective\"\n[[strategy]]\nuse = \"transformer-step\"\n" +
         flops_options + "[hardware]\ngpu = \"a100-sxm-80gb\"\ncount = 8\n";
}

TEST(TransformerStep, KorthikantiModelFlops22B) {
  Evaluation e = evaluate_paper(korthikanti_22b("causal = false\nefficiency = 0.5\n"));
  const StepTime& time = e.breakdown().time;
  ASSERT_EQ(time.status, TimeStatus::timed);
  EXPECT_NEAR(time.model_flops / 1.4295405e14, 1.0, 1e-4);
  // Selective recomputation redoes the attention core's forward, 4 B s^2 h l / 8 per GPU:
  // 4 x 4 x 2048^2 x 6144 x 48 / 8 = 2.4739e12 hardware FLOPs beyond the model's.
  EXPECT_NEAR((time.hardware_flops - time.model_flops) / 2.4739200e12, 1.0, 1e-4);
  // The optimizer step's memory traffic (optimizer_traffic.hpp): mixed-fp16 Adam moves 28 B per parameter
  // (fp16 gradient 2, two fp32 states read and written 16, fp32 master read and written 8, fp16 weight 2).
  // Parameters per GPU under TP 8: per layer (12 h^2 + 9 h) / 8 split (projections and their biases) +
  // 4 h replicated (two LayerNorms), h = 6144: 56,654,592 x 48 = 2,719,420,416; the vocabulary-parallel
  // embedding 51,200 x 6144 / 8 = 39,321,600, the positions 2048 x 6144 = 12,582,912 and the final
  // LayerNorm 12,288 whole: 2,771,337,216 parameters, x 28 = 77,597,442,048 B.
  EXPECT_NEAR(time.memory_bytes, 77'597'442'048.0, 1);
  // At efficiency 0.5 of the A100's 312 TFLOP/s (bf16: 2-byte activations; fp16's peak is the same), and
  // the traffic at its 2,039 GB/s: compute seconds = hardware FLOPs / 156e12 + memory bytes / 2039e9.
  EXPECT_NEAR(time.compute_seconds, time.hardware_flops / 156e12 + time.memory_bytes / 2039e9, 1e-9);
  // Tensor parallelism: 2 all-reduces per layer each way of 4 x 2048 x 6144 x 2 bytes over the 8 GPUs of a
  // node: 2 x 48 x 100,663,296 x 2 x 7/8 x 2 passes = 33,822,867,456 bytes at NVLink's 300 GB/s per direction.
  const double tensor = 2.0 * 48 * (4 * 2048.0 * 6144 * 2) * 2 * 7 / 8 * 2;
  EXPECT_NEAR(time.communication_bytes / tensor, 1.0, 1e-12);
  EXPECT_NEAR(time.seconds, time.compute_seconds + tensor / 300e9, 1e-9);
  // MFU and HFU against the whole step.
  EXPECT_NEAR(time.hfu, time.hardware_flops / (time.seconds * 312e12), 1e-12);
  EXPECT_NEAR(time.mfu, time.model_flops / (time.seconds * 312e12), 1e-12);
  // One data-parallel replica: 4 x 2048 tokens per step.
  EXPECT_EQ(time.tokens_per_step, 8192);
  EXPECT_NEAR(time.tokens_per_second, 8192 / time.seconds, 1e-6);
}

// tensor_comm_overlap (Megatron-Core's tp_comm_overlap, model_parallel_config.py
// @ d98e8a64dd, off by default): that fraction of the tensor-parallel
// collectives may hide behind the pass's compute, as far as it lasts. The
// 22B's TP traffic, 33,822,867,456 B at 300 GB/s = 0.1127 s per step, is far
// below its compute (about 5.5 s), so all of what may hide does.
TEST(TransformerStep, TensorCommOverlap) {
  const StepTime off = evaluate_paper(korthikanti_22b("causal = false\nefficiency = 0.5\n")).breakdown().time;
  const StepTime half =
      evaluate_paper(korthikanti_22b("causal = false\nefficiency = 0.5\ntensor_comm_overlap = 0.5\n")).breakdown().time;
  const StepTime all =
      evaluate_paper(korthikanti_22b("causal = false\nefficiency = 0.5\ntensor_comm_overlap = 1\n")).breakdown().time;
  const double tensor_seconds = 2.0 * 48 * (4 * 2048.0 * 6144 * 2) * 2 * 7 / 8 * 2 / 300e9;
  EXPECT_NEAR(off.exposed_seconds, tensor_seconds, 1e-9);
  EXPECT_NEAR(half.exposed_seconds, tensor_seconds / 2, 1e-9);
  EXPECT_NEAR(all.exposed_seconds, 0, 1e-9);
  EXPECT_NEAR(all.communication_seconds, tensor_seconds, 1e-9);  // still moved, now hidden
  EXPECT_NEAR(off.seconds - all.seconds, tensor_seconds, 1e-9);
}

// The causal mask keeps s (s + 1) / 2 of the s^2 pairs: the core's model FLOPs
// (12 B s^2 h l / 8 = 7.42176e12 over all pairs) scale by (s + 1) / (2 s).
TEST(TransformerStep, CausalCoreCountsHalfThePairs) {
  const StepTime full = evaluate_paper(korthikanti_22b("causal = false\nefficiency = 0.5\n")).breakdown().time;
  const StepTime causal = evaluate_paper(korthikanti_22b("efficiency = 0.5\n")).breakdown().time;
  const double core = 12.0 * 4 * 2048.0 * 2048 * 6144 * 48 / 8;
  EXPECT_NEAR((full.model_flops - causal.model_flops) / (core * (1 - 2049.0 / 4096)), 1.0, 1e-9);
}

// Without an efficiency the FLOPs are reported and the time is not, with the reason.
TEST(TransformerStep, NoEfficiencyNoTime) {
  Evaluation e = evaluate_paper(korthikanti_22b("causal = false\n"));
  const StepTime& time = e.breakdown().time;
  EXPECT_EQ(time.status, TimeStatus::no_efficiency);
  EXPECT_NEAR(time.model_flops / 1.4295405e14, 1.0, 1e-4);
  EXPECT_EQ(time.seconds, 0);
}

// LoRA's reduced backward: a frozen weight's backward computes input gradients only
// (once its forward), a trainable one's input and weight gradients (twice). A 1e9-element
// frozen dense model would give 6 x 1e9 x tokens with every weight training; frozen, 4 x.
// Llama-2-7B (6.74e9 parameters; embedding lookups count nothing, the LM head 32000 x 4096
// multiplies) at 1 x 512 tokens, all frozen but rank-8 adapters on q and v:
//   matmul weights: 32 x (4 x 4096^2 + 3 x 4096 x 11008) + 32000 x 4096 = 6.4768e9
//   adapters: 32 x 2 x (8 x 4096 + 4096 x 8) = 4.194304e6
//   forward 2 x (6.4768e9 + 4.19e6) x 512; backward 2 x 6.4768e9 x 512 + 4 x 4.19e6 x 512.
TEST(TransformerStep, LoraBackwardSkipsFrozenWeightGradients) {
  Evaluation e = evaluate_paper(
      "name = \"lora\"\nmode = \"train\"\n[model]\npreset = \"llama-2-7b\"\n[batch]\nmicro_batch = 1\n"
      "seq_len = 512\n[precision]\nuse = \"bf16\"\n[optimizer]\nuse = \"adamw\"\n[activations]\nuse = \"megatron\"\n"
      "[[strategy]]\nuse = \"lora\"\nrank = 8\ntargets = \"q,v\"\n[[strategy]]\nuse = \"transformer-step\"\n"
      "efficiency = 0.4\n[hardware]\ngpu = \"h100-sxm-80gb\"\n");
  const double dense = 32 * (4 * 4096.0 * 4096 + 3 * 4096.0 * 11008) + 32000.0 * 4096;
  const double adapters = 32 * 2 * (8 * 4096.0 + 4096.0 * 8);
  // Attention core, causal, 32 heads x 128: 4 x 4096 x 512 x 513 / 2 per layer, x 32 layers; backward twice.
  const double core = 4 * 4096.0 * 512 * 513 / 2 * 32;
  const double expected = 2 * (dense + adapters) * 512 + core + 2 * dense * 512 + 4 * adapters * 512 + 2 * core;
  EXPECT_NEAR(e.breakdown().time.model_flops / expected, 1.0, 1e-9);
}

// The option is on line 23 (the 22 lines of korthikanti_22b before it).
TEST(TransformerStep, Errors) {
  const std::string library = " (plugin library " + plugin_dir() + "/memplan-transformer-step.so)";
  EXPECT_EQ(error_of(korthikanti_22b("efficiency = 1.5\n"), "t.toml"),
            "t.toml:23:14: error: in [[strategy]] #3, strategy plugin 'transformer-step', option 'efficiency': must "
            "be a fraction of the peak in (0, 1], got 1.5" + library);
  EXPECT_EQ(error_of(korthikanti_22b("math = \"int8\"\n"), "t.toml"),
            "t.toml:23:8: error: in [[strategy]] #3, strategy plugin 'transformer-step', option 'math': must be "
            "\"fp32\", \"tf32\", \"bf16\", \"fp16\" or \"fp8\", not \"int8\"" + library);
}

}  // namespace
}  // namespace memplan::testing
