// 'context-parallel': Megatron-LM context parallelism over cp ranks. Every
// layer's sequence is split cp ways (each rank keeps s / cp tokens and
// exchanges keys and values with the others, ring attention style), so the
// stored activations of every layer are divided by cp; the weights are
// replicated on each context-parallel rank, as on data-parallel ranks.
// The plugin declares ranks.context = size: a factor of the world size, read
// by the activation model (which divides its per-layer activations by it) and
// by sharding plugins (Megatron-LM's distributed optimizer shards over the
// data-parallel x context-parallel group).
#include <memplan/sdk.hpp>

#include <array>
#include <string>

namespace {

constexpr std::array<memplan_option_spec, 1> kOptions{{
    // "@layout": a size `memplan explain` may lay the job out again with (docs/plugin-abi.md, "Option specs").
    {"size", MEMPLAN_OPTION_INT, "context-parallel ranks cp (Megatron-LM's context_parallel_size)", "1", "@layout"},
}};

class ContextParallelStrategy {
 public:
  static constexpr memplan::sdk::PluginInfo info{
      "context-parallel", "1.1.0",
      "Megatron-LM context parallelism: every layer's sequence split over cp ranks", memplan::sdk::Kind::strategy,
      memplan::sdk::Phase::layout};
  static std::span<const memplan_option_spec> options() { return kOptions; }

  explicit ContextParallelStrategy(memplan::sdk::Options& options)
      : size_(options.positive_integer("size", 1)), ranks_context_(options.attribute(MEMPLAN_ATTR_RANKS_CONTEXT)) {
    if (size_ > 1 && !options.training())
      options.fail("size", "splits training activations (Megatron-LM context parallelism); the scenario has mode = "
                           "\"infer\", whose KV cache this plugin does not split");
  }

  void apply(memplan::sdk::Context& ctx) { ctx.set_attr(ranks_context_, size_); }

 private:
  int64_t size_;
  memplan::sdk::Attribute ranks_context_;  // resolved once: no key lookup per evaluation
};

}  // namespace

MEMPLAN_PLUGIN(ContextParallelStrategy)
