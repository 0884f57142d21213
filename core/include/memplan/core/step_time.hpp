// The time of a training step, from the work plugins report (ABI 1.2,
// memplan_work) and the GPU's peaks (core/data/gpus.toml): each record takes
// amount / (peak x efficiency), forward and backward records once per
// micro-batch, optimizer records once per step. Model and hardware FLOPs
// utilisation as Korthikanti et al. 2022 (arXiv 2205.05198, section 6) define
// them. docs/step-time.md.
#pragma once

#include <memplan/plugin_abi.h>

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "memplan/core/plan.hpp"

namespace memplan {

// What a GPU can do, per GPU; 0 where the catalog or scenario does not say.
struct GpuPerformance {
  std::array<double, MEMPLAN_MATH_COUNT> peak_flops{};  // dense FLOP/s per math (MEMPLAN_MATH_*)
  double memory_bandwidth = 0;                          // bytes/s
  int64_t gpus_per_node = 0;                            // GPUs joined by the intra-node link
  double intra_node_bandwidth = 0;  // bytes/s per GPU and direction (NVLink, xGMI, PCIe)
  double inter_node_bandwidth = 0;  // bytes/s per GPU and direction (InfiniBand, Ethernet)
  std::string source;

  bool any() const;  // whether any figure is known
};

std::string_view math_name(int32_t math);  // MEMPLAN_MATH_NAMES; "unknown" for another value
std::string_view pass_name(int32_t pass);  // "forward", "backward", "optimizer"
std::string_view collective_name(int32_t collective);  // "all-reduce", "all-gather", ...
// Bytes each rank sends in a ring collective of `amount` bytes over `ranks` GPUs (seed 004).
double ring_volume(int32_t collective, double amount, int64_t ranks);

enum class TimeStatus {
  no_work,        // no plugin reported the step's computation: nothing to say
  timed,          // seconds, utilisation and throughput below are derived
  no_efficiency,  // a record's efficiency is 0 (not stated)
  no_peak,        // the GPU's peak for a record's math is not known
  no_bandwidth,   // a memory record, and the GPU's memory bandwidth is not known
  no_link,        // a collective, and the bandwidth of the link it crosses (or GPUs per node) is not known
};

struct StepTime {
  TimeStatus status = TimeStatus::no_work;
  int64_t cause = -1;  // index of the first work record that could not be timed
  // Seconds per step in each pass (index MEMPLAN_PASS_* - 1): forward and
  // backward over every micro-batch of the step; compute, memory traffic and
  // the communication compute does not hide.
  std::array<double, 3> pass_seconds{};
  double compute_seconds = 0;        // compute and memory-bound work, per step
  double communication_seconds = 0;  // every collective's time, per step
  double exposed_seconds = 0;        // the part of it compute does not hide
  double bubble_seconds = 0;         // idle (a pipeline's bubble)
  double communication_bytes = 0;    // moved per GPU per step (ring volumes)
  double seconds = 0;          // per step: the passes plus the bubble
  double model_flops = 0;      // per GPU per step
  double hardware_flops = 0;   // per GPU per step: model FLOPs plus recomputation
  double memory_bytes = 0;     // per GPU per step, moved by memory-bound work
  int32_t math = MEMPLAN_MATH_BF16;  // the math of most FLOPs: the peak MFU and HFU divide by
  double mfu = 0;              // model FLOPs / (seconds x peak)
  double hfu = 0;              // hardware FLOPs / (seconds x peak)
  double tokens_per_step = 0;  // the job's: micro_batch x seq_len x micro-batches x ranks.data
  double tokens_per_second = 0;
};

// Fills `time` from the work records. `micro_batches`: forward and backward
// passes per step on each GPU (grad_accum); `tokens_per_step`: the job's.
// Allocates nothing.
void time_step(const std::vector<WorkRecord>& work, const GpuPerformance& gpu, int64_t micro_batches,
               double tokens_per_step, StepTime& time);

}  // namespace memplan
