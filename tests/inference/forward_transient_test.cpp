// The 'inference' plugin's forward transients: a first-order model of the
// largest temporary memory of one layer's forward over a chunk of c tokens
// (docs/inference.md, section 5), with p the activation dtype size:
//   2 p c h + max(p c (q/t + 2 kv_rank) [+ p (heads/t) c context without FlashAttention],
//                 p c f (3 if gated, else 2) / t)
// plus fp32 logits, 4 x rows x vocab / t. Each figure is derived by hand beside
// its test. Llama-2-7B: h = q = 4096, 32 kv heads of 128 (kv = 4096), f = 11008
// (SwiGLU, gated), vocab 32000.
#include <gtest/gtest.h>

#include <string>

#include "inference_scenarios.hpp"
#include "test_support.hpp"

namespace memplan::testing {
namespace {

std::string llama7b(int64_t micro_batch, int64_t seq_len, const std::string& options = "",
                    const std::string& tail = "") {
  return infer_scenario(preset("llama-2-7b"), micro_batch, seq_len, options, tail, "mixed-fp16");
}

uint64_t layer_bytes(const Evaluation& e) { return e.item_bytes("activations.layer", MEMPLAN_ROLE_ACTIVATIONS); }
uint64_t logits_bytes(const Evaluation& e) { return e.item_bytes("activations.logits", MEMPLAN_ROLE_ACTIVATIONS); }

// One sequence of 4096 tokens in fp16 (p = 2), whole-prompt prefill (c = 4096),
// FlashAttention (the default):
//   residual   2 x 2 x 4096 x 4096              =  67,108,864
//   attention  2 x 4096 x (4096 + 2 x 4096)     = 100,663,296
//   MLP        2 x 4096 x 11008 x 3             = 270,532,608  (the larger)
//   layer      67,108,864 + 270,532,608         = 337,641,472
//   logits     4 x 1 (last position) x 32000    =     128,000
// Peak (forward) = weights 6,738,415,616 x 2 + KV 2 GiB + the two transients
//   = 13,476,831,232 + 2,147,483,648 + 337,641,472 + 128,000 = 15,962,084,352.
TEST(ForwardTransient, WholePromptPrefillWithFlashAttention) {
  Evaluation e = evaluate_paper(llama7b(1, 4096));
  EXPECT_EQ(layer_bytes(e), 337'641'472u);
  EXPECT_EQ(logits_bytes(e), 128'000u);
  EXPECT_EQ(e.breakdown().peak, 15'962'084'352u);
  EXPECT_EQ(e.breakdown().peak_phase, kForward);
  // Inference persists weights and the KV cache; the transients are forward-only.
  EXPECT_EQ(e.breakdown().timeline[kInit], 13'476'831'232u + 2'147'483'648u);
  for (const PlanItem& item : e.estimator().plan().items) {
    if (item.role == MEMPLAN_ROLE_ACTIVATIONS) {
      EXPECT_EQ(item.lifetime, MEMPLAN_LIFETIME_TRANSIENT_FORWARD);
    }
  }
}

// Without FlashAttention the attention branch adds the score matrix,
// p x heads x c x context = 2 x 32 x 4096 x 4096 = 1,073,741,824:
//   attention  100,663,296 + 1,073,741,824 = 1,174,405,120 (now the larger)
//   layer      67,108,864 + 1,174,405,120  = 1,241,513,984
TEST(ForwardTransient, ScoresWithoutFlashAttention) {
  EXPECT_EQ(layer_bytes(evaluate_paper(llama7b(1, 4096, "flash_attention = false\n"))), 1'241'513'984u);
}

// logits = "all": every token of the chunk, 4 x 4096 x 32000 = 524,288,000.
TEST(ForwardTransient, AllLogits) {
  EXPECT_EQ(logits_bytes(evaluate_paper(llama7b(1, 4096, "logits = \"all\"\n"))), 524'288'000u);
}

// Chunked prefill, prefill_chunk = 512 (vLLM's max_num_batched_tokens):
//   residual 2 x 2 x 512 x 4096 = 8,388,608; attention 2 x 512 x 12288 =
//   12,582,912; MLP 2 x 512 x 11008 x 3 = 33,816,576 -> 42,205,184.
// Without FlashAttention a chunk still attends to the whole context of 4096:
//   scores 2 x 32 x 512 x 4096 = 134,217,728; attention 146,800,640 -> 155,189,248.
TEST(ForwardTransient, ChunkedPrefill) {
  EXPECT_EQ(layer_bytes(evaluate_paper(llama7b(1, 4096, "prefill_chunk = 512\n"))), 42'205'184u);
  EXPECT_EQ(layer_bytes(evaluate_paper(llama7b(1, 4096, "prefill_chunk = 512\nflash_attention = false\n"))),
            155'189'248u);
}

// Decode (c = micro_batch = 64, one new token per sequence) outgrows a
// prefill chunk of 16 tokens:
//   residual 2 x 2 x 64 x 4096 = 1,048,576; MLP 2 x 64 x 11008 x 3 = 4,227,072
//   -> 5,275,648; logits of the 64 last positions 4 x 64 x 32000 = 8,192,000.
TEST(ForwardTransient, DecodeOfManySequences) {
  Evaluation e = evaluate_paper(llama7b(64, 4096, "prefill_chunk = 16\n"));
  EXPECT_EQ(layer_bytes(e), 5'275'648u);
  EXPECT_EQ(logits_bytes(e), 8'192'000u);
}

// Tensor parallelism over t = 2: the residual stream is replicated, the rest split.
//   attention 2 x 4096 x (4096/2 + 2 x 16 x 128) = 50,331,648
//   MLP       270,532,608 / 2 = 135,266,304 -> layer 67,108,864 + 135,266,304 = 202,375,168
//   logits    4 x 32000 / 2 = 64,000 (vocabulary-parallel LM head)
TEST(ForwardTransient, TensorParallelSplitsAllButTheResidual) {
  Evaluation e = evaluate_paper(llama7b(1, 4096, "", "[[strategy]]\nuse = \"tensor-parallel\"\nsize = 2\n"));
  EXPECT_EQ(layer_bytes(e), 202'375'168u);
  EXPECT_EQ(logits_bytes(e), 64'000u);
}

// Pipeline parallelism: only the stage with the LM head computes logits.
TEST(ForwardTransient, LogitsOnlyOnTheLastPipelineStage) {
  Evaluation first = evaluate_paper(llama7b(1, 4096, "", "[[strategy]]\nuse = \"pipeline-parallel\"\nsize = 2\n"));
  EXPECT_EQ(logits_bytes(first), 0u);
  EXPECT_EQ(layer_bytes(first), 337'641'472u);
  // 16 of 32 layers: half the KV cache, 1 GiB.
  EXPECT_EQ(first.component(MEMPLAN_ROLE_KV_CACHE), 1'073'741'824u);
  Evaluation last =
      evaluate_paper(llama7b(1, 4096, "", "[[strategy]]\nuse = \"pipeline-parallel\"\nsize = 2\nstage = \"last\"\n"));
  EXPECT_EQ(logits_bytes(last), 128'000u);
}

// Mixture of experts (Mixtral 8x7B preset: 8 kv heads, experts of width 14336,
// top_k = 2), bf16, one sequence of 4096: each token visits two experts.
//   residual 67,108,864; attention 2 x 4096 x (4096 + 2 x 1024) = 50,331,648
//   MLP 2 x 4096 x 14336 x 3 x 2 = 704,643,072 -> layer 771,751,936
TEST(ForwardTransient, MixtureOfExpertsCountsTopKExperts) {
  EXPECT_EQ(layer_bytes(evaluate_paper(infer_scenario(preset("mixtral-8x7b"), 1, 4096))), 771'751'936u);
}

}  // namespace
}  // namespace memplan::testing
