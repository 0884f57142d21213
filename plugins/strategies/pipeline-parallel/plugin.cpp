// 'pipeline-parallel': p pipeline stages of ceil(L / p) layers. The report is
// for one stage, the first by default (Korthikanti et al. 2022, section 4.2.3:
// under 1F1B the first stage holds the most activations). The first stage also
// holds the token (and position) embedding; the last holds the final norm and
// the LM head, and, when embeddings are tied, its own copy of the embedding
// (Megatron-LM keeps one on each end and all-reduces their gradients).
// In-flight micro-batches, whose activations the stage stores at once:
//   1F1B (PipeDream-Flush, Narayanan et al. 2021): min(p - stage, m) on stage
//        0-based `stage`, so p on the first stage and 1 on the last;
//   GPipe (Huang et al. 2019): all m = grad_accum micro-batches.
#include <memplan/sdk.hpp>

#include <algorithm>
#include <array>
#include <string>

namespace {

using memplan::sdk::ParamClass;

constexpr std::array<memplan_option_spec, 3> kOptions{{
    {"size", MEMPLAN_OPTION_INT, "pipeline stages p", "1"},
    {"stage", MEMPLAN_OPTION_STRING, "which stage to report: \"first\" or \"last\"", "\"first\""},
    {"schedule", MEMPLAN_OPTION_STRING, "\"1f1b\" or \"gpipe\"", "\"1f1b\""},
}};

class PipelineParallelStrategy {
 public:
  static constexpr memplan::sdk::PluginInfo info{"pipeline-parallel", "1.0.0",
                                                 "Pipeline parallelism (1F1B or GPipe), reporting the first or last stage",
                                                 memplan::sdk::Kind::strategy, memplan::sdk::Phase::layout};
  static std::span<const memplan_option_spec> options() { return kOptions; }

  explicit PipelineParallelStrategy(memplan::sdk::Options& options) : size_(options.positive_integer("size", 1)) {
    const std::string stage = options.string("stage").value_or("first");
    if (stage != "first" && stage != "last") options.fail("stage", "must be \"first\" or \"last\", not \"" + stage + "\"");
    last_stage_ = stage == "last";
    const std::string schedule = options.string("schedule").value_or("1f1b");
    if (schedule != "1f1b" && schedule != "gpipe")
      options.fail("schedule", "must be \"1f1b\" or \"gpipe\", not \"" + schedule + "\"");
    gpipe_ = schedule == "gpipe";
    const memplan_model& model = options.model();
    if (size_ > 1 && !model.has_architecture)
      options.fail("size", "needs the model's layers; give the architecture or a preset in [model]");
    if (size_ > model.layers && model.has_architecture)
      options.fail("size", std::to_string(size_) + " stages exceed the model's " + std::to_string(model.layers) +
                               " layers");
  }

  void apply(memplan::sdk::Context& ctx) {
    ctx.set_attr(MEMPLAN_ATTR_RANKS_PIPELINE, size_);
    if (size_ == 1) return;
    const memplan_model& model = ctx.model();
    const int64_t stage_layers = (model.layers + size_ - 1) / size_;
    const int64_t first_layer = last_stage_ ? model.layers - stage_layers : 0;
    const int64_t microbatches = ctx.workload().grad_accum;
    const int64_t inflight = gpipe_ ? microbatches : (last_stage_ ? 1 : std::min(size_, microbatches));
    ctx.set_attr(MEMPLAN_ATTR_STAGE_LAYERS, stage_layers);
    ctx.set_attr(MEMPLAN_ATTR_INFLIGHT_MICROBATCHES, inflight);

    for (size_t i = 0; i < ctx.size();) {
      memplan::sdk::Item item = ctx.item(i);
      if (!on_this_stage(item, model)) {
        ctx.remove(i);
        continue;
      }
      if (item.layer >= 0) {
        // Keep the part of the item's layer range that falls on this stage.
        const int64_t begin = std::max<int64_t>(item.layer, first_layer);
        const int64_t end = std::min<int64_t>(item.layer + item.count, first_layer + stage_layers);
        if (end <= begin) {
          ctx.remove(i);
          continue;
        }
        item.layer = static_cast<int32_t>(begin);
        item.count = static_cast<uint32_t>(end - begin);
        ctx.set(i, item);
      }
      ++i;
    }
  }

 private:
  bool on_this_stage(const memplan::sdk::Item& item, const memplan_model& model) const {
    if (item.layer >= 0) return true;
    switch (item.param_class) {
      case ParamClass::embedding: return !last_stage_ || model.tied_embeddings;
      case ParamClass::position_embedding: return !last_stage_;
      case ParamClass::lm_head: return last_stage_;
      case ParamClass::norm: return last_stage_;  // the final norm; layer norms have a layer index
      default: return true;
    }
  }

  int64_t size_;
  bool last_stage_ = false;
  bool gpipe_ = false;
};

}  // namespace

MEMPLAN_PLUGIN(PipelineParallelStrategy)
