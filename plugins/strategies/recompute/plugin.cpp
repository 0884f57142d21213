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
// `reentrant` says how the checkpoint recomputes (torch/utils/checkpoint.py
// @ v2.4: CheckpointFunction, use_reentrant=True, reruns the layer's whole
// forward in backward and runs backward on its output, which it holds until
// the layer's backward ends; the non-reentrant _checkpoint_without_reentrant_
// generator stops recomputing once the last saved tensor is made,
// _StopRecomputationError, the early stop of torch >= 2.1).
// `reentrant_when_packed` (1.4.0) stands for a framework whose documentation
// pairs 4-bit layers with reentrant checkpointing: when a layer's weights are
// packed below one byte per element the checkpoint is reentrant, whatever
// `reentrant` says (which then holds for the other runs); a 4-bit run that
// checkpoints non-reentrantly sets reentrant_when_packed = false. Answer.AI's fsdp_qlora
// (README.md @ 50efa1e) adds `--reentrant_checkpointing true` to its qlora and
// custom_qlora commands, "to avoid triggering a bug in bitsandbytes which
// results in high memory usage", while train.py's own default is False.
// The activation model reads the policy; this plugin only declares it.
#include <memplan/sdk.hpp>
#include <memplan/support/sharding.hpp>

#include <array>
#include <optional>
#include <string>

namespace {

constexpr std::array<memplan_option_spec, 3> kOptions{{
    {"policy", MEMPLAN_OPTION_STRING,
     "\"none\", \"selective\", \"full\" or \"op\" (torchtitan's per-op selective checkpointing)", "required",
     "selective,op,full"},
    {"reentrant", MEMPLAN_OPTION_BOOL,
     "torch.utils.checkpoint(use_reentrant=True) (Hugging Face's gradient_checkpointing default, the hf-transformers "
     "and unsloth profiles): the whole layer is rerun and its output held through its backward; false: the "
     "non-reentrant checkpoint, which stops recomputing once the last saved tensor is made",
     "false", nullptr},
    {"reentrant_when_packed", MEMPLAN_OPTION_BOOL,
     "reentrant checkpointing when a layer's weights are packed below one byte (4-bit), whatever reentrant says "
     "(which holds for the other runs); the fsdp-qlora profile sets it: its README pairs bitsandbytes runs with "
     "--reentrant_checkpointing true. A 4-bit run that checkpoints non-reentrantly sets it to false",
     "false", nullptr},
}};

class RecomputeStrategy {
 public:
  static constexpr memplan::sdk::PluginInfo info{"recompute", "1.4.0",
                                                 "Activation recomputation policy: none, selective, full or per-op",
                                                 memplan::sdk::Kind::strategy, memplan::sdk::Phase::layout,
                                                 memplan::sdk::Reads::nothing};
  static std::span<const memplan_option_spec> options() { return kOptions; }

  explicit RecomputeStrategy(memplan::sdk::Options& options)
      : policy_attr_(options.attribute(MEMPLAN_ATTR_RECOMPUTE_POLICY)),
        reentrant_attr_(options.attribute(MEMPLAN_ATTR_RECOMPUTE_REENTRANT)) {
    auto policy = options.string("policy");
    if (!policy) options.fail("policy", "is required: \"none\", \"selective\", \"full\" or \"op\"");
    if (*policy != "none" && *policy != "selective" && *policy != "full" && *policy != "op")
      options.fail("policy", "must be \"none\", \"selective\", \"full\" or \"op\", not \"" + *policy + "\"");
    policy_ = *policy;
    reentrant_ = options.boolean("reentrant");
    reentrant_when_packed_ = options.boolean("reentrant_when_packed").value_or(false);
  }

  // By handle: a warm set reuses the attribute's storage, no key compared.
  void apply(memplan::sdk::Context& ctx) {
    ctx.set_attr(policy_attr_, policy_.c_str());
    const bool reentrant = (reentrant_when_packed_ && packed_layers(ctx)) || reentrant_.value_or(false);
    ctx.set_attr(reentrant_attr_, static_cast<int64_t>(reentrant ? 1 : 0));
  }

  // A layer's linear weights packed below one byte per element (the precision phase has run).
  static bool packed_layers(const memplan::sdk::Context& ctx) {
    for (memplan::sdk::ItemRef item : ctx.items())
      if (item.layer() >= 0 && memplan::support::sharding::is_packed_linear(item)) return true;
    return false;
  }

 private:
  memplan::sdk::Attribute policy_attr_;
  memplan::sdk::Attribute reentrant_attr_;
  std::string policy_;
  std::optional<bool> reentrant_;  // the runs reentrant_when_packed leaves
  bool reentrant_when_packed_ = false;
};

}  // namespace

MEMPLAN_PLUGIN(RecomputeStrategy)
