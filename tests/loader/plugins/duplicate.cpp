// FAULT 4: duplicate plugin name. Compiled three times with different
// LOADER_DUP_NAME / LOADER_DUP_VERSION definitions (see ../CMakeLists.txt):
//   memplan-fault-dup-first.so   'loader-dup' 1.0.0  (kept: found first)
//   memplan-fault-dup-second.so  'loader-dup' 2.0.0  (rejected: same name, same folder)
//   memplan-fault-builtin-name.so 'adam'     9.9.9  (rejected: the built-in 'adam' is found first)
#include <memplan/sdk.hpp>

namespace {

class LoaderDuplicate {
 public:
  static constexpr memplan::sdk::PluginInfo info{LOADER_DUP_NAME, LOADER_DUP_VERSION,
                                                 "Loader test: a plugin name that is already taken",
                                                 memplan::sdk::Kind::optimizer, memplan::sdk::Phase::optimizer};
  static std::span<const memplan_option_spec> options() { return {}; }
  explicit LoaderDuplicate(memplan::sdk::Options&) {}
  void apply(memplan::sdk::Context&) {}
};

}  // namespace

MEMPLAN_PLUGIN(LoaderDuplicate)
