# GoogleTest executables (see memplan_add_test in CMakeLists.txt).
memplan_add_test(test_sources
  sources/zero_table1_test.cpp
  sources/bytes_per_parameter_test.cpp
  sources/korthikanti_table2_test.cpp)
