// The start-up sampler run of vLLM V1 (the inference plugin's sampler_rows
// and sampler_path, item activations.sampler). vLLM sizes its activation
// memory with profile_run: a dummy forward of max_num_batched_tokens tokens,
// then, on the last pipeline rank, _dummy_sampler_run over the last-token
// hidden states of min(max_num_seqs, max_num_batched_tokens) dummy requests
// (vllm/v1/worker/gpu_model_runner.py @ 4e1790651fc758c06c7a903dd4cd82364ac91b27).
// Its logits are all-gathered on every tensor-parallel rank and sampled with
// top_k = vocab - 1, top_p = 0.9, temperature 0.5. What the top-k/top-p
// masking holds per (row x vocabulary entry) depends on the vLLM version
// (derivations: inference_memory.hpp and docs/inference.md section 5):
//   sort   (up to 0.16, PyTorch's logits.sort): 2 bf16 logits + 4 fp32 copy +
//          4 sorted values + 8 int64 indices + 8 PyTorch's int64 iota
//          (aten/src/ATen/native/cuda/Sort.cu) + 4 + 8 cub's third key and
//          value buffers (cub DispatchSegmentedRadixSort) = 38;
//   triton (0.17 on, PR #33538, for 8 rows or more): 2 + 4 + 4 probs + 4
//          random_sample's q = 14.
// The run also keeps the chunk's hidden states, p h (c + 2 r). It follows the
// forward pass, so the phase's high point is max(layer + logits, run); the
// host sums the forward transients, so the item carries run - (layer +
// logits) when positive. A scenario without [framework] version gets every
// [[since]] block of the vllm profile, so the 0.17 path.
// max_num_seqs of `vllm serve` (vllm/engine/arg_utils.py @
// 99d7eb5d6a512cfcc5a2b104f24ebf2d6cda772b, _set_default_args): 1024 on GPUs of
// >= 70 GiB whose name has no "a100", else 256; 0.8 (@ 001999d2): 1024 on
// GPUs named H100 or H200, else 256.
#include <gtest/gtest.h>

#include <string>

#include "inference_scenarios.hpp"
#include "test_support.hpp"

namespace memplan::testing {
namespace {

// Llama-3.1-8B (vocab 128,256, hidden 4096), bf16, 4 sequences of 8192 tokens.
std::string llama8b(const std::string& framework, const std::string& tail, const std::string& options = "") {
  return "name = \"s\"\nmode = \"infer\"\n" + framework + "[model]\npreset = \"llama-3.1-8b\"\n[batch]\n"
         "micro_batch = 4\nseq_len = 8192\n[precision]\nuse = \"bf16\"\n[activations]\nuse = \"inference\"\n" +
         options + tail;
}
std::string gpu(const std::string& name) { return "[hardware]\ngpu = \"" + name + "\"\n"; }
std::string tensor(int t) { return "[[strategy]]\nuse = \"tensor-parallel\"\nsize = " + std::to_string(t) + "\n"; }

uint64_t sampler(const Evaluation& e) { return e.item_bytes("activations.sampler", MEMPLAN_ROLE_ACTIVATIONS); }
uint64_t forward(const Evaluation& e) {
  return e.item_bytes("activations.layer", MEMPLAN_ROLE_ACTIVATIONS) +
         e.item_bytes("activations.logits", MEMPLAN_ROLE_ACTIVATIONS);
}

std::string version(const std::string& v) { return "[framework]\nuse = \"vllm\"\nversion = \"" + v + "\"\n"; }

// By hand, c tokens per pass and r = min(max_num_seqs, c) sampled rows:
//   run = 2 x 4096 x (c + 2 r) + B x r x 128,256, B = 14 (triton) or 38 (sort)
// H100 (c = 8192, r = 1024; r x V = 131,334,144), the default (0.17 on):
// 83,886,080 + 14 x 131,334,144 = 83,886,080 + 1,838,678,016 = 1,922,564,096.
// The forward's transients there: layer 102,400 x 8192 = 838,860,800 (the
// gated MLP, prefill_default_test.cpp) + logits 4 x 4 x 128,256 = 2,052,096
// = 840,912,896, so the item is 1,922,564,096 - 840,912,896 = 1,081,651,200.
TEST(Sampler, H100RunsMaxNumSeqs1024) {
  Evaluation e = evaluate(llama8b("", gpu("h100-sxm-80gb")));
  EXPECT_EQ(forward(e), 840'912'896u);
  EXPECT_EQ(sampler(e), 1'081'651'200u);
  EXPECT_EQ(forward(e) + sampler(e), 1'922'564'096u);
}

// vLLM up to 0.16 masks with PyTorch's sort: run = 83,886,080 + 38 x
// 131,334,144 = 83,886,080 + 4,990,697,472 = 5,074,583,552; item
// 5,074,583,552 - 840,912,896 = 4,233,670,656. 0.17 and 0.19 take the Triton
// kernel (the 1,081,651,200 above).
TEST(Sampler, SortUpTo016TritonFrom017) {
  for (const std::string v : {"0.9", "0.11", "0.16", "0.16.9"})
    EXPECT_EQ(sampler(evaluate(llama8b(version(v), gpu("h100-sxm-80gb")))), 4'233'670'656u) << v;
  for (const std::string v : {"0.17", "0.17.0", "0.19"})
    EXPECT_EQ(sampler(evaluate(llama8b(version(v), gpu("h100-sxm-80gb")))), 1'081'651'200u) << v;
}

// L40S and A100 80GB (vLLM 0.9 on: under 70 GiB, or named A100): c = 2048,
// r = 256 (r x V = 32,833,536): run = 2 x 4096 x 2560 + 14 x 32,833,536 =
// 20,971,520 + 459,669,504 = 480,641,024; forward 209,715,200 + 2,052,096 =
// 211,767,296; item 268,873,728.
TEST(Sampler, L40sAndA100Run256) {
  for (const std::string name : {"l40s-48gb", "a100-sxm-80gb"}) {
    Evaluation e = evaluate(llama8b("", gpu(name)));
    EXPECT_EQ(forward(e), 211'767'296u) << name;
    EXPECT_EQ(sampler(e), 268'873'728u) << name;
  }
}

// vLLM 0.8 (the sort path): 1024 rows on GPUs named H100/H200 only (the
// 4,233,670,656 above); a B200 gets 256 rows and 2048 tokens: 20,971,520 +
// 38 x 32,833,536 = 20,971,520 + 1,247,674,368 = 1,268,645,888, item
// 1,268,645,888 - 211,767,296 = 1,056,878,592.
TEST(Sampler, Version08ByGpuName) {
  const std::string v08 = version("0.8.4");
  EXPECT_EQ(sampler(evaluate(llama8b(v08, gpu("h100-sxm-80gb")))), 4'233'670'656u);
  EXPECT_EQ(sampler(evaluate(llama8b(v08, gpu("b200-180gb")))), 1'056'878'592u);
}

// Tensor parallelism splits the layer's MLP and the logits, not the sampler
// run (V1 all-gathers the logits on every rank): at t = 2 on H100s the run is
// the same 1,922,564,096 B per rank. Forward per rank: 2 x 2 x 8192 x 4096 +
// 2 x 8192 x 14336 x 3 / 2 = 486,539,264, logits 1,026,048; item
// 1,922,564,096 - 487,565,312 = 1,434,998,784.
TEST(Sampler, TensorParallelKeepsTheRunPerRank) {
  Evaluation e = evaluate(llama8b("", tensor(2) + gpu("h100-sxm-80gb")));
  EXPECT_EQ(forward(e), 487'565'312u);
  EXPECT_EQ(sampler(e), 1'434'998'784u);
  EXPECT_EQ(forward(e) + sampler(e), 1'922'564'096u);
}

// r = min(max_num_seqs, the chunk): with prefill_chunk = 512 the run samples
// 512 rows: 2 x 4096 x (512 + 1024) + 14 x 512 x 128,256 = 12,582,912 +
// 919,339,008 = 931,921,920; forward 102,400 x 512 = 52,428,800 (the
// prefill; a decode step of 4 tokens is smaller) + 2,052,096; item
// 877,441,024.
TEST(Sampler, RowsCappedByTheChunk) {
  Evaluation e = evaluate(llama8b("", gpu("h100-sxm-80gb"), "prefill_chunk = 512\n"));
  EXPECT_EQ(forward(e), 54'480'896u);
  EXPECT_EQ(sampler(e), 877'441'024u);
}

// vLLM 0.17 sends fewer than 8 rows to the sort path (apply_top_k_top_p:
// HAS_TRITON and logits.shape[0] >= 8). With prefill_chunk = 8: forward
// 102,400 x 8 = 819,200 + logits 2,052,096 = 2,871,296. 8 rows (triton):
// run 2 x 4096 x (8 + 16) + 14 x 8 x 128,256 = 196,608 + 14,364,672 =
// 14,561,280, item 11,689,984. 7 rows (sort): 2 x 4096 x (8 + 14) + 38 x 7 x
// 128,256 = 180,224 + 34,116,096 = 34,296,320, item 31,425,024.
TEST(Sampler, TritonFromEightRows) {
  Evaluation eight = evaluate(llama8b("", gpu("h100-sxm-80gb"), "prefill_chunk = 8\nsampler_rows = 8\n"));
  EXPECT_EQ(forward(eight), 2'871'296u);
  EXPECT_EQ(sampler(eight), 11'689'984u);
  Evaluation seven = evaluate(llama8b("", gpu("h100-sxm-80gb"), "prefill_chunk = 8\nsampler_rows = 7\n"));
  EXPECT_EQ(sampler(seven), 31'425'024u);
  // The scenario's own sampler_path wins over the profile's.
  Evaluation sort = evaluate(llama8b("", gpu("h100-sxm-80gb"), "sampler_path = \"sort\"\n"));
  EXPECT_EQ(sampler(sort), 4'233'670'656u);
}

// vLLM V1 with FlashInfer installed (its log: "Using FlashInfer for top-p & top-k sampling") samples through
// flashinfer.sampling.top_k_top_p_sampling_from_logits: 14 bytes a row and vocabulary entry at any row count
// (inference_memory.hpp). With prefill_chunk = 8 and 7 rows: run 2 x 4096 x (8 + 14) + 14 x 7 x 128,256 =
// 180,224 + 12,569,088 = 12,749,312, item 12,749,312 - 2,871,296 = 9,878,016 (the sort path's 31,425,024 above).
TEST(Sampler, FlashInferAtAnyRowCount) {
  Evaluation seven = evaluate(
      llama8b("", gpu("h100-sxm-80gb"), "prefill_chunk = 8\nsampler_rows = 7\nsampler_path = \"flashinfer\"\n"));
  EXPECT_EQ(forward(seven), 2'871'296u);
  EXPECT_EQ(sampler(seven), 9'878'016u);
}

// The plugin's own default (the paper and pytorch profiles) has no sampler
// run; a run smaller than the forward adds nothing: one row (the sort path,
// fewer than 8), run 2 x 4096 x 8194 + 38 x 128,256 = 71,998,976 < 840,912,896.
TEST(Sampler, NoneByDefaultOrWhenTheForwardIsLarger) {
  EXPECT_EQ(sampler(evaluate_paper(llama8b("", gpu("h100-sxm-80gb"), "prefill_chunk = 8192\n"))), 0u);
  EXPECT_EQ(sampler(evaluate(llama8b("[framework]\nuse = \"pytorch\"\n", gpu("h100-sxm-80gb")))), 0u);
  Evaluation one = evaluate(llama8b("", gpu("h100-sxm-80gb"), "sampler_rows = 1\n"));
  EXPECT_EQ(sampler(one), 0u);
  EXPECT_EQ(forward(one), 840'912'896u);
}

// Only the last pipeline stage samples.
TEST(Sampler, LastPipelineStageOnly) {
  const std::string pp = "[[strategy]]\nuse = \"pipeline-parallel\"\nsize = 2\n";
  EXPECT_EQ(sampler(evaluate(llama8b("", pp + gpu("h100-sxm-80gb")))), 0u);
  EXPECT_GT(sampler(evaluate(llama8b("", pp + "stage = \"last\"\n" + gpu("h100-sxm-80gb")))), 0u);
}

// serving-budget counts it in the non-KV bytes: the paper view (no runtime
// items, and the plugin's default sampler_path "sort") with vLLM's H100
// settings given by hand: weights 16,060,522,496 + the run 5,074,583,552 =
// 21,135,106,048.
TEST(Sampler, ServingBudgetSeesIt) {
  Evaluation probe(paper(llama8b("", "[[strategy]]\nuse = \"serving-budget\"\n" + gpu("h100-sxm-80gb"),
                                 "prefill_chunk = 8192\nsampler_rows = 1024\n")));
  EXPECT_EQ(probe.estimator().attribute_int("report.non_kv_bytes"), 21'135'106'048);
}

TEST(SamplerErrors, UnknownPath) {
  const std::string error = error_of(llama8b("", gpu("h100-sxm-80gb"), "sampler_path = \"cub\"\n"));
  EXPECT_NE(error.find("sampler_path"), std::string::npos) << error;
  EXPECT_NE(error.find("must be \"sort\""), std::string::npos) << error;
}

TEST(SamplerErrors, NegativeRows) {
  const std::string error = error_of(llama8b("", gpu("h100-sxm-80gb"), "sampler_rows = -1\n"));
  EXPECT_NE(error.find("sampler_rows"), std::string::npos) << error;
  EXPECT_NE(error.find("must be 0 (no sampler run)"), std::string::npos) << error;
}

}  // namespace
}  // namespace memplan::testing
