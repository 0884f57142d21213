// A bundle test plugin: an optimizer keeping BUNDLE_STATES state tensors per
// trainable weight, named BUNDLE_PLUGIN_NAME (both set by suite.cmake). The
// state counts (5, 7) are used by no built-in optimizer, so the bytes a test
// sees can only come from the bundle's library.
#include <memplan/sdk.hpp>

namespace {

class BundleStates {
 public:
  static constexpr memplan::sdk::PluginInfo info{BUNDLE_PLUGIN_NAME, "1.0.0", "Bundle test optimizer",
                                                 memplan::sdk::Kind::optimizer, memplan::sdk::Phase::optimizer};
  static std::span<const memplan_option_spec> options() { return {}; }
  explicit BundleStates(memplan::sdk::Options&) {}
  void apply(memplan::sdk::Context& ctx) {
    const double state_bytes = ctx.required_attr_double(MEMPLAN_ATTR_DTYPE_OPTIMIZER_STATES);
    const size_t weights = ctx.size();
    for (size_t i = 0; i < weights; ++i) {
      memplan::sdk::Item item = ctx.item(i);
      if (item.role != memplan::sdk::Role::weights || !item.trainable) continue;
      item.role = memplan::sdk::Role::optimizer_states;
      item.elements *= BUNDLE_STATES;
      item.bytes_per_element = state_bytes;
      ctx.add(item);
    }
  }
};

}  // namespace

MEMPLAN_PLUGIN(BundleStates)
