// The step-time model against published throughput (issue 11, "Done when"):
// every row of four published tables, one scenario per row in
// validation/throughput/ (written by generate.py there; README.md there gives
// each table's source, the configuration read from it, and what is assumed).
// Each table has ONE transformer-step efficiency, chosen so that memplan
// reproduces the table's median row (the anchor) and never set per row; the
// other rows then test how the model's FLOPs, communication and pipeline
// bubble scale across the table. Each file's header holds the machine-readable
// lines `# table`, `# metric` (mfu or tokens_per_second), `# published`,
// `# tolerance_percent` and `# anchor`. The tolerances are set from what the
// model does, not to what would be wished: docs/step-time.md, "Published
// throughput", lists every row's error and why the large ones are large.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "test_support.hpp"

namespace memplan::testing {
namespace {

struct Row {
  std::string name, text, table, metric;
  double published = 0, tolerance_percent = 0, efficiency = 0;
  bool anchor = false;
};

std::vector<Row> rows_of(const std::string& table) {
  std::vector<Row> rows;
  const std::regex key(R"(^# (\w+) = (.*)$)"), efficiency(R"(^efficiency = ([0-9.]+)$)");
  for (const auto& entry : std::filesystem::directory_iterator(source_dir() + "/validation/throughput")) {
    if (entry.path().extension() != ".toml") continue;
    std::ifstream in(entry.path());
    Row row;
    row.name = entry.path().stem().string();
    row.text.assign(std::istreambuf_iterator<char>(in), {});
    std::istringstream lines(row.text);
    std::smatch m;
    for (std::string line; std::getline(lines, line);) {
      if (std::regex_match(line, m, key)) {
        if (m[1] == "table") row.table = m[2];
        if (m[1] == "metric") row.metric = m[2];
        if (m[1] == "published") row.published = std::stod(m[2]);
        if (m[1] == "tolerance_percent") row.tolerance_percent = std::stod(m[2]);
        if (m[1] == "anchor") row.anchor = m[2] == "true";
      } else if (std::regex_match(line, m, efficiency)) {
        row.efficiency = std::stod(m[1]);
      }
    }
    if (row.table == table) rows.push_back(row);
  }
  std::sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) { return a.name < b.name; });
  return rows;
}

// Every row of `table` within its tolerance; the anchor within 0.5 % (the
// efficiency was solved for it, rounded to 4 decimals); one efficiency for all.
void check_table(const std::string& table, size_t expected_rows) {
  const std::vector<Row> rows = rows_of(table);
  ASSERT_EQ(rows.size(), expected_rows) << table;
  int anchors = 0;
  for (const Row& row : rows) {
    SCOPED_TRACE(row.name);
    EXPECT_EQ(row.efficiency, rows.front().efficiency) << "one efficiency per table";
    EXPECT_GT(row.efficiency, 0);
    ASSERT_GT(row.published, 0);
    const StepTime time = evaluate(row.text, row.name + ".toml").breakdown().time;
    ASSERT_EQ(time.status, TimeStatus::timed);
    const double got = row.metric == "mfu" ? time.mfu : time.tokens_per_second;
    ASSERT_TRUE(row.metric == "mfu" || row.metric == "tokens_per_second") << row.metric;
    const double error = got / row.published - 1;
    if (row.anchor) {
      ++anchors;
      EXPECT_NEAR(error, 0, 0.005) << "the anchor the efficiency was solved for";
    }
    EXPECT_LE(std::abs(error) * 100, row.tolerance_percent)
        << row.metric << " published " << row.published << ", memplan " << got;
  }
  EXPECT_EQ(anchors, 1);
}

// Korthikanti et al. 2022 (arXiv 2205.05198), Table 3's configurations (22B,
// 175B, 530B, 1T on 8, 64, 280, 512 A100 80GB: TP 8 with sequence
// parallelism, selective recomputation, data-parallel size 1), the MFU of the
// runs of their section 6.3 (Table 5) as NVIDIA/Megatron-LM @ fd5cfec0ba60
// README.md prints it: 41.5, 51.4, 56.0, 56.3 %. Anchor: 530B. With them the
// abstract's two 530B runs on 2240 GPUs (k-530b-2240, k-530b-2240-full: 54.2
// and 42.1 %), at the same efficiency, not solved again.
TEST(Published, KorthikantiTable5Mfu) { check_table("korthikanti", 6); }

// Korthikanti et al. 2022 (arXiv 2205.05198), abstract: the 530B model on 2240
// A100s reaches "a Model Flops Utilization of 54.2%, which is 29% faster than
// the 42.1% we achieve using recomputation": 54.2 / 42.1 = 1.2874. Table 3's
// 530B layout (TP 8, PP 35 interleaved x3) at data-parallel size 8, selective
// recomputation with sequence parallelism against full recomputation, both at
// the table's one efficiency (0.6252). The ratio cancels the efficiency: it
// tests memplan's count of the recomputed FLOPs (full: every layer's forward
// again, 8.803e15 hardware FLOPs per GPU against selective's 6.639e15) and the
// bubble that scales with them, against the exposed communication that does
// not. Tolerance 2 %: the published MFUs are rounded to 0.1 point (the ratio
// to +-0.2 %), and memplan's own choice of what communication is exposed moves
// its ratio by 1.7 % (1.303 with every collective exposed, as here; 1.326 with
// every one hidden), 1.9 % in all, rounded up. memplan: 0.5558 / 0.4265 = 1.303.
TEST(Published, Korthikanti530bOn2240GpusRecomputation) {
  std::map<std::string, Row> rows;
  for (const Row& row : rows_of("korthikanti")) rows[row.name] = row;
  ASSERT_EQ(rows.count("k-530b-2240"), 1u);
  ASSERT_EQ(rows.count("k-530b-2240-full"), 1u);
  const Row& selective = rows["k-530b-2240"];
  const Row& full = rows["k-530b-2240-full"];
  EXPECT_EQ(selective.efficiency, rows["k-530b"].efficiency) << "the table's efficiency, not solved again";
  EXPECT_EQ(full.efficiency, rows["k-530b"].efficiency);
  EXPECT_EQ(selective.published, 0.542);
  EXPECT_EQ(full.published, 0.421);
  const StepTime fast = evaluate(selective.text, selective.name + ".toml").breakdown().time;
  const StepTime slow = evaluate(full.text, full.name + ".toml").breakdown().time;
  ASSERT_EQ(fast.status, TimeStatus::timed);
  ASSERT_EQ(slow.status, TimeStatus::timed);
  // The same model FLOPs (the same model, layout and batch); full recomputation adds hardware FLOPs only.
  EXPECT_DOUBLE_EQ(fast.model_flops, slow.model_flops);
  EXPECT_GT(slow.hardware_flops, fast.hardware_flops);
  const double ratio = fast.mfu / slow.mfu;
  EXPECT_NEAR(ratio / (0.542 / 0.421), 1.0, 0.02) << "memplan " << ratio << ", published " << 0.542 / 0.421;
  // The same ratio is the step times' (the same model FLOPs and peak).
  EXPECT_NEAR(ratio, slow.seconds / fast.seconds, 1e-12);
}

// Megatron-LM's weak scaling on H100 (NVIDIA/Megatron-LM @ d98e8a64ddf3,
// README.md and images/model_table.png): nine GPT models, 1.7B on 48 GPUs to
// 462B on 6,144, MFU 41 to 49 %. Anchor: 32B (46 %, the median).
TEST(Published, MegatronH100WeakScalingMfu) { check_table("megatron-h100", 9); }

// llm-foundry's MPT benchmarks on 128 to 512 H100s with FSDP
// (mosaicml/llm-foundry @ 8c8dd48f7216, scripts/train/benchmarking/README.md,
// "H100 80GB BF16 (Large Scale, >= 128 GPUs)"): the job's tokens/s, 18 rows.
// Anchor: MPT-13B on 256 GPUs (the median MFU).
TEST(Published, LlmFoundryMptH100TokensPerSecond) { check_table("llm-foundry", 18); }

// torchtitan's Llama 3.1 8B with FSDP on 8 and 128 H100s, eager and
// torch.compile, bf16 (pytorch/torchtitan @ b5bcd76c66d0,
// benchmarks/llama3_h100_202412_torchtitan.md, Tables 1 and 3): the job's
// tokens/s. Anchor: 128 GPUs with torch.compile (the upper median).
TEST(Published, TorchtitanLlama8bTokensPerSecond) { check_table("torchtitan", 4); }

}  // namespace
}  // namespace memplan::testing
