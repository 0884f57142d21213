// 'fsdp': PyTorch Fully Sharded Data Parallel (Zhao et al. 2023, "PyTorch
// FSDP: Experiences on Scaling Fully Sharded Data Parallel", arXiv
// 2304.11277). FULL_SHARD has ZeRO stage 3's semantics: weights, gradients,
// master weights and optimizer states are divided over the shard group, the
// data-parallel (x context-parallel) ranks. With shard_size smaller than that
// group it is HYBRID_SHARD: shards of shard_size ranks, replicated across the
// data-parallel ranks / shard_size groups. Experts under expert parallelism
// are sharded over shard group / ep ranks.
//
// Each FSDP unit (unit_layers transformer layers, as transformer_auto_wrap_policy
// wraps them) is all-gathered to full size before its forward and its
// backward. The root unit (the weights outside the layers: embeddings, final
// norm, LM head) is gathered at the start of forward and, as FSDP does for
// the root, kept until the end of backward. With limit_all_gathers (default
// True) the rate limiter keeps at most two units' gathered parameters alive:
// the one computing and the next one being gathered. Working sets:
//   forward:  root + min(2, units) units
//   backward: root + min(1 + prefetch, units) units, prefetch 1 for
//             backward_prefetch = "pre" (BACKWARD_PRE, FSDP's default), else 0
//             + the unsharded gradients of the unit being reduced and of the
//             root (reduce-scattered when the root's backward ends)
// in the weights' and the gradients' dtypes, as transient items.
#include <memplan/sdk.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <string>

#include "../zero/sharding.hpp"

namespace {

namespace sharding = memplan::plugins::sharding;
using memplan::sdk::Role;

constexpr std::array<memplan_option_spec, 3> kOptions{{
    {"shard_size", MEMPLAN_OPTION_INT,
     "ranks in one shard group; fewer than the data-parallel ranks is HYBRID_SHARD", "all data-parallel ranks (FULL_SHARD)"},
    {"unit_layers", MEMPLAN_OPTION_INT, "transformer layers per FSDP unit (wrapped module)", "1"},
    {"backward_prefetch", MEMPLAN_OPTION_STRING,
     "\"pre\" (BACKWARD_PRE), \"post\" (BACKWARD_POST) or \"none\"", "\"pre\""},
}};

class FsdpStrategy {
 public:
  static constexpr memplan::sdk::PluginInfo info{
      "fsdp", "1.0.0",
      "PyTorch FSDP: FULL_SHARD or HYBRID_SHARD (ZeRO-3 semantics) with the gathered units in flight",
      memplan::sdk::Kind::strategy, memplan::sdk::Phase::sharding};
  static std::span<const memplan_option_spec> options() { return kOptions; }

  explicit FsdpStrategy(memplan::sdk::Options& options)
      : unit_layers_(options.positive_integer("unit_layers", 1)) {
    if (options.integer("shard_size")) shard_size_ = options.positive_integer("shard_size", 1);
    const std::string prefetch = options.string("backward_prefetch").value_or("pre");
    if (prefetch != "pre" && prefetch != "post" && prefetch != "none")
      options.fail("backward_prefetch", "must be \"pre\", \"post\" or \"none\", not \"" + prefetch + "\"");
    backward_prefetch_ = prefetch == "pre" ? 1 : 0;
    if (!options.model().has_architecture)
      options.fail("needs the model's layers to size its units, but the scenario gives only params; give a preset "
                   "or the architecture in [model], or use [[strategy]] use = \"zero\" with stage = 3");
  }

  void apply(memplan::sdk::Context& ctx) {
    if (ctx.attr_int(MEMPLAN_ATTR_RANKS_DATA, 0) == 0)
      ctx.fail("shards over the data-parallel group, but no strategy declares its size; add [[strategy]] use = "
               "\"data-parallel\" with its size (size = 1 on a single GPU)");
    const sharding::Groups groups = sharding::read_groups(ctx);
    const int64_t replicas = groups.dense();
    const int64_t shard = shard_size_ > 0 ? shard_size_ : replicas;
    if (shard > replicas || replicas % shard != 0)
      throw memplan::sdk::PluginError(
          "shard_size", std::to_string(shard) + " does not divide the " + std::to_string(replicas) +
                            " data-parallel ranks" + (groups.context > 1 ? " (times context-parallel ranks)" : "") +
                            "; HYBRID_SHARD replicates whole shard groups, so choose a divisor");
    if (shard % groups.expert_parallel != 0)
      throw memplan::sdk::PluginError(
          "shard_size", "the experts are sharded over the shard group's " + std::to_string(shard) + " ranks / " +
                            std::to_string(groups.expert_parallel) +
                            " expert-parallel ranks, which is not a whole number; choose a multiple of the "
                            "expert-parallel size");
    ctx.set_attr(sharding::kGatherAttr, 1);
    add_working_set(ctx);
    const double dense = static_cast<double>(shard);
    const double expert = dense / static_cast<double>(groups.expert_parallel);
    sharding::shard(ctx, dense, expert, [](const memplan::sdk::Item& item) {
      return item.role == Role::weights || item.role == Role::gradients || item.role == Role::master_weights ||
             item.role == Role::optimizer_states;
    });
    ctx.set_attr("report.fsdp_shard_group", shard);
  }

 private:
  // Before sharding: the weights on the rank are still whole.
  void add_working_set(memplan::sdk::Context& ctx) const {
    const sharding::WeightLayout weights = sharding::weight_layout(ctx);
    const double unit = sharding::largest_window(weights.per_layer, unit_layers_);
    const double trainable_unit = sharding::largest_window(weights.trainable_layer, unit_layers_);
    const double units = std::ceil(static_cast<double>(weights.per_layer.size()) / static_cast<double>(unit_layers_));
    const double forward = weights.outside_layers + std::min(2.0, units) * unit;
    const double backward = weights.outside_layers + std::min(1.0 + backward_prefetch_, units) * unit;
    const double weight_bytes = ctx.required_attr_double(MEMPLAN_ATTR_DTYPE_WEIGHTS);
    sharding::add_buffer(ctx, "fsdp.gathered_forward", memplan::sdk::Lifetime::transient_forward, forward,
                         weight_bytes);
    sharding::add_buffer(ctx, "fsdp.gathered_backward", memplan::sdk::Lifetime::transient_backward, backward,
                         weight_bytes);
    if (ctx.training())
      sharding::add_buffer(ctx, "fsdp.unsharded_gradients", memplan::sdk::Lifetime::transient_backward,
                           weights.trainable_outside + trainable_unit,
                           ctx.required_attr_double(MEMPLAN_ATTR_DTYPE_GRADIENTS));
    ctx.set_attr("report.fsdp_unit_parameters", unit);
    ctx.set_attr("report.fsdp_root_parameters", weights.outside_layers);
  }

  int64_t unit_layers_;
  int64_t shard_size_ = 0;
  double backward_prefetch_ = 1;
};

}  // namespace

MEMPLAN_PLUGIN(FsdpStrategy)
