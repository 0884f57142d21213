// --format html (issue 13): one self-contained page, no URL of any kind, every
// name from a file escaped, and chart bars whose data-bytes are the JSON
// report's figures. html_chromium_test.cpp renders the page in a browser.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <sstream>

#include "html_checks.hpp"
#include "memplan/core/limits.hpp"
#include "memplan/core/report.hpp"
#include "memplan/core/text.hpp"
#include "test_support.hpp"

namespace memplan::testing {
namespace {

std::string example(const std::string& name) { return source_dir() + "/examples/" + name; }

std::string html_of(Evaluation& evaluation) {
  const ScenarioLimits limits = evaluate_with_limits(evaluation.estimator());
  std::ostringstream out;
  write_report(out, evaluation.estimator(), limits, ReportFormat::html);
  return out.str();
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// The bars JSON says the page must draw: every component, and the timeline's
// phases (training: init to optimizer; inference: init and forward).
Bars expected_bars(const nlohmann::json& estimate) {
  Bars bars;
  for (const auto& [role, bytes] : estimate["per_gpu"]["components"].items())
    bars["components/" + role] = bytes.get<uint64_t>();
  const bool training = estimate["mode"] == "train";
  for (const char* phase : {"init", "forward", "backward", "optimizer"}) {
    if (!training && std::string(phase) != "init" && std::string(phase) != "forward") continue;
    bars[std::string("timeline/") + phase] = estimate["per_gpu"]["timeline"][phase].get<uint64_t>();
  }
  return bars;
}

void expect_page_matches_json(const std::string& html, const nlohmann::json& estimates) {
  const std::vector<Bars> sections = section_bars(html);
  const std::vector<uint64_t> capacities = section_capacities(html);
  ASSERT_EQ(sections.size(), estimates.size());
  ASSERT_EQ(capacities.size(), estimates.size());
  for (size_t i = 0; i < estimates.size(); ++i) {
    EXPECT_EQ(sections[i], expected_bars(estimates[i])) << estimates[i]["scenario"];
    EXPECT_EQ(capacities[i], estimates[i]["capacity"].get<uint64_t>()) << estimates[i]["scenario"];
  }
}

void expect_self_contained(const std::string& html) {
  for (const char* url : {"http://", "https://", "//", "url(", "@import", "src=", "href=", "<script", "<link"})
    EXPECT_EQ(html.find(url), std::string::npos) << url;
  EXPECT_EQ(foreign_tags(html), std::set<std::string>{});
  EXPECT_EQ(html.rfind("<!DOCTYPE html>\n<html lang=\"en\">", 0), 0u);
  EXPECT_EQ(count(html, "<html"), 1u);
  EXPECT_EQ(count(html, "</html>"), 1u);
  EXPECT_EQ(count(html, "<svg"), 2 * count(html, "<section"));
  EXPECT_EQ(count(html, "<svg"), count(html, "</svg>"));
  EXPECT_EQ(count(html, "<section"), count(html, "</section>"));
}

nlohmann::json json_of(const std::string& arguments) {
  const CommandResult result = run_cli(arguments + " --format json");
  EXPECT_EQ(result.exit_code, 0) << result.err;
  return nlohmann::json::parse(result.out);
}

TEST(HtmlReport, BarsAreTheJsonFiguresForTheTrainingExample) {
  const std::string file = example("llama2-7b-single-gpu.toml");
  const CommandResult html = run_cli("run " + file + " --format html");
  ASSERT_EQ(html.exit_code, 0) << html.err;
  expect_self_contained(html.out);
  expect_page_matches_json(html.out, nlohmann::json::array({json_of("run " + file)}));
  // It does not fit: the verdict, the shortfall and the advice are on the page.
  EXPECT_NE(html.out.find("<p class=\"verdict no-fit\" data-fits=\"false\">fits (device memory): no, "),
            std::string::npos);
  EXPECT_NE(html.out.find("<tr data-key=\"shortfall\""), std::string::npos);
  // The H100's nominal 80 GiB and the 79.11 GiB CUDA reports (gpus.toml cuda_total_gib), both rows the JSON's.
  EXPECT_NE(html.out.find("<tr data-key=\"gpu_memory\" data-bytes=\"85899345920\">"), std::string::npos);
  EXPECT_NE(html.out.find("<tr data-key=\"gpu_cuda_total\" data-bytes=\"84943715697\">"), std::string::npos);
  EXPECT_NE(html.out.find("<h3>What to change</h3>"), std::string::npos);
  EXPECT_NE(html.out.find("<title>memplan estimate: llama2-7b-full-finetune-1gpu</title>"), std::string::npos);
  EXPECT_NE(html.out.find("<line class=\"capacity\""), std::string::npos);
  EXPECT_NE(html.out.find("adamw@"), std::string::npos);
}

TEST(HtmlReport, BarsAreTheJsonFiguresForAnInferenceExample) {
  const std::string file = example("infer-llama-3.1-70b-bf16-tp4.toml");
  const CommandResult html = run_cli("run " + file + " --format html");
  ASSERT_EQ(html.exit_code, 0) << html.err;
  expect_self_contained(html.out);
  expect_page_matches_json(html.out, nlohmann::json::array({json_of("run " + file)}));
  // Serving has no backward pass and no optimizer step.
  EXPECT_EQ(html.out.find("data-phase=\"backward\""), std::string::npos);
  // Its limits are the JSON's.
  const nlohmann::json estimate = json_of("run " + file);
  for (const char* key : {"max_micro_batch", "max_seq_len"}) {
    const nlohmann::json& limit = estimate["limits"][key];
    ASSERT_FALSE(limit.is_null()) << key;
    EXPECT_NE(html.out.find("<tr data-limit=\"" + std::string(key) + "\" data-value=\"" +
                            std::to_string(limit["value"].get<int64_t>()) + "\">"),
              std::string::npos)
        << key;
  }
  EXPECT_NE(html.out.find("data-role=\"kv_cache\""), std::string::npos);
}

TEST(HtmlReport, SeveralScenariosMakeOnePageWithASectionEach) {
  const std::string files =
      example("llama2-7b-single-gpu.toml") + " " + example("infer-llama-3.1-70b-bf16-tp4.toml");
  const CommandResult html = run_cli("run " + files + " --format html");
  ASSERT_EQ(html.exit_code, 0) << html.err;
  expect_self_contained(html.out);
  EXPECT_EQ(count(html.out, "<section class=\"estimate\""), 2u);
  EXPECT_NE(html.out.find("<title>memplan estimates: 2 scenarios</title>"), std::string::npos);
  expect_page_matches_json(html.out, json_of("run " + files));
  EXPECT_LT(html.out.find("data-scenario=\"llama2-7b-full-finetune-1gpu\""),
            html.out.find("data-scenario=\"llama3.1-70b-bf16-tp4\""));
}

TEST(HtmlReport, EstimateWritesThePageToo) {
  const std::string question = "estimate llama-2-7b --task lora --gpu a100-sxm-40gb";
  const CommandResult html = run_cli(question + " --format html");
  ASSERT_EQ(html.exit_code, 0) << html.err;
  expect_self_contained(html.out);
  expect_page_matches_json(html.out, nlohmann::json::array({json_of(question)}));
  EXPECT_NE(html.out.find("<p class=\"verdict fits\" data-fits=\"true\">"), std::string::npos);
}

// Names come from files and plugins: <, &, quotes and control characters must
// reach the page as text, never as markup.
TEST(HtmlReport, EscapesEveryNameFromTheScenario) {
  Evaluation evaluation = evaluate(R"(
name = "a<b>&\"c'd</section><script>x</script>\u001b[31m"
mode = "infer"
[model]
preset = "llama-2-7b"
[batch]
micro_batch = 1
seq_len = 1024
[precision]
use = "bf16"
[activations]
use = "inference"
[hardware]
memory_gib = 8
)");
  const std::string html = html_of(evaluation);
  expect_self_contained(html);
  const std::string escaped = "a&lt;b&gt;&amp;&quot;c&#39;d&lt;/section&gt;&lt;script&gt;x&lt;/script&gt;\\x1b[31m";
  EXPECT_NE(html.find("<title>memplan estimate: " + escaped + "</title>"), std::string::npos);
  EXPECT_NE(html.find("<section class=\"estimate\" data-scenario=\"" + escaped + "\">"), std::string::npos);
  EXPECT_NE(html.find("<h2>" + escaped + " "), std::string::npos);
  EXPECT_EQ(html.find('\x1b'), std::string::npos);
  EXPECT_EQ(count(html, "<section"), 1u);
  // 8 GiB is too little for 7B in bf16: the advice is there, escaped like the rest.
  EXPECT_NE(html.find("<ul class=\"advice\">"), std::string::npos);
}

TEST(HtmlReport, WithoutAGpuThereIsNoCapacityLine) {
  Evaluation evaluation = evaluate(R"(
name = "no-gpu"
mode = "infer"
[model]
preset = "llama-2-7b"
[batch]
micro_batch = 1
seq_len = 1024
[precision]
use = "bf16"
[activations]
use = "inference"
)");
  const std::string html = html_of(evaluation);
  expect_self_contained(html);
  EXPECT_EQ(html.find("class=\"capacity\""), std::string::npos);
  EXPECT_NE(html.find("<p class=\"verdict no-gpu\">"), std::string::npos);
  EXPECT_EQ(section_bars(html).at(0).at("components/weights"), evaluation.breakdown().components[MEMPLAN_ROLE_WEIGHTS]);
}

TEST(HtmlReport, SectionsOfAPage) {
  const std::string page = html_page_begin("t") + "<section>x</section>\n" + html_page_end();
  EXPECT_EQ(html_sections(page), "<section>x</section>\n");
  EXPECT_EQ(html_sections("{ \"schema\": 1 }"), "");
  EXPECT_EQ(parse_report_format("html"), ReportFormat::html);
}

}  // namespace
}  // namespace memplan::testing
