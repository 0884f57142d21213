// The fast path of ABI 1.1, exercised: 'loader-in-place' is an optimizer that
// reads the plan array in place (Context::items), adds one state item per
// trainable weight with a name interned in its constructor, writes and reads
// attributes through handles (a double and a string), and asks the host for the timeline. Its
// `fault` option makes it break one rule of plugin_abi.h, for the tests of how
// the host finds and names the plugin at fault:
//   "none"              no fault
//   "nan"               writes an element count that is not a number
//   "nan-from-second"   the same, from its second evaluation on
//   "foreign-name"      gives an item a name it did not intern
#include <memplan/sdk.hpp>

#include <array>
#include <cmath>
#include <string>

namespace {

namespace sdk = memplan::sdk;

constexpr std::array<memplan_option_spec, 1> kOptions{{
    {"fault", MEMPLAN_OPTION_STRING, "the rule to break: none, nan, nan-from-second, foreign-name", "\"none\"",
     nullptr},
}};

class LoaderInPlace {
 public:
  static constexpr sdk::PluginInfo info{"loader-in-place", "1.1.0", "Loader test: the ABI 1.1 fast path",
                                        sdk::Kind::optimizer, sdk::Phase::optimizer, sdk::Reads::nothing};
  static std::span<const memplan_option_spec> options() { return kOptions; }

  explicit LoaderInPlace(sdk::Options& options)
      : fault_(options.string("fault").value_or("none")),
        state_name_(options.intern("in_place.state")),
        states_dtype_(options.attribute(MEMPLAN_ATTR_DTYPE_OPTIMIZER_STATES)),
        seen_(options.attribute("report.in_place_weights")),
        note_(options.attribute("report.in_place_note")) {}

  void apply(sdk::Context& ctx) {
    ++evaluations_;
    const double state_bytes = ctx.attr_double(states_dtype_, 0);
    double weights = 0;
    // Two states per trainable weight, the second added below from the sum.
    for (sdk::ItemRef item : ctx.items()) {
      if (item.role() != sdk::Role::weights || !item.trainable()) continue;
      weights += item.elements() * item.count();
    }
    ctx.set_attr(seen_, weights);
    // Attributes are cleared before each evaluation: unset, then set and read back.
    if (ctx.attr_string(note_, "unset") != "unset") ctx.fail("the string attribute outlived its evaluation");
    ctx.set_attr(note_, "2 states per trainable weight");
    if (ctx.attr_string(note_, "") != "2 states per trainable weight") ctx.fail("the string attribute was not kept");
    ctx.add(sdk::NewItem{.name = state_name_, .role = sdk::Role::optimizer_states, .elements = 2 * weights,
                         .bytes_per_element = state_bytes});
    // The timeline includes the item just added (the weights, gradients and states).
    const memplan_timeline timeline = ctx.timeline();
    if (timeline.sum == 0) ctx.fail("the host's timeline is empty");
    const bool nan = fault_ == "nan" || (fault_ == "nan-from-second" && evaluations_ >= 2);
    sdk::ItemRef last = ctx.items()[ctx.items().size() - 1];
    if (nan) last.set_elements(std::nan(""));
    if (fault_ == "foreign-name") last.raw().name = "in_place.foreign";
  }

 private:
  std::string fault_;
  sdk::Name state_name_;
  sdk::Attribute states_dtype_;
  sdk::Attribute seen_;
  sdk::Attribute note_;
  int evaluations_ = 0;
};

}  // namespace

MEMPLAN_PLUGIN(LoaderInPlace)
