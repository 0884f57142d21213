// 'continuum-rule': seed 002's training-memory rule (Continuum Labs, "Calculating
// GPU memory for serving LLMs"), applied on top of the plan the other plugins
// built (phase overhead):
//
//   M_inf   ~ S = P x bytes per parameter           the weights
//   M_train ~ training_factor x M_inf                "3 to 4 times", conservatively 4
//   + gradients (P) + optimizer states (AdamW 2 P)   "additional memory"
//   x (1 + margin)                                   "a safety margin of 10-20%"
//
// The seed's 13B fp32 example: 52 GB x 4 = 208 GB, + 52 + 104 = 364 GB,
// x 1.2 = 436.8 GB. The factor 4 already covers the gradients and AdamW's
// states (4 + 4 + 8 = 16 bytes per parameter = 4 x 4 bytes), so the worked
// example counts them twice. With gradients_and_states = "added" (the default,
// the seed's worked example) this plugin adds (training_factor - 1) x the
// weights on top of the gradients and states already in the plan, which is
// that double count made visible as an item; with "included" (the seed's 7B
// example, M_train = 4 x M_inf alone) it only tops the plan up to
// training_factor x the weights when the plan holds less. The margin is
// `margin` x everything on the GPU before it.
//
// In mode = "infer" the rule is M_inf = S, the weights alone: the plugin adds
// nothing and applies no margin (the seed's margin is for training).
#include <memplan/sdk.hpp>
#include <memplan/support/format.hpp>
#include <memplan/support/items.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <string>

namespace {

namespace sdk = memplan::sdk;
namespace support = memplan::support;

constexpr std::array<memplan_option_spec, 3> kOptions{{
    {"training_factor", MEMPLAN_OPTION_DOUBLE, "M_train / M_inf (the seed: 3 to 4, conservatively 4)", "4", nullptr},
    {"margin", MEMPLAN_OPTION_DOUBLE, "safety margin on the training total (the seed: 0.1 to 0.2)", "0.2", nullptr},
    {"gradients_and_states", MEMPLAN_OPTION_STRING,
     "\"added\": on top of training_factor x the weights, as the seed's 13B example; \"included\": within it, as its "
     "7B example",
     "\"added\"", nullptr},
}};

class ContinuumRule {
 public:
  static constexpr sdk::PluginInfo info{"continuum-rule", "1.1.0",
                                        "Seed 002's rule: M_train = 4 x M_inf + gradients + states, x 1.2",
                                        sdk::Kind::strategy, sdk::Phase::overhead};
  static std::span<const memplan_option_spec> options() { return kOptions; }

  explicit ContinuumRule(sdk::Options& options)
      : factor_(options.number("training_factor").value_or(4.0)),
        margin_(options.number("margin").value_or(0.2)),
        factor_name_(options.intern("continuum.training_factor")),
        margin_name_(options.intern("continuum.margin")) {
    if (!std::isfinite(factor_) || factor_ < 1)
      options.fail("training_factor", "must be at least 1 (M_train >= M_inf), got " + support::number(factor_));
    if (!std::isfinite(margin_) || margin_ < 0)
      options.fail("margin", "must be a non-negative fraction (0.2 adds 20%), got " + support::number(margin_));
    const std::string mode = options.string("gradients_and_states").value_or("added");
    if (mode != "added" && mode != "included")
      options.fail("gradients_and_states", "must be \"added\" or \"included\", not \"" + mode + "\"");
    added_ = mode == "added";
  }

  void apply(sdk::Context& ctx) {
    if (!ctx.training()) return;  // M_inf = S: the weights, nothing more
    double weights = 0, states = 0, total = 0;
    for (const sdk::ItemRef item : ctx.items()) {
      if (!support::on_gpu(item)) continue;
      const double bytes = support::bytes(item);
      total += bytes;
      if (item.role() == sdk::Role::weights) weights += bytes;
      if (item.role() == sdk::Role::gradients || item.role() == sdk::Role::master_weights ||
          item.role() == sdk::Role::optimizer_states)
        states += bytes;
    }
    const double factor_item =
        added_ ? (factor_ - 1) * weights : std::max(0.0, factor_ * weights - (weights + states));
    support::add_bytes_if_any(ctx, {.name = factor_name_, .role = sdk::Role::overhead, .bytes = factor_item});
    const double margin = margin_ * (total + factor_item);
    support::add_bytes_if_any(ctx, {.name = margin_name_, .role = sdk::Role::overhead, .bytes = margin});
  }

 private:
  double factor_;
  double margin_;
  sdk::Name factor_name_;
  sdk::Name margin_name_;
  bool added_ = true;
};

}  // namespace

MEMPLAN_PLUGIN(ContinuumRule)
