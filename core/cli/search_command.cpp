#include "search_command.hpp"

#include <boost/program_options.hpp>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <thread>

#include "memplan/core/catalog.hpp"
#include "memplan/core/install_layout.hpp"
#include "memplan/core/search.hpp"
#include "scenario_report.hpp"
#include "terminal_output.hpp"

namespace memplan::cli {
namespace {

namespace po = boost::program_options;

constexpr const char* kSearchUsage =
    "usage: memplan search FILE [--threads N] [--top N] [--output ROWS.csv] [--shard K/N] [--set key=value]...\n"
    "       memplan search FILE --merge ROWS.csv... [--output ROWS.csv] [--top N]\n"
    "\n"
    "Evaluates every combination of the scenario's [search] axes (docs/search.md), keeps those that fit,\n"
    "ranks them by the objective (step time, memory or cost) and prints the best and the Pareto front of peak\n"
    "memory against step time, with counts of what did not fit and why. --output writes every row as CSV\n"
    "(streamed: memory stays flat). --shard K/N evaluates the K-th of N interleaved parts (for a Slurm\n"
    "job array or an indexed Kubernetes job); --merge joins the parts' CSV files into exactly the\n"
    "unsharded result.\n\n";

std::string gib(uint64_t bytes) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.2f", static_cast<double>(bytes) / 1073741824.0);
  return buffer;
}

std::string seconds_text(double seconds) {
  if (seconds <= 0) return "-";
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.3f", seconds);
  return buffer;
}

void print_rows(std::ostream& out, const SearchSpace& space, const std::vector<SearchRow>& rows) {
  out << "  #";
  for (const SearchAxis& axis : space.axes) out << "  " << axis.key;
  if (space.fill) out << "  " << space.fill->key;
  out << "  grad_accum  peak GiB  step s  tokens/s  MFU %";
  if (space.priced) out << "  USD/GPU-h  USD/Mtok" << (space.budget_tokens > 0 ? "  run USD" : "");
  out << "  pareto\n";
  size_t rank = 0;
  for (const SearchRow& row : rows) {
    out << "  " << ++rank;
    for (const std::string& value : row.values) out << "  " << terminal_text(value);
    if (space.fill) out << "  " << row.fill_value;
    char tail[160];
    std::snprintf(tail, sizeof tail, "  %lld  %s  %s  %.0f  %.1f", static_cast<long long>(row.grad_accum),
                  gib(row.peak_bytes).c_str(), seconds_text(row.step_seconds).c_str(), row.tokens_per_second,
                  100.0 * row.mfu);
    out << tail;
    if (space.priced) {
      // "-" where the row has no step time, so no cost.
      auto money = [](double usd, const char* format) {
        if (!(usd > 0)) return std::string("-");
        char text[48];
        std::snprintf(text, sizeof text, format, usd);
        return std::string(text);
      };
      out << "  " << money(row.usd_per_gpu_hour, "%.2f") << "  " << money(row.usd_per_million_tokens, "%.3f");
      if (space.budget_tokens > 0) out << "  " << money(row.run_usd, "%.0f");
    }
    out << "  " << (row.pareto ? "yes" : "") << "\n";
  }
}

void print_summary(std::ostream& out, const SearchSpace& space, const SearchSummary& summary, bool timed) {
  out << "search: " << summary.evaluated << " configurations evaluated: " << summary.fitting << " fit, "
      << summary.does_not_fit << " do not fit the GPU, " << summary.invalid
      << " are not valid layouts (the rows give each reason)\n";
  if (timed && summary.seconds > 0) {
    char rate[96];
    std::snprintf(rate, sizeof rate, "%.3f s, %.0f configurations per second\n", summary.seconds,
                  static_cast<double>(summary.evaluated) / summary.seconds);
    out << "time: " << rate;
  }
  out << "\nbest by "
      << (space.objective == SearchObjective::time     ? "step time"
          : space.objective == SearchObjective::memory ? "peak memory"
                                                       : (space.budget_tokens > 0 ? "the run's cost" : "cost per token"))
      << "\n";
  if (summary.best.empty()) out << "  none fits\n";
  else print_rows(out, space, summary.best);
  out << "\nPareto front (peak memory against step time)\n";
  if (summary.pareto.empty()) out << "  none (no configuration that fits has a step time)\n";
  else print_rows(out, space, summary.pareto);
}

// "K/N", 1 <= K <= N.
bool parse_shard(const std::string& text, uint64_t& shard, uint64_t& shards) {
  unsigned long long k = 0, n = 0;
  char slash = 0;
  int consumed = 0;
  if (std::sscanf(text.c_str(), "%llu%c%llu%n", &k, &slash, &n, &consumed) != 3 || slash != '/' ||
      consumed != static_cast<int>(text.size()) || n == 0 || k == 0 || k > n)
    return false;
  shard = k - 1;
  shards = n;
  return true;
}

}  // namespace

int search_command(const std::vector<std::string>& args) {
  po::options_description options("search options");
  options.add_options()("help,h", "show help")("file", po::value<std::string>(), "the scenario with [search]")(
      "threads", po::value<int>(), "threads (default: every core)")("top", po::value<int64_t>(),
                                                                     "best rows to print (default: [search] top)")(
      "output,o", po::value<std::string>(), "write every row as CSV to this file")(
      "shard", po::value<std::string>(), "K/N: evaluate the K-th of N interleaved parts")(
      "merge", po::value<std::vector<std::string>>()->multitoken(), "join the CSV files of a sharded search")(
      "set", po::value<std::vector<std::string>>(), "key.path=value: set a scenario key first (as memplan run)")(
      "allow-unsigned", "load installed bundles that are unsigned or signed by keys you do not trust");
  po::positional_options_description positional;
  positional.add("file", 1);
  po::variables_map vm;
  po::store(po::command_line_parser(args).options(options).positional(positional).run(), vm);
  po::notify(vm);
  if (vm.count("help")) {
    std::cout << kSearchUsage << options;
    return 0;
  }
  if (!vm.count("file")) {
    std::cerr << "memplan: error: `memplan search` needs a scenario file with a [search] table, e.g. memplan search "
                 "examples/search-llama2-70b-h100.toml\n";
    return 2;
  }
  const std::string file = vm["file"].as<std::string>();
  const std::vector<std::string> overrides =
      vm.count("set") ? vm["set"].as<std::vector<std::string>>() : std::vector<std::string>{};
  const InstallLayout layout = layout_beside(current_executable());
  const Catalog catalog = load_catalog(layout, vm.count("allow-unsigned") > 0);
  const Scenario scenario = load_scenario(file, catalog, overrides);
  for (const std::string& warning : scenario.warnings) print_line(std::cerr, warning);
  PluginRegistry registry;
  load_plugins(registry, layout, &scenario, cli_load_options(vm.count("allow-unsigned") > 0));
  print_warnings(registry);
  SearchSpace space = read_search_space(file, scenario, registry, catalog, overrides);
  if (vm.count("top")) {
    if (vm["top"].as<int64_t>() < 1) {
      std::cerr << "memplan: error: --top must be at least 1\n";
      return 2;
    }
    space.top = vm["top"].as<int64_t>();
  }
  const std::string header = search_csv_header(space);
  std::ofstream output;
  if (vm.count("output")) {
    output.open(vm["output"].as<std::string>(), std::ios::trunc);
    if (!output) {
      std::cerr << "memplan: error: cannot write " << vm["output"].as<std::string>() << "\n";
      return 1;
    }
    output << header << "\n";
  }

  if (vm.count("merge")) {
    if (vm.count("shard")) {
      std::cerr << "memplan: error: --merge joins the parts; it takes no --shard\n";
      return 2;
    }
    std::vector<SearchRow> rows;
    for (const std::string& part : vm["merge"].as<std::vector<std::string>>()) {
      std::vector<SearchRow> more = read_search_csv(part, header);
      rows.insert(rows.end(), std::make_move_iterator(more.begin()), std::make_move_iterator(more.end()));
    }
    std::sort(rows.begin(), rows.end(), [](const SearchRow& a, const SearchRow& b) { return a.index < b.index; });
    for (size_t i = 0; i < rows.size(); ++i)
      if (rows[i].index != i) {
        // Sorted: a repeat shows as the previous index again, a gap as a larger one.
        const bool repeat = i > 0 && rows[i].index == rows[i - 1].index;
        std::cerr << "memplan: error: the parts " << (repeat ? "repeat" : "miss") << " configuration "
                  << (repeat ? rows[i].index : i) << " of " << space.combinations
                  << "; merge the outputs of every --shard K/N of one N, once each\n";
        return 1;
      }
    if (rows.size() != space.combinations) {
      std::cerr << "memplan: error: the parts hold " << rows.size() << " of the " << space.combinations
                << " configurations; merge the outputs of every --shard K/N of one N\n";
      return 1;
    }
    SearchRanking ranking(space.objective, space.top);
    for (const SearchRow& row : rows) {
      ranking.add(row);
      if (output.is_open()) output << search_csv_line(row) << "\n";
    }
    print_summary(std::cout, space, ranking.summary(), false);
    return 0;
  }

  SearchOptions search;
  search.threads = vm.count("threads") ? vm["threads"].as<int>()
                                       : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  if (search.threads < 1) {
    std::cerr << "memplan: error: --threads must be at least 1\n";
    return 2;
  }
  if (vm.count("shard") && !parse_shard(vm["shard"].as<std::string>(), search.shard, search.shards)) {
    std::cerr << "memplan: error: --shard takes K/N with 1 <= K <= N, e.g. --shard 3/8, not '"
              << vm["shard"].as<std::string>() << "'\n";
    return 2;
  }
  search.progress = isatty(STDERR_FILENO) != 0;
  const SearchSummary summary = run_search(scenario, space, registry, search, [&](const SearchRow& row) {
    if (output.is_open()) output << search_csv_line(row) << "\n";
  });
  print_summary(std::cout, space, summary, true);
  return 0;
}

}  // namespace memplan::cli
