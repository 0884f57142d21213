#include "explain_command.hpp"

#include <algorithm>
#include <cstdio>
#include <iostream>

#include "memplan/core/catalog.hpp"
#include "memplan/core/explain.hpp"
#include "memplan/core/install_layout.hpp"
#include "memplan/core/text.hpp"
#include "scenario_report.hpp"
#include "terminal_output.hpp"

namespace memplan::cli {
namespace {

std::string gib(uint64_t bytes) { return format_gib(static_cast<double>(bytes)); }

// "peak 75.30 GiB (-17.91 GiB), step 4.921 s (+3.1 %)"
std::string effect(const ExplainChange& change, const Explanation& base) {
  std::string text = "peak " + gib(change.peak_bytes) + " (-" + gib(base.peak_bytes - std::min(base.peak_bytes, change.peak_bytes)) + ")";
  if (change.step_seconds > 0 && base.step_seconds > 0) {
    char time[64];
    std::snprintf(time, sizeof time, ", step %.3f s (%+.1f %%)", change.step_seconds,
                  100.0 * (change.step_seconds / base.step_seconds - 1));
    text += time;
  }
  return text;
}

}  // namespace

int explain_command(const std::vector<std::string>& args) {
  std::vector<std::string> files, overrides;
  bool allow_unsigned = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--help" || arg == "-h") {
      std::cout << "usage: memplan explain FILE [--set key.path=value]... [--allow-unsigned]\n\n"
                   "For a job that does not fit its GPU: the peak against the GPU, what fills it, and the smallest\n"
                   "changes that make it fit, cheapest in step time first. The changes are the levers the plugins\n"
                   "declare on their options (`memplan plugins NAME` lists them) and the micro-batch halved with\n"
                   "grad_accum doubled; pairs of them when no single change fits. Beside them, the layouts on the\n"
                   "same GPUs that fit: the layout sizes the plugins declare (tensor, pipeline, context sizes)\n"
                   "searched over the values that divide the GPUs, data parallelism filling (docs/search.md).\n";
      return 0;
    }
    if (arg == "--set" && i + 1 < args.size()) {
      overrides.push_back(args[++i]);
      continue;
    }
    if (arg.rfind("--set=", 0) == 0) {
      overrides.push_back(arg.substr(6));
      continue;
    }
    if (arg == "--allow-unsigned") {
      allow_unsigned = true;
      continue;
    }
    if (!arg.empty() && arg[0] == '-') {
      print_line(std::cerr, "memplan: error: `memplan explain` takes a scenario file, --set and --allow-unsigned, "
                            "not '" + arg + "'");
      return 2;
    }
    files.push_back(arg);
  }
  if (files.size() != 1) {
    std::cerr << "memplan: error: `memplan explain` takes one scenario file, e.g. memplan explain "
                 "examples/llama2-7b-single-gpu.toml\n";
    return 2;
  }
  const InstallLayout layout = layout_beside(current_executable());
  const Catalog catalog = load_catalog(layout, allow_unsigned);
  const Scenario scenario = load_scenario(files[0], catalog, overrides);
  for (const std::string& warning : scenario.warnings) print_line(std::cerr, warning);
  PluginRegistry registry;
  load_plugins(registry, layout, &scenario, cli_load_options(allow_unsigned));
  print_warnings(registry);
  const Explanation e = explain(scenario, registry);
  std::cout << "memplan explain: " << terminal_text(scenario.name) << "\n";
  if (!e.has_gpu) {
    std::cout << "no GPU given ([hardware] gpu or memory_gib): nothing to fit\n";
    return 0;
  }
  const std::string quantity = std::string(quantity_name(e.fit_quantity));
  if (e.fits) {
    std::cout << "fits (" << quantity << " memory): peak " << gib(e.peak_bytes) << " of " << gib(e.capacity_bytes)
              << ", " << gib(e.capacity_bytes - e.peak_bytes) << " to spare; nothing to change\n";
    return 0;
  }
  std::cout << "does not fit: peak " << gib(e.peak_bytes) << " (" << phase_name(e.peak_phase) << ", " << quantity
            << " memory) against " << gib(e.capacity_bytes) << ": " << gib(e.peak_bytes - e.capacity_bytes)
            << " over\n";
  std::vector<int32_t> roles;
  for (int32_t role = 0; role < MEMPLAN_ROLE_COUNT; ++role)
    if (e.components[static_cast<size_t>(role)] > 0) roles.push_back(role);
  std::sort(roles.begin(), roles.end(), [&](int32_t a, int32_t b) {
    return e.components[static_cast<size_t>(a)] > e.components[static_cast<size_t>(b)];
  });
  std::cout << "what the GPU holds over the step:";
  for (size_t i = 0; i < roles.size(); ++i)
    std::cout << (i ? ", " : " ") << role_name(roles[i]) << " " << gib(e.components[static_cast<size_t>(roles[i])]);
  std::cout << "\n";
  auto print_changes = [&](const std::vector<ExplainChange>& changes, const char* joiner) {
    size_t rank = 0;
    for (const ExplainChange& fix : changes) {
      if (++rank > 8) break;
      std::cout << "  " << rank << ". ";
      for (size_t i = 0; i < fix.changes.size(); ++i) std::cout << (i ? joiner : "") << terminal_text(fix.changes[i]);
      std::cout << "\n     " << effect(fix, e) << "\n";
    }
  };
  // Layouts on the same GPUs (the plugins' layout sizes, searched), beside the lever changes.
  auto print_layouts = [&] {
    if (e.layouts_tried == 0) return;
    if (e.layouts.empty()) {
      std::cout << "\nno other layout on the " << e.layout_gpus << " GPUs fits (" << e.layouts_tried
                << " valid layouts tried: the layout sizes the plugins declare, over the values that divide the "
                   "GPUs)\n";
      return;
    }
    std::cout << "\nlayouts on the same " << e.layout_gpus << " GPUs that fit (" << e.layouts.size() << " of "
              << e.layouts_tried << " valid layouts tried; fastest first):\n";
    print_changes(e.layouts, ", ");
  };
  if (!e.fixes.empty()) {
    std::cout << "\nchanges that make it fit (of " << e.candidates << " tried; cheapest in step time first):\n";
    print_changes(e.fixes, " and ");
    print_layouts();
    return 0;
  }
  std::cout << "\nno single change or pair of the " << e.candidates << " tried makes it fit"
            << (e.closest.empty() ? " (none of them saves memory; the scenario's plugins declare no lever that applies)\n"
                                  : "; the ones that save the most:\n");
  size_t rank = 0;
  for (const ExplainChange& change : e.closest) {
    if (++rank > 5) break;
    std::cout << "  " << rank << ". " << terminal_text(change.changes.front()) << "\n     " << effect(change, e) << "\n";
  }
  print_layouts();
  std::cout << (e.layouts.empty() ? "more GPUs, another layout (memplan search) or a smaller model are left\n" : "");
  return 0;
}

}  // namespace memplan::cli
