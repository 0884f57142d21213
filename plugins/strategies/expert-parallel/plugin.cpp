// 'expert-parallel': mixture-of-experts layers with their experts split over
// ep ranks (Megatron-LM's expert_model_parallel_size; GShard, Lepikhin et al.
// 2020, arXiv 2006.16668). The ep ranks are taken from the data-parallel x
// context-parallel ranks, so ep adds no GPUs: attention, norms, router and
// embeddings stay replicated across them, and each rank holds E / ep whole
// experts. Every item of class expert (weights, and the gradients and master
// copies the precision plugin made of them) is divided by ep.
//
// Runs just after the layout phase (300), so the data-parallel and
// context-parallel group sizes are declared whatever the scenario order, and
// before the optimizer (400) creates states from the split experts.
// Declares layout.expert_parallel = ep, which sharding plugins read: the
// expert data-parallel group (dp x cp / ep) shards the experts' states.
//
// tensor_size (Megatron-Core's expert_tensor_parallel_size, ETP; 1.2.0): the
// ranks each expert's matrices are split over, the tensor-parallel size t
// unless given. With ETP other than t Megatron-Core folds the expert groups
// out of t x cp x dp ("MoE parallel folding": megatron/core/parallel_state.py
// initialize_model_parallel, the expert groups built from the same ranks as
// the dense tensor x context x data ones; arguments.py: expert_tensor_parallel_size
// defaults to tensor_model_parallel_size): ep x ETP divides t x cp x dp, each
// expert item holds 1 / (ep x ETP) (the tensor-parallel plugin's 1 / t is
// undone), and the expert data-parallel group is t x cp x dp / (ep x ETP)
// (layout.expert_tensor_parallel; support::Ranks::expert_replicas). The
// routed tokens' activations are counted as before (the megatron activation
// model's expert terms are divided by t either way: with ETP 1 each of the
// t ranks holds 1 / t of the routed tokens at full width).
#include <memplan/sdk.hpp>
#include <memplan/support/expert_padding.hpp>
#include <memplan/support/layout.hpp>
#include <memplan/support/parameter_shapes.hpp>

#include <array>
#include <optional>
#include <string>

namespace {

using memplan::sdk::ParamClass;

constexpr std::array<memplan_option_spec, 2> kOptions{{
    {"size", MEMPLAN_OPTION_INT, "expert-parallel ranks ep (Megatron-LM's expert_model_parallel_size)", "1", nullptr},
    {"tensor_size", MEMPLAN_OPTION_INT,
     "expert tensor-parallel ranks ETP (Megatron-Core's expert_tensor_parallel_size): each expert's matrices split "
     "over ETP ranks, the expert groups folded out of tensor x context x data (ep x ETP must divide them)",
     "the tensor-parallel size", nullptr},
}};

constexpr auto kAfterLayout = static_cast<memplan::sdk::Phase>(MEMPLAN_PHASE_LAYOUT + 50);

class ExpertParallelStrategy {
 public:
  static constexpr memplan::sdk::PluginInfo info{
      "expert-parallel", "1.3.0",
      "Expert parallelism: MoE experts split over ranks taken from the data-parallel group",
      memplan::sdk::Kind::strategy, kAfterLayout};
  static std::span<const memplan_option_spec> options() { return kOptions; }

  explicit ExpertParallelStrategy(memplan::sdk::Options& options)
      : size_(options.positive_integer("size", 1)),
        layout_(options),
        expert_parallel_(options.attribute(MEMPLAN_ATTR_EXPERT_PARALLEL)),
        expert_tensor_parallel_(options.attribute(MEMPLAN_ATTR_EXPERT_TENSOR_PARALLEL)),
        pad_intermediate_(options.attribute(MEMPLAN_ATTR_EXPERT_PAD_INTERMEDIATE)),
        pad_hidden_(options.attribute(MEMPLAN_ATTR_EXPERT_PAD_HIDDEN)) {
    if (options.integer("tensor_size")) tensor_size_ = options.positive_integer("tensor_size", 1);
    if (tensor_size_ && !options.model().experts && options.model().has_architecture)
      options.fail("tensor_size", "splits the experts' matrices, but the model has none; remove tensor_size");
    if (size_ == 1) return;
    const memplan_model& model = options.model();
    if (!model.has_architecture || model.experts == 0)
      options.fail("size", "splits the experts of a mixture-of-experts model, but the model has none; give [model.moe] "
                           "experts (or a MoE preset), or remove this strategy");
    if (model.experts % size_ != 0)
      options.fail("size", std::to_string(size_) + " does not divide the " + std::to_string(model.experts) +
                               " experts; choose a divisor of the expert count");
  }

  void apply(memplan::sdk::Context& ctx) {
    ctx.set_attr(expert_parallel_, size_);
    const memplan::support::Ranks layout = layout_.ranks(ctx);
    const int64_t tensor = layout.tensor;
    const int64_t expert_tensor = tensor_size_.value_or(tensor);
    ctx.set_attr(expert_tensor_parallel_, expert_tensor);
    if (size_ == 1 && expert_tensor == tensor) return;
    const int64_t data = layout.data;
    const int64_t context = layout.context;
    if (expert_tensor == tensor) {
      if ((data * context) % size_ != 0)
        throw memplan::sdk::PluginError(
            "size", std::to_string(size_) + " expert-parallel ranks are taken from the data-parallel x "
                        "context-parallel ranks, but there are " + std::to_string(data) + " x " +
                        std::to_string(context) + " = " + std::to_string(data * context) +
                        "; make the data-parallel size (times the context-parallel size) a multiple of " +
                        std::to_string(size_) + ", or give tensor_size (the experts' own tensor size) to fold the "
                        "expert groups out of tensor x context x data");
    } else if ((tensor * data * context) % (size_ * expert_tensor) != 0) {
      throw memplan::sdk::PluginError(
          "tensor_size", std::to_string(size_) + " expert-parallel x " + std::to_string(expert_tensor) +
                             " expert tensor-parallel ranks are folded out of the tensor x context x data ranks, "
                             "but there are " + std::to_string(tensor) + " x " + std::to_string(context) + " x " +
                             std::to_string(data) + " = " + std::to_string(tensor * context * data) +
                             "; choose sizes whose product divides them");
    }
    // The tensor-parallel plugin split each expert matrix over t; the experts' own split is ETP (each rank's
    // share padded where the experts' kernels pad it, weights.expert_pad_*).
    const memplan::support::ExpertPadding padding{.intermediate = ctx.attr_int(pad_intermediate_, 1),
                                                  .hidden = ctx.attr_int(pad_hidden_, 1)};
    const double ep = static_cast<double>(size_);
    // In place: no copy of each item's name per evaluation.
    for (memplan::sdk::ItemRef item : ctx.items())
      if (item.param_class() == ParamClass::expert)
        item.set_elements(item.elements() / ep *
                          memplan::support::expert_resplit(ctx.model(),
                                                           memplan::support::is_vector_weight(item.name()), tensor,
                                                           expert_tensor, padding));
  }

 private:
  int64_t size_;
  memplan::support::LayoutReader layout_;
  std::optional<int64_t> tensor_size_;       // tensor_size (ETP); unset: the tensor-parallel size
  memplan::sdk::Attribute expert_parallel_;  // resolved once: no key lookup per evaluation
  memplan::sdk::Attribute expert_tensor_parallel_;
  memplan::sdk::Attribute pad_intermediate_, pad_hidden_;  // weights.expert_pad_*
};

}  // namespace

MEMPLAN_PLUGIN(ExpertParallelStrategy)
