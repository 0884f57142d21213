# GoogleTest executables (see memplan_add_test in CMakeLists.txt). Each test
# folder with a suite.cmake declares its own executables; paths are relative
# to tests/.
memplan_add_test(test_sources
  sources/zero_table1_test.cpp
  sources/bytes_per_parameter_test.cpp
  sources/korthikanti_table2_test.cpp)
memplan_add_test(test_core
  core/inventory_test.cpp
  core/timeline_test.cpp
  core/scenario_errors_test.cpp
  core/plugin_composition_test.cpp
  core/limits_test.cpp
  core/input_safety_test.cpp
  core/incremental_test.cpp
  core/reconfigure_test.cpp)
memplan_add_test(test_cli cli/cli_test.cpp cli/estimate_test.cpp)
target_link_libraries(test_cli PRIVATE nlohmann_json::nlohmann_json)
# Its own executable: it replaces the global operator new to count allocations.
memplan_add_test(test_no_allocation core/no_allocation_test.cpp support/allocation_counter.cpp)

file(GLOB MEMPLAN_TEST_SUITES CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*/suite.cmake)
foreach(suite ${MEMPLAN_TEST_SUITES})
  include(${suite})
endforeach()
