// JSON output, schema "memplan.estimate/1" (docs/json-output.md). All sizes in
// bytes; every component key is always present.
#include <cmath>
#include <cstdio>
#include <string>

#include "advice.hpp"
#include "report_writers.hpp"

namespace memplan {
namespace {

std::string quoted(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buffer[8];
          std::snprintf(buffer, sizeof buffer, "\\u%04x", static_cast<unsigned>(c));
          out += buffer;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

std::string number(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.17g", value);
  return buffer;
}

void write_components(std::ostream& out, const std::array<uint64_t, MEMPLAN_ROLE_COUNT>& components) {
  out << "{";
  for (int32_t role = 0; role < MEMPLAN_ROLE_COUNT; ++role)
    out << (role ? ", " : " ") << quoted(role_name(role)) << ": " << components[static_cast<size_t>(role)];
  out << " }";
}

void write_items(std::ostream& out, const Estimator& estimator, int32_t device) {
  out << "[";
  bool first = true;
  for (const PlanItem& item : estimator.plan().items) {
    if (item.device != device) continue;
    out << (first ? "\n" : ",\n") << "      { \"name\": " << quoted(Estimator::display_name(item))
        << ", \"role\": " << quoted(role_name(item.role)) << ", \"bytes\": " << item.bytes()
        << ", \"count\": " << item.count << ", \"elements\": " << number(item.elements)
        << ", \"bytes_per_element\": " << number(item.bytes_per_element)
        << ", \"lifetime\": " << quoted(lifetime_name(item.lifetime))
        << ", \"added_by\": " << quoted(estimator.origin(item)) << " }";
    first = false;
  }
  out << (first ? "]" : "\n    ]");
}

}  // namespace

void write_json(std::ostream& out, const Estimator& estimator) {
  const Scenario& scenario = estimator.scenario();
  const Breakdown& b = estimator.breakdown();
  const uint64_t gpu_memory = scenario.hardware.memory_bytes;
  out << "{\n";
  out << "  \"schema\": \"memplan.estimate/1\",\n";
  out << "  \"scenario\": " << quoted(scenario.name) << ",\n";
  out << "  \"mode\": " << quoted(scenario.mode == MEMPLAN_MODE_TRAIN ? "train" : "infer") << ",\n";
  out << "  \"parameters\": { \"total\": " << std::llround(b.params_total)
      << ", \"trainable\": " << std::llround(b.params_trainable) << " },\n";
  out << "  \"per_gpu\": {\n";
  out << "    \"peak\": " << b.peak << ", \"sum\": " << b.sum << ", \"peak_phase\": " << quoted(phase_name(b.peak_phase))
      << ",\n";
  out << "    \"timeline\": {";
  for (int phase = 0; phase < kStepPhaseCount; ++phase)
    out << (phase ? ", " : " ") << quoted(phase_name(phase)) << ": " << b.timeline[static_cast<size_t>(phase)];
  out << " },\n";
  out << "    \"components\": ";
  write_components(out, b.components);
  out << ",\n    \"items\": ";
  write_items(out, estimator, MEMPLAN_DEVICE_GPU);
  out << "\n  },\n";
  out << "  \"per_cpu\": { \"sum\": " << b.cpu_sum << ", \"components\": ";
  write_components(out, b.cpu_components);
  out << ", \"items\": ";
  write_items(out, estimator, MEMPLAN_DEVICE_CPU);
  out << " },\n";
  out << "  \"world_size\": " << b.world_size << ",\n";
  if (gpu_memory > 0) {
    out << "  \"gpu\": " << quoted(scenario.hardware.gpu.empty() ? scenario.hardware.label : scenario.hardware.gpu)
        << ",\n";
    out << "  \"gpu_memory\": " << gpu_memory << ",\n";
    out << "  \"fits\": " << (b.peak <= gpu_memory ? "true" : "false") << ",\n";
    // Both are sizes, so neither is ever negative: one of them is zero.
    out << "  \"headroom\": " << (b.peak <= gpu_memory ? gpu_memory - b.peak : 0) << ",\n";
    out << "  \"shortfall\": " << (b.peak > gpu_memory ? b.peak - gpu_memory : 0) << ",\n";
  } else {
    out << "  \"gpu\": null,\n  \"gpu_memory\": null,\n  \"fits\": null,\n  \"headroom\": null,\n  \"shortfall\": null,\n";
  }
  out << "  \"advice\": [";
  const std::vector<std::string> advice = advice_for(b, gpu_memory);
  for (size_t i = 0; i < advice.size(); ++i) out << (i ? ", " : "") << quoted(advice[i]);
  out << "],\n";
  out << "  \"plugins\": [";
  bool first = true;
  for (const ConfiguredPlugin& configured : estimator.plugins()) {
    const LoadedPlugin& plugin = *configured.plugin;
    out << (first ? "\n" : ",\n") << "    { \"kind\": " << quoted(kind_name(plugin.descriptor.kind))
        << ", \"name\": " << quoted(plugin.name) << ", \"version\": " << quoted(plugin.version)
        << ", \"library\": " << quoted(plugin.path) << " }";
    first = false;
  }
  out << (first ? "]\n" : "\n  ]\n");
  out << "}\n";
}

}  // namespace memplan
