// 'pipeline-parallel': p pipeline stages. The report is for one stage, the
// first by default (Korthikanti et al. 2022, section 4.2.3: under 1F1B the
// first stage holds the most activations). The first stage also holds the
// token (and position) embedding; the last holds the final norm and the LM
// head, and, when embeddings are tied, its own copy of the embedding
// (Megatron-LM keeps one on each end and all-reduces their gradients).
//
// Layers per stage: ceil(L / p) by default; with `first_stage_layers` and/or
// `last_stage_layers` (Megatron-LM's decoder_first_pipeline_num_layers and
// decoder_last_pipeline_num_layers) the named end stages get that many and
// the other stages share the rest evenly.
//
// Activations the reported stage holds at once, with M = grad_accum and r the
// stage's 0-based rank (0 first, p - 1 last), counted as Megatron-LM's
// schedules do (megatron/core/pipeline_parallel/schedules.py: warm-up forward
// passes, plus the one forward of the first steady 1F1B step):
//   1F1B (PipeDream-Flush):   min(p - r, M) micro-batches of the stage's layers
//   GPipe (Huang et al. 2019): all M
//   interleaved 1F1B with m = virtual_stages model chunks of the stage's
//   layers / m each: min(2 (p - r - 1) + (m - 1) p + 1, M m) chunk passes.
// The stage declares the in-flight micro-batches of the plain schedule
// (layout.inflight_microbatches) and, for interleaving, the ratio of the two
// (layout.activation_factor). On the first stage with M m >= m p + p - 1
// that ratio is 1 + (p - 1) / (p m), Korthikanti et al. 2022, section 4.2.3.
#include <memplan/sdk.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <optional>
#include <string>

namespace {

using memplan::sdk::ParamClass;

constexpr std::array<memplan_option_spec, 6> kOptions{{
    {"size", MEMPLAN_OPTION_INT, "pipeline stages p", "1"},
    {"stage", MEMPLAN_OPTION_STRING, "which stage to report: \"first\" or \"last\"", "\"first\""},
    {"schedule", MEMPLAN_OPTION_STRING, "\"1f1b\" or \"gpipe\"", "\"1f1b\""},
    {"virtual_stages", MEMPLAN_OPTION_INT,
     "model chunks per stage for Megatron-LM's interleaved 1F1B schedule (virtual_pipeline_model_parallel_size)",
     "1 (not interleaved)"},
    {"first_stage_layers", MEMPLAN_OPTION_INT,
     "layers on the first stage (Megatron-LM's decoder_first_pipeline_num_layers)", "an even share"},
    {"last_stage_layers", MEMPLAN_OPTION_INT,
     "layers on the last stage (Megatron-LM's decoder_last_pipeline_num_layers)", "an even share"},
}};

class PipelineParallelStrategy {
 public:
  static constexpr memplan::sdk::PluginInfo info{
      "pipeline-parallel", "1.1.0",
      "Pipeline parallelism (1F1B, interleaved 1F1B or GPipe; uneven end stages), reporting the first or last stage",
      memplan::sdk::Kind::strategy, memplan::sdk::Phase::layout};
  static std::span<const memplan_option_spec> options() { return kOptions; }

  explicit PipelineParallelStrategy(memplan::sdk::Options& options)
      : size_(options.positive_integer("size", 1)), virtual_stages_(options.positive_integer("virtual_stages", 1)) {
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
    if (virtual_stages_ > 1 && size_ == 1)
      options.fail("virtual_stages", "interleaves the stages of a pipeline; it needs size > 1");
    if (virtual_stages_ > 1 && gpipe_)
      options.fail("virtual_stages", "is Megatron-LM's interleaved 1F1B schedule; it needs schedule = \"1f1b\"");

    std::optional<int64_t> first = read_layers(options, "first_stage_layers");
    std::optional<int64_t> last = read_layers(options, "last_stage_layers");
    if (size_ == 1) return;
    const int64_t layers = model.layers;
    if (!first && !last) {
      // Even split; when p does not divide L the reported stage gets ceil(L / p).
      first_layers_ = last_layers_ = (layers + size_ - 1) / size_;
    } else {
      const int64_t given = first.value_or(0) + last.value_or(0);
      const int64_t others = size_ - (first ? 1 : 0) - (last ? 1 : 0);
      const int64_t rest = layers - given;
      const char* key = last ? "last_stage_layers" : "first_stage_layers";
      if (rest < others || (others == 0 && rest != 0) || (others > 0 && rest % others != 0))
        options.fail(key, describe(first, last) + (first && last ? " leave " : " leaves ") + std::to_string(rest) + " of the model's " +
                              std::to_string(layers) + " layers for the other " + std::to_string(others) +
                              " stage" + (others == 1 ? "" : "s") +
                              ", which must share them evenly with at least one layer each");
      const int64_t share = others > 0 ? rest / others : 0;
      first_layers_ = first.value_or(share);
      last_layers_ = last.value_or(share);
    }
    const int64_t reported = last_stage_ ? last_layers_ : first_layers_;
    if (virtual_stages_ > 1 && reported % virtual_stages_ != 0)
      options.fail("virtual_stages", std::string("the ") + (last_stage_ ? "last" : "first") + " stage's " +
                                         std::to_string(reported) + " layers do not split into " +
                                         std::to_string(virtual_stages_) +
                                         " model chunks of equal size; choose a divisor of the stage's layers");
  }

  void apply(memplan::sdk::Context& ctx) {
    ctx.set_attr(MEMPLAN_ATTR_RANKS_PIPELINE, size_);
    // The embedding's activations live on the first stage, the logits' on the last.
    ctx.set_attr(MEMPLAN_ATTR_STAGE_HAS_EMBEDDING, size_ == 1 || !last_stage_ ? 1 : 0);
    ctx.set_attr(MEMPLAN_ATTR_STAGE_HAS_LM_HEAD, size_ == 1 || last_stage_ ? 1 : 0);
    if (size_ == 1) return;
    const memplan_model& model = ctx.model();
    const int64_t stage_layers = last_stage_ ? last_layers_ : first_layers_;
    const int64_t first_layer = last_stage_ ? model.layers - stage_layers : 0;
    const int64_t microbatches = ctx.workload().grad_accum;
    const int64_t rank = last_stage_ ? size_ - 1 : 0;
    const int64_t inflight = gpipe_ ? microbatches : std::min(size_ - rank, microbatches);
    ctx.set_attr(MEMPLAN_ATTR_STAGE_LAYERS, stage_layers);
    ctx.set_attr(MEMPLAN_ATTR_INFLIGHT_MICROBATCHES, inflight);
    if (virtual_stages_ > 1) {
      // Chunk passes (stage_layers / m layers each) held at the peak of the
      // interleaved schedule, relative to the plain schedule's in-flight micro-batches.
      const int64_t m = virtual_stages_;
      const int64_t chunks = std::min(2 * (size_ - rank - 1) + (m - 1) * size_ + 1, microbatches * m);
      const double held = static_cast<double>(chunks);
      const double plain = static_cast<double>(m * inflight);
      // The ratio rounded down to a double (1 + 7/24 has no exact binary form):
      // never above the true ratio, so the activation model's per-instance
      // ceil lands on the exact byte count when that is a whole number.
      double factor = held / plain;
      if (std::fma(factor, plain, -held) > 0) factor = std::nextafter(factor, 0.0);
      ctx.set_attr(MEMPLAN_ATTR_ACTIVATION_FACTOR, factor);
    }

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
  static std::optional<int64_t> read_layers(memplan::sdk::Options& options, const char* key) {
    if (!options.integer(key)) return std::nullopt;
    const int64_t value = options.positive_integer(key, 1);
    if (options.integer("size").value_or(1) == 1)
      options.fail(key, "sizes a pipeline stage; it needs size > 1");
    return value;
  }

  static std::string describe(std::optional<int64_t> first, std::optional<int64_t> last) {
    std::string text;
    if (first) text = "first_stage_layers = " + std::to_string(*first);
    if (last) text += (text.empty() ? "" : " and ") + std::string("last_stage_layers = ") + std::to_string(*last);
    return text;
  }

  bool on_this_stage(const memplan::sdk::Item& item, const memplan_model& model) const {
    if (item.layer >= 0) return true;
    switch (item.param_class) {
      case ParamClass::embedding: return !last_stage_ || model.tied_embeddings;
      case ParamClass::position_embedding: return !last_stage_;
      case ParamClass::lm_head: return last_stage_;
      case ParamClass::final_norm: return last_stage_;
      case ParamClass::norm: return !last_stage_;  // outside the layers: the embedding's norm (BERT)
      default: return true;
    }
  }

  int64_t size_;
  int64_t virtual_stages_;
  bool last_stage_ = false;
  bool gpipe_ = false;
  int64_t first_layers_ = 0;
  int64_t last_layers_ = 0;
};

}  // namespace

MEMPLAN_PLUGIN(PipelineParallelStrategy)
