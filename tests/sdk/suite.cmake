# The plugin SDK itself (issue 10): the support library memplan::plugin_support
# (sdk/support, docs/plugin-support.md) and the compile-time check of a plugin
# class in MEMPLAN_PLUGIN. Included from tests/suites.cmake.
memplan_add_test(test_plugin_support sdk/plugin_support_test.cpp)

# sdk.plugin_class.<case>: sdk/plugin_class_check.cpp compiled with -DCASE=<case>
# by the compiler that builds memplan. A class missing a member must fail to
# compile with the SDK's message naming that member; the well-formed class
# must compile (its output then holds no "error").
function(sdk_plugin_class_test name case)
  add_test(NAME ${name}
    COMMAND ${CMAKE_CXX_COMPILER} -std=c++20 -fsyntax-only -DCASE_${case}
            -I${PROJECT_SOURCE_DIR}/sdk/include ${CMAKE_CURRENT_SOURCE_DIR}/sdk/plugin_class_check.cpp)
endfunction()

# Compiles: exit status 0 and no diagnostic at all.
sdk_plugin_class_test(sdk.plugin_class.valid valid)
set_tests_properties(sdk.plugin_class.valid PROPERTIES FAIL_REGULAR_EXPRESSION "error|warning")

set(sdk_plugin_class_cases
  "missing_info|Class needs a member `static constexpr memplan::sdk::PluginInfo info"
  "missing_options|Class needs `static std::span<const memplan_option_spec> options\\(\\)`"
  "missing_constructor|Class needs a public constructor `explicit Class\\(memplan::sdk::Options&\\)`"
  "missing_apply|Class needs a public member `void apply\\(memplan::sdk::Context&\\)`"
  "private_apply|Class needs a public member `void apply\\(memplan::sdk::Context&\\)`")
foreach(entry ${sdk_plugin_class_cases})
  string(FIND "${entry}" "|" bar)
  string(SUBSTRING "${entry}" 0 ${bar} case)
  math(EXPR after "${bar} + 1")
  string(SUBSTRING "${entry}" ${after} -1 expected)
  # Fails to compile...
  sdk_plugin_class_test(sdk.plugin_class.${case} ${case})
  set_tests_properties(sdk.plugin_class.${case} PROPERTIES WILL_FAIL TRUE)
  # ...and says why: WILL_FAIL alone passes on any failure, the message must be the SDK's.
  sdk_plugin_class_test(sdk.plugin_class.${case}.message ${case})
  set_tests_properties(sdk.plugin_class.${case}.message PROPERTIES PASS_REGULAR_EXPRESSION "${expected}")
endforeach()
