// What a Hugging Face model's forward keeps beside the running layer (the
// inference plugin's held_hidden_states and held_position_embeddings, item
// activations.model_held): LlamaModel.forward (transformers
// models/llama/modeling_llama.py, and the models copied from it) keeps
// inputs_embeds as a local while its loop runs, the loop's hidden_states holds
// the layer's input until the layer returns, and from 4.43 (Llama; 4.45 the
// others) the rotary cos and sin are computed once per forward and passed to
// every layer; GPT-2 style models keep position_embeds beside inputs_embeds.
// The hf-transformers profile sets 2 and "learned", "all" from 4.46.
//
// Measured (validation/H100-llama-3.2-3b-generate-bs8-p1024-n256.toml, own
// H100 run, transformers 5.17): the 8 x 1,024-token prefill's allocated peak is
// 8,007,541,760 B; the weights, the cache and the layer's own transients came to
// 7,905,998,848 B, 101,542,912 B short. Held: 8,192 tokens x (2 x 3,072 + 2 x 128)
// x 2 B = 104,857,600 B (the two hidden states 100,663,296 B, cos and sin 4,194,304 B).
#include <gtest/gtest.h>

#include <string>

#include "test_support.hpp"

namespace memplan::testing {
namespace {

std::string generate(const std::string& framework, const std::string& model, const std::string& options) {
  return "name = \"g\"\nmode = \"infer\"\n" + framework + "[model]\n" + model +
         "[batch]\nmicro_batch = 8\nseq_len = 1024\n[precision]\nuse = \"bf16\"\n[activations]\n"
         "use = \"inference\"\nblock_size = 1\nprefill_chunk = 8192\nlogits = \"last\"\n" + options +
         "[hardware]\ngpu = \"h100-sxm-80gb\"\ncount = 1\n";
}

uint64_t held(const Evaluation& e) { return e.item_bytes("activations.model_held", MEMPLAN_ROLE_ACTIVATIONS); }

TEST(ModelHeld, HuggingFaceKeepsTwoHiddenStatesAndTheRotaryTables) {
  const std::string llama = "preset = \"llama-3.2-3b\"\n";
  const Evaluation hf = evaluate(generate("[framework]\nuse = \"hf-transformers\"\n", llama, ""));
  EXPECT_EQ(held(hf), 104'857'600u);
  // Before 4.46 the profile keeps the hidden states only: 8,192 x 2 x 3,072 x 2 B.
  const Evaluation hf445 = evaluate(generate("[framework]\nuse = \"hf-transformers\"\nversion = \"4.45\"\n", llama, ""));
  EXPECT_EQ(held(hf445), 100'663'296u);
  // The plugin's own default, and vLLM's: nothing (its loop rebinds hidden_states and residual in place).
  EXPECT_EQ(held(evaluate_paper(generate("", llama, ""))), 0u);
  // Set by hand, with a learned-position model (GPT-2 XL, h 1,600, 1 x 1,024 tokens): 3 x 1,024 x 1,600 x 2 B
  // (inputs_embeds, position_embeds, the layer's input) = 9,830,400 B.
  std::string gpt2 = generate("", "preset = \"gpt2-xl\"\n", "held_hidden_states = 2\nheld_position_embeddings = \"learned\"\n");
  gpt2.replace(gpt2.find("micro_batch = 8"), 15, "micro_batch = 1");
  gpt2.replace(gpt2.find("prefill_chunk = 8192"), 20, "prefill_chunk = 1024");
  EXPECT_EQ(held(evaluate_paper(gpt2)), 9'830'400u);
}

// The held tensors belong to the forward: a sampler run after it (vLLM's, sampler_rows) is not beside them.
// Where the run is the forward phase's high point, adding held_hidden_states leaves the phase where it was:
// the sampler item carries run - (layer + held + logits), so the sum stays the run.
TEST(ModelHeld, NotBesideTheSamplerRun) {
  const std::string llama = "preset = \"llama-3.2-3b\"\n";
  const std::string sampler = "sampler_rows = 1024\nsampler_path = \"sort\"\n";
  const Evaluation without = evaluate_paper(generate("", llama, sampler));
  const Evaluation with = evaluate_paper(generate("", llama, sampler + "held_hidden_states = 2\n"));
  ASSERT_GT(without.item_bytes("activations.sampler", MEMPLAN_ROLE_ACTIVATIONS), 0u);
  EXPECT_EQ(held(with), 100'663'296u);
  EXPECT_EQ(with.breakdown().timeline[kForward], without.breakdown().timeline[kForward]);
}

TEST(ModelHeld, Errors) {
  const std::string llama = "preset = \"llama-3.2-3b\"\n";
  EXPECT_NE(error_of(generate("", llama, "held_hidden_states = -1\n")).find("from 0 to 16, got -1"), std::string::npos);
  EXPECT_NE(error_of(generate("", llama, "held_position_embeddings = \"rotary\"\n"))
                .find("must be \"none\", \"learned\" or \"all\", not \"rotary\""),
            std::string::npos);
}

}  // namespace
}  // namespace memplan::testing
