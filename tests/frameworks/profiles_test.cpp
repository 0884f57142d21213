// Framework profiles ([framework], catalog frameworks/*.toml) and the three
// quantities every estimate reports: allocated, reserved, device.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "../../plugins/precision/quantized/nf4_build_replay.hpp"
#include "memplan/core/estimator.hpp"
#include "test_support.hpp"

namespace memplan::testing {
namespace {

constexpr uint64_t kMiB = 1024 * 1024;

// Llama-2-7B in bf16 with SGD on one GPU, no activations: weights W =
// 6,738,415,616 x 2 = 13,476,831,232 bytes and as many gradients.
std::string llama7b_sgd(const std::string& framework, const std::string& hardware = "") {
  return "name = \"p\"\nmode = \"train\"\n" + framework +
         "[model]\npreset = \"llama-2-7b\"\n[precision]\nuse = \"bf16\"\n[optimizer]\nuse = \"sgd\"\n"
         "[activations]\nuse = \"none\"\n" + hardware;
}

constexpr uint64_t kWeights = 13'476'831'232;

// The message Catalog::load throws for the catalog in `data_dir`, or "(loaded)".
std::string catalog_load_error(const std::string& data_dir) {
  try {
    (void)Catalog::load(data_dir);
  } catch (const Error& error) {
    return error.what();
  }
  return "(loaded)";
}

// Without [framework] the default profile (pytorch) adds the runtime:
//   allocated = weights + gradients + two 32 MiB cuBLAS workspaces (tensors of
//               the caching allocator: the forward's thread and the autograd
//               engine's; no GPU named, so Hopper's size) = 27,020,771,328 at
//               the optimizer step
//               (and, first, at the end of backward);
//   reserved  = allocated + the allocator's reserve: its fragmentation margin,
//               0.1 x the gradients the step allocates (rounding is 0: every
//               tensor is a multiple of 2 MiB);
//   device    = reserved + the 767 MiB CUDA context, outside the allocator.
TEST(Profiles, DefaultIsTheDeviceView) {
  Evaluation e = evaluate(llama7b_sgd(""));
  EXPECT_EQ(e.estimator().scenario().framework.name, "pytorch");
  EXPECT_FALSE(e.estimator().scenario().framework.from_scenario);
  const Breakdown& b = e.breakdown();
  EXPECT_EQ(b.quantities[kAllocated].peak, 2 * kWeights + 64 * kMiB);
  EXPECT_NEAR(static_cast<double>(b.quantities[kReserved].peak - b.quantities[kAllocated].peak), 0.1 * kWeights, 64);
  EXPECT_EQ(b.quantities[kDevice].peak - b.quantities[kReserved].peak, 767 * kMiB);
  EXPECT_EQ(b.fit_quantity, kDevice);
  EXPECT_EQ(b.peak, b.quantities[kDevice].peak);
}

// The paper view adds nothing of the runtime: the three quantities are the
// model's tensors, 2 x W.
TEST(Profiles, PaperViewLeavesTheRuntimeOut) {
  Evaluation e = evaluate(llama7b_sgd("[framework]\nuse = \"paper\"\n"));
  for (int quantity = 0; quantity < kQuantityCount; ++quantity)
    EXPECT_EQ(e.breakdown().quantities[static_cast<size_t>(quantity)].peak, 2 * kWeights);
  EXPECT_EQ(e.component(MEMPLAN_ROLE_OVERHEAD), 0u);
}

// [hardware] fit_quantity chooses what `fits` compares: on 25 GiB the model's
// 2 W = 25.1 GiB does not fit whatever is measured.
TEST(Profiles, FitQuantityChoosesThePeakFitsUses) {
  Evaluation e = evaluate(llama7b_sgd("", "[hardware]\nmemory_gib = 26\nfit_quantity = \"allocated\"\n"));
  EXPECT_EQ(e.breakdown().fit_quantity, kAllocated);
  EXPECT_EQ(e.breakdown().peak, e.breakdown().quantities[kAllocated].peak);
  EXPECT_TRUE(e.estimator().fits());  // 25.13 GiB allocated in 26 GiB
  Evaluation device = evaluate(llama7b_sgd("", "[hardware]\nmemory_gib = 26\n"));
  EXPECT_FALSE(device.estimator().fits());  // + reserve 1.26 GiB + context 0.5 GiB
  EXPECT_EQ(error_of(llama7b_sgd("", "[hardware]\nmemory_gib = 26\nfit_quantity = \"smi\"\n"), "f.toml"),
            "f.toml:13:16: error: in [hardware], 'fit_quantity' must be \"allocated\", \"reserved\" or \"device\", "
            "not \"smi\"");
}

// A profile's option defaults apply to the plugins the scenario uses, and the
// scenario's own keys win: Megatron-LM's fp32 gradients live from start-up
// (4 bytes x 6,738,415,616 = 26,953,662,464, already at init).
TEST(Profiles, DefaultsApplyAndTheScenarioWins) {
  const std::string megatron = "name = \"m\"\nmode = \"train\"\n[framework]\nuse = \"megatron-lm\"\n[model]\n"
                               "preset = \"llama-2-7b\"\n[precision]\nuse = \"mixed-bf16\"\n";
  const std::string rest = "[optimizer]\nuse = \"adam\"\n[activations]\nuse = \"none\"\n";
  Evaluation e = evaluate(megatron + rest);
  // The fp32 buffer, and the embedding's and the untied LM head's dense bf16 gradients before the hook adds
  // them to the buffer, 32,000 x 4,096 x 2 = 262,144,000 bytes each (at backward's end and start).
  EXPECT_EQ(e.component(MEMPLAN_ROLE_GRADIENTS), 2 * kWeights + 2 * 262'144'000u);
  const Breakdown& b = e.breakdown();
  // init: weights 2 + gradients 4 + master 4 + Adam 8 bytes per parameter, the two cuBLAS workspaces and
  // Transformer Engine's own, 32 MiB + 1 KiB (the profile's cuda-context te_workspaces = 1 from core_r0.6.0).
  EXPECT_EQ(b.quantities[kAllocated].timeline[kInit], 9 * kWeights + 64 * kMiB + 33'555'456u);
  Evaluation own = evaluate(megatron + "gradients = \"bf16\"\ngradient_buffer = \"backward\"\n" + rest);
  EXPECT_EQ(own.component(MEMPLAN_ROLE_GRADIENTS), kWeights);
  EXPECT_EQ(own.breakdown().quantities[kAllocated].timeline[kInit], 7 * kWeights + 64 * kMiB + 33'555'456u);
}

// exclude leaves out a runtime component the profile brings; it must name one.
TEST(Profiles, ExcludeAndItsErrors) {
  Evaluation e = evaluate(llama7b_sgd("[framework]\nuse = \"pytorch\"\nexclude = [\"allocator\"]\n"));
  EXPECT_EQ(e.breakdown().quantities[kReserved].peak, e.breakdown().quantities[kAllocated].peak);
  EXPECT_EQ(error_of(llama7b_sgd("[framework]\nuse = \"pytorch\"\nexclude = [\"allocater\"]\n"), "x.toml"),
            "x.toml:5:12: error: in [framework], 'exclude' names 'allocater', which framework 'pytorch' does not "
            "bring. Did you mean 'allocator'? It brings: cuda-context, allocator, comm-buffers.");
}

TEST(Profiles, UnknownFrameworkIsLocatedWithTheKnownOnes) {
  const std::string error = error_of(llama7b_sgd("[framework]\nuse = \"megatron-lmm\"\n"), "u.toml");
  EXPECT_EQ(error.rfind("u.toml:4:7: error: in [framework], 'use' names no framework profile in the catalog (", 0), 0u)
      << error;
  EXPECT_NE(error.find("Did you mean 'megatron-lm' or 'megatron-core'?"), std::string::npos) << error;
  EXPECT_NE(error.find("Known profiles: deepspeed, fsdp-qlora, hf-transformers, megatron-core, megatron-lm, paper,"),
            std::string::npos)
      << error;
}

// A profile answers to its aliases too ([framework] aliases in its file), in
// any case and with '_' for '-': "megatron" is Megatron-LM, "Megatron_Core" and
// "mcore" the Megatron-Core models (megatron-core extends megatron-lm).
TEST(Profiles, AliasesFindTheProfile) {
  for (const std::string name : {"megatron", "megatron-lm"}) {
    const Scenario scenario = parse_scenario(llama7b_sgd("[framework]\nuse = \"" + name + "\"\n"), "a.toml", catalog());
    EXPECT_EQ(scenario.framework.name, "megatron-lm") << name;
  }
  for (const std::string name : {"Megatron_Core", "mcore", "nemo"}) {
    const Scenario scenario = parse_scenario(llama7b_sgd("[framework]\nuse = \"" + name + "\"\n"), "a.toml", catalog());
    EXPECT_EQ(scenario.framework.name, "megatron-core") << name;
  }
  EXPECT_EQ(parse_scenario(llama7b_sgd("[framework]\nuse = \"peft\"\n"), "a.toml", catalog()).framework.name,
            "hf-transformers");
  EXPECT_EQ(framework_key("FSDP_QLoRA"), "fsdp-qlora");
}

// An alias is written as it is matched, and names one profile across the catalog.
TEST(Profiles, AliasErrorsPointAtTheProfile) {
  TempDir dir;
  dir.write("gpus.toml", "");
  std::filesystem::create_directories(dir.path() + "/frameworks");
  const std::string team = dir.write("frameworks/team.toml",
                                     "[framework]\nname = \"team\"\nsummary = \"ours\"\naliases = [\"Our_Team\"]\n");
  auto load_error = [&] { return catalog_load_error(dir.path()); };
  EXPECT_EQ(load_error(), team + ":4:12: error: in [framework], alias 'Our_Team' must be written 'our-team' (lower "
                                 "case, '-' for '_'): names are matched that way");
  dir.write("frameworks/team.toml", "[framework]\nname = \"team\"\nsummary = \"ours\"\naliases = [\"lab\"]\n");
  const std::string lab = dir.write("frameworks/lab.toml", "[framework]\nname = \"lab\"\nsummary = \"theirs\"\n");
  EXPECT_EQ(load_error(), team + ":4:12: error: framework profile 'team' has the alias 'lab', which is the name of "
                                 "profile 'lab' (" + lab + "); a framework name means one profile across the catalog "
                                 "and every installed bundle (rule: framework names are unique). Remove or rename the "
                                 "alias in one of them");
  dir.write("frameworks/lab.toml", "[framework]\nname = \"lab\"\nsummary = \"theirs\"\naliases = [\"ours\"]\n");
  dir.write("frameworks/team.toml", "[framework]\nname = \"team\"\nsummary = \"ours\"\naliases = [\"ours\"]\n");
  EXPECT_NE(load_error().find("has the alias 'ours', which is an alias of profile"), std::string::npos) << load_error();
  dir.write("frameworks/team.toml", "[framework]\nname = \"team\"\nsummary = \"ours\"\naliases = [\"team\"]\n");
  EXPECT_EQ(load_error(), team + ":4:12: error: in [framework], alias 'team' is the profile's own name");
  // Two built-in names that differ only in case or '_' are one name.
  dir.write("frameworks/team.toml", "[framework]\nname = \"team\"\nsummary = \"ours\"\n");
  dir.write("frameworks/lab.toml", "[framework]\nname = \"lab\"\nsummary = \"theirs\"\n");
  const std::string upper = dir.write("frameworks/Team.toml", "[framework]\nname = \"Team\"\nsummary = \"x\"\n");
  EXPECT_NE(load_error().find("differ only in case or '_' for '-'"), std::string::npos) << load_error();
  std::filesystem::remove(upper);
  EXPECT_EQ(load_error(), "(loaded)");
}

// An installed bundle's profile named like a built-in alias keeps its name (it
// was a valid name before aliases): names are looked up before aliases.
TEST(Profiles, AnInstalledNameWinsOverABuiltInAlias) {
  CatalogSource bundle;
  bundle.origin = "bundle team 1.0.0";
  bundle.frameworks.push_back(CatalogFile{"/bundles/team/data/frameworks/peft.toml",
                                          "[framework]\nname = \"peft\"\nsummary = \"our PEFT recipe\"\n"});
  const Catalog with_bundle = Catalog::load(data_dir(), {bundle});
  ASSERT_NE(with_bundle.find_framework("peft"), nullptr);
  EXPECT_EQ(with_bundle.find_framework("peft")->origin, "bundle team 1.0.0");
  EXPECT_EQ(with_bundle.find_framework("accelerate")->name, "hf-transformers");  // the other aliases still answer
}

// A profile can build on another ([framework] extends, at extends_version):
// fsdp-qlora is train.py on transformers 4.38. A QLoRA-free LoRA job of
// Llama-3.2-1B under it estimates exactly what hf-transformers 4.38 does with
// the three things train.py sets written out (plugins/frameworks/fsdp-qlora/
// README.md: output_held until the step's end; LoRA rank 64, alpha 16, dropout 0.1 on q, k, v and
// the MLP; FSDP sync_module_states), and the runtime components come from the base.
TEST(Profiles, ExtendsTakesTheBaseBeneathItsOwn) {
  const std::string job =
      "[model]\npreset = \"llama-3.2-1b\"\n[batch]\nseq_len = 1024\n[precision]\nuse = \"bf16\"\n"
      "[optimizer]\nuse = \"adamw\"\n[activations]\nuse = \"megatron\"\n%ACT%[[strategy]]\nuse = \"lora\"\n%LORA%"
      "[[strategy]]\nuse = \"data-parallel\"\nsize = 2\n[[strategy]]\nuse = \"fsdp\"\n%FSDP%";
  auto fill = [&](std::string text, const std::string& act, const std::string& lora, const std::string& fsdp) {
    text.replace(text.find("%ACT%"), 5, act);
    text.replace(text.find("%LORA%"), 6, lora);
    text.replace(text.find("%FSDP%"), 6, fsdp);
    return text;
  };
  Evaluation script = evaluate("name = \"s\"\nmode = \"train\"\n[framework]\nuse = \"fsdp_qlora\"\n" +
                               fill(job, "", "", ""));
  Evaluation spelled = evaluate("name = \"s\"\nmode = \"train\"\n[framework]\nuse = \"hf-transformers\"\n"
                                "version = \"4.38\"\n" +
                                fill(job, "output_held = true\noutput_held_until = \"step-end\"\n", "rank = 64\nalpha = 16\ndropout = 0.1\n"
                                     "targets = \"q,k,v,mlp\"\n", "sync_module_states = true\n"));
  EXPECT_EQ(script.scenario().framework.name, "fsdp-qlora");
  for (int q : {kAllocated, kReserved, kDevice})
    EXPECT_EQ(script.breakdown().quantities[q].peak, spelled.breakdown().quantities[q].peak) << q;
  std::vector<std::string> brought;
  for (const ComponentSpec& component : script.scenario().components) brought.push_back(component.use);
  for (const std::string runtime : {"cuda-context", "allocator", "comm-buffers"})
    EXPECT_NE(std::find(brought.begin(), brought.end(), runtime), brought.end()) << runtime;
}

// extends: the base's defaults up to extends_version beneath the profile's;
// a GPU-conditional block of the base stays a condition; errors at the key.
TEST(Profiles, ExtendsRulesAndErrors) {
  TempDir dir;
  dir.write("gpus.toml", "");
  std::filesystem::create_directories(dir.path() + "/frameworks");
  dir.write("frameworks/base.toml",
            "[framework]\nname = \"base\"\nsummary = \"b\"\n[defaults.sgd]\nmomentum = 0.5\n"
            "[[since]]\nversion = \"2\"\n[since.defaults.sgd]\nmomentum = 0.7\n"
            "[[since]]\nversion = \"3\"\ngpu_name_contains = [\"h100\"]\n[since.defaults.sgd]\nmomentum = 0.8\n"
            "[[since]]\nversion = \"4\"\n[since.defaults.sgd]\nmomentum = 0.9\n");
  const std::string top = dir.write("frameworks/top.toml",
                                    "[framework]\nname = \"top\"\nsummary = \"t\"\nextends = \"base\"\n"
                                    "extends_version = \"3\"\n");
  const Catalog custom = Catalog::load(dir.path());
  const FrameworkProfile* profile = custom.find_framework("top");
  ASSERT_NE(profile, nullptr);
  auto momentum = [](const std::vector<std::pair<std::string, std::vector<OptionValue>>>& defaults) {
    for (const auto& [plugin, options] : defaults)
      if (plugin == "sgd")
        for (const OptionValue& option : options)
          if (option.key == "momentum") return option.floating;
    return -1.0;
  };
  EXPECT_EQ(momentum(profile->defaults_for("")), 0.7);               // version 2 of the base, not 4
  EXPECT_EQ(momentum(profile->defaults_for("", "nvidia h100", 0)), 0.8);  // the condition still holds
  auto load_error = [&] { return catalog_load_error(dir.path()); };
  // The profile's own defaults win over every inherited block, a GPU-conditional one included.
  dir.write("frameworks/top.toml", "[framework]\nname = \"top\"\nsummary = \"t\"\nextends = \"base\"\n"
                                   "extends_version = \"3\"\n[defaults.sgd]\nmomentum = 0.6\n");
  const Catalog own = Catalog::load(dir.path());
  EXPECT_EQ(momentum(own.find_framework("top")->defaults_for("", "nvidia h100", 0)), 0.6);
  EXPECT_EQ(momentum(own.find_framework("top")->defaults_for("")), 0.6);
  // A chain resolves from its root, and a base may be named by an alias.
  dir.write("frameworks/base.toml", "[framework]\nname = \"base\"\nsummary = \"b\"\naliases = [\"root\"]\n"
                                    "[defaults.sgd]\nmomentum = 0.5\n");
  dir.write("frameworks/mid.toml", "[framework]\nname = \"mid\"\nsummary = \"m\"\nextends = \"root\"\n");
  dir.write("frameworks/top.toml", "[framework]\nname = \"top\"\nsummary = \"t\"\nextends = \"mid\"\n");
  EXPECT_EQ(momentum(Catalog::load(dir.path()).find_framework("top")->defaults_for("")), 0.5);
  std::filesystem::remove(dir.path() + "/frameworks/mid.toml");
  dir.write("frameworks/top.toml", "[framework]\nname = \"top\"\nsummary = \"t\"\nextends = \"top\"\n");
  EXPECT_EQ(load_error(), top + ":4:11: error: in [framework], a profile cannot extend itself");
  dir.write("frameworks/top.toml", "[framework]\nname = \"top\"\nsummary = \"t\"\nextends = \"bass\"\n");
  EXPECT_EQ(load_error(), top + ":4:11: error: in [framework], extends names no framework profile ('bass'); known "
                                "profiles: base, top");
  dir.write("frameworks/base.toml", "[framework]\nname = \"base\"\nsummary = \"b\"\nextends = \"top\"\n");
  dir.write("frameworks/top.toml", "[framework]\nname = \"top\"\nsummary = \"t\"\nextends = \"base\"\n");
  EXPECT_NE(load_error().find("closes a cycle of profiles extending each other"), std::string::npos) << load_error();
  dir.write("frameworks/base.toml", "[framework]\nname = \"base\"\nsummary = \"b\"\nextends_version = \"2\"\n");
  EXPECT_NE(load_error().find("'extends_version' needs extends = \"<profile>\""), std::string::npos) << load_error();
}

// gpu_capacity: a catalog GPU holds what CUDA reports (gpus.toml cuda_total_gib: the H100 80GB's 79.11 GiB,
// vllm-project/vllm#27508) under every profile that runs on CUDA, its nominal 80 GiB under the paper profile
// (gpu_capacity = "nominal", what papers compare with); a profile that extends another inherits the choice
// unless it says its own; gpu_memory_gib_at_least conditions read the nominal size; a value outside the two
// is refused at the key.
TEST(Profiles, GpuCapacityIsCudasTotalUnlessTheProfileCountsNominal) {
  const uint64_t cuda_total = static_cast<uint64_t>(79.11 * 1073741824.0 + 0.5);  // 84,943,715,697 B
  const std::string h100 = "[hardware]\ngpu = \"h100-sxm-80gb\"\n";
  EXPECT_EQ(evaluate(llama7b_sgd("", h100)).scenario().hardware.memory_bytes, cuda_total);
  EXPECT_EQ(evaluate(llama7b_sgd("[framework]\nuse = \"paper\"\n", h100)).scenario().hardware.memory_bytes,
            80ull << 30);
  EXPECT_EQ(evaluate(llama7b_sgd("", h100)).scenario().hardware.nominal_bytes, 80ull << 30);
  // A size the scenario gives is the size, under every profile.
  EXPECT_EQ(evaluate(llama7b_sgd("", "[hardware]\nmemory_gib = 80\n")).scenario().hardware.memory_bytes,
            80ull << 30);
  // What CUDA reports on the scenario's own machine replaces the catalog's total: vLLM 0.19's logs read 79.19 GiB
  // on a later driver (llm-d-planner @ d3121e0) = llround(79.19 x 2^30) = 85,029,615,043 B. The paper profile
  // compares with the nominal memory and says that the key is not used.
  const std::string driver = h100 + "cuda_total_gib = 79.19\n";
  EXPECT_EQ(evaluate(llama7b_sgd("", driver)).scenario().hardware.memory_bytes, 85'029'615'043u);
  const Evaluation paper = evaluate(llama7b_sgd("[framework]\nuse = \"paper\"\n", driver));
  EXPECT_EQ(paper.scenario().hardware.memory_bytes, 80ull << 30);
  ASSERT_EQ(paper.scenario().warnings.size(), 1u);
  EXPECT_NE(paper.scenario().warnings[0].find(":15:18: warning: in [hardware], 'cuda_total_gib' is not used: profile "
                                              "'paper' compares with the GPU's nominal memory"),
            std::string::npos)
      << paper.scenario().warnings[0];
  EXPECT_NE(error_of(llama7b_sgd("", h100 + "cuda_total_gib = 80.5\n"), "p.toml")
                .find("p.toml:13:18: error: in [hardware], 'cuda_total_gib' is above the GPU's memory (80.00 GiB): "),
            std::string::npos);
  EXPECT_NE(error_of(llama7b_sgd("", "[hardware]\ncuda_total_gib = 23.5\n"), "p.toml")
                .find("'cuda_total_gib' is the total CUDA reports on the scenario's GPU; it needs gpu or memory_gib"),
            std::string::npos);

  TempDir dir;
  dir.write("gpus.toml", "[g80]\nlabel = \"G 80GB\"\nmemory_gib = 80\ncuda_total_gib = 79\n"
                         "cuda_total_source = \"a made-up log\"\n");
  std::filesystem::create_directories(dir.path() + "/frameworks");
  dir.write("frameworks/base.toml", "[framework]\nname = \"base\"\nsummary = \"b\"\ngpu_capacity = \"nominal\"\n"
                                    "[[since]]\nversion = \"1\"\ngpu_memory_gib_at_least = 80\n"
                                    "[since.defaults.sgd]\nmomentum = 0.9\n");
  dir.write("frameworks/top.toml", "[framework]\nname = \"top\"\nsummary = \"t\"\nextends = \"base\"\n");
  const std::string own = dir.write("frameworks/own.toml", "[framework]\nname = \"own\"\nsummary = \"o\"\n"
                                                           "extends = \"base\"\ngpu_capacity = \"cuda-total\"\n");
  const Catalog custom = Catalog::load(dir.path());
  const auto scenario = [&](const std::string& profile) {
    return parse_scenario("name = \"t\"\nmode = \"train\"\n[framework]\nuse = \"" + profile +
                              "\"\nversion = \"1\"\n[model]\nparams = 1e9\n[precision]\nuse = \"bf16\"\n"
                              "[optimizer]\nuse = \"sgd\"\n[activations]\nuse = \"none\"\n[hardware]\ngpu = \"g80\"\n",
                          "t.toml", custom);
  };
  EXPECT_EQ(scenario("base").hardware.memory_bytes, 80ull << 30);
  EXPECT_EQ(scenario("top").hardware.memory_bytes, 80ull << 30);  // inherited
  const Scenario on_cuda_total = scenario("own");
  EXPECT_EQ(on_cuda_total.hardware.memory_bytes, 79ull << 30);  // its own choice wins
  // The 80 GiB condition holds on the GPU sold as 80 GB, whatever CUDA reports: momentum 0.9 applies.
  double momentum = -1;
  for (const ComponentSpec& component : on_cuda_total.components)
    if (component.use == "sgd")
      for (const OptionValue& option : component.options)
        if (option.key == "momentum") momentum = option.floating;
  EXPECT_EQ(momentum, 0.9);
  dir.write("frameworks/own.toml", "[framework]\nname = \"own\"\nsummary = \"o\"\ngpu_capacity = \"cuda\"\n");
  EXPECT_EQ(catalog_load_error(dir.path()),
            own + ":4:16: error: in [framework], 'gpu_capacity' must be \"cuda-total\" (what CUDA reports: the "
                  "catalog's cuda_total_gib) or \"nominal\" (the catalog's memory_gib), not \"cuda\"");
}

// A generic value a scenario gives (cross_entropy "unfused", 8 bytes per logit,
// what scenarios said before profiles) is read as the framework's own path
// ([readings.megatron] in the profile, by version), with a located warning;
// the default profile keeps the generic path. Llama-3.2-1B, 1024 tokens: the
// loss's forward bytes of Profiles.VersionPicksTheLossPath (8, 6 per logit).
TEST(Profiles, GenericValuesAreReadTheFrameworksWay) {
  auto run = [](const std::string& framework, const std::string& loss) {
    return evaluate("name = \"g\"\nmode = \"train\"\n" + framework +
                    "[model]\npreset = \"llama-3.2-1b\"\n[batch]\nseq_len = 1024\n[precision]\nuse = \"bf16\"\n"
                    "[optimizer]\nuse = \"sgd\"\n[activations]\nuse = \"megatron\"\ncross_entropy = \"" + loss + "\"\n",
                    "g.toml");
  };
  constexpr uint64_t kLogits = 1024ull * 128'256;
  const std::string hf438 = "[framework]\nuse = \"hf-transformers\"\nversion = \"4.38\"\n";
  Evaluation generic = run(hf438, "unfused");
  EXPECT_EQ(generic.item_bytes("activations.loss_forward", MEMPLAN_ROLE_ACTIVATIONS), 8 * kLogits);
  EXPECT_EQ(generic.breakdown().quantities[kAllocated].peak,
            run(hf438, "upcast-shift-copy").breakdown().quantities[kAllocated].peak);
  ASSERT_EQ(generic.scenario().warnings.size(), 1u);
  EXPECT_EQ(generic.scenario().warnings[0].rfind("g.toml:16:17: warning: in [activations], cross_entropy = \"unfused\" "
                                                 "is read as \"upcast-shift-copy\", the way framework "
                                                 "'hf-transformers' 4.38 computes it (",
                                                 0),
            0u)
      << generic.scenario().warnings[0];
  EXPECT_EQ(run("[framework]\nuse = \"hf-transformers\"\n", "unfused").item_bytes("activations.loss_forward",
                                                                                  MEMPLAN_ROLE_ACTIVATIONS),
            6 * kLogits);  // the latest: upcast-in-loss
  // Each profile's reading, by the estimate it gives: the same as its value written out.
  for (const auto& [framework, reading] : std::vector<std::pair<std::string, std::string>>{
           {"[framework]\nuse = \"torchtune\"\n", "upcast"},
           {"[framework]\nuse = \"torchtitan\"\n", "upcast-in-loss"},
           {"[framework]\nuse = \"megatron-lm\"\n", "vocab-parallel"},
           {"[framework]\nuse = \"fsdp-qlora\"\n", "upcast-shift-copy"},  // hf-transformers 4.38's, inherited
           {"[framework]\nuse = \"hf-transformers\"\nversion = \"4.46\"\n", "upcast-in-loss-shift-copy"}}) {
    Evaluation read = run(framework, "unfused");
    EXPECT_EQ(read.breakdown().quantities[kAllocated].peak, run(framework, reading).breakdown().quantities[kAllocated].peak)
        << framework;
    ASSERT_EQ(read.scenario().warnings.size(), 1u) << framework;
    EXPECT_NE(read.scenario().warnings[0].find("is read as \"" + reading + "\""), std::string::npos) << framework;
  }
  // The JSON report carries the warning (key `warnings`, docs/json-output.md).
  TempDir dir;
  const std::string file = dir.write("g.toml", "name = \"g\"\nmode = \"train\"\n" + hf438 +
                                                   "[model]\npreset = \"llama-3.2-1b\"\n[batch]\nseq_len = 1024\n"
                                                   "[precision]\nuse = \"bf16\"\n[optimizer]\nuse = \"sgd\"\n"
                                                   "[activations]\nuse = \"megatron\"\ncross_entropy = \"unfused\"\n");
  const CommandResult json = run_cli("run " + file + " --format json");
  const nlohmann::json report = nlohmann::json::parse(json.out);
  ASSERT_EQ(report["warnings"].size(), 1u) << json.out;
  EXPECT_EQ(report["warnings"][0].get<std::string>().rfind(file + ":16:17: warning: in [activations], cross_entropy", 0),
            0u);
  // [framework] readings = false keeps the generic path under any profile.
  Evaluation literal = run(hf438 + "readings = false\n", "unfused");
  EXPECT_TRUE(literal.scenario().warnings.empty());
  EXPECT_EQ(literal.item_bytes("activations.logits", MEMPLAN_ROLE_ACTIVATIONS), 4 * kLogits);
  // The default profile has no reading: the generic path, and no warning.
  Evaluation plain = run("", "unfused");
  EXPECT_TRUE(plain.scenario().warnings.empty());
  EXPECT_EQ(plain.item_bytes("activations.loss_forward", MEMPLAN_ROLE_ACTIVATIONS), 0u);
  EXPECT_EQ(plain.item_bytes("activations.logits", MEMPLAN_ROLE_ACTIVATIONS), 4 * kLogits);  // fp32, kept
}

TEST(Profiles, ReadingsErrorsPointAtTheProfile) {
  {
    // A reading the plugin refuses is located in the profile, where it is written.
    TempDir bad;
    bad.write("gpus.toml", "");
    std::filesystem::create_directories(bad.path() + "/frameworks");
    const std::string typo = bad.write("frameworks/typo.toml",
                                       "[framework]\nname = \"typo\"\nsummary = \"t\"\n[readings.megatron]\n"
                                       "cross_entropy = { unfused = \"upcast-shfit-copy\" }\n");
    const Catalog custom = Catalog::load(bad.path());
    const Scenario scenario = parse_scenario(
        "name = \"t\"\nmode = \"train\"\n[framework]\nuse = \"typo\"\n[model]\nlayers = 2\nhidden = 256\n"
        "heads = 4\nffn_hidden = 512\nvocab = 1000\n[batch]\nseq_len = 128\n[precision]\nuse = \"bf16\"\n"
        "[optimizer]\nuse = \"sgd\"\n[activations]\nuse = \"megatron\"\ncross_entropy = \"unfused\"\n",
        "t.toml", custom);
    ASSERT_EQ(scenario.warnings.size(), 1u);
    EXPECT_EQ(scenario.warnings[0].rfind("t.toml:19:17: warning: in [activations], cross_entropy = \"unfused\" is "
                                         "read as \"upcast-shfit-copy\", the way framework 'typo' computes it (" +
                                             typo + ":5:29)",
                                         0),
              0u)
        << scenario.warnings[0];
    try {
      Estimator estimator(scenario, builtin_plugins());
      FAIL() << "the misspelt reading was accepted";
    } catch (const Error& error) {
      EXPECT_EQ(std::string(error.what()).rfind(typo + ":5:29: error:", 0), 0u) << error.what();
    }
  }
  TempDir dir;
  dir.write("gpus.toml", "");
  std::filesystem::create_directories(dir.path() + "/frameworks");
  const std::string team = dir.write("frameworks/team.toml", "[framework]\nname = \"team\"\nsummary = \"t\"\n"
                                                             "[readings.megatron]\ncross_entropy = \"upcast\"\n");
  try {
    (void)Catalog::load(dir.path());
    FAIL() << "a reading that is not a table was accepted";
  } catch (const Error& error) {
    EXPECT_EQ(std::string(error.what()), team + ":5:17: error: in [readings.megatron], 'cross_entropy' must be a "
                                                "table { <generic value> = \"<the framework's value>\" }");
  }
}

// [framework] version picks the [[since]] blocks up to it: the transformers
// loss path. Llama-3.2-1B, 1024 tokens x 128,256 = 131,334,144 logit
// elements; the extra bytes at the loss's forward high point: 8 (<= 4.45:
// fp32 logits and the shifted copy), 10 (4.46: 16-bit logits too), 6 (4.49 and
// the default, the latest: 16-bit logits and the loss's fp32 copy).
TEST(Profiles, VersionPicksTheLossPath) {
  auto loss_forward = [](const std::string& version) {
    Evaluation e = evaluate("name = \"h\"\nmode = \"train\"\n[framework]\nuse = \"hf-transformers\"\n" + version +
                            "[model]\npreset = \"llama-3.2-1b\"\n[batch]\nseq_len = 1024\n[precision]\nuse = "
                            "\"bf16\"\n[optimizer]\nuse = \"sgd\"\n[activations]\nuse = \"megatron\"\n");
    return e.item_bytes("activations.loss_forward", MEMPLAN_ROLE_ACTIVATIONS);
  };
  constexpr uint64_t kLogits = 1024ull * 128'256;
  EXPECT_EQ(loss_forward("version = \"4.38\"\n"), 8 * kLogits);
  EXPECT_EQ(loss_forward("version = \"4.46.3\"\n"), 10 * kLogits);
  EXPECT_EQ(loss_forward("version = \"4.49\"\n"), 6 * kLogits);
  EXPECT_EQ(loss_forward(""), 6 * kLogits);
  EXPECT_EQ(compare_versions("4.9", "4.38"), -1);
  EXPECT_EQ(compare_versions("core_r0.14.0", "0.14"), 0);
}

// The checkpoint variant by version: transformers' gradient_checkpointing_enable
// passes use_reentrant=True without kwargs up to 4.x and use_reentrant=False
// from 5.0 (PR #43203; measured: the Trainer on 5.17.0 built its checkpoint
// function with {'use_reentrant': False}, validation/measured/
// h100-2026-11-27-trainer.jsonl). Llama-3.2-3B with PEFT's fp32 LoRA r 16 on
// every linear, 2,048 tokens: the recomputed layer's high point beside its
// saves is up's adapter, 45,056 bytes a token, non-reentrant, and down's
// adapter, 59,392, reentrant (EagerLayers.AdaptedMlpRecomputationHoldsTwo-
// AdapterOutputs): 14,336 a token apart. A scenario's own `reentrant` wins.
TEST(Profiles, VersionPicksTheCheckpointVariant) {
  auto recompute = [](const std::string& version, const std::string& reentrant) {
    Evaluation e = evaluate("name = \"c\"\nmode = \"train\"\n[framework]\nuse = \"hf-transformers\"\nversion = \"" +
                            version +
                            "\"\n[model]\npreset = \"llama-3.2-3b\"\n[batch]\nseq_len = 2048\n[precision]\nuse = "
                            "\"bf16\"\nadapters = \"fp32\"\n[optimizer]\nuse = \"adamw\"\n[activations]\nuse = "
                            "\"megatron\"\nuse_cache = false\n[[strategy]]\nuse = \"lora\"\nrank = 16\nalpha = 32\n"
                            "targets = \"all-linear\"\n[[strategy]]\nuse = \"recompute\"\npolicy = \"full\"\n" +
                            reentrant);
    return e.item_bytes("activations.recompute", MEMPLAN_ROLE_ACTIVATIONS);
  };
  constexpr uint64_t kTokens = 2048;
  const uint64_t v4 = recompute("4.57", "");
  const uint64_t v5 = recompute("5.17", "");
  EXPECT_EQ(v4 - v5, (59'392 - 45'056) * kTokens);
  EXPECT_EQ(recompute("5.0", ""), v5);
  EXPECT_EQ(recompute("5.17", "reentrant = true\n"), v4);
  EXPECT_EQ(recompute("4.57", "reentrant = false\n"), v5);
}

// The torchtune profile's one [[since]] block (plugins/frameworks/torchtune/
// profile.toml): on one GPU the set-up is the replayed build (setup_build =
// "clones"), with torchao 0.1's whole-matrix to_nf4 and the load's second
// quantization on the GPU before 0.2, torchao 0.3.1's chunks of 2^20 weights
// and a CPU load from it: the item is the replay's high point less what stays
// (plugins/precision/quantized/nf4_build_replay.hpp, tests Nf4Build.*). On
// more GPUs the rule of one matrix stays: 68 bytes a weight of the largest NF4
// matrix before 0.2 (quantize_tensor_nearest and the bf16 source), 6 from it:
// Llama-2-7B's MLP matrix, 45,088,768 weights: 3,066,036,224 and 270,532,608 B.
TEST(Profiles, TorchtuneVersionPicksTheNf4Quantization) {
  auto working = [](const std::string& version, bool two_gpus) {
    Evaluation e = evaluate("name = \"q\"\nmode = \"train\"\n[framework]\nuse = \"torchtune\"\n" + version +
                            "[model]\npreset = \"llama-2-7b\"\n[batch]\nseq_len = 512\n[precision]\nuse = "
                            "\"quantized\"\nformat = \"nf4\"\ndouble_quant = true\nscales_in_parameter = true\n"
                            "[optimizer]\nuse = \"adamw\"\n[activations]\nuse = \"megatron\"\n[[strategy]]\nuse = "
                            "\"lora\"\nrank = 8\ntargets = \"q,k,v,o,mlp\"\n" +
                            (two_gpus ? "[[strategy]]\nuse = \"data-parallel\"\nsize = 2\n[hardware]\ncount = 2\n" : ""));
    return e.item_bytes("quantized.quantize_working", MEMPLAN_ROLE_BUFFERS);
  };
  namespace qb = memplan::plugins::quantized;
  const auto replayed = [](double chunk, bool at_load) {
    qb::Nf4Build build;
    const double a = 4096.0 * 4096, m = 4096.0 * 11008;
    build.layer = {{a, true}, {a, true}, {a, true}, {a, true}, {m, true}, {m, true}, {m, true}};
    build.layers = 32;
    build.embedding_bytes = build.head_bytes = 32000.0 * 4096 * 2;
    build.chunk = chunk;
    build.quantize_at_load = at_load;
    const qb::Nf4BuildReplay replay = qb::replay_nf4_build(build);
    return static_cast<uint64_t>(replay.high - replay.alive);
  };
  EXPECT_EQ(working("version = \"0.1\"\n", false), replayed(0, true));
  EXPECT_EQ(working("version = \"0.2\"\n", false), replayed(1 << 20, false));
  EXPECT_EQ(working("", false), replayed(1 << 20, false));  // the profile's own version, 0.4
  EXPECT_EQ(working("version = \"0.1\"\n", true), 3'066'036'224u);
  EXPECT_EQ(working("version = \"0.2\"\n", true), 270'532'608u);
}

// The hf-transformers profile's 4.46 block turns packed_linear_keeps_input off
// (bitsandbytes 0.43.2, pull request #1270: MatMul4Bit keeps ctx.tensors =
// (None, B)). Llama-3.2-3B, nf4 base, bf16 LoRA r 16 on q and v (undropped,
// uncast: lora_A keeps x itself), 1 x 1024 tokens, no recomputation: with the
// input kept the frozen 4-bit layer keeps its three inputs, p (h + h + f) =
// 2 x (3072 + 3072 + 8192) = 28,672 B a token and lora_A nothing more; without,
// lora_A keeps the shared q/v input, 2 x 3072 = 6,144: 22,528 B a token less,
// x 1024 tokens x 28 layers = 645,922,816 B.
// A built_on_it name numbers its own versions (NeMo 24.05 ships Megatron-Core 0.7): its version is still read
// as the profile's (megatron-core's), as before, and a warning says how to name the behaviour instead (date, or the profile's name).
// A version whose major number is more than one past the profile's own (e.g. a Transformers version given to
// the trl profile, a name that meant hf-transformers before TRL had a profile): read as the latest behaviour,
// with a warning that says so; versions near the profile's (vLLM 0.19 beside the profile's 0.17) say nothing.
TEST(Profiles, AVersionFarPastTheProfilesIsSaid) {
  const std::string rest = "[model]\npreset = \"llama-3.1-8b\"\n[batch]\nseq_len = 1024\n[precision]\nuse = \"bf16\"\n"
                           "[optimizer]\nuse = \"adamw\"\n[activations]\nuse = \"megatron\"\n";
  Evaluation far = evaluate("name = \"t\"\nmode = \"train\"\n[framework]\nuse = \"trl\"\nversion = \"4.45\"\n" + rest);
  ASSERT_EQ(far.estimator().scenario().warnings.size(), 1u);
  EXPECT_NE(far.estimator().scenario().warnings[0].find("version \"4.45\" is far past the versions of 'trl'"),
            std::string::npos)
      << far.estimator().scenario().warnings[0];
  Evaluation near = evaluate("name = \"t\"\nmode = \"train\"\n[framework]\nuse = \"trl\"\nversion = \"1.12\"\n" + rest);
  EXPECT_TRUE(near.estimator().scenario().warnings.empty());
}

TEST(Profiles, BuiltOnItVersionIsReadWithAWarning) {
  const Evaluation nemo = evaluate(llama7b_sgd("[framework]\nuse = \"nemo\"\nversion = \"24.05\"\n"));
  ASSERT_EQ(nemo.estimator().scenario().warnings.size(), 1u);
  EXPECT_NE(nemo.estimator().scenario().warnings[0].find("version \"24.05\" is read as a version of 'megatron-core', "
                                                          "but 'nemo' numbers its own versions; give date"),
            std::string::npos)
      << nemo.estimator().scenario().warnings[0];
  const Evaluation own = evaluate(llama7b_sgd("[framework]\nuse = \"megatron\"\nversion = \"core_r0.7.0\"\n"));
  EXPECT_TRUE(own.estimator().scenario().warnings.empty());  // an alias shares the profile's versions
}

// Recipes and launchers on a framework find its profile by their own names: ms-swift (transformers'
// Seq2SeqTrainer, validation/SWIFT-*) and LitGPT on Lightning Fabric (plain PyTorch modules,
// validation/LITGPT-*).
TEST(Profiles, RecipeNamesFindTheFrameworkTheyRunOn) {
  EXPECT_EQ(catalog().find_framework("ms-swift")->name, "hf-transformers");
  EXPECT_EQ(catalog().find_framework("swift")->name, "hf-transformers");
  EXPECT_EQ(catalog().find_framework("litgpt")->name, "pytorch");
  EXPECT_EQ(catalog().find_framework("lightning-fabric")->name, "pytorch");
  EXPECT_FALSE(catalog().find_framework("litgpt")->shares_versions("litgpt"));
}

TEST(Profiles, Transformers446LeavesTheFourBitInputsToBitsandbytes0432) {
  auto stored = [](const std::string& version) {
    Evaluation e = evaluate("name = \"q\"\nmode = \"train\"\n[framework]\nuse = \"hf-transformers\"\nversion = \"" +
                            version +
                            "\"\n[model]\npreset = \"llama-3.2-3b\"\n[batch]\nseq_len = 1024\n[precision]\nuse = "
                            "\"quantized\"\nformat = \"nf4\"\n[optimizer]\nuse = \"adamw\"\n[activations]\nuse = "
                            "\"megatron\"\nuse_cache = false\n[[strategy]]\nuse = \"lora\"\nrank = 16\ntargets = \"q,v\"\n");
    return e.item_bytes("layers.0-27.activations", MEMPLAN_ROLE_ACTIVATIONS);
  };
  EXPECT_EQ(stored("4.45") - stored("4.46"), 645'922'816u);
  EXPECT_EQ(stored("4.46"), stored("4.49"));  // 4.49 changes the loss only, outside the layers
}

// An option a profile gives is validated by its plugin like the scenario's
// own, and the error points at the profile's file.
TEST(Profiles, ProfileErrorsPointAtTheProfile) {
  TempDir dir;
  dir.write("gpus.toml", "");
  std::filesystem::create_directories(dir.path() + "/frameworks");
  const std::string profile =
      dir.write("frameworks/team.toml", "[framework]\nname = \"team\"\nsummary = \"ours\"\n[defaults.sgd]\nlr = 1\n");
  const Catalog custom = Catalog::load(dir.path());
  const Scenario scenario =
      parse_scenario("name = \"t\"\nmode = \"train\"\n[framework]\nuse = \"team\"\n[model]\nparams = 1e9\n"
                     "[precision]\nuse = \"bf16\"\n[optimizer]\nuse = \"sgd\"\n[activations]\nuse = \"none\"\n",
                     "t.toml", custom);
  try {
    Estimator estimator(scenario, builtin_plugins());
    FAIL() << "the profile's unknown key was accepted";
  } catch (const Error& error) {
    EXPECT_EQ(std::string(error.what()).rfind(profile + ":5:1: error: unknown key 'lr' in [optimizer]", 0), 0u)
        << error.what();
  }
  dir.write("frameworks/team.toml", "[framework]\nname = \"other\"\nsummary = \"x\"\n");
  try {
    (void)Catalog::load(dir.path());
    FAIL() << "a profile named unlike its file was accepted";
  } catch (const Error& error) {
    EXPECT_EQ(std::string(error.what()),
              profile + ":1:1: error: [framework] name must equal the file name without .toml ('team'): a profile "
                        "is found by its file name");
  }
}

// The JSON contract gains the quantities, the fit quantity, each item's
// quantity and the framework; `peak` stays the quantity fits compares.
TEST(Profiles, JsonCarriesTheThreeQuantities) {
  TempDir dir;
  const std::string file = dir.write("j.toml", llama7b_sgd("", "[hardware]\ngpu = \"h100-sxm-80gb\"\n"));
  const CommandResult result = run_cli("run " + file + " --format json");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const nlohmann::json estimate = nlohmann::json::parse(result.out);
  const auto& gpu = estimate.at("per_gpu");
  EXPECT_EQ(gpu.at("fit_quantity"), "device");
  EXPECT_EQ(gpu.at("peak"), gpu.at("quantities").at("device").at("peak"));
  EXPECT_EQ(gpu.at("quantities").at("allocated").at("peak").get<uint64_t>(), 2 * kWeights + 64 * kMiB);
  EXPECT_EQ(estimate.at("framework").at("name"), "pytorch");
  EXPECT_EQ(estimate.at("framework").at("default"), true);
  bool context_outside = false;
  for (const auto& item : gpu.at("items"))
    if (item.at("name") == "cuda_context") context_outside = item.at("quantity") == "device";
  EXPECT_TRUE(context_outside);
}

// SGLang pages its KV pool one token at a time (page_size 1, its server's
// default; MHATokenToKVPool in sgl-project/sglang
// python/sglang/srt/mem_cache/memory_pool.py @ 000ccdba), vLLM in blocks of
// 16. Llama-3.1-8B in bf16, one sequence of 17 tokens: 2 x 8 kv heads x 128 x
// 2 bytes x 32 layers = 131,072 bytes per token; sglang 17 tokens =
// 2,228,224 bytes, vllm 2 blocks = 32 tokens = 4,194,304; a scenario's own
// block_size wins over the profile's.
TEST(Profiles, SglangPagesTheKvCacheOneTokenAtATime) {
  auto kv = [](const std::string& framework, const std::string& options) {
    Evaluation e = evaluate("name = \"s\"\nmode = \"infer\"\n[framework]\nuse = \"" + framework +
                            "\"\n[model]\npreset = \"llama-3.1-8b\"\n[batch]\nmicro_batch = 1\nseq_len = 17\n"
                            "[precision]\nuse = \"bf16\"\n[activations]\nuse = \"inference\"\n" + options);
    return e.component(MEMPLAN_ROLE_KV_CACHE);
  };
  EXPECT_EQ(kv("sglang", ""), 2'228'224u);
  EXPECT_EQ(kv("vllm", ""), 4'194'304u);
  EXPECT_EQ(kv("sglang", "block_size = 16\n"), 4'194'304u);
}

}  // namespace
}  // namespace memplan::testing
