// The plugin index (core/src/plugins/plugin_index.hpp, issue 10): a run with
// a valid index opens only the libraries of the plugins it asks for, and
// everything a caller can see (names, order, paths, versions, warnings,
// estimates) is what a run without an index sees. The index is trusted only
// while its folder is unchanged; a damaged or unwritable one costs time, never
// a result.
#include <gtest/gtest.h>
#include <memplan/plugin_abi.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "memplan/core/estimator.hpp"
#include "memplan/core/install_layout.hpp"
#include "memplan/core/plugin_registry.hpp"
#include "memplan/core/scenario.hpp"
#include "plugins/plugin_index.hpp"
#include "test_support.hpp"

namespace memplan::testing {
namespace {

namespace fs = std::filesystem;

// Everything a caller sees of a registry, in order; plugins() opens every
// library, so call it after the checks on what was opened.
std::vector<std::string> listing(const PluginRegistry& registry) {
  std::vector<std::string> lines;
  for (const auto& plugin : registry.plugins())
    lines.push_back(std::to_string(plugin->descriptor.kind) + " " + plugin->name + " " + plugin->version + " " +
                    plugin->path);
  return lines;
}

// 1e9 fp32 parameters with Adam: weights 4e9, gradients 4e9, states 8e9 bytes.
Breakdown evaluate_adam(const PluginRegistry& registry) {
  // The paper framework: the model's tensors only, no device overheads.
  const Scenario scenario = parse_scenario(
      paper("name = \"index\"\nmode = \"train\"\n[model]\nparams = 1e9\n[precision]\nuse = \"fp32\"\n"
            "[optimizer]\nuse = \"adam\"\n[activations]\nuse = \"none\"\n"),
      "scenario.toml", catalog());
  Estimator estimator(scenario, registry);
  return estimator.evaluate();
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

fs::path only_index_file(const std::string& index_dir) {
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(index_dir)) files.push_back(entry.path());
  EXPECT_EQ(files.size(), 1u);
  return files.empty() ? fs::path() : files.front();
}

TEST(plugin_index, SecondRunOpensOnlyThePluginsItAsksFor) {
  TempDir index;
  PluginRegistry first;
  first.use_index(index.path());
  ASSERT_TRUE(first.load_folder(plugin_dir()));
  const size_t builtins = first.opened_library_count();
  EXPECT_EQ(builtins, builtin_plugins().plugins().size());  // no index yet: every library is opened
  const std::vector<std::string> names = first.names();

  PluginRegistry second;
  second.use_index(index.path());
  ASSERT_TRUE(second.load_folder(plugin_dir()));
  EXPECT_EQ(second.opened_library_count(), 0u);
  EXPECT_EQ(second.names(), names);
  EXPECT_EQ(second.names(MEMPLAN_KIND_OPTIMIZER), first.names(MEMPLAN_KIND_OPTIMIZER));
  const Breakdown estimate = evaluate_adam(second);
  EXPECT_EQ(second.opened_library_count(), 3u);  // fp32, adam, none
  EXPECT_EQ(estimate.sum, evaluate_adam(first).sum);
  EXPECT_EQ(estimate.sum, 16'000'000'000u);
  EXPECT_TRUE(second.diagnostics().empty());
  EXPECT_EQ(listing(second), listing(first));  // same order, paths and versions once all are open
  EXPECT_EQ(second.opened_library_count(), builtins);
}

TEST(plugin_index, AChangedFolderIsOpenedAgain) {
  TempDir index;
  TempDir folder;
  const fs::path good = fs::path(folder.path()) / "memplan-loader-good.so";
  fs::copy_file(std::string(LOADER_DIR_GOOD) + "/memplan-loader-good.so", good);
  auto opened_on_load = [&] {
    PluginRegistry registry;
    registry.use_index(index.path());
    EXPECT_TRUE(registry.load_folder(folder.path()));
    EXPECT_EQ(registry.names(), std::vector<std::string>{"loader-good"});
    EXPECT_TRUE(registry.diagnostics().empty());
    return registry.opened_library_count();
  };
  EXPECT_EQ(opened_on_load(), 1u);  // no index
  EXPECT_EQ(opened_on_load(), 0u);  // indexed

  // A newer modification time: the library may have been rebuilt.
  fs::last_write_time(good, fs::last_write_time(good) + std::chrono::seconds(5));
  EXPECT_EQ(opened_on_load(), 1u);
  EXPECT_EQ(opened_on_load(), 0u);

  // Another file: a library the index does not know.
  fs::copy_file(std::string(LOADER_DIR_NO_ENTRY_POINT) + "/memplan-fault-no-entry-point.so",
                fs::path(folder.path()) / "memplan-fault-no-entry-point.so");
  PluginRegistry with_new_file;
  with_new_file.use_index(index.path());
  ASSERT_TRUE(with_new_file.load_folder(folder.path()));
  EXPECT_EQ(with_new_file.opened_library_count(), 1u);  // the good one; the other was rejected
  EXPECT_EQ(with_new_file.diagnostics().size(), 1u);

  // A removed file.
  fs::remove(fs::path(folder.path()) / "memplan-fault-no-entry-point.so");
  EXPECT_EQ(opened_on_load(), 1u);
  EXPECT_EQ(opened_on_load(), 0u);
}

// A rejected library is opened on every run: its warning must not depend on
// whether an index exists.
TEST(plugin_index, RejectedLibraryWarnsOnEveryRun) {
  TempDir index;
  std::vector<std::vector<std::string>> warnings;
  for (int run = 0; run < 2; ++run) {
    PluginRegistry registry;
    registry.use_index(index.path());
    ASSERT_TRUE(registry.load_folder(LOADER_DIR_ABI_MAJOR));
    warnings.push_back(registry.diagnostics());
    EXPECT_EQ(registry.opened_library_count(), run == 0 ? 1u : 0u);  // loader-good, opened when not indexed
    ASSERT_NE(registry.find("loader-good"), nullptr);
  }
  ASSERT_EQ(warnings[0].size(), 1u);
  EXPECT_NE(warnings[0][0].find("memplan-fault-abi-major.so was not loaded: it was built for plugin ABI 2.0"),
            std::string::npos);
  EXPECT_EQ(warnings[1], warnings[0]);
}

// The name rule needs only the name: an indexed library whose plugin name is
// taken is refused without being opened, with the warning an open gives.
TEST(plugin_index, IndexedNameClashGivesTheSameWarning) {
  TempDir index;
  {  // Alone, the impostor 'adam' is valid: the index records it as plugin 'adam'.
    PluginRegistry alone;
    alone.use_index(index.path());
    ASSERT_TRUE(alone.load_folder(LOADER_DIR_BUILTIN_NAME));
    ASSERT_NE(alone.find("adam"), nullptr);
    EXPECT_EQ(alone.find("adam")->version, "9.9.9");
  }
  PluginRegistry without_index;
  ASSERT_TRUE(without_index.load_folder(plugin_dir()));
  ASSERT_TRUE(without_index.load_folder(LOADER_DIR_BUILTIN_NAME));

  PluginRegistry indexed;
  indexed.use_index(index.path());
  ASSERT_TRUE(indexed.load_folder(plugin_dir()));
  ASSERT_TRUE(indexed.load_folder(LOADER_DIR_BUILTIN_NAME));
  EXPECT_EQ(indexed.diagnostics(), without_index.diagnostics());
  ASSERT_EQ(indexed.diagnostics().size(), 1u);
  ASSERT_NE(indexed.find("adam"), nullptr);
  EXPECT_EQ(indexed.find("adam")->version, "1.4.0");  // the built-in, found first
  EXPECT_EQ(listing(indexed), listing(without_index));
}

TEST(plugin_index, DamagedIndexIsReadAsNone) {
  TempDir index;
  {
    PluginRegistry registry;
    registry.use_index(index.path());
    ASSERT_TRUE(registry.load_folder(LOADER_DIR_GOOD));
  }
  const fs::path file = only_index_file(index.path());
  const std::string valid = read_file(file);
  for (const std::string& damaged : {valid.substr(0, valid.size() / 2), std::string("garbage\n"), std::string()}) {
    std::ofstream(file, std::ios::binary | std::ios::trunc) << damaged;
    PluginRegistry registry;
    registry.use_index(index.path());
    ASSERT_TRUE(registry.load_folder(LOADER_DIR_GOOD));
    EXPECT_EQ(registry.opened_library_count(), 1u) << damaged;
    EXPECT_TRUE(registry.diagnostics().empty());
    EXPECT_EQ(read_file(file), valid);  // written again
  }
}

TEST(plugin_index, UnwritableIndexFolderLoadsEverything) {
  TempDir dir;
  const std::string blocker = dir.write("not-a-folder", "x");
  for (int run = 0; run < 2; ++run) {
    PluginRegistry registry;
    registry.use_index(blocker + "/plugin-index");
    ASSERT_TRUE(registry.load_folder(LOADER_DIR_GOOD));
    EXPECT_EQ(registry.opened_library_count(), 1u);
    EXPECT_TRUE(registry.diagnostics().empty());
  }
}

TEST(plugin_index, TextRoundTripsAndRejectsMalformedLines) {
  plugin_index::FolderIndex index;
  index.folder = "/opt/memplan plugins";
  index.entries.push_back({{"memplan-adam.so", 401176, 1795668778302285834, 5309039}, false, "adam", 1});
  index.entries.push_back({{"a b.so", 1, -3, 2}, true, {}, 0});
  const std::string text = plugin_index::format(index);
  const std::string header = "memplan plugin index 1 abi " + std::to_string(MEMPLAN_ABI_MAJOR) + "." +
                             std::to_string(MEMPLAN_ABI_MINOR) + "\n";
  EXPECT_EQ(text, header +
                      "folder /opt/memplan plugins\n"
                      "plugin 401176 1795668778302285834 5309039 1 adam memplan-adam.so\n"
                      "open 1 -3 2 a b.so\n"
                      "end\n");
  const auto parsed = plugin_index::parse(text);
  ASSERT_TRUE(parsed.has_value());
  EXPECT_EQ(plugin_index::format(*parsed), text);
  EXPECT_EQ(parsed->entries[0].plugin, "adam");
  EXPECT_TRUE(parsed->entries[1].open_always);

  const std::string folder = header + "folder /p\n";
  for (const std::string& bad : {
           folder + "plugin 1 2 3 1 adam x.so\n",                  // no end line
           folder + "end\nend\n",                                  // a line after end
           folder + "end",                                         // last line without its newline
           folder + "plugin 1 2 3 1 adam\nend\n",                  // no file name
           folder + "plugin x 2 3 1 adam a.so\nend\n",             // size not a number
           folder + "plugin -1 2 3 1 adam a.so\nend\n",            // negative size
           folder + "open 1 2 3 ../a.so\nend\n",                   // a path, not a file name
           folder + "plugin 1 2 3 1  adam a.so\nend\n",            // an empty field
           folder + "load 1 2 3 a.so\nend\n",                      // unknown entry
           std::string("memplan plugin index 1 abi 0.9\nfolder /p\nend\n"),  // another host ABI
       })
    EXPECT_FALSE(plugin_index::parse(bad).has_value()) << bad;
}

// The command line keeps its index in $MEMPLAN_CACHE_DIR/plugin-index; the
// second run reads it and prints the same bytes.
TEST(plugin_index, CommandLineRunsTheSameWithAnIndex) {
  TempDir cache;
  const std::string run = "MEMPLAN_CACHE_DIR='" + cache.path() + "' '" + cli_path() + "' run '" +
                          source_dir() + "/examples/llama2-7b-single-gpu.toml' --format json";
  const CommandResult first = run_command(run);
  ASSERT_EQ(first.exit_code, 0) << first.err;
  EXPECT_TRUE(fs::exists(only_index_file(cache.path() + "/plugin-index")));
  const CommandResult second = run_command(run);
  EXPECT_EQ(second.exit_code, 0);
  EXPECT_EQ(second.out, first.out);
  EXPECT_EQ(second.err, first.err);
  const CommandResult no_index = run_command("MEMPLAN_CACHE_DIR= '" + cli_path() + "' run '" + source_dir() +
                                             "/examples/llama2-7b-single-gpu.toml' --format json");
  EXPECT_EQ(no_index.out, first.out);
}

TEST(plugin_index, FolderFromTheEnvironment) {
  const char* saved[] = {std::getenv("MEMPLAN_CACHE_DIR"), std::getenv("XDG_CACHE_HOME"), std::getenv("HOME")};
  const std::string kept[] = {saved[0] ? saved[0] : "", saved[1] ? saved[1] : "", saved[2] ? saved[2] : ""};
  ::unsetenv("MEMPLAN_CACHE_DIR");
  ::unsetenv("XDG_CACHE_HOME");
  ::setenv("HOME", "/home/u", 1);
  EXPECT_EQ(plugin_index_dir_from_environment(), fs::path("/home/u/.cache/memplan/plugin-index"));
  ::setenv("XDG_CACHE_HOME", "relative", 1);  // not absolute: ignored, as the XDG spec says
  EXPECT_EQ(plugin_index_dir_from_environment(), fs::path("/home/u/.cache/memplan/plugin-index"));
  ::setenv("XDG_CACHE_HOME", "/xdg", 1);
  EXPECT_EQ(plugin_index_dir_from_environment(), fs::path("/xdg/memplan/plugin-index"));
  ::setenv("MEMPLAN_CACHE_DIR", "/c", 1);
  EXPECT_EQ(plugin_index_dir_from_environment(), fs::path("/c/plugin-index"));
  ::setenv("MEMPLAN_CACHE_DIR", "", 1);
  EXPECT_EQ(plugin_index_dir_from_environment(), fs::path());
  ::unsetenv("MEMPLAN_CACHE_DIR");
  ::unsetenv("XDG_CACHE_HOME");
  ::unsetenv("HOME");
  EXPECT_EQ(plugin_index_dir_from_environment(), fs::path());
  const char* names[] = {"MEMPLAN_CACHE_DIR", "XDG_CACHE_HOME", "HOME"};
  for (int i = 0; i < 3; ++i)
    if (saved[i] != nullptr) ::setenv(names[i], kept[i].c_str(), 1);
}

}  // namespace
}  // namespace memplan::testing
