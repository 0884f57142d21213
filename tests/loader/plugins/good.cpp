// NO FAULT: the well-formed control plugin 'loader-good'. A copy sits beside
// every rejected library so the tests can show that loading goes on after a
// rejection. Optimizer with 3 state tensors per trainable weight (a number no
// built-in optimizer uses, so its bytes cannot come from anywhere else).
#include <memplan/sdk.hpp>

namespace {

class LoaderGood {
 public:
  static constexpr memplan::sdk::PluginInfo info{"loader-good", "1.0.0", "Loader test control: 3 states per weight",
                                                 memplan::sdk::Kind::optimizer, memplan::sdk::Phase::optimizer};
  static std::span<const memplan_option_spec> options() { return {}; }
  explicit LoaderGood(memplan::sdk::Options&) {}
  void apply(memplan::sdk::Context& ctx) {
    const double state_bytes = ctx.required_attr_double(MEMPLAN_ATTR_DTYPE_OPTIMIZER_STATES);
    const size_t weights = ctx.size();
    for (size_t i = 0; i < weights; ++i) {
      memplan::sdk::Item item = ctx.item(i);
      if (item.role != memplan::sdk::Role::weights || !item.trainable) continue;
      item.role = memplan::sdk::Role::optimizer_states;
      item.elements *= 3;
      item.bytes_per_element = state_bytes;
      ctx.add(item);
    }
  }
};

}  // namespace

MEMPLAN_PLUGIN(LoaderGood)
