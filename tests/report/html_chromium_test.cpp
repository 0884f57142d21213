// The HTML report rendered by a real browser (issue 13): headless Chromium
// loads the page memplan wrote for two scenarios (a training run that does not
// fit and a serving one), the DOM it renders holds each SVG bar with the JSON
// report's bytes, and its screenshot is kept in <build>/test-artifacts/ for
// people to look at. Chromium is a test dependency (tools/bootstrap installs
// Debian's chromium); without it this test fails and says how to install it.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "html_checks.hpp"
#include "test_support.hpp"

namespace memplan::testing {
namespace {

namespace fs = std::filesystem;

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::string quoted(const std::string& text) { return "'" + text + "'"; }

// $MEMPLAN_CHROMIUM, else chromium (Debian) or chromium-browser on PATH.
std::string find_chromium() {
  if (const char* named = std::getenv("MEMPLAN_CHROMIUM"); named != nullptr && *named != '\0') return named;
  const CommandResult found = run_command("{ command -v chromium || command -v chromium-browser; }");
  std::string path = found.out.substr(0, found.out.find('\n'));
  return found.exit_code == 0 ? path : std::string();
}

TEST(HtmlInChromium, RendersTheChartsWithTheJsonFiguresAndKeepsAScreenshot) {
  const std::string chromium = find_chromium();
  ASSERT_FALSE(chromium.empty())
      << "headless Chromium is needed to test the HTML report and was not found on PATH: install it with "
         "`apt-get install chromium` (tools/bootstrap does), or name the browser in MEMPLAN_CHROMIUM";

  const fs::path artifacts = MEMPLAN_TEST_ARTIFACT_DIR;
  fs::create_directories(artifacts);
  const fs::path page = artifacts / "report.html";
  const fs::path screenshot = artifacts / "report.png";
  fs::remove(screenshot);
  const std::string files = source_dir() + "/examples/llama2-7b-single-gpu.toml " + source_dir() +
                            "/examples/infer-llama-3.1-70b-bf16-tp4.toml";
  const CommandResult html = run_cli("run " + files + " --format html");
  ASSERT_EQ(html.exit_code, 0) << html.err;
  std::ofstream(page, std::ios::binary) << html.out;
  const CommandResult json = run_cli("run " + files + " --format json");
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const nlohmann::json estimates = nlohmann::json::parse(json.out);
  ASSERT_EQ(estimates.size(), 2u);

  // A profile of its own, so nothing of the user's (or another run's) is read.
  TempDir profile;
  const std::string browser = "timeout 25 " + quoted(chromium) +
                              " --headless --no-sandbox --disable-gpu --user-data-dir=" + quoted(profile.path());
  const CommandResult dom = run_command(browser + " --dump-dom " + quoted(page.string()));
  ASSERT_EQ(dom.exit_code, 0) << dom.err;
  // The DOM the browser built: both sections, each with its two SVG charts.
  ASSERT_NE(dom.out.find("<h1>memplan estimates: 2 scenarios</h1>"), std::string::npos) << dom.out.substr(0, 2000);
  const std::vector<Bars> sections = section_bars(dom.out);
  const std::vector<uint64_t> capacities = section_capacities(dom.out);
  ASSERT_EQ(sections.size(), 2u) << dom.out.substr(0, 2000);
  ASSERT_EQ(capacities.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const nlohmann::json& estimate = estimates[i];
    const Bars& bars = sections[i];
    for (const auto& [role, bytes] : estimate["per_gpu"]["components"].items())
      EXPECT_EQ(bars.at("components/" + role), bytes.get<uint64_t>()) << estimate["scenario"] << " " << role;
    const std::vector<std::string> phases = estimate["mode"] == "train"
                                                ? std::vector<std::string>{"init", "forward", "backward", "optimizer"}
                                                : std::vector<std::string>{"init", "forward"};
    for (const std::string& phase : phases)
      EXPECT_EQ(bars.at("timeline/" + phase), estimate["per_gpu"]["timeline"][phase].get<uint64_t>())
          << estimate["scenario"] << " " << phase;
    EXPECT_EQ(bars.size(), estimate["per_gpu"]["components"].size() + phases.size());
    EXPECT_EQ(capacities[i], estimate["capacity"].get<uint64_t>());
  }

  const CommandResult shot =
      run_command(browser + " --screenshot=" + quoted(screenshot.string()) + " --window-size=1200,1600 " +
                  quoted(page.string()));
  ASSERT_EQ(shot.exit_code, 0) << shot.err;
  ASSERT_TRUE(fs::exists(screenshot)) << shot.err;
  // A page of text and two charts, not a blank window (which is about 5 kB).
  EXPECT_GT(fs::file_size(screenshot), 40u * 1024u) << screenshot;
  EXPECT_EQ(read_file(screenshot).substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
}

}  // namespace
}  // namespace memplan::testing
