// 'transformer-step': the work of a transformer training step on the reported
// GPU under its parallel layout, as work records (ABI 1.2) from which the host
// derives the step's time, MFU and HFU (docs/step-time.md): its floating-point
// operations, and the collectives its layout needs (below). Strategies that add
// work of their own report it themselves (the pipeline's bubble, FSDP's
// parameter gathers).
//
// Counted as Megatron-LM counts a step's FLOPs (num_floating_point_operations,
// megatron/training/training.py @ d98e8a64ddf3), per GPU and from the weights
// the reported GPU holds after the layout plugins split them (phase work: after
// tensor, pipeline and expert parallelism, before sharding divides them):
//
//   matrix multiplies  2 x weight elements x tokens, for every weight that is
//                      multiplied by each token (attention and its k/v, MLP,
//                      router, LM head, adapters and other dense weights);
//                      an expert's weights see top_k / experts of the tokens
//                      of the expert-parallel group (ep x the GPU's tokens);
//                      with tied embeddings the LM head multiplies by the
//                      embedding table. Lookups and norms count nothing.
//   attention core     QK^T and softmax(QK^T) V: 2 x 2 x head_dim x the
//                      query-key pairs, per head on the GPU; causal = true
//                      counts the pairs a causal mask keeps (s(s+1)/2,
//                      Megatron-LM since it halved them; what FlashAttention
//                      computes), false all s^2 (Narayanan et al. 2021 and
//                      Korthikanti et al. 2022 count so); a sliding window
//                      keeps at most `window` keys per query. Multi-head
//                      latent attention: 2 x (q/k head width + v_head_dim)
//                      x the pairs per head (QK^T over nope + rope, the
//                      value side over v_head_dim), as the
//                      multi_latent_attention branch counts it.
//   layer kinds        the dense first layers, the routed experts and the
//                      shared experts come from the items (the inventory's
//                      mlp, moe.experts, moe.shared_expert over their layer
//                      ranges), so each layer kind counts its own weights.
//   backward           twice the forward for every trainable weight (input
//                      and weight gradients) and for the attention core;
//                      once for a frozen weight (input gradients only: LoRA's
//                      and freeze's reduced backward).
//   recomputation      recompute.policy "full": the layers' forward again;
//                      "selective": the attention core's forward again
//                      (Korthikanti et al. section 4); "op": the layers'
//                      forward minus every other matrix multiply, taken as
//                      half of the layer's multiplies. Hardware FLOPs only.
//
// Tokens per GPU: micro_batch x seq_len / context-parallel ranks. Forward and
// backward records count per micro-batch; the host multiplies by grad_accum.
//
// Collectives (ring volumes, seed 004; groups placed as Megatron-LM orders
// ranks, tensor innermost, then context, expert, data, pipeline:
// megatron/core/parallel_state.py, order "tp-cp-ep-dp-pp"), of activations in
// their dtype:
//   tensor parallel   per layer 2 all-reduces of the layer's output (t x h) in
//                     forward and 2 in backward (Shoeybi et al. 2019, section
//                     3); with sequence parallelism all-gathers and
//                     reduce-scatters of the same volume (Korthikanti et al.
//                     section 4.2.2). Group: tp ranks, stride 1.
//   context parallel  ring attention (multi-head latent attention: K of
//                     heads x head_dim and V of heads x v_head_dim): each layer passes its K and V chunk on
//                     cp - 1 times in forward, K, V and their gradients in
//                     backward. Group: cp ranks, stride tp.
//   expert parallel   per MoE layer (not the dense first layers: the layers
//                     the stage's expert items span) a dispatch and a combine all-to-all of
//                     t x top_k x h in forward, as many in backward. Group: ep
//                     ranks, stride tp x cp.
//   pipeline          the stage's output activations (t x h, / tp under
//                     sequence parallelism) sent forward and their gradient
//                     back, per micro-batch and model chunk (v of them under
//                     interleaving: layout.pipeline_chunks). Group: 2 ranks,
//                     stride tp x cp x dp.
//                     `pipeline_comm_overlap` of it hidden behind compute;
//                     by default what the pipeline's schedule declares
//                     (layout.pipeline_p2p_overlap: Megatron-LM's interleaved
//                     1F1B overlaps its steady state's transfers; 0 without
//                     interleaving, see pipeline-parallel).
//   data parallel     the trainable gradients all-reduced once per step over
//                     the data x context ranks (experts' over data x context /
//                     ep), stride tp; `gradient_reduce_overlap` of it hidden
//                     behind backward (0 by default: Megatron-LM's
//                     --overlap-grad-reduce is off unless asked for). The
//                     record is MEMPLAN_WORK_GRADIENT_REDUCTION: sharding
//                     plugins that reduce otherwise rewrite it.
// Every collective runs at `link_efficiency` of the link's peak (1: the
// datasheet's bandwidth, a lower bound on its time).
#include <memplan/dtypes.hpp>
#include <memplan/sdk.hpp>
#include <memplan/support/format.hpp>
#include <memplan/support/layout.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <optional>
#include <string>

namespace {

namespace sdk = memplan::sdk;
using sdk::ParamClass;

constexpr std::array<memplan_option_spec, 9> kOptions{{
    {"efficiency", MEMPLAN_OPTION_DOUBLE,
     "the fraction of the GPU's peak the step's FLOPs reach, in (0, 1] (a published model FLOPs utilisation of the "
     "framework on the GPU, or your measurement)",
     "not stated: the FLOPs are reported, the time is not", nullptr},
    {"math", MEMPLAN_OPTION_STRING, "the arithmetic of the matrix multiplies: fp32, tf32, bf16, fp16 or fp8",
     "from the activations' bytes per element: 4 fp32, 2 bf16, 1 fp8", nullptr},
    {"causal", MEMPLAN_OPTION_BOOL,
     "count the attention core over the query-key pairs a causal mask keeps (false: every pair, as Korthikanti et "
     "al. 2022 count)",
     "true", nullptr},
    {"link_efficiency", MEMPLAN_OPTION_DOUBLE,
     "the fraction of the links' peak bandwidth the collectives reach, in (0, 1] (NCCL's measured bus bandwidth / "
     "the link's)",
     "1: the datasheet's bandwidth", nullptr},
    {"gradient_reduce_overlap", MEMPLAN_OPTION_DOUBLE,
     "the fraction of the data-parallel gradient reduction hidden behind backward, in [0, 1]", "0", nullptr},
    {"tensor_comm_overlap", MEMPLAN_OPTION_DOUBLE,
     "the fraction of the tensor-parallel collectives hidden behind the GEMMs, in [0, 1] (Megatron-Core's "
     "tp_comm_overlap with Transformer Engine's userbuffers)",
     "0 (tp_comm_overlap is off unless asked for)", nullptr},
    {"context_comm_overlap", MEMPLAN_OPTION_DOUBLE,
     "the fraction of the context-parallel K/V exchanges hidden behind attention, in [0, 1]", "0", nullptr},
    {"expert_comm_overlap", MEMPLAN_OPTION_DOUBLE,
     "the fraction of the expert-parallel all-to-alls hidden behind other micro-batches' compute, in [0, 1] "
     "(Megatron-Core's overlap_moe_expert_parallel_comm)",
     "0 (off unless asked for)", nullptr},
    {"pipeline_comm_overlap", MEMPLAN_OPTION_DOUBLE,
     "the fraction of the pipeline's send/receive hidden behind compute, in [0, 1] (Megatron-LM's overlap_p2p_comm)",
     "the schedule's: under the interleaved 1F1B schedule (pipeline-parallel virtual_stages > 1) its steady state's "
     "share of the transfers, as Megatron-LM overlaps them by default; 0 otherwise", nullptr},
}};

// The math of a dtype name (the activations' dtype), or nullopt.
std::optional<sdk::Math> math_of(std::string_view name) {
  if (name == "bf16") return sdk::Math::bf16;
  if (name == "fp16") return sdk::Math::fp16;
  if (name == "fp32") return sdk::Math::fp32;
  if (name == "tf32") return sdk::Math::tf32;
  if (name == "fp8" || name == "e4m3" || name == "e5m2" || name == "fp8_e4m3" || name == "fp8_e5m2")
    return sdk::Math::fp8;
  return std::nullopt;
}

// The math of activations of `bytes` per element (dtype.activations): 16-bit
// ones run in bf16 (fp16 has the same peak on every GPU that has both; on one
// without bf16 units, V100 or T4, set math = "fp16").
sdk::Math math_of_bytes(double bytes) {
  if (bytes >= 4) return sdk::Math::fp32;
  if (bytes <= 1) return sdk::Math::fp8;
  return sdk::Math::bf16;
}

// Query-key pairs of one sequence of s tokens whose queries see at most
// `window` keys (0: no window), under a causal mask or not.
double attention_pairs(double s, double window, bool causal) {
  if (!causal) return s * (window > 0 ? std::min(s, window) : s);
  if (window <= 0 || window >= s) return s * (s + 1) / 2;
  // The first `window` queries see 1..window keys, the rest `window` each.
  return window * (window + 1) / 2 + (s - window) * window;
}

class TransformerStep {
 public:
  static constexpr sdk::PluginInfo info{"transformer-step", "1.3.0",
                                        "A transformer training step's FLOPs and its layout's collectives, per GPU",
                                        sdk::Kind::strategy, sdk::Phase::work, sdk::Reads::batch_and_seq_len};
  static std::span<const memplan_option_spec> options() { return kOptions; }

  explicit TransformerStep(sdk::Options& options)
      : layout_(options),
        activations_dtype_(options.attribute(MEMPLAN_ATTR_DTYPE_ACTIVATIONS)),
        gradients_dtype_(options.attribute(MEMPLAN_ATTR_DTYPE_GRADIENTS)),
        recompute_(options.attribute(MEMPLAN_ATTR_RECOMPUTE_POLICY)),
        pipeline_overlap_attr_(options.attribute(MEMPLAN_ATTR_PIPELINE_P2P_OVERLAP)),
        pipeline_chunks_attr_(options.attribute(MEMPLAN_ATTR_PIPELINE_CHUNKS)),
        names_{options.intern("matmul"),          options.intern("attention_core"),
               options.intern("recompute"),       options.intern("tensor_parallel"),
               options.intern("context_parallel"), options.intern("expert_parallel"),
               options.intern("pipeline_p2p"),    options.intern(MEMPLAN_WORK_GRADIENT_REDUCTION)} {
    if (auto efficiency = options.number("efficiency")) {
      if (!std::isfinite(*efficiency) || *efficiency <= 0 || *efficiency > 1)
        options.fail("efficiency", "must be a fraction of the peak in (0, 1], got " +
                                       memplan::support::number(*efficiency));
      efficiency_ = *efficiency;
    }
    if (auto math = options.string("math")) {
      const std::optional<sdk::Math> known = math_of(*math);
      if (!known || *math == "e4m3" || *math == "e5m2" || *math == "fp8_e4m3" || *math == "fp8_e5m2")
        options.fail("math", "must be \"fp32\", \"tf32\", \"bf16\", \"fp16\" or \"fp8\", not \"" + *math + "\"");
      math_ = *known;
    }
    causal_ = options.boolean("causal").value_or(true);
    link_efficiency_ = fraction(options, "link_efficiency", 1.0, false);
    gradient_overlap_ = fraction(options, "gradient_reduce_overlap", 0.0, true);
    tensor_overlap_ = fraction(options, "tensor_comm_overlap", 0.0, true);
    context_overlap_ = fraction(options, "context_comm_overlap", 0.0, true);
    expert_overlap_ = fraction(options, "expert_comm_overlap", 0.0, true);
    if (options.number("pipeline_comm_overlap")) pipeline_overlap_ = fraction(options, "pipeline_comm_overlap", 0.0, true);
    if (!options.model().has_architecture)
      options.fail("needs the model's layers, heads and widths to count its FLOPs, but the scenario gives only "
                   "params; give a preset or the architecture in [model]");
  }

  // An option that is a fraction: in (0, 1], or [0, 1] when zero may be.
  static double fraction(sdk::Options& options, const char* key, double fallback, bool zero) {
    const std::optional<double> value = options.number(key);
    if (!value) return fallback;
    if (!std::isfinite(*value) || *value > 1 || *value < 0 || (!zero && *value == 0))
      options.fail(key, std::string("must be a fraction in ") + (zero ? "[0, 1]" : "(0, 1]") + ", got " +
                            memplan::support::number(*value));
    return *value;
  }

  void apply(sdk::Context& ctx) {
    if (!ctx.training()) return;  // a serving pass is another computation (decode is bound by memory)
    const memplan_model& model = ctx.model();
    const memplan_workload& workload = ctx.workload();
    const memplan::support::Layout layout = layout_.read(ctx);
    const double context = static_cast<double>(layout.context);
    const double seq = static_cast<double>(workload.seq_len);
    const double tokens = static_cast<double>(workload.micro_batch) * seq / context;

    // Matrix multiplies, split into the weights that train and those that do not.
    double trainable = 0, frozen = 0, layer_matmul = 0, embedding = 0;
    // The trainable weights' elements, dense and experts': the data-parallel gradient reduction's size.
    double dense_gradients = 0, expert_gradients = 0;
    bool has_head = false, embedding_trains = false;
    // The layers the stage's experts span (a MoE model's dense first layers have none): [expert_begin, expert_end).
    int64_t expert_begin = std::numeric_limits<int64_t>::max(), expert_end = 0;
    for (const sdk::ItemRef item : ctx.items()) {
      if (item.role() == sdk::Role::weights && item.param_class() == ParamClass::expert && item.layer() >= 0) {
        expert_begin = std::min<int64_t>(expert_begin, item.layer());
        expert_end = std::max<int64_t>(expert_end, item.layer() + static_cast<int64_t>(item.count()));
      }
      if (item.role() != sdk::Role::weights || item.device() != sdk::Device::gpu || item.non_parameter()) continue;
      const double elements = item.elements() * static_cast<double>(item.count());
      if (item.trainable()) (item.param_class() == ParamClass::expert ? expert_gradients : dense_gradients) += elements;
      double flops = 0;
      switch (item.param_class()) {
        case ParamClass::embedding:
          embedding += elements;
          embedding_trains = embedding_trains || item.trainable();
          continue;
        case ParamClass::position_embedding:
        case ParamClass::norm:
        case ParamClass::final_norm: continue;
        case ParamClass::expert:
          // A rank's experts see its tokens' routed share; with an expert tensor size ETP of its own (expert-parallel
          // tensor_size) each whole-width expert takes 1 / (t / ETP) of the tokens the split ones took.
          flops = 2 * elements * tokens * static_cast<double>(model.experts_top_k) *
                  static_cast<double>(layout.expert) / static_cast<double>(std::max<int64_t>(model.experts, 1)) *
                  static_cast<double>(layout.expert_tensor) / static_cast<double>(layout.tensor);
          break;
        case ParamClass::lm_head: has_head = true; [[fallthrough]];
        default: flops = 2 * elements * tokens; break;
      }
      (item.trainable() ? trainable : frozen) += flops;
      if (item.layer() >= 0) layer_matmul += flops;
    }
    // Tied embeddings: the head multiplies by the token embedding (on the stage with the head).
    if (model.tied_embeddings && layout.stage_has_lm_head && !has_head)
      (embedding_trains ? trainable : frozen) += 2 * embedding * tokens;

    // The attention core of the stage's layers: heads split by tensor parallelism, pairs by context parallelism.
    const double layers = static_cast<double>(layout.stage_layers);
    const double head_width = static_cast<double>(model.heads * model.head_dim) / static_cast<double>(layout.tensor);
    const double window = static_cast<double>(model.sliding_window);
    double global_layers = window > 0 ? 0 : layers;
    if (window > 0 && model.global_attention_every > 0)
      global_layers = std::floor(layers / static_cast<double>(model.global_attention_every));
    const double pairs = global_layers * attention_pairs(seq, 0, causal_) +
                         (layers - global_layers) * attention_pairs(seq, window, causal_);
    double core = 4 * head_width * pairs * static_cast<double>(workload.micro_batch) / context;
    if (model.kv_lora_rank > 0) {
      // Multi-head latent attention: QK^T over the q/k head width (no-rope + rope), softmax(QK^T) V over
      // v_head_dim (Megatron-LM's num_floating_point_operations, multi_latent_attention branch).
      const double value_width =
          static_cast<double>(model.heads * model.v_head_dim) / static_cast<double>(layout.tensor);
      core = 2 * (head_width + value_width) * pairs * static_cast<double>(workload.micro_batch) / context;
    }

    const sdk::Math math = math_ ? *math_ : math_of_bytes(ctx.attr_double(activations_dtype_, 2));
    auto add = [&](sdk::Name name, sdk::Pass pass, bool model_flops, double flops) {
      ctx.add_work(sdk::Work{.name = name, .kind = sdk::WorkKind::compute, .pass = pass, .math = math,
                             .model_flops = model_flops, .amount = flops, .efficiency = efficiency_});
    };
    add(names_.matmul, sdk::Pass::forward, true, trainable + frozen);
    add(names_.core, sdk::Pass::forward, true, core);
    add(names_.matmul, sdk::Pass::backward, true, 2 * trainable + frozen);
    add(names_.core, sdk::Pass::backward, true, 2 * core);
    const std::string_view policy = ctx.attr_string(recompute_, "none");
    double again = 0;
    if (policy == "full") again = layer_matmul + core;
    else if (policy == "selective") again = core;
    else if (policy == "op") again = layer_matmul / 2;  // SDPA output is saved: the core is not redone
    add(names_.recompute, sdk::Pass::backward, false, again);
    const double gradient_bytes = ctx.attr_double(gradients_dtype_, 2);
    // MoE layers on the stage: all of them, or with dense first layers the ones its experts span.
    const double moe_layers = model.dense_layers > 0
                                  ? static_cast<double>(std::max<int64_t>(expert_end - expert_begin, 0))
                                  : static_cast<double>(layout.stage_layers);
    add_collectives(ctx, model, layout, tokens, dense_gradients * gradient_bytes, expert_gradients * gradient_bytes,
                    moe_layers);
  }

 private:
  void add_collectives(sdk::Context& ctx, const memplan_model& model, const memplan::support::Layout& layout,
                       double tokens, double dense_gradients, double expert_gradients, double moe_layers) {
    const double activation = ctx.attr_double(activations_dtype_, 2);
    const double layers = static_cast<double>(layout.stage_layers);
    const double hidden_states = tokens * static_cast<double>(model.hidden) * activation;  // t x h
    auto collective = [&](sdk::Name name, sdk::Pass pass, sdk::Collective kind, int64_t ranks, int64_t stride,
                          double bytes, double overlap) {
      ctx.add_work(sdk::Work{.name = name, .kind = sdk::WorkKind::collective, .pass = pass, .amount = bytes,
                             .efficiency = link_efficiency_, .collective = kind, .ranks = ranks, .stride = stride,
                             .overlap = overlap});
    };
    using sdk::Collective;
    using sdk::Pass;
    // Tensor parallelism: 2 per layer each way (all-gather + reduce-scatter under sequence parallelism: the
    // same volume as an all-reduce, recorded as one).
    for (Pass pass : {Pass::forward, Pass::backward})
      collective(names_.tensor, pass, Collective::all_reduce, layout.tensor, 1, 2 * layers * hidden_states,
                 tensor_overlap_);
    // Context parallelism: K and V of the GPU's chunk, passed on cp - 1 times per layer; backward also their gradients.
    double kv = tokens * 2 * static_cast<double>(model.kv_heads * model.head_dim) /
                static_cast<double>(layout.tensor) * activation;
    if (model.kv_lora_rank > 0)  // multi-head latent attention: K of heads x head_dim, V of heads x v_head_dim
      kv = tokens * static_cast<double>(model.heads * (model.head_dim + model.v_head_dim)) /
           static_cast<double>(layout.tensor) * activation;
    const double passes = static_cast<double>(layout.context - 1);
    collective(names_.context, Pass::forward, Collective::send_recv, layout.context, layout.tensor,
               layers * passes * kv, context_overlap_);
    collective(names_.context, Pass::backward, Collective::send_recv, layout.context, layout.tensor,
               2 * layers * passes * kv, context_overlap_);
    // Expert parallelism: dispatch and combine, each way.
    if (model.experts > 0)
      for (Pass pass : {Pass::forward, Pass::backward})
        collective(names_.expert, pass, Collective::all_to_all, layout.expert, layout.tensor * layout.context,
                   2 * moe_layers * hidden_states * static_cast<double>(model.experts_top_k), expert_overlap_);
    // Pipeline: the stage boundary's activations forward, their gradient back, once per model
    // chunk of the stage (each of the interleaved schedule's v chunks sends its output on).
    const double chunks = static_cast<double>(std::max<int64_t>(ctx.attr_int(pipeline_chunks_attr_, 1), 1));
    const double boundary =
        chunks * hidden_states / (layout.sequence_parallel ? static_cast<double>(layout.tensor) : 1.0);
    const int64_t pipeline_stride = layout.tensor * layout.context * layout.data;
    // Hidden: the option's fraction, else what the schedule overlaps by default.
    const double pipeline_overlap =
        pipeline_overlap_ ? *pipeline_overlap_ : std::clamp(ctx.attr_double(pipeline_overlap_attr_, 0), 0.0, 1.0);
    if (layout.pipeline > 1)
      for (Pass pass : {Pass::forward, Pass::backward})
        collective(names_.pipeline, pass, Collective::send_recv, 2, pipeline_stride, boundary, pipeline_overlap);
    // Data parallelism: the gradients once per step.
    const int64_t replicas = layout.dense_replicas();
    collective(names_.data, Pass::optimizer, Collective::all_reduce, replicas, layout.tensor, dense_gradients,
               gradient_overlap_);
    // The experts' gradients over the expert data-parallel group (Ranks::expert_replicas: data x context / expert,
    // or t x cp x dp / (expert x ETP) with an expert tensor size of its own).
    collective(names_.data, Pass::optimizer, Collective::all_reduce, layout.expert_replicas(),
               layout.tensor * layout.context * layout.expert, expert_gradients, gradient_overlap_);
  }



  memplan::support::LayoutReader layout_;
  sdk::Attribute activations_dtype_, gradients_dtype_, recompute_, pipeline_overlap_attr_, pipeline_chunks_attr_;
  struct {
    sdk::Name matmul, core, recompute, tensor, context, expert, pipeline, data;
  } names_;
  double link_efficiency_ = 1;
  double gradient_overlap_ = 0;
  double tensor_overlap_ = 0, context_overlap_ = 0, expert_overlap_ = 0;
  std::optional<double> pipeline_overlap_;  // pipeline_comm_overlap when given
  double efficiency_ = 0;
  std::optional<sdk::Math> math_;
  bool causal_ = true;
};

}  // namespace

MEMPLAN_PLUGIN(TransformerStep)
