// PyTorch's default cuBLAS workspace for one cuBLAS handle and stream, by the
// GPU's architecture: one rule for the plugins that count the workspaces
// (cuda-context) and those that place them among the caching allocator's
// blocks (megatron's loss-path replay).
//
// aten/src/ATen/cuda/CublasHandlePool.cpp, parseChosenWorkspaceSize:
// ":4096:8" (32 MiB) from compute capability 9 (Hopper since PR #91564,
// PyTorch 2.0; Blackwell 10.x and 12.x since PR #175344, 2026-02),
// ":4096:2:16:8" (8.125 MiB) below; under ROCm 32 MiB, 128 MiB on
// gfx942/gfx950 (MI300X, MI325X, MI355X). An unknown GPU keeps 32 MiB, the
// Hopper figure the project measured. The rule is current PyTorch's: releases
// before PR #175344 gave Blackwell 8.125 MiB, and before PR #91564 (2.0)
// every GPU had cuBLAS's own default. The workspace comes from the caching
// allocator when a thread's handle first runs a GEMM on a stream, and stays.
#pragma once

#include <string_view>

namespace memplan::support {

// The compute capability's major number of an NVIDIA architecture as the GPU
// catalog writes it ("sm_90" -> 9, "sm_100" -> 10: without its last, minor,
// digit); -1 for anything else (ROCm targets, unknown names).
inline int cuda_major(std::string_view architecture) {
  if (!architecture.starts_with("sm_") || architecture.size() < 5) return -1;
  const std::string_view major = architecture.substr(3, architecture.size() - 4);
  int value = 0;
  for (char c : major) {
    if (c < '0' || c > '9') return -1;
    value = value * 10 + (c - '0');
  }
  return value;
}

// `architecture` as the GPU catalog writes it ("sm_90", "sm_100", "gfx942").
inline double cublas_workspace_bytes(std::string_view architecture) {
  constexpr double kLarge = 4096.0 * 8 * 1024;                    // 33,554,432 B
  constexpr double kSmall = 4096.0 * 1024 * 2 + 16.0 * 1024 * 8;  // 8,519,680 B
  const int major = cuda_major(architecture);
  if (major >= 0) return major >= 9 ? kLarge : kSmall;
  // ROCm matches targets by prefix (getCUDAHooks().isGPUArch): {"gfx94", "gfx95"} in the release that gave MI300
  // 128 MiB, {"gfx942", "gfx950", "gfx1250"} later; the two agree on every target but gfx940/941 and gfx1250.
  for (std::string_view prefix : {"gfx94", "gfx95", "gfx1250"})
    if (architecture.starts_with(prefix)) return 4 * kLarge;
  return kLarge;  // not a capability: the unknown GPU's figure
}

// Transformer Engine's own cuBLASLt workspace, one tensor from the caching
// allocator (torch.empty) per use: transformer_engine/pytorch/module/base.py
// get_cublas_workspace_size_bytes @ v2.8 (cpp_extensions/gemm.py @ v2.14 to
// v2.16, get_cublas_workspace): 32 MiB + 1 KiB from compute capability 9 ("32
// MiB for NVFP4 GEMM, plus additional 1024 B for alignment and misc scales"),
// 4 MiB below. An unknown GPU or a ROCm one keeps the large figure.
inline double te_cublas_workspace_bytes(std::string_view architecture) {
  constexpr double kLarge = 32.0 * 1024 * 1024 + 1024;  // 33,555,456 B
  constexpr double kSmall = 4'194'304;
  const int major = cuda_major(architecture);
  return major >= 0 && major < 9 ? kSmall : kLarge;
}

}  // namespace memplan::support
