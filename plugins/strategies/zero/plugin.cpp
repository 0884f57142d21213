// 'zero': ZeRO-DP (Rajbhandari et al. 2020, arXiv 1910.02054, section 5 and
// Table 1) over the data-parallel group of N_d ranks.
//   stage 1 (P_os):     optimizer states and fp32 master weights / N_d
//   stage 2 (P_os+g):   also gradients / N_d
//   stage 3 (P_os+g+p): also the 16-bit weights / N_d
// The paper's K = 12 bytes per parameter counts master weights with the
// optimizer states, so stage 1 shards both. Partition padding (at most N_d - 1
// elements per tensor) is ignored.
#include <memplan/sdk.hpp>

#include <array>
#include <string>

namespace {

constexpr std::array<memplan_option_spec, 1> kOptions{{
    {"stage", MEMPLAN_OPTION_INT, "0 (off), 1 (optimizer states), 2 (+ gradients) or 3 (+ weights)", "required"},
}};

class ZeroShardingStrategy {
 public:
  static constexpr memplan::sdk::PluginInfo info{
      "zero", "1.0.0", "ZeRO stages 0-3: shard optimizer states, gradients and weights over data-parallel ranks",
      memplan::sdk::Kind::strategy, memplan::sdk::Phase::sharding};
  static std::span<const memplan_option_spec> options() { return kOptions; }

  explicit ZeroShardingStrategy(memplan::sdk::Options& options) {
    auto stage = options.integer("stage");
    if (!stage) options.fail("stage", "is required: 0, 1, 2 or 3");
    if (*stage < 0 || *stage > 3) options.fail("stage", "must be 0, 1, 2 or 3, got " + std::to_string(*stage));
    stage_ = static_cast<int>(*stage);
  }

  void apply(memplan::sdk::Context& ctx) {
    using memplan::sdk::Role;
    const int64_t declared = ctx.attr_int(MEMPLAN_ATTR_RANKS_DATA, 0);
    if (stage_ > 0 && declared == 0)
      ctx.fail("stage " + std::to_string(stage_) + " shards over the data-parallel group, but no strategy declares "
               "its size; add [[strategy]] use = \"data-parallel\" with its size (size = 1 on a single GPU)");
    const double ranks = static_cast<double>(declared);
    if (stage_ == 0 || ranks <= 1) return;
    for (size_t i = 0; i < ctx.size(); ++i) {
      memplan::sdk::Item item = ctx.item(i);
      const bool sharded = (stage_ >= 1 && (item.role == Role::optimizer_states || item.role == Role::master_weights)) ||
                           (stage_ >= 2 && item.role == Role::gradients) ||
                           (stage_ >= 3 && item.role == Role::weights);
      if (!sharded || item.device != memplan::sdk::Device::gpu) continue;
      item.elements /= ranks;
      ctx.set(i, item);
    }
  }

 private:
  int stage_ = 0;
};

}  // namespace

MEMPLAN_PLUGIN(ZeroShardingStrategy)
