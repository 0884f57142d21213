// The CLI contract (design.md section 4): `memplan run FILE --format json`
// prints the estimate object with every component key; `memplan plugins`
// lists every built-in from its own library; errors exit non-zero with one
// paragraph on stderr.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>
#include <set>
#include <sstream>

#include "test_support.hpp"

namespace memplan::testing {
namespace {

std::string example(const std::string& name) { return source_dir() + "/examples/" + name; }

TEST(Cli, RunPrintsTheJsonContract) {
  CommandResult result = run_cli("run " + example("llama2-7b-single-gpu.toml") + " --format json");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  for (const char* key : {"\"schema\": \"memplan.estimate/1\"", "\"scenario\": \"llama2-7b-full-finetune-1gpu\"",
                          "\"mode\": \"train\"", "\"parameters\": { \"total\": 6738415616, \"trainable\": 6738415616 }",
                          "\"peak\":", "\"sum\":", "\"peak_phase\": \"backward\"", "\"weights\": 13476831232",
                          "\"gradients\":", "\"master_weights\": 26953662464", "\"optimizer_states\": 53907324928",
                          "\"activations\":", "\"kv_cache\": 0", "\"buffers\": 0", "\"overhead\": 0", "\"items\": [",
                          "\"gpu_memory\": 85899345920", "\"gpu_cuda_total\": 84943715697",
                          "\"fits\": false", "\"plugins\": [",
                          "{ \"kind\": \"optimizer\", \"name\": \"adamw\", \"version\": \"1.4.0\""})
    EXPECT_NE(result.out.find(key), std::string::npos) << key;
}

// Issue 13, output for scripts: CSV rows carry the scenario's name (sweeps
// concatenate), the verdict as numbers and the limits; markdown the model,
// the batch, the limits and the advice. The figures are the JSON's for the
// same runs (RunPrintsTheJsonContract: the H100 80GB, whose capacity is the 79.11 GiB CUDA reports
// (84,943,715,697 B: the catalog's cuda_total_gib); the Mistral example's
// documented limits: 32,768 tokens, capped by the model, 2 sequences).
TEST(Cli, CsvCarriesTheScenarioTheVerdictAndTheLimits) {
  CommandResult result = run_cli("run " + example("llama2-7b-single-gpu.toml") + " --format csv");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  std::istringstream lines(result.out);
  std::string line;
  std::getline(lines, line);
  EXPECT_EQ(line, "kind,name,role,device,bytes,scenario");
  uint64_t peak = 0, capacity = 0, shortfall = 0;
  int rows = 0;
  while (std::getline(lines, line)) {
    ++rows;
    EXPECT_TRUE(line.ends_with(",llama2-7b-full-finetune-1gpu")) << line;
    const auto value = [&](const std::string& prefix) {
      return line.starts_with(prefix) ? std::stoull(line.substr(prefix.size())) : 0;
    };
    peak += value("total,peak,backward,gpu,");
    capacity += value("fit,capacity,device,gpu,");
    shortfall += value("fit,shortfall,,gpu,");
  }
  EXPECT_GT(rows, 20);
  for (const char* row : {"\nfit,gpu_memory,,gpu,85899345920,", "\nfit,gpu_cuda_total,,gpu,84943715697,", "\nfit,fits,device,gpu,0,", "\nfit,headroom,,gpu,0,"})
    EXPECT_NE(result.out.find(row), std::string::npos) << row;
  EXPECT_EQ(capacity, 84'943'715'697u);
  EXPECT_EQ(shortfall, peak - capacity);
  CommandResult serving = run_cli("run " + example("infer-mistral-7b-longest-context-24gb.toml") + " --format csv");
  ASSERT_EQ(serving.exit_code, 0) << serving.err;
  for (const char* row : {"\nfit,fits,device,gpu,1,", "\nlimit,max_micro_batch,kv_cache,gpu,2,mistral-7b-longest-context-24gb\n",
                          "\nlimit,max_seq_len_solved,model max_context,gpu,32768,mistral-7b-longest-context-24gb\n"})
    EXPECT_NE(serving.out.find(row), std::string::npos) << row;
}

TEST(Cli, MarkdownCarriesTheModelTheBatchTheLimitsAndTheAdvice) {
  CommandResult result = run_cli("run " + example("llama2-7b-single-gpu.toml") + " --format markdown");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  for (const char* text : {"- model: llama-2-7b, 6738415616 parameters (6738415616 trainable)\n",
                           "- mode: train; micro_batch 1, seq_len 4096, grad_accum 16; world size 1\n",
                           "): does not fit, ", "\nWhat to change:\n\n- The peak exceeds the memory available by "})
    EXPECT_NE(result.out.find(text), std::string::npos) << text;
  CommandResult serving =
      run_cli("run " + example("infer-mistral-7b-longest-context-24gb.toml") + " --format markdown");
  ASSERT_EQ(serving.exit_code, 0) << serving.err;
  EXPECT_NE(serving.out.find("| max_seq_len (solved) | 32768 | micro_batch 1 | capped by model max_context |\n"),
            std::string::npos)
      << serving.out;
  EXPECT_NE(serving.out.find("| max_micro_batch | 2 | seq_len 32768 | kv_cache |\n"), std::string::npos);
  EXPECT_EQ(serving.out.find("What to change"), std::string::npos);
}

// `--check` for CI gates: exit status 3 when the job does not fit (the report
// is printed all the same), 0 when it fits, 2 when there is no GPU to check.
TEST(Cli, CheckExitsThreeWhenTheJobDoesNotFit) {
  CommandResult over = run_cli("run " + example("llama2-7b-single-gpu.toml") + " --check");
  EXPECT_EQ(over.exit_code, 3);
  EXPECT_NE(over.out.find("fits (device memory): no"), std::string::npos);
  EXPECT_EQ(over.err, "memplan: llama2-7b-full-finetune-1gpu does not fit (--check): exit status 3\n");
  CommandResult fits = run_cli("run " + example("llama2-7b-zero3-8gpu.toml") + " --check --format json");
  EXPECT_EQ(fits.exit_code, 0) << fits.err;
  EXPECT_NE(fits.out.find("\"fits\": true"), std::string::npos);
  const std::string dir = ::testing::TempDir();
  const std::string file = dir + "/no-gpu.toml";
  std::ofstream(file) << "name = \"no-gpu\"\nmode = \"train\"\n[model]\nparams = 1e9\n[precision]\nuse = \"bf16\"\n"
                         "[optimizer]\nuse = \"sgd\"\n[activations]\nuse = \"none\"\n";
  CommandResult none = run_cli("run " + file + " --check");
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_EQ(none.err, "memplan: error: --check compares the peak with the GPU's memory, but " + file +
                          " names no GPU; add [hardware] gpu = \"...\" or memory_gib = N\n");
}

// Issue 13, one-line questions: --set changes a key before the scenario is
// read (TOML values, or a bare string), errors in a set value point at the
// override; "-" reads the scenario from standard input; several files print
// one report each (CSV under one header, JSON as an array).
TEST(Cli, SetOverridesKeysBeforeTheScenarioIsRead) {
  const std::string file = example("llama2-7b-single-gpu.toml");
  CommandResult set = run_cli("run " + file + " --set batch.micro_batch=2 --set model.preset=llama-2-13b "
                              "--set 'hardware.gpu=\"h200-sxm-141gb\"'");
  ASSERT_EQ(set.exit_code, 0) << set.err;
  EXPECT_NE(set.out.find("model: llama-2-13b, 13.016 B parameters"), std::string::npos) << set.out;
  EXPECT_NE(set.out.find("batch: micro_batch 2, seq_len 4096"), std::string::npos);
  EXPECT_NE(set.out.find("GPU: NVIDIA H200"), std::string::npos);
  CommandResult strategy = run_cli("run " + example("llama2-7b-zero3-8gpu.toml") +
                                   " --set strategy.1.size=4 --set hardware.count=4 --format json");
  ASSERT_EQ(strategy.exit_code, 0) << strategy.err;
  EXPECT_NE(strategy.out.find("\"world_size\": 4"), std::string::npos);
  CommandResult bad = run_cli("run " + file + " --set batch.micro_batch=abc");
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_EQ(bad.err, "--set batch.micro_batch=abc:1:5: error: in [batch], 'micro_batch' must be a positive integer or "
                     "\"max\", not \"abc\"\n");
  EXPECT_EQ(run_cli("run " + file + " --set nokey").err,
            "--set nokey: error: needs the form key.path=value, e.g. --set batch.micro_batch=4\n");
  EXPECT_EQ(run_cli("run " + file + " --set batch.seq_len.x=3").err,
            "--set batch.seq_len.x=3: error: 'seq_len' is a value, not a table, so it has no key 'x'\n");
  EXPECT_EQ(run_cli("run " + example("llama2-7b-zero3-8gpu.toml") + " --set strategy.9.size=2").err,
            "--set strategy.9.size=2: error: 'strategy' is an array of 2 tables; name one by its number, from 1 to 2 "
            "(e.g. strategy.1.size=2)\n");
}

TEST(Cli, RunsStandardInputAndSeveralFiles) {
  const std::string single = example("llama2-7b-single-gpu.toml"), zero3 = example("llama2-7b-zero3-8gpu.toml");
  CommandResult piped = run_command("cat " + single + " | " + cli_path() + " run - --format json");
  ASSERT_EQ(piped.exit_code, 0) << piped.err;
  EXPECT_EQ(piped.out, run_cli("run " + single + " --format json").out);
  CommandResult csv = run_cli("run " + single + " " + zero3 + " --format csv");
  ASSERT_EQ(csv.exit_code, 0) << csv.err;
  size_t headers = 0;
  for (size_t at = csv.out.find("kind,name,role"); at != std::string::npos; at = csv.out.find("kind,name,role", at + 1))
    ++headers;
  EXPECT_EQ(headers, 1u);
  EXPECT_NE(csv.out.find(",llama2-7b-full-finetune-1gpu\n"), std::string::npos);
  EXPECT_NE(csv.out.find(",llama2-7b-zero3-8gpu\n"), std::string::npos);
  CommandResult json = run_cli("run " + single + " " + zero3 + " --format json");
  ASSERT_EQ(json.exit_code, 0) << json.err;
  EXPECT_TRUE(json.out.starts_with("[\n{")) << json.out.substr(0, 20);
  EXPECT_TRUE(json.out.ends_with("}\n]\n"));
  EXPECT_NE(json.out.find("\"scenario\": \"llama2-7b-zero3-8gpu\""), std::string::npos);
  // --check fails when any job does not fit.
  EXPECT_EQ(run_cli("run " + zero3 + " " + single + " --check").exit_code, 3);
  EXPECT_EQ(run_cli("run - - --format json").err, "memplan: error: standard input (-) can be read once; name it once\n");
}

// Issue 13: what a scenario can name, listed. The figures are the catalog's
// (core/data/models/llama-2-7b.toml: 6,738,415,616 published parameters, 32
// layers, hidden 4096, 32 heads, 4096 positions; gpus.toml: the H100 SXM,
// 80 GiB, NVLink SHARP) and the zero plugin's own option table.
TEST(Cli, PresetsGpusAndOnePluginsOptions) {
  CommandResult presets = run_cli("presets");
  ASSERT_EQ(presets.exit_code, 0) << presets.err;
  // The last column, from, says where an entry comes from (issue 11: built-in, or an installed bundle's file).
  EXPECT_TRUE(presets.out.starts_with("name\tparams_b\tlayers\thidden\theads\tkv_heads\tmax_context\tsource\tfrom\n"));
  EXPECT_NE(presets.out.find("\nllama-2-7b\t6.738\t32\t4096\t32\t32\t4096\t"), std::string::npos) << presets.out;
  CommandResult gpus = run_cli("gpus");
  ASSERT_EQ(gpus.exit_code, 0) << gpus.err;
  EXPECT_NE(gpus.out.find("\nh100-sxm-80gb\t80.00\tyes\tNVIDIA H100 SXM5 80GB\t"), std::string::npos) << gpus.out;
  EXPECT_EQ(run_cli("gpus extra").exit_code, 2);
  CommandResult zero = run_cli("plugins zero");
  ASSERT_EQ(zero.exit_code, 0) << zero.err;
  EXPECT_TRUE(zero.out.starts_with("strategy zero 1.11.0\nlibrary: ")) << zero.out;
  for (const char* text : {"\n  stage (integer, default: required)\n      0 (off), 1 (optimizer states)",
                           "\n  max_reuse_distance (integer, default: 1000000000)\n"})
    EXPECT_NE(zero.out.find(text), std::string::npos) << text;
  CommandResult missing = run_cli("plugins zer0");
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_TRUE(missing.err.starts_with("memplan: error: no plugin or framework profile named 'zer0' was found; "
                                      "`memplan plugins` lists them all (plugins: "))
      << missing.err;
  // Framework profiles can be shown by name too, so the error names them as well.
  EXPECT_NE(missing.err.find("; framework profiles: "), std::string::npos) << missing.err;
  EXPECT_NE(missing.err.find("torchtune"), std::string::npos) << missing.err;
}

// What a profile file writes after `key = ` on the first line that starts with
// it below the line `table` (a table header): read from the file the CLI
// reads, so that the tests below check the output against the data and not
// against the loader that produced it.
std::string profile_value(const std::string& profile, const std::string& table, const std::string& key) {
  std::ifstream file(data_dir() + "/frameworks/" + profile + ".toml");
  std::string line;
  bool in_table = false;
  while (std::getline(file, line)) {
    if (line == table) in_table = true;
    else if (in_table && line.starts_with(key + " = ")) return line.substr(key.size() + 3);
  }
  return "";
}

std::string unquoted(const std::string& text) {
  return text.size() >= 2 && text.front() == '"' && text.back() == '"' ? text.substr(1, text.size() - 2) : text;
}

// Three users had to read share/memplan/frameworks/*.toml to learn a profile's
// defaults: `memplan plugins NAME` shows a profile as it shows a plugin. The
// figures are torchtune.toml's: version "0.4", [defaults.quantized]
// quantize_working_bytes = 68, and the [[since]] block of 0.2 (released
// 2024-07-16) that sets it to 6.
TEST(Cli, PluginsNameShowsAFrameworkProfile) {
  const std::string version = unquoted(profile_value("torchtune", "[framework]", "version"));
  const std::string base_bytes = profile_value("torchtune", "[defaults.quantized]", "quantize_working_bytes");
  const std::string since_version = unquoted(profile_value("torchtune", "[[since]]", "version"));
  const std::string released = profile_value("torchtune", "[[since]]", "released");
  const std::string note = unquoted(profile_value("torchtune", "[[since]]", "note"));
  const std::string since_bytes = profile_value("torchtune", "[since.defaults.quantized]", "quantize_working_bytes");
  for (const std::string& figure : {version, base_bytes, since_version, released, note, since_bytes})
    ASSERT_FALSE(figure.empty()) << "torchtune.toml no longer has a figure this test reads";
  ASSERT_NE(base_bytes, since_bytes) << "the test tells the base default from the dated one by its value";
  CommandResult profile = run_cli("plugins torchtune");
  ASSERT_EQ(profile.exit_code, 0) << profile.err;
  EXPECT_TRUE(profile.out.starts_with("framework torchtune " + version + "\nfile: ")) << profile.out;
  EXPECT_NE(profile.out.find("/frameworks/torchtune.toml\nfrom: built-in\nsummary: "), std::string::npos);
  EXPECT_NE(profile.out.find("\naliases: none\ndefault for: none\n"), std::string::npos) << profile.out;
  // The base default under its table, before the dated blocks; the dated block's own value indented below it.
  const size_t base = profile.out.find("\n  [defaults.quantized]\n");
  const size_t since = profile.out.find("\nsince (");
  ASSERT_NE(base, std::string::npos) << profile.out;
  ASSERT_NE(since, std::string::npos) << profile.out;
  const size_t base_value = profile.out.find("\n    quantize_working_bytes = " + base_bytes + "\n", base);
  EXPECT_LT(base_value, since) << profile.out;
  const size_t block = profile.out.find("\n  version " + since_version + ", released " + released + "\n    note: " +
                                        note + "\n", since);
  ASSERT_NE(block, std::string::npos) << profile.out;
  EXPECT_NE(profile.out.find("\n    [since.defaults.quantized]\n", block), std::string::npos);
  EXPECT_NE(profile.out.find("\n      quantize_working_bytes = " + since_bytes + "\n", block), std::string::npos);
}

// A profile answers to its aliases, in any case and with '_' for '-', as in
// [framework] use; a name that is a plugin's and an alias shows both (the
// aliases are hf-transformers.toml's, megatron-lm.toml's; vllm.toml says
// default_for = "infer" and gives its 0.8 block a GPU condition).
TEST(Cli, PluginsNameFindsAProfileByAlias) {
  CommandResult by_name = run_cli("plugins hf-transformers");
  ASSERT_EQ(by_name.exit_code, 0) << by_name.err;
  EXPECT_TRUE(by_name.out.starts_with("framework hf-transformers ")) << by_name.out;
  const std::string aliases = profile_value("hf-transformers", "[framework]", "aliases");
  ASSERT_TRUE(aliases.starts_with("[\"transformers\", ")) << aliases;
  EXPECT_NE(by_name.out.find("\naliases: transformers, "), std::string::npos) << by_name.out;
  EXPECT_EQ(run_cli("plugins transformers").out, by_name.out);
  EXPECT_EQ(run_cli("plugins Hugging_Face").out, by_name.out);
  CommandResult both = run_cli("plugins megatron");
  ASSERT_EQ(both.exit_code, 0) << both.err;
  EXPECT_TRUE(both.out.starts_with("activations megatron ")) << both.out;
  EXPECT_NE(both.out.find("\n\nframework megatron-lm "), std::string::npos) << both.out;
  CommandResult serving = run_cli("plugins vllm");
  ASSERT_EQ(serving.exit_code, 0) << serving.err;
  EXPECT_NE(serving.out.find("\ndefault for: scenarios of mode \"infer\" without a [framework] table\n"),
            std::string::npos)
      << serving.out;
  const std::string gpus = profile_value("vllm", "[[since]]", "gpu_name_contains");
  ASSERT_FALSE(gpus.empty());
  EXPECT_NE(serving.out.find("\n    only on GPUs where: gpu_name_contains = " + gpus + "\n"), std::string::npos)
      << serving.out;
}

// The header gives the sizes the estimate used; a scenario without [batch]
// sets no sequence length, and the header says so rather than printing 0.
TEST(Cli, HeaderSaysWhenNoSequenceLengthIsSet) {
  const std::string file = ::testing::TempDir() + "/no-batch.toml";
  std::ofstream(file) << "name = \"nb\"\nmode = \"train\"\n[model]\npreset = \"llama-2-7b\"\n[precision]\nuse = \"bf16\"\n"
                         "[optimizer]\nuse = \"sgd\"\n[activations]\nuse = \"none\"\n";
  CommandResult result = run_cli("run " + file);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("\nbatch: micro_batch 1, seq_len not set, grad_accum 1; world size 1 GPU\n"),
            std::string::npos)
      << result.out;
}

TEST(Cli, EveryExampleRunsInEveryFormat) {
  int examples = 0;
  for (const auto& entry : std::filesystem::directory_iterator(source_dir() + "/examples")) {
    if (entry.path().extension() != ".toml") continue;
    ++examples;
    for (const char* format : {"table", "json", "csv", "markdown"}) {
      CommandResult result = run_cli("run " + entry.path().string() + " --format " + format);
      EXPECT_EQ(result.exit_code, 0) << entry.path() << " " << format << ": " << result.err;
      // No size may print as NaN or infinity (as a word: "inference" is fine).
      EXPECT_FALSE(std::regex_search(result.out, std::regex(R"((^|[^a-z])-?(nan|inf)([^a-z]|$))",
                                                            std::regex::icase)))
          << entry.path() << " " << format;
    }
  }
  EXPECT_GE(examples, 1);
}

// Every plugin folder in the source tree (plugins/<kind>/<name>/plugin.cpp)
// must be listed, each from its own library file memplan-<name>.so.
std::set<std::string> plugin_folders() {
  std::set<std::string> names;
  for (const auto& kind : std::filesystem::directory_iterator(source_dir() + "/plugins")) {
    if (!kind.is_directory()) continue;
    for (const auto& folder : std::filesystem::directory_iterator(kind.path()))
      if (std::filesystem::exists(folder.path() / "plugin.cpp")) names.insert(folder.path().filename().string());
  }
  return names;
}

TEST(Cli, PluginsListsEveryBuiltInFromItsOwnLibrary) {
  CommandResult result = run_cli("plugins");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const std::set<std::string> expected = plugin_folders();
  // The ones the issues promise, whatever else is added.
  for (const char* name : {"sgd", "sgdm", "adam", "adamw", "fp32", "mixed-fp16", "mixed-bf16", "bf16", "megatron",
                           "none", "data-parallel", "zero", "tensor-parallel", "pipeline-parallel", "recompute"})
    EXPECT_TRUE(expected.count(name)) << name;
  std::set<std::string> names, libraries, frameworks;
  std::istringstream lines(result.out);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream fields(line);
    std::string kind, name, version, library;
    std::getline(fields, kind, '\t');
    std::getline(fields, name, '\t');
    std::getline(fields, version, '\t');
    std::getline(fields, library, '\t');
    if (kind == "framework") {  // profiles are data files in the catalog, not libraries
      frameworks.insert(name);
      EXPECT_EQ(library, data_dir() + "/frameworks/" + name + ".toml");
      continue;
    }
    names.insert(name);
    libraries.insert(library);
    EXPECT_EQ(library, plugin_dir() + "/memplan-" + name + ".so");
  }
  EXPECT_EQ(names, expected);
  EXPECT_EQ(libraries.size(), expected.size());
  std::set<std::string> profile_folders;
  for (const auto& folder : std::filesystem::directory_iterator(source_dir() + "/plugins/frameworks"))
    if (std::filesystem::exists(folder.path() / "profile.toml")) profile_folders.insert(folder.path().filename().string());
  EXPECT_EQ(frameworks, profile_folders);
}

TEST(Cli, ErrorsExitNonZeroWithOneParagraph) {
  TempDir dir;
  const std::string file = dir.write("broken.toml", "name = \"x\"\nmode = \"train\"\n[model\n");
  CommandResult syntax = run_cli("run " + file);
  EXPECT_EQ(syntax.exit_code, 1);
  EXPECT_EQ(syntax.out, "");
  EXPECT_EQ(syntax.err.rfind(file + ":3:", 0), 0u) << syntax.err;
  EXPECT_EQ(syntax.err.find('\n'), syntax.err.size() - 1);  // one paragraph, one line

  CommandResult missing = run_cli("run " + dir.path() + "/absent.toml");
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_EQ(missing.err, dir.path() + "/absent.toml: error: cannot read the scenario file: it does not exist\n");

  CommandResult format = run_cli("run " + example("llama2-7b-single-gpu.toml") + " --format yaml");
  EXPECT_EQ(format.exit_code, 2);
  EXPECT_EQ(format.err, "memplan: error: unknown --format 'yaml'; use table, json, csv, markdown or html\n");

  CommandResult command = run_cli("estimate");
  EXPECT_EQ(command.exit_code, 2);
}

// Issue 14 finding 10. RFC 3629 decoding, written here independently of the
// core: each sequence's code point must be in range for its length (no
// overlong forms), at most U+10FFFF, and not a surrogate.
bool is_valid_utf8(const std::string& text) {
  static constexpr char32_t kSmallest[4] = {0, 0x80, 0x800, 0x10000};
  for (size_t i = 0; i < text.size();) {
    const unsigned char lead = static_cast<unsigned char>(text[i]);
    const int extra = lead < 0x80 ? 0 : (lead & 0xe0) == 0xc0 ? 1 : (lead & 0xf0) == 0xe0 ? 2 : (lead & 0xf8) == 0xf0 ? 3 : -1;
    if (extra < 0 || i + static_cast<size_t>(extra) >= text.size()) return false;
    char32_t code = lead & (extra == 0 ? 0x7f : 0x3f >> extra);
    for (int k = 1; k <= extra; ++k) {
      const unsigned char next = static_cast<unsigned char>(text[i + static_cast<size_t>(k)]);
      if ((next & 0xc0) != 0x80) return false;
      code = (code << 6) | (next & 0x3f);
    }
    if (code < kSmallest[extra] || code > 0x10ffff || (code >= 0xd800 && code <= 0xdfff)) return false;
    i += static_cast<size_t>(extra) + 1;
  }
  return true;
}

// The example, less its `name` line, so the scenario is named after its file.
std::string unnamed_example() {
  std::ifstream in(example("llama2-7b-single-gpu.toml"));
  std::string text(std::istreambuf_iterator<char>(in), {});
  const size_t name = text.find("\nname = ");
  text.erase(name + 1, text.find('\n', name + 1) - name);
  return text;
}

// JSON text is UTF-8 (RFC 8259, section 8.1): a file name byte that is not
// becomes U+FFFD, written as the escape \ufffd.
TEST(Cli, JsonStaysValidUtf8WhenTheFileNameIsNot) {
  TempDir dir;
  const std::string file = dir.write("bad\xff\xfe-name.toml", unnamed_example());
  CommandResult result = run_cli("run '" + file + "' --format json");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_TRUE(is_valid_utf8(result.out));
  EXPECT_NE(result.out.find("\"scenario\": \"bad\\ufffd\\ufffd-name\","), std::string::npos) << result.out;
  EXPECT_FALSE(is_valid_utf8("bad\xff"));  // the checker itself rejects what the file name holds
  EXPECT_FALSE(is_valid_utf8("\xc0\xaf"));  // an overlong '/'
}

// A scenario name (or a file name in an error) with terminal escape sequences
// is shown with each control byte as \xNN: ESC ] 0 ; ... BEL would set the
// window title, ESC [ 2 J clear the screen.
TEST(Cli, TerminalOutputShowsControlCharactersEscaped) {
  TempDir dir;
  const std::string named = "name = \"evil\\u001b]0;pwned\\u0007\\u001b[2J\"\n" + unnamed_example();
  const std::string file = dir.write("named.toml", named);
  const std::string shown = "evil\\x1b]0;pwned\\x07\\x1b[2J";
  CommandResult table = run_cli("run '" + file + "'");
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_EQ(table.out.substr(0, table.out.find('\n')), "memplan estimate: " + shown + " (train)");
  CommandResult markdown = run_cli("run '" + file + "' --format markdown");
  ASSERT_EQ(markdown.exit_code, 0) << markdown.err;
  EXPECT_EQ(markdown.out.substr(0, markdown.out.find('\n')), "### " + shown);
  CommandResult json = run_cli("run '" + file + "' --format json");
  EXPECT_NE(json.out.find("\"scenario\": \"evil\\u001b]0;pwned\\u0007\\u001b[2J\","), std::string::npos);
  for (const std::string* out : {&table.out, &markdown.out, &json.out})
    EXPECT_EQ(out->find_first_of("\x1b\x07"), std::string::npos);

  const std::string broken = dir.write("esc\x1b[2J.toml", "name = \"x\"\nmode = \"train\"\n[model\n");
  CommandResult error = run_cli("run '" + broken + "'");
  EXPECT_EQ(error.exit_code, 1);
  EXPECT_EQ(error.err.rfind(dir.path() + "/esc\\x1b[2J.toml:3:", 0), 0u) << error.err;
  EXPECT_EQ(error.err.find('\x1b'), std::string::npos);
  EXPECT_EQ(error.err.find('\n'), error.err.size() - 1);
}

TEST(Cli, VersionAndHelp) {
  CommandResult version = run_cli("--version");
  EXPECT_EQ(version.exit_code, 0);
  EXPECT_EQ(version.out.rfind("memplan ", 0), 0u);
  EXPECT_NE(version.out.find("plugin ABI 1.3"), std::string::npos);
  CommandResult help = run_cli("--help");
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("run FILE"), std::string::npos);
}

TEST(Cli, TableSaysWhetherItFitsAndWhatToChange) {
  CommandResult result = run_cli("run " + example("llama2-7b-single-gpu.toml"));
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("fits (device memory): no"), std::string::npos);
  EXPECT_NE(result.out.find("what to change:"), std::string::npos);
  EXPECT_NE(result.out.find("GiB"), std::string::npos);
}

}  // namespace
}  // namespace memplan::testing

namespace memplan::testing {
namespace {

// Issue 3's bar: every plugin is used by at least one example scenario (and
// EveryExampleRunsInEveryFormat runs them all).
TEST(Cli, EveryPluginHasAnExample) {
  std::string all_examples;
  for (const auto& entry : std::filesystem::directory_iterator(source_dir() + "/examples")) {
    if (entry.path().extension() != ".toml") continue;
    std::ifstream in(entry.path());
    all_examples += std::string(std::istreambuf_iterator<char>(in), {});
  }
  for (const std::string& name : plugin_folders())
    EXPECT_NE(all_examples.find("use = \"" + name + "\""), std::string::npos) << "no example uses " << name;
}

}  // namespace
}  // namespace memplan::testing
