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
//   fp8-block  DeepSeek-V3's block-scaled FP8 (DeepSeek-AI 2024, arXiv
//         2412.19437, section 3.3.2; its config.json quantization_config
//         weight_block_size [128, 128]): one fp32 scale (weight_scale_inv)
//         per 128 x 128 = 16,384 elements: 8 + 32/16384 = 8.001953125 bits.
//   mxfp4 OCP Microscaling Formats (MX) v1.0, section 5: blocks of 32 FP4
//         (E2M1) values sharing one 8-bit E8M0 scale: 4 + 8/32 = 4.25 bits;
//         gpt-oss keeps the values (*_blocks) and scales (*_scales) apart.
//   gptq, awq  4-bit values in groups of 128 with an fp16 scale and a 4-bit
//         zero point packed eight to an int32 (qzeros) per group, which both
//         store even when symmetric (AutoGPTQ's and AutoAWQ's QuantLinear):
//         4 + 16/128 + 4/128 = 4.15625 bits. GPTQ's act-order g_idx (one
//         int32 per input channel, 32/out_features bits per weight, under
//         0.01 bits at 4096 outputs) is not counted.
//
// llama.cpp's GGUF types are self-contained blocks, values and scales in
// one struct (ggml/src/ggml-common.h, block_* with their static_asserts):
// bits per weight = 8 x sizeof(block) / elements per block. QK = 32
// elements (q4_0 .. q8_0, iq4_nl), QK_K = 256 (k-quants, i-quants):
//   q4_0  fp16 d + 16 B = 18 B / 32 = 4.5     q4_1  2 fp16 + 16 B = 20 / 32 = 5.0
//   q5_0  fp16 + 4 + 16 = 22 / 32 = 5.5       q5_1  2 fp16 + 4 + 16 = 24 / 32 = 6.0
//   q8_0  fp16 + 32 = 34 / 32 = 8.5
//   q2_k  16 + 64 + 2 fp16 = 84 / 256 = 2.625     q3_k  32 + 64 + 12 + fp16 = 110 / 256 = 3.4375
//   q4_k  2 fp16 + 12 + 128 = 144 / 256 = 4.5     q5_k  2 fp16 + 12 + 32 + 128 = 176 / 256 = 5.5
//   q6_k  128 + 64 + 16 + fp16 = 210 / 256 = 6.5625
//   iq1_s  fp16 + 32 + 16 = 50 / 256 = 1.5625     iq1_m  32 + 16 + 8 = 56 / 256 = 1.75
//   iq2_xxs  fp16 + 64 = 66 / 256 = 2.0625        iq2_xs  fp16 + 64 + 8 = 74 / 256 = 2.3125
//   iq2_s  fp16 + 64 + 8 + 8 = 82 / 256 = 2.5625  iq3_xxs  fp16 + 96 = 98 / 256 = 3.0625
//   iq3_s  fp16 + 64 + 8 + 32 + 4 = 110 / 256 = 3.4375
//   iq4_nl  fp16 + 16 = 18 / 32 = 4.5             iq4_xs  fp16 + 2 + 4 + 128 = 136 / 256 = 4.25
// llama.cpp's file types (Q4_K_M, Q5_K_M, ...) mix these per tensor (Q4_K_M
// keeps some attention-v and feed-forward-down tensors in q6_k): name the
// type most weights have, and see docs/formulas.md for the mix.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace memplan::plugins::quantized {

enum class Grouping {
  fixed,       // a fixed number of elements per scale
  row,         // one scale per row of model.hidden elements
  per_tensor,  // one scale per tensor: not counted
  block,       // a self-contained block of block_bytes per default_group elements (GGUF)
};

struct Format {
  std::string_view name;
  double bits;  // of each value; for a block format, the values' share of the block
  Grouping grouping;
  int64_t default_group;           // elements per scale (fixed) or per block (block)
  std::string_view default_scale;  // dtype of the scales (fixed, row)
  bool has_zero_point;             // integer formats may be asymmetric; nf4 and fp8 are not
  bool zero_point_default = false;  // stored unless the scenario says otherwise (GPTQ, AWQ)
  int64_t block_bytes = 0;          // block formats: sizeof(block_*)
};

// mxfp4's E8M0 scale is one byte: counted with the 1-byte dtype "fp8".
inline constexpr std::array<Format, 27> kFormats{{
    {"int8", 8, Grouping::row, 0, "fp16", true},
    {"int4", 4, Grouping::fixed, 128, "fp16", true},
    {"nf4", 4, Grouping::fixed, 64, "fp32", false},
    {"fp8", 8, Grouping::per_tensor, 0, "fp16", false},
    {"fp8-block", 8, Grouping::fixed, 128 * 128, "fp32", false},
    {"mxfp4", 4, Grouping::fixed, 32, "fp8", false},
    {"gptq", 4, Grouping::fixed, 128, "fp16", true, true},
    {"awq", 4, Grouping::fixed, 128, "fp16", true, true},
    {"q4_0", 4, Grouping::block, 32, "", false, false, 18},
    {"q4_1", 4, Grouping::block, 32, "", false, false, 20},
    {"q5_0", 5, Grouping::block, 32, "", false, false, 22},
    {"q5_1", 5, Grouping::block, 32, "", false, false, 24},
    {"q8_0", 8, Grouping::block, 32, "", false, false, 34},
    {"q2_k", 2, Grouping::block, 256, "", false, false, 84},
    {"q3_k", 3, Grouping::block, 256, "", false, false, 110},
    {"q4_k", 4, Grouping::block, 256, "", false, false, 144},
    {"q5_k", 5, Grouping::block, 256, "", false, false, 176},
    {"q6_k", 6, Grouping::block, 256, "", false, false, 210},
    {"iq1_s", 1, Grouping::block, 256, "", false, false, 50},
    {"iq1_m", 1, Grouping::block, 256, "", false, false, 56},
    {"iq2_xxs", 2, Grouping::block, 256, "", false, false, 66},
    {"iq2_xs", 2, Grouping::block, 256, "", false, false, 74},
    {"iq2_s", 2, Grouping::block, 256, "", false, false, 82},
    {"iq3_xxs", 3, Grouping::block, 256, "", false, false, 98},
    {"iq3_s", 3, Grouping::block, 256, "", false, false, 110},
    {"iq4_xs", 4, Grouping::block, 256, "", false, false, 136},
    {"iq4_nl", 4, Grouping::block, 32, "", false, false, 18},
}};

// The names, for messages: "int8, int4, ..., iq4_nl".
inline std::string format_names() {
  std::string names;
  for (const Format& format : kFormats) names += (names.empty() ? "" : ", ") + std::string(format.name);
  return names;
}

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
  double group = 0;  // elements per scale (or per block); 0: per tensor (not counted)
  double scale_bytes = 0;
  double zero_point_bytes = 0;  // 0: symmetric
  bool double_quant = false;
  double block_bytes = 0;  // > 0: a self-contained block of this many bytes per `group` elements
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
  // A block's scales are what it holds besides its values.
  if (layout.block_bytes > 0) return layout.block_bytes / layout.group - value_bytes(layout);
  double bytes = layout.double_quant ? kDoubleQuantScaleBytes / layout.group +
                                           kDoubleQuantSecondScaleBytes / (layout.group * kDoubleQuantSecondBlock)
                                     : layout.scale_bytes / layout.group;
  return bytes + layout.zero_point_bytes / layout.group;
}

inline double bytes_per_element(const Layout& layout) { return value_bytes(layout) + constant_bytes(layout); }

}  // namespace memplan::plugins::quantized
