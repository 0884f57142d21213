// A run known by its day: [[since]] `released` days in a profile, the
// scenario's [framework] date, and `memplan validate` reading the date a
// case's header gives when its framework line names no version
// (docs/frameworks.md, docs/validation.md). The release days are those of
// plugins/frameworks/hf-transformers/README.md ("Release days").
#include <gtest/gtest.h>

#include <ctime>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "memplan/core/validation.hpp"
#include "test_support.hpp"

namespace memplan::testing {
namespace {

constexpr uint64_t kMiB = 1024 * 1024;

// Llama-3.2-1B, 1,024 tokens, the eager layer of hf-transformers.
std::string llama1b(const std::string& framework) {
  return "name = \"d\"\nmode = \"train\"\n[framework]\nuse = \"hf-transformers\"\n" + framework +
         "[model]\npreset = \"llama-3.2-1b\"\n[batch]\nseq_len = 1024\n[precision]\nuse = \"bf16\"\n"
         "[optimizer]\nuse = \"sgd\"\n[activations]\nuse = \"megatron\"\n";
}

// The loss path by day: 4.46 (released 2024-10-24) upcasts in the loss and
// copies the shifted logits, 10 bytes per logit at the forward high point;
// the day before, 4.39's path keeps 8 (Profiles.VersionPicksTheLossPath has
// both figures by version); that day's version is 4.42 (2024-06-27), whose
// block changes only generate's cache (inference previous_cache_held).
// 1,024 x 128,256 logits.
TEST(RunDates, TheDayPicksTheVersionReleasedByThen) {
  constexpr uint64_t kLogits = 1024ull * 128'256;
  const Evaluation on_release(llama1b("date = 2024-10-24\n"));
  EXPECT_EQ(on_release.item_bytes("activations.loss_forward", MEMPLAN_ROLE_ACTIVATIONS), 10 * kLogits);
  EXPECT_EQ(on_release.scenario().framework.version, "4.46");
  EXPECT_EQ(on_release.scenario().framework.date, "2024-10-24");
  const Evaluation day_before(llama1b("date = \"2024-10-23\"\n"));  // a string is read the same way
  EXPECT_EQ(day_before.item_bytes("activations.loss_forward", MEMPLAN_ROLE_ACTIVATIONS), 8 * kLogits);
  EXPECT_EQ(day_before.scenario().framework.version, "4.42");
}

// Before every dated version the profile's own defaults hold: in January 2022
// (transformers 4.15 on torch 1.10) eager attention's softmax keeps its input
// and the CUDA context loads every kernel, 1343 MiB (cuda-context's eager
// figure, HF's model_memory_anatomy.md); the estimate is the one a scenario
// naming version 4.16 gets. From 4.24 (2022-11-01, after torch 1.13) the
// context is the lazy 767 MiB.
TEST(RunDates, BeforeTheFirstVersionTheProfilesOwnDefaultsHold) {
  const Evaluation early(llama1b("date = 2022-01-11\n"));
  EXPECT_EQ(early.scenario().framework.version, "before 4.18");
  EXPECT_EQ(early.item_bytes("cuda_context", MEMPLAN_ROLE_OVERHEAD), 1343 * kMiB);
  const Evaluation named(llama1b("version = \"4.16\"\n"));
  for (size_t q = 0; q < early.breakdown().quantities.size(); ++q)
    EXPECT_EQ(early.breakdown().quantities[q].peak, named.breakdown().quantities[q].peak) << "quantity " << q;
  EXPECT_EQ(Evaluation(llama1b("date = 2022-10-31\n")).item_bytes("cuda_context", MEMPLAN_ROLE_OVERHEAD), 1343 * kMiB);
  EXPECT_EQ(Evaluation(llama1b("date = 2022-11-01\n")).item_bytes("cuda_context", MEMPLAN_ROLE_OVERHEAD), 767 * kMiB);
  // A context size the scenario measured wins over the profile's module loading.
  EXPECT_EQ(Evaluation(llama1b("date = 2022-01-11\n") + "[[strategy]]\nuse = \"cuda-context\"\nmib = 1100\n")
                .item_bytes("cuda_context", MEMPLAN_ROLE_OVERHEAD),
            1100 * kMiB);
}

// A day (or a month) written where the version goes, for a profile that
// numbers its versions otherwise ("4.46"): as a version it would compare
// later than every one the profile knows (2024 > 4), the latest behaviour.
// It is read as the run's day, with a warning that says to write date. A
// month is its last day (as validation reads a month in a case's prose). A
// profile whose versions are years themselves (fsdp-qlora "2024.03.26") keeps
// it as a version; date-shaped text that is no day of 2000-2099 stays a
// version with a warning, as does a day for a profile whose versions give no
// days to place it among.
TEST(RunDates, ADayWrittenAsTheVersionIsTheRunsDay) {
  constexpr uint64_t kLogits = 1024ull * 128'256;
  const Evaluation day(llama1b("version = \"2024-10-23\"\n"));
  EXPECT_EQ(day.scenario().framework.version, "4.42");  // the newest released by then (4.39's loss path)
  EXPECT_EQ(day.scenario().framework.date, "2024-10-23");
  EXPECT_EQ(day.item_bytes("activations.loss_forward", MEMPLAN_ROLE_ACTIVATIONS), 8 * kLogits);
  ASSERT_EQ(day.scenario().warnings.size(), 1u);
  EXPECT_EQ(day.scenario().warnings[0],
            "scenario.toml:5:11: warning: in [framework], version \"2024-10-23\" is a day, not a version of "
            "'hf-transformers' (its versions read like \"" + catalog().find_framework("hf-transformers")->version +
                "\"): read as date = 2024-10-23; write date = 2024-10-23 (or the version that ran) instead");
  const Evaluation month(llama1b("version = \"2024-11\"\n"));
  EXPECT_EQ(month.scenario().framework.date, "2024-11-30");
  EXPECT_EQ(month.scenario().framework.version, "4.46");
  EXPECT_EQ(Evaluation(llama1b("version = \"2024-02\"\n")).scenario().framework.date, "2024-02-29");  // leap year
  EXPECT_NE(error_of(llama1b("version = \"2024-10-23\"\ndate = 2024-10-23\n")).find("is a day, and date gives the "
                                                                                   "run's day too; keep date"),
            std::string::npos);
  // Not a day: a version like any other; date-shaped text that is no day, with a warning.
  EXPECT_EQ(Evaluation(llama1b("version = \"4.46\"\n")).scenario().framework.date, "");
  for (const char* shaped : {"2024-13", "2024-02-30", "0000-01", "1999-12-31"}) {
    const Evaluation odd(llama1b(std::string("version = \"") + shaped + "\"\n"));
    EXPECT_EQ(odd.scenario().framework.date, "") << shaped;
    EXPECT_EQ(odd.scenario().framework.version, shaped);
    ASSERT_EQ(odd.scenario().warnings.size(), 1u) << shaped;
    EXPECT_NE(odd.scenario().warnings[0].find("has a date's shape but is no day of 2000-2099"), std::string::npos)
        << odd.scenario().warnings[0];
  }
  const FrameworkProfile& hf = *catalog().find_framework("hf-transformers");
  EXPECT_EQ(day_written_as_version("2024-10-23rc1", hf).day, "");
  EXPECT_FALSE(day_written_as_version("2024-10-23rc1", hf).date_shaped);
  EXPECT_FALSE(day_written_as_version("2024.03.26", hf).date_shaped);
  EXPECT_EQ(day_written_as_version("2024-03-26", *catalog().find_framework("fsdp-qlora")).day, "");
  EXPECT_FALSE(day_written_as_version("2024-03-26", *catalog().find_framework("fsdp-qlora")).date_shaped);
  // A profile whose versions give no days (its [[since]] block has no `released`): the day stays a version.
  TempDir dir;
  dir.write("gpus.toml", "");
  std::filesystem::create_directories(dir.path() + "/frameworks");
  dir.write("frameworks/team.toml", "[framework]\nname = \"team\"\nsummary = \"t\"\nversion = \"3\"\n[[since]]\n"
                                    "version = \"2\"\n[since.defaults.sgd]\nmomentum = 0.9\n");
  const Scenario team = parse_scenario(
      "name = \"t\"\nmode = \"train\"\n[framework]\nuse = \"team\"\nversion = \"2024-01-01\"\n[model]\n"
      "params = 1e9\n[precision]\nuse = \"bf16\"\n[optimizer]\nuse = \"sgd\"\n[activations]\nuse = \"none\"\n",
      "t.toml", Catalog::load(dir.path()));
  EXPECT_EQ(team.framework.version, "2024-01-01");
  EXPECT_EQ(team.framework.date, "");
  ASSERT_EQ(team.warnings.size(), 1u);
  EXPECT_NE(team.warnings[0].find("its [[since]] block of version 2 gives no released day to place it among: it is "
                                  "compared as a version number"),
            std::string::npos)
      << team.warnings[0];
}

TEST(RunDates, TheReportsNameTheDay) {
  TempDir dir;
  const std::string file = dir.write("d.toml", llama1b("date = 2022-01-11\n"));
  const CommandResult json = run_cli("run " + file + " --format json");
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const nlohmann::json report = nlohmann::json::parse(json.out);
  EXPECT_EQ(report["framework"]["version"], "before 4.18");
  EXPECT_EQ(report["framework"]["date"], "2022-01-11");
  EXPECT_NE(run_cli("run " + file).out.find("framework: hf-transformers before 4.18 (as of 2022-01-11)"),
            std::string::npos);
  // Without a date the JSON has no date key (the contract only grows).
  const std::string plain = dir.write("p.toml", llama1b(""));
  EXPECT_FALSE(nlohmann::json::parse(run_cli("run " + plain + " --format json").out)["framework"].contains("date"));
}

TEST(RunDates, ScenarioDateErrorsAreLocated) {
  EXPECT_EQ(error_of(llama1b("date = \"2022-13-01\"\n")),
            "scenario.toml:5:8: error: in [framework], 'date' must be the day of the run, YYYY-MM-DD (e.g. date = "
            "2024-03-14)");
  EXPECT_NE(error_of(llama1b("date = \"Jan 2022\"\n")).find("'date' must be the day of the run"), std::string::npos);
  EXPECT_NE(error_of(llama1b("version = \"4.46\"\ndate = 2024-10-24\n"))
                .find("'date' and version both say which behaviour of 'hf-transformers' the run had; keep one of them"),
            std::string::npos);
  // A profile whose [[since]] block gives no day cannot place a date.
  TempDir dir;
  dir.write("gpus.toml", "");
  std::filesystem::create_directories(dir.path() + "/frameworks");
  const std::string team = dir.write("frameworks/team.toml",
                                     "[framework]\nname = \"team\"\nsummary = \"t\"\n[[since]]\nversion = \"2\"\n"
                                     "[since.defaults.sgd]\nmomentum = 0.9\n");
  const Catalog custom = Catalog::load(dir.path());
  try {
    (void)parse_scenario("name = \"t\"\nmode = \"train\"\n[framework]\nuse = \"team\"\ndate = 2024-01-01\n"
                         "[model]\nparams = 1e9\n[precision]\nuse = \"bf16\"\n[optimizer]\nuse = \"sgd\"\n"
                         "[activations]\nuse = \"none\"\n",
                         "t.toml", custom);
    FAIL() << "a date was placed among undated versions";
  } catch (const Error& error) {
    EXPECT_EQ(std::string(error.what()),
              "t.toml:5:8: error: in [framework], 'date' cannot choose among the versions of framework 'team': its "
              "[[since]] block of version 2 gives no released day (" + team +
                  ":4:1); give version = \"<the run's version>\" instead");
  }
}

// `released` is a day, and versions are released in order.
TEST(RunDates, ReleasedDaysAreCheckedWhenTheCatalogLoads) {
  TempDir dir;
  dir.write("gpus.toml", "");
  std::filesystem::create_directories(dir.path() + "/frameworks");
  auto load_error = [&](const std::string& since) {
    const std::string file =
        dir.write("frameworks/team.toml", "[framework]\nname = \"team\"\nsummary = \"t\"\n" + since);
    try {
      (void)Catalog::load(dir.path());
    } catch (const Error& error) {
      return std::string(error.what()).substr(file.size());
    }
    return std::string("(loaded)");
  };
  EXPECT_EQ(load_error("[[since]]\nversion = \"2\"\nreleased = \"2024-02-30\"\n"),
            ":6:12: error: in [[since]], 'released' must be the day the version was first released, YYYY-MM-DD "
            "(e.g. 2024-10-24)");
  EXPECT_EQ(load_error("[[since]]\nversion = \"2\"\nreleased = 2024-03-01\n[[since]]\nversion = \"3\"\n"
                       "released = 2024-02-01\n"),
            ":9:12: error: in [[since]], 'released' is before the day of the [[since]] block of version 2 "
            "(2024-03-01); versions are released in order");
  EXPECT_EQ(load_error("[[since]]\nversion = \"2\"\nreleased = 2024-02-29\n"), "(loaded)");  // a leap day
  // One version, one day (vllm gives two GPU-conditional blocks of 0.9).
  EXPECT_EQ(load_error("[[since]]\nversion = \"2\"\nreleased = 2024-03-01\n[[since]]\nversion = \"2\"\n"
                       "released = 2024-03-02\n"),
            ":9:12: error: in [[since]], 'released' is 2024-03-02, but the [[since]] block of the same version 2 says "
            "2024-03-01; one version has one release day");
  // A profile with no dated versions has one behaviour, so a date has nothing to choose: refused, not ignored.
  // fsdp-qlora extends hf-transformers at 4.38; the blocks it inherits hold at every version of it.
  const std::string aa = "name = \"a\"\nmode = \"train\"\n[framework]\nuse = \"fsdp-qlora\"\ndate = 2022-01-11\n"
                         "[model]\npreset = \"llama-3.2-1b\"\n[batch]\nseq_len = 1024\n[precision]\nuse = \"bf16\"\n"
                         "[optimizer]\nuse = \"sgd\"\n[activations]\nuse = \"megatron\"\n";
  EXPECT_EQ(error_of(aa), "scenario.toml:5:8: error: in [framework], 'date' has nothing to choose: framework "
                          "'fsdp-qlora' describes one behaviour (version 2024.03.26), with no dated [[since]] versions; "
                          "remove date (or give version, which the report names)");
  EXPECT_EQ(catalog().find_framework("fsdp-qlora")->version_on("2022-01-11"), "0");
}

// The date a case's header gives first, in the spellings published runs use.
TEST(RunDates, ValidationReadsTheFirstDateOfTheHeader) {
  TempDir dir;
  auto date_of = [&](const std::string& prose) {
    const ValidationCase test = read_validation_case(
        dir.write("c.toml", "# c: a run\n" + prose + "\n# measured_bytes = 1000\n# quantity = allocated\n"
                            "# framework = hf-transformers\n\nname = \"c\"\n"));
    return test.run_date.empty() ? std::string("-") : test.run_date + " " + std::to_string(test.run_date_line) + " " +
                                                          test.run_date_text;
  };
  EXPECT_EQ(date_of("#   run on 'Tue Jan 11 2022', Tesla V100"), "2022-01-11 2 Jan 11 2022");
  EXPECT_EQ(date_of("# source: README.md @ 1814feb (2024-11-18), \"Optimization flags\""),
            "2024-11-18 2 2024-11-18");
  EXPECT_EQ(date_of("# source: benchmarks (runs Feb-Mar 2024)"), "2024-03-31 2 Mar 2024");  // a month: its last day
  EXPECT_EQ(date_of("# log of Feb 2024"), "2024-02-29 2 Feb 2024");
  EXPECT_EQ(date_of("# posted January 11, 2022 by the team"), "2022-01-11 2 January 11, 2022");
  EXPECT_EQ(date_of("# posted 11 Jan 2022"), "2022-01-11 2 11 Jan 2022");
  EXPECT_EQ(date_of("# v4.27.2 docs, 1343 MiB context, May be 2x, 2024-13-01, commit 2024abc, Mark 2020"), "-");
  EXPECT_EQ(date_of("# first 2023-05-01\n# then 2024-06-01"), "2023-05-01 2 2023-05-01");
  // Date-shaped text that is no day of a run is skipped whole: no month is read out of it.
  EXPECT_EQ(date_of("# 31 Feb 2024, 32 Jan 2022, Apr 31 2024"), "-");
  EXPECT_EQ(date_of("# May 2048 tokens, Dec 2050, v2024-01-01, 12024-01-01"), "-");  // after today, or inside a word
  EXPECT_EQ(date_of("# 31 Feb 2024 then Mar 2024"), "2024-03-31 2 Mar 2024");
  // A third of a year: its last month's last day (January-April, May-August, September-December).
  EXPECT_EQ(date_of("#   branch, early 2024, legacy megatron/model path"), "2024-04-30 2 early 2024");
  EXPECT_EQ(date_of("# no later release until mid-2022"), "2022-08-31 2 mid-2022");
  EXPECT_EQ(date_of("# torch of Late 2023"), "2023-12-31 2 Late 2023");
  EXPECT_EQ(date_of("# yearly 2024, timely 2023, mid 20245, early-bird 2024, late 2050, the late 2020s"), "-");
  // The third of this year that holds today reads as today, as this month does (today where the day is
  // latest, UTC+14, as run_date.hpp's today_iso).
  const std::time_t now = std::time(nullptr) + 14 * 3600;
  std::tm utc{};
  gmtime_r(&now, &utc);
  char day[16];
  std::strftime(day, sizeof day, "%Y-%m-%d", &utc);
  const std::string today = day;
  const int month = std::stoi(today.substr(5, 2));
  const std::string third = month <= 4 ? "early " : month <= 8 ? "mid-" : "late ";
  EXPECT_EQ(date_of("# run in " + third + today.substr(0, 4) + " on torch of Mar 2024"),
            today + " 2 " + third + today.substr(0, 4));
  // A `# run_date` line wins over the prose, wherever it stands.
  const ValidationCase stated = read_validation_case(
      dir.write("r.toml", "# r: run on Jan 11 2022\n# measured_bytes = 1000\n# quantity = allocated\n"
                          "# framework = hf-transformers\n# run_date = 2024-10-24\n\nname = \"r\"\n"));
  EXPECT_EQ(stated.run_date, "2024-10-24");
  EXPECT_EQ(stated.run_date_line, 5);
  try {
    (void)read_validation_case(dir.write("bad.toml", "# measured_bytes = 1000\n# quantity = allocated\n"
                                                     "# run_date = Jan 2024\n\nname = \"b\"\n"));
    FAIL() << "a run_date that is no day was accepted";
  } catch (const Error& error) {
    EXPECT_EQ(std::string(error.what()), dir.path() + "/bad.toml:3:1: error: run_date must be the day of the run, "
                                                      "YYYY-MM-DD, got 'Jan 2024'");
  }
  // A day after today is refused (found by the scenario fuzzer: "2423-10-12" was read as the run's day).
  try {
    (void)read_validation_case(dir.write("late.toml", "# measured_bytes = 1000\n# quantity = allocated\n"
                                                      "# run_date = 2423-10-12\n\nname = \"b\"\n"));
    FAIL() << "a run_date after today was accepted";
  } catch (const Error& error) {
    const std::string what = error.what();  // today's day itself is left out: the test may cross midnight
    EXPECT_EQ(what.rfind(dir.path() + "/late.toml:3:1: error: run_date 2423-10-12 is after today (", 0), 0u) << what;
    EXPECT_NE(what.find("); give the day the run was made"), std::string::npos) << what;
  }
}

// A case without a [framework] table whose framework line names no version is
// estimated at the version of its header's date, and the note says which; a
// version on the line wins; a profile without dated versions ignores the date.
TEST(RunDates, ValidateEstimatesAnUndatedLineAtItsHeadersDate) {
  const std::string body = llama1b("").substr(llama1b("").find("[model]"));
  const uint64_t hf416 = Evaluation(llama1b("version = \"4.16\"\n")).breakdown().quantities[kDevice].peak;
  TempDir dir;
  auto header = [&](const std::string& prose, const std::string& line) {
    return "# r: a run\n" + prose + "\n# measured_bytes = " + std::to_string(hf416) +
           "\n# quantity = device\n# framework = " + line + "\n\nname = \"r\"\nmode = \"train\"\n";
  };
  const std::string dated = dir.write("dated.toml", header("#   run on 'Tue Jan 11 2022'", "hf-transformers") + body);
  CommandResult result = run_cli("validate " + dated);
  EXPECT_EQ(result.exit_code, 0) << result.out << result.err;
  EXPECT_NE(result.out.find("+0.0 %"), std::string::npos) << result.out;
  EXPECT_EQ(result.err, dated + ": note: no [framework] table: estimated under profile 'hf-transformers', which its "
                                "'# framework = hf-transformers' line names; no version: as of 2022-01-11, the date "
                                "its header gives first (line 2: 'Jan 11 2022'), so hf-transformers before 4.18\n");
  const std::string versioned =
      dir.write("versioned.toml", header("#   run on 'Tue Jan 11 2022'", "hf-transformers 4.46") + body);
  result = run_cli("validate " + versioned);
  EXPECT_EQ(result.err.find("as of"), std::string::npos) << result.err;
  EXPECT_NE(result.err.find("profile 'hf-transformers' 4.46, which"), std::string::npos) << result.err;
  const std::string torchtitan = dir.write("torchtitan.toml", header("#   run on 'Tue Jan 11 2022'", "torchtitan") + body);
  EXPECT_EQ(run_cli("validate " + torchtitan).err.find("as of"), std::string::npos);
  // A month on the line ("hf-transformers 2024-10") is read with the header's day when that day is in
  // it: 2024-10-20 is before 4.46's release (2024-10-24), so 4.39's loss path; the month's last day
  // (a header day in another month) would be 4.46's.
  const uint64_t hf439 = Evaluation(llama1b("version = \"4.39\"\n")).breakdown().quantities[kAllocated].peak;
  ASSERT_NE(hf439, Evaluation(llama1b("version = \"4.46\"\n")).breakdown().quantities[kAllocated].peak);
  auto at = [&](const std::string& prose) {
    return "# r: a run\n" + prose + "\n# measured_bytes = " + std::to_string(hf439) +
           "\n# quantity = allocated\n# framework = hf-transformers 2024-10\n\nname = \"r\"\nmode = \"train\"\n";
  };
  result = run_cli("validate " + dir.write("month.toml", at("#   logged 2024-10-20") + body));
  EXPECT_NE(result.out.find("+0.0 %"), std::string::npos) << result.out << result.err;
  result = run_cli("validate " + dir.write("month-other.toml", at("#   logged 2024-09-20") + body));
  EXPECT_EQ(result.out.find("+0.0 %"), std::string::npos) << result.out << result.err;
  EXPECT_NE(result.err.find("which its '# framework = hf-transformers 2024-10' line names; its date: as of 2024-10-31, "
                            "so hf-transformers 4.46\n"),
            std::string::npos)
      << result.err;
  // A readings warning names the version of the day, not an internal one.
  const std::string unfused =
      dir.write("unfused.toml", header("#   run on 'Tue Jan 11 2022'", "hf-transformers") + body +
                                    "cross_entropy = \"unfused\"\n");
  EXPECT_NE(run_cli("validate " + unfused).err.find("the way framework 'hf-transformers' before 4.18 computes it"),
            std::string::npos);
}

}  // namespace
}  // namespace memplan::testing
