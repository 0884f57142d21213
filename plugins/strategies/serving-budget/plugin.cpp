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
#include <memplan/sdk.hpp>
#include <memplan/support/format.hpp>
#include <memplan/support/items.hpp>
#include <memplan/support/timeline.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <string>

namespace {

namespace support = memplan::support;
using memplan::sdk::Lifetime;
using memplan::sdk::Role;

constexpr std::array<memplan_option_spec, 1> kOptions{{
    {"gpu_memory_utilization", MEMPLAN_OPTION_DOUBLE,
     "fraction u of GPU memory the engine may use (0 < u <= 1), as vLLM's gpu_memory_utilization", "0.9", nullptr},
}};

class ServingBudget {
 public:
  static constexpr memplan::sdk::PluginInfo info{
      "serving-budget", "1.1.1", "KV cache blocks, tokens and sequences that fit in u x GPU memory (vLLM)",
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
        kv_note_(options.attribute("report.kv_note")) {
    if (!(utilization_ > 0 && utilization_ <= 1))
      options.fail("gpu_memory_utilization",
                   "must be greater than 0 and at most 1 (a fraction of GPU memory), got " +
                       support::number(utilization_));
    if (options.workload().gpu_memory_bytes == 0)
      options.fail("needs the GPU's memory to budget the KV cache: set [hardware] gpu or memory_gib");
  }

  void apply(memplan::sdk::Context& ctx) {
    ctx.set_attr(memory_fraction_, utilization_);
    const double block_bytes = ctx.attr_double(block_bytes_attr_, 0);
    if (block_bytes <= 0)
      ctx.fail("attribute 'kv.block_bytes' is not set: no plugin declared a paged KV cache; use [activations] use "
               "= \"inference\" (mode = \"infer\")");
    const int64_t block_tokens = std::max<int64_t>(1, ctx.attr_int(block_tokens_attr_, 1));

    const double non_kv = static_cast<double>(non_kv_high_point(ctx));
    const double budget = utilization_ * static_cast<double>(ctx.workload().gpu_memory_bytes);
    const double free = budget - non_kv;
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
                    " x GPU memory); lower the model's footprint (quantize, tensor-parallel) or raise "
                    "gpu_memory_utilization")
                       .c_str());
  }

 private:
  // The step timeline's high point (docs/estimate.md section 4) over the GPU
  // items other than the KV cache, in device memory (every pool: what vLLM's
  // profile sees of the GPU). The host's timeline holds the KV cache in every
  // phase, as it is persistent (the inference plugin adds it so): the high
  // point without it is the timeline's less its bytes. A serving plan has no
  // gradients, so the host's phases come to persistent + max(activation +
  // transient_forward, activation + transient_backward, transient_optimizer),
  // the figure this plugin summed itself before ABI 1.1 gave it the timeline.
  static uint64_t non_kv_high_point(const memplan::sdk::Context& ctx) {
    const uint64_t kv_cache = static_cast<uint64_t>(support::sum_bytes(ctx, [](const memplan::sdk::ItemRef& item) {
      return support::on_gpu(item) && item.role() == Role::kv_cache && item.lifetime() == Lifetime::persistent;
    }));
    const uint64_t peak = support::Timeline(ctx).peak(support::Quantity::device);
    return peak > kv_cache ? peak - kv_cache : 0;
  }

  double utilization_;
  // Resolved once, in the constructor: no key lookup per evaluation. The
  // report's in the order apply() sets them, the order the report prints.
  memplan::sdk::Attribute memory_fraction_, block_bytes_attr_, block_tokens_attr_;
  memplan::sdk::Attribute kv_blocks_, kv_tokens_, max_sequences_, kv_budget_bytes_, non_kv_bytes_, kv_note_;
};

}  // namespace

MEMPLAN_PLUGIN(ServingBudget)
