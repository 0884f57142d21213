// FAULT 5: create() reports an error on an option through the SDK
// (options.fail("states", ...)) when `states` is above 4. With a valid value
// it is an ordinary optimizer with `states` state tensors per trainable weight.
#include <memplan/sdk.hpp>

#include <string>

namespace {

constexpr memplan_option_spec kOptions[] = {
    {"states", MEMPLAN_OPTION_INT, "state tensors per trainable weight, 0 to 4", "1", nullptr},
};

class LoaderCreateError {
 public:
  static constexpr memplan::sdk::PluginInfo info{"loader-create-error", "1.0.0",
                                                 "Loader test: create() rejects states > 4",
                                                 memplan::sdk::Kind::optimizer, memplan::sdk::Phase::optimizer};
  static std::span<const memplan_option_spec> options() { return kOptions; }
  explicit LoaderCreateError(memplan::sdk::Options& options) : states_(options.integer("states").value_or(1)) {
    if (states_ < 0 || states_ > 4)
      options.fail("states", "must be between 0 and 4, got " + std::to_string(states_));  // the fault
  }
  void apply(memplan::sdk::Context& ctx) {
    const double state_bytes = ctx.required_attr_double(MEMPLAN_ATTR_DTYPE_OPTIMIZER_STATES);
    const size_t weights = ctx.size();
    for (size_t i = 0; i < weights; ++i) {
      memplan::sdk::Item item = ctx.item(i);
      if (item.role != memplan::sdk::Role::weights || !item.trainable) continue;
      item.role = memplan::sdk::Role::optimizer_states;
      item.elements *= static_cast<double>(states_);
      item.bytes_per_element = state_bytes;
      ctx.add(item);
    }
  }

 private:
  int64_t states_;
};

}  // namespace

MEMPLAN_PLUGIN(LoaderCreateError)
