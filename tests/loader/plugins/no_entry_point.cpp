// FAULT 1: no 'memplan_plugin_v1' entry point. The author forgot extern "C",
// so the function is exported under its C++ mangled name and dlsym cannot
// find the C name the host looks for.
#include <memplan/plugin_abi.h>

MEMPLAN_EXPORT const memplan_plugin_descriptor* memplan_plugin_v1() { return nullptr; }
