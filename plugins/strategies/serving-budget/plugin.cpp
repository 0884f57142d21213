// 'serving-budget': how much KV cache a paged serving engine can allocate on
// the reported rank, with vLLM's semantics (Kwon et al. 2023, "Efficient
// Memory Management for Large Language Model Serving with PagedAttention",
// arXiv 2309.06180; vLLM's gpu_memory_utilization, "the fraction of GPU
// memory to be used for the model executor", default 0.9).
//
// vLLM profiles one forward pass, then gives the KV cache what is left of
// u x GPU memory (Worker.determine_num_available_blocks of vLLM's v0 worker, e.g. 0.4):
//   num_gpu_blocks = max(0, floor((total_gpu_memory x u - peak_memory) / cache_block_size))
// memplan takes peak_memory from the finished plan: the step timeline's high
// point without the KV cache (weights, other persistent items, and the
// forward transients), asked of the host (memplan_host.timeline, ABI 1.1) so
// that it is the report's own, and cache_block_size from the kv.block_bytes
// the KV cache plugin declares. It runs in the budget phase, after every
// plugin that adds memory.
//
// Reported (attributes "report.*", printed under "details"):
//   kv_blocks                 floor(free / block_bytes), 0 when free <= 0
//   kv_tokens                 kv_blocks x block_tokens
//   max_sequences_at_seq_len  floor(kv_blocks / ceil(seq_len / block_tokens))
//   kv_budget_bytes           free = u x GPU memory - non-KV bytes (negative when nothing is left)
//   non_kv_bytes              the non-KV high point
//   kv_note                   only when free <= 0: why there is no room
// and limits.memory_fraction = u, so the host judges the fit against u x GPU.
//
// charged = "since-nccl" (vLLM from 0.12; gpu_worker.py and vllm/utils/mem_utils.py memory_profiling @
// 35d5cda1 / a6d5c390): vLLM takes its baseline snapshot after the CUDA context and NCCL's communicators exist
// (PR #25359) and charges against u x the total CUDA reports only what the process adds after it: the weights
// (torch-allocated), the torch peak increase of the profile run (allocated bytes, not the allocator's
// reserve) and the non-torch increase (the context's kernels loaded on first use, the cuda-context plugin's
// MEMPLAN_ATTR_CUDA_CONTEXT_GROWTH). What it leaves out (the context at start-up, NCCL's buffers, the
// reserve) still takes device memory, so memory_fraction becomes u + that / GPU memory (at most 1): the peak
// then fits exactly when the KV cache fits vLLM's budget.
//
// charged = "static" (SGLang's mem_fraction_static; model_runner.py profile_max_num_token @ 0005834c, 01cc04e2):
// the pool is u x the memory free once the CUDA context exists (the cuda-context plugin's
// MEMPLAN_ATTR_CUDA_CONTEXT_START) less the weights' segments (the reserved memory at init less the KV cache);
// memory_fraction is (the pool + the device non-KV high point) / GPU memory, at most 1.
#include <memplan/sdk.hpp>
#include <memplan/support/format.hpp>
#include <memplan/support/items.hpp>
#include <memplan/support/timeline.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <string>

namespace {

namespace support = memplan::support;
using memplan::sdk::Lifetime;
using memplan::sdk::Role;

constexpr std::array<memplan_option_spec, 2> kOptions{{
    {"gpu_memory_utilization", MEMPLAN_OPTION_DOUBLE,
     "fraction u of GPU memory the engine may use (0 < u <= 1), as vLLM's gpu_memory_utilization", "0.9", nullptr},
    {"charged", MEMPLAN_OPTION_STRING,
     "what the engine charges against u x GPU memory: \"device\" (every byte of the non-KV high point, "
     "allocator reserve, CUDA context and NCCL included) or \"since-nccl\" (vLLM's memory_profiling from a snapshot "
     "taken after the CUDA context and NCCL: the weights, the allocated high point and the context's growth; what "
     "it leaves out is allowed beside u x GPU memory) or \"static\" (SGLang's mem_fraction_static: the pool gets "
     "u x the memory free once the CUDA context exists, less the weights' segments) or \"since-context\" (vLLM V1 "
     "before 0.12: the snapshot follows the CUDA context but precedes NCCL, so the weights, the allocated high point "
     "and the non-torch increase, NCCL's buffers and the context's growth, are charged; the context as created and "
     "the allocator's reserve are not)",
     "\"device\"", nullptr},
}};

class ServingBudget {
 public:
  static constexpr memplan::sdk::PluginInfo info{
      "serving-budget", "1.3.0", "KV cache blocks, tokens and sequences that fit in u x GPU memory (vLLM)",
      memplan::sdk::Kind::strategy, memplan::sdk::Phase::budget};
  static std::span<const memplan_option_spec> options() { return kOptions; }

  explicit ServingBudget(memplan::sdk::Options& options)
      : utilization_(options.number("gpu_memory_utilization").value_or(0.9)),
        memory_fraction_(options.attribute(MEMPLAN_ATTR_MEMORY_FRACTION)),
        block_bytes_attr_(options.attribute(MEMPLAN_ATTR_KV_BLOCK_BYTES)),
        block_tokens_attr_(options.attribute(MEMPLAN_ATTR_KV_BLOCK_TOKENS)),
        kv_blocks_(options.attribute("report.kv_blocks")),
        kv_tokens_(options.attribute("report.kv_tokens")),
        max_sequences_(options.attribute("report.max_sequences_at_seq_len")),
        kv_budget_bytes_(options.attribute("report.kv_budget_bytes")),
        non_kv_bytes_(options.attribute("report.non_kv_bytes")),
        kv_note_(options.attribute("report.kv_note")),
        context_growth_attr_(options.attribute(MEMPLAN_ATTR_CUDA_CONTEXT_GROWTH)),
        context_start_attr_(options.attribute(MEMPLAN_ATTR_CUDA_CONTEXT_START)) {
    const std::string charged = options.string("charged").value_or("device");
    if (charged == "device") charged_ = Charged::device;
    else if (charged == "since-nccl") charged_ = Charged::since_nccl;
    else if (charged == "static") charged_ = Charged::static_share;
    else if (charged == "since-context") charged_ = Charged::since_context;
    else
      options.fail("charged", "must be \"device\", \"since-nccl\", \"since-context\" or \"static\", not \"" +
                                  charged + "\"");
    if (!(utilization_ > 0 && utilization_ <= 1))
      options.fail("gpu_memory_utilization",
                   "must be greater than 0 and at most 1 (a fraction of GPU memory), got " +
                       support::number(utilization_));
    if (options.workload().gpu_memory_bytes == 0)
      options.fail("needs the GPU's memory to budget the KV cache: set [hardware] gpu or memory_gib");
  }

  void apply(memplan::sdk::Context& ctx) {
    const double block_bytes = ctx.attr_double(block_bytes_attr_, 0);
    if (block_bytes <= 0)
      ctx.fail("attribute 'kv.block_bytes' is not set: no plugin declared a paged KV cache; use [activations] use "
               "= \"inference\" (mode = \"infer\")");
    const int64_t block_tokens = std::max<int64_t>(1, ctx.attr_int(block_tokens_attr_, 1));

    const support::Timeline timeline(ctx);
    const double kv_cache = kv_cache_bytes(ctx);
    const double device_non_kv = std::max(0.0, static_cast<double>(timeline.peak(support::Quantity::device)) - kv_cache);
    const double gpu = static_cast<double>(ctx.workload().gpu_memory_bytes);
    double budget = utilization_ * gpu;
    double non_kv = device_non_kv;
    double fraction = utilization_;
    switch (charged_) {
      case Charged::device: break;
      case Charged::since_nccl: {
        // vLLM's memory_profiling (gpu_worker.py determine_available_memory): the weights and the torch peak
        // increase are allocated bytes, the non-torch increase is what grew after the snapshot: the context's
        // kernels loaded as the profile run first calls them. The snapshot follows the CUDA context and NCCL's
        // communicators, and the allocator's reserve above its allocations is not charged either. What it
        // leaves out still takes device memory beside u x GPU memory: the fit allows it, so that `fits` holds
        // exactly when the KV cache fits the budget (capped at the whole GPU).
        const double growth = static_cast<double>(ctx.attr_int(context_growth_attr_, 0));
        non_kv = std::max(0.0, static_cast<double>(timeline.peak(support::Quantity::allocated)) - kv_cache) + growth;
        fraction = std::min(1.0, utilization_ + std::max(0.0, device_non_kv - non_kv) / gpu);
        break;
      }
      case Charged::since_context: {
        // vLLM V1 before PR #25359 (gpu_worker.py init_device @ v0.9.2, read in the ROCm/vllm mirror: the
        // init_snapshot = MemorySnapshot() right after torch.cuda.set_device, before
        // init_worker_distributed_environment; determine_available_memory charges memory_profiling's
        // non_kv_cache_memory: the weights, the torch peak increase, allocated bytes, and the non-torch increase
        // since the snapshot, NCCL's buffers and the kernels loaded later). Left out: the context as created and
        // the allocator's reserve above its allocations.
        const double reserve = std::max(0.0, static_cast<double>(timeline.peak(support::Quantity::reserved)) -
                                                 static_cast<double>(timeline.peak(support::Quantity::allocated)));
        const double start = static_cast<double>(ctx.attr_int(context_start_attr_, 0));
        non_kv = std::max(0.0, device_non_kv - reserve - start);
        fraction = std::min(1.0, utilization_ + std::max(0.0, device_non_kv - non_kv) / gpu);
        break;
      }
      case Charged::static_share: {
        // SGLang's mem_fraction_static (model_runner.py profile_max_num_token): the pool gets what the loaded
        // weights leave of u x the memory free at start-up: pool = free_after_weights - free_at_start x (1 - u)
        // = u x free_at_start - the weights' segments. At start-up the process holds its CUDA context as
        // created (cuda-context's MEMPLAN_ATTR_CUDA_CONTEXT_START); NCCL's buffers and the kernels loaded later
        // come, with the forward's transients, out of the rest, 1 - u. The weights' segments are the reserved
        // memory at init less the pool.
        budget = utilization_ * std::max(0.0, gpu - static_cast<double>(ctx.attr_int(context_start_attr_, 0)));
        non_kv = std::max(0.0, static_cast<double>(timeline.at(support::Quantity::reserved, support::StepPhase::init)) -
                                   kv_cache);
        // The peak fits exactly when the pool holds the KV cache, and never beyond the whole GPU.
        fraction = std::clamp((budget - non_kv + device_non_kv) / gpu, std::numeric_limits<double>::min(), 1.0);
        break;
      }
    }
    const double free = budget - non_kv;
    ctx.set_attr(memory_fraction_, fraction);
    const int64_t blocks = free > 0 ? static_cast<int64_t>(std::floor(free / block_bytes)) : 0;
    const int64_t seq_len = ctx.workload().seq_len;
    const int64_t blocks_per_sequence = seq_len > 0 ? (seq_len + block_tokens - 1) / block_tokens : 0;

    ctx.set_attr(kv_blocks_, blocks);
    ctx.set_attr(kv_tokens_, blocks * block_tokens);
    ctx.set_attr(max_sequences_, blocks_per_sequence > 0 ? blocks / blocks_per_sequence : 0);
    ctx.set_attr(kv_budget_bytes_, static_cast<int64_t>(std::floor(free)));
    ctx.set_attr(non_kv_bytes_, static_cast<int64_t>(non_kv));
    if (free <= 0)
      ctx.set_attr(kv_note_,
                   ("no memory is left for the KV cache: weights and activations take " + support::gib(non_kv) +
                    " of the budget of " + support::gib(budget) + " (gpu_memory_utilization " +
                    support::number(utilization_) +
                    (charged_ == Charged::static_share ? " x the memory free at start-up" : " x GPU memory") +
                    "); lower the model's footprint (quantize, tensor-parallel) or raise gpu_memory_utilization")
                       .c_str());
  }

 private:
  // The KV cache's bytes on the reported rank. The non-KV high point is the step timeline's (docs/estimate.md
  // section 4) less these: the host's timeline holds the persistent KV cache in every phase (the inference
  // plugin adds it so), and a serving plan has no gradients, so its phases come to persistent + max(activation
  // + transient_forward, activation + transient_backward, transient_optimizer), the figure this plugin summed
  // itself before ABI 1.1 gave it the timeline. "device" takes the device quantity (every pool: what vLLM's v0
  // worker saw of the GPU), "since-nccl" the allocated one.
  static double kv_cache_bytes(const memplan::sdk::Context& ctx) {
    return support::sum_bytes(ctx, [](const memplan::sdk::ItemRef& item) {
      return support::on_gpu(item) && item.role() == Role::kv_cache && item.lifetime() == Lifetime::persistent;
    });
  }

  double utilization_;
  enum class Charged { device, since_nccl, since_context, static_share };
  Charged charged_ = Charged::device;
  // Resolved once, in the constructor: no key lookup per evaluation. The
  // report's in the order apply() sets them, the order the report prints.
  memplan::sdk::Attribute memory_fraction_, block_bytes_attr_, block_tokens_attr_;
  memplan::sdk::Attribute kv_blocks_, kv_tokens_, max_sequences_, kv_budget_bytes_, non_kv_bytes_, kv_note_;
  memplan::sdk::Attribute context_growth_attr_, context_start_attr_;
};

}  // namespace

MEMPLAN_PLUGIN(ServingBudget)
