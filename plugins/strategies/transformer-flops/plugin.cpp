// 'transformer-flops': the floating-point work of a training step on the
// reported GPU, as work records (ABI 1.2) from which the host derives the
// step's time, MFU and HFU (docs/step-time.md).
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
//                      keeps at most `window` keys per query.
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
#include <memplan/dtypes.hpp>
#include <memplan/sdk.hpp>
#include <memplan/support/format.hpp>
#include <memplan/support/layout.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <optional>
#include <string>

namespace {

namespace sdk = memplan::sdk;
using sdk::ParamClass;

constexpr std::array<memplan_option_spec, 3> kOptions{{
    {"efficiency", MEMPLAN_OPTION_DOUBLE,
     "the fraction of the GPU's peak the step's FLOPs reach, in (0, 1] (a published model FLOPs utilisation of the "
     "framework on the GPU, or your measurement)",
     "not stated: the FLOPs are reported, the time is not"},
    {"math", MEMPLAN_OPTION_STRING, "the arithmetic of the matrix multiplies: fp32, tf32, bf16, fp16 or fp8",
     "from the activations' bytes per element: 4 fp32, 2 bf16, 1 fp8"},
    {"causal", MEMPLAN_OPTION_BOOL,
     "count the attention core over the query-key pairs a causal mask keeps (false: every pair, as Korthikanti et "
     "al. 2022 count)",
     "true"},
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

class TransformerFlops {
 public:
  static constexpr sdk::PluginInfo info{"transformer-flops", "1.0.0",
                                        "FLOPs of a transformer training step per GPU, for its time, MFU and HFU",
                                        sdk::Kind::strategy, sdk::Phase::work, sdk::Reads::batch_and_seq_len};
  static std::span<const memplan_option_spec> options() { return kOptions; }

  explicit TransformerFlops(sdk::Options& options)
      : layout_(options),
        activations_dtype_(options.attribute(MEMPLAN_ATTR_DTYPE_ACTIVATIONS)),
        recompute_(options.attribute(MEMPLAN_ATTR_RECOMPUTE_POLICY)),
        names_{options.intern("matmul"), options.intern("attention_core"), options.intern("recompute")} {
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
    if (!options.model().has_architecture)
      options.fail("needs the model's layers, heads and widths to count its FLOPs, but the scenario gives only "
                   "params; give a preset or the architecture in [model]");
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
    bool has_head = false, embedding_trains = false;
    for (const sdk::ItemRef item : ctx.items()) {
      if (item.role() != sdk::Role::weights || item.device() != sdk::Device::gpu || item.non_parameter()) continue;
      const double elements = item.elements() * static_cast<double>(item.count());
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
          flops = 2 * elements * tokens * static_cast<double>(model.experts_top_k) *
                  static_cast<double>(layout.expert) / static_cast<double>(std::max<int64_t>(model.experts, 1));
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
    const double core = 4 * head_width * pairs * static_cast<double>(workload.micro_batch) / context;

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
  }

 private:
  memplan::support::LayoutReader layout_;
  sdk::Attribute activations_dtype_, recompute_;
  struct {
    sdk::Name matmul, core, recompute;
  } names_;
  double efficiency_ = 0;
  std::optional<sdk::Math> math_;
  bool causal_ = true;
};

}  // namespace

MEMPLAN_PLUGIN(TransformerFlops)
