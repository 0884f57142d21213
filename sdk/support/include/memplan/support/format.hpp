// Numbers in plugin messages and reported notes, formatted one way.
//
// number(x) is printf's "%g": six significant digits, no trailing zeros
// (0.9, 1e+09), what std::ostream prints by default, so a message shows the
// value as the scenario wrote it. gib(bytes) is "%.2f GiB" with 1 GiB = 2^30
// bytes, the unit of memplan's report (docs/estimate.md, "Units").
//
// snprintf, not std::to_string or streams: the SDK is compiled into each
// plugin, and these keep the library free of exported template helpers
// (sdk.hpp says the same of its own messages).
#pragma once

#include <cstdio>
#include <string>

namespace memplan::support {

inline constexpr double kKiB = 1024.0;
inline constexpr double kMiB = 1024.0 * 1024.0;
inline constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// "%g" of value: 0.9 -> "0.9", 1e9 -> "1e+09", -1 -> "-1".
inline std::string number(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", value);
  return text;
}

// Bytes in GiB with two decimals: 2^31 -> "2.00 GiB".
inline std::string gib(double bytes) {
  char text[48];
  std::snprintf(text, sizeof text, "%.2f GiB", bytes / kGiB);
  return text;
}

}  // namespace memplan::support
