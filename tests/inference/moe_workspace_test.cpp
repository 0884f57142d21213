// vLLM's fused-MoE workspace (the inference plugin's moe_workspace, item
// activations.moe_workspace). Unquantized experts run vLLM's TritonExperts
// through FusedMoEModularKernel (vllm-project/vllm
// vllm/model_executor/layers/fused_moe/fused_moe.py, TritonExperts.workspace_shapes
// and apply; modular_kernel.py @ 003d383eb3f3275169256e85e5b0ae9d5455342a,
// _allocate_buffers). For M tokens, top-k, N = w1's rows on the rank (2 I / t,
// gated) and K = hidden:
//   workspace13 = M x top_k x max(N / 2, K)   silu_and_mul's output (cache2); the
//                                             fused output (M x K) reuses it
//   workspace2  = M x top_k x max(N, K)       w1's output (cache1), then w2's (cache3)
// in the activation dtype, from WorkspaceManager.get_simultaneous
// (vllm/v1/worker/workspace.py @ 00606a9b82656be5769ab11e3fc0029675d6b375: each
// size rounded up to 256 bytes, one buffer the manager keeps and only grows).
// So the workspace of the largest MoE pass stays allocated from the first MoE
// layer through the start-up sampler run; the routed experts' temporaries leave
// the layer's transient. The vllm profile sets moe_workspace = "persistent"
// from 0.12. Quantized experts (Marlin, mxfp4, CUTLASS kernels) keep the
// transient form.
#include <gtest/gtest.h>

#include <string>

#include "inference_scenarios.hpp"
#include "test_support.hpp"

namespace memplan::testing {
namespace {

std::string serve(const std::string& model, const std::string& version, int tensor = 1,
                  const std::string& precision = "use = \"bf16\"\n", const std::string& options = "") {
  std::string text = "name = \"s\"\nmode = \"infer\"\n[framework]\nuse = \"vllm\"\nversion = \"" + version +
                     "\"\n[model]\npreset = \"" + model + "\"\n[batch]\nmicro_batch = 1\nseq_len = 16\n"
                     "[precision]\n" + precision + "[activations]\nuse = \"inference\"\n" + options;
  if (tensor > 1) text += "[[strategy]]\nuse = \"tensor-parallel\"\nsize = " + std::to_string(tensor) + "\n";
  return text + "[hardware]\ngpu = \"h100-sxm-80gb\"\ncount = " + std::to_string(tensor) + "\n";
}

uint64_t item(const Evaluation& e, const char* name) { return e.item_bytes(name, MEMPLAN_ROLE_ACTIVATIONS); }

// Mixtral-8x7B, TP 2, vLLM 0.19 on an H100 (c = 8192, r = 1024; the case
// validation/VLLM-v019-mixtral-8x7b-tp2.toml): I = 14336, I/t = 7168, N = 14336,
// K = 4096, top_k 2, p = 2:
//   workspace13 = 2 x 8192 x 2 x max(7168, 4096)  = 234,881,024
//   workspace2  = 2 x 8192 x 2 x max(14336, 4096) = 469,762,048  -> 704,643,072
//   layer: residual 2 x 2 x 8192 x 4096 = 134,217,728 + attention
//          2 x 8192 x (32 x 128 / 2 + 2 x 4 x 128) = 50,331,648 (no shared
//          expert: the MLP branch is empty)           = 184,549,376
//   logits 4 x 1 x 32000 / 2 = 64,000
//   sampler run 2 x 4096 x (8192 + 2 x 1024) + 14 x 1024 x 32000
//             = 83,886,080 + 458,752,000 = 542,638,080
//   item 542,638,080 - 184,549,376 - 64,000 = 358,024,704
TEST(MoeWorkspace, MixtralTp2KeepsTheWorkspaceThroughTheSamplerRun) {
  Evaluation e = evaluate(serve("mixtral-8x7b", "0.19", 2));
  EXPECT_EQ(item(e, "activations.moe_workspace"), 704'643'072u);
  EXPECT_EQ(item(e, "activations.layer"), 184'549'376u);
  EXPECT_EQ(item(e, "activations.logits"), 64'000u);
  EXPECT_EQ(item(e, "activations.sampler"), 358'024'704u);
}

// Up to 0.11 the routed experts' caches are the layer's own transient:
//   MLP 2 x 8192 x 7168 x 3 x 2 = 704,643,072, layer 134,217,728 + 704,643,072
//   = 838,860,800. At 0.11 the sampler run sorts (38 bytes per entry):
//   83,886,080 + 38 x 1024 x 32000 = 1,329,070,080, item 1,329,070,080 -
//   838,860,800 - 64,000 = 490,145,280.
TEST(MoeWorkspace, TransientBefore012) {
  Evaluation e = evaluate(serve("mixtral-8x7b", "0.11", 2));
  EXPECT_EQ(item(e, "activations.moe_workspace"), 0u);
  EXPECT_EQ(item(e, "activations.layer"), 838'860'800u);
  EXPECT_EQ(item(e, "activations.sampler"), 490'145'280u);
}

// Qwen3-30B-A3B, TP 1: experts narrower than the hidden size (I = 768, K = 2048,
// top_k 8), so both workspaces take K:
//   workspace13 = 2 x 8192 x 8 x max(768, 2048)  = 268,435,456
//   workspace2  = 2 x 8192 x 8 x max(1536, 2048) = 268,435,456 -> 536,870,912
// (the transient form, p c I 3 top_k = 2 x 8192 x 768 x 3 x 8, is 301,989,888).
TEST(MoeWorkspace, ExpertsNarrowerThanHiddenTakeHidden) {
  EXPECT_EQ(item(evaluate(serve("qwen3-30b-a3b", "0.19")), "activations.moe_workspace"), 536'870'912u);
}

// gpt-oss-20b with mxfp4 experts (0.53125 byte per weight): vLLM runs them with
// its mxfp4 kernels, whose workspaces are not modelled, so the routed experts
// stay in the layer: residual 2 x 2 x 8192 x 2880 = 94,371,840, attention
// 2 x 8192 x (64 x 64 + 2 x 8 x 64) = 83,886,080, MLP 2 x 8192 x 2880 x 3 x 4
// = 566,231,040 -> layer 94,371,840 + 566,231,040 = 660,602,880.
TEST(MoeWorkspace, QuantizedExpertsKeepTheTransientForm) {
  Evaluation e = evaluate(serve("gpt-oss-20b", "0.19", 1,
                                "use = \"quantized\"\nformat = \"mxfp4\"\nquantize = \"experts\"\n"));
  EXPECT_EQ(item(e, "activations.moe_workspace"), 0u);
  EXPECT_EQ(item(e, "activations.layer"), 660'602'880u);
}

// A dense model gets no workspace; a scenario can turn it off.
TEST(MoeWorkspace, DenseModelsAndTheOption) {
  EXPECT_EQ(item(evaluate(serve("llama-3.1-8b", "0.19")), "activations.moe_workspace"), 0u);
  Evaluation off = evaluate(serve("mixtral-8x7b", "0.19", 2, "use = \"bf16\"\n", "moe_workspace = \"transient\"\n"));
  EXPECT_EQ(item(off, "activations.moe_workspace"), 0u);
  EXPECT_EQ(item(off, "activations.layer"), 838'860'800u);
}

TEST(MoeWorkspaceErrors, UnknownValue) {
  const std::string error =
      error_of(serve("mixtral-8x7b", "0.19", 2, "use = \"bf16\"\n", "moe_workspace = \"pooled\"\n"));
  EXPECT_NE(error.find("moe_workspace"), std::string::npos) << error;
  EXPECT_NE(error.find("must be \"transient\""), std::string::npos) << error;
}

}  // namespace
}  // namespace memplan::testing
