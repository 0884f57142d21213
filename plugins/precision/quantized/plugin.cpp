// 'quantized': weights stored in a block-quantized format (int8, int4, nf4,
// fp8) with the scales (and zero points) its groups carry; see
// quantized_format.hpp for the formula and its sources. For serving: the
// quantized weights are frozen, so training is refused (adapters trained on
// top of them, as in QLoRA, are a trainability plugin's job).
//
// Quantized: the projections of attention (q, o, and k, v), the dense MLP and
// the MoE experts, which hold almost all weights; GPTQ, AWQ, bitsandbytes
// (LLM.int8(), QLoRA) quantize exactly these linear layers. Kept in
// `unquantized`: token and position embeddings, LM head, norms and the MoE
// router. A model known only by its parameter count is one item, quantized
// whole, and the report says so.
#include <memplan/dtypes.hpp>
#include <memplan/sdk.hpp>

#include <array>
#include <optional>
#include <string>

#include "quantized_format.hpp"

namespace {

namespace sdk = memplan::sdk;
namespace q = memplan::plugins::quantized;
using sdk::ParamClass;

constexpr std::array<memplan_option_spec, 7> kOptions{{
    {"format", MEMPLAN_OPTION_STRING, "quantized weight format: \"int8\", \"int4\", \"nf4\" or \"fp8\"", "required"},
    {"group_size", MEMPLAN_OPTION_INT, "elements that share one scale",
     "int4 128 (GPTQ, AWQ), nf4 64 (QLoRA), int8 one row = model.hidden (LLM.int8()), fp8 per tensor (not counted)"},
    {"scale_dtype", MEMPLAN_OPTION_STRING, "dtype of each group's scale: fp32, fp16, bf16 or fp8",
     "fp32 for nf4 (QLoRA's absmax), fp16 otherwise"},
    {"zero_point", MEMPLAN_OPTION_BOOL,
     "asymmetric quantization: one zero point per group, as wide as the format's values (AWQ stores 4-bit zeros)",
     "false"},
    {"double_quant", MEMPLAN_OPTION_BOOL,
     "nf4 only: QLoRA's double quantization, 8-bit scales with one fp32 constant per 256 of them", "false"},
    {"unquantized", MEMPLAN_OPTION_STRING, "dtype of the embeddings, LM head, norms and router", "\"bf16\""},
    {"activations", MEMPLAN_OPTION_STRING, "dtype of activations (and the KV cache an inference plugin adds)",
     "\"bf16\""},
}};

constexpr std::array<std::string_view, 4> kScaleDtypes{"fp32", "fp16", "bf16", "fp8"};

double plain_dtype(sdk::Options& options, const char* key, const char* fallback) {
  const std::string name = options.string(key).value_or(fallback);
  if (auto bytes = sdk::dtype_bytes(name)) return *bytes;
  options.fail(key, "is \"" + name + "\", not a known dtype; use " + sdk::dtype_names());
}

bool is_quantized_class(ParamClass param_class) {
  switch (param_class) {
    case ParamClass::attention:
    case ParamClass::attention_kv:
    case ParamClass::mlp:
    case ParamClass::expert: return true;
    default: return false;
  }
}

class QuantizedPrecision {
 public:
  static constexpr sdk::PluginInfo info{
      "quantized", "1.0.0", "Quantized weights for serving (int8, int4, nf4, fp8) with their block scales",
      sdk::Kind::precision, sdk::Phase::precision};
  static std::span<const memplan_option_spec> options() { return kOptions; }

  explicit QuantizedPrecision(sdk::Options& options) {
    if (options.training())
      options.fail(
          "quantized weights are frozen, so mode = \"train\" has nothing to train; use mode = \"infer\" to serve "
          "them (fine-tuning adapters on top of quantized weights, as LoRA/QLoRA do, arrives with a trainability "
          "plugin)");
    const std::optional<std::string> name = options.string("format");
    if (!name) options.fail("needs format = \"int8\", \"int4\", \"nf4\" or \"fp8\" (the quantized weight format)");
    const q::Format* format = q::find_format(*name);
    if (format == nullptr)
      options.fail("format", "is \"" + *name + "\", not a quantized format; use int8, int4, nf4 or fp8");

    q::Layout layout;
    layout.bits = format->bits;
    layout.double_quant = options.boolean("double_quant").value_or(false);
    if (layout.double_quant && format->name != "nf4")
      options.fail("double_quant", "applies to nf4 only (QLoRA's double quantization of the absmax constants); "
                                   "remove it or use format = \"nf4\"");

    const std::optional<int64_t> group = options.integer("group_size");
    if (group && *group < 1) options.fail("group_size", "must be a positive integer, got " + std::to_string(*group));
    const memplan_model& model = options.model();
    if (group) {
      layout.group = static_cast<double>(*group);
    } else if (format->grouping == q::Grouping::fixed) {
      layout.group = static_cast<double>(format->default_group);
    } else if (format->grouping == q::Grouping::row) {
      if (!model.has_architecture)
        options.fail("format", "\"int8\" keeps one scale per row of model.hidden elements (LLM.int8()), but the "
                               "model is known only by its parameter count; set group_size");
      layout.group = static_cast<double>(model.hidden);
    }  // per tensor: group stays 0 (one scale per tensor is not counted)

    const std::optional<std::string> scale = options.string("scale_dtype");
    if (scale) {
      if (layout.double_quant)
        options.fail("scale_dtype", "is fixed by double_quant (8-bit scales with one fp32 constant per 256 of "
                                    "them, as QLoRA); remove scale_dtype or double_quant");
      if (layout.group <= 0)
        options.fail("scale_dtype", "has no effect with fp8's one scale per tensor; give group_size too, or "
                                    "remove scale_dtype");
      bool known = false;
      for (std::string_view allowed : kScaleDtypes) known = known || allowed == *scale;
      if (!known) options.fail("scale_dtype", "is \"" + *scale + "\"; use fp32, fp16, bf16 or fp8");
    }
    layout.scale_bytes = *sdk::dtype_bytes(scale.value_or(std::string(format->default_scale)));

    if (options.boolean("zero_point").value_or(false)) {
      if (!format->has_zero_point)
        options.fail("zero_point", std::string(format->name == "nf4"
                                                   ? "nf4 is symmetric: QLoRA scales each block by its absmax"
                                                   : "fp8 is a floating-point format: it is scaled") +
                                       " and stores no zero point; remove zero_point");
      layout.zero_point_bytes = layout.bits / 8.0;
    }

    quantized_ = q::bytes_per_element(layout);
    unquantized_ = plain_dtype(options, "unquantized", "bf16");
    activations_ = plain_dtype(options, "activations", "bf16");
    whole_model_ = !model.has_architecture;
  }

  void apply(sdk::Context& ctx) {
    ctx.set_attr(MEMPLAN_ATTR_DTYPE_WEIGHTS, quantized_);
    ctx.set_attr(MEMPLAN_ATTR_DTYPE_ACTIVATIONS, activations_);
    // Nothing trains under this recipe; were an adapter plugin to add
    // trainable weights, they would be kept and updated in the unquantized dtype.
    ctx.set_attr(MEMPLAN_ATTR_DTYPE_GRADIENTS, unquantized_);
    ctx.set_attr(MEMPLAN_ATTR_DTYPE_MASTER_WEIGHTS, 0.0);
    ctx.set_attr(MEMPLAN_ATTR_DTYPE_OPTIMIZER_STATES, unquantized_);
    ctx.set_attr(MEMPLAN_ATTR_REPORT_PREFIX "quantized_bits_per_weight", quantized_ * 8.0);
    if (whole_model_)
      ctx.set_attr(MEMPLAN_ATTR_REPORT_PREFIX "quantized_note",
                   "the model is known only by its parameter count, so all of it is quantized, including the "
                   "embeddings, LM head and norms that an architecture model keeps unquantized");
    const size_t count = ctx.size();
    for (size_t i = 0; i < count; ++i) {
      sdk::Item item = ctx.item(i);
      if (item.role != sdk::Role::weights) continue;
      const bool quantize = is_quantized_class(item.param_class) ||
                            (whole_model_ && item.param_class == ParamClass::other);  // the one `parameters` item
      item.bytes_per_element = quantize ? quantized_ : unquantized_;
      ctx.set(i, item);
    }
  }

 private:
  double quantized_ = 0;
  double unquantized_ = 0;
  double activations_ = 0;
  bool whole_model_ = false;
};

}  // namespace

MEMPLAN_PLUGIN(QuantizedPrecision)
