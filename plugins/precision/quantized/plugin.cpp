// 'quantized': weights stored in a block-quantized format (int8, int4, nf4,
// fp8) with the scales (and zero points) its groups carry; see
// quantized_format.hpp for the formula and its sources.
//
// Quantized: the projections of attention (q, o, and k, v), the dense MLP and
// the MoE experts, which hold almost all weights; GPTQ, AWQ, bitsandbytes
// (LLM.int8(), QLoRA) quantize exactly these linear layers. Kept in
// `unquantized`: token and position embeddings, norms, the MoE router, and
// the LM head unless `quantize` names lm_head (Lightning Fabric quantizes it). Adapters (class adapter, e.g. from 'lora') get `adapters`. A model
// known only by its parameter count is one item, quantized whole, and the
// report says so. `quantize` narrows the quantized parts; biases stay
// unquantized. With format "auto" (the default) the format, and the parts
// kept unquantized, come from the model's quantization_config, which the host
// publishes as model.quantization.* attributes (README.md, "The format a
// checkpoint declares").
//
// Training (QLoRA, Dettmers et al. 2023, arXiv 2305.14314): quantized weights
// are frozen, so every quantized item must have been frozen by a trainability
// plugin ('lora', 'freeze'); a trainable one is an error that names the fixes,
// unless skip_trainable keeps trainable linear weights unquantized (as
// bitsandbytes' llm_int8_skip_modules keeps named modules in 16 bits). Every
// trainable weight gets, like the precision recipes do, a gradient (in its own
// dtype unless `gradients` says otherwise: autograd gives a gradient the
// parameter's dtype) and, if `master_weights` is not "none", a master copy.
// Defaults follow the QLoRA reference code (github.com/artidoro/qlora,
// qlora.py): LoRA layers cast to bf16 (--bf16), no master copy (the bf16
// adapters are updated in place), optim = "paged_adamw_32bit" (fp32 states).
// Paged optimizer states live in unified memory and move to the CPU only
// under memory pressure; they are counted on the GPU.
#include <memplan/dtypes.hpp>
#include <memplan/sdk.hpp>
#include <memplan/support/comma_list.hpp>
#include <memplan/support/expert_padding.hpp>
#include <memplan/support/format.hpp>
#include <memplan/support/items.hpp>
#include <memplan/support/parameter_shapes.hpp>
#include <memplan/support/precision_recipe.hpp>

#include <algorithm>
#include <array>
#include <initializer_list>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "nf4_build_replay.hpp"
#include "quantized_format.hpp"

namespace {

namespace sdk = memplan::sdk;
namespace q = memplan::plugins::quantized;
using sdk::ParamClass;

constexpr std::array<memplan_option_spec, 27> kOptions{{
    {"format", MEMPLAN_OPTION_STRING,
     "quantized weight format: int8, int4, nf4, fp8, fp8-block (DeepSeek-V3), mxfp4, gptq, awq, or a llama.cpp GGUF "
     "type (q4_0, q4_1, q5_0, q5_1, q8_0, q2_k .. q6_k, iq1_s .. iq4_xs, iq4_nl); \"auto\": the format the model's "
     "config.json declares (quantization_config: mxfp4, fp8, gptq, awq, bitsandbytes)",
     "\"auto\"", nullptr},
    {"quantize", MEMPLAN_OPTION_STRING,
     "the parts whose linear weights are quantized: a comma-separated list of attention, mlp, experts, lm_head "
     "(lm_head: the output head too, as Lightning Fabric's BitsandbytesPrecision replaces every nn.Linear), "
     "embeddings (the token embedding, as a llama.cpp GGUF file stores it and vLLM keeps it)",
     "attention, mlp, experts; with format \"auto\", those the model's quantization_config does not keep "
     "unquantized (gpt-oss: experts)", nullptr},
    {"group_size", MEMPLAN_OPTION_INT, "elements that share one scale",
     "int4 128 (GPTQ, AWQ), nf4 64 (QLoRA), int8 one row = model.hidden (LLM.int8()), fp8 per tensor (not counted)",
     nullptr},
    {"scale_dtype", MEMPLAN_OPTION_STRING, "dtype of each group's scale: fp32, fp16, bf16 or fp8",
     "fp32 for nf4 (QLoRA's absmax), fp16 otherwise", nullptr},
    {"zero_point", MEMPLAN_OPTION_BOOL,
     "asymmetric quantization: one zero point per group, as wide as the format's values (AWQ stores 4-bit zeros)",
     "false", nullptr},
    {"double_quant", MEMPLAN_OPTION_BOOL,
     "nf4 only: QLoRA's double quantization, 8-bit scales with one fp32 constant per 256 of them; false is "
     "accepted with any format (how a scenario turns off a profile's: unsloth sets it)",
     "false", nullptr},
    {"unquantized", MEMPLAN_OPTION_STRING, "dtype of the embeddings, LM head, norms and router", "\"bf16\"", nullptr},
    {"activations", MEMPLAN_OPTION_STRING, "dtype of activations (and the KV cache an inference plugin adds)",
     "\"bf16\"", nullptr},
    {"adapters", MEMPLAN_OPTION_STRING, "dtype of adapter weights (class adapter, e.g. from 'lora')",
     "the unquantized dtype (QLoRA's LoRA layers in bf16)", nullptr},
    {"gradients", MEMPLAN_OPTION_STRING, "training: dtype of the gradients of trainable weights",
     "each trainable weight's own dtype", nullptr},
    {"master_weights", MEMPLAN_OPTION_STRING, "training: dtype of a master copy of trainable weights, or \"none\"",
     "\"none\" (QLoRA updates its bf16 adapters in place)", nullptr},
    {"optimizer_states", MEMPLAN_OPTION_STRING, "training: dtype of the optimizer states",
     "\"fp32\" (QLoRA's paged_adamw_32bit)", nullptr},
    {"main_grads", MEMPLAN_OPTION_STRING,
     "training: dtype of a copy of the trainable weights' gradients that the optimizer step makes and holds "
     "(DeepSpeed ZeRO 1/2 casts the rank's gradient partition to fp32 at the step: runtime/zero/stage_1_and_2.py; "
     "item <weight>.main_grad, as the mixed-precision recipes'), or \"none\"",
     "\"none\"; the deepspeed profile sets \"fp32\"", nullptr},
    {"skip_trainable", MEMPLAN_OPTION_BOOL,
     "training: keep trainable linear weights (e.g. experts a 'freeze' trains) in the unquantized dtype instead of "
     "failing",
     "false", nullptr},
    {"scales_in_parameter", MEMPLAN_OPTION_BOOL,
     "the scales are part of the parameter tensor (torchao's NF4Tensor, torchtune's QLoRA), so sharding, gathering "
     "and offload move them with the values; false: a separate quant_state kept whole on every rank (bitsandbytes)",
     "false", nullptr},
    {"mxfp4_moe_scale_copies", MEMPLAN_OPTION_INT,
     "mxfp4 only: copies of the MoE experts' E8M0 scales the framework keeps (vLLM's Triton MoE path keeps the "
     "checkpoint-layout scales as parameters and a swizzled copy in its PrecisionConfig: 2)",
     "1", nullptr},
    {"mxfp4_moe_bias_dtype", MEMPLAN_OPTION_STRING,
     "mxfp4 only: dtype of the MoE experts' biases (vLLM's Triton MoE path converts them to fp32)",
     "the unquantized dtype", nullptr},
    {"unquantized_modules", MEMPLAN_OPTION_STRING,
     "single layers' modules the checkpoint keeps in the unquantized dtype, comma-separated: layers.<i>[-<j>].<part> "
     "with part mlp, attn (q, k, v and o), attn.q, attn.k, attn.v or attn.o (bitsandbytes' llm_int8_skip_modules "
     "naming model.layers.<i>.mlp, as Unsloth's dynamic 4-bit checkpoints do)",
     "none", nullptr},
    {"mxfp4_moe_pad_intermediate", MEMPLAN_OPTION_INT,
     "mxfp4 only: each rank's MoE expert intermediate size is rounded up to a multiple of this (vLLM's mxfp4 MoE: "
     "Marlin 128, Triton 64); 1: no padding",
     "1", nullptr},
    {"mxfp4_moe_pad_hidden", MEMPLAN_OPTION_INT,
     "mxfp4 only: the MoE experts' hidden size is rounded up to a multiple of this (vLLM's Marlin mxfp4 MoE: 256); "
     "1: no padding",
     "1", nullptr},
    {"dequantize_copies", MEMPLAN_OPTION_INT,
     "inference: copies of the largest quantized weight, dequantized to the activation dtype, that a forward of "
     "more than one token holds at once (bitsandbytes 0.41 MatMul4Bit: dequantize_4bit to the quant_state's "
     "dtype, then .to(the input's dtype): 2 when they differ, 1 when they match); 0: kernels that dequantize in "
     "registers",
     "0", nullptr},
    {"dequantized_persistent", MEMPLAN_OPTION_BOOL,
     "inference: the dequantize_copies are a buffer the kernel keeps for the whole run, not a forward's transient "
     "(exllama's temp_dq, one fp16 copy of the largest quantized matrix allocated when the model is loaded: "
     "auto-gptq's autogptq_post_init, the 4-bit GPTQ kernel of transformers with optimum)",
     "false", nullptr},
    {"tied_head_stored", MEMPLAN_OPTION_BOOL,
     "the checkpoint stores a tied LM head as a tensor of its own (AutoAWQ's save_quantized clones every tensor "
     "of the state dict), which loading fills before tie_weights shares the embedding: one more copy of the "
     "embedding while the model is set up",
     "false", nullptr},
    {"quantize_working_bytes", MEMPLAN_OPTION_DOUBLE,
     "with nf4: bytes per element of the largest quantized matrix that quantizing it on the GPU holds at "
     "set-up, beside the weights (torchtune's QLoRA with torchao 0.1's to_nf4, which compares every weight with the "
     "16 NF4 values at once, and its bf16 source: 68; torchao >= 0.2 quantizes in chunks of 2^20 weights: 6); the "
     "blocks stay in the allocator's cache; on one GPU setup_build, where given, replaces it",
     "0", nullptr},
    {"setup_build", MEMPLAN_OPTION_STRING,
     "with nf4 on one GPU: replay the model's build on the GPU through the caching allocator, as torchtune's "
     "single-device QLoRA recipes make it (nf4_build_replay.hpp): \"clones\" (one decoder layer made, each adapted "
     "weight quantized by to_nf4 as made, then deep-copied per layer: torchtune's builders to 0.3.0, Llama 2 and 3 "
     "after), \"layers\" (each layer made and quantized in turn: torchtune's Llama 3.1 builders from 0.3.1), or "
     "\"none\"; adds the build's working memory at its high point (quantized.quantize_working) and the segments it "
     "leaves cached (quantized.setup_cache). Left out for other formats, more GPUs (quantize_working_bytes then), "
     "mixture-of-experts and latent attention",
     "\"none\"", nullptr},
    {"nf4_chunk", MEMPLAN_OPTION_INT,
     "setup_build: weights torchao's to_nf4 compares with the 16 NF4 values at once (torchao >= 0.2.0: CHUNK_SIZE "
     "= 1048576); 0: the whole matrix (torchao 0.1)",
     "0", nullptr},
    {"quantize_at_load", MEMPLAN_OPTION_BOOL,
     "setup_build: loading the checkpoint quantizes each NF4 weight again on the GPU (torchtune's inplace_copy "
     "with torchao < 0.2.0: to_nf4 of the checkpoint tensor moved to the GPU); false: torchao's copy_ quantizes "
     "on the CPU",
     "false", nullptr},
}};

constexpr std::array<std::string_view, 4> kScaleDtypes{"fp32", "fp16", "bf16", "fp8"};

double plain_dtype(sdk::Options& options, const char* key, const char* fallback) {
  const std::string name = options.string(key).value_or(fallback);
  if (auto bytes = sdk::dtype_bytes(name)) return *bytes;
  options.fail(key, "is \"" + name + "\", not a known dtype; use " + sdk::dtype_names());
}

// A dtype option that may be absent (nullopt) or "none" (nullopt too, when allowed).
std::optional<double> optional_dtype(sdk::Options& options, const char* key, bool may_be_none) {
  const std::optional<std::string> name = options.string(key);
  if (!name || (may_be_none && *name == "none")) return std::nullopt;
  if (auto bytes = sdk::dtype_bytes(*name)) return *bytes;
  options.fail(key, "is \"" + *name + "\", not a known dtype; use " + sdk::dtype_names() +
                        (may_be_none ? ", or \"none\"" : ""));
}

// How the report names an item: layers.<first>-<last>.<name>, as the host does.
std::string display_name(const sdk::ItemRef& item) {
  if (item.layer() < 0) return std::string(item.name());
  std::string name = "layers." + std::to_string(item.layer());
  if (item.count() > 1) name += "-" + std::to_string(static_cast<int64_t>(item.layer()) + item.count() - 1);
  return name + "." + std::string(item.name());
}

// unquantized_modules: layers [first, last] of an item named `item` ("mlp", "attn.q", ...) stay unquantized.
struct KeptModule {
  int32_t first = 0, last = 0;
  std::string item;
};

// The parts `quantize` names, as bits.
// kAllParts is the default (the LM head stays unquantized unless named).
// embeddings: the token embedding, as a llama.cpp GGUF file stores token_embd (vLLM's GGUFEmbeddingMethod
// keeps it quantized and dequantizes the rows it looks up: quantization/gguf.py @ 77cbc13bc, @ f5897613f).
constexpr unsigned kAttention = 1, kMlp = 2, kExperts = 4, kAllParts = 7, kLmHead = 8, kEmbeddings = 16;
constexpr std::array<std::pair<std::string_view, unsigned>, 5> kParts{{{"attention", kAttention},
                                                                       {"mlp", kMlp},
                                                                       {"experts", kExperts},
                                                                       {"lm_head", kLmHead},
                                                                       {"embeddings", kEmbeddings}}};

bool is_quantized_class(ParamClass param_class, unsigned parts) {
  switch (param_class) {
    case ParamClass::attention:
    case ParamClass::attention_kv:
    case ParamClass::attention_latent: return (parts & kAttention) != 0;
    case ParamClass::mlp: return (parts & kMlp) != 0;
    case ParamClass::expert: return (parts & kExperts) != 0;
    case ParamClass::lm_head: return (parts & kLmHead) != 0;
    case ParamClass::embedding: return (parts & kEmbeddings) != 0;
    default: return false;
  }
}

// Biases and attention sinks stay in the unquantized dtype: the formats
// quantize weight matrices (gpt-oss's checkpoint keeps the experts' *_bias
// and the sinks in bf16 beside the MXFP4 *_blocks and *_scales);
// support::is_vector_weight is the rule.

// "attention, experts" -> bits.
unsigned parse_parts(sdk::Options& options, std::string_view text) {
  unsigned parts = 0;
  for (const std::string_view field : memplan::support::comma_fields(text)) {
    unsigned bit = 0;
    for (const auto& [name, value] : kParts)
      if (name == field) bit = value;
    if (bit == 0)
      options.fail("quantize", "names \"" + std::string(field) +
                                   "\"; list the parts to quantize from attention, mlp, experts, lm_head, embeddings "
                                   "(comma-separated)");
    parts |= bit;
  }
  return parts;
}

// The format a model's config.json declares (its quantization_config, which
// the host publishes as model.quantization.* attributes, conventions.h), in
// this plugin's terms: transformers' quant_method names (HfQuantizer) ->
// mxfp4; fp8 with weight_block_size -> fp8-block of that block, without ->
// fp8 per tensor; gptq and awq with the bits and group size they give.
struct Declared {
  const q::Format* format = nullptr;
  std::string method;
  std::optional<int64_t> bits;
  std::optional<int64_t> group;  // -1: one scale per row
  unsigned parts = kAllParts;     // those not kept unquantized
  bool double_quant = false;      // bitsandbytes' bnb_4bit_use_double_quant
  std::string_view scale;         // the scales' dtype, when the method fixes it; empty: the format's
};

std::optional<Declared> declared_format(sdk::Options& options) {
  const std::optional<std::string> method = options.fact_string(MEMPLAN_ATTR_MODEL_QUANT_METHOD);
  if (!method) return std::nullopt;
  Declared declared;
  declared.method = *method;
  declared.bits = options.fact_integer(MEMPLAN_ATTR_MODEL_QUANT_BITS);
  declared.group = options.fact_integer(MEMPLAN_ATTR_MODEL_QUANT_GROUP_SIZE);
  const std::optional<int64_t> block = options.fact_integer(MEMPLAN_ATTR_MODEL_QUANT_BLOCK);
  const std::string unquantized = options.fact_string(MEMPLAN_ATTR_MODEL_QUANT_UNQUANTIZED).value_or("");
  for (const auto& [name, bit] : kParts)
    if (("," + unquantized + ",").find("," + std::string(name) + ",") != std::string::npos) declared.parts &= ~bit;
  auto bits_must_be = [&](std::initializer_list<int64_t> allowed) {
    if (!declared.bits) return;
    std::string list;
    for (int64_t bits : allowed) {
      if (bits == *declared.bits) return;
      list += (list.empty() ? "" : ", ") + std::to_string(bits);
    }
    options.fail("format", "is \"auto\", and the model's quantization_config declares quant_method \"" + *method +
                               "\" with " + std::to_string(*declared.bits) + " bits, which 'quantized' reads with " +
                               list + " bits only; set format (and group_size) yourself");
  };
  if (*method == "mxfp4") {
    bits_must_be({4});
    declared.format = q::find_format("mxfp4");
    declared.group.reset();  // the MX block of 32 is the format's
  } else if (*method == "fp8") {
    bits_must_be({8});
    declared.format = q::find_format(block ? "fp8-block" : "fp8");
    declared.group = block;
  } else if (*method == "gptq") {
    bits_must_be({2, 3, 4, 8});
    declared.format = q::find_format("gptq");
  } else if (*method == "awq") {
    bits_must_be({4});
    declared.format = q::find_format("awq");
  } else if (*method == "bitsandbytes") {
    // bitsandbytes (BitsAndBytesConfig): 4-bit NF4 or FP4 codes with an fp32
    // absmax per block of 64 (Params4bit's default blocksize), the same bytes
    // for either code; 8-bit LLM.int8() weights with one fp32 scale per row
    // (Int8Params.SCB).
    if (!declared.bits)
      options.fail("format", "is \"auto\", and the model's quantization_config declares quant_method "
                             "\"bitsandbytes\" without load_in_4bit or load_in_8bit; set format yourself");
    bits_must_be({4, 8});
    if (*declared.bits == 4) {
      const std::string type = options.fact_string(MEMPLAN_ATTR_MODEL_QUANT_VALUE_TYPE).value_or("fp4");
      if (type != "nf4" && type != "fp4")
        options.fail("format", "is \"auto\", and the model's quantization_config declares bnb_4bit_quant_type \"" +
                                   type + "\"; 'quantized' reads nf4 and fp4; set format yourself");
      declared.format = q::find_format("nf4");
      declared.double_quant = options.fact_integer(MEMPLAN_ATTR_MODEL_QUANT_DOUBLE_QUANT).value_or(0) != 0;
    } else {
      declared.format = q::find_format("int8");
      declared.scale = "fp32";
    }
    declared.bits.reset();  // the format's
  } else {
    options.fail("format", "is \"auto\", and the model's quantization_config declares quant_method \"" + *method +
                               "\", which 'quantized' does not read; it reads mxfp4, fp8 (per tensor, or in "
                               "blocks with weight_block_size), gptq, awq and bitsandbytes. Set format to one of " +
                               q::format_names());
  }
  return declared;
}

class QuantizedPrecision {
 public:
  static constexpr sdk::PluginInfo info{
      "quantized", "1.11.0",
      "Quantized weights (int8, int4, nf4, fp8, fp8-block, mxfp4, gptq, awq, GGUF types) with their block scales; frozen in training (QLoRA)",
      sdk::Kind::precision, sdk::Phase::precision};
  static std::span<const memplan_option_spec> options() { return kOptions; }

  // The attributes are resolved here, once; the report's two in the order
  // apply() sets them, which is the order the report prints them in.
  explicit QuantizedPrecision(sdk::Options& options)
      : weights_dtype_(options.attribute(MEMPLAN_ATTR_DTYPE_WEIGHTS)),
        activations_dtype_(options.attribute(MEMPLAN_ATTR_DTYPE_ACTIVATIONS)),
        gradients_dtype_(options.attribute(MEMPLAN_ATTR_DTYPE_GRADIENTS)),
        master_weights_dtype_(options.attribute(MEMPLAN_ATTR_DTYPE_MASTER_WEIGHTS)),
        optimizer_states_dtype_(options.attribute(MEMPLAN_ATTR_DTYPE_OPTIMIZER_STATES)),
        bits_per_weight_attr_(options.attribute(MEMPLAN_ATTR_REPORT_PREFIX "quantized_bits_per_weight")),
        note_attr_(options.attribute(MEMPLAN_ATTR_REPORT_PREFIX "quantized_note")),
        format_attr_(options.attribute(MEMPLAN_ATTR_REPORT_PREFIX "quantized_format")),
        setup_largest_free_attr_(options.attribute(MEMPLAN_ATTR_SETUP_LARGEST_FREE_BLOCK)),
        pad_intermediate_attr_(options.attribute(MEMPLAN_ATTR_EXPERT_PAD_INTERMEDIATE)),
        pad_hidden_attr_(options.attribute(MEMPLAN_ATTR_EXPERT_PAD_HIDDEN)),
        dequantized_transient_attr_(options.attribute(MEMPLAN_ATTR_DEQUANTIZED_TRANSIENT)) {
    const std::optional<std::string> name = options.string("format");
    std::optional<Declared> declared;
    const q::Format* format = nullptr;
    if (!name || *name == "auto") {
      declared = declared_format(options);
      if (!declared)
        options.fail(std::string(name ? "format = \"auto\" takes the format the model's config.json declares, "
                                        "but the model declares none (no quantization_config in an hf_config); "
                                        "set format = \"...\" instead"
                                      : "needs format = \"...\"") +
                     " (the quantized weight format: " + q::format_names() + ")");
      format = declared->format;
      parts_ = declared->parts;
    } else {
      format = q::find_format(*name);
      if (format == nullptr)
        options.fail("format", "is \"" + *name + "\", not a quantized format; use one of " + q::format_names() +
                                   ", or \"auto\"");
    }
    if (const std::optional<std::string> quantize = options.string("quantize")) parts_ = parse_parts(options, *quantize);

    q::Layout layout;
    layout.bits = declared && declared->bits ? static_cast<double>(*declared->bits) : format->bits;
    if (format->grouping == q::Grouping::block) {
      // A GGUF block fixes its group, scales and zero points: nothing to choose.
      const std::pair<const char*, bool> fixed_keys[] = {{"group_size", options.integer("group_size").has_value()},
                                                         {"scale_dtype", options.string("scale_dtype").has_value()},
                                                         {"zero_point", options.boolean("zero_point").has_value()},
                                                         // false states nothing the block fixes (and is how a
                                                         // scenario turns a profile's double_quant off: unsloth)
                                                         {"double_quant", options.boolean("double_quant").value_or(false)}};
      for (const auto& [fixed, given] : fixed_keys)
        if (given)
          options.fail(fixed, "is fixed by the " + std::string(format->name) + " block (" +
                                  std::to_string(format->block_bytes) + " bytes per " +
                                  std::to_string(format->default_group) + " weights, llama.cpp's block_" +
                                  std::string(format->name) + "); remove it" +
                                  (std::string_view(fixed) == "double_quant"
                                       ? " (or set double_quant = false where a framework profile sets it: unsloth does)"
                                       : ""));
      layout.group = static_cast<double>(format->default_group);
      layout.block_bytes = static_cast<double>(format->block_bytes);
    }
    layout.double_quant = options.boolean("double_quant").value_or(declared && declared->double_quant);
    if (layout.double_quant && format->name != "nf4")
      options.fail("double_quant", "applies to nf4 only (QLoRA's double quantization of the absmax constants); "
                                   "remove it, set double_quant = false (where a framework profile sets it: "
                                   "unsloth does) or use format = \"nf4\"");

    const std::optional<int64_t> group = options.integer("group_size");
    if (group && *group < 1) options.fail("group_size", "must be a positive integer, got " + std::to_string(*group));
    const memplan_model& model = options.model();
    if (group) {
      layout.group = static_cast<double>(*group);
    } else if (declared && declared->group && *declared->group == -1) {
      // GPTQ's group_size -1: one scale per output channel, a row of the input width.
      if (!model.has_architecture)
        options.fail("the model's quantization_config gives group_size -1 (one scale per row of model.hidden "
                     "elements), but the model is known only by its parameter count; set group_size");
      layout.group = static_cast<double>(model.hidden);
    } else if (declared && declared->group) {
      layout.group = static_cast<double>(*declared->group);
    } else if (format->grouping == q::Grouping::block) {
      // set above
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
    if (format->grouping != q::Grouping::block)
      layout.scale_bytes = *sdk::dtype_bytes(
          scale.value_or(std::string(declared && !declared->scale.empty() ? declared->scale : format->default_scale)));

    if (options.boolean("zero_point").value_or(format->zero_point_default)) {
      if (!format->has_zero_point)
        options.fail("zero_point", std::string(format->name == "nf4"
                                                   ? "nf4 is symmetric: QLoRA scales each block by its absmax"
                                                   : "fp8 is a floating-point format: it is scaled") +
                                       " and stores no zero point; remove zero_point");
      layout.zero_point_bytes = layout.bits / 8.0;
    }

    quantized_ = q::bytes_per_element(layout);
    values_ = q::value_bytes(layout);
    constants_ = q::constant_bytes(layout);
    unquantized_ = plain_dtype(options, "unquantized", "bf16");
    activations_ = plain_dtype(options, "activations", "bf16");
    adapters_ = optional_dtype(options, "adapters", false).value_or(unquantized_);
    gradients_ = optional_dtype(options, "gradients", false);
    master_weights_ = optional_dtype(options, "master_weights", true);
    main_grads_ = optional_dtype(options, "main_grads", true);
    optimizer_states_ = plain_dtype(options, "optimizer_states", "fp32");
    skip_trainable_ = options.boolean("skip_trainable").value_or(false);
    if (const std::optional<std::string> modules = options.string("unquantized_modules"))
      unquantized_modules_ = parse_modules(options, *modules);
    scales_in_parameter_ = options.boolean("scales_in_parameter").value_or(false);
    whole_model_ = !model.has_architecture;
    dequantize_copies_ = options.integer("dequantize_copies").value_or(0);
    dequantized_persistent_ = options.boolean("dequantized_persistent").value_or(false);
    tied_head_stored_ = options.boolean("tied_head_stored").value_or(false);
    if (tied_head_stored_ && options.model().has_architecture && options.model().tied_embeddings == 0)
      options.fail("tied_head_stored", "loads a tied LM head's own tensor, but the model's head is not tied to its "
                                       "embedding; remove it (an untied head is counted as a weight already)");
    tied_head_copy_ = options.intern("quantized.tied_head_copy");
    if (dequantized_persistent_ && dequantize_copies_ <= 0)
      options.fail("dequantized_persistent", "keeps the dequantize_copies for the whole run, but there are none: give "
                                             "dequantize_copies (exllama's temp_dq: 1) or remove it");
    dequantized_ = options.intern("activations.dequantized_weight");
    quantize_working_bytes_ = options.number("quantize_working_bytes").value_or(0.0);
    if (!(quantize_working_bytes_ >= 0 && quantize_working_bytes_ <= 1024))
      options.fail("quantize_working_bytes", "must be 0 to 1024 (bytes per element of the matrix being quantized), "
                                             "got " + memplan::support::number(quantize_working_bytes_));
    if (quantize_working_bytes_ > 0) quantize_working_ = options.intern("quantized.quantize_working");
    read_setup_build(options, model, format->name == "nf4");
    // What the bytes describe: torchao's to_nf4 on a model built on the GPU for training (torchtune's QLoRA).
    // A profile sets it for every run of its framework, so other formats, inference, and a model known only by
    // its parameter count (no largest matrix) leave it out rather than fail.
    nf4_ = format->name == "nf4";
    gated_mlp_ = model.gated_mlp != 0;
    expert_matrix_ = static_cast<double>(model.hidden) * static_cast<double>(model.expert_ffn_hidden);
    if (dequantize_copies_ < 0 || dequantize_copies_ > 8)
      options.fail("dequantize_copies", "must be 0 to 8 (copies of the largest quantized weight a forward holds "
                                        "dequantized; bitsandbytes' MatMul4Bit: 1 or 2), got " +
                                            std::to_string(dequantize_copies_));
    if (dequantize_copies_ > 0 && options.training())
      options.fail("dequantize_copies", "models an inference forward (mode = \"infer\"); in training the megatron "
                                        "activation model counts the dequantized copies itself "
                                        "(activations.dequantized_weight): remove it, and for a quant_state "
                                        "dtype other than the compute dtype set [activations] "
                                        "dequantized_copies = 2");
    // Sized here, before the layout splits the weights (tensor parallelism) or keeps a stage's
    // (pipeline parallelism): right for one GPU holding the whole model only.
    if (dequantize_copies_ > 0 && options.workload().gpu_count > 1)
      options.fail("dequantize_copies", "is sized for one GPU holding the whole model; with " +
                                            std::to_string(options.workload().gpu_count) +
                                            " GPUs the layout splits the weights after it, which it does not "
                                            "follow: remove it or run the scenario on one GPU");
    if (dequantize_copies_ > 0 && whole_model_)
      options.fail("dequantize_copies", "needs the model's architecture (its largest weight matrix), but the "
                                        "scenario gives only params; use a preset or layers, hidden, heads");
    // vLLM's mxfp4 MoE on its Triton backend (README.md, "vLLM's mxfp4 experts").
    const int64_t copies = options.integer("mxfp4_moe_scale_copies").value_or(1);
    if (copies < 1)
      options.fail("mxfp4_moe_scale_copies", "must be 1 or more (copies of the experts' scales), got " +
                                                 std::to_string(copies));
    for (const char* key : {"mxfp4_moe_pad_intermediate", "mxfp4_moe_pad_hidden"})
      if (options.integer(key).value_or(1) < 1)
        options.fail(key, "must be 1 or more (a multiple to round the experts' size up to; 1: none), got " +
                              std::to_string(*options.integer(key)));
    if (format->name == "mxfp4") {
      expert_constants_ = constants_ * static_cast<double>(copies);
      expert_bias_ = optional_dtype(options, "mxfp4_moe_bias_dtype", false).value_or(unquantized_);
      expert_padding_ = {.intermediate = options.integer("mxfp4_moe_pad_intermediate").value_or(1),
                         .hidden = options.integer("mxfp4_moe_pad_hidden").value_or(1)};
    } else {
      expert_constants_ = constants_;
      expert_bias_ = unquantized_;
    }
    if (declared) {
      format_text_ = std::string(format->name) + " from the model's quantization_config (quant_method " +
                     declared->method + "); quantized parts:";
      std::string parts;
      for (const auto& [part, bit] : kParts)
        if (parts_ & bit) parts += (parts.empty() ? " " : ", ") + std::string(part);
      format_text_ += parts.empty() ? " none" : parts;
    }
  }

  void apply(sdk::Context& ctx) {
    const bool training = ctx.training();
    ctx.set_attr(weights_dtype_, quantized_);
    ctx.set_attr(activations_dtype_, activations_);
    ctx.set_attr(gradients_dtype_, gradients_.value_or(adapters_));
    ctx.set_attr(master_weights_dtype_, master_weights_.value_or(0.0));
    ctx.set_attr(optimizer_states_dtype_, optimizer_states_);
    ctx.set_attr(bits_per_weight_attr_, quantized_ * 8.0);
    if (!format_text_.empty()) ctx.set_attr(format_attr_, format_text_.c_str());
    if (!expert_padding_.none() && (parts_ & kExperts) != 0) {
      ctx.set_attr(pad_intermediate_attr_, expert_padding_.intermediate);
      ctx.set_attr(pad_hidden_attr_, expert_padding_.hidden);
    }
    if (whole_model_)
      ctx.set_attr(note_attr_,
                   "the model is known only by its parameter count, so all of it is quantized, including the "
                   "embeddings, LM head and norms that an architecture model keeps unquantized");
    // Gradients, master copies and constants are appended after the weights,
    // in the order the weights come: collected in batch_ (kept between
    // evaluations) and added in one call once every weight is visited.
    batch_.clear();
    largest_quantized_ = 0;
    double embedding_bytes = 0;  // the token embedding's, for tied_head_stored
    for (sdk::ItemRef item : ctx.items()) {
      if (item.role() != sdk::Role::weights) continue;
      const bool trains = training && item.trainable();
      bool quantize = (is_quantized_class(item.param_class(), parts_) && !memplan::support::is_vector_weight(item.name())) ||
                      (whole_model_ && item.param_class() == ParamClass::other);  // the one `parameters` item
      if (quantize && trains) {
        if (!skip_trainable_) fail_trainable(ctx, item);
        quantize = false;
      }
      const bool expert = item.param_class() == ParamClass::expert && (parts_ & kExperts) != 0;
      const bool expert_bias = expert && memplan::support::is_vector_weight(item.name());
      // A kernel layout that pads the experts (one rank's share here; the layout plugins re-split it).
      if (expert && !expert_padding_.none())
        item.set_elements(item.elements() *
                          memplan::support::expert_share(ctx.model(), expert_bias, 1, expert_padding_));
      item.set_bytes_per_element(quantize ? (scales_in_parameter_ ? quantized_ : values_)
                                 : expert_bias ? expert_bias_
                                               : (item.param_class() == ParamClass::adapter ? adapters_ : unquantized_));
      if (quantize && constants_ > 0 && !scales_in_parameter_)
        add_constants(ctx, item, expert ? expert_constants_ : constants_);
      if (quantize && !expert) add_kept_modules(ctx, item);
      if (quantize) largest_quantized_ = std::max(largest_quantized_, one_matrix(item));
      if (item.param_class() == ParamClass::embedding) embedding_bytes = item.bytes();
      if (!trains) continue;
      add_copy(item, sdk::Role::gradients, sdk::Lifetime::gradient, gradients_.value_or(item.bytes_per_element()));
      if (master_weights_) add_copy(item, sdk::Role::master_weights, sdk::Lifetime::persistent, *master_weights_);
      if (main_grads_)
        add_copy(item, sdk::Role::optimizer_states, sdk::Lifetime::transient_optimizer, *main_grads_)
            .set_name(main_grad_names_(ctx, item));
    }
    ctx.add(batch_);
    // bitsandbytes 0.41.1 (bitsandbytes/autograd/_functions.py): matmul_4bit
    // takes gemv_4bit only for one token (A.numel() == A.shape[-1]); more
    // tokens go through MatMul4Bit.forward, which computes
    // linear(A, dequantize_4bit(B, state).to(A.dtype).t()): the whole weight
    // in the quant_state's dtype, and a second copy when A's dtype differs.
    // One layer runs at a time, so the largest quantized weight bounds it.
    // A kernel's own buffer kept for the run (dequantized_persistent: exllama's temp_dq, auto-gptq v0.7.1
    // nn_modules/qlinear/qlinear_exllama.py via _utils.py autogptq_post_init 426-430: max over the layers of
    // qweight.numel() x 8 halves, allocated once after loading) is a buffer of every phase; otherwise the
    // forward's transient, which an inference activation model places at its projection's moment
    // (weights.dequantized_transient).
    if (dequantize_copies_ > 0 && largest_quantized_ > 0) {
      const double bytes = static_cast<double>(dequantize_copies_) * largest_quantized_ * activations_;
      memplan::support::add_bytes(
          ctx, {.name = dequantized_,
                .role = dequantized_persistent_ ? sdk::Role::buffers : sdk::Role::activations,
                .lifetime = dequantized_persistent_ ? sdk::Lifetime::persistent : sdk::Lifetime::transient_forward,
                .bytes = bytes});
      if (!dequantized_persistent_) ctx.set_attr(dequantized_transient_attr_, bytes);
    }
    // A tied head the checkpoint stores as its own tensor (AutoAWQ v0.2.6 save_quantized, awq/models/base.py
    // 260-315, clones every tensor of state_dict() through shard_checkpoint): transformers' loader fills
    // lm_head.weight as an expected key (accelerate's set_module_tensor_to_device swaps in value.to(device))
    // and only tie_weights(), after loading, frees it: one more copy of the embedding at set-up. Found on the
    // Qwen2.5 speed benchmark's tied AWQ models at one token, whose peak is the load's (-20 to -33 % without).
    if (tied_head_stored_ && embedding_bytes > 0)
      memplan::support::add_bytes(ctx, {.name = tied_head_copy_, .role = sdk::Role::weights,
                                        .lifetime = sdk::Lifetime::setup, .bytes = embedding_bytes});
    // Quantizing on the GPU while the model is built or loaded (torchtune's
    // LoRALinear(quantize_base=True) calls to_nf4 on each weight it makes;
    // load_state_dict's copy_ into an NF4Tensor quantizes again): one matrix
    // at a time, so the largest bounds it. pytorch/ao @ v0.1,
    // torchao/dtypes/nf4tensor.py convert_to_norm_float_weight and
    // quantize_tensor_nearest: the scaled copy (2 B a weight), then
    // diff = (value.unsqueeze(-1) - nf4).abs(), two (numel, 16) bf16
    // tensors at once (64 B), beside the bf16 source on the GPU (the
    // nn.Linear weight being replaced, or at load the checkpoint tensor
    // moved to the device, torchtune utils/_register_nf4_dispatch_ops.py
    // inplace_copy): 68. From 6081796bc ("perform in chunks", torchao 0.2.0)
    // the comparison runs on 2^20 weights at a time into a uint8 output: the
    // source, the scaled copy and the codes, and the two halves packing them
    // (quantized_blocks[::2] << 4 | quantized_blocks[1::2]): 6 B a weight.
    // A model built or loaded this way quantizes so whatever the job does next: a training recipe's
    // set-up, or the same build logged before any step (validation TTPR-llama31-8b-qlora-init-i1398).
    // One GPU builds the whole model (torchtune's single-device recipes); the distributed recipes build on the
    // meta device and load shards, which quantize_working_bytes' rule describes.
    if (setup_build_ && largest_quantized_ > 0 && ctx.workload().gpu_count <= 1) {
      // The replayed build (nf4_build_replay.hpp): its working memory at the high point beyond what stays
      // allocated, and the segments beyond the high point, which stay cached (the plan's weights are the
      // items above; the replay's own model, large tensors only, is used for the differences).
      memplan::support::add_bytes(
          ctx, {.name = quantize_working_, .role = sdk::Role::buffers, .lifetime = sdk::Lifetime::setup,
                .bytes = setup_build_->high - setup_build_->alive});
      memplan::support::add_bytes(
          ctx, {.name = setup_cache_, .role = sdk::Role::buffers, .lifetime = sdk::Lifetime::setup,
                .pool = sdk::Pool::reserve, .bytes = std::max(0.0, setup_build_->reserved - setup_build_->high)});
      // The step's requests are served from those cached blocks first (the allocator model reads this).
      // A writer keeps the larger of its block and one already published (conventions.h).
      if (setup_build_->largest_free > 0)
        ctx.set_attr(setup_largest_free_attr_,
                     std::max(setup_build_->largest_free, ctx.attr_double(setup_largest_free_attr_, 0)));
    } else if (quantize_working_bytes_ > 0 && largest_quantized_ > 0 && nf4_ && !whole_model_) {
      memplan::support::add_bytes(
          ctx, {.name = quantize_working_, .role = sdk::Role::buffers, .lifetime = sdk::Lifetime::setup,
                .bytes = quantize_working_bytes_ * largest_quantized_});
    }
  }

 private:
  sdk::ItemRef add_copy(const sdk::ItemRef& item, sdk::Role role, sdk::Lifetime lifetime, double bytes) {
    sdk::ItemRef copy = batch_.copy_of(item);
    copy.set_role(role);
    copy.set_lifetime(lifetime);
    copy.set_bytes_per_element(bytes);
    return copy;
  }

  // "layers.1.mlp, layers.3-4.attn" -> kept modules (attn: q, k, v and o).
  static std::vector<KeptModule> parse_modules(sdk::Options& options, std::string_view text) {
    std::vector<KeptModule> modules;
    const int64_t layers = options.model().has_architecture ? options.model().layers : 0;
    const auto fail = [&](std::string_view field, const std::string& why) {
      options.fail("unquantized_modules", "names \"" + std::string(field) + "\": " + why +
                                              "; write layers.<i>[-<j>].<part>, part mlp, attn, attn.q, attn.k, "
                                              "attn.v or attn.o, comma-separated (e.g. \"layers.1.mlp, layers.3.attn\")");
    };
    if (layers <= 0)
      options.fail("unquantized_modules", "needs the model's layers (a preset or layers, hidden, heads); the scenario "
                                          "gives only params");
    for (const std::string_view field : memplan::support::comma_fields(text)) {
      if (field.empty()) continue;
      if (!field.starts_with("layers.")) fail(field, "not a layer's module");
      std::string_view rest = field.substr(7);
      const size_t dot = rest.find('.');
      if (dot == std::string_view::npos) fail(field, "no module after the layers");
      const std::string_view range = rest.substr(0, dot);
      const std::string_view part = rest.substr(dot + 1);
      const auto number = [&](std::string_view digits) {
        const std::optional<int64_t> value = memplan::support::parse_index(digits);
        if (!value) fail(field, "the layers are not numbers");
        return *value;
      };
      const size_t dash = range.find('-');
      const int64_t first = number(range.substr(0, dash));
      const int64_t last = dash == std::string_view::npos ? first : number(range.substr(dash + 1));
      if (last < first || last >= layers)
        fail(field, "the layers must be 0 to " + std::to_string(layers - 1) + ", first to last");
      std::vector<std::string> items;
      if (part == "mlp") items = {"mlp"};
      else if (part == "attn") items = {"attn.q", "attn.k", "attn.v", "attn.o"};
      else if (part == "attn.q" || part == "attn.k" || part == "attn.v" || part == "attn.o") items = {std::string(part)};
      else fail(field, "\"" + std::string(part) + "\" is not a module memplan counts");
      for (std::string& item : items)
        modules.push_back({static_cast<int32_t>(first), static_cast<int32_t>(last), std::move(item)});
    }
    return modules;
  }

  // The 16-bit excess of the modules kept unquantized that overlap a quantized item's layers: a copy of the
  // item over those layers at (unquantized - quantized) bytes an element, so the quantized item and its scales
  // stay whole and the layout and sharding plugins split the excess with them.
  void add_kept_modules(const sdk::Context& ctx, const sdk::ItemRef& item) {
    if (item.layer() < 0 || unquantized_modules_.empty()) return;
    const int32_t first = item.layer(), last = item.layer() + static_cast<int32_t>(item.count()) - 1;
    for (const KeptModule& kept : unquantized_modules_) {
      if (kept.item != item.name()) continue;
      const int32_t from = std::max(first, kept.first), to = std::min(last, kept.last);
      if (from > to) continue;
      sdk::ItemRef excess = batch_.copy_of(item);
      excess.set_name(unquantized_names_(ctx, item));
      excess.set_layer(from);
      excess.set_count(static_cast<uint32_t>(to - from + 1));
      excess.set_bytes_per_element(unquantized_ - quantized_);
      excess.set_trainable(false);
    }
  }

  // The item's quantization constants (scales, zero points) next to its packed
  // values, as a buffer that is not a parameter: bitsandbytes 0.43 keeps
  // quant_state as a plain attribute of Params4bit / Linear4bit
  // (bitsandbytes/nn/modules.py, Params4bit._quantize), GPTQ and AWQ as
  // registered buffers. Sharding and parameter offload leave it whole on every
  // rank's GPU; tensor parallelism splits it with the values it scales.
  // With scales_in_parameter the constants stay in the weight item instead:
  // torchao's NF4Tensor (torchao/dtypes/nf4tensor.py, the tensor subclass
  // torchtune's to_nf4 makes the parameter) holds quantized_data,
  // quantized_scalers and quantization_factor together and implements the
  // split/chunk/all-gather ops FSDP2's fully_shard uses on all of them, so the
  // scales are sharded, gathered and offloaded with their values.
  void add_constants(const sdk::Context& ctx, const sdk::ItemRef& values, double bytes) {
    const sdk::Name name = quant_state_(ctx, values);  // interned once per weight name
    sdk::ItemRef constants = batch_.copy_of(values);
    constants.set_name(name);
    constants.set_bytes_per_element(bytes);
    constants.set_trainable(false);
    constants.set_non_parameter(true);
  }

  // Elements of one weight matrix of a quantized item: the host's "mlp" item
  // holds the MLP's projections together (gate, up, down; up, down without a
  // gate), an expert item every expert's: one matrix is hidden x the MLP width
  // (split by tensor parallelism as the item is). Attention items (q, k, v, o)
  // and the LM head are one matrix each.
  // setup_build and its options: the replay of the model's build on the GPU, run once here (it depends on the
  // model and the options only). Where it does not apply (another format, a model without its architecture,
  // mixture-of-experts, latent attention; more GPUs, decided per evaluation) the plugin keeps
  // quantize_working_bytes' rule: a profile sets these for every run of its framework.
  void read_setup_build(sdk::Options& options, const memplan_model& model, bool nf4) {
    const std::string order = options.string("setup_build").value_or("none");
    if (order != "none" && order != "clones" && order != "layers")
      options.fail("setup_build", "is \"" + order + "\"; use \"clones\", \"layers\" or \"none\"");
    const int64_t chunk = options.integer("nf4_chunk").value_or(0);
    if (chunk < 0 || chunk > (int64_t{1} << 40))
      options.fail("nf4_chunk", "must be 0 (the whole matrix) or a number of weights up to 2^40, got " +
                                    std::to_string(chunk));
    const bool at_load = options.boolean("quantize_at_load").value_or(false);
    if (order == "none") {
      if (options.integer("nf4_chunk") || options.boolean("quantize_at_load"))
        options.fail("setup_build", "is \"none\", so nf4_chunk and quantize_at_load describe nothing; set "
                                    "setup_build = \"clones\" or \"layers\", or remove them");
      return;
    }
    if ((parts_ & kLmHead) != 0)
      options.fail("setup_build", "replays torchtune's build, whose output head stays bf16 (quantize_base is not "
                                  "applied to output_proj); remove lm_head from quantize, or setup_build");
    const bool dense = model.has_architecture && model.experts == 0 && model.kv_lora_rank == 0;
    if (!nf4 || !dense || options.workload().gpu_count > 1) return;  // more GPUs keep the rule (apply())
    setup_cache_ = options.intern("quantized.setup_cache");
    quantize_working_ = options.intern("quantized.quantize_working");
    namespace qb = memplan::plugins::quantized;
    qb::Nf4Build build;
    const double h = static_cast<double>(model.hidden);
    const double q = static_cast<double>(model.heads * model.head_dim);
    const double kv = static_cast<double>(model.kv_heads * model.head_dim);
    const double ffn = static_cast<double>(model.ffn_hidden);
    const bool attention = (parts_ & kAttention) != 0, mlp = (parts_ & kMlp) != 0;
    build.layer = {{h * q, attention}, {h * kv, attention}, {h * kv, attention}, {q * h, attention},
                   {h * ffn, mlp},     {ffn * h, mlp}};
    if (model.gated_mlp != 0) build.layer.push_back({h * ffn, mlp});
    build.layers = model.layers;
    build.embedding_bytes = static_cast<double>(model.vocab) * h * unquantized_;
    build.head_bytes = model.tied_embeddings != 0 ? 0.0 : build.embedding_bytes;
    build.order = order == "clones" ? qb::BuildOrder::clones : qb::BuildOrder::layers;
    build.chunk = static_cast<double>(chunk);
    build.quantize_at_load = at_load;
    // Each layer keeps a few blocks per weight: a model whose kept blocks would outgrow the replay's table
    // (hundreds of layers) keeps quantize_working_bytes' rule, as does a replay that overflows it.
    if (static_cast<double>(model.layers) * static_cast<double>(build.layer.size()) * 4 >
        static_cast<double>(qb::kNf4BuildBlocks))
      return;
    const qb::Nf4BuildReplay replay = qb::replay_nf4_build(build);
    if (replay.valid) setup_build_ = replay;
  }

  double one_matrix(const sdk::ItemRef& item) const {
    const double matrices = gated_mlp_ ? 3.0 : 2.0;
    if (item.param_class() == ParamClass::mlp) return item.elements() / matrices;
    if (item.param_class() == ParamClass::expert) return std::min(item.elements() / matrices, expert_matrix_);
    return item.elements();
  }

  [[noreturn]] static void fail_trainable(const sdk::Context& ctx, const sdk::ItemRef& item) {
    ctx.fail("'" + display_name(item) +
             "' is trainable, but quantized weights are frozen: no gradient updates them. Freeze them with a "
             "trainability [[strategy]]: use = \"lora\" (QLoRA: adapters train on the frozen quantized weights), "
             "or use = \"freeze\" training only parts that stay unquantized (router, norms, embeddings, lm_head); "
             "or set skip_trainable = true in [precision] to keep trainable weights unquantized; or use a "
             "precision that does not quantize, such as mixed-bf16");
  }

  sdk::Attribute weights_dtype_, activations_dtype_, gradients_dtype_, master_weights_dtype_, optimizer_states_dtype_;
  sdk::Attribute bits_per_weight_attr_, note_attr_, format_attr_;
  sdk::Attribute setup_largest_free_attr_;  // setup.largest_free_block, from the replayed build
  sdk::Attribute pad_intermediate_attr_, pad_hidden_attr_;  // weights.expert_pad_*, for the layout's split
  sdk::Attribute dequantized_transient_attr_;               // weights.dequantized_transient
  memplan::support::ExpertPadding expert_padding_;  // mxfp4_moe_pad_*: the experts' kernel layout
  unsigned parts_ = kAllParts;  // the parts whose linear weights are quantized
  std::string format_text_;     // for the report, when the format comes from the model's config
  double quantized_ = 0;   // values and constants, per element
  double values_ = 0;      // the packed values, per element
  double constants_ = 0;   // scales (and zero points), per element
  double expert_constants_ = 0;  // the experts' constants: constants_ x mxfp4_moe_scale_copies with mxfp4
  double expert_bias_ = 0;       // the experts' biases: mxfp4_moe_bias_dtype with mxfp4, else unquantized_
  double unquantized_ = 0;
  double activations_ = 0;
  double adapters_ = 0;
  std::optional<double> gradients_;
  std::optional<double> master_weights_;
  std::optional<double> main_grads_;  // main_grads: the step's gradient copy (DeepSpeed ZeRO 1/2's fp32 cast)
  sdk::SuffixedNames main_grad_names_{memplan::support::kMainGradSuffix.data()};
  double optimizer_states_ = 0;
  bool skip_trainable_ = false;
  bool scales_in_parameter_ = false;  // torchao NF4Tensor: the scales travel with the values
  bool whole_model_ = false;
  int64_t dequantize_copies_ = 0;   // dequantized copies of the largest quantized weight (bitsandbytes' MatMul4Bit)
  bool dequantized_persistent_ = false;  // those copies are a kernel's buffer kept for the run (exllama's temp_dq)
  bool tied_head_stored_ = false;         // tied_head_stored: the head's own tensor filled at load
  sdk::Name tied_head_copy_{};            // "quantized.tied_head_copy", interned in the constructor
  double largest_quantized_ = 0;    // elements of the largest quantized weight matrix
  double quantize_working_bytes_ = 0;  // set-up working memory of quantizing one matrix, bytes a weight
  bool nf4_ = false;                   // the format is nf4 (what quantize_working_bytes describes)
  sdk::Name quantize_working_{};       // "quantized.quantize_working", interned when that is set
  sdk::Name setup_cache_{};            // "quantized.setup_cache", interned with setup_build
  std::optional<memplan::plugins::quantized::Nf4BuildReplay> setup_build_;  // the replayed build, where it applies
  bool gated_mlp_ = false;          // three MLP matrices (gate, up, down), else two
  double expert_matrix_ = 0;        // hidden x expert_ffn_hidden: one expert matrix, unsplit
  sdk::Name dequantized_{};  // "activations.dequantized_weight", interned in the constructor
  sdk::SuffixedNames quant_state_{".quant_state"};
  sdk::SuffixedNames unquantized_names_{".unquantized"};  // the 16-bit excess of a module kept unquantized
  std::vector<KeptModule> unquantized_modules_;  // unquantized_modules
  sdk::ItemBatch batch_;  // the items apply() appends, cleared each evaluation, its capacity kept
};

}  // namespace

MEMPLAN_PLUGIN(QuantizedPrecision)
