// Storage sizes of the numeric formats plugins assign to plan items.
// Block-quantized formats (with per-block scales) belong to the precision
// plugins that model them; these are the plain element sizes.
#ifndef MEMPLAN_DTYPES_HPP
#define MEMPLAN_DTYPES_HPP

#include <array>
#include <optional>
#include <string>
#include <string_view>

namespace memplan::sdk {

struct Dtype {
  std::string_view name;
  double bytes;
};

// IEEE 754 binary32/binary16, bfloat16, the 8-bit float formats (E4M3/E5M2),
// and plain integers; int4 packs two values per byte.
inline constexpr std::array<Dtype, 6> kDtypes{{
    {"fp32", 4.0},
    {"fp16", 2.0},
    {"bf16", 2.0},
    {"fp8", 1.0},
    {"int8", 1.0},
    {"int4", 0.5},
}};

inline std::optional<double> dtype_bytes(std::string_view name) {
  for (const Dtype& dtype : kDtypes)
    if (dtype.name == name) return dtype.bytes;
  return std::nullopt;
}

// "fp32, fp16, bf16, fp8, int8, int4" for error messages.
inline std::string dtype_names() {
  std::string names;
  for (const Dtype& dtype : kDtypes) {
    if (!names.empty()) names += ", ";
    names += dtype.name;
  }
  return names;
}

}  // namespace memplan::sdk

#endif  // MEMPLAN_DTYPES_HPP
