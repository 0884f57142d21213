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
#include <memplan/sdk.hpp>
#include <memplan/support/layout.hpp>

#include <array>
#include <string>

namespace {

using memplan::sdk::ParamClass;

constexpr std::array<memplan_option_spec, 1> kOptions{{
    {"size", MEMPLAN_OPTION_INT, "expert-parallel ranks ep (Megatron-LM's expert_model_parallel_size)", "1", nullptr},
}};

constexpr auto kAfterLayout = static_cast<memplan::sdk::Phase>(MEMPLAN_PHASE_LAYOUT + 50);

class ExpertParallelStrategy {
 public:
  static constexpr memplan::sdk::PluginInfo info{
      "expert-parallel", "1.1.1",
      "Expert parallelism: MoE experts split over ranks taken from the data-parallel group",
      memplan::sdk::Kind::strategy, kAfterLayout};
  static std::span<const memplan_option_spec> options() { return kOptions; }

  explicit ExpertParallelStrategy(memplan::sdk::Options& options)
      : size_(options.positive_integer("size", 1)),
        layout_(options),
        expert_parallel_(options.attribute(MEMPLAN_ATTR_EXPERT_PARALLEL)) {
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
    if (size_ == 1) return;
    const memplan::support::Ranks layout = layout_.ranks(ctx);
    const int64_t data = layout.data;
    const int64_t context = layout.context;
    if ((data * context) % size_ != 0)
      throw memplan::sdk::PluginError(
          "size", std::to_string(size_) + " expert-parallel ranks are taken from the data-parallel x context-parallel "
                      "ranks, but there are " + std::to_string(data) + " x " + std::to_string(context) + " = " +
                      std::to_string(data * context) +
                      "; make the data-parallel size (times the context-parallel size) a multiple of " +
                      std::to_string(size_));
    const double ranks = static_cast<double>(size_);
    // In place: no copy of each item's name per evaluation.
    for (memplan::sdk::ItemRef item : ctx.items())
      if (item.param_class() == ParamClass::expert) item.set_elements(item.elements() / ranks);
  }

 private:
  int64_t size_;
  memplan::support::LayoutReader layout_;
  memplan::sdk::Attribute expert_parallel_;  // resolved once: no key lookup per evaluation
};

}  // namespace

MEMPLAN_PLUGIN(ExpertParallelStrategy)
