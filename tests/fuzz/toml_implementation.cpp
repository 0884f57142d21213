// toml++ 3.3.0 itself, compiled into the fuzz executables from the Debian
// headers the core is built against (TOML_HEADER_ONLY=0, as
// tomlplusplus::tomlplusplus sets it, plus TOML_IMPLEMENTATION here: toml++'s
// documented way to build its library in one translation unit).
//
// Why: the Debian libtomlplusplus.so has neither coverage counters nor
// sanitizers. Linked into the executable, these definitions take the place
// of the shared library's, so libFuzzer is guided through the parser's
// branches too, and UndefinedBehaviorSanitizer stops on the parser's
// TOML_UNREACHABLE (__builtin_unreachable) should any input get past
// parse_toml's guard to the Unicode whitespace fault (toml_guard.hpp), where
// the release library would go on with undefined behaviour.
//
// The parser's own assertions are off, as in the library memplan runs with:
// Debian's libtomlplusplus.so.3.3.0 has none (it imports no __assert_fail;
// Debian builds it with GCC and NDEBUG, and GCC has no __builtin_assume, so
// TOML_ASSERT_ASSUME is empty too). An empty TOML_ASSERT, without NDEBUG,
// empties both here. Some are reachable from input: '[=' and 'x = [}' reach
// parse_key() and parse_value() against their stated preconditions (the
// fuzzer found both in its first runs). The release parser then reports an
// ordinary error (tests/core/input_safety_test.cpp), and the sanitizers
// check that path instead of an assertion stopping at it.
#define TOML_ASSERT(expr) static_assert(true)
#define TOML_IMPLEMENTATION
#include <toml++/toml.h>
