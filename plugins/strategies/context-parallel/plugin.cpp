// 'context-parallel': Megatron-LM context parallelism over cp ranks. Every
// layer's sequence is split cp ways (each rank keeps s / cp tokens and
// exchanges keys and values with the others, ring attention style), so the
// stored activations of every layer are divided by cp; the weights are
// replicated on each context-parallel rank, as on data-parallel ranks.
// The plugin declares ranks.context = size: a factor of the world size, read
// by the activation model (which divides its per-layer activations by it) and
// by sharding plugins (Megatron-LM's distributed optimizer shards over the
// data-parallel x context-parallel group).
//
// runtime = "torch" (version 1.2.0): torch's context_parallel
// (torch/distributed/tensor/experimental/_attention.py, torch 2.6) with its
// default rotate method "allgather" (_AllGatherRotater; torchtitan's
// context_parallel_rotate_method default): each layer's attention all-gathers
// the ranks' K and V once and reads the other ranks' chunks from that buffer,
// in forward and again in backward. The plugin declares
// layout.context_kv_allgather = 1; the activation model sizes the buffers.
#include <memplan/sdk.hpp>

#include <array>
#include <string>

namespace {

constexpr std::array<memplan_option_spec, 2> kOptions{{
    // "@layout": a size `memplan explain` may lay the job out again with (docs/plugin-abi.md, "Option specs").
    {"size", MEMPLAN_OPTION_INT, "context-parallel ranks cp (Megatron-LM's context_parallel_size)", "1", "@layout"},
    {"runtime", MEMPLAN_OPTION_STRING,
     "whose ring attention: \"megatron\" (its K/V blocks in flight are not modelled) or \"torch\" (torch's "
     "context_parallel, \"allgather\" rotate method: every layer gathers all ranks' K and V, and its backward "
     "keeps fp32 accumulators and the dK/dV exchange)",
     "\"megatron\"", nullptr},
}};

class ContextParallelStrategy {
 public:
  static constexpr memplan::sdk::PluginInfo info{
      "context-parallel", "1.2.0",
      "Megatron-LM context parallelism: every layer's sequence split over cp ranks", memplan::sdk::Kind::strategy,
      memplan::sdk::Phase::layout};
  static std::span<const memplan_option_spec> options() { return kOptions; }

  explicit ContextParallelStrategy(memplan::sdk::Options& options)
      : size_(options.positive_integer("size", 1)),
        ranks_context_(options.attribute(MEMPLAN_ATTR_RANKS_CONTEXT)),
        kv_allgather_(options.attribute(MEMPLAN_ATTR_CONTEXT_KV_ALLGATHER)) {
    const std::string runtime = options.string("runtime").value_or("megatron");
    if (runtime != "megatron" && runtime != "torch")
      options.fail("runtime", "must be \"megatron\" or \"torch\", not \"" + runtime + "\"");
    torch_runtime_ = runtime == "torch";
    if (size_ > 1 && !options.training())
      options.fail("size", "splits training activations (Megatron-LM context parallelism); the scenario has mode = "
                           "\"infer\", whose KV cache this plugin does not split");
  }

  void apply(memplan::sdk::Context& ctx) {
    ctx.set_attr(ranks_context_, size_);
    if (torch_runtime_ && size_ > 1) ctx.set_attr(kv_allgather_, 1);
  }

 private:
  int64_t size_;
  memplan::sdk::Attribute ranks_context_;  // resolved once: no key lookup per evaluation
  memplan::sdk::Attribute kv_allgather_;   // layout.context_kv_allgather, runtime "torch"
  bool torch_runtime_ = false;
};

}  // namespace

MEMPLAN_PLUGIN(ContextParallelStrategy)
