// 'pipeline-parallel': p pipeline stages. The report is for one stage, the
// first by default (Korthikanti et al. 2022, section 4.2.3: under 1F1B the
// first stage holds the most activations). The first stage also holds the
// token (and position) embedding; the last holds the final norm and the LM
// head, and, when embeddings are tied, its own copy of the embedding
// (Megatron-LM keeps one on each end and all-reduces their gradients).
//
// Layers per stage: ceil(L / p) by default (a serving engine's own partition with
// `remainder`, 1.7.0); with `first_stage_layers` and/or
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
//
// Send/receive overlap (layout.pipeline_p2p_overlap, the default of
// transformer-step's pipeline_comm_overlap): Megatron-LM overlaps the
// pipeline's sends and receives with compute in the interleaved schedule's
// steady state (overlap_p2p_comm, on by default since 4eeff55d1f, 2023-10-12:
// megatron/training/arguments.py @ d98e8a64ddf3, --no-overlap-p2p-communication
// turns it off, and batch_p2p_comm = not overlap_p2p_comm), not in its warm-up
// and flush (overlap_p2p_comm_warmup_flush, off by default), and never
// without interleaving (arguments.py sets it False; schedules.py's
// non-interleaved schedule refuses it). Of the M m chunk passes, w =
// min(2 (p - r - 1) + (m - 1) p, M m) are warm-up (schedules.py,
// get_schedule_table's num_warmup_microbatches, microbatch_group_size_per_vp_stage
// = p by default) and as many backward passes are flush, so the overlapped
// fraction of the stage's transfers is (M m - w) / (M m); 0 unless interleaved.
//
// runtime = "torch" (version 1.5.0): torch.distributed.pipelining's own
// tensors, declared as counts of micro-batches for the activation model to
// size (torch/distributed/pipelining/stage.py and schedules.py, torch 2.6):
// _prepare_forward_infra allocates a receive buffer for every micro-batch's
// stage input (not on the first stage) and _prepare_backward_infra one for
// every micro-batch's output gradient (not on the last), kept from step to
// step; stage_backward (_backward.py) reads the inputs' gradients from the
// receive buffers' .grad, which clear_runtime_states frees only at the next
// step's start (until pytorch#164329, 2025-10); forward_one_chunk appends
// every micro-batch's output to output_chunks, also freed at the next step's
// start (on every stage until pytorch#153383, 2025-05, which keeps the last
// stage's only: stage_outputs = "every" or "last"); and step() returns
// merge_chunks(output_chunks) on the last stage, a torch.cat of its outputs.
#include <memplan/sdk.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

namespace {

using memplan::sdk::ParamClass;

constexpr std::array<memplan_option_spec, 10> kOptions{{
    // "@layout": a size `memplan explain` may lay the job out again with (docs/plugin-abi.md, "Option specs").
    {"size", MEMPLAN_OPTION_INT, "pipeline stages p", "1", "@layout"},
    {"stage", MEMPLAN_OPTION_STRING, "which stage to report: \"first\" or \"last\"", "\"first\"", nullptr},
    {"stage_rank", MEMPLAN_OPTION_INT,
     "the reported stage's rank, 0 (first) to size - 1 (last), instead of stage: a middle stage holds neither the "
     "embedding nor the LM head",
     "0", nullptr},
    {"schedule", MEMPLAN_OPTION_STRING, "\"1f1b\" or \"gpipe\"", "\"1f1b\"", nullptr},
    {"virtual_stages", MEMPLAN_OPTION_INT,
     "model chunks per stage for Megatron-LM's interleaved 1F1B schedule (virtual_pipeline_model_parallel_size)",
     "1 (not interleaved)", nullptr},
    {"first_stage_layers", MEMPLAN_OPTION_INT,
     "layers on the first stage (Megatron-LM's decoder_first_pipeline_num_layers)", "an even share", nullptr},
    {"last_stage_layers", MEMPLAN_OPTION_INT,
     "layers on the last stage (Megatron-LM's decoder_last_pipeline_num_layers)", "an even share", nullptr},
    {"remainder", MEMPLAN_OPTION_STRING,
     "where the layers go when the stages do not divide them: \"ceil\" (the reported stage holds ceil(L / p), "
     "the most any stage can), \"last\" (L // p each, the rest on the last stage: vLLM before 0.8) or "
     "\"before-last\" (L // p each, one more on each stage before the last, from the second-to-last back: vLLM "
     "from 0.8, get_pp_indices)",
     "\"ceil\"", nullptr},
    {"runtime", MEMPLAN_OPTION_STRING,
     "whose pipeline runs the schedule: \"megatron\" (its send/receive tensors are not modelled) or \"torch\" "
     "(torch.distributed.pipelining: a receive buffer per micro-batch for the stage's inputs and for its outputs' "
     "gradients, the inputs' gradients and the outputs kept to the step's end, the last stage's outputs merged)",
     "\"megatron\"", nullptr},
    {"stage_outputs", MEMPLAN_OPTION_STRING,
     "runtime \"torch\": which stages keep every micro-batch's output to the next step: \"last\" (torch 2.8 "
     "on, pytorch#153383) or \"every\" (torch 2.7 and before)",
     "\"last\"", nullptr},
}};

class PipelineParallelStrategy {
 public:
  // apply() reads nothing of the workload: the schedule's figures depend on
  // grad_accum, which no evaluation changes, and are computed in the constructor.
  static constexpr memplan::sdk::PluginInfo info{
      "pipeline-parallel", "1.7.0",
      "Pipeline parallelism (1F1B, interleaved 1F1B or GPipe; uneven end stages), reporting one stage",
      memplan::sdk::Kind::strategy, memplan::sdk::Phase::layout, memplan::sdk::Reads::grad_accum};
  static std::span<const memplan_option_spec> options() { return kOptions; }

  explicit PipelineParallelStrategy(memplan::sdk::Options& options)
      : size_(options.positive_integer("size", 1)),
        virtual_stages_(options.positive_integer("virtual_stages", 1)),
        ranks_attr_(options.attribute(MEMPLAN_ATTR_RANKS_PIPELINE)),
        has_embedding_attr_(options.attribute(MEMPLAN_ATTR_STAGE_HAS_EMBEDDING)),
        has_lm_head_attr_(options.attribute(MEMPLAN_ATTR_STAGE_HAS_LM_HEAD)),
        stage_layers_attr_(options.attribute(MEMPLAN_ATTR_STAGE_LAYERS)),
        inflight_attr_(options.attribute(MEMPLAN_ATTR_INFLIGHT_MICROBATCHES)),
        activation_factor_attr_(options.attribute(MEMPLAN_ATTR_ACTIVATION_FACTOR)),
        p2p_overlap_attr_(options.attribute(MEMPLAN_ATTR_PIPELINE_P2P_OVERLAP)),
        chunks_attr_(options.attribute(MEMPLAN_ATTR_PIPELINE_CHUNKS)),
        input_buffers_attr_(options.attribute(MEMPLAN_ATTR_PIPELINE_INPUT_BUFFERS)),
        grad_buffers_attr_(options.attribute(MEMPLAN_ATTR_PIPELINE_GRAD_BUFFERS)),
        input_grads_attr_(options.attribute(MEMPLAN_ATTR_PIPELINE_INPUT_GRADS)),
        kept_outputs_attr_(options.attribute(MEMPLAN_ATTR_PIPELINE_KEPT_OUTPUTS)),
        merged_outputs_attr_(options.attribute(MEMPLAN_ATTR_PIPELINE_MERGED_OUTPUTS)),
        bubble_name_(options.intern("pipeline_bubble")) {
    const std::string stage = options.string("stage").value_or("first");
    if (stage != "first" && stage != "last") options.fail("stage", "must be \"first\" or \"last\", not \"" + stage + "\"");
    rank_ = stage == "last" ? size_ - 1 : 0;
    if (const std::optional<int64_t> rank = options.integer("stage_rank")) {
      if (options.string("stage"))
        options.fail("stage_rank", "names the reported stage a second time; give stage or stage_rank");
      if (*rank < 0 || *rank >= size_)
        options.fail("stage_rank", "must be a stage of the pipeline, 0 to " + std::to_string(size_ - 1) + " (size " +
                                       std::to_string(size_) + "), got " + std::to_string(*rank));
      rank_ = *rank;
    }
    const std::string schedule = options.string("schedule").value_or("1f1b");
    if (schedule != "1f1b" && schedule != "gpipe")
      options.fail("schedule", "must be \"1f1b\" or \"gpipe\", not \"" + schedule + "\"");
    gpipe_ = schedule == "gpipe";
    const std::string runtime = options.string("runtime").value_or("megatron");
    if (runtime != "megatron" && runtime != "torch")
      options.fail("runtime", "must be \"megatron\" or \"torch\", not \"" + runtime + "\"");
    torch_runtime_ = runtime == "torch";
    const std::string outputs = options.string("stage_outputs").value_or("last");
    if (outputs != "last" && outputs != "every")
      options.fail("stage_outputs", "must be \"last\" or \"every\", not \"" + outputs + "\"");
    if (options.string("stage_outputs") && !torch_runtime_)
      options.fail("stage_outputs", "describes torch.distributed.pipelining; it needs runtime = \"torch\"");
    every_stage_outputs_ = outputs == "every";
    const memplan_model& model = options.model();
    tied_embeddings_ = model.tied_embeddings != 0;
    if (size_ > 1 && !model.has_architecture)
      options.fail("size", "needs the model's layers; give the architecture or a preset in [model]");
    if (size_ > model.layers && model.has_architecture)
      options.fail("size", std::to_string(size_) + " stages exceed the model's " + std::to_string(model.layers) +
                               " layers");
    if (virtual_stages_ > 1 && size_ == 1)
      options.fail("virtual_stages", "interleaves the stages of a pipeline; it needs size > 1");
    if (virtual_stages_ > 1 && gpipe_)
      options.fail("virtual_stages", "is Megatron-LM's interleaved 1F1B schedule; it needs schedule = \"1f1b\"");
    if (virtual_stages_ > 1 && torch_runtime_)
      options.fail("runtime", "\"torch\" models one stage per rank; the buffers of virtual_stages > 1 (each "
                              "model chunk's own) are not modelled: leave runtime \"megatron\" there");

    std::optional<int64_t> first = read_layers(options, "first_stage_layers");
    std::optional<int64_t> last = read_layers(options, "last_stage_layers");
    if (size_ == 1) return;
    const int64_t layers = model.layers;
    int64_t first_layers = 0;
    int64_t last_layers = 0;
    int64_t middle_layers = 0;  // each stage between the ends
    const std::string remainder = options.string("remainder").value_or("ceil");
    if (remainder != "ceil" && remainder != "last" && remainder != "before-last")
      options.fail("remainder", "is \"" + remainder + "\"; use \"ceil\", \"last\" or \"before-last\"");
    if (remainder != "ceil" && (first || last))
      options.fail("remainder", "places the layers the stages do not divide, but first_stage_layers or "
                                "last_stage_layers places them already: give one or the other");
    // The serving engine's own partition where the stages do not divide the layers (empty otherwise).
    const std::vector<int64_t> partitions =
        first || last || remainder == "ceil" || layers % size_ == 0 ? std::vector<int64_t>{}
                                                                     : engine_partition(layers, remainder == "last");
    if (!first && !last) {
      // Even split; when p does not divide L the reported stage gets ceil(L / p) (unless partitioned above).
      first_layers = last_layers = middle_layers = (layers + size_ - 1) / size_;
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
      first_layers = first.value_or(share);
      last_layers = last.value_or(share);
      middle_layers = share;
    }
    // A middle stage r holds its share after the first stage's layers and the r - 1 middle stages before it
    // (never past the last stage's start).
    if (!partitions.empty()) {
      stage_layers_ = partitions[static_cast<size_t>(rank_)];
      first_layer_ = 0;
      for (int64_t r = 0; r < rank_; ++r) first_layer_ += partitions[static_cast<size_t>(r)];
    } else if (first_stage()) {
      stage_layers_ = first_layers;
      first_layer_ = 0;
    } else if (last_stage()) {
      stage_layers_ = last_layers;
      first_layer_ = layers - last_layers;
    } else {
      stage_layers_ = middle_layers;
      first_layer_ = std::min(first_layers + (rank_ - 1) * middle_layers, layers - last_layers - middle_layers);
    }
    if (virtual_stages_ > 1 && stage_layers_ % virtual_stages_ != 0)
      options.fail("virtual_stages", (first_stage()  ? std::string("the first stage's ")
                                      : last_stage() ? std::string("the last stage's ")
                                                     : "stage " + std::to_string(rank_) + "'s ") +
                                         std::to_string(stage_layers_) + " layers do not split into " +
                                         std::to_string(virtual_stages_) +
                                         " model chunks of equal size; choose a divisor of the stage's layers");
    schedule_facts(options.workload().grad_accum);
    microbatches_ = std::max<int64_t>(options.workload().grad_accum, 1);
    // The bubble: each stage idles for p - 1 micro-batch passes of the
    // pipeline's fill and drain, a fraction (p - 1) / m of the m micro-batches'
    // compute under GPipe and 1F1B (Narayanan et al. 2021, arXiv 2104.04473,
    // section 2.2.1), (p - 1) / (v m) with v model chunks per stage interleaved
    // (section 2.2.2).
    const double microbatches = static_cast<double>(std::max<int64_t>(options.workload().grad_accum, 1));
    bubble_ = static_cast<double>(size_ - 1) / (static_cast<double>(virtual_stages_) * microbatches);
  }

  void apply(memplan::sdk::Context& ctx) {
    ctx.set_attr(ranks_attr_, size_);
    // The embedding's activations live on the first stage, the logits' on the last.
    ctx.set_attr(has_embedding_attr_, first_stage() ? 1 : 0);
    ctx.set_attr(has_lm_head_attr_, last_stage() ? 1 : 0);
    if (size_ == 1) return;
    ctx.set_attr(stage_layers_attr_, stage_layers_);
    ctx.set_attr(inflight_attr_, inflight_);
    if (torch_runtime_) {
      // Counted in micro-batches (M = grad_accum); the activation model sizes them.
      const int64_t m = microbatches_;
      ctx.set_attr(input_buffers_attr_, first_stage() ? 0 : m);
      ctx.set_attr(grad_buffers_attr_, last_stage() ? 0 : m);
      ctx.set_attr(input_grads_attr_, first_stage() ? 0 : m);
      ctx.set_attr(kept_outputs_attr_, every_stage_outputs_ || last_stage() ? m : 0);
      ctx.set_attr(merged_outputs_attr_, last_stage() ? m : 0);
    }
    if (virtual_stages_ > 1) {
      ctx.set_attr(activation_factor_attr_, activation_factor_);
      ctx.set_attr(p2p_overlap_attr_, p2p_overlap_);
      ctx.set_attr(chunks_attr_, virtual_stages_);
    }
    if (ctx.training())
      ctx.add_work(memplan::sdk::Work{.name = bubble_name_, .kind = memplan::sdk::WorkKind::bubble, .amount = bubble_});

    // Removing an item invalidates the array: take it again, and go on at the same index.
    memplan::sdk::Items items = ctx.items();
    for (size_t i = 0; i < items.size();) {
      if (keep_stage_part(items[i])) {
        ++i;
        continue;
      }
      ctx.remove(i);
      items = ctx.items();
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

  // The micro-batches the reported stage holds at once, and for interleaving
  // the ratio of chunk passes to them. They depend on grad_accum (the
  // schedule's micro-batches), which a scenario fixes, so they are computed once.
  void schedule_facts(int64_t microbatches) {
    inflight_ = gpipe_ ? microbatches : std::min(size_ - rank_, microbatches);
    if (virtual_stages_ == 1) return;
    // Chunk passes (stage_layers / m layers each) held at the peak of the
    // interleaved schedule, relative to the plain schedule's in-flight micro-batches.
    const int64_t m = virtual_stages_;
    // The warm-up's forward chunk passes on this rank (Megatron-LM's schedules.py): 2 (p - r - 1) + (m - 1) p.
    const int64_t warmup_passes = 2 * (size_ - rank_ - 1) + (m - 1) * size_;
    const int64_t chunks = std::min(warmup_passes + 1, microbatches * m);
    // Megatron-LM's default send/receive overlap: the steady state's share of the chunk passes.
    const int64_t passes = std::max<int64_t>(microbatches, 1) * m;
    const int64_t warmup = std::min(warmup_passes, passes);
    p2p_overlap_ = static_cast<double>(passes - warmup) / static_cast<double>(passes);
    const double held = static_cast<double>(chunks);
    const double plain = static_cast<double>(m * inflight_);
    // The ratio rounded down to a double (1 + 7/24 has no exact binary form):
    // never above the true ratio, so the activation model's per-instance
    // ceil lands on the exact byte count when that is a whole number.
    activation_factor_ = held / plain;
    if (std::fma(activation_factor_, plain, -held) > 0) activation_factor_ = std::nextafter(activation_factor_, 0.0);
  }

  // Cuts `item` to the part of its layer range on the reported stage; false
  // when none of it is there (the caller removes it).
  bool keep_stage_part(memplan::sdk::ItemRef item) const {
    if (item.layer() < 0) return outside_layers_on_stage(item.param_class());
    const int64_t begin = std::max<int64_t>(item.layer(), first_layer_);
    const int64_t end = std::min<int64_t>(item.layer() + item.count(), first_layer_ + stage_layers_);
    if (end <= begin) return false;
    item.set_layer(static_cast<int32_t>(begin));
    item.set_count(static_cast<uint32_t>(end - begin));
    return true;
  }

  // Whether an item outside the layers sits on the reported stage.
  bool outside_layers_on_stage(ParamClass param_class) const {
    switch (param_class) {
      case ParamClass::embedding: return first_stage() || (last_stage() && tied_embeddings_);
      case ParamClass::position_embedding: return first_stage();
      case ParamClass::lm_head: return last_stage();
      case ParamClass::final_norm: return last_stage();
      case ParamClass::norm: return first_stage();  // outside the layers: the embedding's norm (BERT)
      default: return true;
    }
  }

  int64_t size_;
  int64_t virtual_stages_;
  memplan::sdk::Attribute ranks_attr_;
  memplan::sdk::Attribute has_embedding_attr_;
  memplan::sdk::Attribute has_lm_head_attr_;
  memplan::sdk::Attribute stage_layers_attr_;
  memplan::sdk::Attribute inflight_attr_;
  memplan::sdk::Attribute activation_factor_attr_;
  memplan::sdk::Attribute p2p_overlap_attr_;
  memplan::sdk::Attribute chunks_attr_;
  memplan::sdk::Attribute input_buffers_attr_, grad_buffers_attr_, input_grads_attr_, kept_outputs_attr_,
      merged_outputs_attr_;  // runtime "torch"
  memplan::sdk::Name bubble_name_;
  double bubble_ = 0;  // idle fraction of the forward and backward compute
  // vLLM's layers per stage (vllm/distributed/utils.py get_pp_indices): L // p each, and the rest on the last
  // stage (before PR #13839, @ 145944cb9^) or one each on the stages before it, from the second-to-last back
  // (partitions[-i] += 1 for i in 2 .. rest + 1, from 145944cb9).
  std::vector<int64_t> engine_partition(int64_t layers, bool rest_on_last) const {
    std::vector<int64_t> partitions(static_cast<size_t>(size_), layers / size_);
    const int64_t rest = layers % size_;
    if (rest_on_last) partitions.back() += rest;
    else
      for (int64_t i = 2; i < rest + 2; ++i) partitions[static_cast<size_t>(size_ - i)] += 1;
    return partitions;
  }

  int64_t rank_ = 0;  // the reported stage: 0 the first, size_ - 1 the last
  bool first_stage() const { return rank_ == 0; }
  bool last_stage() const { return rank_ == size_ - 1; }
  bool gpipe_ = false;
  bool tied_embeddings_ = false;
  bool torch_runtime_ = false;        // runtime = "torch"
  bool every_stage_outputs_ = false;  // stage_outputs = "every"
  int64_t microbatches_ = 1;          // grad_accum: the schedule's micro-batches
  int64_t stage_layers_ = 0;  // layers on the reported stage
  int64_t first_layer_ = 0;   // its first layer
  int64_t inflight_ = 0;      // layout.inflight_microbatches
  double activation_factor_ = 1;  // layout.activation_factor, with virtual_stages > 1
  double p2p_overlap_ = 0;        // layout.pipeline_p2p_overlap, with virtual_stages > 1
};

}  // namespace

MEMPLAN_PLUGIN(PipelineParallelStrategy)
