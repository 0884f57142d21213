// DoRA (Liu et al. 2024, "DoRA: Weight-Decomposed Low-Rank Adaptation", arXiv
// 2402.09353), the lora strategy's `dora` (PEFT's use_dora) and what the
// megatron activation model's eager layers keep for it (docs/formulas.md,
// "DoRA"). Sources: peft src/peft/tuners/lora/dora.py @ d787f51b
// (DoraLinearLayer.get_weight_norm 85-91, get_lora_weight 94-99, forward
// 132-166), variants.py (DoraLinearVariant.forward 218-246), layer.py 1056 (the
// input cast to the adapters' dtype); torchtune torchtune/modules/peft/dora.py
// @ 1814feb1 (DoRALinear.forward 126-162). Every figure is the hand count
// written beside it.
#include <gtest/gtest.h>

#include <string>

#include "../../plugins/activations/megatron/transformer_activations.hpp"
#include "layer_shapes.hpp"
#include "test_support.hpp"

namespace memplan::testing {
namespace {

using plugins::ActivationSettings;
using plugins::RecomputePolicy;
using plugins::TransformerShape;

// Llama-3.2-3B (h 3072, q 3072, kv 1024, f 8192) with r 32 on q and v, as PEFT's MetaMathQA comparison runs it
// (method_comparison/MetaMathQA/results/lora--llama-3.2-3B-rank32-dora.json @ 51c2ff666).
ActivationSettings qv_r32(double adapter_bytes) {
  ActivationSettings o = eager_bf16_flash_frozen();
  o.eager.adapter_inputs = 2 * 3072;
  o.eager.adapter_distinct_inputs = 3072;
  o.eager.adapter_rank = 32 * 2;
  o.eager.adapter_bytes = adapter_bytes;
  return o;
}

// DoRA on q (3072 -> 3072) and v (3072 -> 1024): the outputs' widths and the matrices' elements (lora.dora_*).
void with_dora_on_q_and_v(ActivationSettings& o) {
  o.eager.dora_outputs = 3072 + 1024;
  o.eager.dora_weights = 3072.0 * 3072 + 3072.0 * 1024;
}

// Per token and layer, fp32 adapters on the bf16 base (PEFT's autocast_adapter_dtype), no autocast, no dropout:
// LoRA keeps 123,240 bytes (EagerLayers.LoraAdaptersInAnotherDtypeCastTheirInputEach). DoRA's two products with
// the trainable magnitude save base_result, q's and v's base outputs in bf16 (2 x (3072 + 1024) = 8,192), and
// lora_result, lora_B's outputs in fp32 (x was cast to the adapters' dtype: 4 x 4,096 = 16,384): 24,576 more,
// 147,816.
// With lora_dropout 0.05 LoRA keeps each matrix's dropped fp32 copy and mask, (4 + 1) x 6,144 = 30,720, and
// lora_B's inputs 256: 98,408 + 30,976 = 129,384; DoRA's base_result is then F.linear of the dropped fp32 input
// (fp32: 4 x 4,096) beside lora_B's (4 x 4,096), 32,768 a token, and that matmul keeps the fp32 W.to(x.dtype) of
// each adapted weight for the input's gradient: (3072 x 3072 + 3072 x 1024) x 4 = 12,582,912 x 4 = 50,331,648
// bytes a layer. One token: 129,384 + 32,768 + 50,331,648 = 50,493,800.
TEST(Dora, SavesBaseAndAdapterOutputsPerToken) {
  const TransformerShape x = llama(3072, 24, 8, 8192);
  ActivationSettings o = qv_r32(4);
  EXPECT_DOUBLE_EQ(plugins::stored_bytes_per_layer(x, o), 123'240.0);
  with_dora_on_q_and_v(o);
  EXPECT_DOUBLE_EQ(plugins::stored_bytes_per_layer(x, o), 147'816.0);
  o.eager.adapter_dropout = 0.05;
  EXPECT_DOUBLE_EQ(plugins::stored_bytes_per_layer(x, o), 50'493'800.0);
}

// Under autocast over the bf16 weights (the Trainer with bf16: adapter_autocast) lora_B runs in bf16 and the base
// output is bf16: 2 x 2 x 4,096 = 16,384 a token beside LoRA's 110,824 (the adapters' kept inputs in bf16, 2 x
// 6,144, and lora_B's 2 x 64: 98,408 + 12,288 + 128), 127,208. With dropout LoRA keeps 3 x 6,144 + 128 = 18,560
// (116,968), the dropped base output is bf16 under autocast, and autocast's bf16 cast of each fp32 W.to(x.dtype)
// is what F.linear keeps: 12,582,912 x 2 = 25,165,824 a layer; 116,968 + 16,384 + 25,165,824 = 25,299,176.
// Adapters in bf16 (torchtune's DoRALinear, whose adapters take the model's dtype; PEFT without the upcast):
// 2 x 2 x 4,096 = 16,384 beside LoRA's 98,408 + 2 x 3,072 (the shared input once) + 2 x 64 = 104,680, 121,064;
// with dropout no weight copy (W.to(bf16) is the bf16 weight itself): LoRA 98,408 + 3 x 6,144 + 128 = 116,968,
// + 16,384 = 133,352.
TEST(Dora, AutocastAndSixteenBitAdapters) {
  const TransformerShape x = llama(3072, 24, 8, 8192);
  ActivationSettings o = qv_r32(4);
  o.eager.adapter_autocast = true;
  with_dora_on_q_and_v(o);
  EXPECT_DOUBLE_EQ(plugins::stored_bytes_per_layer(x, o), 127'208.0);
  o.eager.adapter_dropout = 0.05;
  EXPECT_DOUBLE_EQ(plugins::stored_bytes_per_layer(x, o), 25'299'176.0);
  ActivationSettings bf16 = qv_r32(2);
  with_dora_on_q_and_v(bf16);
  EXPECT_DOUBLE_EQ(plugins::stored_bytes_per_layer(x, bf16), 121'064.0);
  bf16.eager.adapter_dropout = 0.05;
  EXPECT_DOUBLE_EQ(plugins::stored_bytes_per_layer(x, bf16), 133'352.0);
}

// The weight norm's transients (dora.py @ d787f51b 85-99, 137-145): for q (3072 x 3072, the largest input and
// matrix of q and v) the fp32 identity 3072^2 x 4 = 37,748,736, and four fp32 tensors of 3072 x 3072 at once
// (lora_weight, W.to(fp32), the scaled product and the sum): 4 x 4 x 9,437,184 = 150,994,944; 188,743,680 bytes.
// bf16 adapters on the bf16 base (torchtune): the identity 3072^2 x 2 = 18,874,368 and three bf16 tensors (no
// copy of W): 3 x 2 x 9,437,184 = 56,623,104; 75,497,472.
TEST(Dora, WeightNormTransient) {
  ActivationSettings o = qv_r32(4);
  o.eager.dora_outputs = 3072 + 1024;
  EXPECT_DOUBLE_EQ(plugins::dora_weight_norm_bytes(o, 3072, 3072.0 * 3072), 188'743'680.0);
  ActivationSettings bf16 = qv_r32(2);
  bf16.eager.dora_outputs = 3072 + 1024;
  EXPECT_DOUBLE_EQ(plugins::dora_weight_norm_bytes(bf16, 3072, 3072.0 * 3072), 75'497'472.0);
  bf16.eager.dora_outputs = 0;  // no DoRA, nothing
  EXPECT_DOUBLE_EQ(plugins::dora_weight_norm_bytes(bf16, 3072, 3072.0 * 3072), 0.0);
}

// PEFT's MetaMathQA job with use_dora (results/lora--llama-3.2-3B-rank32-dora.json @ 51c2ff666: Llama-3.2-3B bf16,
// r 32 on q_proj and v_proj, fp32 adapters, batch 4 x 768, no autocast, no checkpointing), through the plugins.
const std::string kMmqa =
    "name = \"d\"\nmode = \"train\"\n[model]\npreset = \"llama-3.2-3b\"\n[batch]\nmicro_batch = 4\nseq_len = 768\n"
    "[precision]\nuse = \"bf16\"\nadapters = \"fp32\"\noptimizer_states = \"fp32\"\n[optimizer]\nuse = \"adamw\"\n"
    "[activations]\nuse = \"megatron\"\nlayer = \"eager\"\nflash_attention = true\ndropout = false\n";
const std::string kQv = "[[strategy]]\nuse = \"lora\"\nr = 32\nlora_alpha = 64\ntarget_modules = [\"q_proj\", \"v_proj\"]\n";

// Trainable parameters: LoRA's 28 x 32 x ((3072 + 3072) + (3072 + 1024)) = 9,175,040 and the magnitude vectors,
// 28 x (3072 + 1024) = 114,688: 9,289,728, the result file's num_trainable_params. The magnitude items are fp32
// with fp32 gradients (the adapters'): q's 28 x 3072 x 4 = 344,064 bytes, v's 28 x 1024 x 4 = 114,688.
// Activations: 28 layers x 3,072 tokens x 24,576 bytes (Dora.SavesBaseAndAdapterOutputsPerToken) =
// 2,113,929,216 more than LoRA's; the measured peaks differ by 24,532,484,096 - 22,292,725,760 = 2,239,758,336
// (results/lora--llama-3.2-3B-rank32.json, the same settings). The weight norm's 188,743,680 bytes
// (Dora.WeightNormTransient) stand while a layer's forward runs, and not in backward (no recomputation).
TEST(Dora, PeftMethodComparisonThroughThePlugins) {
  const Evaluation lora = evaluate_paper(kMmqa + kQv);
  const Evaluation dora = evaluate_paper(kMmqa + kQv + "use_dora = true\n");
  EXPECT_EQ(report_detail(lora, "lora_parameters"), "9175040");
  EXPECT_EQ(report_detail(dora, "lora_parameters"), "9289728");
  EXPECT_EQ(dora.breakdown().params_trainable, 9'289'728.0);
  EXPECT_EQ(dora.item_bytes("layers.0-27.lora.attn.q.dora_magnitude", MEMPLAN_ROLE_WEIGHTS), 344'064u);
  EXPECT_EQ(dora.item_bytes("layers.0-27.lora.attn.v.dora_magnitude", MEMPLAN_ROLE_WEIGHTS), 114'688u);
  EXPECT_EQ(dora.item_bytes("layers.0-27.lora.attn.q.dora_magnitude", MEMPLAN_ROLE_GRADIENTS), 344'064u);
  EXPECT_EQ(dora.item_bytes("layers.0-27.activations", MEMPLAN_ROLE_ACTIVATIONS) -
                lora.item_bytes("layers.0-27.activations", MEMPLAN_ROLE_ACTIVATIONS),
            2'113'929'216u);
  EXPECT_EQ(dora.item_bytes_at("activations.dora_weight_norm", MEMPLAN_LIFETIME_FORWARD_IN_LAYERS), 188'743'680u);
  EXPECT_EQ(dora.item_bytes_at("activations.dora_weight_norm", MEMPLAN_LIFETIME_BACKWARD_IN_LAYERS), 0u);
  EXPECT_EQ(lora.item_lifetime("activations.dora_weight_norm"), -1);
  // memplan's name for the option gives the same.
  EXPECT_EQ(evaluate_paper(kMmqa + kQv + "dora = true\n").breakdown().sum, dora.breakdown().sum);
}

// Under full recomputation each layer keeps its input only; the recomputed layer's saves (activations.recompute,
// in backward) hold DoRA's outputs: 3,072 tokens x 24,576 = 75,497,472 bytes more than LoRA's, and the weight
// norm is computed again while backward recomputes a layer (188,743,680 at backward_in_layers).
TEST(Dora, RecomputedLayerKeepsTheOutputsAndComputesTheNormAgain) {
  const std::string recompute = "[[strategy]]\nuse = \"recompute\"\npolicy = \"full\"\n";
  const Evaluation lora = evaluate_paper(kMmqa + kQv + recompute);
  const Evaluation dora = evaluate_paper(kMmqa + kQv + "use_dora = true\n" + recompute);
  EXPECT_EQ(dora.item_bytes("layers.0-27.activations", MEMPLAN_ROLE_ACTIVATIONS),
            lora.item_bytes("layers.0-27.activations", MEMPLAN_ROLE_ACTIVATIONS));
  EXPECT_EQ(dora.item_bytes_at("activations.recompute", MEMPLAN_LIFETIME_TRANSIENT_BACKWARD) -
                lora.item_bytes_at("activations.recompute", MEMPLAN_LIFETIME_TRANSIENT_BACKWARD),
            75'497'472u);
  EXPECT_EQ(dora.item_bytes_at("activations.dora_weight_norm", MEMPLAN_LIFETIME_BACKWARD_IN_LAYERS), 188'743'680u);
}

// Lines of lora_error's scenarios: 1 name, 2 mode, 3 [model], 4 the model line, 5-10 the precision, optimizer
// and activations tables, 11 [[strategy]], 12 use, 13 on the options given.
const std::string kPrefix = "error: in [[strategy]] #1, strategy plugin 'lora'";
std::string library(const std::string& plugin) { return " (plugin library " + plugin_dir() + "/memplan-" + plugin + ".so)"; }

std::string lora_error(const std::string& model, const std::string& options) {
  return error_of("name = \"d\"\nmode = \"train\"\n[model]\n" + model +
                      "[precision]\nuse = \"bf16\"\n[optimizer]\nuse = \"adamw\"\n[activations]\nuse = \"none\"\n"
                      "[[strategy]]\nuse = \"lora\"\n" + options,
                  "d.toml");
}

// Both names of the option, and what DoRA does not run with or memplan does not model it with, are refused,
// each saying why and what to do.
TEST(DoraErrors, Options) {
  const std::string llama = "preset = \"llama-2-7b\"\n";
  EXPECT_EQ(lora_error(llama, "rank = 8\ntargets = \"q,v\"\ndora = true\nuse_dora = true\n"),
            "d.toml:16:12: " + kPrefix + ", option 'use_dora': is PEFT's name for dora, which is given too; keep one "
            "of them" + library("lora"));
  const std::string head = lora_error(llama, "rank = 8\ntargets = \"q,lm_head\"\nuse_dora = true\n");
  EXPECT_NE(head.find("option 'use_dora': asks for DoRA with lm_head in targets"), std::string::npos) << head;
  EXPECT_NE(head.find("take lm_head out of targets"), std::string::npos) << head;
  const std::string experts = lora_error("preset = \"mixtral-8x7b\"\n", "rank = 8\ntargets = \"all-linear\"\ndora = true\n");
  EXPECT_NE(experts.find("option 'dora': asks for DoRA with experts in targets"), std::string::npos) << experts;
  EXPECT_NE(experts.find("layer.py @ d787f51b, line 2273"), std::string::npos) << experts;
  // The router is counted as the Linear of h x E it is in transformers 4's MixtralSparseMoeBlock.gate.
  EXPECT_EQ(lora_error("preset = \"mixtral-8x7b\"\n", "rank = 8\ntargets = \"attention,router\"\ndora = true\n"), "");
  const std::string fused = lora_error(llama, "rank = 8\ntargets = \"q,k,v\"\nfused_qkv = true\ndora = true\n");
  EXPECT_NE(fused.find("option 'dora': and fused_qkv describe two different q, k, v adapters"), std::string::npos)
      << fused;
  const std::string axolotl = lora_error(llama, "rank = 8\ntargets = \"all-linear\"\nkernels = \"axolotl\"\ndora = true\n");
  EXPECT_NE(axolotl.find("option 'kernels': is \"axolotl\" with DoRA"), std::string::npos) << axolotl;
  EXPECT_NE(axolotl.find("with kernels = \"none\""), std::string::npos) << axolotl;
}

// Unsloth patches no projection that has a DoRA magnitude (unsloth/models/llama.py @ 015bdef0d9 lines 3714-3764):
// PEFT's forward runs and the report says so; the activations are those of kernels = "none".
TEST(Dora, UnslothLeavesDoraToPeft) {
  const std::string all = "[[strategy]]\nuse = \"lora\"\nrank = 16\ntargets = \"all-linear\"\ndora = true\n";
  const Evaluation unsloth = evaluate_paper(kMmqa + all + "kernels = \"unsloth\"\n");
  EXPECT_EQ(report_detail(unsloth, "lora_kernels"),
            "\"none: DoRA adapters, which unsloth leaves to PEFT's forward (its patch check)\"");
  EXPECT_EQ(unsloth.item_bytes("layers.0-27.activations", MEMPLAN_ROLE_ACTIVATIONS),
            evaluate_paper(kMmqa + all).item_bytes("layers.0-27.activations", MEMPLAN_ROLE_ACTIVATIONS));
}

// The megatron activation model counts DoRA in eager and compiled layers; Megatron's own (fused, legacy) and
// tensor parallelism (PEFT's LoraParallelLinear raises with use_dora: tp_layer.py @ d787f51b 65-66) are refused.
TEST(DoraErrors, LayersAndTensorParallelism) {
  std::string fused = kMmqa + kQv + "use_dora = true\n";
  fused.replace(fused.find("layer = \"eager\""), 15, "layer = \"fused\"");
  const std::string error = error_of(fused);
  EXPECT_NE(error.find("layer = \"fused\" counts Megatron's own layers, in which memplan does not model DoRA"),
            std::string::npos)
      << error;
  std::string compiled = kMmqa + kQv + "use_dora = true\n";
  compiled.replace(compiled.find("layer = \"eager\""), 15, "layer = \"compiled\"");
  EXPECT_EQ(error_of(compiled), "");
  const std::string tp = error_of(kMmqa + kQv + "use_dora = true\n[[strategy]]\nuse = \"tensor-parallel\"\nsize = 2\n"
                                  "[hardware]\ngpu = \"h100-sxm-80gb\"\ncount = 2\n");
  EXPECT_NE(tp.find("PEFT's DoRA, which does not run under tensor parallelism"), std::string::npos) << tp;
}

}  // namespace
}  // namespace memplan::testing
