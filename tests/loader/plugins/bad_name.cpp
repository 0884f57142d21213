// FAULT 8: invalid plugin name 'Bad_Name' (upper case and an underscore;
// names are lower-case letters, digits and dashes).
#include <memplan/sdk.hpp>

namespace {

class LoaderBadName {
 public:
  static constexpr memplan::sdk::PluginInfo info{"Bad_Name", "1.0.0", "Loader test: invalid name",
                                                 memplan::sdk::Kind::optimizer, memplan::sdk::Phase::optimizer};
  static std::span<const memplan_option_spec> options() { return {}; }
  explicit LoaderBadName(memplan::sdk::Options&) {}
  void apply(memplan::sdk::Context&) {}
};

}  // namespace

MEMPLAN_PLUGIN(LoaderBadName)
