// The serving default of the inference plugin's prefill_chunk (issue 13 item
// 6): a serving scenario without [framework] runs under the vllm profile
// (default_for = "infer"), which sets prefill_chunk to vLLM's
// max_num_batched_tokens for the OpenAI-compatible server (`vllm serve`), by
// version and GPU. Sources (plugins/frameworks/vllm/README.md):
// vllm-project/vllm vllm/engine/arg_utils.py
//   @ 001999d2 (_override_v1_engine_args, PR #12369): 8192 if the device name
//     contains "h100" or "h200", else 2048 (the profile's 0.8 block);
//   @ 99d7eb5d (_set_default_args, PRs #17073 and #17885, v0.9.0): 8192 if
//     device_memory >= 70 GiB and "a100" is not in the device name, else 2048.
// The plugin's own default (the paper view, and PyTorch eager serving) stays
// whole prompts: micro_batch x seq_len tokens in one pass.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>

#include "inference_scenarios.hpp"
#include "memplan/core/framework.hpp"

namespace memplan::testing {
namespace {

// The prefill_chunk the inference component runs with (the scenario's or a
// profile's), or -1 when none is set (whole prompts).
int64_t prefill_chunk(const Evaluation& e) {
  for (const ComponentSpec& component : e.scenario().components)
    if (component.use == "inference")
      for (const OptionValue& option : component.options)
        if (option.key == "prefill_chunk") return option.integer;
  return -1;
}

std::string llama8b(const std::string& framework, const std::string& hardware, const std::string& options = "") {
  return "name = \"p\"\nmode = \"infer\"\n" + framework + "[model]\npreset = \"llama-3.1-8b\"\n[batch]\n"
         "micro_batch = 4\nseq_len = 8192\n[precision]\nuse = \"bf16\"\n[activations]\nuse = \"inference\"\n" +
         options + hardware;
}

uint64_t layer_bytes(const Evaluation& e) { return e.item_bytes("activations.layer", MEMPLAN_ROLE_ACTIVATIONS); }

std::string gpu(const std::string& name) { return "[hardware]\ngpu = \"" + name + "\"\n"; }
std::string vllm(const std::string& version) {
  return "[framework]\nuse = \"vllm\"\n" + (version.empty() ? "" : "version = \"" + version + "\"\n");
}

TEST(PrefillDefault, ServingWithoutFrameworkIsVllm) {
  Evaluation e = evaluate(llama8b("", gpu("l40s-48gb")));
  EXPECT_EQ(e.scenario().framework.name, "vllm");
  EXPECT_FALSE(e.scenario().framework.from_scenario);
  EXPECT_EQ(prefill_chunk(e), 2048);
  // Training keeps the pytorch profile.
  Evaluation train = evaluate("name = \"t\"\nmode = \"train\"\n[model]\npreset = \"llama-2-7b\"\n[precision]\n"
                              "use = \"bf16\"\n[optimizer]\nuse = \"sgd\"\n[activations]\nuse = \"none\"\n");
  EXPECT_EQ(train.scenario().framework.name, "pytorch");
}

// vLLM >= 0.9 (the profile's latest): 8192 on >= 70 GiB GPUs that are not
// A100s, 2048 on the rest; a scenario that gives memory_gib names no GPU
// (vLLM's device name test then never excludes).
TEST(PrefillDefault, LatestByGpuMemoryAndName) {
  struct Case {
    std::string hardware;
    int64_t chunk;
  };
  for (const Case& c : {Case{gpu("h100-sxm-80gb"), 8192}, Case{gpu("h100-pcie-80gb"), 8192},
                        Case{gpu("h200-sxm-141gb"), 8192}, Case{gpu("b200-180gb"), 8192},
                        Case{gpu("h20-96gb"), 8192}, Case{gpu("mi300x-192gb"), 8192},
                        Case{gpu("a100-sxm-80gb"), 2048},  // excluded by name (PR #17885)
                        Case{gpu("a100-sxm-40gb"), 2048}, Case{gpu("l40s-48gb"), 2048},
                        Case{gpu("rtx-4090-24gb"), 2048}, Case{"[hardware]\nmemory_gib = 80\n", 8192},
                        Case{"[hardware]\nmemory_gib = 69\n", 2048}, Case{"", 2048}}) {
    EXPECT_EQ(prefill_chunk(evaluate(llama8b("", c.hardware))), c.chunk) << c.hardware;
    EXPECT_EQ(prefill_chunk(evaluate(llama8b(vllm("0.9"), c.hardware))), c.chunk) << c.hardware;
    EXPECT_EQ(prefill_chunk(evaluate(llama8b(vllm("0.11.1"), c.hardware))), c.chunk) << c.hardware;
  }
}

// vLLM 0.8: 8192 only on GPUs named H100 or H200 (A100 80GB, B200, H20, MI300X: 2048).
TEST(PrefillDefault, Version08ByGpuName) {
  struct Case {
    std::string hardware;
    int64_t chunk;
  };
  for (const Case& c : {Case{gpu("h100-sxm-80gb"), 8192}, Case{gpu("h200-sxm-141gb"), 8192},
                        Case{gpu("b200-180gb"), 2048}, Case{gpu("h20-96gb"), 2048},
                        Case{gpu("mi300x-192gb"), 2048}, Case{gpu("a100-sxm-80gb"), 2048},
                        Case{gpu("l40s-48gb"), 2048}, Case{"[hardware]\nmemory_gib = 80\n", 2048}})
    EXPECT_EQ(prefill_chunk(evaluate(llama8b(vllm("0.8.4"), c.hardware))), c.chunk) << c.hardware;
}

// The scenario's own prefill_chunk wins over the profile's; whole-prompt
// prefill is prefill_chunk = micro_batch x seq_len (4 x 8192 here), or the
// pytorch or paper profile, which set none. The layer transient of Llama 3.1
// 8B in bf16 over c tokens is its gated MLP, 2 x c x (2 x 4096 + 3 x 14336)
// bytes = 102,400 c: 3,355,443,200 B for the whole 32,768 tokens, 209,715,200
// for vLLM's 2048 (tests/inference/forward_transient_test.cpp has the formula).
TEST(PrefillDefault, ScenarioWinsAndWholePromptsStayExpressible) {
  const uint64_t whole = 102'400ull * 32'768, chunked = 102'400ull * 2048;
  Evaluation own = evaluate(llama8b("", gpu("h100-sxm-80gb"), "prefill_chunk = 32768\n"));
  EXPECT_EQ(prefill_chunk(own), 32768);
  EXPECT_EQ(layer_bytes(own), whole);
  EXPECT_EQ(layer_bytes(evaluate(llama8b("", gpu("l40s-48gb")))), chunked);
  for (const std::string framework : {"[framework]\nuse = \"pytorch\"\n", "[framework]\nuse = \"paper\"\n"}) {
    Evaluation e = evaluate(llama8b(framework, gpu("l40s-48gb")));
    EXPECT_EQ(prefill_chunk(e), -1) << framework;
    EXPECT_EQ(layer_bytes(e), whole) << framework;
  }
}

// The example: `memplan estimate llama-3.1-8b --task serve --gpu
// l40s-48gb --seq-len 32768 --micro-batch max --kv-dtype fp8`. By hand, per
// sequence the fp8 KV cache is 2 x 32 layers x 8 kv heads x 128 x 1 B =
// 65,536 B a token, 2 GiB at 32,768 tokens. With vLLM's 2048-token chunks and
// its start-up sampler run over max_num_seqs = 256 requests on an L40S (48 GB,
// of which CUDA reports 44.42 GiB = 47,695,611,822 B, the catalog's
// cuda_total_gib; sampler_test.cpp; the Triton top-k/top-p path of vLLM
// 0.17 on, the profile's newest), at 15 sequences: weights 16,060,522,496 + KV
// 15 x 2 GiB = 32,212,254,720 + the forward phase's transients, the larger of
// the layer 102,400 x 2048 = 209,715,200 + logits 4 x 15 x 128,256 = 7,695,360
// and the sampler run 2 x 4096 x (2048 + 512) + 14 x 256 x 128,256 =
// 480,641,024 (items: layer, logits and the sampler's excess 263,230,464) +
// the serving CUDA context 719 MiB = 753,926,144 (cuda-context's default when
// serving, measured after model.generate on an H100) + one cuBLAS workspace
// 8,519,680 (PyTorch's size below compute capability 9; the L40S is sm_89) +
// the allocator's margin 0.1 x the transients 48,064,103 and its
// 2 MiB rounding of the sampler item 1,010,688 + vLLM's rotary table (the
// inference plugin's rope_cache, rope_cache_test.cpp) 131,072 x 128 x 2 =
// 33,554,432 = 49,598,493,287 B, more than the 47,695,611,822 B CUDA gives; one
// sequence fewer takes 2 GiB and 513,024 B of logits and margin off:
// 47,450,496,615 B at 14 sequences, bound by the KV cache (15 on a GPU of a
// whole 48 GiB, as before the catalog gave CUDA's total).
// Prefilling the whole prompts instead (the earlier default, now [framework]
// use = "pytorch") one pass holds b x 32,768 tokens, 102,400 x 163,840 =
// 16,777,216,000 B of transient at b = 5 and 20,132,659,200 at b = 6, where
// weights + 12 GiB of KV + transients + 10 % + 0.74 GiB exceed 48 GiB: 5.
TEST(PrefillDefault, L40sServes14SequencesAt32k) {
  const auto solved = [](const std::string& extra) {
    const CommandResult result = run_cli("estimate llama-3.1-8b --task serve --gpu l40s-48gb --seq-len 32768 "
                                         "--micro-batch max --kv-dtype fp8 --format json" + extra);
    EXPECT_EQ(result.exit_code, 0) << result.err;
    return nlohmann::json::parse(result.out).at("solved");
  };
  const nlohmann::json vllm_default = solved("");
  EXPECT_EQ(vllm_default.at("value"), 14);
  EXPECT_EQ(vllm_default.at("binding"), "kv_cache");
  EXPECT_EQ(vllm_default.at("peak"), 47'450'496'615ull);
  const nlohmann::json whole = solved(" --framework pytorch");
  EXPECT_EQ(whole.at("value"), 5);
  EXPECT_EQ(whole.at("binding"), "activations");
}

// [[since]] GPU conditions are type-checked where they are written.
TEST(PrefillDefault, GpuConditionsAreChecked) {
  TempDir dir;
  dir.write("gpus.toml", "");
  std::filesystem::create_directories(dir.path() + "/frameworks");
  const std::string file = dir.write("frameworks/team.toml",
                                     "[framework]\nname = \"team\"\nsummary = \"ours\"\n[[since]]\nversion = \"1.0\"\n"
                                     "gpu_name_excludes = \"a100\"\n");
  try {
    (void)Catalog::load(dir.path());
    FAIL() << "a string for gpu_name_excludes was accepted";
  } catch (const Error& error) {
    EXPECT_EQ(std::string(error.what()), file + ":6:21: error: in [[since]], 'gpu_name_excludes' must be an array of "
                                                "GPU name parts, e.g. gpu_name_excludes = [\"a100\"]");
  }
  dir.write("frameworks/team.toml", "[framework]\nname = \"team\"\nsummary = \"ours\"\ndefault_for = \"serve\"\n");
  try {
    (void)Catalog::load(dir.path());
    FAIL() << "default_for = \"serve\" was accepted";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find(file + ":4:15: error: in [framework], 'default_for' must be"),
              std::string::npos)
        << error.what();
  }
  FrameworkVersionDefaults block;
  block.gpu_memory_gib_at_least = 70;
  block.gpu_name_excludes = {"a100"};
  EXPECT_TRUE(block.applies_to("h100-sxm-80gb nvidia h100 sxm5 80gb", 80ull << 30));
  EXPECT_FALSE(block.applies_to("a100-sxm-80gb nvidia a100 sxm4 80gb", 80ull << 30));
  EXPECT_FALSE(block.applies_to("l40s-48gb nvidia l40s 48gb", 48ull << 30));
  EXPECT_TRUE(block.applies_to("", 70ull << 30));
}

// Compute-capability bounds read the catalog's architecture ("sm_80" is 8.0,
// "sm_86" 8.6, "sm_100" 10.0); a GPU whose capability is not known (AMD's
// "gfx942", a scenario's own memory_gib) meets no bound.
TEST(PrefillDefault, ComputeCapabilityConditions) {
  FrameworkVersionDefaults below_hopper;
  below_hopper.gpu_compute_capability_below = 9.0;
  EXPECT_TRUE(below_hopper.applies_to("a100", 80ull << 30, "sm_80"));
  EXPECT_TRUE(below_hopper.applies_to("l40s", 48ull << 30, "sm_89"));
  EXPECT_FALSE(below_hopper.applies_to("h100", 80ull << 30, "sm_90"));
  EXPECT_FALSE(below_hopper.applies_to("b200", 180ull << 30, "sm_100"));
  EXPECT_FALSE(below_hopper.applies_to("mi300x", 192ull << 30, "gfx942"));
  EXPECT_FALSE(below_hopper.applies_to("", 80ull << 30, ""));
  FrameworkVersionDefaults ampere;
  ampere.gpu_compute_capability_at_least = 8.6;
  ampere.gpu_compute_capability_below = 9.0;
  EXPECT_FALSE(ampere.applies_to("a100", 80ull << 30, "sm_80"));
  EXPECT_TRUE(ampere.applies_to("rtx 3090", 24ull << 30, "sm_86"));
  FrameworkVersionDefaults blackwell;
  blackwell.gpu_compute_capability_at_least = 10.0;
  EXPECT_TRUE(blackwell.applies_to("b200", 180ull << 30, "sm_100"));
  EXPECT_TRUE(blackwell.applies_to("rtx 5090", 32ull << 30, "sm_120"));
  EXPECT_FALSE(blackwell.applies_to("h100", 80ull << 30, "sm_90"));

  TempDir dir;
  dir.write("gpus.toml", "");
  std::filesystem::create_directories(dir.path() + "/frameworks");
  const auto rejected = [&](const std::string& conditions) {
    const std::string file = dir.write("frameworks/team.toml", "[framework]\nname = \"team\"\nsummary = \"ours\"\n"
                                                                "[[since]]\nversion = \"1.0\"\n" + conditions);
    try {
      (void)Catalog::load(dir.path());
    } catch (const Error& error) {
      return std::string(error.what()).substr(file.size());
    }
    return std::string("accepted");
  };
  EXPECT_EQ(rejected("gpu_compute_capability_below = 8.65\n"),
            ":6:32: error: in [[since]], 'gpu_compute_capability_below' must be an NVIDIA compute capability, "
            "major.minor (8.0 for an A100, 9.0 for an H100)");
  EXPECT_EQ(rejected("gpu_compute_capability_at_least = 9.0\ngpu_compute_capability_below = 8.0\n"),
            ":7:32: error: in [[since]], 'gpu_compute_capability_below' is not above "
            "gpu_compute_capability_at_least: no GPU would meet both; write the range low to high (e.g. at_least = "
            "8.0, below = 9.0)");
  EXPECT_EQ(rejected("gpu_compute_capability_below = 9.0\n"), "accepted");
  EXPECT_EQ(rejected("with_strategy = \"fsdp\"\n"),
            ":6:17: error: in [[since]], 'with_strategy' must be an array of strategy plugin names, e.g. "
            "with_strategy = [\"<a [[strategy]] use>\"]");
}

// with_strategy: the block holds only in a scenario whose [[strategy]] tables use one of the plugins named.
TEST(PrefillDefault, StrategyConditions) {
  FrameworkVersionDefaults sharded;
  sharded.with_strategy = {"fsdp", "zero"};
  EXPECT_TRUE(sharded.applies_to(ProfileFacts{"", 0, "", {"data-parallel", "fsdp"}}));
  EXPECT_TRUE(sharded.applies_to(ProfileFacts{"", 0, "", {"zero"}}));
  EXPECT_FALSE(sharded.applies_to(ProfileFacts{"", 0, "", {"data-parallel"}}));
  EXPECT_FALSE(sharded.applies_to(ProfileFacts{}));
  EXPECT_TRUE(FrameworkVersionDefaults{}.applies_to(ProfileFacts{}));
}

}  // namespace
}  // namespace memplan::testing
