// Reads a Hugging Face transformers config.json into a ModelSpec, for
// `[model] hf_config = "path/config.json"`. Supported model_type values:
// llama, mistral, mixtral, qwen2, qwen2_moe, qwen3, qwen3_moe, phi3, gemma3,
// gemma3_text, gpt2, gpt_oss, bert, gemma, gemma2, olmo2, deepseek_v2, deepseek_v3 (hf_model_types() lists
// them; docs/scenario-reference.md, [model], lists the fields read and their defaults).
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "memplan/core/model.hpp"

namespace memplan {

// The model types read_hf_config understands, in the order messages list them.
std::span<const std::string_view> hf_model_types();

// Parses `json_text`, the contents of the config at `path`. Errors
// (memplan::Error) name `path` (with line and column for invalid JSON), the
// field and the fix. The result's hf_config is `path`.
ModelSpec read_hf_config(std::string_view json_text, const std::string& path);

}  // namespace memplan
