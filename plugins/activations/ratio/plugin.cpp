// 'ratio': activations as a multiple of the weights' bytes, the seeds' rule of
// thumb for when only a parameter count is known:
//   seed 000 (compute requirements guide): activations ~ 0.7-1.0 x weight size;
//   seed 001 (Pradhan 2024): "roughly similar to or slightly larger than the
//   memory for the parameters".
//
//   activations = factor x W x (micro_batch / reference_micro_batch) x (seq_len / reference_seq_len)
//
// W is the whole model's weights (parameters x the weights' dtype) by default:
// seed 001 says activations "do not scale down with the number of GPUs".
// `of = "rank"` takes the weights this GPU holds instead. The two scalings
// apply only when their reference is given (seed 001: doubling the batch or
// the sequence doubles the activations); without them the figure does not
// depend on the batch at all, so a "max" search over it finds no limit.
#include <memplan/sdk.hpp>
#include <memplan/support/format.hpp>
#include <memplan/support/items.hpp>

#include <array>
#include <cmath>
#include <optional>
#include <string>

namespace {

namespace sdk = memplan::sdk;
namespace support = memplan::support;

constexpr std::array<memplan_option_spec, 4> kOptions{{
    {"factor", MEMPLAN_OPTION_DOUBLE,
     "activations as a multiple of the weights' bytes (seed 000: 0.7 to 1.0; seed 001: about 1 or a little more)",
     "none: required", nullptr},
    {"of", MEMPLAN_OPTION_STRING,
     "whose weights: \"model\" (all parameters x the weights' dtype, whatever the parallelism) or \"rank\" (the "
     "weights on this GPU)",
     "\"model\"", nullptr},
    {"reference_micro_batch", MEMPLAN_OPTION_INT,
     "the micro-batch the factor was observed at; activations then scale with [batch] micro_batch",
     "none: no scaling with the batch", nullptr},
    {"reference_seq_len", MEMPLAN_OPTION_INT,
     "the sequence length the factor was observed at; activations then scale with [batch] seq_len",
     "none: no scaling with the sequence", nullptr},
}};

class RatioActivations {
 public:
  static constexpr sdk::PluginInfo info{"ratio", "1.1.1",
                                        "Activations = factor x the weights' bytes (the seeds' rule of thumb)",
                                        sdk::Kind::activations, sdk::Phase::activations};
  static std::span<const memplan_option_spec> options() { return kOptions; }

  explicit RatioActivations(sdk::Options& options)
      : name_(options.intern("activations.ratio")), weights_dtype_(options.attribute(MEMPLAN_ATTR_DTYPE_WEIGHTS)) {
    if (!options.training())
      options.fail("is a rule of thumb for training activations, but the scenario has mode = \"infer\"; use "
                   "[activations] use = \"inference\" to model serving");
    const std::optional<double> factor = options.number("factor");
    if (!factor)
      options.fail("needs factor = <activations / weight bytes>: seed 000 suggests 0.7 to 1.0, seed 001 about 1 "
                   "(\"roughly similar to or slightly larger than\" the parameters' memory)");
    if (!std::isfinite(*factor) || *factor < 0)
      options.fail("factor", "must be a non-negative number, got " + support::number(*factor));
    factor_ = *factor;
    const std::string of = options.string("of").value_or("model");
    if (of != "model" && of != "rank") options.fail("of", "must be \"model\" or \"rank\", not \"" + of + "\"");
    of_rank_ = of == "rank";
    if (options.integer("reference_micro_batch"))
      reference_micro_batch_ = options.positive_integer("reference_micro_batch", 1);
    if (options.integer("reference_seq_len")) {
      reference_seq_len_ = options.positive_integer("reference_seq_len", 1);
      if (options.workload().seq_len <= 0)
        options.fail("reference_seq_len", "scales with the sequence length, so [batch] seq_len must be set");
    }
  }

  void apply(sdk::Context& ctx) {
    const double weights = of_rank_ ? rank_weight_bytes(ctx)
                                    : ctx.model().params * ctx.required_attr_double(weights_dtype_, MEMPLAN_ATTR_DTYPE_WEIGHTS);
    double bytes = factor_ * weights;
    const memplan_workload& workload = ctx.workload();
    if (reference_micro_batch_)
      bytes *= static_cast<double>(workload.micro_batch) / static_cast<double>(*reference_micro_batch_);
    if (reference_seq_len_) bytes *= static_cast<double>(workload.seq_len) / static_cast<double>(*reference_seq_len_);
    support::add_bytes_if_any(
        ctx, {.name = name_, .role = sdk::Role::activations, .lifetime = sdk::Lifetime::activation, .bytes = bytes});
  }

 private:
  // The bytes of the weights the reported GPU holds (after layout and sharding).
  static double rank_weight_bytes(const sdk::Context& ctx) {
    return support::gpu_bytes_of(ctx, sdk::Role::weights);
  }

  sdk::Name name_;
  sdk::Attribute weights_dtype_;  // resolved once: no key lookup per evaluation
  double factor_ = 0;
  bool of_rank_ = false;
  std::optional<int64_t> reference_micro_batch_;
  std::optional<int64_t> reference_seq_len_;
};

}  // namespace

MEMPLAN_PLUGIN(RatioActivations)
