#include "model/gpu_performance.hpp"

#include <cmath>
#include <string>

namespace memplan {
namespace {

// The names of every math, joined for a message, from the ABI (MEMPLAN_MATH_NAMES).
std::string math_names() {
  std::string names;
  for (int32_t m = 0; m < MEMPLAN_MATH_COUNT; ++m)
    names += std::string(m == 0 ? "" : m + 1 == MEMPLAN_MATH_COUNT ? " or " : ", ") + std::string(math_name(m));
  return names;
}

}  // namespace

void read_gpu_performance(const toml::table& table, const TomlReader& reader, GpuPerformance& performance) {
  if (const toml::node* node = table.get("tflops")) {
    const toml::table* peaks = node->as_table();
    if (peaks == nullptr)
      reader.fail_key("tflops", "must be a table of dense TFLOP/s per math, e.g. { " +
                                    std::string(math_name(MEMPLAN_MATH_BF16)) + " = 989.4 }");
    for (const auto& [key, value] : *peaks) {
      int32_t math = -1;
      for (int32_t m = 0; m < MEMPLAN_MATH_COUNT; ++m)
        if (key.str() == math_name(m)) math = m;
      const SourceLocation where = location_of(reader.file(), key.source());
      if (math < 0)
        fail_at(where, reader.section() + " tflops has no math '" + std::string(key.str()) + "'; use " +
                           math_names());
      const std::optional<double> tflops = value.value<double>();
      if (!tflops || !std::isfinite(*tflops) || *tflops <= 0 || *tflops > 1e6)
        fail_at(where, reader.section() + " tflops." + std::string(key.str()) +
                           " must be a positive number of TFLOP/s (dense, without sparsity)");
      performance.peak_flops[static_cast<size_t>(math)] = *tflops * 1e12;
    }
  }
  auto rate = [&](std::string_view key, double& out) {
    if (auto gbs = reader.positive_number(key)) {
      if (*gbs > 1e6) reader.fail_key(key, "is beyond 10^6 GB/s; give GB/s (10^9 bytes per second)");
      out = *gbs * 1e9;
    }
  };
  rate("memory_bandwidth_gbs", performance.memory_bandwidth);
  rate("intra_node_gbs", performance.intra_node_bandwidth);
  rate("inter_node_gbs", performance.inter_node_bandwidth);
  if (auto gpus = reader.positive_integer("gpus_per_node")) performance.gpus_per_node = *gpus;
}

}  // namespace memplan
