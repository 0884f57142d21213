// CSV (one row per item, then one per component and the totals) and a
// Markdown table, for spreadsheets and documents. Sizes in bytes.
#include <cmath>
#include <string>
#include <vector>

#include "report/advice.hpp"

#include "memplan/core/text.hpp"
#include "report/report_writers.hpp"

namespace memplan {
namespace {

std::string csv_field(std::string_view text) {
  if (text.find_first_of(",\"\n") == std::string_view::npos) return std::string(text);
  std::string out = "\"";
  for (char c : text) out += (c == '"') ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

}  // namespace

// Every row ends with the scenario's name, so the output of a sweep can be
// concatenated and still be told apart. The first five columns are the
// contract's since 1.0; `scenario` and the fit, limit and advice rows extend it.
void write_csv(std::ostream& out, const Estimate& estimate, const ScenarioLimits& limits) {
  const Breakdown& b = estimate.breakdown;
  const std::string scenario = "," + csv_field(estimate.scenario.name) + "\n";
  out << "kind,name,role,device,bytes,scenario\n";
  for (const PlanItem& item : estimate.items)
    out << "item," << csv_field(item_display_name(item)) << "," << role_name(item.role) << ","
        << (item.device == MEMPLAN_DEVICE_GPU ? "gpu" : "cpu") << "," << item.bytes() << scenario;
  for (int32_t role = 0; role < MEMPLAN_ROLE_COUNT; ++role)
    out << "component," << role_name(role) << "," << role_name(role) << ",gpu,"
        << b.components[static_cast<size_t>(role)] << scenario;
  out << "total,sum,,gpu," << b.sum << scenario;
  out << "total,peak," << phase_name(b.peak_phase) << ",gpu," << b.peak << scenario;
  // The three quantities (allocated, reserved, device); `peak` above is the one `fits` uses.
  for (int quantity = 0; quantity < kQuantityCount; ++quantity) {
    const StepPeak& q = b.quantities[static_cast<size_t>(quantity)];
    out << "quantity,peak_" << quantity_name(quantity) << "," << phase_name(q.peak_phase) << ",gpu," << q.peak
        << scenario;
  }
  // The verdict as numbers: `fits` is 1 or 0 (role: the quantity compared); no rows without a GPU.
  const FitFacts fit = fit_facts(estimate);
  if (fit.has_gpu) {
    out << "fit,gpu_memory,,gpu," << fit.gpu_memory << scenario;
    out << "fit,gpu_cuda_total,,gpu," << fit.cuda_total << scenario;
    out << "fit,capacity," << quantity_name(b.fit_quantity) << ",gpu," << fit.capacity << scenario;
    out << "fit,fits," << quantity_name(b.fit_quantity) << ",gpu," << (fit.fits ? 1 : 0) << scenario;
    out << "fit,headroom,,gpu," << fit.headroom << scenario;
    out << "fit,shortfall,,gpu," << fit.shortfall << scenario;
  }
  // Limits count sequences or tokens, not bytes; role names what binds them. Unbounded ones are left out.
  for (const LimitRow& row : limit_rows(limits)) {
    if (row.limit->unbounded) continue;
    out << "limit," << row.key << (row.solved ? "_solved" : "") << "," << csv_field(row.limit->binding) << ",gpu,"
        << row.limit->value << scenario;
  }
}

void write_markdown(std::ostream& out, const Estimate& estimate, const ScenarioLimits& limits) {
  const Scenario& scenario = estimate.scenario;
  const Breakdown& b = estimate.breakdown;
  // Names and paths come from files: shown with control characters escaped.
  out << "### " << terminal_text(scenario.name) << "\n\n";
  out << "- model: " << terminal_text(model_source(scenario)) << ", " << std::llround(b.params_total)
      << " parameters (" << std::llround(b.params_trainable) << " trainable)\n";
  out << "- mode: " << (scenario.mode == MEMPLAN_MODE_TRAIN ? "train" : "infer") << "; micro_batch "
      << estimate.micro_batch << ", seq_len " << estimate.seq_len << ", grad_accum " << scenario.grad_accum
      << "; world size " << b.world_size << "\n\n";
  out << "| component | bytes | GiB |\n|---|---:|---:|\n";
  auto row = [&](std::string_view name, uint64_t bytes) {
    std::string gib = format_gib(static_cast<double>(bytes));
    out << "| " << name << " | " << bytes << " | " << gib.substr(0, gib.size() - 4) << " |\n";
  };
  for (int32_t role = 0; role < MEMPLAN_ROLE_COUNT; ++role) row(role_name(role), b.components[static_cast<size_t>(role)]);
  row("**sum**", b.sum);
  row("**peak** (" + std::string(phase_name(b.peak_phase)) + ", " + std::string(quantity_name(b.fit_quantity)) + ")",
      b.peak);
  for (int quantity = 0; quantity < kQuantityCount; ++quantity) {
    const StepPeak& q = b.quantities[static_cast<size_t>(quantity)];
    row("peak " + std::string(quantity_name(quantity)) + " (" + std::string(phase_name(q.peak_phase)) + ")", q.peak);
  }
  const std::vector<LimitRow> rows = limit_rows(limits);
  if (!rows.empty()) {
    out << "\n| limit | value | at | bound by |\n|---|---:|---|---|\n";
    for (const LimitRow& limit_row : rows) {
      const SizeLimit& limit = *limit_row.limit;
      out << "| " << limit_row.key << (limit_row.solved ? " (solved)" : "") << " | "
          << (limit.unbounded ? std::string("unbounded") : std::to_string(limit.value)) << " | "
          << (limit.variable == SizeVariable::micro_batch ? "seq_len " : "micro_batch ") << limit.other << " | "
          << (limit.capped ? "capped by " : "") << limit.binding << " |\n";
    }
  }
  const FitFacts fit = fit_facts(estimate);
  if (!fit.has_gpu) {
    out << "\nfit: no GPU given ([hardware] gpu or memory_gib)\n";
    return;
  }
  out << "\nGPU: " << terminal_text(scenario.hardware.label) << " (" << format_gib(static_cast<double>(fit.cuda_total));
  if (fit.cuda_total < fit.gpu_memory) out << " as CUDA reports it, " << format_gib(static_cast<double>(fit.gpu_memory)) << " nominal";
  if (fit.capacity < fit.cuda_total) out << ", " << format_gib(static_cast<double>(fit.capacity)) << " usable";
  out << "): " << (fit.fits ? "fits, " + format_gib(static_cast<double>(fit.headroom)) + " to spare"
                            : "does not fit, " + format_gib(static_cast<double>(fit.shortfall)) + " short")
      << "\n";
  const std::vector<std::string> advice = advice_for(b, fit.capacity, scenario.mode == MEMPLAN_MODE_TRAIN);
  if (!advice.empty()) {
    out << "\nWhat to change:\n\n";
    for (const std::string& line : advice) out << "- " << line << "\n";
  }
}

}  // namespace memplan
