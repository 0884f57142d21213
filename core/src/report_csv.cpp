// CSV (one row per item, then one per component and the totals) and a
// Markdown table, for spreadsheets and documents. Sizes in bytes.
#include <string>

#include "memplan/core/text.hpp"
#include "report_writers.hpp"

namespace memplan {
namespace {

std::string csv_field(std::string_view text) {
  if (text.find_first_of(",\"\n") == std::string_view::npos) return std::string(text);
  std::string out = "\"";
  for (char c : text) out += (c == '"') ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

}  // namespace

void write_csv(std::ostream& out, const Estimator& estimator) {
  const Breakdown& b = estimator.breakdown();
  out << "kind,name,role,device,bytes\n";
  for (const PlanItem& item : estimator.plan().items)
    out << "item," << csv_field(Estimator::display_name(item)) << "," << role_name(item.role) << ","
        << (item.device == MEMPLAN_DEVICE_GPU ? "gpu" : "cpu") << "," << item.bytes() << "\n";
  for (int32_t role = 0; role < MEMPLAN_ROLE_COUNT; ++role)
    out << "component," << role_name(role) << "," << role_name(role) << ",gpu,"
        << b.components[static_cast<size_t>(role)] << "\n";
  out << "total,sum,,gpu," << b.sum << "\n";
  out << "total,peak," << phase_name(b.peak_phase) << ",gpu," << b.peak << "\n";
  // The three quantities (allocated, reserved, device); `peak` above is the one `fits` uses.
  for (int quantity = 0; quantity < kQuantityCount; ++quantity) {
    const StepPeak& q = b.quantities[static_cast<size_t>(quantity)];
    out << "quantity,peak_" << quantity_name(quantity) << "," << phase_name(q.peak_phase) << ",gpu," << q.peak << "\n";
  }
}

void write_markdown(std::ostream& out, const Estimator& estimator) {
  const Scenario& scenario = estimator.scenario();
  const Breakdown& b = estimator.breakdown();
  out << "### " << terminal_text(scenario.name) << "\n\n";  // a file name may hold control characters
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
  if (scenario.hardware.memory_bytes > 0) {
    const uint64_t capacity = b.capacity(scenario.hardware.memory_bytes);
    out << "\nGPU: " << terminal_text(scenario.hardware.label) << " (" << format_gib(static_cast<double>(scenario.hardware.memory_bytes));
    if (capacity < scenario.hardware.memory_bytes) out << ", " << format_gib(static_cast<double>(capacity)) << " usable";
    out << "): " << (b.peak <= capacity ? "fits" : "does not fit") << "\n";
  }
}

}  // namespace memplan
