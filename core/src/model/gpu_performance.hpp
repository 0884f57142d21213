// Reads a GPU's performance figures from a TOML table: a catalog entry of
// core/data/gpus.toml, or a scenario's [hardware] table that overrides them.
//   tflops = { <math> = <dense TFLOP/s>, ... }   the maths of MEMPLAN_MATH_NAMES (plugin_abi.h)
//   memory_bandwidth_gbs = 3350        GB/s (10^9 bytes)
//   gpus_per_node = 8
//   intra_node_gbs = 450               GB/s per GPU and direction
//   inter_node_gbs = 50                GB/s per GPU and direction
#pragma once

#include <array>
#include <string_view>

#include "common/toml_reader.hpp"
#include "memplan/core/step_time.hpp"

namespace memplan {

// The keys read_gpu_performance reads, for reject_unknown_keys.
inline constexpr std::array<std::string_view, 5> kGpuPerformanceKeys{
    "tflops", "memory_bandwidth_gbs", "gpus_per_node", "intra_node_gbs", "inter_node_gbs"};

// Sets the figures `table` gives in `performance`, keeping the others.
void read_gpu_performance(const toml::table& table, const TomlReader& reader, GpuPerformance& performance);

}  // namespace memplan
