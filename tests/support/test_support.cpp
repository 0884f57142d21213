#include "test_support.hpp"

#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "memplan/core/error.hpp"

namespace memplan::testing {

std::string plugin_dir() { return MEMPLAN_TEST_PLUGIN_DIR; }
std::string data_dir() { return MEMPLAN_TEST_DATA_DIR; }
std::string source_dir() { return MEMPLAN_TEST_SOURCE_DIR; }

std::string validation_case(const std::string& id) {
  std::ifstream in(source_dir() + "/validation/" + id + ".toml");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}
std::string cli_path() { return MEMPLAN_TEST_CLI; }

const Catalog& catalog() {
  static const Catalog loaded = Catalog::load(data_dir());
  return loaded;
}

const PluginRegistry& builtin_plugins() {
  static const PluginRegistry* registry = [] {
    auto* r = new PluginRegistry();  // never freed: plugins stay loaded for the whole test binary
    r->load_folder(plugin_dir());
    return r;
  }();
  return *registry;
}

Evaluation::Evaluation(std::string_view toml, const std::string& file_name)
    : scenario_(std::make_unique<Scenario>(parse_scenario(toml, file_name, catalog()))),
      estimator_(std::make_unique<Estimator>(*scenario_, builtin_plugins())) {
  estimator_->evaluate();
}

uint64_t Evaluation::item_bytes(std::string_view display_name, int32_t role) const {
  uint64_t bytes = 0;
  for (const PlanItem& item : estimator_->plan().items)
    if (item.device == MEMPLAN_DEVICE_GPU && item.role == role && Estimator::display_name(item) == display_name)
      bytes += item.bytes();
  return bytes;
}

uint64_t Evaluation::item_bytes_at(std::string_view name, int32_t lifetime) const {
  uint64_t bytes = 0;
  for (const PlanItem& item : estimator_->plan().items)
    if (item.name_view() == name && item.lifetime == lifetime) bytes += item.bytes();
  return bytes;
}

int32_t Evaluation::item_lifetime(std::string_view name) const {
  for (const PlanItem& item : estimator_->plan().items)
    if (item.name_view() == name) return item.lifetime;
  return -1;
}

Evaluation evaluate(std::string_view toml, const std::string& file_name) { return Evaluation(toml, file_name); }

std::string report_detail(const Evaluation& evaluation, std::string_view key) {
  for (const auto& [name, value] : evaluation.estimator().report_details())
    if (name == key) return value;
  return "";
}

Evaluation evaluate_paper(std::string_view toml, const std::string& file_name) {
  return Evaluation(paper(toml), file_name);
}

std::string paper(std::string_view toml) {
  std::string text(toml);
  // A scenario that names its framework already says what it counts.
  if (text.rfind("[framework]", 0) == 0 || text.find("\n[framework]") != std::string::npos) return text;
  size_t at = 0;
  // The first line that opens a table ends the top-level keys.
  while (at < text.size()) {
    const size_t first = text.find_first_not_of(" \t", at);
    if (first != std::string::npos && first < text.size() && text[first] == '[') break;
    const size_t end = text.find('\n', at);
    at = end == std::string::npos ? text.size() : end + 1;
  }
  text.insert(at, "[framework]\nuse = \"paper\"\n");
  return text;
}

std::string error_of(std::string_view toml, const std::string& file_name) {
  try {
    Evaluation evaluation(toml, file_name);
  } catch (const Error& error) {
    return error.what();
  }
  return "";
}

namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

CommandResult run_command(const std::string& command) {
  TempDir dir;
  const std::string out = dir.path() + "/out";
  const std::string err = dir.path() + "/err";
  const int status = std::system((command + " >" + out + " 2>" + err).c_str());
  CommandResult result;
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  result.out = read_file(out);
  result.err = read_file(err);
  return result;
}

CommandResult run_cli(const std::string& arguments) { return run_command(cli_path() + " " + arguments); }

TempDir::TempDir() {
  std::string pattern = (std::filesystem::temp_directory_path() / "memplan-test-XXXXXX").string();
  if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

std::string TempDir::write(const std::string& name, std::string_view content) const {
  const std::filesystem::path file = std::filesystem::path(path_) / name;
  std::filesystem::create_directories(file.parent_path());
  std::ofstream(file) << content;
  return file.string();
}

}  // namespace memplan::testing
