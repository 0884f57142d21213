// The start-up sampler run of vLLM V1 (the inference plugin's sampler_rows,
// item activations.sampler). vLLM sizes its activation memory with
// profile_run: a dummy forward of max_num_batched_tokens tokens, then, on the
// last pipeline rank, _dummy_sampler_run over the last-token hidden states of
// min(max_num_seqs, max_num_batched_tokens) dummy requests
// (vllm/v1/worker/gpu_model_runner.py @ 4e1790651fc758c06c7a903dd4cd82364ac91b27).
// Its logits are all-gathered on every tensor-parallel rank and sampled with
// top_k = vocab - 1, top_p = 0.9, temperature 0.5; the PyTorch-native
// top-k/top-p path holds 28 bytes per (row x vocabulary entry) at its high
// point (derivation: inference_memory.hpp, kSamplerBytesPerElement, and
// docs/inference.md section 5). The run also keeps the chunk's hidden states,
// p h (c + 2 r). It follows the forward pass, so the phase's high point is
// max(layer + logits, run); the host sums the forward transients, so the
// item carries run - (layer + logits) when positive.
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

// By hand, c tokens per pass and r = min(max_num_seqs, c) sampled rows:
//   run = 2 x 4096 x (c + 2 r) + 28 x r x 128,256
// H100 (c = 8192, r = 1024): 83,886,080 + 3,677,356,032 = 3,761,242,112.
// The forward's transients there: layer 102,400 x 8192 = 838,860,800 (the
// gated MLP, prefill_default_test.cpp) + logits 4 x 4 x 128,256 = 2,052,096
// = 840,912,896, so the item is 3,761,242,112 - 840,912,896 = 2,920,329,216.
TEST(Sampler, H100RunsMaxNumSeqs1024) {
  Evaluation e = evaluate(llama8b("", gpu("h100-sxm-80gb")));
  EXPECT_EQ(forward(e), 840'912'896u);
  EXPECT_EQ(sampler(e), 2'920'329'216u);
  EXPECT_EQ(forward(e) + sampler(e), 3'761'242'112u);
}

// L40S and A100 80GB (vLLM 0.9 on: under 70 GiB, or named A100): c = 2048,
// r = 256: run = 2 x 4096 x 2560 + 28 x 256 x 128,256 = 20,971,520 +
// 919,339,008 = 940,310,528; forward 209,715,200 + 2,052,096 = 211,767,296;
// item 728,543,232.
TEST(Sampler, L40sAndA100Run256) {
  for (const std::string name : {"l40s-48gb", "a100-sxm-80gb"}) {
    Evaluation e = evaluate(llama8b("", gpu(name)));
    EXPECT_EQ(forward(e), 211'767'296u) << name;
    EXPECT_EQ(sampler(e), 728'543'232u) << name;
  }
}

// vLLM 0.8: 1024 on GPUs named H100/H200 only; a B200 gets 256 and 2048.
TEST(Sampler, Version08ByGpuName) {
  const std::string v08 = "[framework]\nuse = \"vllm\"\nversion = \"0.8.4\"\n";
  EXPECT_EQ(sampler(evaluate(llama8b(v08, gpu("h100-sxm-80gb")))), 2'920'329'216u);
  EXPECT_EQ(sampler(evaluate(llama8b(v08, gpu("b200-180gb")))), 728'543'232u);
}

// Tensor parallelism splits the layer's MLP and the logits, not the sampler
// run (V1 all-gathers the logits on every rank): at t = 2 on H100s the run is
// the same 3,761,242,112 B per rank. Forward per rank: 2 x 2 x 8192 x 4096 +
// 2 x 8192 x 14336 x 3 / 2 = 486,539,264, logits 1,026,048; item
// 3,761,242,112 - 487,565,312 = 3,273,676,800.
TEST(Sampler, TensorParallelKeepsTheRunPerRank) {
  Evaluation e = evaluate(llama8b("", tensor(2) + gpu("h100-sxm-80gb")));
  EXPECT_EQ(forward(e), 487'565'312u);
  EXPECT_EQ(sampler(e), 3'273'676'800u);
  EXPECT_EQ(forward(e) + sampler(e), 3'761'242'112u);
}

// r = min(max_num_seqs, the chunk): with prefill_chunk = 512 the run samples
// 512 rows: 2 x 4096 x (512 + 1024) + 28 x 512 x 128,256 = 12,582,912 +
// 1,838,678,016 = 1,851,260,928; forward 102,400 x 512 = 52,428,800 (the
// prefill; a decode step of 4 tokens is smaller) + 2,052,096; item
// 1,796,780,032.
TEST(Sampler, RowsCappedByTheChunk) {
  Evaluation e = evaluate(llama8b("", gpu("h100-sxm-80gb"), "prefill_chunk = 512\n"));
  EXPECT_EQ(forward(e), 54'480'896u);
  EXPECT_EQ(sampler(e), 1'796'780'032u);
}

// The plugin's own default (the paper and pytorch profiles) has no sampler
// run; a run smaller than the forward adds nothing: one row, run 2 x 4096 x
// 8194 + 28 x 128,256 = 70,716,416 < 840,912,896.
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
// items) with vLLM's H100 settings given by hand: weights 16,060,522,496 +
// the run 3,761,242,112 = 19,821,764,608.
TEST(Sampler, ServingBudgetSeesIt) {
  Evaluation probe(paper(llama8b("", "[[strategy]]\nuse = \"serving-budget\"\n" + gpu("h100-sxm-80gb"),
                                 "prefill_chunk = 8192\nsampler_rows = 1024\n")));
  EXPECT_EQ(probe.estimator().attribute_int("report.non_kv_bytes"), 19'821'764'608);
}

TEST(SamplerErrors, NegativeRows) {
  const std::string error = error_of(llama8b("", gpu("h100-sxm-80gb"), "sampler_rows = -1\n"));
  EXPECT_NE(error.find("sampler_rows"), std::string::npos) << error;
  EXPECT_NE(error.find("must be 0 (no sampler run)"), std::string::npos) << error;
}

}  // namespace
}  // namespace memplan::testing
