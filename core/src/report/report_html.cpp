// The HTML report (--format html): one self-contained HTML5 page, inline CSS
// and inline SVG only (no script, no external resource, no URL of any kind),
// readable offline and printable. Per scenario a <section> with the model and
// batch, the fit verdict, a bar chart of the per-GPU components, the step
// timeline against the capacity, the limits, the details and the advice.
// Each chart bar carries its exact size in bytes (data-bytes) and a <title>,
// so a test or a script can compare the page with the JSON report.
// Every text that comes from a file or a plugin is escaped (docs/html-report.md).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "memplan/core/report.hpp"
#include "memplan/core/text.hpp"
#include "report/advice.hpp"
#include "report/report_writers.hpp"

namespace memplan {
namespace {

constexpr std::string_view kSectionsBegin = "<!-- memplan:sections -->\n";
constexpr std::string_view kSectionsEnd = "<!-- /memplan:sections -->\n";

// Text for HTML content and quoted attribute values: control characters and
// bytes that are not UTF-8 shown as \xNN (as the table does), then the five
// characters HTML gives a meaning escaped.
std::string html_text(std::string_view text) {
  const std::string shown = terminal_text(text);
  std::string out;
  out.reserve(shown.size());
  for (char c : shown) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string gib(uint64_t bytes) { return format_gib(static_cast<double>(bytes)); }

std::string billions(double count) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.3f B", count / 1e9);
  return buffer;
}

// A coordinate in the SVG, in pixels.
std::string px(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.1f", value);
  return buffer;
}

// A size in bytes shown as a bar: its length is `bytes / scale` of `width`.
double bar_length(uint64_t bytes, double scale, double width) {
  if (scale <= 0) return 0;
  return std::min(width, static_cast<double>(bytes) / scale * width);
}

constexpr const char* kStyle = R"(<style>
:root { color-scheme: light; }
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; color: #1d2430;
  background: #fff; margin: 0 auto; padding: 1.5rem 2rem 3rem; max-width: 1100px; }
h1 { font-size: 1.6rem; margin: 0 0 1rem; }
h2 { font-size: 1.35rem; margin: 0 0 .5rem; border-bottom: 2px solid #d6dbe3; padding-bottom: .25rem; }
h3 { font-size: 1.05rem; margin: 1.4rem 0 .4rem; }
section.estimate { margin: 0 0 3rem; }
ul.facts { list-style: none; padding: 0; margin: 0 0 .8rem; }
ul.facts li { margin: .1rem 0; }
.label { color: #5a6475; }
code { font-family: ui-monospace, "DejaVu Sans Mono", monospace; font-size: .92em; }
p.verdict { font-size: 1.1rem; font-weight: 600; padding: .5rem .8rem; border-radius: 6px; margin: .8rem 0; }
p.verdict.fits { background: #e5f5e9; color: #17652d; }
p.verdict.no-fit { background: #fde8e8; color: #a11d1d; }
p.verdict.no-gpu { background: #eef0f4; color: #3d4757; }
table { border-collapse: collapse; margin: .3rem 0; }
th, td { text-align: left; padding: .2rem .9rem .2rem 0; vertical-align: top; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
th { color: #5a6475; font-weight: 600; border-bottom: 1px solid #d6dbe3; }
svg { display: block; max-width: 100%; height: auto; margin: .3rem 0; }
svg text { font: 12px system-ui, "DejaVu Sans", sans-serif; fill: #1d2430; }
svg .axis { stroke: #9aa3b2; stroke-width: 1; }
svg .capacity { stroke: #a11d1d; stroke-width: 2; stroke-dasharray: 8 5; }
svg text.capacity-label { fill: #a11d1d; }
svg .bar.role-weights { fill: #3867d6; }
svg .bar.role-gradients { fill: #e67e22; }
svg .bar.role-master_weights { fill: #8e44ad; }
svg .bar.role-optimizer_states { fill: #c0392b; }
svg .bar.role-activations { fill: #27ae60; }
svg .bar.role-kv_cache { fill: #16a085; }
svg .bar.role-buffers { fill: #7f8c8d; }
svg .bar.role-overhead { fill: #b7950b; }
svg .bar.phase { fill: #5b7fb9; }
svg .bar.phase.over { fill: #d64545; }
svg .bar.phase.peak { stroke: #1d2430; stroke-width: 1.5; }
ul.advice li { margin: .25rem 0; }
footer { color: #5a6475; font-size: .85rem; margin-top: 2rem; }
@media print { body { padding: 0; } section.estimate { break-inside: avoid-page; } }
</style>
)";

// Horizontal bars, one per role, scaled to the largest component.
void write_component_chart(std::ostream& out, const Breakdown& b) {
  uint64_t largest = 0;
  for (uint64_t bytes : b.components) largest = std::max(largest, bytes);
  const double label_width = 150, bar_width = 520, row = 26, top = 6;
  const double height = top + row * MEMPLAN_ROLE_COUNT + 8;
  const double scale = static_cast<double>(largest);
  out << "<svg class=\"chart components\" role=\"img\" width=\"820\" height=\"" << px(height) << "\" viewBox=\"0 0 820 "
      << px(height) << "\" aria-label=\"per-GPU memory by component\">\n";
  for (int32_t role = 0; role < MEMPLAN_ROLE_COUNT; ++role) {
    const uint64_t bytes = b.components[static_cast<size_t>(role)];
    const std::string name(role_name(role));
    const double y = top + row * role;
    const double length = bar_length(bytes, scale, bar_width);
    out << "<text x=\"" << px(label_width - 8) << "\" y=\"" << px(y + 15) << "\" text-anchor=\"end\">" << name
        << "</text>\n";
    out << "<rect class=\"bar role-" << name << "\" data-chart=\"components\" data-role=\"" << name
        << "\" data-bytes=\"" << bytes << "\" x=\"" << px(label_width) << "\" y=\"" << px(y + 3) << "\" width=\""
        << px(length) << "\" height=\"18\"><title>" << name << ": " << gib(bytes) << " (" << bytes
        << " bytes)</title></rect>\n";
    out << "<text x=\"" << px(label_width + length + 6) << "\" y=\"" << px(y + 15) << "\">" << gib(bytes)
        << "</text>\n";
  }
  out << "<line class=\"axis\" x1=\"" << px(label_width) << "\" y1=\"" << px(top) << "\" x2=\"" << px(label_width)
      << "\" y2=\"" << px(top + row * MEMPLAN_ROLE_COUNT) << "\"/>\n";
  out << "</svg>\n";
}

// One column per phase of the step (the fit quantity), with the capacity as a
// dashed line; columns over it are red, the peak's is outlined.
void write_timeline_chart(std::ostream& out, const Estimate& estimate, const FitFacts& fit) {
  const Breakdown& b = estimate.breakdown;
  const int phases = estimate.scenario.mode == MEMPLAN_MODE_TRAIN ? kStepPhaseCount : kBackward;
  uint64_t largest = fit.has_gpu ? fit.capacity : 0;
  for (int phase = 0; phase < phases; ++phase) largest = std::max(largest, b.timeline[static_cast<size_t>(phase)]);
  const double scale = static_cast<double>(largest) * 1.08;
  const double left = 70, top = 24, plot_height = 260, column = 120, gap = 50;
  const double width = left + phases * (column + gap) + 190;
  const double bottom = top + plot_height;
  const double height = bottom + 40;
  out << "<svg class=\"chart timeline\" role=\"img\" width=\"" << px(width) << "\" height=\"" << px(height)
      << "\" viewBox=\"0 0 " << px(width) << " " << px(height) << "\" aria-label=\"step timeline ("
      << quantity_name(b.fit_quantity) << " memory)\">\n";
  out << "<line class=\"axis\" x1=\"" << px(left) << "\" y1=\"" << px(bottom) << "\" x2=\"" << px(width - 10)
      << "\" y2=\"" << px(bottom) << "\"/>\n";
  out << "<line class=\"axis\" x1=\"" << px(left) << "\" y1=\"" << px(top) << "\" x2=\"" << px(left) << "\" y2=\""
      << px(bottom) << "\"/>\n";
  for (int phase = 0; phase < phases; ++phase) {
    const uint64_t bytes = b.timeline[static_cast<size_t>(phase)];
    const std::string name(phase_name(phase));
    const double length = bar_length(bytes, scale, plot_height);
    const double x = left + gap / 2 + phase * (column + gap);
    const bool over = fit.has_gpu && bytes > fit.capacity;
    out << "<rect class=\"bar phase" << (over ? " over" : "") << (phase == b.peak_phase ? " peak" : "")
        << "\" data-chart=\"timeline\" data-phase=\"" << name << "\" data-bytes=\"" << bytes << "\" x=\"" << px(x)
        << "\" y=\"" << px(bottom - length) << "\" width=\"" << px(column) << "\" height=\"" << px(length)
        << "\"><title>" << name << ": " << gib(bytes) << " (" << bytes << " bytes)"
        << (phase == b.peak_phase ? ", the peak" : "") << "</title></rect>\n";
    out << "<text x=\"" << px(x + column / 2) << "\" y=\"" << px(bottom - length - 6)
        << "\" text-anchor=\"middle\">" << gib(bytes) << "</text>\n";
    out << "<text x=\"" << px(x + column / 2) << "\" y=\"" << px(bottom + 18) << "\" text-anchor=\"middle\">" << name
        << "</text>\n";
  }
  if (fit.has_gpu) {
    const double y = bottom - bar_length(fit.capacity, scale, plot_height);
    out << "<line class=\"capacity\" data-bytes=\"" << fit.capacity << "\" x1=\"" << px(left) << "\" y1=\"" << px(y)
        << "\" x2=\"" << px(width - 10) << "\" y2=\"" << px(y) << "\"><title>capacity: " << gib(fit.capacity) << " ("
        << fit.capacity << " bytes)</title></line>\n";
    out << "<text class=\"capacity-label\" x=\"" << px(width - 12) << "\" y=\"" << px(y - 6)
        << "\" text-anchor=\"end\">capacity " << gib(fit.capacity) << "</text>\n";
  }
  out << "<text x=\"" << px(left - 8) << "\" y=\"" << px(bottom + 4) << "\" text-anchor=\"end\">0</text>\n";
  out << "</svg>\n";
}

void write_limits(std::ostream& out, const ScenarioLimits& limits) {
  const std::vector<LimitRow> rows = limit_rows(limits);
  if (rows.empty()) return;
  out << "<h3>Limits</h3>\n<table class=\"limits\">\n<tr><th>limit</th><th>value</th><th>at</th><th>binding</th></tr>\n";
  for (const LimitRow& row : rows) {
    const SizeLimit& limit = *row.limit;
    const bool batch = limit.variable == SizeVariable::micro_batch;
    const std::string title = std::string(batch ? "max micro_batch" : "max seq_len") +
                              (row.solved ? " (solved)" : batch ? " (sequences)" : " (tokens)");
    out << "<tr data-limit=\"" << row.key << (row.solved ? "_solved" : "") << "\"";
    if (!limit.unbounded) out << " data-value=\"" << limit.value << "\"";
    out << "><td>" << title << "</td><td class=\"num\">"
        << (limit.unbounded ? std::string("unbounded") : std::to_string(limit.value)) << "</td><td>"
        << (batch ? "seq_len " : "micro_batch ") << limit.other << "</td><td>"
        << (limit.unbounded ? "" : limit.capped ? "capped by " : "bound by ") << html_text(limit.binding)
        << "</td></tr>\n";
  }
  out << "</table>\n";
}

void write_section(std::ostream& out, const Estimate& estimate, const ScenarioLimits& limits) {
  const Scenario& scenario = estimate.scenario;
  const Breakdown& b = estimate.breakdown;
  const bool training = scenario.mode == MEMPLAN_MODE_TRAIN;
  const FitFacts fit = fit_facts(estimate);
  out << "<section class=\"estimate\" data-scenario=\"" << html_text(scenario.name) << "\">\n";
  out << "<h2>" << html_text(scenario.name) << " <span class=\"label\">(" << (training ? "train" : "infer")
      << ")</span></h2>\n";
  out << "<ul class=\"facts\">\n";
  out << "<li><span class=\"label\">model:</span> " << html_text(model_source(scenario)) << ", "
      << billions(b.params_total) << " parameters, " << billions(b.params_trainable) << " trainable</li>\n";
  out << "<li><span class=\"label\">batch:</span> micro_batch " << estimate.micro_batch << ", seq_len "
      << (estimate.seq_len > 0 ? std::to_string(estimate.seq_len) : std::string("not set")) << ", grad_accum "
      << scenario.grad_accum << "; world size " << b.world_size << " GPU" << (b.world_size == 1 ? "" : "s")
      << "</li>\n";
  const FrameworkSpec& framework = scenario.framework;
  if (!framework.name.empty())
    out << "<li><span class=\"label\">framework:</span> " << html_text(framework.name)
        << (framework.version.empty() || framework.version == "-" ? "" : " " + html_text(framework.version))
        << (framework.date.empty() ? "" : " (as of " + html_text(framework.date) + ")")
        << (framework.from_scenario ? "" : " (the default profile; name the software with [framework])") << "</li>\n";
  out << "<li><span class=\"label\">plugins:</span>";
  for (const PluginUse& plugin : estimate.plugins)
    out << " <code>" << html_text(plugin.name) << "@" << html_text(plugin.version) << "</code>";
  out << "</li>\n";
  if (fit.has_gpu) {
    out << "<li><span class=\"label\">GPU:</span> " << html_text(scenario.hardware.label) << ", " << gib(fit.cuda_total);
    if (fit.cuda_total < fit.gpu_memory) out << " as CUDA reports it (" << gib(fit.gpu_memory) << " nominal)";
    if (fit.capacity < fit.cuda_total) {
      char fraction[32];
      std::snprintf(fraction, sizeof fraction, "%g", b.memory_fraction);
      out << ", of which " << gib(fit.capacity) << " usable (memory fraction " << fraction << ")";
    }
    out << "</li>\n";
  }
  out << "</ul>\n";

  // The verdict, with the numbers it rests on.
  const std::string quantity(quantity_name(b.fit_quantity));
  if (!fit.has_gpu) {
    out << "<p class=\"verdict no-gpu\">fit: no GPU given ([hardware] gpu or memory_gib); peak " << gib(b.peak)
        << "</p>\n";
  } else if (fit.fits) {
    out << "<p class=\"verdict fits\" data-fits=\"true\">fits (" << quantity << " memory): yes, " << gib(fit.headroom)
        << " to spare (" << std::lround(100.0 * static_cast<double>(b.peak) / static_cast<double>(fit.capacity))
        << "% used at peak)</p>\n";
  } else {
    out << "<p class=\"verdict no-fit\" data-fits=\"false\">fits (" << quantity << " memory): no, "
        << gib(fit.shortfall) << " short</p>\n";
  }
  out << "<table class=\"fit\">\n";
  auto fit_row = [&](std::string_view key, std::string_view label, uint64_t bytes) {
    out << "<tr data-key=\"" << key << "\" data-bytes=\"" << bytes << "\"><td>" << label << "</td><td class=\"num\">"
        << gib(bytes) << "</td><td class=\"num\">" << bytes << " bytes</td></tr>\n";
  };
  fit_row("peak", "peak (" + std::string(phase_name(b.peak_phase)) + ", " + quantity + " memory)", b.peak);
  fit_row("sum", "sum of the GPU items", b.sum);
  if (fit.has_gpu) {
    fit_row("gpu_memory", "GPU memory (nominal)", fit.gpu_memory);
    fit_row("gpu_cuda_total", "GPU memory as CUDA reports it", fit.cuda_total);
    fit_row("capacity", "capacity", fit.capacity);
    if (fit.fits)
      fit_row("headroom", "headroom", fit.headroom);
    else
      fit_row("shortfall", "shortfall", fit.shortfall);
  }
  if (b.cpu_sum > 0) fit_row("cpu_sum", "per host CPU", b.cpu_sum);
  out << "</table>\n";

  out << "<h3>Per GPU by component</h3>\n";
  write_component_chart(out, b);
  out << "<h3>Step timeline (" << quantity << " memory)</h3>\n";
  write_timeline_chart(out, estimate, fit);

  static constexpr const char* kMeasuredBy[kQuantityCount] = {"torch.cuda.max_memory_allocated",
                                                              "torch.cuda.max_memory_reserved", "nvidia-smi"};
  out << "<h3>Peak as measured by</h3>\n<table class=\"quantities\">\n";
  for (int q = 0; q < kQuantityCount; ++q) {
    const StepPeak& peak = b.quantities[static_cast<size_t>(q)];
    out << "<tr data-quantity=\"" << quantity_name(q) << "\" data-bytes=\"" << peak.peak << "\"><td>"
        << quantity_name(q) << "</td><td class=\"num\">" << gib(peak.peak) << "</td><td>" << phase_name(peak.peak_phase)
        << "</td><td><code>" << kMeasuredBy[q] << "</code></td></tr>\n";
  }
  out << "</table>\n";

  write_limits(out, limits);
  if (!estimate.details.empty()) {
    out << "<h3>Details</h3>\n<table class=\"details\">\n";
    for (const auto& [key, value] : estimate.details)
      out << "<tr><td><code>" << html_text(key) << "</code></td><td><code>" << html_text(value) << "</code></td></tr>\n";
    out << "</table>\n";
  }
  const std::vector<std::string> advice = advice_for(b, fit.capacity, training);
  if (!advice.empty()) {
    out << "<h3>What to change</h3>\n<ul class=\"advice\">\n";
    for (const std::string& line : advice) out << "<li>" << html_text(line) << "</li>\n";
    out << "</ul>\n";
  }
  out << "</section>\n";
}

}  // namespace

std::string html_page_begin(std::string_view title) {
  const std::string text = html_text(title);
  return "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
         "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
         "<meta name=\"generator\" content=\"memplan\">\n<title>" +
         text + "</title>\n" + kStyle + "</head>\n<body>\n<h1>" + text + "</h1>\n" + std::string(kSectionsBegin);
}

std::string html_page_end() {
  return std::string(kSectionsEnd) +
         "<footer>memplan estimate; sizes per GPU, 1 GiB = 2<sup>30</sup> bytes; each bar's exact size is in its "
         "data-bytes attribute.</footer>\n</body>\n</html>\n";
}

std::string_view html_sections(std::string_view page) {
  const size_t begin = page.find(kSectionsBegin);
  const size_t end = page.rfind(kSectionsEnd);
  if (begin == std::string_view::npos || end == std::string_view::npos || end < begin + kSectionsBegin.size())
    return {};
  return page.substr(begin + kSectionsBegin.size(), end - begin - kSectionsBegin.size());
}

void write_html(std::ostream& out, const Estimate& estimate, const ScenarioLimits& limits) {
  out << html_page_begin("memplan estimate: " + estimate.scenario.name);
  write_section(out, estimate, limits);
  out << html_page_end();
}

}  // namespace memplan
