#include "catalog_commands.hpp"

#include "profile_detail.hpp"
#include "scenario_report.hpp"
#include "terminal_output.hpp"

#include <cmath>
#include <cstdio>
#include <iostream>
#include <optional>

#include "memplan/bundle/bundle.hpp"
#include "memplan/core/catalog.hpp"
#include "memplan/core/explain.hpp"
#include "memplan/core/install_layout.hpp"
#include "memplan/core/plugin_registry.hpp"
#include "memplan/core/scenario.hpp"
#include "memplan/core/text.hpp"

namespace memplan::cli {
namespace {

// Catalog entries and plugin texts come from files: printed with control characters escaped.
constexpr const char* kFromColumnHelp =
    "The last column, from, says where each entry comes from: built-in, or the installed bundle and its file\n"
    "(docs/bundles.md, \"Catalog files\"; --allow-unsigned reads unsigned bundles' files too).\n";
void print_line(const std::string& line) { cli::print_line(std::cout, line); }

// These commands take no arguments but --help and --allow-unsigned (which sets `allow_unsigned`): an exit
// status when they must stop here (0 after the help, 2 for anything else), nullopt to go on.
std::optional<int> no_arguments(const std::vector<std::string>& args, const char* command, const char* what,
                                bool& allow_unsigned) {
  for (const std::string& arg : args) {
    if (arg == "--help" || arg == "-h") {
      std::cout << "usage: memplan " << command << " [--allow-unsigned]\n\n" << what << "\n" << kFromColumnHelp;
      return 0;
    }
    if (arg == "--allow-unsigned") {
      allow_unsigned = true;
      continue;
    }
    std::cerr << "memplan: error: `memplan " << command << "` takes no arguments but --allow-unsigned, got '"
              << terminal_text(arg) << "'\n";
    return 2;
  }
  return std::nullopt;
}

// The last column of `presets` and `gpus`: where the entry comes from.
std::string from_column(const std::string& origin, const std::string& file) {
  return origin.empty() ? "built-in" : origin + " (" + file + ")";
}

std::string fixed(double value, int digits) {
  char text[32];
  std::snprintf(text, sizeof text, "%.*f", digits, value);
  return text;
}

std::string option_type(int32_t type) {
  switch (type) {
    case MEMPLAN_OPTION_INT: return "integer";
    case MEMPLAN_OPTION_DOUBLE: return "number";
    case MEMPLAN_OPTION_BOOL: return "boolean";
    case MEMPLAN_OPTION_STRING: return "string";
  }
  return "unknown";
}

// One plugin in detail: kind, name, version, library, summary, then each option.
void print_plugin(const LoadedPlugin& plugin) {
  const memplan_plugin_descriptor& descriptor = plugin.descriptor;
  print_line(std::string(kind_name(descriptor.kind)) + " " + plugin.name + " " + plugin.version);
  print_line("library: " + plugin.path);
  if (descriptor.summary != nullptr) print_line(std::string("summary: ") + descriptor.summary);
  if (plugin.options.empty()) {
    print_line("options: none");
    return;
  }
  print_line("options:");
  for (const memplan_option_spec& option : plugin.options) {
    print_line(std::string("  ") + (option.name ? option.name : "?") + " (" + option_type(option.type) +
               ", default: " + (option.default_text ? option.default_text : "none") + ")");
    if (option.help != nullptr) print_line(std::string("      ") + option.help);
    if (option.levers != nullptr) {
      const OptionLevers levers = parse_levers(option.levers);
      std::string values;
      for (const std::string& value : levers.values) values += (values.empty() ? "" : ",") + value;
      if (levers.layout)
        print_line("      layout size: memplan explain lays a job that does not fit out again with the values that "
                   "divide its GPUs");
      if (levers.fill) print_line("      fill: memplan explain sets it to fill the GPUs another layout leaves");
      if (!values.empty())
        print_line("      levers (memplan explain tries them on a job that does not fit): " + values);
    }
  }
}

}  // namespace

int presets_command(const std::vector<std::string>& args) {
  bool allow_unsigned = false;
  if (const auto status = no_arguments(args, "presets",
                                       "Lists the model presets a scenario can name ([model] preset = \"NAME\"): name,\n"
                                       "parameters (billions, as their authors publish them), layers, hidden size,\n"
                                       "attention heads, key/value heads, longest context (0: not stated), source.",
                                       allow_unsigned))
    return *status;
  const Catalog catalog = load_catalog(layout_beside(current_executable()), allow_unsigned);
  print_line("name\tparams_b\tlayers\thidden\theads\tkv_heads\tmax_context\tsource\tfrom");
  for (const ModelPreset& preset : catalog.models()) {
    const ModelSpec& spec = preset.spec;
    const double params = preset.published_params > 0 ? preset.published_params : spec.params_only;
    print_line(preset.name + "\t" + (params > 0 ? fixed(params / 1e9, 3) : std::string("-")) + "\t" +
               std::to_string(spec.layers) + "\t" + std::to_string(spec.hidden) + "\t" + std::to_string(spec.heads) +
               "\t" + std::to_string(spec.kv_heads > 0 ? spec.kv_heads : spec.heads) + "\t" +
               std::to_string(spec.max_context) + "\t" + preset.source + "\t" + from_column(preset.origin, preset.file));
  }
  return 0;
}

int gpus_command(const std::vector<std::string>& args) {
  bool allow_unsigned = false;
  if (const auto status = no_arguments(args, "gpus",
                                       "Lists the GPUs a scenario can name ([hardware] gpu = \"NAME\"): name, memory\n"
                                       "(GiB, nominal), NVLink SHARP (NCCL's NVLS), label, source, where it comes\n"
                                       "from, and the total CUDA reports (GiB; what `fits` compares with; \"-\" where\n"
                                       "the catalog gives none and the nominal size stands). Any other GPU:\n"
                                       "[hardware] memory_gib = N.",
                                       allow_unsigned))
    return *status;
  const Catalog catalog = load_catalog(layout_beside(current_executable()), allow_unsigned);
  print_line("name\tmemory_gib\tnvlink_sharp\tlabel\tsource\tfrom\tcuda_total_gib\tarchitecture");
  const auto gib = [](uint64_t bytes) { return fixed(static_cast<double>(bytes) / static_cast<double>(1ull << 30), 2); };
  for (const GpuEntry& gpu : catalog.gpus())
    print_line(gpu.name + "\t" + gib(gpu.nominal_bytes) + "\t" + (gpu.nvlink_sharp ? "yes" : "no") + "\t" + gpu.label +
               "\t" + gpu.source + "\t" + from_column(gpu.origin, gpu.location.str()) + "\t" +
               (gpu.cuda_total_source.empty() ? std::string("-") : gib(gpu.memory_bytes)) + "\t" +
               (gpu.architecture.empty() ? std::string("-") : gpu.architecture));
  return 0;
}

int plugin_detail_command(const std::string& name, bool allow_unsigned) {
  const InstallLayout layout = layout_beside(current_executable());
  PluginRegistry registry;
  load_plugins(registry, layout, nullptr, cli::cli_load_options(allow_unsigned));
  cli::print_warnings(registry);
  // Profiles are found by alias too, and some aliases are plugin names (docs/frameworks.md): a name that
  // answers for both shows both, as either may be what the reader looks for.
  // A catalog that does not load (a broken preset or profile file) still leaves the plugins to show: its error
  // becomes a warning, and only a name no plugin answers to fails with it.
  std::optional<Catalog> catalog;
  std::string catalog_error;
  try {
    catalog.emplace(load_catalog(layout, allow_unsigned));
  } catch (const Error& error) {
    catalog_error = error.what();
  }
  const LoadedPlugin* plugin = registry.find(name);
  const FrameworkProfile* profile = catalog ? catalog->find_framework(name) : nullptr;
  if (!catalog_error.empty()) {
    if (plugin == nullptr) {
      cli::print_line(std::cerr, "memplan: error: " + catalog_error);
      return 1;
    }
    cli::print_line(std::cerr, "memplan: warning: framework profiles not shown: " + catalog_error);
  }
  if (plugin == nullptr && profile == nullptr) {
    std::string plugins, profiles;
    for (const auto& loaded : registry.plugins()) plugins += (plugins.empty() ? "" : ", ") + loaded->name;
    for (const FrameworkProfile& known : catalog->frameworks()) profiles += (profiles.empty() ? "" : ", ") + known.name;
    cli::print_line(std::cerr, "memplan: error: no plugin or framework profile named '" + name + "' was found; "
                               "`memplan plugins` lists them all (plugins: " + plugins + "; framework profiles: " +
                               profiles + ")");
    return 1;
  }
  if (plugin != nullptr) print_plugin(*plugin);
  if (plugin != nullptr && profile != nullptr) print_line("");
  if (profile != nullptr) print_framework_profile(*profile, *catalog);
  return 0;
}

}  // namespace memplan::cli
