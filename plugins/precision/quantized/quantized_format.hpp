// Storage of block-quantized weights: b-bit values plus, per group of g
// elements that share a scale, the scale (and an optional zero point).
//
//   bytes per element = b/8 + scale_bytes/g (+ zero_point_bytes/g)
//
// Default groups, by format and source:
//   int4  g = 128, fp16 scale: GPTQ (Frantar et al. 2022, arXiv 2210.17323)
//         and AWQ (Lin et al. 2023, arXiv 2306.00978) both quantize in groups
//         of 128; AWQ is asymmetric and stores a 4-bit zero per group.
//   nf4   g = 64, fp32 absmax: QLoRA (Dettmers et al. 2023, arXiv 2305.14314),
//         section 3: 32/64 = 0.5 bits of constants per parameter. With double
//         quantization the absmax constants are themselves quantized to 8 bits
//         in blocks of 256 with one fp32 constant each: 8/64 + 32/(64 x 256)
//         = 0.127 bits per parameter.
//   int8  one scale per row (per output channel), i.e. per model.hidden
//         elements: LLM.int8() (Dettmers et al. 2022, arXiv 2208.07339),
//         vector-wise quantization, section 3.
//   fp8   one scale per tensor: negligible (0 bytes per element) unless a
//         group size is given (block scaling).
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

namespace memplan::plugins::quantized {

enum class Grouping {
  fixed,       // a fixed number of elements per scale
  row,         // one scale per row of model.hidden elements
  per_tensor,  // one scale per tensor: not counted
};

struct Format {
  std::string_view name;
  double bits;
  Grouping grouping;
  int64_t default_group;           // elements per scale when grouping is fixed
  std::string_view default_scale;  // dtype of the scales
  bool has_zero_point;             // integer formats may be asymmetric; nf4 and fp8 are not
};

inline constexpr std::array<Format, 4> kFormats{{
    {"int8", 8, Grouping::row, 0, "fp16", true},
    {"int4", 4, Grouping::fixed, 128, "fp16", true},
    {"nf4", 4, Grouping::fixed, 64, "fp32", false},
    {"fp8", 8, Grouping::per_tensor, 0, "fp16", false},
}};

inline const Format* find_format(std::string_view name) {
  for (const Format& format : kFormats)
    if (format.name == name) return &format;
  return nullptr;
}

// QLoRA's double quantization (section 3): 8-bit first-level constants, one
// fp32 second-level constant per 256 of them.
inline constexpr double kDoubleQuantScaleBytes = 1.0;
inline constexpr double kDoubleQuantSecondBlock = 256.0;
inline constexpr double kDoubleQuantSecondScaleBytes = 4.0;

struct Layout {
  double bits = 0;
  double group = 0;  // elements per scale; 0: per tensor (not counted)
  double scale_bytes = 0;
  double zero_point_bytes = 0;  // 0: symmetric
  bool double_quant = false;
};

// The packed values: b/8 bytes per element.
inline double value_bytes(const Layout& layout) { return layout.bits / 8.0; }

// The quantization constants per element: scales (and zero points) of the
// groups. Frameworks keep them apart from the packed values, as a module
// attribute or buffer rather than a parameter: bitsandbytes' quant_state
// (Params4bit.quant_state, Int8Params.SCB), GPTQ's and AWQ's `scales` and
// `qzeros` buffers.
inline double constant_bytes(const Layout& layout) {
  if (layout.group <= 0) return 0;
  double bytes = layout.double_quant ? kDoubleQuantScaleBytes / layout.group +
                                           kDoubleQuantSecondScaleBytes / (layout.group * kDoubleQuantSecondBlock)
                                     : layout.scale_bytes / layout.group;
  return bytes + layout.zero_point_bytes / layout.group;
}

inline double bytes_per_element(const Layout& layout) { return value_bytes(layout) + constant_bytes(layout); }

}  // namespace memplan::plugins::quantized
