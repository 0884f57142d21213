// Compiled by the sdk.plugin_class.* tests (tests/sdk/suite.cmake) with one
// CASE_<name> defined: a plugin class with one thing missing, which
// MEMPLAN_PLUGIN must refuse with the SDK's message naming it, or the
// well-formed class (CASE_valid), which must compile.
#include <memplan/sdk.hpp>

namespace {

class Checked {
 public:
#ifndef CASE_missing_info
  static constexpr memplan::sdk::PluginInfo info{"checked", "1.0.0", "a plugin class under test",
                                                 memplan::sdk::Kind::strategy, memplan::sdk::Phase::overhead};
#endif
#ifndef CASE_missing_options
  static std::span<const memplan_option_spec> options() { return {}; }
#endif
#ifndef CASE_missing_constructor
  explicit Checked(memplan::sdk::Options&) {}
#else
  Checked(int, int) {}  // a constructor, but not the one the SDK calls
#endif
#if !defined(CASE_missing_apply) && !defined(CASE_private_apply)
  void apply(memplan::sdk::Context&) {}
#endif
#ifdef CASE_private_apply
 private:
  void apply(memplan::sdk::Context&) {}
#endif
};

}  // namespace

MEMPLAN_PLUGIN(Checked)
