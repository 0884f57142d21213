// 'none': adds no activations. For comparisons with sources that leave
// activations out (ZeRO paper Table 1, "16 bytes per parameter" tables); a
// scenario must say so explicitly, so activations are never dropped by accident.
#include <memplan/sdk.hpp>

namespace {

class NoActivations {
 public:
  static constexpr memplan::sdk::PluginInfo info{"none", "1.0.0",
                                                 "No activations (for model-state-only comparisons)",
                                                 memplan::sdk::Kind::activations, memplan::sdk::Phase::activations};
  static std::span<const memplan_option_spec> options() { return {}; }
  explicit NoActivations(memplan::sdk::Options&) {}
  void apply(memplan::sdk::Context&) {}
};

}  // namespace

MEMPLAN_PLUGIN(NoActivations)
