// `memplan validate`: the measured-run cases, their table and summary line,
// and their errors (docs/validation.md).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "memplan/core/install_layout.hpp"
#include "memplan/core/validation.hpp"
#include "test_support.hpp"

namespace memplan::testing {
namespace {

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

const std::string kScenario =
    "name = \"v\"\nmode = \"train\"\n[model]\npreset = \"llama-2-7b\"\n[precision]\nuse = \"bf16\"\n"
    "[optimizer]\nuse = \"sgd\"\n[activations]\nuse = \"none\"\n";

std::string with_header(uint64_t measured, const std::string& quantity, const std::string& extra = "") {
  return "# a measured run\n# measured_bytes = " + std::to_string(measured) + "\n# quantity = " + quantity +
         "\n# framework = pytorch\n" + extra + "\n" + kScenario;
}

// The estimate of each quantity is compared with the measurement; a case is
// within its tolerance (10 % unless it states one) or the command fails.
TEST(Validate, TableSummaryAndExitStatus) {
  const Breakdown b = evaluate(kScenario).breakdown();
  const uint64_t allocated = b.quantities[kAllocated].peak;
  TempDir dir;
  dir.write("a-exact.toml", with_header(allocated, "allocated"));
  dir.write("b-half.toml", with_header(2 * allocated, "allocated"));  // estimate -50 %
  const CommandResult result = run_cli("validate " + dir.path());
  EXPECT_EQ(result.exit_code, 1) << result.err;
  EXPECT_NE(result.out.find("a-exact"), std::string::npos);
  EXPECT_NE(result.out.find("-50.0 %"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("OUTSIDE"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("validation: 2 cases, median |error| 25.0 %, max |error| 50.0 % (b-half), "
                            "within 10 %: 1/2\n"),
            std::string::npos)
      << result.out;
  // A stated tolerance: -50 % within 60 %.
  TempDir wide;
  wide.write("c.toml", with_header(2 * allocated, "allocated", "# tolerance_percent = 60\n"));
  EXPECT_EQ(run_cli("validate " + wide.path()).exit_code, 0);
  // The device quantity of the same run.
  TempDir device;
  device.write("d.toml", with_header(b.quantities[kDevice].peak, "device"));
  const CommandResult d = run_cli("validate " + device.path() + "/d.toml");
  EXPECT_EQ(d.exit_code, 0) << d.out << d.err;
  EXPECT_NE(d.out.find("+0.0 %"), std::string::npos) << d.out;
}

// --by-framework: a table per profile between the cases and the summary line,
// which stays last. The two cases above: errors 0 and -50 % => median |error|
// 25.0 %, median signed -25.0 %, one estimate below the measurement, one of
// two within 10 %.
TEST(Validate, ByFrameworkBeforeTheSummaryLine) {
  const uint64_t allocated = evaluate(kScenario).breakdown().quantities[kAllocated].peak;
  TempDir dir;
  dir.write("a-exact.toml", with_header(allocated, "allocated"));
  dir.write("b-half.toml", with_header(2 * allocated, "allocated"));
  const CommandResult result = run_cli("validate " + dir.path() + " --by-framework");
  EXPECT_EQ(result.exit_code, 1) << result.err;
  const std::string block =
      "\nframework  cases  median |error|  median error  below  within 10 %\n"
      "pytorch        2          25.0 %       -25.0 %      1          1/2\n"
      "validation: 2 cases, median |error| 25.0 %, max |error| 50.0 % (b-half), within 10 %: 1/2\n";
  ASSERT_GE(result.out.size(), block.size()) << result.out;
  EXPECT_EQ(result.out.substr(result.out.size() - block.size()), block) << result.out;
  // Without the flag the table ends with the summary line alone.
  EXPECT_EQ(run_cli("validate " + dir.path()).out.find("median error"), std::string::npos);
  // A case that could not be estimated counts among the cases only.
  TempDir broken;
  std::string text = with_header(allocated, "allocated");
  text.replace(text.find("llama-2-7b"), 10, "no-such-model");
  broken.write("c-broken.toml", text);
  const CommandResult failed = run_cli("validate " + broken.path() + " --by-framework");
  EXPECT_NE(failed.out.find("\npytorch        1  none estimated\nvalidation: 1 cases, none estimated\n"), std::string::npos)
      << failed.out;
}

TEST(Validate, CaseErrorsAreLocated) {
  TempDir dir;
  const std::string missing = dir.write("m.toml", "# quantity = device\n" + kScenario);
  CommandResult result = run_cli("validate " + missing);
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_EQ(result.err, missing + ":1:1: error: a validation case needs '# measured_bytes = N' and '# quantity = "
                                  "allocated|reserved|device' in its leading comment block (measured_bytes is "
                                  "missing)\n");
  const std::string bad = dir.write("q.toml", "# measured_bytes = 10\n# quantity = smi\n" + kScenario);
  result = run_cli("validate " + bad);
  EXPECT_EQ(result.err, bad + ":2:1: error: quantity must be allocated, reserved or device, got 'smi'\n");
  result = run_cli("validate " + dir.path() + "/absent");
  EXPECT_EQ(result.err, dir.path() + "/absent: error: no such validation case or folder\n");
  // A machine key given twice: the later line would silently win, so neither does.
  const std::string twice = dir.write(
      "t.toml", "# measured_bytes = 10\n# quantity = device\n# tolerance_percent = 10\n# tolerance_percent = 35\n" +
                    kScenario);
  result = run_cli("validate " + twice);
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_EQ(result.err, twice + ":4:1: error: 'tolerance_percent' is given twice in the case's leading comment "
                                "block (first on line 3): keep one\n");
}

// A case states the framework that ran it. Without a [framework] table the
// case is estimated under the profile its framework line names (a name or an
// alias, with an optional version), not the default; a note on standard error
// says so. A table in the scenario wins; a line naming no profile leaves the
// default and says that too. Llama-3.2-1B, 1024 tokens: the loss path differs
// between transformers 4.38 and the default profile (Profiles.VersionPicksTheLossPath).
TEST(Validate, FrameworkLineChoosesTheProfile) {
  const std::string body =
      "name = \"f\"\nmode = \"train\"\n[model]\npreset = \"llama-3.2-1b\"\n[batch]\nseq_len = 1024\n"
      "[precision]\nuse = \"bf16\"\n[optimizer]\nuse = \"sgd\"\n[activations]\nuse = \"megatron\"\n";
  const std::string framework_table = "[framework]\nuse = \"hf-transformers\"\nversion = \"4.38\"\n";
  const uint64_t hf438 =
      evaluate("name = \"f\"\nmode = \"train\"\n" + framework_table + body.substr(body.find("[model]")))
          .breakdown()
          .quantities[kAllocated]
          .peak;
  const uint64_t plain = evaluate(body).breakdown().quantities[kAllocated].peak;
  ASSERT_NE(hf438, plain);
  auto header = [&](const std::string& line) {
    return "# measured_bytes = " + std::to_string(hf438) + "\n# quantity = allocated\n# framework = " + line + "\n\n";
  };
  TempDir dir;
  const std::string named = dir.write("named.toml", header("transformers 4.38 (Trainer)") + body);
  CommandResult result = run_cli("validate " + named);
  EXPECT_EQ(result.exit_code, 0) << result.out << result.err;
  EXPECT_NE(result.out.find("hf-transformers  allocated"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("+0.0 %"), std::string::npos) << result.out;
  EXPECT_EQ(result.err, named + ": note: no [framework] table: estimated under profile 'hf-transformers' 4.38, which "
                                "its '# framework = transformers 4.38 (Trainer)' line names\n");
  // A version written next to software built on the framework is that software's, not the
  // profile's: it is dropped, and the note says so.
  const std::string peft = dir.write("peft.toml", header("peft 0.10") + body);
  result = run_cli("validate " + peft);
  EXPECT_NE(result.err.find("estimated under profile 'hf-transformers', which its '# framework = peft 0.10' line "
                            "names; the version '0.10' is peft's, not hf-transformers's, so the profile's latest "
                            "stands"),
            std::string::npos)
      << result.err;
  // The profile's own version spelling counts (Megatron-LM's core_r0.14.0).
  const std::string mcore = dir.write("mcore.toml", header("megatron core_r0.13.0") + body);
  EXPECT_NE(run_cli("validate " + mcore).err.find("profile 'megatron-lm' core_r0.13.0"), std::string::npos);
  // The scenario's warnings are said too: a generic value read the framework's way.
  const std::string unfused = dir.write(
      "unfused.toml", header("hf-transformers 4.38") + body + "cross_entropy = \"unfused\"\n");
  result = run_cli("validate " + unfused);
  EXPECT_NE(result.err.find(unfused + ":17:17: warning: in [activations], cross_entropy = \"unfused\" is read as "
                                      "\"upcast-shift-copy\""),
            std::string::npos)
      << result.err;
  // A name of several words: the longest run of leading words, joined by '-', that a profile answers to.
  const std::string words = dir.write("words.toml", header("Hugging Face Transformers 4.38 (Trainer)") + body);
  result = run_cli("validate " + words);
  EXPECT_NE(result.err.find("estimated under profile 'hf-transformers' 4.38, which its '# framework = Hugging Face "
                            "Transformers 4.38 (Trainer)' line names"),
            std::string::npos)
      << result.err;
  EXPECT_NE(result.out.find("+0.0 %"), std::string::npos) << result.out;
  const std::string fsdp = dir.write("fsdp.toml", header("PyTorch FSDP") + body);
  EXPECT_NE(run_cli("validate " + fsdp).err.find("estimated under profile 'pytorch-fsdp1'"), std::string::npos);
  // The word after the name is a version only when it starts with a number (or v and a number).
  EXPECT_NE(run_cli("validate " + dir.write("v.toml", header("deepspeed v0.14.2 (ZeRO-3)") + body))
                .err.find("estimated under profile 'deepspeed' 0.14.2, which"),
            std::string::npos);
  EXPECT_NE(run_cli("validate " + dir.write("z.toml", header("deepspeed ZeRO-3") + body))
                .err.find("estimated under profile 'deepspeed', which its '# framework = deepspeed ZeRO-3' line names\n"),
            std::string::npos);
  EXPECT_EQ(read_validation_case(dir.write("n.toml", header("fsdp_qlora (train.py)") + body)).framework_words,
            std::vector<std::string>{"fsdp_qlora"});
  // The scenario's own table decides; the line is then only a label.
  const std::string table = dir.write("table.toml", header("megatron") + "name = \"f\"\nmode = \"train\"\n" +
                                                        framework_table + body.substr(body.find("[model]")));
  result = run_cli("validate " + table);
  EXPECT_EQ(result.exit_code, 0) << result.out << result.err;
  EXPECT_EQ(result.err, "");
  // A line naming no profile: the default, and a note that says how to fix it.
  const std::string unknown = dir.write("unknown.toml", header("in-house-trainer") + body);
  result = run_cli("validate " + unknown);
  EXPECT_NE(result.out.find("pytorch "), std::string::npos) << result.out;
  EXPECT_EQ(result.err.rfind(unknown + ": note: '# framework = in-house-trainer' names no framework profile (known: "
                                       "deepspeed, ",
                             0),
            0u)
      << result.err;
  EXPECT_NE(result.err.find("); estimated under the default profile 'pytorch'. Add a [framework] table to say what "
                            "ran it\n"),
            std::string::npos)
      << result.err;
}

// The shared calibration files as written (validation/as-written/: no
// [framework] tables) run under the same profile as the project's own copy of
// each run, which names it in its [framework] table: their framework lines
// (megatron, fsdp_qlora, hf-transformers, torchtune, vllm) reach it through
// the aliases and the name key, and the note on standard error says so.
TEST(Validate, SharedFilesAsWrittenRunUnderTheirCopysProfile) {
  const std::string folder = source_dir() + "/validation/as-written";
  size_t checked = 0;
  for (const auto& entry : std::filesystem::directory_iterator(folder)) {
    if (entry.path().extension() != ".toml") continue;
    const std::string id = entry.path().stem().string();
    const std::string copy = read_text(source_dir() + "/validation/" + id + ".toml");
    const size_t table = copy.find("\n[framework]\nuse = \"");
    ASSERT_NE(table, std::string::npos) << id;
    const size_t from = table + std::string("\n[framework]\nuse = \"").size();
    const std::string profile = copy.substr(from, copy.find('"', from) - from);
    const CommandResult result = run_cli("validate " + entry.path().string());
    EXPECT_NE(result.out.find(id + "  " + profile + " "), std::string::npos) << result.out;
    EXPECT_NE(result.err.find("note: no [framework] table: estimated under profile '" + profile + "'"),
              std::string::npos)
        << result.err;
    ++checked;
  }
  EXPECT_EQ(checked, 14u);
}

// The project's own suite runs: every case in validation/ is estimated (each is
// also a ctest of its own, validation.<id>, against its tolerance).
TEST(Validate, ProjectSuiteEstimatesEveryCase) {
  const CommandResult result = run_cli("validate " + source_dir() + "/validation");
  EXPECT_EQ(result.out.find("FAILED"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("validation: "), std::string::npos) << result.out;
}

// A case's '# framework = ...' line says what its [framework] table says: run
// without the table, as a file written only with the line would be (the
// shared calibration files are), every case of the suite gets the same
// profile and the same estimate, to the byte, and none fails. The line
// carries the version (or the month, as "megatron-lm 2023-07") that the
// table gives.
TEST(Validate, EveryCasesFrameworkLineGivesItsTablesEstimate) {
  const std::string suite = source_dir() + "/validation";
  const InstallLayout layout = layout_beside(current_executable());
  const Catalog cases_catalog = Catalog::load(layout.data_dir);
  TempDir lines;
  size_t stripped = 0, compared = 0;
  for (const auto& entry : std::filesystem::directory_iterator(suite)) {
    if (entry.path().extension() != ".toml") continue;
    std::string text = read_text(entry.path().string());
    const size_t table = text.find("\n[framework]\n");
    if (table == std::string::npos) continue;
    const size_t end = text.find("\n[", table + 1);  // the next table
    text.erase(table + 1, (end == std::string::npos ? text.size() : end + 1) - (table + 1));
    ++stripped;
    const std::string id = entry.path().stem().string();
    const ValidationResult with_table =
        validate_case(read_validation_case(entry.path().string()), cases_catalog, layout, PluginLoadOptions{});
    const ValidationResult with_line = validate_case(read_validation_case(lines.write(id + ".toml", text)),
                                                     cases_catalog, layout, PluginLoadOptions{});
    ASSERT_TRUE(with_table.failure.empty()) << id << ": " << with_table.failure;
    ASSERT_TRUE(with_line.failure.empty()) << id << ": " << with_line.failure;
    EXPECT_EQ(with_line.test.framework, with_table.test.framework) << id;
    EXPECT_EQ(with_line.estimate, with_table.estimate)
        << id << ": its '# framework = ' line gives another estimate than its [framework] table";
    ++compared;
  }
  EXPECT_GT(stripped, 400u);
  EXPECT_EQ(compared, stripped);
}

}  // namespace
}  // namespace memplan::testing
