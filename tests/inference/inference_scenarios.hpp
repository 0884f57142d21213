// Scenario text and plan lookups shared by the inference tests.
#pragma once

#include <memplan/plugin_abi.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "memplan/core/plan.hpp"
#include "test_support.hpp"

namespace memplan::testing {

// Llama-3.1-8B's shape (meta-llama/Llama-3.1-8B config.json): 32 layers,
// hidden 4096, 32 heads, 8 kv heads (grouped-query attention), head_dim 128,
// ffn 14336, vocab 128256.
inline constexpr std::string_view kLlama31_8B =
    "layers = 32\nhidden = 4096\nheads = 32\nkv_heads = 8\nffn_hidden = 14336\nvocab = 128256\n";

// An inference scenario: `model` is the [model] table's body, `options` the
// [activations] table's options (use = "inference" is added), `tail` any
// further tables ([[strategy]], [hardware]).
inline std::string infer_scenario(std::string_view model, int64_t micro_batch, int64_t seq_len,
                                  std::string_view options = "", std::string_view tail = "",
                                  std::string_view precision = "bf16") {
  return "name = \"inference-test\"\nmode = \"infer\"\n[model]\n" + std::string(model) + "[batch]\nmicro_batch = " +
         std::to_string(micro_batch) + "\nseq_len = " + std::to_string(seq_len) + "\n[precision]\nuse = \"" +
         std::string(precision) + "\"\n[activations]\nuse = \"inference\"\n" + std::string(options) +
         std::string(tail);
}

inline std::string preset(std::string_view name) { return "preset = \"" + std::string(name) + "\"\n"; }

// Bytes of the GPU items whose own name (not the display name) is `name`.
inline uint64_t bytes_named(const std::vector<PlanItem>& items, std::string_view name) {
  uint64_t bytes = 0;
  for (const PlanItem& item : items)
    if (item.device == MEMPLAN_DEVICE_GPU && item.name_view() == name) bytes += item.bytes();
  return bytes;
}

inline const PlanItem* find_named(const std::vector<PlanItem>& items, std::string_view name) {
  for (const PlanItem& item : items)
    if (item.name_view() == name) return &item;
  return nullptr;
}

inline uint64_t kv_cache_bytes(const Evaluation& e) { return e.component(MEMPLAN_ROLE_KV_CACHE); }

}  // namespace memplan::testing
