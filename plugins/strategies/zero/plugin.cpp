// 'zero': ZeRO-DP (Rajbhandari et al. 2020, arXiv 1910.02054, section 5 and
// Table 1) over the N_d ranks that hold replicas of the model: the
// data-parallel ranks times the context-parallel ranks (Megatron-LM's
// distributed optimizer shards over that group; the ZeRO paper has no context
// parallelism, N_d = ranks.data there).
//   stage 1 (P_os):     optimizer states and fp32 master weights / N_d
//   stage 2 (P_os+g):   also gradients / N_d
//   stage 3 (P_os+g+p): also the 16-bit weights / N_d
// Experts under expert parallelism (layout.expert_parallel = ep) are sharded
// over the expert data-parallel group of N_d / ep ranks instead.
// The paper's K = 12 bytes per parameter counts master weights with the
// optimizer states, so stage 1 shards both. Partition padding (at most N_d - 1
// elements per tensor) is ignored.
//
// With gathered_parameters = true, stage 3 also counts the working set of
// DeepSpeed's ZeRO-3 (deepspeed/runtime/zero/config.py): the module in use,
// gathered to full size, plus the parameters prefetched ahead of it, at most
// stage3_prefetch_bucket_size elements and at most stage3_max_live_parameters
// resident in all:
//   gathered = u + min(B, max(0, M - u), W - u)
// u the largest module, B the prefetch bucket, M the live limit, W all weights
// on the rank; alive in forward and in backward (transients), plus in backward
// the module's full gradient before it is reduce-scattered.
#include <memplan/sdk.hpp>

#include <algorithm>
#include <array>
#include <string>

#include "sharding.hpp"

namespace {

namespace sharding = memplan::plugins::sharding;
using memplan::sdk::Role;

// DeepSpeed's defaults (deepspeed/runtime/zero/config.py, DeepSpeedZeroConfig):
// prefetch_bucket_size = 5e7 and max_live_parameters = 1e9 elements.
constexpr int64_t kPrefetchBucketDefault = 50'000'000;
constexpr int64_t kMaxLiveDefault = 1'000'000'000;

constexpr std::array<memplan_option_spec, 4> kOptions{{
    {"stage", MEMPLAN_OPTION_INT, "0 (off), 1 (optimizer states), 2 (+ gradients) or 3 (+ weights)", "required"},
    {"gathered_parameters", MEMPLAN_OPTION_BOOL,
     "stage 3: count the gathered module and the prefetched parameters on the GPU",
     "true with stage 3 when the architecture is known"},
    {"prefetch_bucket_size", MEMPLAN_OPTION_INT,
     "stage 3: parameter elements fetched ahead of use (DeepSpeed stage3_prefetch_bucket_size)", "50000000"},
    {"max_live_parameters", MEMPLAN_OPTION_INT,
     "stage 3: gathered parameter elements resident at most (DeepSpeed stage3_max_live_parameters)", "1000000000"},
}};

class ZeroShardingStrategy {
 public:
  static constexpr memplan::sdk::PluginInfo info{
      "zero", "1.1.0",
      "ZeRO stages 0-3: shard optimizer states, gradients and weights over data-parallel ranks; ZeRO-3's gathered "
      "parameters",
      memplan::sdk::Kind::strategy, memplan::sdk::Phase::sharding};
  static std::span<const memplan_option_spec> options() { return kOptions; }

  explicit ZeroShardingStrategy(memplan::sdk::Options& options) {
    auto stage = options.integer("stage");
    if (!stage) options.fail("stage", "is required: 0, 1, 2 or 3");
    if (*stage < 0 || *stage > 3) options.fail("stage", "must be 0, 1, 2 or 3, got " + std::to_string(*stage));
    stage_ = static_cast<int>(*stage);
    // DeepSpeed gathers every stage-3 module before use: counted unless the scenario (or the paper view) says not.
    gathered_ = options.boolean("gathered_parameters").value_or(stage_ == 3 && options.model().has_architecture);
    if (gathered_ && stage_ != 3)
      options.fail("gathered_parameters", "counts the parameters ZeRO stage 3 gathers; stage " +
                                              std::to_string(stage_) + " keeps whole weights on every rank");
    if (gathered_ && !options.model().has_architecture)
      options.fail("gathered_parameters", "needs the model's architecture to size the gathered modules, but the "
                                          "scenario gives only params; give a preset or the architecture in [model]");
    for (const char* key : {"prefetch_bucket_size", "max_live_parameters"}) {
      const auto value = options.integer(key);
      if (!value) continue;
      if (!gathered_)
        options.fail(key, "sizes the stage-3 gathered parameters, which are not counted; set gathered_parameters = "
                          "true with stage = 3");
      if (*value < 0) options.fail(key, "must be 0 or more elements, got " + std::to_string(*value));
    }
    prefetch_bucket_ = static_cast<double>(options.integer("prefetch_bucket_size").value_or(kPrefetchBucketDefault));
    max_live_ = static_cast<double>(options.integer("max_live_parameters").value_or(kMaxLiveDefault));
  }

  void apply(memplan::sdk::Context& ctx) {
    const int64_t declared = ctx.attr_int(MEMPLAN_ATTR_RANKS_DATA, 0);
    if (stage_ > 0 && declared == 0)
      ctx.fail("stage " + std::to_string(stage_) + " shards over the data-parallel group, but no strategy declares "
               "its size; add [[strategy]] use = \"data-parallel\" with its size (size = 1 on a single GPU)");
    if (stage_ == 0) return;
    ctx.set_attr(sharding::kGradientBucketsAttr, stage_ == 3 ? "deepspeed-stage3" : "deepspeed");
    const sharding::Groups groups = sharding::read_groups(ctx);
    if (stage_ == 3) {
      ctx.set_attr(sharding::kGatherAttr, gathered_ ? 1 : 0);
      if (gathered_) add_gathered(ctx, groups);
    }
    const double dense = static_cast<double>(groups.dense());
    const double expert = dense / static_cast<double>(groups.expert_parallel);
    const int stage = stage_;
    sharding::shard(ctx, dense, expert, [stage](const memplan::sdk::Item& item) {
      return (stage >= 1 && (item.role == Role::optimizer_states || item.role == Role::master_weights)) ||
             (stage >= 2 && item.role == Role::gradients) || (stage >= 3 && item.role == Role::weights);
    });
  }

 private:
  // Before sharding: the weights on the rank are still whole.
  void add_gathered(memplan::sdk::Context& ctx, const sharding::Groups& groups) const {
    const double module = sharding::largest_module(ctx, groups.expert_parallel, false);
    const double trainable_module = sharding::largest_module(ctx, groups.expert_parallel, true);
    const sharding::WeightLayout layout = sharding::weight_layout(ctx);
    const double all = layout.total;
    const double prefetch = std::min({prefetch_bucket_, std::max(0.0, max_live_ - module), all - module});
    const double gathered = module + prefetch;
    // The weights' own dtypes, on average (under 'quantized' the 4-bit linear layers and the 16-bit rest).
    const double weight_bytes = all > 0 ? layout.total_bytes / all : ctx.required_attr_double(MEMPLAN_ATTR_DTYPE_WEIGHTS);
    sharding::add_buffer(ctx, "zero3.gathered_forward", memplan::sdk::Lifetime::transient_forward, gathered,
                         weight_bytes);
    sharding::add_buffer(ctx, "zero3.gathered_backward", memplan::sdk::Lifetime::transient_backward, gathered,
                         weight_bytes);
    if (ctx.training())
      sharding::add_buffer(ctx, "zero3.module_gradient", memplan::sdk::Lifetime::transient_backward, trainable_module,
                           ctx.required_attr_double(MEMPLAN_ATTR_DTYPE_GRADIENTS));
    ctx.set_attr("report.zero3_largest_module", module);
    ctx.set_attr("report.zero3_gathered_parameters", gathered);
  }

  int stage_ = 0;
  bool gathered_ = false;
  double prefetch_bucket_ = 0;
  double max_live_ = 0;
};

}  // namespace

MEMPLAN_PLUGIN(ZeroShardingStrategy)
