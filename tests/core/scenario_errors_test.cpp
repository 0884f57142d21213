// Scenario errors: every message names file:line:column and the fix, and
// nothing crashes on bad input. Messages are asserted exactly.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "memplan/core/text.hpp"
#include "test_support.hpp"

namespace memplan::testing {
namespace {

// Line numbers below count from this text's first line.
const std::string kBase =
    "name = \"t\"\n"            // 1
    "mode = \"train\"\n"        // 2
    "[model]\n"                 // 3
    "preset = \"llama-2-7b\"\n" // 4
    "[batch]\n"                 // 5
    "micro_batch = 1\n"         // 6
    "seq_len = 2048\n"          // 7
    "[precision]\n"             // 8
    "use = \"mixed-bf16\"\n"    // 9
    "[optimizer]\n"             // 10
    "use = \"adamw\"\n"         // 11
    "[activations]\n"           // 12
    "use = \"megatron\"\n";     // 13

std::string replaced(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return text.replace(at, from.size(), to);
}

// Lists as the messages print them; plugins gain options and new plugins
// appear, and the messages must list what is there.
std::string accepted_keys(const char* plugin) {
  std::vector<std::string> keys;
  for (const memplan_option_spec& spec : builtin_plugins().find(plugin)->options) keys.emplace_back(spec.name);
  return join_alternatives(keys, ", ");
}

std::string names_of_kind(int32_t kind) { return join_alternatives(builtin_plugins().names(kind), ", "); }

TEST(ScenarioErrors, BaseScenarioIsValid) { EXPECT_EQ(error_of(kBase), ""); }

TEST(ScenarioErrors, TomlSyntaxErrorHasLineAndColumn) {
  EXPECT_EQ(error_of(replaced(kBase, "micro_batch = 1", "micro_batch = = 1"), "s.toml"),
            "s.toml:6:15: error: invalid TOML: Error while parsing value: could not determine value type");
}

TEST(ScenarioErrors, TypoInAPluginKeySuggestsTheKey) {
  EXPECT_EQ(error_of(kBase + "[[strategy]]\nuse = \"zero\"\nstgae = 1\n", "s.toml"),
            "s.toml:16:1: error: unknown key 'stgae' in [[strategy]] #1 for strategy plugin 'zero'. Did you mean "
            "'stage'? Accepted keys: " + accepted_keys("zero") + ".");
}

TEST(ScenarioErrors, WrongTypeForAPluginKey) {
  EXPECT_EQ(error_of(kBase + "[[strategy]]\nuse = \"zero\"\nstage = \"one\"\n", "s.toml"),
            "s.toml:16:9: error: in [[strategy]] #1, 'stage' of strategy plugin 'zero' must be an integer, not a "
            "string");
}

TEST(ScenarioErrors, PluginRejectsAValueWithItsLocationAndLibrary) {
  EXPECT_EQ(error_of(kBase + "[[strategy]]\nuse = \"zero\"\nstage = 4\n", "s.toml"),
            "s.toml:16:9: error: in [[strategy]] #1, strategy plugin 'zero', option 'stage': must be 0, 1, 2 or 3, "
            "got 4 (plugin library " + plugin_dir() + "/memplan-zero.so)");
}

TEST(ScenarioErrors, UnknownPluginNameSuggestsClosestNames) {
  EXPECT_EQ(error_of(replaced(kBase, "\"adamw\"", "\"adamm\""), "s.toml"),
            "s.toml:11:7: error: no optimizer plugin named 'adamm'. Did you mean 'adam' or 'adamw'? Available "
            "optimizer plugins: " + names_of_kind(MEMPLAN_KIND_OPTIMIZER) +
                ". `memplan plugins` lists every plugin and where it was found.");
}

// Issue 13: people write parallelisms by their initials (dp, tp, pp, ep, cp);
// a word that is a plugin name's initials is suggested first.
TEST(ScenarioErrors, InitialsSuggestThePluginTheyStandFor) {
  for (const auto& [word, plugin] : std::vector<std::pair<std::string, std::string>>{
           {"dp", "data-parallel"}, {"tp", "tensor-parallel"}, {"pp", "pipeline-parallel"},
           {"ep", "expert-parallel"}, {"cp", "context-parallel"}}) {
    const std::string error = error_of(kBase + "[[strategy]]\nuse = \"" + word + "\"\n", "s.toml");
    EXPECT_NE(error.find("no strategy plugin named '" + word + "'. Did you mean '" + plugin + "'"), std::string::npos)
        << error;
  }
}

// Issue 13: a sequence longer than the model's context (Llama-2-7B's
// max_position_embeddings, 4096, core/data/models/llama-2-7b.toml) gets a
// warning unless the scenario says the run extends the context. A warning,
// not an error: scenario files that ran before keep running (the contract).
TEST(ScenarioErrors, SequenceBeyondTheModelsContextWarns) {
  const std::string text = "name = \"s\"\nmode = \"train\"\n[model]\npreset = \"llama-2-7b\"\n[batch]\nseq_len = 32768\n"
                           "[precision]\nuse = \"bf16\"\n[optimizer]\nuse = \"sgd\"\n[activations]\nuse = \"none\"\n";
  const Catalog catalog = Catalog::load(data_dir());
  const Scenario scenario = parse_scenario(text, "s.toml", catalog);
  ASSERT_EQ(scenario.warnings.size(), 1u);
  EXPECT_EQ(scenario.warnings[0],
            "s.toml:6:11: warning: in [batch], 'seq_len' = 32768 is beyond the model's context of 4096 tokens; lower "
            "it, or set beyond_context = true in [batch] if the run extends the context (RoPE scaling, long-context "
            "training)");
  std::string extended = text;
  extended.replace(extended.find("seq_len = 32768"), 15, "seq_len = 32768\nbeyond_context = true");
  EXPECT_TRUE(parse_scenario(extended, "s.toml", catalog).warnings.empty());
  EXPECT_EQ(error_of(text, "s.toml"), "");
}

TEST(ScenarioErrors, PluginOfTheWrongKind) {
  EXPECT_EQ(error_of(replaced(kBase, "\"adamw\"", "\"zero\""), "s.toml"),
            "s.toml:11:7: error: 'zero' is a strategy plugin, but [optimizer] needs an optimizer plugin; move it to "
            "a [[strategy]] table");
}

TEST(ScenarioErrors, UnknownTopLevelTable) {
  EXPECT_EQ(error_of(replaced(kBase, "[batch]", "[bacth]"), "s.toml"),
            "s.toml:5:2: error: unknown key 'bacth' in the scenario's top level. Did you mean 'batch'? Accepted keys: "
            "name, mode, framework, model, batch, precision, optimizer, activations, strategy, hardware, plugins, search, budget.");
}

// The catalog grows with data files; the message lists all of them, sorted.
std::string all_presets() { return join_alternatives(catalog().model_names(), ", "); }

TEST(ScenarioErrors, UnknownPresetListsTheCatalog) {
  EXPECT_EQ(error_of(replaced(kBase, "llama-2-7b", "llama-2-7B"), "s.toml"),
            "s.toml:4:10: error: in [model], 'preset' names no model in the catalog (" + data_dir() +
                "/models). Did you mean 'llama-2-7b', 'llama-2-70b' or 'llama-2-13b'? Known presets: " +
                all_presets() + ".");
}

TEST(ScenarioErrors, NegativeSizesAreRejected) {
  EXPECT_EQ(error_of(replaced(kBase, "seq_len = 2048", "seq_len = -5"), "s.toml"),
            "s.toml:7:11: error: in [batch], 'seq_len' must be a positive integer, got -5");
  EXPECT_EQ(error_of(replaced(kBase, "preset = \"llama-2-7b\"", "params = -1.0"), "s.toml"),
            "s.toml:4:10: error: in [model], 'params' must be greater than zero");
  EXPECT_EQ(error_of(replaced(kBase, "preset = \"llama-2-7b\"", "params = nan"), "s.toml"),
            "s.toml:4:10: error: in [model], 'params' must be a finite number");
}

TEST(ScenarioErrors, HardwareCountMustMatchTheLayout) {
  EXPECT_EQ(error_of(kBase + "[hardware]\ngpu = \"h100-sxm-80gb\"\ncount = 8\n", "s.toml"),
            "s.toml:16:9: error: [hardware] count = 8 but the strategies lay the job out on 1 GPU (no strategy splits "
            "it; add the strategies that use the other GPUs, e.g. data parallelism); change count, or the "
            "strategies' sizes so that their product equals count");
  EXPECT_EQ(error_of(kBase + "[hardware]\ncount = 16\n[[strategy]]\nuse = \"data-parallel\"\nsize = 8\n", "s.toml"),
            "s.toml:15:9: error: [hardware] count = 16 but the strategies lay the job out on 8 GPUs (data 8 (set by "
            "'data-parallel')); change count, or the strategies' sizes so that their product equals count");
}

TEST(ScenarioErrors, MissingRequiredTables) {
  const std::string no_activations = kBase.substr(0, kBase.find("[activations]"));
  EXPECT_EQ(error_of(no_activations, "s.toml"),
            "s.toml:1:1: error: a training scenario needs an [activations] table: [activations] use = \"<activation "
            "model plugin>\" (`memplan plugins` lists them; leaving activations out must be explicit too)");
  EXPECT_EQ(error_of(replaced(kBase, "mode = \"train\"", "mode = \"infer\""), "s.toml"),
            "s.toml:10:1: error: mode = \"infer\" runs no optimizer; remove the [optimizer] table or set mode = "
            "\"train\"");
}

TEST(ScenarioErrors, ModelArchitectureIsChecked) {
  const std::string inline_model =
      "layers = 2\nhidden = 100\nheads = 3\nffn_hidden = 400\nvocab = 1000";
  EXPECT_EQ(error_of(replaced(kBase, "preset = \"llama-2-7b\"", inline_model), "s.toml"),
            "s.toml:6:9: error: [model]: hidden 100 is not divisible by heads 3; set 'head_dim' explicitly");
  EXPECT_EQ(error_of(replaced(kBase, "preset = \"llama-2-7b\"", "preset = \"llama-2-7b\"\nkv_heads = 5"), "s.toml"),
            "s.toml:5:12: error: [model]: heads 32 is not a multiple of kv_heads 5 (grouped-query attention shares "
            "each kv head among a whole number of query heads)");
}

TEST(ScenarioErrors, ActivationModelNeedsAnArchitecture) {
  EXPECT_EQ(error_of(replaced(kBase, "preset = \"llama-2-7b\"", "params = 7e9"), "s.toml"),
            "s.toml:13:7: error: in [activations], activations plugin 'megatron': needs the model's architecture "
            "(layers, hidden, heads) but the scenario gives only params; use a preset or an inline architecture in "
            "[model], or [activations] use = \"none\" (plugin library " + plugin_dir() + "/memplan-megatron.so)");
}

TEST(ScenarioErrors, BadInputNeverCrashes) {
  // Arbitrary damage to the scenario gives an error or an estimate, never a crash.
  for (size_t cut = 0; cut < kBase.size(); cut += 7) {
    std::string damaged = kBase.substr(0, cut);
    std::string message = error_of(damaged, "s.toml");
    if (!message.empty()) {
      EXPECT_EQ(message.rfind("s.toml:", 0), 0u) << message;
    }
  }
}

}  // namespace
}  // namespace memplan::testing

namespace memplan::testing {
namespace {

TEST(ScenarioErrors, AStrategyUsedTwiceIsAnError) {
  EXPECT_EQ(error_of(kBase + "[[strategy]]\nuse = \"data-parallel\"\nsize = 2\n[[strategy]]\nuse = \"data-parallel\"\n"
                             "size = 4\n",
                     "s.toml"),
            "s.toml:18:7: error: 'data-parallel' is used twice ([[strategy]] #1 and [[strategy]] #2); keep one table");
}

}  // namespace
}  // namespace memplan::testing

namespace memplan::testing {
namespace {

// Sizes that would wrap 64-bit arithmetic are refused at their key, never
// reported as a small number or a negative one (found by review).
TEST(ScenarioErrors, ImplausibleSizesAreRefused) {
  EXPECT_EQ(error_of(replaced(kBase, "preset = \"llama-2-7b\"", "preset = \"llama-2-7b\"\nheads = 8589934592"), "s.toml"),
            "s.toml:5:9: error: [model]: 'heads' = 8589934592 is implausibly large (the limit is 1000000); check the "
            "number");
  // 10^6 layers of a 10^6-wide model: per layer 4 h^2 (q, k, v, o) + 3 h f
  // (SwiGLU, the default MLP) = 4e12 + 1.2e13 = 1.6e13, so about 1.6 x 10^19 parameters.
  EXPECT_EQ(error_of(replaced(kBase, "preset = \"llama-2-7b\"",
                              "layers = 1000000\nhidden = 1000000\nheads = 1000\nffn_hidden = 4000000\nvocab = 1000"),
                     "s.toml"),
            "s.toml:3:1: error: [model] describes 1.6e+19 parameters, more than 10^15; check the dimensions");
  EXPECT_EQ(error_of(kBase + "[hardware]\nmemory_gib = 2e10\n", "s.toml"),
            "s.toml:15:14: error: in [hardware], 'memory_gib' must be between 1/1024 GiB (1 MiB) and 1048576 GiB, "
            "got 2e+10");
  EXPECT_EQ(error_of(kBase + "[hardware]\nmemory_gib = 1e-10\n", "s.toml"),
            "s.toml:15:14: error: in [hardware], 'memory_gib' must be between 1/1024 GiB (1 MiB) and 1048576 GiB, "
            "got 1e-10");
}

TEST(ScenarioErrors, WorldSizeThatWouldOverflowIsRefused) {
  // A model known only by its size, so tensor parallelism checks no head count:
  // 7 x 7,905,747,460,161,236,407 would wrap to 1 and pass a count of 1.
  EXPECT_EQ(error_of("name = \"t\"\nmode = \"train\"\n[model]\nparams = 7e9\n[precision]\nuse = \"bf16\"\n"
                     "[optimizer]\nuse = \"sgd\"\n[activations]\nuse = \"none\"\n[[strategy]]\nuse = \"data-parallel\"\n"
                     "size = 7\n[[strategy]]\nuse = \"tensor-parallel\"\nsize = 7905747460161236407\n[hardware]\ncount = 1\n",
                     "s.toml"),
            "s.toml:15:7: error: plugin 'tensor-parallel' set ranks.tensor = 7905747460161236407, which makes no world "
            "size (rule: every ranks.* factor is at least 1 and their product fits in 64 bits); check the parallel "
            "sizes");
}

}  // namespace
}  // namespace memplan::testing
