// 'cuda-context': memory a CUDA process holds on its GPU beyond its tensors
// (phase overhead), with defaults from documented measurements:
//
//   cuda_context      the driver's context and the kernels it has loaded,
//                     outside PyTorch's allocator (nvidia-smi sees it,
//                     torch.cuda.memory_allocated does not). Measured: 287 MB
//                     with lazy module loading and 667 MB without (PyTorch PR
//                     #86509, which made CUDA_MODULE_LOADING=LAZY the default);
//                     "~300MB", over 1000 MB before CUDA 11.7's lazy loading
//                     (PyTorch issue #107667); "around 400MB" (issue #109888);
//                     200 to 700 MB across machines (issue #28113). Kernels
//                     loaded lazily during a step add to the start-up figure.
//                     Default 767 MiB with lazy module loading (CUDA >= 11.7
//                     and PyTorch >= 1.13, CUDA_MODULE_LOADING=LAZY): device
//                     memory in use minus torch.cuda.memory_reserved() after
//                     a training step (bf16 GEMMs, SDPA, AdamW), measured at
//                     766.8 MiB on an H100 80GB HBM3 with CUDA 13.0 and
//                     PyTorch 2.11 (tools/measure/hf_memory.py;
//                     validation/measured/h100-2026-11-26.jsonl); 719 MiB
//                     serving (the same after model.generate); with
//                     eager loading (older CUDA, or CUDA_MODULE_LOADING=EAGER)
//                     every kernel of the loaded libraries is resident: 1343
//                     MiB measured by the Hugging Face documentation on a V100
//                     with CUDA 11.2 ("the kernels alone take up 1.3GB";
//                     transformers docs/source/en/model_memory_anatomy.md @
//                     7d5e65fe). Option module_loading.
//   cublas_workspace  PyTorch's cuBLAS workspaces, allocated through the
//                     caching allocator, one per cuBLAS handle and stream
//                     (CublasHandlePool.cpp keys them by (handle, stream), and
//                     hands out handles per thread). Size by the GPU's
//                     architecture (hardware.architecture; parseChosenWorkspaceSize
//                     since PyTorch PR #91564, 2.0): 4096 KiB x 8 = 32 MiB from
//                     compute capability 9 (Hopper; Blackwell since PR #175344),
//                     4096 KiB x 2 + 16 KiB x 8 = 8.125 MiB below; ROCm 32 MiB,
//                     128 MiB on gfx942/gfx950; 32 MiB when the GPU is not
//                     known. Count: 2 in training (the Python thread's forward
//                     and the autograd engine's device thread, which runs the
//                     backward: torch/csrc/autograd/engine.cpp; 11 of the 12
//                     H100 training snapshots in validation/measured/ hold two
//                     32 MiB blocks from before their recording, the twelfth
//                     more, its weights among them), 1 in inference.
//                     cuBLASLt shares them (unified workspaces). Option
//                     cublas_workspace_mib gives the total instead.
//   cudnn_workspace   cuDNN's per-call workspace (convolutions, cuDNN
//                     attention); transformers on FlashAttention use none.
//                     Default 0.
#include <memplan/sdk.hpp>
#include <memplan/support/cublas_workspace.hpp>
#include <memplan/support/format.hpp>
#include <memplan/support/items.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

namespace {

namespace sdk = memplan::sdk;
namespace support = memplan::support;

constexpr double kLazyContextMiB = 767;    // measured after a training step: H100, CUDA 13.0, PyTorch 2.11
// The same machine after Hugging Face model.generate (no backward kernels); applied to every serving
// scenario, vLLM's and SGLang's too, whose own kernels (and CUDA graphs' pools) were not measured.
constexpr double kLazyServingContextMiB = 719;
constexpr double kEagerContextMiB = 1343;  // HF model_memory_anatomy.md, V100, CUDA 11.2, eager loading
// The same H100 process right after creating its context, before any kernel ran (lazy loading); vLLM 0.19's
// "worker init memory snapshot" on an H100 80GB reads cuda_memory=0.51GiB at that point (llm-d-planner logs,
// docs/inference.md section 4). What a context holds beyond it is the kernels loaded as the job runs.
constexpr double kLazyStartContextMiB = 527;

constexpr std::array<memplan_option_spec, 6> kOptions{{
    {"mib", MEMPLAN_OPTION_DOUBLE, "the CUDA context, in MiB (2^20 bytes)", "767 (lazy loading; 719 serving) or 1343 (eager)",
     nullptr},
    {"module_loading", MEMPLAN_OPTION_STRING,
     "\"lazy\" (CUDA >= 11.7 with PyTorch >= 1.13: kernels load when first used) or \"eager\" (every kernel of "
     "the loaded libraries at start-up: older CUDA, CUDA_MODULE_LOADING=EAGER); sets the context's default size "
     "(a given mib or bytes wins)",
     "\"lazy\"", nullptr},
    {"bytes", MEMPLAN_OPTION_INT, "the CUDA context in bytes, instead of mib", "767 MiB (719 serving)", nullptr},
    {"cublas_workspace_mib", MEMPLAN_OPTION_DOUBLE,
     "cuBLAS workspaces per GPU in all, in MiB (PyTorch: one per thread and stream that runs GEMMs, 32 MiB each "
     "from compute capability 9, 8.125 below, 128 on AMD gfx942)",
     "by the GPU's architecture: 2 workspaces in training, 1 in inference", nullptr},
    {"cudnn_workspace_mib", MEMPLAN_OPTION_DOUBLE, "cuDNN workspace per GPU, in MiB", "0", nullptr},
    {"te_workspaces", MEMPLAN_OPTION_INT,
     "Transformer Engine's own cuBLASLt workspaces per GPU (torch.empty, so allocated): one for its GEMMs, one "
     "per cuBLAS stream (4) more for grouped GEMM (--moe-grouped-gemm), 3 more under --tp-comm-overlap's userbuffer "
     "GEMMs; 32 MiB + 1 KiB each from compute capability 9, 4 MiB below (module/base.py @ v2.8)",
     "0; the megatron-lm profile sets 1 from core_r0.6.0 (TE layers), megatron-core 1", nullptr},
}};

double mebibytes(sdk::Options& options, const char* key, double fallback) {
  const double value = options.number(key).value_or(fallback);
  if (!std::isfinite(value) || value < 0)
    options.fail(key, "must be a non-negative number of MiB, got " + support::number(value));
  return value * support::kMiB;
}

// The workspaces' size per handle and stream: support::cublas_workspace_bytes (one rule with megatron's
// loss-path replay). For a PyTorch before PR #175344 on Blackwell (8.125 MiB a workspace), set
// cublas_workspace_mib = 16.25 for training.
class CudaContextOverhead {
 public:
  static constexpr sdk::PluginInfo info{"cuda-context", "1.6.0",
                                        "CUDA context and cuBLAS/cuDNN workspaces per GPU (PyTorch figures)",
                                        sdk::Kind::strategy, sdk::Phase::overhead, sdk::Reads::nothing};
  static std::span<const memplan_option_spec> options() { return kOptions; }

  explicit CudaContextOverhead(sdk::Options& options)
      : context_name_(options.intern("cuda_context")),
        cublas_name_(options.intern("cublas_workspace")),
        cudnn_name_(options.intern("cudnn_workspace")),
        te_name_(options.intern("te_cublas_workspace")),
        growth_attr_(options.attribute(MEMPLAN_ATTR_CUDA_CONTEXT_GROWTH)),
        start_attr_(options.attribute(MEMPLAN_ATTR_CUDA_CONTEXT_START)),
        architecture_attr_(options.attribute(MEMPLAN_ATTR_HARDWARE_ARCHITECTURE)) {
    const std::optional<int64_t> bytes = options.integer("bytes");
    if (bytes && options.number("mib"))
      options.fail("bytes", "gives the context size a second time; set either mib or bytes");
    // module_loading chooses the default size, so a size given (mib or bytes) wins over it: a
    // framework profile sets module_loading by version (the PyTorch of its era), and a scenario
    // that measured its own context says so with mib. Its value is still checked.
    if (bytes) {
      if (*bytes < 0) options.fail("bytes", "must not be negative, got " + std::to_string(*bytes));
      context_ = static_cast<double>(*bytes);
    }
    const std::string loading = options.string("module_loading").value_or("lazy");
    if (loading != "lazy" && loading != "eager")
      options.fail("module_loading", "must be \"lazy\" or \"eager\", not \"" + loading + "\"");
    if (!bytes) {
      const double lazy = options.training() ? kLazyContextMiB : kLazyServingContextMiB;
      context_ = mebibytes(options, "mib", loading == "eager" ? kEagerContextMiB : lazy);
    }
    // Under eager loading every kernel is resident from the start: nothing grows. A size given is taken as
    // measured after the job ran, so its part above the start-up context is the growth.
    growth_ = loading == "eager" ? 0 : std::max(0.0, context_ - kLazyStartContextMiB * support::kMiB);
    if (options.number("cublas_workspace_mib")) cublas_ = mebibytes(options, "cublas_workspace_mib", 0);
    // Training runs GEMMs on two threads, each with its own handle: the caller's forward and the autograd
    // engine's device thread in backward.
    workspaces_ = options.training() ? 2 : 1;
    cudnn_ = mebibytes(options, "cudnn_workspace_mib", 0);
    if (const auto te = options.integer("te_workspaces")) {
      if (*te < 0 || *te > 64)
        options.fail("te_workspaces", "must be a count from 0 to 64 (Transformer Engine makes 1, 5 with grouped "
                                      "GEMM), got " + std::to_string(*te));
      te_workspaces_ = static_cast<double>(*te);
    }
  }

  void apply(sdk::Context& ctx) {
    // The context is device memory outside the caching allocator; the
    // workspaces are tensors the allocator hands out (they count as allocated).
    support::add_bytes_if_any(ctx, {.name = context_name_, .role = sdk::Role::overhead, .pool = sdk::Pool::device,
                                    .bytes = context_});
    const double cublas =
        cublas_ ? *cublas_ : workspaces_ * support::cublas_workspace_bytes(ctx.attr_string(architecture_attr_, ""));
    support::add_bytes_if_any(ctx, {.name = cublas_name_, .bytes = cublas});
    support::add_bytes_if_any(ctx, {.name = cudnn_name_, .bytes = cudnn_});
    support::add_bytes_if_any(
        ctx, {.name = te_name_,
              .bytes = te_workspaces_ * support::te_cublas_workspace_bytes(ctx.attr_string(architecture_attr_, ""))});
    ctx.set_attr(growth_attr_, static_cast<int64_t>(growth_));
    ctx.set_attr(start_attr_, static_cast<int64_t>(context_ - growth_));
  }

 private:

  sdk::Name context_name_;
  sdk::Name cublas_name_;
  sdk::Name cudnn_name_;
  sdk::Name te_name_;
  sdk::Attribute growth_attr_;
  sdk::Attribute start_attr_;
  sdk::Attribute architecture_attr_;
  double context_ = 0;
  double growth_ = 0;  // the context's part loaded after start-up (MEMPLAN_ATTR_CUDA_CONTEXT_GROWTH)
  std::optional<double> cublas_;  // cublas_workspace_mib, when given: the total
  double workspaces_ = 1;          // handles that run GEMMs (threads), one workspace each
  double cudnn_ = 0;
  double te_workspaces_ = 0;  // te_workspaces: Transformer Engine's own cuBLASLt workspaces
};

}  // namespace

MEMPLAN_PLUGIN(CudaContextOverhead)
