// The GPU catalog (core/data/gpus.toml, issue 12 item 4): every entry names
// its source, and memory is the vendor's nominal capacity taken as GiB
// (memory_gib x 2^30 bytes, docs/scenario-reference.md "GPU catalog").
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <utility>

#include "memplan/core/catalog.hpp"
#include "test_support.hpp"

namespace memplan::testing {
namespace {

constexpr uint64_t kGiB = uint64_t{1} << 30;

TEST(GpuCatalog, EveryEntryHasALabelASourceAndMemory) {
  EXPECT_GE(catalog().gpus().size(), 19u);
  for (const GpuEntry& gpu : catalog().gpus()) {
    EXPECT_FALSE(gpu.label.empty()) << gpu.name;
    EXPECT_FALSE(gpu.source.empty()) << gpu.name;
    EXPECT_GT(gpu.memory_bytes, 0u) << gpu.name;
  }
}

// Capacities as the datasheets give them (source lines in gpus.toml):
// DGX B200 1,440 GB / 8 GPUs = 180; GB200 NVL72 13.4 TB / 72 = 186 (372 GB per
// two-GPU superchip); H20 96 GB HBM3; L4, A10G, RTX 3090 24 GB; T4 16 GB;
// RTX 5090 32 GB GDDR7; MI300X 192 GB HBM3; MI325X 256 GB HBM3E.
TEST(GpuCatalog, NewerAndInferenceGpus) {
  const std::pair<const char*, uint64_t> expected[] = {
      {"b200-180gb", 180}, {"gb200-186gb", 186}, {"h20-96gb", 96},        {"l4-24gb", 24},
      {"a10g-24gb", 24},   {"t4-16gb", 16},      {"rtx-3090-24gb", 24},   {"rtx-5090-32gb", 32},
      {"mi300x-192gb", 192}, {"mi325x-256gb", 256}};
  for (const auto& [name, gib] : expected) {
    const GpuEntry* gpu = catalog().find_gpu(name);
    ASSERT_NE(gpu, nullptr) << name;
    EXPECT_EQ(gpu->nominal_bytes, gib * kGiB) << name;
  }
  // NVLink SHARP (NCCL's NVLS): the NVLink Switch systems of Blackwell have it.
  EXPECT_TRUE(catalog().find_gpu("b200-180gb")->nvlink_sharp);
  EXPECT_TRUE(catalog().find_gpu("gb200-186gb")->nvlink_sharp);
  EXPECT_FALSE(catalog().find_gpu("mi300x-192gb")->nvlink_sharp);
  EXPECT_EQ(catalog().find_gpu("mi300x-192gb")->memory_bytes, 206'158'430'208u);  // 192 x 2^30: no CUDA total given
}

// cuda_total_gib: the total CUDA reports to a process (PyTorch's "total capacity" in its out-of-memory message),
// the capacity `fits` compares with; the nominal size stays for the report. H100 80GB HBM3 on driver 535:
// 79.11 GiB (vllm-project/vllm#27508); RTX 4090 23.64 (three threads, gpus.toml); a GPU without one keeps its
// nominal size. A total above the nominal size, or without its source, is refused.
TEST(GpuCatalog, CudaTotalIsTheCapacity) {
  const GpuEntry* h100 = catalog().find_gpu("h100-sxm-80gb");
  EXPECT_EQ(h100->nominal_bytes, 80 * kGiB);
  EXPECT_EQ(h100->memory_bytes, static_cast<uint64_t>(79.11 * static_cast<double>(kGiB) + 0.5));
  EXPECT_FALSE(h100->cuda_total_source.empty());
  EXPECT_EQ(catalog().find_gpu("rtx-4090-24gb")->memory_bytes, static_cast<uint64_t>(23.64 * static_cast<double>(kGiB) + 0.5));
  const GpuEntry* h200 = catalog().find_gpu("h200-sxm-141gb");
  EXPECT_EQ(h200->memory_bytes, h200->nominal_bytes);
  EXPECT_TRUE(h200->cuda_total_source.empty());
  TempDir dir;
  const auto load_error = [&](const std::string& text) {
    dir.write("gpus.toml", text);
    try {
      (void)Catalog::load(dir.path());
    } catch (const Error& error) {
      return std::string(error.what());
    }
    return std::string("(loaded)");
  };
  EXPECT_NE(load_error("[x]\nlabel = \"X\"\nmemory_gib = 24\ncuda_total_gib = 25\ncuda_total_source = \"a log\"\n")
                .find("cuda_total_gib' is above memory_gib"),
            std::string::npos);
  EXPECT_NE(load_error("[x]\nlabel = \"X\"\nmemory_gib = 24\ncuda_total_gib = 23.5\n").find("without cuda_total_source"),
            std::string::npos);
  EXPECT_EQ(load_error("[x]\nlabel = \"X\"\nmemory_gib = 24\ncuda_total_gib = 23.5\ncuda_total_source = \"a log\"\n"),
            "(loaded)");
}

// Every GPU names its compute target (NVIDIA's compute capability table,
// developer.nvidia.com/cuda-gpus: A100 8.0, L40S 8.9, H100 9.0, B200 10.0;
// ROCm's hardware specifications: MI300X gfx942); a malformed one is refused.
TEST(GpuCatalog, ArchitectureIsTheComputeTarget) {
  for (const GpuEntry& gpu : catalog().gpus()) EXPECT_FALSE(gpu.architecture.empty()) << gpu.name;
  const std::pair<const char*, const char*> expected[] = {{"a100-sxm-80gb", "sm_80"}, {"l40s-48gb", "sm_89"},
                                                          {"h100-sxm-80gb", "sm_90"}, {"b200-180gb", "sm_100"},
                                                          {"mi300x-192gb", "gfx942"}};
  for (const auto& [name, architecture] : expected) EXPECT_EQ(catalog().find_gpu(name)->architecture, architecture);
  TempDir dir;
  const auto load_error = [&](const std::string& architecture) {
    dir.write("gpus.toml", "[x]\nlabel = \"X\"\nmemory_gib = 24\narchitecture = \"" + architecture + "\"\n");
    try {
      (void)Catalog::load(dir.path());
    } catch (const Error& error) {
      return std::string(error.what());
    }
    return std::string("(loaded)");
  };
  for (const char* malformed : {"hopper", "sm_9", "sm_1000", "sm_9a", "gfx94", "gfx94200"}) {
    const std::string error = load_error(malformed);
    EXPECT_NE(error.find("gpus.toml:4:16: error: in [x], 'architecture' must name a compute target"),
              std::string::npos)
        << malformed << ": " << error;
  }
  for (const char* valid : {"sm_70", "sm_120", "gfx90a", "gfx1100"}) EXPECT_EQ(load_error(valid), "(loaded)") << valid;
}

}  // namespace
}  // namespace memplan::testing
