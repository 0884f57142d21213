// 'data-parallel': N replicas, each on its own micro-batch. Every rank holds the
// full model state unless a sharding strategy (e.g. ZeRO) divides it over the
// data-parallel group; this plugin only declares the group's size.
#include <memplan/sdk.hpp>

#include <array>

namespace {

constexpr std::array<memplan_option_spec, 1> kOptions{{
    // "@fill": the replicas `memplan explain` sets to fill the GPUs a new layout leaves (docs/plugin-abi.md).
    {"size", MEMPLAN_OPTION_INT, "number of data-parallel replicas", "1", "@fill"},
}};

class DataParallelStrategy {
 public:
  static constexpr memplan::sdk::PluginInfo info{"data-parallel", "1.2.0",
                                                 "Data parallelism: declares the data-parallel group size",
                                                 memplan::sdk::Kind::strategy, memplan::sdk::Phase::layout,
                                                 memplan::sdk::Reads::nothing};
  static std::span<const memplan_option_spec> options() { return kOptions; }

  explicit DataParallelStrategy(memplan::sdk::Options& options)
      : size_(options.positive_integer("size", 1)), ranks_data_(options.attribute(MEMPLAN_ATTR_RANKS_DATA)) {}

  void apply(memplan::sdk::Context& ctx) { ctx.set_attr(ranks_data_, size_); }

 private:
  int64_t size_;
  memplan::sdk::Attribute ranks_data_;
};

}  // namespace

MEMPLAN_PLUGIN(DataParallelStrategy)
