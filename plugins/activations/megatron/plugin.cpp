// 'megatron': training activations per transformer layer from Korthikanti et
// al. 2022 (see transformer_activations.hpp), for the layers and in-flight
// micro-batches of the reported pipeline stage, plus the activations outside
// the layers (section 4.3): the embedding dropout's mask on the stage that
// holds the embedding; the final norm, the fp32 logits and the loss's saved
// softmax on the stage that holds the LM head. Reads the layout the strategies
// declared: tensor-parallel ranks, sequence parallelism, stage layers and
// contents, in-flight micro-batches and the recompute policy.
#include <memplan/sdk.hpp>

#include <algorithm>
#include <array>
#include <string>

#include "transformer_activations.hpp"

namespace {

using memplan::plugins::ActivationSettings;
using memplan::plugins::CrossEntropy;
using memplan::plugins::LayerImplementation;
using memplan::plugins::RecomputePolicy;
using memplan::plugins::TransformerShape;

constexpr std::array<memplan_option_spec, 7> kOptions{{
    {"flash_attention", MEMPLAN_OPTION_BOOL, "attention keeps no s x s score matrices (FlashAttention)", "false"},
    {"dropout", MEMPLAN_OPTION_BOOL, "dropout layers store 1-byte masks (Korthikanti et al. assume so)", "true"},
    {"cross_entropy", MEMPLAN_OPTION_STRING,
     "the loss path: \"unfused\" (fp32 logits and the loss's fp32 softmax both kept), \"vocab-parallel\" "
     "(Megatron-LM: softmax in place in an fp32 copy of the logits), \"upcast-shift-copy\" (Hugging Face "
     "transformers <= 4.45), \"upcast-in-loss-shift-copy\" (transformers 4.46-4.48), \"upcast-in-loss\" "
     "(transformers >= 4.49), \"upcast\" (fp32 logits held while the loss runs: torchtune), \"chunked\" (chunk by "
     "chunk: torchtune CEWithChunkedOutputLoss)",
     "\"unfused\""},
    {"loss_chunks", MEMPLAN_OPTION_INT, "chunks of the chunked cross entropy", "8 (torchtune's num_output_chunks)"},
    {"layer", MEMPLAN_OPTION_STRING,
     "\"fused\": Megatron-LM / Transformer Engine layers (Korthikanti et al.'s tensors); \"eager\": PyTorch "
     "modules as Hugging Face Transformers and torchtune write them (fp32 RMSNorm inputs, K/V repeated to every "
     "query head, SwiGLU's product, inputs kept only for trained weights)",
     "\"fused\""},
    {"repeat_kv", MEMPLAN_OPTION_BOOL,
     "eager layers: K and V are copied to every query head before attention (transformers' repeat_kv, torchtune's "
     "expand; false where SDPA's enable_gqa reads the kv heads directly)",
     "true"},
    {"offload", MEMPLAN_OPTION_BOOL,
     "move the layers' stored activations to host memory during forward and back in backward (torchtune's "
     "enable_activation_offloading): the GPU keeps two layers' worth, the one in flight and the next",
     "false"},
}};

struct LossMode {
  const char* name;
  CrossEntropy mode;
};
constexpr std::array<LossMode, 7> kLossModes{{
    {"unfused", CrossEntropy::unfused},
    {"vocab-parallel", CrossEntropy::vocab_parallel},
    {"upcast-shift-copy", CrossEntropy::upcast_shift_copy},
    {"upcast-in-loss-shift-copy", CrossEntropy::upcast_in_loss_shift_copy},
    {"upcast-in-loss", CrossEntropy::upcast_in_loss},
    {"upcast", CrossEntropy::upcast},
    {"chunked", CrossEntropy::chunked},
}};

class MegatronActivations {
 public:
  static constexpr memplan::sdk::PluginInfo info{
      "megatron", "1.1.0",
      "Transformer activations (Korthikanti et al. 2022, Table 2 per layer), embedding dropout, final norm and logits",
      memplan::sdk::Kind::activations, memplan::sdk::Phase::activations};
  static std::span<const memplan_option_spec> options() { return kOptions; }

  explicit MegatronActivations(memplan::sdk::Options& options)
      : flash_attention_(options.boolean("flash_attention").value_or(false)),
        dropout_(options.boolean("dropout").value_or(true)) {
    const std::string loss = options.string("cross_entropy").value_or("unfused");
    bool known = false;
    std::string names;
    for (const LossMode& mode : kLossModes) {
      names += std::string(names.empty() ? "" : ", ") + "\"" + mode.name + "\"";
      if (loss == mode.name) {
        cross_entropy_ = mode.mode;
        known = true;
      }
    }
    if (!known) options.fail("cross_entropy", "must be one of " + names + ", not \"" + loss + "\"");
    loss_chunks_ = static_cast<double>(options.positive_integer("loss_chunks", 8));
    if (options.integer("loss_chunks") && cross_entropy_ != CrossEntropy::chunked)
      options.fail("loss_chunks", "applies to cross_entropy = \"chunked\" only");
    const std::string layer = options.string("layer").value_or("fused");
    if (layer != "fused" && layer != "eager")
      options.fail("layer", "must be \"fused\" or \"eager\", not \"" + layer + "\"");
    layer_ = layer == "eager" ? LayerImplementation::eager : LayerImplementation::fused;
    repeat_kv_ = options.boolean("repeat_kv").value_or(true);
    offload_ = options.boolean("offload").value_or(false);
    if (options.boolean("repeat_kv") && layer_ != LayerImplementation::eager)
      options.fail("repeat_kv", "describes eager layers; it needs layer = \"eager\"");
    if (!options.model().has_architecture)
      options.fail("needs the model's architecture (layers, hidden, heads) but the scenario gives only params; use "
                   "a preset or an inline architecture in [model], or [activations] use = \"none\"");
    if (!options.training())
      options.fail("models training (activations kept for backward) but the scenario has mode = \"infer\"");
    if (options.workload().seq_len <= 0)
      options.fail("needs the sequence length: set [batch] seq_len");
  }

  void apply(memplan::sdk::Context& ctx) {
    const memplan_model& model = ctx.model();
    const memplan_workload& workload = ctx.workload();
    TransformerShape shape;
    shape.seq = static_cast<double>(workload.seq_len);
    shape.batch = static_cast<double>(workload.micro_batch);
    shape.hidden = static_cast<double>(model.hidden);
    shape.heads = static_cast<double>(model.heads);
    shape.q_width = static_cast<double>(model.heads * model.head_dim);
    shape.kv_width = static_cast<double>(model.kv_heads * model.head_dim);
    shape.kv_heads = static_cast<double>(model.kv_heads);
    shape.gated = model.gated_mlp != 0;
    if (model.experts > 0) {
      shape.ffn = static_cast<double>(model.expert_ffn_hidden);
      shape.top_k = static_cast<double>(model.experts_top_k);
      shape.experts = static_cast<double>(model.experts);
    } else {
      shape.ffn = static_cast<double>(model.ffn_hidden);
    }

    ActivationSettings settings;
    settings.bytes = ctx.required_attr_double(MEMPLAN_ATTR_DTYPE_ACTIVATIONS);
    settings.dropout = dropout_;
    settings.flash_attention = flash_attention_;
    settings.tensor_parallel = static_cast<double>(ctx.attr_int(MEMPLAN_ATTR_RANKS_TENSOR, 1));
    settings.sequence_parallel = ctx.attr_int(MEMPLAN_ATTR_SEQUENCE_PARALLEL, 0) != 0;
    const std::string_view policy = ctx.attr_string(MEMPLAN_ATTR_RECOMPUTE_POLICY, "none");
    settings.recompute = policy == "full"        ? RecomputePolicy::full
                         : policy == "selective" ? RecomputePolicy::selective
                         : policy == "op"        ? RecomputePolicy::per_op
                                                 : RecomputePolicy::none;
    settings.layer = layer_;
    if (layer_ == LayerImplementation::eager) settings.eager = eager_layer(ctx, model);

    const int64_t stage_layers = ctx.attr_int(MEMPLAN_ATTR_STAGE_LAYERS, model.layers);
    const int64_t inflight = ctx.attr_int(MEMPLAN_ATTR_INFLIGHT_MICROBATCHES, 1);
    // Context parallelism splits every layer's sequence over ranks.context ranks; an
    // interleaved pipeline schedule scales the stage's stored activations by
    // layout.activation_factor (Korthikanti et al. 2022, section 4.2.3).
    const double context = static_cast<double>(ctx.attr_int(MEMPLAN_ATTR_RANKS_CONTEXT, 1));
    const double factor = ctx.attr_double(MEMPLAN_ATTR_ACTIVATION_FACTOR, 1.0);

    memplan::sdk::Item stored;
    stored.name = "activations";
    stored.role = memplan::sdk::Role::activations;
    stored.lifetime = memplan::sdk::Lifetime::activation;
    stored.layer = first_layer(ctx);
    stored.count = static_cast<uint32_t>(stage_layers);
    // Bytes per layer for all in-flight micro-batches, as bytes (1 per element).
    stored.elements =
        memplan::plugins::stored_bytes_per_layer(shape, settings) * static_cast<double>(inflight) * factor / context;
    stored.bytes_per_element = 1;
    if (offload_) {
      // torchtune training/_activation_offloading.py (OffloadActivations): each
      // saved tensor is copied to pinned host memory on a side stream as forward
      // goes, and in backward the next layer's tensors are brought back while
      // the current one runs: the GPU holds the layer in flight and the one
      // being copied, in forward and in backward.
      memplan::sdk::Item window = stored;
      window.name = "activations.offload_window";
      window.layer = -1;
      window.count = 1;
      window.elements = stored.elements * std::min<double>(2, static_cast<double>(stored.count));
      window.lifetime = memplan::sdk::Lifetime::transient_forward;
      ctx.add(window);
      window.lifetime = memplan::sdk::Lifetime::transient_backward;
      ctx.add(window);
      stored.device = memplan::sdk::Device::cpu;
    }
    ctx.add(stored);

    const double working_set = memplan::plugins::recompute_working_set(shape, settings) / context;
    if (working_set > 0) {
      memplan::sdk::Item recompute = stored;
      recompute.name = "activations.recompute";
      recompute.lifetime = memplan::sdk::Lifetime::transient_backward;
      recompute.layer = -1;
      recompute.count = 1;
      recompute.elements = working_set;
      ctx.add(recompute);
    }

    // Weights stored in fewer than 8 bits (QLoRA's nf4 base) are dequantized
    // to the compute dtype for each matrix multiply, in forward and again for
    // backward's input gradient (bitsandbytes autograd/_functions.py,
    // MatMul4Bit: dequantize_4bit before the matmul; the 16-bit weight is a
    // temporary, not saved): the largest such matrix is alive at both high points.
    const double dequantized = largest_packed_matrix(ctx, model, settings.tensor_parallel) * settings.bytes;
    add_outside(ctx, "activations.dequantized_weight", dequantized, memplan::sdk::Lifetime::transient_forward);
    add_outside(ctx, "activations.dequantized_weight", dequantized, memplan::sdk::Lifetime::transient_backward);

    // Outside the layers (not recomputed under any policy), for the same
    // micro-batches in flight as the stage's layers. A single stage holds both
    // ends; pipeline-parallel says which end the reported stage holds.
    const memplan::plugins::OutputActivations outside = memplan::plugins::output_activations(
        {shape.seq, shape.batch, shape.hidden, static_cast<double>(model.vocab)}, settings, cross_entropy_,
        loss_chunks_);
    const double scale = static_cast<double>(inflight) * factor / context;
    if (ctx.attr_int(MEMPLAN_ATTR_STAGE_HAS_EMBEDDING, 1) != 0)
      add_outside(ctx, "activations.embedding_dropout", outside.embedding_dropout * scale);
    if (ctx.attr_int(MEMPLAN_ATTR_STAGE_HAS_LM_HEAD, 1) != 0) {
      // The head sits in the last model chunk only: the interleaved schedule's
      // factor (extra chunks in flight) does not apply to it.
      const double head_scale = static_cast<double>(inflight) / context;
      const HeadWeights head = scan_head_weights(ctx);
      if (head.final_norm) add_outside(ctx, "activations.final_norm", outside.final_norm * head_scale);
      // Logits need an output projection: an LM head, or the embedding reused
      // as one (tied). An encoder without a head (BERT's output_head = "none")
      // computes none.
      if (head.lm_head || (model.tied_embeddings != 0 && head.embedding)) {
        add_outside(ctx, "activations.logits", outside.logits * head_scale);
        add_outside(ctx, "activations.cross_entropy", outside.cross_entropy * head_scale);
        // The loss's transients belong to one micro-batch: the one whose loss is computed.
        add_outside(ctx, "activations.loss_forward", outside.loss_forward / context,
                    memplan::sdk::Lifetime::transient_forward);
        // Backward runs the loss first and frees its fp32 gradients before the
        // first layer is recomputed: the two transients never coexist, so the
        // item is what the loss adds beyond the recompute working set.
        add_outside(ctx, "activations.loss_backward", std::max(0.0, outside.loss_backward / context - working_set),
                    memplan::sdk::Lifetime::transient_backward);
      }
    }
  }

 private:
  struct HeadWeights {
    bool final_norm = false;
    bool lm_head = false;
    bool embedding = false;
  };

  // Which of the output side's weights the reported rank holds.
  static HeadWeights scan_head_weights(const memplan::sdk::Context& ctx) {
    using memplan::sdk::ParamClass;
    HeadWeights found;
    for (size_t i = 0; i < ctx.size(); ++i) {
      const memplan::sdk::Item item = ctx.item(i);
      if (item.role != memplan::sdk::Role::weights) continue;
      found.final_norm = found.final_norm || item.param_class == ParamClass::final_norm;
      found.lm_head = found.lm_head || item.param_class == ParamClass::lm_head;
      found.embedding = found.embedding || item.param_class == ParamClass::embedding;
    }
    return found;
  }

  // The first layer the reported rank holds, from the layered weights.
  static int32_t first_layer(const memplan::sdk::Context& ctx) {
    for (size_t i = 0; i < ctx.size(); ++i) {
      const memplan::sdk::Item item = ctx.item(i);
      if (item.role == memplan::sdk::Role::weights && item.layer >= 0) return item.layer;
    }
    return 0;
  }

  // Elements of the largest linear-layer matrix on the rank whose weights are
  // packed below one byte per element (0 when none is): h x the widest of the
  // query projection, the MLP's inner width (or an expert's), split t ways.
  static double largest_packed_matrix(const memplan::sdk::Context& ctx, const memplan_model& model, double t) {
    using memplan::sdk::ParamClass;
    bool packed = false;
    for (size_t i = 0; i < ctx.size() && !packed; ++i) {
      const memplan::sdk::Item item = ctx.item(i);
      packed = item.role == memplan::sdk::Role::weights && item.bytes_per_element < 1 &&
               (item.param_class == ParamClass::attention || item.param_class == ParamClass::attention_kv ||
                item.param_class == ParamClass::mlp || item.param_class == ParamClass::expert);
    }
    if (!packed) return 0;
    const double widest = static_cast<double>(
        std::max({model.heads * model.head_dim, model.ffn_hidden, model.expert_ffn_hidden}));
    return static_cast<double>(model.hidden) * widest / t;
  }

  // What the eager layers keep depends on which of their weights train and on
  // the adapters: read from the plan (the trainability plugins ran before) and
  // from the lora.* attributes the 'lora' plugin declares.
  memplan::plugins::EagerLayer eager_layer(const memplan::sdk::Context& ctx, const memplan_model& model) const {
    using memplan::sdk::ParamClass;
    memplan::plugins::EagerLayer eager;
    eager.repeat_kv = repeat_kv_ && model.kv_heads < model.heads;
    // From the model, not from the norms' sizes, which sharding plugins (phase 500) have already divided.
    eager.rms_norm = model.layer_norm == 0;
    bool any_attention = false, any_mlp = false, any_norm = false, any_adapter = false;
    eager.norms_trainable = eager.attention_trainable = eager.output_trainable = false;
    eager.mlp_trainable = eager.down_trainable = false;
    // The adapters compute in their own dtype; without adapters the activations'.
    eager.adapter_bytes = ctx.required_attr_double(MEMPLAN_ATTR_DTYPE_ACTIVATIONS);
    for (size_t i = 0; i < ctx.size(); ++i) {
      const memplan::sdk::Item item = ctx.item(i);
      if (item.role != memplan::sdk::Role::weights) continue;
      if (item.param_class == ParamClass::adapter && !any_adapter) {
        any_adapter = true;
        eager.adapter_bytes = item.bytes_per_element;
      }
      if (item.layer < 0) continue;
      switch (item.param_class) {
        case ParamClass::norm:
          any_norm = true;
          eager.norms_trainable = eager.norms_trainable || item.trainable;
          break;
        case ParamClass::attention:
        case ParamClass::attention_kv:
          any_attention = true;
          eager.attention_trainable = eager.attention_trainable || item.trainable;
          eager.output_trainable = eager.output_trainable || item.trainable;
          break;
        case ParamClass::mlp:
        case ParamClass::expert:
          any_mlp = true;
          eager.mlp_trainable = eager.mlp_trainable || item.trainable;
          eager.down_trainable = eager.down_trainable || item.trainable;
          break;
        default: break;
      }
    }
    // A model without such items (e.g. params-only) keeps the defaults: everything trains.
    if (!any_norm) eager.norms_trainable = true;
    if (!any_attention) eager.attention_trainable = eager.output_trainable = true;
    if (!any_mlp) eager.mlp_trainable = eager.down_trainable = true;
    eager.adapter_rank = ctx.attr_double(MEMPLAN_ATTR_LORA_RANK_INPUTS, 0);
    eager.adapter_inputs = ctx.attr_double(MEMPLAN_ATTR_LORA_INPUTS, 0);
    eager.adapter_distinct_inputs = ctx.attr_double(MEMPLAN_ATTR_LORA_DISTINCT_INPUTS, 0);
    eager.adapter_dropout = ctx.attr_double(MEMPLAN_ATTR_LORA_DROPOUT, 0);
    return eager;
  }

  // One stored-activation item outside the layers, when it has any bytes.
  static void add_outside(memplan::sdk::Context& ctx, const char* name, double bytes,
                          memplan::sdk::Lifetime lifetime = memplan::sdk::Lifetime::activation) {
    if (bytes <= 0) return;
    memplan::sdk::Item item;
    item.name = name;
    item.role = memplan::sdk::Role::activations;
    item.lifetime = lifetime;
    item.elements = bytes;
    item.bytes_per_element = 1;
    ctx.add(item);
  }

  bool flash_attention_;
  bool dropout_;
  CrossEntropy cross_entropy_ = CrossEntropy::unfused;
  double loss_chunks_ = 8;
  LayerImplementation layer_ = LayerImplementation::fused;
  bool repeat_kv_ = true;
  bool offload_ = false;
};

}  // namespace

MEMPLAN_PLUGIN(MegatronActivations)
