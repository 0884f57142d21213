// Module buffers Hugging Face transformers registers beside the weights of a
// Llama model (docs/formulas.md, "Module buffers"; the 'megatron' plugin's
// rope_cache and causal_mask_buffer options, set by the hf-transformers
// profile by version):
//   up to 4.38 every attention layer's LlamaRotaryEmbedding keeps cos and sin
//   tables of max_position_embeddings x head_dim in torch's default dtype
//   (transformers models/llama/modeling_llama.py @ 002272831f, 4.38:
//   _cos_cached/_sin_cached "for BC"; 4.37: cos_cached/sin_cached from
//   _set_cos_sin_cache);
//   4.38's LlamaModel keeps causal_mask, a max_position_embeddings^2 bool
//   buffer, which _update_causal_mask expands each forward to batch x 1 x
//   P x P in the activations' dtype (repeat, then .to(dtype) * min);
//   4.39 dropped both (PR #29753).
// They are not parameters: FSDP shards parameters only, so every rank holds them whole.
#include <gtest/gtest.h>

#include <string>

#include "test_support.hpp"

namespace memplan::testing {
namespace {

constexpr int32_t kWeights = MEMPLAN_ROLE_WEIGHTS;
constexpr int32_t kAct = MEMPLAN_ROLE_ACTIVATIONS;

// Llama-2-7B (32 layers, head_dim 128, max_position_embeddings 4096), bf16
// LoRA on q and v, 2048 tokens, hf-transformers at `version`, with `extra`
// lines in [activations] and `strategies` after it.
std::string llama2_7b(const std::string& version, const std::string& extra = "", const std::string& strategies = "") {
  return "name = \"b\"\nmode = \"train\"\n[framework]\nuse = \"hf-transformers\"\n" + version +
         "[model]\npreset = \"llama-2-7b\"\n[batch]\nseq_len = 2048\n[precision]\nuse = \"bf16\"\n[optimizer]\nuse = "
         "\"adamw\"\n[activations]\nuse = \"megatron\"\n" + extra +
         "[[strategy]]\nuse = \"lora\"\nrank = 8\ntargets = \"q,v\"\n" + strategies;
}

// 4.38, bf16 model (from_pretrained with torch_dtype=bfloat16, so the default
// dtype is bf16 while the modules are built):
//   rope tables 32 layers x 2 x 4096 x 128 x 2 B = 67,108,864 B
//   causal_mask 4096 x 4096 x 1 B = 16,777,216 B
//   the expanded mask, one sequence: 4096 x 4096 x 2 B = 33,554,432 B (an activation)
TEST(ModuleBuffers, Transformers438Llama2) {
  Evaluation e = evaluate(llama2_7b("version = \"4.38\"\n"));
  EXPECT_EQ(e.item_bytes("layers.0-31.rope_cache", kWeights), 67'108'864u);
  EXPECT_EQ(e.item_bytes("causal_mask", kWeights), 16'777'216u);
  EXPECT_EQ(e.item_bytes("activations.causal_mask", kAct), 33'554'432u);
  // Buffers are not parameters: Llama-2-7B's 6,738,415,616 plus the adapters
  // q, v: 32 x 2 x 8 x (4096 + 4096) = 4,194,304.
  EXPECT_EQ(e.breakdown().params_total, 6'738'415'616.0 + 4'194'304.0);
}

// 4.37: the tables (then cos_cached/sin_cached), no causal_mask buffer; 4.39
// and the latest (no version): neither.
TEST(ModuleBuffers, VersionsThatHaveThem) {
  Evaluation v437 = evaluate(llama2_7b("version = \"4.37\"\n"));
  EXPECT_EQ(v437.item_bytes("layers.0-31.rope_cache", kWeights), 67'108'864u);
  EXPECT_EQ(v437.item_bytes("causal_mask", kWeights), 0u);
  for (const std::string version : {"version = \"4.39\"\n", ""}) {
    Evaluation later = evaluate(llama2_7b(version));
    EXPECT_EQ(later.item_bytes("layers.0-31.rope_cache", kWeights), 0u) << version;
    EXPECT_EQ(later.item_bytes("causal_mask", kWeights), 0u) << version;
    EXPECT_EQ(later.item_bytes("activations.causal_mask", kAct), 0u) << version;
  }
}

// A model built in fp32 and never cast (fsdp_qlora's QLoRA path:
// from_config without torch_dtype): 32 x 2 x 4096 x 128 x 4 B = 134,217,728 B.
// FSDP over 2 ranks shards the weights, not the buffers: the same bytes.
TEST(ModuleBuffers, DtypeAndSharding) {
  const std::string fp32 = "buffer_dtype = \"fp32\"\n";
  EXPECT_EQ(evaluate(llama2_7b("version = \"4.38\"\n", fp32)).item_bytes("layers.0-31.rope_cache", kWeights),
            134'217'728u);
  Evaluation sharded = evaluate(llama2_7b("version = \"4.38\"\n", fp32,
                                          "[[strategy]]\nuse = \"data-parallel\"\nsize = 2\n[[strategy]]\nuse = "
                                          "\"fsdp\"\n[hardware]\ncount = 2\n"));
  EXPECT_EQ(sharded.item_bytes("layers.0-31.rope_cache", kWeights), 134'217'728u);
  EXPECT_EQ(sharded.item_bytes("causal_mask", kWeights), 16'777'216u);
}

// A model with learned positions (BERT, GPT-2) has no rotary tables and no
// Llama causal mask, whatever the options say.
TEST(ModuleBuffers, LearnedPositionsHaveNone) {
  Evaluation e = evaluate(
      "name = \"b\"\nmode = \"train\"\n[model]\npreset = \"gpt2-xl\"\n[batch]\nseq_len = 1024\n[precision]\nuse = "
      "\"bf16\"\n[optimizer]\nuse = \"adamw\"\n[activations]\nuse = \"megatron\"\nrope_cache = true\n"
      "causal_mask_buffer = true\n");
  EXPECT_EQ(e.item_bytes("layers.0-47.rope_cache", kWeights), 0u);
  EXPECT_EQ(e.item_bytes("causal_mask", kWeights), 0u);
}

// GPT-2's attention layers each register their own causal mask (transformers
// models/gpt2/modeling_gpt2.py GPT2Attention.__init__: register_buffer("bias",
// torch.tril(torch.ones((max_positions, max_positions), dtype=torch.uint8))
// .view(1, 1, max_positions, max_positions))), learned positions or not:
// layer_causal_mask. GPT-2 XL, 48 layers x 1024^2 x 1 B = 50,331,648 B, whole
// on every rank under ZeRO-3 (a buffer, not a parameter).
TEST(ModuleBuffers, Gpt2LayersKeepTheirCausalMasks) {
  const std::string gpt2 =
      "name = \"b\"\nmode = \"train\"\n[model]\npreset = \"gpt2-xl\"\n[batch]\nseq_len = 1024\n[precision]\nuse = "
      "\"bf16\"\n[optimizer]\nuse = \"adamw\"\n[activations]\nuse = \"megatron\"\nlayer_causal_mask = true\n";
  EXPECT_EQ(evaluate(gpt2).item_bytes("layers.0-47.attn.causal_mask", kWeights), 50'331'648u);
  const Evaluation sharded = evaluate(gpt2 + "[[strategy]]\nuse = \"data-parallel\"\nsize = 4\n[[strategy]]\nuse = "
                                             "\"zero\"\nstage = 3\n[hardware]\ngpu = \"a100-sxm-80gb\"\ncount = 4\n");
  EXPECT_EQ(sharded.item_bytes("layers.0-47.attn.causal_mask", kWeights), 50'331'648u);
}

// Lines 11 [activations], 12 use, 13 the option under test.
TEST(ModuleBuffers, BufferDtypeError) {
  const std::string base = "name = \"e\"\nmode = \"train\"\n[model]\npreset = \"llama-3.2-3b\"\n[batch]\n"
                           "seq_len = 1024\n[precision]\nuse = \"bf16\"\n[optimizer]\nuse = \"sgd\"\n"
                           "[activations]\nuse = \"megatron\"\n";
  const std::string error = error_of(base + "buffer_dtype = \"fp7\"\n", "e.toml");
  EXPECT_NE(error.find("e.toml:13:16: error: in [activations], activations plugin 'megatron', option "
                       "'buffer_dtype': is \"fp7\", not a known dtype; use "),
            std::string::npos)
      << error;
}

}  // namespace
}  // namespace memplan::testing
