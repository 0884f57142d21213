// 'tensor-parallel': Megatron-LM tensor parallelism (Shoeybi et al. 2019,
// arXiv 1909.08053) over t ranks. Column- and row-parallel projections, the
// vocabulary-parallel embedding and LM head, and the experts' MLPs are split t
// ways; norms, the router and learned position embeddings are replicated.
// Grouped-query k/v projections split when kv_heads is a multiple of t; when t
// is a multiple of kv_heads each rank keeps one whole kv head (replicated), as
// vLLM does (the rule, and its source, in memplan/support/kv_heads.hpp).
// `sequence_parallel` (Korthikanti et al. 2022) splits the replicated
// activations too; the activation model reads it.
// A model known only by its parameter count is split as a whole (its norms,
// under 0.1% of a transformer's weights, are then counted as split).
#include <memplan/sdk.hpp>
#include <memplan/support/expert_padding.hpp>
#include <memplan/support/kv_heads.hpp>
#include <memplan/support/parameter_shapes.hpp>

#include <array>
#include <string>

namespace {

using memplan::sdk::ParamClass;

constexpr std::array<memplan_option_spec, 2> kOptions{{
    // "@layout": a size `memplan explain` may lay the job out again with (docs/plugin-abi.md, "Option specs").
    {"size", MEMPLAN_OPTION_INT, "tensor-parallel ranks t", "1", "@layout"},
    {"sequence_parallel", MEMPLAN_OPTION_BOOL, "also split norm and dropout activations along the sequence",
     "false", "true"},
}};

class TensorParallelStrategy {
 public:
  static constexpr memplan::sdk::PluginInfo info{
      "tensor-parallel", "1.5.0", "Megatron tensor parallelism, optionally with sequence parallelism",
      memplan::sdk::Kind::strategy, memplan::sdk::Phase::layout, memplan::sdk::Reads::nothing};
  static std::span<const memplan_option_spec> options() { return kOptions; }

  explicit TensorParallelStrategy(memplan::sdk::Options& options)
      : size_(options.positive_integer("size", 1)),
        sequence_parallel_(options.boolean("sequence_parallel").value_or(false)),
        ranks_tensor_(options.attribute(MEMPLAN_ATTR_RANKS_TENSOR)),
        sequence_parallel_attr_(options.attribute(MEMPLAN_ATTR_SEQUENCE_PARALLEL)),
        pad_intermediate_(options.attribute(MEMPLAN_ATTR_EXPERT_PAD_INTERMEDIATE)),
        pad_hidden_(options.attribute(MEMPLAN_ATTR_EXPERT_PAD_HIDDEN)) {
    const memplan_model& model = options.model();
    if (size_ == 1 || !model.has_architecture) return;
    if (model.heads % size_ != 0)
      options.fail("size", std::to_string(size_) + " does not divide the " + std::to_string(model.heads) +
                               " attention heads; choose a divisor of the head count");
    if (model.kv_heads % size_ != 0 && size_ % model.kv_heads != 0)
      options.fail("size", std::to_string(size_) + " and the " + std::to_string(model.kv_heads) +
                               " kv heads do not divide one another; choose a size that divides or is a multiple "
                               "of kv_heads");
  }

  void apply(memplan::sdk::Context& ctx) {
    ctx.set_attr(ranks_tensor_, size_);
    ctx.set_attr(sequence_parallel_attr_, sequence_parallel_ ? 1 : 0);
    if (size_ == 1) return;
    const memplan_model& model = ctx.model();
    const double t = static_cast<double>(size_);
    // Fraction of the k/v projections each rank holds.
    const double kv_fraction = memplan::support::kv_fraction(model.kv_heads, size_);
    // Experts padded for their kernels (a precision plugin's weights.expert_pad_*): each rank's share padded.
    const memplan::support::ExpertPadding padding{.intermediate = ctx.attr_int(pad_intermediate_, 1),
                                                  .hidden = ctx.attr_int(pad_hidden_, 1)};
    for (memplan::sdk::ItemRef item : ctx.items()) {
      double fraction = 1.0;
      switch (item.param_class()) {
        case ParamClass::expert:
          fraction = memplan::support::expert_resplit(
              model, memplan::support::is_vector_weight(item.name()), 1, size_, padding);
          break;
        case ParamClass::attention:
        case ParamClass::mlp:
        case ParamClass::embedding:
        case ParamClass::lm_head: fraction = 1.0 / t; break;
        case ParamClass::attention_kv: fraction = kv_fraction; break;
        // Latent attention's down-projections (wq_a, wkv_a) are plain Linear
        // layers every rank holds whole (DeepSeek-V3 inference/model.py, class
        // MLA; vLLM's ReplicatedLinear): like the norms, not split.
        case ParamClass::attention_latent: break;
        case ParamClass::other: fraction = model.has_architecture ? 1.0 : 1.0 / t; break;
        default: break;
      }
      if (fraction != 1.0) item.set_elements(item.elements() * fraction);
    }
  }

 private:
  int64_t size_;
  bool sequence_parallel_;
  memplan::sdk::Attribute ranks_tensor_;
  memplan::sdk::Attribute sequence_parallel_attr_;
  memplan::sdk::Attribute pad_intermediate_, pad_hidden_;
};

}  // namespace

MEMPLAN_PLUGIN(TensorParallelStrategy)
