// FAULT 3: newer ABI minor. An ordinary SDK plugin whose exported descriptor
// claims abi_minor = MEMPLAN_ABI_MINOR + 1, as if built against a newer SDK
// than this host implements.
#include <memplan/sdk.hpp>

namespace {

class LoaderNewerMinor {
 public:
  static constexpr memplan::sdk::PluginInfo info{"loader-newer-minor", "1.0.0", "Loader test: built for a newer ABI minor",
                                                 memplan::sdk::Kind::optimizer, memplan::sdk::Phase::optimizer};
  static std::span<const memplan_option_spec> options() { return {}; }
  explicit LoaderNewerMinor(memplan::sdk::Options&) {}
  void apply(memplan::sdk::Context&) {}
};

}  // namespace

extern "C" MEMPLAN_EXPORT const memplan_plugin_descriptor* memplan_plugin_v1(void) {
  static const memplan_plugin_descriptor descriptor = [] {
    memplan_plugin_descriptor d = *memplan::sdk::detail::descriptor<LoaderNewerMinor>();
    d.abi_minor = MEMPLAN_ABI_MINOR + 1;  // the fault
    return d;
  }();
  return &descriptor;
}
