// The installed SDK (issue 5). The ctest fixtures of install/suite.cmake have
// installed memplan into INSTALL_PREFIX, built copies of the out-of-tree
// examples (examples/plugins/) against that prefix only, with g++ and clang++,
// built a C host with clang, and run cpack. These tests check what came out:
// the installed layout, the examples' figures through the installed CLI,
// plugins crossing compilers, version refusals, and the packages.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>

#include "http_server.hpp"
#include "test_support.hpp"

namespace memplan::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const std::string kPrefix = INSTALL_PREFIX;
const std::string kWork = INSTALL_SUITE_DIR;

std::string quote(const std::string& text) {
  std::string quoted = "'";
  for (char c : text) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// The environment of every memplan these tests run: no MEMPLAN_PLUGIN_PATH
// from outside, and a per-user store (installed bundles) that holds nothing.
std::string clean_environment() {
  return "env -u MEMPLAN_PLUGIN_PATH MEMPLAN_HOME=" + quote(kWork + "/memplan-home-empty") + " ";
}

// The installed memplan, with MEMPLAN_PLUGIN_PATH set to `plugin_path` (unset when empty).
CommandResult run_installed(const std::string& arguments, const std::string& plugin_path = "") {
  std::string command = clean_environment();
  if (!plugin_path.empty()) command += "MEMPLAN_PLUGIN_PATH=" + quote(plugin_path) + " ";
  return run_command(command + quote(kPrefix + "/bin/memplan") + " " + arguments);
}

json run_json(const std::string& scenario, const std::string& plugin_path = "") {
  CommandResult result = run_installed("run " + quote(scenario) + " --format json", plugin_path);
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.err, "");
  if (result.exit_code != 0) return json::object();
  return json::parse(result.out);
}

uint64_t component(const json& estimate, const char* where, const char* role) {
  return estimate.at(where).at("components").at(role).get<uint64_t>();
}

// Bytes of the items of `where` ("per_gpu" or "per_cpu") named `name` with `role`.
uint64_t item_bytes(const json& estimate, const char* where, const std::string& name, const std::string& role) {
  uint64_t bytes = 0;
  for (const json& item : estimate.at(where).at("items"))
    if (item.at("name") == name && item.at("role") == role) bytes += item.at("bytes").get<uint64_t>();
  return bytes;
}

std::set<std::string> file_names(const std::string& folder) {
  std::set<std::string> names;
  for (const auto& entry : fs::recursive_directory_iterator(folder))
    if (entry.is_regular_file()) names.insert(fs::relative(entry.path(), folder).string());
  return names;
}

// The compiler that built an ELF file, from its .comment section.
std::string built_by(const std::string& file) { return run_command("readelf -p .comment " + quote(file)).out; }

// ---------------------------------------------------------------- the prefix

TEST(InstalledPrefix, HasTheBinaryEveryBuiltInTheCatalogTheHeadersAndThePackage) {
  EXPECT_TRUE(fs::is_regular_file(kPrefix + "/bin/memplan"));
  // Every built-in plugin and nothing else (the loader tests' plugins are not installed).
  EXPECT_EQ(file_names(kPrefix + "/lib/memplan/plugins"), file_names(plugin_dir()));
  EXPECT_TRUE(fs::is_regular_file(kPrefix + "/lib/memplan/plugins/memplan-adam.so"));
  EXPECT_EQ(file_names(kPrefix + "/share/memplan"), file_names(data_dir()));
  // The SDK's headers, and the support library's under memplan/support/.
  std::set<std::string> headers = file_names(source_dir() + "/sdk/include/memplan");
  for (const std::string& name : file_names(source_dir() + "/sdk/support/include/memplan")) headers.insert(name);
  EXPECT_EQ(file_names(kPrefix + "/include/memplan"), headers);
  EXPECT_TRUE(fs::is_regular_file(kPrefix + "/include/memplan/support/layout.hpp"));
  for (const char* file : {"memplanConfig.cmake", "memplanConfigVersion.cmake", "memplanSdkVersion.cmake",
                           "memplanTargets.cmake", "memplanAddPlugin.cmake"})
    EXPECT_TRUE(fs::is_regular_file(kPrefix + "/lib/cmake/memplan/" + file)) << file;
}

TEST(InstalledPrefix, SdkTargetIsHeaderOnlyAndLinksNothingOfTheCore) {
  const std::string targets = slurp(kPrefix + "/lib/cmake/memplan/memplanTargets.cmake");
  EXPECT_TRUE(contains(targets, "add_library(memplan::sdk INTERFACE IMPORTED)")) << targets;
  EXPECT_TRUE(contains(targets, "INTERFACE_INCLUDE_DIRECTORIES \"${_IMPORT_PREFIX}/include\"")) << targets;
  EXPECT_TRUE(contains(targets, "INTERFACE_COMPILE_FEATURES \"cxx_std_20\"")) << targets;
  // The support library is header-only too, on top of the SDK and nothing else.
  EXPECT_TRUE(contains(targets, "add_library(memplan::plugin_support INTERFACE IMPORTED)")) << targets;
  EXPECT_TRUE(contains(targets, "INTERFACE_LINK_LIBRARIES \"memplan::sdk\"")) << targets;
  size_t links = 0;
  for (size_t at = targets.find("INTERFACE_LINK_LIBRARIES"); at != std::string::npos;
       at = targets.find("INTERFACE_LINK_LIBRARIES", at + 1))
    ++links;
  EXPECT_EQ(links, 1u) << targets;  // memplan::sdk links nothing
  EXPECT_FALSE(contains(targets, "memplan_core")) << targets;
  const std::string version = slurp(kPrefix + "/lib/cmake/memplan/memplanSdkVersion.cmake");
  EXPECT_TRUE(contains(version, "set(PACKAGE_VERSION \"" INSTALL_SDK_VERSION "\")")) << version;
}

TEST(InstalledPrefix, CliLoadsItsOwnPluginsAndCatalog) {
  CommandResult version = run_installed("--version");
  ASSERT_EQ(version.exit_code, 0) << version.err;
  EXPECT_EQ(version.out.rfind("memplan " INSTALL_RELEASE " (plugin ABI " INSTALL_SDK_VERSION, 0), 0u) << version.out;

  CommandResult plugins = run_installed("plugins");
  ASSERT_EQ(plugins.exit_code, 0) << plugins.err;
  size_t lines = 0, profiles = 0;
  std::istringstream listing(plugins.out);
  for (std::string line; std::getline(listing, line);) {
    if (line.rfind("framework\t", 0) == 0) {  // framework profiles: data files of the installed catalog
      ++profiles;
      EXPECT_TRUE(contains(line, "\t" + kPrefix + "/share/memplan/frameworks/")) << line;
      continue;
    }
    ++lines;
    EXPECT_TRUE(contains(line, "\t" + kPrefix + "/lib/memplan/plugins/memplan-")) << line;
  }
  EXPECT_EQ(lines, file_names(plugin_dir()).size());
  EXPECT_EQ(profiles, file_names(data_dir() + "/frameworks").size());

  // A preset from the installed catalog: Llama-2-7B, P = 6,738,415,616, bf16 weights = 2 B x P.
  const json estimate = run_json(source_dir() + "/examples/llama2-7b-single-gpu.toml");
  EXPECT_EQ(estimate.at("parameters").at("total"), 6738415616u);
  EXPECT_EQ(component(estimate, "per_gpu", "weights"), 13476831232u);
}

// ------------------------------------------------ out-of-tree example plugins

TEST(OutOfTree, ExamplesAreBuiltFromTheInstalledPackageOnly) {
  for (const std::string name : {"adan-optimizer", "activation-offload"}) {
    const std::string build = kWork + "/" + name + "/build";
    EXPECT_TRUE(contains(slurp(build + "/CMakeCache.txt"), "memplan_DIR:PATH=" + kPrefix + "/lib/cmake/memplan\n"))
        << name;
    const std::string commands = slurp(build + "/compile_commands.json");
    EXPECT_TRUE(contains(commands, "-isystem " + kPrefix + "/include")) << commands;
    EXPECT_FALSE(contains(commands, source_dir() + "/sdk")) << commands;
    EXPECT_FALSE(contains(commands, source_dir() + "/core")) << commands;
  }
}

TEST(OutOfTree, PluginsExportOnlyTheEntryPoint) {
  for (const std::string library : {"adan-optimizer/build/memplan-adan.so",
                                    "activation-offload/build/memplan-activation-offload.so"}) {
    CommandResult symbols = run_command("nm -D --defined-only " + quote(kWork + "/" + library));
    ASSERT_EQ(symbols.exit_code, 0) << symbols.err;
    std::istringstream lines(symbols.out);
    std::set<std::string> exported;
    for (std::string line; std::getline(lines, line);) exported.insert(line.substr(line.rfind(' ') + 1));
    EXPECT_EQ(exported, std::set<std::string>{"memplan_plugin_v1"}) << library << ":\n" << symbols.out;
  }
}

// examples/plugins/adan-optimizer/scenario.toml, whose [plugins] search_path
// names the build folder beside it. The hand check is in its header:
// P = 6,738,415,616, mixed bf16, ZeRO-1 over 8 ranks.
TEST(OutOfTree, AdanScenarioThroughTheInstalledCli) {
  const json estimate = run_json(kWork + "/adan-optimizer/scenario.toml");
  ASSERT_FALSE(estimate.empty());
  EXPECT_EQ(component(estimate, "per_gpu", "weights"), 13476831232u);          // 2 B x P
  EXPECT_EQ(component(estimate, "per_gpu", "gradients"), 13476831232u);        // 2 B x P
  EXPECT_EQ(component(estimate, "per_gpu", "master_weights"), 3369207808u);    // 4 B x P / 8
  EXPECT_EQ(component(estimate, "per_gpu", "optimizer_states"), 13476831232u); // 4 states x 4 B x P / 8
  for (const json& item : estimate.at("per_gpu").at("items"))
    if (item.at("role") == "optimizer_states") {
      EXPECT_EQ(item.at("added_by"), "adan") << item.dump();
    }
  bool listed = false;
  for (const json& plugin : estimate.at("plugins"))
    if (plugin.at("name") == "adan") {
      listed = true;
      EXPECT_EQ(plugin.at("kind"), "optimizer");
      EXPECT_EQ(plugin.at("version"), "1.1.2");
      EXPECT_EQ(plugin.at("library"), kWork + "/adan-optimizer/build/memplan-adan.so");
    }
  EXPECT_TRUE(listed) << estimate.at("plugins").dump();
}

// A params-only model makes the figures plain: P = 10^9, mixed bf16, no
// sharding, no activations.
std::string adan_scenario(const std::string& implementation) {
  // The paper view: the figures below count the optimizer's tensors, not the runtime.
  return "name = \"adan-1b\"\nmode = \"train\"\n\n[framework]\nuse = \"paper\"\n\n[model]\nparams = 1e9\n\n[precision]\nuse = \"mixed-bf16\"\n\n"
         "[optimizer]\nuse = \"adan\"\nimplementation = \"" +
         implementation + "\"\n\n[activations]\nuse = \"none\"\n\n[plugins]\nsearch_path = [\"" + kWork +
         "/adan-optimizer/build\"]\n";
}

TEST(OutOfTree, AdanForeachAddsTheDenominatorDuringTheStep) {
  TempDir dir;
  const json estimate = run_json(dir.write("adan-1b.toml", adan_scenario("foreach")));
  ASSERT_FALSE(estimate.empty());
  // 4 states x 4 B x 10^9, and torch._foreach_sqrt's denom: 1 x 4 B x 10^9.
  EXPECT_EQ(item_bytes(estimate, "per_gpu", "parameters", "optimizer_states"), 16000000000u);
  EXPECT_EQ(item_bytes(estimate, "per_gpu", "parameters.foreach_temps", "optimizer_states"), 4000000000u);
  const json& timeline = estimate.at("per_gpu").at("timeline");
  // weights 2 + gradients 2 + master 4 + states 16 (x 10^9 B) through backward; + denom 4 in the step.
  EXPECT_EQ(timeline.at("backward"), 24000000000u);
  EXPECT_EQ(timeline.at("optimizer"), 28000000000u);
  EXPECT_EQ(estimate.at("per_gpu").at("peak"), 28000000000u);
}

TEST(OutOfTree, AdanRejectsAnUnknownImplementationAtTheOption) {
  TempDir dir;
  const std::string scenario = dir.write("adan-1b.toml", adan_scenario("triton"));
  CommandResult result = run_installed("run " + quote(scenario));
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_EQ(result.err, scenario +
                            ":15:18: error: in [optimizer], optimizer plugin 'adan', option 'implementation': must be "
                            "\"fused\" or \"foreach\", not \"triton\" (plugin library " +
                            kWork + "/adan-optimizer/build/memplan-adan.so)\n");
}

// examples/plugins/activation-offload/scenario.toml (hand check in its header):
// each of the 32 layers stores 539,492,352 B (megatron model, no recomputation);
// fraction = 0.75 moves 12,947,816,448 B of the 17,263,755,264 B to the host.
TEST(OutOfTree, ActivationOffloadScenarioThroughTheInstalledCli) {
  const std::string scenario = kWork + "/activation-offload/scenario.toml";
  const json estimate = run_json(scenario);
  ASSERT_FALSE(estimate.empty());
  EXPECT_EQ(item_bytes(estimate, "per_gpu", "layers.0-31.activations", "activations"), 4315938816u);
  EXPECT_EQ(item_bytes(estimate, "per_cpu", "layers.0-31.activations", "activations"), 12947816448u);
  EXPECT_EQ(estimate.at("per_cpu").at("sum"), 12947816448u);
  EXPECT_EQ(component(estimate, "per_cpu", "activations"), 12947816448u);

  // The same scenario with fraction = 0 keeps everything on the GPU: 12,947,816,448 B more there.
  std::string text = slurp(scenario);
  const std::string option = "\nfraction = 0.75\n";
  ASSERT_NE(text.find(option), std::string::npos);
  text.replace(text.find(option), option.size(), "\nfraction = 0\n");
  const std::string kept_path = kWork + "/activation-offload/scenario-fraction-0.toml";  // beside build/
  std::ofstream(kept_path) << text;
  const json kept = run_json(kept_path);
  ASSERT_FALSE(kept.empty());
  EXPECT_EQ(item_bytes(kept, "per_gpu", "layers.0-31.activations", "activations"), 17263755264u);
  EXPECT_EQ(kept.at("per_cpu").at("sum"), 0u);
  EXPECT_EQ(component(kept, "per_gpu", "activations") - component(estimate, "per_gpu", "activations"), 12947816448u);
}

TEST(OutOfTree, ActivationOffloadRejectsAFractionAboveOne) {
  std::string text = slurp(kWork + "/activation-offload/scenario.toml");
  const std::string option = "\nfraction = 0.75\n";
  ASSERT_NE(text.find(option), std::string::npos);
  text.replace(text.find(option), option.size(), "\nfraction = 1.5\n");
  const std::string path = kWork + "/activation-offload/scenario-fraction-1.5.toml";
  std::ofstream(path) << text;
  CommandResult result = run_installed("run " + quote(path));
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_EQ(result.err, path +
                            ":54:12: error: in [[strategy]] #3, strategy plugin 'activation-offload', option "
                            "'fraction': must be a number from 0 to 1, got 1.5 (plugin library " +
                            kWork + "/activation-offload/build/memplan-activation-offload.so)\n");
}

// memplan_add_plugin's install rule: lib/memplan/plugins under the install prefix.
TEST(OutOfTree, InstallRulePutsThePluginInAPluginFolder) {
  const std::string prefix = kWork + "/adan-installed";
  fs::remove_all(prefix);
  CommandResult install = run_command(quote(INSTALL_CMAKE) + " --install " + quote(kWork + "/adan-optimizer/build") +
                                      " --prefix " + quote(prefix));
  ASSERT_EQ(install.exit_code, 0) << install.out << install.err;
  EXPECT_EQ(file_names(prefix), std::set<std::string>{"lib/memplan/plugins/memplan-adan.so"});
  CommandResult plugins = run_installed("plugins", prefix + "/lib/memplan/plugins");
  EXPECT_EQ(plugins.exit_code, 0) << plugins.err;
  EXPECT_TRUE(contains(plugins.out, "optimizer\tadan\t1.1.2\t" + prefix + "/lib/memplan/plugins/memplan-adan.so\n"))
      << plugins.out;
}

// ------------------------------------------------------- across toolchains

TEST(Compatibility, ClangBuiltPluginRunsInTheMemplanThatGccBuilt) {
  if (std::string(INSTALL_CLANGXX).empty()) GTEST_SKIP() << "no clang++";
  const std::string library = kWork + "/adan-optimizer-clang/build/memplan-adan.so";
  EXPECT_TRUE(contains(built_by(library), "clang version")) << built_by(library);
  if (std::string(INSTALL_HOST_CXX_ID) == "GNU") {
    EXPECT_TRUE(contains(built_by(kPrefix + "/bin/memplan"), "GCC: ")) << built_by(kPrefix + "/bin/memplan");
  }

  const json by_clang = run_json(kWork + "/adan-optimizer-clang/scenario.toml");
  const json by_gcc = run_json(kWork + "/adan-optimizer/scenario.toml");
  ASSERT_FALSE(by_clang.empty());
  EXPECT_EQ(by_clang.at("per_gpu"), by_gcc.at("per_gpu"));
  EXPECT_EQ(component(by_clang, "per_gpu", "optimizer_states"), 13476831232u);
  bool listed = false;
  for (const json& plugin : by_clang.at("plugins"))
    if (plugin.at("name") == "adan") listed = plugin.at("library") == library;
  EXPECT_TRUE(listed) << by_clang.at("plugins").dump();

  // An exception thrown in the clang-built plugin is caught there and reported through the C ABI.
  std::string text = slurp(kWork + "/adan-optimizer-clang/scenario.toml");
  const std::string option = "\nimplementation = \"fused\"";
  ASSERT_NE(text.find(option), std::string::npos);
  text.replace(text.find(option), option.size(), "\nimplementation = \"triton\"");
  const std::string path = kWork + "/adan-optimizer-clang/scenario-triton.toml";
  std::ofstream(path) << text;
  CommandResult result = run_installed("run " + quote(path));
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_EQ(result.err, path +
                            ":34:18: error: in [optimizer], optimizer plugin 'adan', option 'implementation': must be "
                            "\"fused\" or \"foreach\", not \"triton\" (plugin library " +
                            library + ")\n");
}

TEST(Compatibility, GccBuiltPluginRunsInAHostThatClangBuilt) {
  if (std::string(INSTALL_CLANGXX).empty()) GTEST_SKIP() << "no clang";
  const std::string host = kWork + "/mini-host-clang/build/mini_host";
  const std::string library = kWork + "/adan-optimizer/build/memplan-adan.so";
  EXPECT_TRUE(contains(built_by(host), "clang version")) << built_by(host);
  if (std::string(INSTALL_HOST_CXX_ID) == "GNU") {
    EXPECT_TRUE(contains(built_by(library), "GCC: "));
  }

  CommandResult result = run_command(quote(host) + " " + quote(library) + " foreach");
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.out,
            "plugin adan 1.1.2, ABI 1.3, kind 1, phase 400\n"
            "item parameters role 0 lifetime 0 device 0 elements 1000000000 bytes_per_element 2\n"
            "item parameters role 3 lifetime 0 device 0 elements 4000000000 bytes_per_element 4\n"
            "item parameters.foreach_temps role 3 lifetime 5 device 0 elements 1000000000 bytes_per_element 4\n");

  CommandResult refused = run_command(quote(host) + " " + quote(library) + " triton");
  EXPECT_EQ(refused.exit_code, 1) << refused.err;
  EXPECT_EQ(refused.out,
            "plugin adan 1.1.2, ABI 1.3, kind 1, phase 400\n"
            "error (status -1): option 'implementation': must be \"fused\" or \"foreach\", not \"triton\"\n");
}

// ------------------------------------------------------------------ versions

// Configures tests/install/version-check against the prefix, asking for `request`.
CommandResult find_package_memplan(const std::string& request, const std::string& label) {
  const std::string build = kWork + "/version-check-" + label;
  fs::remove_all(build);
  return run_command(quote(INSTALL_CMAKE) + " -S " + quote(source_dir() + "/tests/install/version-check") + " -B " +
                     quote(build) + " -DCMAKE_PREFIX_PATH=" + quote(kPrefix) +
                     " -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF -DMEMPLAN_REQUEST=" + quote(request));
}

TEST(Versions, FindPackageAcceptsTheInstalledSdkMajor) {
  for (const std::string request : {"", "1", "1.0"}) {
    CommandResult result = find_package_memplan(request, "ok" + request);
    EXPECT_EQ(result.exit_code, 0) << request << ": " << result.out << result.err;
    EXPECT_TRUE(contains(result.out, "-- memplan SDK " INSTALL_SDK_VERSION " (release " INSTALL_RELEASE ") found in " +
                                         kPrefix + "/lib/cmake/memplan\n"))
        << result.out;
    EXPECT_TRUE(contains(result.out, "-- memplan plugins: " + kPrefix + "/lib/memplan/plugins; binary: " + kPrefix +
                                         "/bin/memplan\n"))
        << result.out;
  }
}

std::string refusal(const std::string& request, const std::string& why) {
  return "-- memplan: the SDK in " + kPrefix + " is version 1.3 (plugin ABI 1.3, memplan " INSTALL_RELEASE
         "), which does not satisfy find_package(memplan " + request + "): " + why +
         " (rule: same major version, installed minor at least the requested one). Ask for find_package(memplan "
         "1.3) to build for this memplan, or point CMAKE_PREFIX_PATH at a memplan whose SDK is " +
         request.substr(0, 1) + ".x.\n";
}

TEST(Versions, FindPackageRefusesAnotherMajorAndSaysWhy) {
  CommandResult result = find_package_memplan("2", "major");
  EXPECT_NE(result.exit_code, 0);
  EXPECT_TRUE(contains(result.out, refusal("2", "the major versions differ, and a plugin built for plugin ABI 2.x "
                                                "does not load in a memplan of ABI 1.x")))
      << result.out;
  // CMake's own error names both versions too.
  EXPECT_TRUE(contains(result.err, "compatible with requested version \"2\"")) << result.err;
  EXPECT_TRUE(contains(result.err, "memplanConfig.cmake, version: 1.3")) << result.err;
}

TEST(Versions, FindPackageRefusesANewerMinorAndSaysWhy) {
  CommandResult result = find_package_memplan("1.4", "minor");
  EXPECT_NE(result.exit_code, 0);
  EXPECT_TRUE(contains(result.out, refusal("1.4", "it asks for a newer minor version than is installed, and a plugin "
                                                  "built against SDK 1.4 does not load in a memplan of ABI 1.3")))
      << result.out;
  EXPECT_TRUE(contains(result.err, "memplanConfig.cmake, version: 1.3")) << result.err;
}

// The Adan example compiled against a copy of the installed headers whose ABI
// version is `major`.`minor`, as a plugin built against a newer SDK would be.
std::string build_against_sdk(int major, int minor) {
  const std::string sdk = kWork + "/sdk-" + std::to_string(major) + "." + std::to_string(minor);
  fs::remove_all(sdk);
  fs::create_directories(sdk + "/include");
  fs::copy(kPrefix + "/include/memplan", sdk + "/include/memplan", fs::copy_options::recursive);
  std::string header = slurp(sdk + "/include/memplan/plugin_abi.h");
  for (auto [from, to] : {std::pair{std::string("#define MEMPLAN_ABI_MAJOR 1"), "#define MEMPLAN_ABI_MAJOR " +
                                                                                   std::to_string(major)},
                          std::pair{std::string("#define MEMPLAN_ABI_MINOR 3"), "#define MEMPLAN_ABI_MINOR " +
                                                                                   std::to_string(minor)}}) {
    const size_t at = header.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    if (at != std::string::npos) header.replace(at, from.size(), to);
  }
  std::ofstream(sdk + "/include/memplan/plugin_abi.h", std::ios::trunc) << header;
  fs::create_directories(sdk + "/plugins");
  const std::string library = sdk + "/plugins/memplan-adan.so";
  CommandResult built = run_command(quote(INSTALL_HOST_CXX) + " -std=c++20 -shared -fPIC -fvisibility=hidden " +
                                    "-Wl,--no-undefined -I" + quote(sdk + "/include") + " -o " + quote(library) + " " +
                                    quote(source_dir() + "/examples/plugins/adan-optimizer/adan.cpp"));
  EXPECT_EQ(built.exit_code, 0) << built.err;
  return library;
}

TEST(Versions, PluginBuiltAgainstANewerSdkMinorIsRefused) {
  const std::string library = build_against_sdk(1, 4);
  CommandResult result = run_installed("plugins", fs::path(library).parent_path().string());
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_TRUE(contains(result.err, "plugin library " + library +
                                       " was not loaded: it was built for plugin ABI 1.4, newer than this memplan's "
                                       "ABI 1.3 (rule: the plugin's ABI minor must not exceed the host's). Upgrade "
                                       "memplan, or rebuild the plugin against SDK 1.3.\n"))
      << result.err;
}

TEST(Versions, PluginBuiltAgainstAnotherSdkMajorIsRefused) {
  const std::string library = build_against_sdk(2, 0);
  CommandResult result = run_installed("plugins", fs::path(library).parent_path().string());
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_TRUE(contains(result.err, "plugin library " + library +
                                       " was not loaded: it was built for plugin ABI 2.0 but this memplan implements "
                                       "ABI 1.3 (rule: the ABI major versions must be equal). Rebuild the plugin "
                                       "against memplan SDK 1.x.\n"))
      << result.err;
}

// ------------------------------------------------------------------ packages

// Runs the memplan of an unpacked package: it must find its plugins and
// catalog beside itself, under `root`.
void expect_unpacked_memplan_works(const std::string& root, const std::string& binary) {
  CommandResult plugins = run_command(clean_environment() + quote(binary) + " plugins");
  EXPECT_EQ(plugins.exit_code, 0) << plugins.err;
  std::istringstream listing(plugins.out);
  size_t lines = 0, profiles = 0;
  for (std::string line; std::getline(listing, line);) {
    if (line.rfind("framework\t", 0) == 0) {  // framework profiles, from the unpacked catalog
      ++profiles;
      EXPECT_TRUE(contains(line, "\t" + root + "/share/memplan/frameworks/")) << line;
      continue;
    }
    ++lines;
    EXPECT_TRUE(contains(line, "\t" + root + "/lib/memplan/plugins/memplan-")) << line;
  }
  EXPECT_EQ(lines, file_names(plugin_dir()).size());
  EXPECT_EQ(profiles, file_names(data_dir() + "/frameworks").size());
  CommandResult run = run_command(clean_environment() + quote(binary) + " run " +
                                  quote(source_dir() + "/examples/llama2-7b-single-gpu.toml") + " --format json");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(component(json::parse(run.out), "per_gpu", "weights"), 13476831232u);
}

std::string only_file(const std::string& folder, const std::string& extension) {
  std::vector<std::string> found;
  for (const auto& entry : fs::directory_iterator(folder))
    if (entry.is_regular_file() && entry.path().string().ends_with(extension)) found.push_back(entry.path().string());
  EXPECT_EQ(found.size(), 1u) << folder << " *" << extension;
  return found.empty() ? "" : found.front();
}

TEST(Packages, DebInstallsTheLayoutUnderUsrWithItsDependencies) {
  const std::string deb = only_file(kWork + "/packages", ".deb");
  ASSERT_FALSE(deb.empty());
  EXPECT_EQ(fs::path(deb).filename().string(), "memplan_" INSTALL_RELEASE "_amd64.deb");
  CommandResult fields = run_command("dpkg-deb -f " + quote(deb) + " Package Version Maintainer Depends");
  ASSERT_EQ(fields.exit_code, 0) << fields.err;
  EXPECT_TRUE(contains(fields.out, "Package: memplan\nVersion: " INSTALL_RELEASE "\nMaintainer: ")) << fields.out;
  const std::string listing = run_command("dpkg-deb -c " + quote(deb)).out;
  for (const char* file : {"./usr/bin/memplan", "./usr/lib/memplan/plugins/memplan-adam.so",
                           "./usr/share/memplan/gpus.toml", "./usr/include/memplan/sdk.hpp",
                           "./usr/include/memplan/plugin_abi.h", "./usr/lib/cmake/memplan/memplanConfig.cmake",
                           "./usr/lib/cmake/memplan/memplanAddPlugin.cmake"})
    EXPECT_TRUE(contains(listing, std::string(file) + "\n")) << file;
  const std::string unpacked = kWork + "/deb-unpacked";
  fs::remove_all(unpacked);
  ASSERT_EQ(run_command("dpkg-deb -x " + quote(deb) + " " + quote(unpacked)).exit_code, 0);
  expect_unpacked_memplan_works(unpacked + "/usr", unpacked + "/usr/bin/memplan");

  // Every shared library the binary names (ELF NEEDED) comes from a package
  // the .deb depends on; the libraries those need come with their own
  // packages' dependencies. A sanitizer build also links the
  // sanitizer runtimes, which no package should need.
  if (INSTALL_SANITIZED) return;
  CommandResult needed = run_command("readelf -d " + quote(kPrefix + "/bin/memplan"));
  ASSERT_EQ(needed.exit_code, 0) << needed.err;
  std::set<std::string> needed_names;
  std::istringstream needed_lines(needed.out);
  for (std::string line; std::getline(needed_lines, line);)
    if (contains(line, "(NEEDED)") && contains(line, "["))
      needed_names.insert(line.substr(line.find('[') + 1, line.find(']') - line.find('[') - 1));
  const std::string depends = fields.out.substr(fields.out.find("Depends: "));
  // libcurl is opened when a bundle repository is first contacted
  // (core/bundle/src/http.cpp), so it is no NEEDED entry; the package must
  // depend on it all the same.
  EXPECT_FALSE(needed_names.contains("libcurl.so.4")) << needed.out;
  EXPECT_TRUE(contains(depends, " libcurl4 (")) << depends;
  CommandResult libraries = run_command("ldd " + quote(kPrefix + "/bin/memplan"));
  ASSERT_EQ(libraries.exit_code, 0) << libraries.err;
  std::istringstream lines(libraries.out);
  size_t checked = 0;
  for (std::string line; std::getline(lines, line);) {
    const size_t arrow = line.find("=> /");
    if (arrow == std::string::npos) continue;
    const size_t name_start = line.find_first_not_of(" \t");
    if (!needed_names.contains(line.substr(name_start, line.find(' ', name_start) - name_start))) continue;
    ++checked;
    std::string path = line.substr(arrow + 3, line.find(" (", arrow) - arrow - 3);
    std::string owner = run_command("dpkg -S " + quote(path)).out;
    if (owner.empty() && path.starts_with("/lib/")) owner = run_command("dpkg -S " + quote("/usr" + path)).out;
    ASSERT_FALSE(owner.empty()) << "no package ships " << path;
    const std::string package = owner.substr(0, owner.find_first_of(":,"));
    EXPECT_TRUE(contains(depends, " " + package + ",") || contains(depends, " " + package + " (") ||
                depends.ends_with(" " + package + "\n"))
        << path << " comes from " << package << ", which the .deb does not depend on: " << depends;
  }
  EXPECT_GE(checked, 3u) << libraries.out;  // at least Boost, toml++ and libcrypto were looked at
}

TEST(Packages, TarballHasThePrefixLayout) {
  const std::string tarball = only_file(kWork + "/packages", ".tar.gz");
  ASSERT_FALSE(tarball.empty());
  EXPECT_EQ(fs::path(tarball).filename().string(), "memplan-" INSTALL_RELEASE "-Linux.tar.gz");
  const std::string listing = run_command("tar -tzf " + quote(tarball)).out;
  for (const char* file : {"bin/memplan", "lib/memplan/plugins/memplan-adam.so", "share/memplan/gpus.toml",
                           "include/memplan/sdk.hpp", "lib/cmake/memplan/memplanConfig.cmake"})
    EXPECT_TRUE(contains(listing, "memplan-" INSTALL_RELEASE "-Linux/" + std::string(file) + "\n")) << file;
  const std::string unpacked = kWork + "/tgz-unpacked";
  fs::remove_all(unpacked);
  fs::create_directories(unpacked);
  ASSERT_EQ(run_command("tar -xzf " + quote(tarball) + " -C " + quote(unpacked)).exit_code, 0);
  const std::string root = unpacked + "/memplan-" INSTALL_RELEASE "-Linux";
  expect_unpacked_memplan_works(root, root + "/bin/memplan");
}

}  // namespace
}  // namespace memplan::testing

namespace memplan::testing {
namespace {

// Issue 5's whole journey in one test: team A installs memplan, builds two
// plugins out of tree against the installed package, runs a scenario with
// them, packs and signs them as a bundle; team B (another home, trusting A's
// key) installs the bundle and runs the same scenario, getting the same
// estimate from the bundle's copies of the libraries. A second path does the
// same through a repository served over HTTP.
TEST(TeamHandoff, BuildPackSignInstallAndRunElsewhere) {
  TempDir teams;
  const std::string home_a = teams.path() + "/home-a";
  const std::string home_b = teams.path() + "/home-b";
  fs::create_directories(home_a);
  fs::create_directories(home_b);
  const std::string adan = kWork + "/adan-optimizer/build/memplan-adan.so";
  const std::string offload = kWork + "/activation-offload/build/memplan-activation-offload.so";
  ASSERT_TRUE(fs::exists(adan) && fs::exists(offload));

  const std::string body =
      "name = \"handoff\"\nmode = \"train\"\n[model]\npreset = \"llama-2-7b\"\n[batch]\nseq_len = 4096\n"
      "[precision]\nuse = \"mixed-bf16\"\n[optimizer]\nuse = \"adan\"\n[activations]\nuse = \"megatron\"\n"
      "flash_attention = true\ndropout = false\n[[strategy]]\nuse = \"data-parallel\"\nsize = 8\n"
      "[[strategy]]\nuse = \"zero\"\nstage = 1\n[[strategy]]\nuse = \"activation-offload\"\nfraction = 0.75\n"
      "[hardware]\ngpu = \"h100-sxm-80gb\"\ncount = 8\n";
  const std::string scenario_a = teams.write("a/scenario.toml", body);
  const std::string scenario_b =
      teams.write("b/scenario.toml", body + "[plugins]\nbundles = [\"acme-plugins>=1.2\"]\n");
  auto memplan = [&](const std::string& home, const std::string& arguments, const std::string& plugin_path = "") {
    std::string command = "env -u MEMPLAN_PLUGIN_PATH MEMPLAN_HOME=" + quote(home) + " ";
    if (!plugin_path.empty()) command += "MEMPLAN_PLUGIN_PATH=" + quote(plugin_path) + " ";
    return run_command(command + quote(kPrefix + "/bin/memplan") + " " + arguments);
  };

  // Team A: the plugins from their build folders.
  const CommandResult run_a = memplan(home_a, "run " + quote(scenario_a) + " --format json",
                                      fs::path(adan).parent_path().string() + ":" + fs::path(offload).parent_path().string());
  ASSERT_EQ(run_a.exit_code, 0) << run_a.err;
  const json estimate_a = json::parse(run_a.out);

  // Team A packs and signs.
  const std::string key = teams.path() + "/keys/acme.pem";
  const std::string bundle = teams.path() + "/out/acme-plugins";
  fs::create_directories(teams.path() + "/keys");
  fs::create_directories(teams.path() + "/out");
  ASSERT_EQ(memplan(home_a, "bundle keygen --out " + quote(key)).exit_code, 0);
  const CommandResult created =
      memplan(home_a, "bundle create " + quote(bundle) + " --name acme-plugins --version 1.2.0 --publisher Acme" +
                          " --library " + quote(adan) + " --library " + quote(offload));
  ASSERT_EQ(created.exit_code, 0) << created.err;
  ASSERT_EQ(memplan(home_a, "bundle sign " + quote(bundle) + " --key " + quote(key)).exit_code, 0);
  // Verifying checks the signature against the verifier's trust store: team A trusts its own key.
  const std::string public_key = teams.path() + "/keys/acme.pub.pem";
  ASSERT_EQ(memplan(home_a, "trust add " + quote(public_key) + " --name Acme").exit_code, 0);
  const CommandResult verified = memplan(home_a, "bundle verify " + quote(bundle));
  ASSERT_EQ(verified.exit_code, 0) << verified.err;

  // Team B: nothing is trusted yet, so the install is refused and leaves nothing.
  const CommandResult untrusted = memplan(home_b, "bundle install " + quote(bundle));
  EXPECT_NE(untrusted.exit_code, 0);
  EXPECT_TRUE(contains(memplan(home_b, "bundle list").out + memplan(home_b, "bundle list").err, "acme") == false);

  // Team B trusts A's public key, installs, and runs the same scenario.
  ASSERT_EQ(memplan(home_b, "trust add " + quote(public_key) + " --name Acme").exit_code, 0);
  const CommandResult installed = memplan(home_b, "bundle install " + quote(bundle));
  ASSERT_EQ(installed.exit_code, 0) << installed.err;
  const CommandResult run_b = memplan(home_b, "run " + quote(scenario_b) + " --format json");
  ASSERT_EQ(run_b.exit_code, 0) << run_b.err;
  EXPECT_EQ(run_b.err, "");
  const json estimate_b = json::parse(run_b.out);

  // The same estimate, from the bundle's copies under team B's home.
  EXPECT_EQ(estimate_b.at("per_gpu").at("components"), estimate_a.at("per_gpu").at("components"));
  EXPECT_EQ(estimate_b.at("per_gpu").at("peak"), estimate_a.at("per_gpu").at("peak"));
  EXPECT_EQ(estimate_b.at("per_cpu").at("sum"), estimate_a.at("per_cpu").at("sum"));
  // Adan's four fp32 states over 8 ZeRO-1 ranks: 16 x 6,738,415,616 / 8.
  EXPECT_EQ(estimate_b.at("per_gpu").at("components").at("optimizer_states").get<uint64_t>(), 13'476'831'232u);
  int from_bundle = 0;
  for (const json& plugin : estimate_b.at("plugins")) {
    const std::string name = plugin.at("name");
    if (name != "adan" && name != "activation-offload") continue;
    EXPECT_EQ(plugin.at("library").get<std::string>().rfind(home_b, 0), 0u) << plugin.dump();
    ++from_bundle;
  }
  EXPECT_EQ(from_bundle, 2);

  // Without the bundle the requirement names what is missing.
  ASSERT_EQ(memplan(home_b, "bundle remove acme-plugins").exit_code, 0);
  const CommandResult missing = memplan(home_b, "run " + quote(scenario_b));
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_TRUE(contains(missing.err, "acme-plugins")) << missing.err;

  // The second path (issue 14): team A publishes the bundle to a repository
  // folder, a web server serves it on 127.0.0.1, and team C (another home,
  // whose trust store stays empty) adds the repository with A's public key,
  // installs the bundle by name and runs the same scenario.
  const std::string home_c = teams.path() + "/home-c";
  fs::create_directories(home_c);
  const std::string repository = teams.path() + "/repository";
  const CommandResult published = memplan(home_a, "bundle publish " + quote(bundle) + " --to " + quote(repository));
  ASSERT_EQ(published.exit_code, 0) << published.err;
  ASSERT_TRUE(fs::exists(repository + "/index.toml"));
  LocalHttpServer server(repository);
  ASSERT_TRUE(server.started()) << server.problem();
  const CommandResult added = memplan(home_c, "repo add acme " + server.url() + " --key " + quote(public_key));
  ASSERT_EQ(added.exit_code, 0) << added.err;
  const CommandResult by_name = memplan(home_c, "bundle install acme-plugins");
  ASSERT_EQ(by_name.exit_code, 0) << by_name.err;
  EXPECT_TRUE(contains(by_name.out, "installed bundle acme-plugins 1.2.0 from Acme")) << by_name.out;
  EXPECT_EQ(memplan(home_c, "trust list").out, "");  // A's key is trusted through the repository only
  const CommandResult run_c = memplan(home_c, "run " + quote(scenario_b) + " --format json");
  ASSERT_EQ(run_c.exit_code, 0) << run_c.err;
  EXPECT_EQ(run_c.err, "");
  const json estimate_c = json::parse(run_c.out);
  EXPECT_EQ(estimate_c.at("per_gpu").at("components"), estimate_a.at("per_gpu").at("components"));
  EXPECT_EQ(estimate_c.at("per_gpu").at("peak"), estimate_a.at("per_gpu").at("peak"));
  EXPECT_EQ(estimate_c.at("per_cpu").at("sum"), estimate_a.at("per_cpu").at("sum"));
  int from_repository = 0;
  for (const json& plugin : estimate_c.at("plugins")) {
    const std::string name = plugin.at("name");
    if (name != "adan" && name != "activation-offload") continue;
    EXPECT_EQ(plugin.at("library").get<std::string>().rfind(home_c, 0), 0u) << plugin.dump();
    ++from_repository;
  }
  EXPECT_EQ(from_repository, 2);
}

}  // namespace
}  // namespace memplan::testing
