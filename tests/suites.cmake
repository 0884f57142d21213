# GoogleTest executables (see memplan_add_test in CMakeLists.txt).
