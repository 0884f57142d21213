// 'lora': low-rank adapters on frozen weights (Hu et al. 2021, "LoRA: Low-Rank
// Adaptation of Large Language Models", arXiv 2106.09685, section 4.1). A
// weight matrix W of d_in x d_out stays frozen; the adapter adds B A with A of
// d_in x r and B of r x d_out: r (d_in + d_out) trainable parameters.
//
// Targets (comma-separated), with h = hidden, q = heads x head_dim,
// kv = kv_heads x head_dim, f = ffn_hidden, f_e = expert_ffn_hidden, E experts,
// n = 3 projections (gate, up, down) for a gated MLP, 2 otherwise:
//   q  r (h + q)     k, v  r (h + kv) each     o  r (q + h)
//   mlp      n r (h + f)        per layer, dense models
//   experts  E n r (h + f_e)    per layer: each expert's gate, up and down
//   router   r (h + E)          per layer, the MoE gate
//   lm_head  r (h + V)          once
//   attention = q, k, v, o;  all-linear = every linear layer of the blocks:
//   attention, mlp or experts, router (PEFT's "all-linear" keeps out only the
//   output layer; QLoRA, arXiv 2305.14314 section 4, adapts all of them).
//
// Adapters are weights of class adapter, trainable, one item per target with
// a count of layers; the precision plugin (which runs after) gives them their
// dtype, gradients and master copies, the optimizer its states. Every other
// weight is frozen. `alpha` scales B A by alpha / r and changes no memory.
//
// `dora` (PEFT's use_dora; Liu et al. 2024, "DoRA: Weight-Decomposed Low-Rank
// Adaptation", arXiv 2402.09353, section 4): each adapted matrix also trains a
// magnitude vector of d_out (item <adapter>.dora_magnitude), and its forward
// (peft src/peft/tuners/lora/dora.py @ d787f51b, DoraLinearLayer.forward 132-166;
// torchtune torchtune/modules/peft/dora.py @ 1814feb1, DoRALinear.forward)
// multiplies the base output and lora_B's output by the trainable magnitude
// over the detached weight norm, which saves both for backward: the
// lora.dora_* attributes tell activation models their widths.
#include <memplan/sdk.hpp>
#include <memplan/support/comma_list.hpp>
#include <memplan/support/format.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace {

namespace sdk = memplan::sdk;
using sdk::ParamClass;

// PEFT's LoraConfig names (huggingface/peft src/peft/tuners/lora/config.py:
// r, lora_alpha, lora_dropout, target_modules, use_dora) are accepted beside memplan's,
// so a config can be copied over; giving both names of one option is an error.
constexpr std::array<memplan_option_spec, 14> kOptions{{
    {"rank", MEMPLAN_OPTION_INT, "adapter rank r (positive)", "required", nullptr},
    {"alpha", MEMPLAN_OPTION_DOUBLE, "scaling numerator: the update is (alpha / r) B A; no memory effect",
     "not reported", nullptr},
    {"targets", MEMPLAN_OPTION_STRING,
     "adapted matrices, comma-separated: q, k, v, o, attention, mlp, experts, router, lm_head, all-linear",
     "required", nullptr},
    {"dropout", MEMPLAN_OPTION_DOUBLE,
     "lora_dropout, 0 to < 1: above 0 each adapted matrix keeps a 1-byte mask and its own dropped copy of its input "
     "for backward (PEFT LoRA Linear.forward)",
     "0 (PEFT's default)", nullptr},
    {"fused_qkv", MEMPLAN_OPTION_BOOL,
     "q, k and v adapters on one fused qkv linear, as LitGPT's LoRAQKVLinear (lit_gpt/lora.py @ 8641822): one "
     "lora_dropout and one lora_A read the shared input (kept once), and when not all of q, k, v are adapted "
     "zero_pad's index_copy keeps its source, the adapted outputs' width",
     "false", nullptr},
    {"kernels", MEMPLAN_OPTION_STRING,
     "fused LoRA autograd functions in place of PEFT's forward: \"axolotl\" (lora_qkv_kernel, lora_o_kernel, "
     "lora_mlp_kernel: src/axolotl/kernels/lora.py @ 8c6a6ea6e, which axolotl turns on when lora_dropout is 0) or "
     "\"unsloth\" (unsloth/kernels/fast_lora.py @ 015bdef0d9): q, k and v adapted together, o, and a gated MLP are "
     "one function each, which keeps its input (the MLP also its gate and up outputs), adds the adapters in the "
     "activations' dtype (axolotl through a temporary of the output's width, Unsloth in place from 2025.3.1: "
     "unsloth_adds_in_place) and recomputes the SwiGLU product in backward; at lora_dropout above 0, and for "
     "targets no function covers, both keep PEFT's forward (reported as lora_kernels)",
     "\"none\" (PEFT's LoRA Linear.forward)", nullptr},
    {"unsloth_adds_in_place", MEMPLAN_OPTION_BOOL,
     "with kernels = \"unsloth\": whether its matmul_lora adds the adapters' product to the base output in place "
     "(out.addmm_, from 2025.3.1: unsloth 4f166026d7) or through a temporary of the output's width (out += (X @ A) @ "
     "(s B), before: unsloth/kernels/utils.py @ e3162dc5bf), which the recomputed layer holds beside its saves; "
     "axolotl's kernels always add through the temporary",
     "true", nullptr},
    {"modules_to_save", MEMPLAN_OPTION_STRING,
     "modules trained whole beside the adapters, PEFT's modules_to_save: \"embeddings\" and/or \"lm_head\" (or "
     "PEFT's module names embed_tokens, wte, tok_embeddings, lm_head, output); PEFT's ModulesToSaveWrapper trains a "
     "deepcopy and keeps the frozen original beside it (item modules_to_save.original.<part>)",
     "none", nullptr},
    {"dora", MEMPLAN_OPTION_BOOL,
     "DoRA (Liu et al. 2024, arXiv 2402.09353), as PEFT's LoraConfig(use_dora=True) and torchtune's DoRALinear run "
     "it: a trainable magnitude vector of d_out per adapted matrix (items <adapter>.dora_magnitude), and a forward "
     "whose magnitude scaling keeps each adapted matrix's base output and lora_B's output for backward "
     "(lora.dora_outputs, read by the megatron activation model's eager and compiled layers); not with lm_head or "
     "experts in targets, fused_qkv, or kernels = \"axolotl\"",
     "false", nullptr},
    {"r", MEMPLAN_OPTION_INT, "PEFT's name for rank", "rank", nullptr},
    {"lora_alpha", MEMPLAN_OPTION_DOUBLE, "PEFT's name for alpha", "alpha", nullptr},
    {"lora_dropout", MEMPLAN_OPTION_DOUBLE, "PEFT's name for dropout", "dropout", nullptr},
    {"target_modules", MEMPLAN_OPTION_STRING,
     "PEFT's name for targets: module names (q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj, lm_head) "
     "or \"all-linear\", a string or a list",
     "targets", nullptr},
    {"use_dora", MEMPLAN_OPTION_BOOL, "PEFT's name for dora", "dora", nullptr},
}};

// A list option's fields: a TOML list of strings arrives joined with commas (support::comma_fields).
using memplan::support::comma_fields;

// A memplan option or its PEFT name, not both.
template <typename Read>
auto either(sdk::Options& options, const char* name, const char* peft_name, Read read) {
  auto value = read(name);
  auto peft_value = read(peft_name);
  if (value && peft_value)
    options.fail(peft_name, std::string("is PEFT's name for ") + name + ", which is given too; keep one of them");
  return value ? value : peft_value;
}

// PEFT's module names for Llama-style models (transformers LlamaAttention and
// LlamaMLP) in memplan's targets; the MLP's projections are adapted together.
std::string targets_from_modules(sdk::Options& options, const std::string& modules) {
  std::string targets;
  int mlp_projections = 0;
  for (const std::string_view field : comma_fields(modules)) {
    const std::string name(field);
    std::string target;
    if (name == "q_proj" || name == "k_proj" || name == "v_proj" || name == "o_proj") target = name.substr(0, 1);
    else if (name == "gate_proj" || name == "up_proj" || name == "down_proj") ++mlp_projections;
    else if (name == "lm_head" || name == "all-linear") target = name;
    else
      options.fail("target_modules", "has \"" + name + "\", a module name memplan does not know; use q_proj, k_proj, "
                                     "v_proj, o_proj, gate_proj, up_proj, down_proj, lm_head or \"all-linear\", or "
                                     "memplan's targets (targets = \"...\")");
    if (!target.empty()) targets += (targets.empty() ? "" : ",") + target;
  }
  if (mlp_projections > 0 && mlp_projections < 3)
    options.fail("target_modules", "names some of gate_proj, up_proj and down_proj; memplan adapts the MLP's "
                                   "projections together: list all three (or use targets = \"mlp\")");
  if (mlp_projections == 3) targets += std::string(targets.empty() ? "" : ",") + "mlp";
  return targets;
}

enum Target : uint32_t {
  kQ = 1u << 0,
  kK = 1u << 1,
  kV = 1u << 2,
  kO = 1u << 3,
  kMlp = 1u << 4,
  kExperts = 1u << 5,
  kRouter = 1u << 6,
  kLmHead = 1u << 7,
};

constexpr const char* kTargetList = "q, k, v, o, attention, mlp, experts, router, lm_head, all-linear";

struct Adapter {
  const char* name;
  uint32_t target;
  bool layered;
  double elements;  // per layer (or once for lm_head)
  // Per token of a layer, for activation models: the adapted matrices' input
  // widths (each lora_A keeps its input), the same counting an input that
  // several adapted matrices share once, and how many matrices (each lora_B
  // keeps an r-wide input).
  double inputs;
  double distinct_inputs;
  double matrices;
  // DoRA, per layer: the output widths of the adapted matrices a token passes (per token: lora.dora_outputs),
  // the magnitude vectors' elements (d_out per matrix), d_in x d_out summed (lora.dora_weights), the largest
  // d_in and the largest d_in x d_out (the weight norm's transients, one matrix at a time).
  double outputs = 0;
  double magnitude = 0;
  double weights = 0;
  double widest_input = 0;
  double largest_matrix = 0;
};

class LoraStrategy {
 public:
  static constexpr sdk::PluginInfo info{"lora", "1.9.0",
                                        "LoRA adapters r (d_in + d_out) on frozen weights (Hu et al. 2021)",
                                        sdk::Kind::strategy, sdk::Phase::trainability};
  static std::span<const memplan_option_spec> options() { return kOptions; }

  // The attributes are resolved here, once; the report's two in the order
  // apply() sets them, which is the order the report prints them in.
  explicit LoraStrategy(sdk::Options& options)
      : parameters_attr_(options.attribute(MEMPLAN_ATTR_REPORT_PREFIX "lora_parameters")),
        inputs_attr_(options.attribute(MEMPLAN_ATTR_LORA_INPUTS)),
        distinct_inputs_attr_(options.attribute(MEMPLAN_ATTR_LORA_DISTINCT_INPUTS)),
        rank_inputs_attr_(options.attribute(MEMPLAN_ATTR_LORA_RANK_INPUTS)),
        dropout_attr_(options.attribute(MEMPLAN_ATTR_LORA_DROPOUT)),
        mlp_attr_(options.attribute(MEMPLAN_ATTR_LORA_MLP)),
        o_attr_(options.attribute(MEMPLAN_ATTR_LORA_O)),
        qkv_attr_(options.attribute(MEMPLAN_ATTR_LORA_QKV)),
        kernels_attr_(options.attribute(MEMPLAN_ATTR_LORA_KERNELS)),
        kernels_report_attr_(options.attribute(MEMPLAN_ATTR_REPORT_PREFIX "lora_kernels")),
        dora_outputs_attr_(options.attribute(MEMPLAN_ATTR_LORA_DORA_OUTPUTS)),
        dora_weights_attr_(options.attribute(MEMPLAN_ATTR_LORA_DORA_WEIGHTS)),
        dora_widest_input_attr_(options.attribute(MEMPLAN_ATTR_LORA_DORA_WIDEST_INPUT)),
        dora_largest_matrix_attr_(options.attribute(MEMPLAN_ATTR_LORA_DORA_LARGEST_MATRIX)),
        rank_attr_(options.attribute(MEMPLAN_ATTR_LORA_RANK)),
        scaling_attr_(options.attribute(MEMPLAN_ATTR_REPORT_PREFIX "lora_scaling")) {
    const memplan_model& model = options.model();
    if (!model.has_architecture)
      options.fail("needs the model's architecture (the shapes of the adapted matrices) but the scenario gives "
                   "only params; use a preset or an inline architecture in [model]");
    // The adapter shapes below are those of standard attention and of layers
    // that are all alike; DeepSeek's latent projections (q_a_proj, q_b_proj,
    // kv_a_proj_with_mqa, kv_b_proj) and dense first layers have other shapes.
    if (model.kv_lora_rank > 0 || model.dense_layers > 0)
      options.fail(std::string("adapts the q, k, v, o, MLP and expert matrices of layers that are all alike, but "
                               "this model has ") +
                   (model.kv_lora_rank > 0 ? "multi-head latent attention (kv_lora_rank)" : "dense first layers") +
                   ", whose adapted shapes this plugin does not model yet; remove the lora strategy, or train a part of the "
                   "model with 'freeze' (e.g. train = \"attention\")");
    const std::optional<int64_t> rank =
        either(options, "rank", "r", [&](const char* key) { return options.integer(key); });
    if (!rank) options.fail("needs rank = r, the adapters' rank (e.g. 8, 16 or 64)");
    if (*rank < 1) options.fail("rank", "must be a positive integer, got " + std::to_string(*rank));
    const std::optional<double> alpha =
        either(options, "alpha", "lora_alpha", [&](const char* key) { return options.number(key); });
    if (alpha && !(std::isfinite(*alpha) && *alpha > 0))
      options.fail("alpha", "must be a positive number (the update is scaled by alpha / rank), got " +
                                memplan::support::number(*alpha));
    if (alpha) scaling_ = *alpha / static_cast<double>(*rank);
    dropout_ = either(options, "dropout", "lora_dropout", [&](const char* key) { return options.number(key); })
                   .value_or(0);
    if (!(dropout_ >= 0 && dropout_ < 1))
      options.fail("dropout", "must be a probability from 0 up to (not including) 1, got " +
                                  memplan::support::number(dropout_));

    std::optional<std::string> targets =
        either(options, "targets", "target_modules", [&](const char* key) { return options.string(key); });
    if (targets && !options.string("targets")) targets = targets_from_modules(options, *targets);
    if (!targets) options.fail(std::string("needs targets = \"...\", the adapted matrices: ") + kTargetList);
    const uint32_t wanted = parse_targets(options, *targets, model);
    // DoRA (Liu et al. 2024, arXiv 2402.09353, section 4; PEFT's LoraConfig use_dora): a magnitude vector of d_out
    // per adapted matrix beside lora_A and lora_B. Read before the kernels, which leave DoRA adapters to PEFT.
    dora_ = either(options, "dora", "use_dora", [&](const char* key) { return options.boolean(key); }).value_or(false);
    if (dora_) refuse_dora(options, wanted);

    const double r = static_cast<double>(*rank);
    rank_ = r;
    const double h = static_cast<double>(model.hidden);
    const double q = static_cast<double>(model.heads * model.head_dim);
    const double kv = static_cast<double>(model.kv_heads * model.head_dim);
    const double projections = model.gated_mlp ? 3 : 2;
    const double experts = static_cast<double>(model.experts);
    const double f = static_cast<double>(model.ffn_hidden);
    const double fe = static_cast<double>(model.expert_ffn_hidden);
    const double top_k = static_cast<double>(model.experts_top_k);
    // MLP inputs: gate and up read the hidden state (shared), down reads f.
    const double mlp_inputs = (projections - 1) * h + f;
    // The MLP's outputs: gate and up (or the first projection) f wide, down h wide.
    const double mlp_outputs = (projections - 1) * f + h;
    const std::array<Adapter, 8> all{{
        {"lora.attn.q", kQ, true, r * (h + q), h, h, 1, q, q, h * q, h, h * q},
        {"lora.attn.k", kK, true, r * (h + kv), h, h, 1, kv, kv, h * kv, h, h * kv},
        {"lora.attn.v", kV, true, r * (h + kv), h, h, 1, kv, kv, h * kv, h, h * kv},
        {"lora.attn.o", kO, true, r * (q + h), q, q, 1, h, h, q * h, q, q * h},
        {"lora.mlp", kMlp, true, projections * r * (h + f), mlp_inputs, h + f, projections, mlp_outputs, mlp_outputs,
         projections * h * f, f, h * f},
        {"lora.moe.router", kRouter, true, r * (h + experts), h, h, 1, experts, experts, h * experts, h, h * experts},
        // DoRA is refused on the experts and the LM head (below): no DoRA figures.
        {"lora.moe.experts", kExperts, true, experts * projections * r * (h + fe),
         top_k * ((projections - 1) * h + fe), top_k * (h + fe), top_k * projections},
        {"lora.lm_head", kLmHead, false, r * (h + static_cast<double>(model.vocab)), 0, 0, 0},
    }};
    for (const Adapter& adapter : all)
      if ((wanted & adapter.target) != 0) {
        names_[adapter_count_] = options.intern(adapter.name);
        if (dora_)
          magnitude_names_[adapter_count_] = options.intern((std::string(adapter.name) + ".dora_magnitude").c_str());
        adapters_[adapter_count_++] = adapter;
      }
    // The fused LoRA functions cover whole groups: q, k and v adapted together, o, a gated MLP. A covered
    // adapter keeps nothing of its own (the function keeps its input in the activations' dtype, which the
    // activation model counts as the group's input: lora.kernels).
    const std::string kernels = options.string("kernels").value_or("none");
    if (kernels != "none" && kernels != "axolotl" && kernels != "unsloth")
      options.fail("kernels", "is \"" + kernels + "\"; use \"axolotl\" or \"unsloth\" (their fused LoRA functions), or "
                              "\"none\" (PEFT's forward)");
    // Both frameworks patch only what their functions cover and keep PEFT's forward otherwise, with a warning
    // (axolotl monkeypatch/lora_kernels.py @ 8c6a6ea6e: can_patch = lora_dropout == 0 and bias == "none", then
    // per group; unsloth/models/llama.py @ 015bdef0d9 line 3695: lora_dropout == 0 and bias == "none", line 3244
    // warns): so does memplan, and reports which forward the adapters run (details.lora_kernels).
    if (kernels != "none") {
      if (options.boolean("fused_qkv").value_or(false))
        options.fail("kernels", "and fused_qkv describe two different q, k, v adapters (axolotl's LoRA_QKV "
                                "function, LitGPT's LoRAQKVLinear); keep one of them");
      if (dropout_ == 0 && !dora_) {
        if ((wanted & (kQ | kK | kV)) == (kQ | kK | kV)) kernel_groups_ |= MEMPLAN_LORA_KERNEL_QKV;
        if ((wanted & kO) != 0) kernel_groups_ |= MEMPLAN_LORA_KERNEL_O;
        if ((wanted & kMlp) != 0 && model.gated_mlp) kernel_groups_ |= MEMPLAN_LORA_KERNEL_MLP;
      }
      // Unsloth patches no projection that has a DoRA magnitude (unsloth/models/llama.py @ 015bdef0d9 lines
      // 3714-3716, 3744-3746, 3764: len(lora_magnitude_vector) == 0), so PEFT's DoRA forward runs; axolotl's
      // kernels with DoRA are refused in refuse_dora.
      if (dora_)
        kernels_report_ = "none: DoRA adapters, which " + kernels + " leaves to PEFT's forward (its patch check)";
      else if (dropout_ > 0)
        kernels_report_ = "none: lora_dropout is not 0, where " + kernels + " keeps PEFT's forward (its patch check)";
      else if (kernel_groups_ == 0)
        kernels_report_ = "none: targets \"" + *targets + "\" adapt no group the fused functions cover (q, k and v "
                          "together, o, a gated MLP); " + kernels + " keeps PEFT's forward";
      else
        kernels_report_ = kernels;
      // How matmul_lora adds the adapters: in place in Unsloth from 2025.3.1 (4f166026d7, 2025-03-01:
      // out.addmm_), through a temporary of the output's width in axolotl and in Unsloth before (e3162dc5bf:
      // out += (X @ A) @ (s * B)); the unsloth profile sets unsloth_adds_in_place by version.
      const bool in_place = kernels == "unsloth" && options.boolean("unsloth_adds_in_place").value_or(true);
      if (in_place && kernel_groups_ != 0) kernel_groups_ |= MEMPLAN_LORA_KERNEL_ADD_IN_PLACE;
      if (kernel_groups_ != 0 && kernels == "unsloth" && !in_place)
        kernels_report_ += " (adapters added through a temporary, as before 2025.3.1)";
    }
    const auto covered = [&](uint32_t target) {
      if ((target & (kQ | kK | kV)) != 0) return (kernel_groups_ & MEMPLAN_LORA_KERNEL_QKV) != 0;
      if (target == kO) return (kernel_groups_ & MEMPLAN_LORA_KERNEL_O) != 0;
      if (target == kMlp) return (kernel_groups_ & MEMPLAN_LORA_KERNEL_MLP) != 0;
      return false;
    };
    // q, k and v read the same normed hidden state: count it once among the distinct inputs.
    const bool shared_qkv = (wanted & (kQ | kK | kV)) != 0 && !covered(kQ);
    mlp_adapted_ = (wanted & kMlp) != 0 && !covered(kMlp);
    o_adapted_ = (wanted & kO) != 0 && !covered(kO);
    qkv_adapted_ = shared_qkv;
    for (size_t a = 0; a < adapter_count_; ++a) {
      if (covered(adapters_[a].target)) continue;
      inputs_ += adapters_[a].inputs;
      rank_inputs_ += r * adapters_[a].matrices;
      if ((adapters_[a].target & (kQ | kK | kV)) == 0) distinct_inputs_ += adapters_[a].distinct_inputs;
    }
    if (shared_qkv) distinct_inputs_ += h;
    if (options.boolean("fused_qkv").value_or(false) && shared_qkv) {
      // LoRAQKVLinear.forward: F.linear(self.lora_dropout(x), self.lora_A) once for all adapted of q, k, v (one
      // dropped copy and mask of h); zero_pad scatters after_B into the qkv width with index_copy, whose backward
      // (derivatives.yaml: grad.index_select(dim, index).expand_as(source)) keeps the source, the adapted outputs.
      double adapted_outputs = 0;
      for (size_t a = 0; a < adapter_count_; ++a) {
        const uint32_t t = adapters_[a].target;
        if ((t & (kQ | kK | kV)) == 0) continue;
        inputs_ -= adapters_[a].inputs;
        adapted_outputs += (t & kQ) != 0 ? q : kv;
      }
      inputs_ += h;
      if ((wanted & (kQ | kK | kV)) != (kQ | kK | kV)) rank_inputs_ += adapted_outputs;
    }
    layers_ = static_cast<uint32_t>(model.layers);
    if (auto saved = options.string("modules_to_save")) {
      for (const std::string_view field : comma_fields(*saved)) {
        if (field == "embeddings" || field == "embed_tokens" || field == "wte" || field == "tok_embeddings")
          save_embeddings_ = true;
        else if (field == "lm_head" || field == "output")
          save_lm_head_ = true;
        else
          options.fail("modules_to_save", "has \"" + std::string(field) +
                                              "\"; memplan trains whole copies of \"embeddings\" (embed_tokens, wte, "
                                              "tok_embeddings) and \"lm_head\" (output); other parts: the 'freeze' "
                                              "strategy after 'lora' trains them in place");
      }
      if (save_lm_head_ && (wanted & kLmHead) != 0)
        options.fail("modules_to_save", "has lm_head, which targets also adapts; PEFT wraps a module in one or the "
                                        "other: keep lm_head in one of them");
      // A tied model's head is its embedding's Parameter: PEFT's deepcopy of either module unties the copy from
      // the other, a model memplan's tied weights do not describe (one item for both, and the tied gradient).
      if (model.tied_embeddings != 0)
        options.fail("modules_to_save", "trains a copy of the embedding or the LM head, but this model ties the two "
                                        "(tied_embeddings): PEFT's copy would untie them, which memplan does not "
                                        "model; train the shared weight in place instead ('freeze' after 'lora', "
                                        "train = \"embeddings\"), or give an untied model");
      original_embeddings_ = options.intern("modules_to_save.original.embeddings");
      original_lm_head_ = options.intern("modules_to_save.original.lm_head");
    }
  }

  void apply(sdk::Context& ctx) {
    // The base model is frozen: only the adapters train. In place, and the
    // adapters added under names interned once: no name copied per evaluation.
    double total = 0;
    for (sdk::ItemRef item : ctx.items())
      if (item.role() == sdk::Role::weights && item.param_class() != ParamClass::adapter && item.trainable())
        item.set_trainable(false);
    add_modules_to_save(ctx);
    // A trainable weight of class adapter per target (its count of layers), returning its elements in all.
    const auto add_adapter_item = [&](sdk::Name name, const Adapter& adapter, double elements) {
      const uint32_t count = adapter.layered ? layers_ : 1;
      ctx.add(sdk::NewItem{.name = name,
                           .role = sdk::Role::weights,
                           .lifetime = sdk::Lifetime::persistent,
                           .param_class = ParamClass::adapter,
                           .layer = adapter.layered ? 0 : -1,
                           .count = count,
                           .trainable = true,
                           .elements = elements});
      return elements * count;
    };
    for (size_t a = 0; a < adapter_count_; ++a) total += add_adapter_item(names_[a], adapters_[a], adapters_[a].elements);
    // DoRA's magnitude vectors (PEFT's lora_magnitude_vector, DoraLinearLayer.weight: the column norms of W + s B A,
    // d_out per adapted matrix, trainable; torchtune's DoRALinear.magnitude): an item of class adapter per target
    // beside its lora_A and lora_B, so the precision plugin gives them the adapters' dtype and training bytes
    // (PEFT's autocast_adapter_dtype upcasts them with the adapters) and the optimizer its states.
    double dora_outputs = 0, dora_weights = 0, dora_widest_input = 0, dora_largest_matrix = 0;
    for (size_t a = 0; dora_ && a < adapter_count_; ++a) {
      const Adapter& adapter = adapters_[a];
      total += add_adapter_item(magnitude_names_[a], adapter, adapter.magnitude);
      dora_outputs += adapter.outputs;
      dora_weights += adapter.weights;
      dora_widest_input = std::max(dora_widest_input, adapter.widest_input);
      dora_largest_matrix = std::max(dora_largest_matrix, adapter.largest_matrix);
    }
    ctx.set_attr(parameters_attr_, static_cast<int64_t>(std::llround(total)));
    // What the adapters keep for backward per token of a layer, for activation models (conventions in
    // docs/plugin-abi.md, "Attributes"): the adapted inputs, the same with shared inputs once, r x matrices.
    ctx.set_attr(inputs_attr_, inputs_);
    ctx.set_attr(distinct_inputs_attr_, distinct_inputs_);
    ctx.set_attr(rank_inputs_attr_, rank_inputs_);
    ctx.set_attr(dropout_attr_, dropout_);
    ctx.set_attr(mlp_attr_, static_cast<int64_t>(mlp_adapted_ ? 1 : 0));
    ctx.set_attr(o_attr_, static_cast<int64_t>(o_adapted_ ? 1 : 0));
    ctx.set_attr(qkv_attr_, static_cast<int64_t>(qkv_adapted_ ? 1 : 0));
    ctx.set_attr(kernels_attr_, static_cast<int64_t>(kernel_groups_));
    // DoRA's saves and transients for activation models (conventions.h, MEMPLAN_ATTR_LORA_DORA_*); 0 without dora.
    ctx.set_attr(dora_outputs_attr_, dora_outputs);
    ctx.set_attr(dora_weights_attr_, dora_weights);
    ctx.set_attr(dora_widest_input_attr_, dora_widest_input);
    ctx.set_attr(dora_largest_matrix_attr_, dora_largest_matrix);
    if (!kernels_report_.empty()) ctx.set_attr(kernels_report_attr_, kernels_report_.c_str());
    ctx.set_attr(rank_attr_, rank_);
    if (scaling_) ctx.set_attr(scaling_attr_, *scaling_);
  }

 private:
  // What DoRA does not run with, or memplan does not model it with: each refused with the reason and the fix.
  static void refuse_dora(sdk::Options& options, uint32_t wanted) {
    const char* key = options.boolean("dora") ? "dora" : "use_dora";
    if ((wanted & kLmHead) != 0)
      options.fail(key, "asks for DoRA with lm_head in targets: PEFT's DoRA on the head (a Linear) keeps the head's base "
                        "output and lora_B's output for the magnitude's gradient, two tensors of the logits' size that "
                        "memplan's loss paths do not count; take lm_head out of targets (or train the head whole: "
                        "modules_to_save = \"lm_head\")");
    if ((wanted & kExperts) != 0)
      options.fail(key, "asks for DoRA with experts in targets: transformers 5 keeps a layer's experts in fused 3-D "
                        "parameters, which PEFT adapts through target_parameters (ParamWrapper), and ParamWrapper raises "
                        "with use_dora (peft src/peft/tuners/lora/layer.py @ d787f51b, line 2273); memplan does not "
                        "model per-expert DoRA either: give DoRA the attention (and router) targets, or adapt the "
                        "experts with plain LoRA (dora = false)");
    if (options.boolean("fused_qkv").value_or(false))
      options.fail(key, "and fused_qkv describe two different q, k, v adapters: fused_qkv is LitGPT's LoRAQKVLinear "
                        "(lit_gpt/lora.py @ 8641822), which has no magnitude vector, where DoRA (PEFT's, torchtune's) "
                        "scales each adapted matrix by its own; keep one of them");
    // axolotl's kernels as memplan models them (src/axolotl/kernels/lora.py @ 8c6a6ea6e) read no magnitude
    // (get_lora_parameters); axolotl refused them with peft_use_dora from e758343ca (2025-08-03,
    // utils/schemas/validation.py check_lora_kernels_dora) until b3289fd19 (2026-03-22, "LoRA kernel support for
    // bias, dropout, dora, embeddings"), whose DoRA kernels keep what memplan does not model.
    if (options.string("kernels").value_or("none") == "axolotl")
      options.fail("kernels", "is \"axolotl\" with DoRA: axolotl refused its LoRA kernels with peft_use_dora from "
                              "e758343ca (2025-08-03: \"not compatible with DoRA at the moment\") to b3289fd19 "
                              "(2026-03-22), whose DoRA kernels memplan does not model; count PEFT's DoRA forward "
                              "with kernels = \"none\" (axolotl's lora_qkv_kernel, lora_o_kernel, lora_mlp_kernel: "
                              "false)");
  }

  // PEFT's modules_to_save (src/peft/utils/other.py, ModulesToSaveWrapper @ v0.5.0 and since: update() adds
  // copy.deepcopy(self.original_module) under the adapter's name and the original's parameters get
  // requires_grad False): the forward runs the copy, which trains; the original stays on the device beside
  // it. The model's item stands for the trained copy (trainable: gradients, master copy and optimizer states
  // follow from the precision and optimizer plugins); the frozen original is an item of its own, class other
  // (a weight nothing computes with), which the precision plugin prices at the unquantized weights' dtype.
  void add_modules_to_save(sdk::Context& ctx) {
    if (!save_embeddings_ && !save_lm_head_) return;
    double embeddings = 0, lm_head = 0;
    for (sdk::ItemRef item : ctx.items()) {
      if (item.role() != sdk::Role::weights) continue;
      const bool embedding = save_embeddings_ && item.param_class() == ParamClass::embedding;
      const bool head = save_lm_head_ && item.param_class() == ParamClass::lm_head;
      if (!embedding && !head) continue;
      item.set_trainable(true);
      (embedding ? embeddings : lm_head) += item.elements() * item.count();
    }
    // Added after the pass: adding invalidates items().
    if (embeddings > 0)
      ctx.add(sdk::NewItem{.name = original_embeddings_, .role = sdk::Role::weights, .elements = embeddings});
    if (lm_head > 0)
      ctx.add(sdk::NewItem{.name = original_lm_head_, .role = sdk::Role::weights, .elements = lm_head});
  }

  static uint32_t parse_targets(sdk::Options& options, const std::string& text, const memplan_model& model) {
    const bool moe = model.experts > 0;
    uint32_t bits = 0;
    for (const std::string_view field : comma_fields(text)) {
      uint32_t found = 0;
      if (field == "q") found = kQ;
      else if (field == "k") found = kK;
      else if (field == "v") found = kV;
      else if (field == "o") found = kO;
      else if (field == "attention") found = kQ | kK | kV | kO;
      else if (field == "mlp") found = kMlp;
      else if (field == "experts") found = kExperts;
      else if (field == "router") found = kRouter;
      else if (field == "lm_head") found = kLmHead;
      else if (field == "all-linear") found = kQ | kK | kV | kO | (moe ? kExperts | kRouter : kMlp);
      else
        options.fail("targets", "has \"" + std::string(field) + "\", not a target; use " + kTargetList +
                                    " (comma-separated), or PEFT's module names in target_modules");
      if (found == kMlp && moe)
        options.fail("targets", "has \"mlp\", but the model's MLPs are MoE experts; use \"experts\"");
      if ((found == kExperts || found == kRouter) && !moe)
        options.fail("targets", "has \"" + std::string(field) +
                                    "\", but the model is dense (no [model.moe] experts); use \"mlp\"");
      bits |= found;
    }
    return bits;
  }

  sdk::Attribute parameters_attr_, inputs_attr_, distinct_inputs_attr_, rank_inputs_attr_, dropout_attr_, mlp_attr_,
      o_attr_, qkv_attr_, kernels_attr_, kernels_report_attr_, dora_outputs_attr_, dora_weights_attr_,
      dora_widest_input_attr_, dora_largest_matrix_attr_, rank_attr_, scaling_attr_;
  std::array<Adapter, 8> adapters_{};
  std::array<sdk::Name, 8> names_{};            // adapters_[i]'s interned name
  std::array<sdk::Name, 8> magnitude_names_{};  // with dora: adapters_[i]'s magnitude item, "<name>.dora_magnitude"
  bool dora_ = false;                           // dora (PEFT's use_dora)
  size_t adapter_count_ = 0;
  uint32_t layers_ = 0;
  std::optional<double> scaling_;
  double dropout_ = 0;
  double rank_ = 0;  // r
  double inputs_ = 0;
  double distinct_inputs_ = 0;
  double rank_inputs_ = 0;
  bool mlp_adapted_ = false;  // the dense MLP's matrices are adapted through PEFT's forward (lora.mlp)
  bool o_adapted_ = false;    // o is adapted through PEFT's forward (lora.o)
  bool qkv_adapted_ = false;  // q, k or v is adapted through PEFT's forward (lora.qkv)
  uint32_t kernel_groups_ = 0;  // MEMPLAN_LORA_KERNEL_* groups the fused functions cover (lora.kernels)
  std::string kernels_report_;  // report.lora_kernels: which forward the adapters run, when kernels is asked for
  bool save_embeddings_ = false;  // modules_to_save: the token embedding trains as a copy beside its original
  bool save_lm_head_ = false;     // modules_to_save: the LM head likewise
  sdk::Name original_embeddings_{}, original_lm_head_{};  // the frozen originals' items
};

}  // namespace

MEMPLAN_PLUGIN(LoraStrategy)
