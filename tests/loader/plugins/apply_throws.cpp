// FAULT 6: apply() throws a std::runtime_error. create() succeeds; the SDK's
// generated entry point must catch the exception and report it to the host.
#include <memplan/sdk.hpp>

#include <stdexcept>

namespace {

class LoaderApplyThrows {
 public:
  static constexpr memplan::sdk::PluginInfo info{"loader-apply-throws", "1.0.0", "Loader test: apply() throws",
                                                 memplan::sdk::Kind::optimizer, memplan::sdk::Phase::optimizer};
  static std::span<const memplan_option_spec> options() { return {}; }
  explicit LoaderApplyThrows(memplan::sdk::Options&) {}
  void apply(memplan::sdk::Context&) { throw std::runtime_error("state table overflow at item 0"); }  // the fault
};

}  // namespace

MEMPLAN_PLUGIN(LoaderApplyThrows)
