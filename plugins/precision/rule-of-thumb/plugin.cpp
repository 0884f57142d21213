// 'rule-of-thumb': seed 001's serving rule (Pradhan 2024, "The Complete Guide
// to GPU Requirements for Training and Inference of LLM"):
//
//   M = P x 4 bytes / (32 / Q) x 1.2
//
// P parameters loaded in Q bits, plus 20% "overhead of loading additional
// things in GPU memory"; 168 GB for Llama 70B in 16-bit (GB = 10^9 bytes).
// The seed shows the formula and that figure as images; its first reference
// (continuumlabs.ai, "Calculating GPU memory for serving LLMs") gives both.
// It is here so a scenario can put the rule next to the detailed estimate.
//
// Every weight gets Q/8 bytes per element, and next to it an `overhead` item
// of (overhead - 1) x its bytes. The overhead follows its weight (same class,
// layers and count), so layout plugins split it as they split the weight and
// M = 1.2 x weights holds on every rank, as the seed's M / n does.
#include <memplan/sdk.hpp>
#include <memplan/support/format.hpp>

#include <array>
#include <cmath>
#include <string>

namespace {

namespace sdk = memplan::sdk;

constexpr std::array<memplan_option_spec, 2> kOptions{{
    {"bits", MEMPLAN_OPTION_INT, "Q, the bits each parameter is loaded in: 4, 8, 16 or 32", "16", nullptr},
    {"overhead", MEMPLAN_OPTION_DOUBLE, "factor on the weights for everything else (1.2 = 20%)", "1.2", nullptr},
}};

class RuleOfThumbPrecision {
 public:
  static constexpr sdk::PluginInfo info{"rule-of-thumb", "1.1.2",
                                        "Seed 001's serving rule M = P x 4 bytes / (32 / Q) x 1.2, to compare with",
                                        sdk::Kind::precision, sdk::Phase::precision};
  static std::span<const memplan_option_spec> options() { return kOptions; }

  explicit RuleOfThumbPrecision(sdk::Options& options)
      : weights_dtype_(options.attribute(MEMPLAN_ATTR_DTYPE_WEIGHTS)),
        gradients_dtype_(options.attribute(MEMPLAN_ATTR_DTYPE_GRADIENTS)),
        master_weights_dtype_(options.attribute(MEMPLAN_ATTR_DTYPE_MASTER_WEIGHTS)),
        optimizer_states_dtype_(options.attribute(MEMPLAN_ATTR_DTYPE_OPTIMIZER_STATES)),
        activations_dtype_(options.attribute(MEMPLAN_ATTR_DTYPE_ACTIVATIONS)) {
    if (options.training())
      options.fail("seed 001's rule M = P x 4 bytes / (32 / Q) x 1.2 is for serving a model, so it needs mode = "
                   "\"infer\"; to estimate training use a precision recipe such as mixed-bf16 with an [optimizer]");
    const int64_t bits = options.integer("bits").value_or(16);
    if (bits != 4 && bits != 8 && bits != 16 && bits != 32)
      options.fail("bits", "must be 4, 8, 16 or 32 (the seed's Q), got " + std::to_string(bits));
    const double overhead = options.number("overhead").value_or(1.2);
    if (!std::isfinite(overhead) || overhead < 1.0)
      options.fail("overhead",
                   "must be a factor of at least 1 (1.2 adds 20%), got " + memplan::support::number(overhead));
    weights_ = static_cast<double>(bits) / 8.0;
    extra_ = weights_ * (overhead - 1.0);
    // Weight-only 4- and 8-bit loading still computes in 16 bits.
    activations_ = bits == 32 ? 4.0 : 2.0;
  }

  void apply(sdk::Context& ctx) {
    ctx.set_attr(weights_dtype_, weights_);
    ctx.set_attr(gradients_dtype_, weights_);
    ctx.set_attr(master_weights_dtype_, 0.0);
    ctx.set_attr(optimizer_states_dtype_, weights_);
    ctx.set_attr(activations_dtype_, activations_);
    // The overheads are appended after the weights, in the weights' order:
    // collected in batch_ (kept between evaluations) and added in one call.
    batch_.clear();
    for (sdk::ItemRef item : ctx.items()) {
      if (item.role() != sdk::Role::weights) continue;
      item.set_bytes_per_element(weights_);
      if (extra_ <= 0) continue;
      const sdk::Name name = overhead_(ctx, item);  // interned once per weight name
      sdk::ItemRef overhead = batch_.copy_of(item);
      overhead.set_name(name);
      overhead.set_role(sdk::Role::overhead);
      overhead.set_lifetime(sdk::Lifetime::persistent);
      overhead.set_trainable(false);
      overhead.set_bytes_per_element(extra_);
    }
    ctx.add(batch_);
  }

 private:
  // The dtype attributes, resolved once: no key lookup per evaluation.
  sdk::Attribute weights_dtype_, gradients_dtype_, master_weights_dtype_, optimizer_states_dtype_, activations_dtype_;
  double weights_ = 0;
  double extra_ = 0;
  double activations_ = 0;
  sdk::SuffixedNames overhead_{".overhead"};
  sdk::ItemBatch batch_;  // the overhead items, cleared each evaluation, its capacity kept
};

}  // namespace

MEMPLAN_PLUGIN(RuleOfThumbPrecision)
