// 'recompute': activation recomputation policy (Korthikanti et al. 2022,
// arXiv 2205.05198, section 4): "none" stores every activation, "selective"
// recomputes the attention core (softmax, its dropout, attention over V),
// "full" stores only each layer's input and recomputes the layer in backward.
// "op" is torchtitan's per-op selective activation checkpointing
// (torchtitan @ 9dec370 / v0.2.2, models/llama3/infra/parallelize.py
// _apply_ac_to_transformer_block with selective_ac_option "op"): inside each
// checkpointed layer it saves the outputs of every other matrix multiply (the
// 1st, 3rd, ...) and of scaled_dot_product_attention, and recomputes every
// other op in backward.
// The activation model reads the policy; this plugin only declares it.
#include <memplan/sdk.hpp>

#include <array>
#include <string>

namespace {

constexpr std::array<memplan_option_spec, 1> kOptions{{
    {"policy", MEMPLAN_OPTION_STRING,
     "\"none\", \"selective\", \"full\" or \"op\" (torchtitan's per-op selective checkpointing)", "required",
     "selective,op,full"},
}};

class RecomputeStrategy {
 public:
  static constexpr memplan::sdk::PluginInfo info{"recompute", "1.2.0",
                                                 "Activation recomputation policy: none, selective, full or per-op",
                                                 memplan::sdk::Kind::strategy, memplan::sdk::Phase::layout,
                                                 memplan::sdk::Reads::nothing};
  static std::span<const memplan_option_spec> options() { return kOptions; }

  explicit RecomputeStrategy(memplan::sdk::Options& options)
      : policy_attr_(options.attribute(MEMPLAN_ATTR_RECOMPUTE_POLICY)) {
    auto policy = options.string("policy");
    if (!policy) options.fail("policy", "is required: \"none\", \"selective\", \"full\" or \"op\"");
    if (*policy != "none" && *policy != "selective" && *policy != "full" && *policy != "op")
      options.fail("policy", "must be \"none\", \"selective\", \"full\" or \"op\", not \"" + *policy + "\"");
    policy_ = *policy;
  }

  // By handle: a warm set reuses the attribute's storage, no key compared.
  void apply(memplan::sdk::Context& ctx) { ctx.set_attr(policy_attr_, policy_.c_str()); }

 private:
  memplan::sdk::Attribute policy_attr_;
  std::string policy_;
};

}  // namespace

MEMPLAN_PLUGIN(RecomputeStrategy)
