// The 'lora' strategy: adapter parameters r (d_in + d_out) per adapted
// matrix (Hu et al. 2021, "LoRA: Low-Rank Adaptation of Large Language
// Models", arXiv 2106.09685, section 4.1: W + BA with B of d x r and A of
// r x k), checked against published parameter counts and hand derivations.
#include <gtest/gtest.h>

#include <string>

#include "trainability_support.hpp"

namespace memplan::testing::trainability {
namespace {

const std::string kLlama = "preset = \"llama-2-7b\"\n";
const std::string kMixtral = "preset = \"mixtral-8x7b\"\n";
const std::string kGpt3 = "preset = \"gpt3-175b\"\n";
const std::string kMixedAdamW =
    "[precision]\nuse = \"mixed-bf16\"\n[optimizer]\nuse = \"adamw\"\n[activations]\nuse = \"none\"\n";

std::string lora(const std::string& model, const std::string& options, const std::string& tables = kMixedAdamW) {
  return train_scenario(model, tables + "[[strategy]]\nuse = \"lora\"\n" + options);
}

double trainable(const std::string& model, const std::string& options) {
  return evaluate_paper(lora(model, options)).breakdown().params_trainable;
}

// PEFT's print_trainable_parameters for meta-llama/Llama-2-7b-hf with
// llama-recipes' default LoRA config (meta-llama/llama-recipes,
// src/llama_recipes/configs/peft.py at 44e0820: r = 8, target_modules q_proj
// and v_proj) prints "trainable params: 4,194,304 || all params:
// 6,742,609,920". By hand: 2 matrices x 8 x (4096 + 4096) x 32 layers =
// 4,194,304; all = 6,738,415,616 + 4,194,304.
TEST(Lora, PeftLlama2SevenBillionQueryValueRank8) {
  Evaluation evaluation = evaluate_paper(lora(kLlama, "rank = 8\nalpha = 32\ntargets = \"q, v\"\n"));
  EXPECT_EQ(evaluation.breakdown().params_trainable, 4'194'304.0);
  EXPECT_EQ(evaluation.breakdown().params_total, 6'742'609'920.0);
  EXPECT_EQ(detail(evaluation, "lora_parameters"), "4194304");
  EXPECT_EQ(detail(evaluation, "lora_scaling"), "4");  // alpha / r = 32 / 8
  // bf16 adapters: 32 x 8 x 8192 x 2 bytes = 4,194,304 bytes for q's.
  EXPECT_EQ(evaluation.item_bytes("layers.0-31.lora.attn.q", MEMPLAN_ROLE_WEIGHTS), 4'194'304u);
  // The base is frozen: the only gradients are the adapters' (bf16, 2 bytes each).
  EXPECT_EQ(evaluation.component(MEMPLAN_ROLE_GRADIENTS), 4'194'304u * 2);
  EXPECT_EQ(evaluation.item_bytes("layers.0-31.attn.q", MEMPLAN_ROLE_GRADIENTS), 0u);
  // Mixed precision: 2 + 2 + 4 + 8 = 16 bytes per adapter parameter beyond the
  // frozen bf16 base (6,738,415,616 x 2 = 13,476,831,232 bytes).
  EXPECT_EQ(evaluation.breakdown().sum, 13'476'831'232u + 4'194'304u * 16);
}

// PEFT's modules_to_save (src/peft/utils/other.py, ModulesToSaveWrapper @
// v0.5.0): the wrapper trains copy.deepcopy(original_module) and keeps the
// original, frozen, beside it. Llama-2-7B with modules_to_save = ["embed_tokens",
// "lm_head"] beside the q, v adapters (4,194,304): the embedding and the head,
// 32,000 x 4,096 = 131,072,000 each, train: 262,144,000 + 4,194,304 =
// 266,338,304 trainable; the frozen originals add 262,144,000 parameters (all:
// 6,742,609,920 + 262,144,000 = 7,004,753,920). Mixed bf16 + AdamW: the originals
// 262,144,000 x 2 = 524,288,000 bytes beside 16 bytes per trained parameter and
// the frozen rest at 2: sum (6,738,415,616 - 262,144,000) x 2 + 524,288,000 +
// 266,338,304 x 16 = 12,952,543,232 + 524,288,000 + 4,261,412,864 = 17,738,244,096.
TEST(Lora, ModulesToSaveTrainCopiesBesideTheFrozenOriginals) {
  Evaluation e = evaluate_paper(
      lora(kLlama, "rank = 8\ntargets = \"q, v\"\nmodules_to_save = [\"embed_tokens\", \"lm_head\"]\n"));
  EXPECT_EQ(e.breakdown().params_trainable, 266'338'304.0);
  EXPECT_EQ(e.breakdown().params_total, 7'004'753'920.0);
  EXPECT_EQ(e.item_bytes("modules_to_save.original.embeddings", MEMPLAN_ROLE_WEIGHTS), 262'144'000u);
  EXPECT_EQ(e.item_bytes("modules_to_save.original.lm_head", MEMPLAN_ROLE_WEIGHTS), 262'144'000u);
  EXPECT_EQ(e.item_bytes("modules_to_save.original.lm_head", MEMPLAN_ROLE_GRADIENTS), 0u);
  EXPECT_EQ(e.item_bytes("lm_head", MEMPLAN_ROLE_GRADIENTS), 262'144'000u);
  EXPECT_EQ(e.breakdown().sum, 17'738'244'096u);
  EXPECT_NE(error_of(lora(kLlama, "rank = 8\ntargets = \"q, v\"\nmodules_to_save = \"score\"\n"))
                .find("modules_to_save': has \"score\"; memplan trains whole copies of"),
            std::string::npos);
  EXPECT_NE(error_of(lora(kLlama, "rank = 8\ntargets = \"q, lm_head\"\nmodules_to_save = \"lm_head\"\n"))
                .find("has lm_head, which targets also adapts"),
            std::string::npos);
  // A tied model (Llama-3.2-1B): PEFT's copy would untie the head from the embedding; refused, not ignored.
  EXPECT_NE(error_of(lora("preset = \"llama-3.2-1b\"\n", "rank = 8\ntargets = \"q, v\"\nmodules_to_save = \"lm_head\"\n"))
                .find("but this model ties the two (tied_embeddings)"),
            std::string::npos);
}

// PEFT's get_peft_model(..., autocast_adapter_dtype=True), its default,
// upcasts bf16/fp16 adapters to fp32 (peft src/peft/tuners/tuners_utils.py @
// d787f51b, _cast_adapter_dtype); torch's .grad and AdamW's states take the
// parameter's dtype. The same llama-recipes adapters on a pure-bf16 Llama-2-7B
// with precision adapters = "fp32" and optimizer_states = "fp32": q's adapters
// 32 x 8 x 8192 x 4 = 8,388,608 bytes; 4 + 4 + 8 = 16 bytes per adapter
// parameter beside the frozen bf16 base (13,476,831,232 bytes); without the
// option the adapters are bf16 (2 + 2 + 4 = 8 bytes with bf16 states).
TEST(Lora, AdaptersInTheirOwnDtype) {
  const std::string bf16 = "[optimizer]\nuse = \"adamw\"\n[activations]\nuse = \"none\"\n[precision]\nuse = \"bf16\"\n";
  const std::string adapters = "rank = 8\ntargets = \"q, v\"\n";
  Evaluation fp32 = evaluate_paper(lora(kLlama, adapters, bf16 + "adapters = \"fp32\"\noptimizer_states = \"fp32\"\n"));
  EXPECT_EQ(fp32.item_bytes("layers.0-31.lora.attn.q", MEMPLAN_ROLE_WEIGHTS), 8'388'608u);
  EXPECT_EQ(fp32.component(MEMPLAN_ROLE_GRADIENTS), 4'194'304u * 4);
  EXPECT_EQ(fp32.breakdown().sum, 13'476'831'232u + 4'194'304u * 16);
  Evaluation same = evaluate_paper(lora(kLlama, adapters, bf16));
  EXPECT_EQ(same.item_bytes("layers.0-31.lora.attn.q", MEMPLAN_ROLE_WEIGHTS), 4'194'304u);
  EXPECT_EQ(same.breakdown().sum, 13'476'831'232u + 4'194'304u * 8);
}

// PEFT's LoraConfig names (peft src/peft/tuners/lora/config.py): r,
// lora_alpha, lora_dropout and target_modules, a list of module names, give
// the same adapters as memplan's: the llama-recipes config above, 4,194,304
// trainable parameters, scaling 32 / 8 = 4; "all-linear" as targets does.
TEST(Lora, PeftConfigNamesAreAccepted) {
  Evaluation peft = evaluate_paper(lora(kLlama, "r = 8\nlora_alpha = 32\nlora_dropout = 0.05\n"
                                                "target_modules = [\"q_proj\", \"v_proj\"]\n"));
  EXPECT_EQ(peft.breakdown().params_trainable, 4'194'304.0);
  EXPECT_EQ(detail(peft, "lora_scaling"), "4");
  EXPECT_EQ(trainable(kLlama, "r = 8\ntarget_modules = \"all-linear\"\n"),
            trainable(kLlama, "rank = 8\ntargets = \"all-linear\"\n"));
  EXPECT_EQ(trainable(kLlama, "r = 8\ntarget_modules = [\"gate_proj\", \"up_proj\", \"down_proj\", \"o_proj\"]\n"),
            trainable(kLlama, "rank = 8\ntargets = \"mlp, o\"\n"));
}

// Hu et al. 2021, section 5.1: |Θ| = 2 x L̂ x d_model x r with L̂ the adapted
// matrices. GPT-3 175B (96 layers, d_model 12288), Wq and Wv: L̂ = 192.
// Table 4's 37.7M is r = 8: 2 x 192 x 12288 x 8 = 37,748,736; its 4.7M is
// 2 x 192 x 12288 x 1 = 4,718,592.
TEST(Lora, HuEtAlGpt3TrainableParameters) {
  EXPECT_EQ(trainable(kGpt3, "rank = 8\ntargets = \"q,v\"\n"), 37'748'736.0);
  EXPECT_EQ(trainable(kGpt3, "rank = 1\ntargets = \"q,v\"\n"), 4'718'592.0);
}

// Hu et al. 2021, section 4.2: LoRA on GPT-3 175B with r = 4 on Wq and Wv
// trains with about 350 GB of memory (the frozen 16-bit weights: 2 bytes x
// 174,615,846,912 = 349.23 GB), and the adapters, 2 x 192 x 12288 x 4 =
// 18,874,368 parameters, take 37,748,736 bytes in 16 bits (36.0 MiB; the
// paper rounds its checkpoint to "35MB"). Full fine-tuning's "1.2TB" is not
// derivable from the paper's text and is not asserted.
TEST(Lora, HuEtAlGpt3MemoryIsTheFrozen16BitWeights) {
  const std::string bf16 = "[precision]\nuse = \"bf16\"\n[optimizer]\nuse = \"adam\"\n[activations]\nuse = \"none\"\n";
  Evaluation evaluation = evaluate_paper(lora(kGpt3, "rank = 4\ntargets = \"q,v\"\n", bf16));
  EXPECT_EQ(evaluation.breakdown().params_trainable, 18'874'368.0);
  EXPECT_EQ(evaluation.item_bytes("layers.0-95.lora.attn.q", MEMPLAN_ROLE_WEIGHTS) +
                evaluation.item_bytes("layers.0-95.lora.attn.v", MEMPLAN_ROLE_WEIGHTS),
            37'748'736u);
  EXPECT_EQ(evaluation.component(MEMPLAN_ROLE_WEIGHTS), 349'231'693'824u + 37'748'736u);
  EXPECT_NEAR(static_cast<double>(evaluation.breakdown().peak) / kGB, 350.0, 1.0);
}

// "all-linear" on a dense model: q, k, v, o and the MLP's gate, up and down.
// Llama-2-7B, r = 16, per layer: 4 x 16 x (4096 + 4096) = 524,288 +
// 3 x 16 x (4096 + 11008) = 724,992, = 1,249,280; x 32 = 39,976,960 (the
// count PEFT prints for target_modules="all-linear", r=16 on this model).
TEST(Lora, AllLinearOnADenseModel) {
  EXPECT_EQ(trainable(kLlama, "rank = 16\ntargets = \"all-linear\"\n"), 39'976'960.0);
  EXPECT_EQ(trainable(kLlama, "rank = 16\ntargets = \"attention,mlp\"\n"), 39'976'960.0);
  // "attention" already holds q: naming it twice counts it once.
  EXPECT_EQ(trainable(kLlama, "rank = 16\ntargets = \"attention,q\"\n"), 32.0 * 524'288);
}

// Grouped-query attention and MoE, Mixtral (q 4096 wide, k and v 1024,
// 8 experts of 14336), r = 16, per layer: q and o 16 x 8192 = 131,072 each;
// k and v 16 x (4096 + 1024) = 81,920 each; router 16 x (4096 + 8) = 65,664;
// experts 8 x 3 x 16 x (4096 + 14336) = 7,077,888. all-linear (PEFT's: every
// linear layer but the output layer, the router included) = 7,569,536 per
// layer, x 32 = 242,225,152.
TEST(Lora, AllLinearOnMixtral) {
  EXPECT_EQ(trainable(kMixtral, "rank = 16\ntargets = \"k\"\n"), 32.0 * 81'920);
  EXPECT_EQ(trainable(kMixtral, "rank = 16\ntargets = \"router\"\n"), 32.0 * 65'664);
  EXPECT_EQ(trainable(kMixtral, "rank = 16\ntargets = \"experts\"\n"), 32.0 * 7'077'888);
  EXPECT_EQ(trainable(kMixtral, "rank = 16\ntargets = \"all-linear\"\n"), 242'225'152.0);
}

// A plain (GELU) MLP has two projections: GPT-3, r = 8,
// 96 x 2 x 8 x (12288 + 49152) = 94,371,840. The LM head is adapted once:
// Llama-2-7B, r = 8: 8 x (4096 + 32000) = 288,768, outside the layers.
TEST(Lora, GeluMlpAndLmHead) {
  EXPECT_EQ(trainable(kGpt3, "rank = 8\ntargets = \"mlp\"\n"), 94'371'840.0);
  Evaluation head = evaluate_paper(lora(kLlama, "rank = 8\ntargets = \"lm_head\"\n"));
  EXPECT_EQ(head.breakdown().params_trainable, 288'768.0);
  EXPECT_EQ(head.item_bytes("lora.lm_head", MEMPLAN_ROLE_WEIGHTS), 288'768u * 2);
}

// Serving unmerged adapters: in mode = "infer" the adapters are extra weights
// (Llama-2-7B bf16, r = 8 on q and v: 13,476,831,232 + 4,194,304 x 2 bytes)
// and nothing trains.
TEST(Lora, InferenceServesTheAdaptersAsWeights) {
  Evaluation evaluation = evaluate_paper(
      "name = \"l\"\nmode = \"infer\"\n[model]\npreset = \"llama-2-7b\"\n[precision]\nuse = \"bf16\"\n"
      "[[strategy]]\nuse = \"lora\"\nrank = 8\ntargets = \"q,v\"\n");
  EXPECT_EQ(evaluation.component(MEMPLAN_ROLE_WEIGHTS), 13'476'831'232u + 8'388'608u);
  EXPECT_EQ(evaluation.component(MEMPLAN_ROLE_GRADIENTS), 0u);
  EXPECT_EQ(evaluation.breakdown().params_trainable, 0.0);
}

// ---- errors, asserted exactly ----
// Lines of lora(...): 11 [[strategy]], 12 use, 13 the first option.

std::string lora_error(const std::string& model, const std::string& options) {
  return error_of(lora(model, options), "l.toml");
}

const std::string kPrefix = "error: in [[strategy]] #1, strategy plugin 'lora'";

TEST(LoraErrors, RankAndAlpha) {
  EXPECT_EQ(lora_error(kLlama, "targets = \"q\"\n"),
            "l.toml:12:7: " + kPrefix + ": needs rank = r, the adapters' rank (e.g. 8, 16 or 64)" + library("lora"));
  EXPECT_EQ(lora_error(kLlama, "rank = 0\ntargets = \"q\"\n"),
            "l.toml:13:8: " + kPrefix + ", option 'rank': must be a positive integer, got 0" + library("lora"));
  EXPECT_EQ(lora_error(kLlama, "rank = 8\nalpha = -16\ntargets = \"q\"\n"),
            "l.toml:14:9: " + kPrefix +
                ", option 'alpha': must be a positive number (the update is scaled by alpha / rank), got -16" +
                library("lora"));
  EXPECT_EQ(lora_error(kLlama, "rank = 8\nalpha = 0\ntargets = \"q\"\n"),
            "l.toml:14:9: " + kPrefix +
                ", option 'alpha': must be a positive number (the update is scaled by alpha / rank), got 0" +
                library("lora"));
}

// Latent attention (DeepSeek) has other adapted shapes than q, k, v and o:
// refused rather than sized as standard attention.
TEST(LoraErrors, LatentAttentionIsNotModelledYet) {
  EXPECT_EQ(lora_error("preset = \"deepseek-v2-lite\"\n", "rank = 8\ntargets = \"q\"\n"),
            "l.toml:12:7: " + kPrefix +
                ": adapts the q, k, v, o, MLP and expert matrices of layers that are all alike, but this model has "
                "multi-head latent attention (kv_lora_rank), whose adapted shapes this plugin does not model yet; "
                "remove the lora strategy, or train a part of the model with 'freeze' (e.g. train = \"attention\")" +
                library("lora"));
}

TEST(LoraErrors, PeftNames) {
  EXPECT_EQ(lora_error(kLlama, "rank = 8\nr = 16\ntargets = \"q\"\n"),
            "l.toml:14:5: " + kPrefix + ", option 'r': is PEFT's name for rank, which is given too; keep one of them" +
                library("lora"));
  EXPECT_EQ(lora_error(kLlama, "r = 8\ntarget_modules = [\"q_proj\", \"gate_proj\"]\n"),
            "l.toml:14:18: " + kPrefix +
                ", option 'target_modules': names some of gate_proj, up_proj and down_proj; memplan adapts the MLP's "
                "projections together: list all three (or use targets = \"mlp\")" + library("lora"));
  EXPECT_EQ(lora_error(kLlama, "r = 8\ntarget_modules = [\"c_attn\"]\n"),
            "l.toml:14:18: " + kPrefix +
                ", option 'target_modules': has \"c_attn\", a module name memplan does not know; use q_proj, k_proj, "
                "v_proj, o_proj, gate_proj, up_proj, down_proj, lm_head or \"all-linear\", or memplan's targets "
                "(targets = \"...\")" + library("lora"));
  // A list where the option takes one value says so, naming the key.
  EXPECT_EQ(lora_error(kLlama, "rank = [\"8\"]\ntargets = \"q\"\n"),
            "l.toml:13:8: error: in [[strategy]] #1, 'rank' of strategy plugin 'lora' must be an integer, not a list");
  EXPECT_EQ(lora_error(kLlama, "rank = 8\ntargets = [1.5, 2]\n"),
            "l.toml:14:11: error: in [[strategy]] #1, 'targets' is an array; a plugin option is an integer, a float, "
            "a boolean, a string, or a list of strings or of integers (for example [\"q\", \"v\"] or [512, 1024])");
}

TEST(LoraErrors, Targets) {
  EXPECT_EQ(lora_error(kLlama, "rank = 8\n"),
            "l.toml:12:7: " + kPrefix +
                ": needs targets = \"...\", the adapted matrices: q, k, v, o, attention, mlp, experts, router, "
                "lm_head, all-linear" + library("lora"));
  EXPECT_EQ(lora_error(kLlama, "rank = 8\ntargets = \"q_proj\"\n"),
            "l.toml:14:11: " + kPrefix +
                ", option 'targets': has \"q_proj\", not a target; use q, k, v, o, attention, mlp, experts, router, "
                "lm_head, all-linear (comma-separated), or PEFT's module names in target_modules" + library("lora"));
  EXPECT_EQ(lora_error(kMixtral, "rank = 8\ntargets = \"mlp\"\n"),
            "l.toml:14:11: " + kPrefix +
                ", option 'targets': has \"mlp\", but the model's MLPs are MoE experts; use \"experts\"" +
                library("lora"));
  EXPECT_EQ(lora_error(kLlama, "rank = 8\ntargets = \"experts\"\n"),
            "l.toml:14:11: " + kPrefix +
                ", option 'targets': has \"experts\", but the model is dense (no [model.moe] experts); use \"mlp\"" +
                library("lora"));
  EXPECT_EQ(lora_error("params = 7e9\n", "rank = 8\ntargets = \"q\"\n"),
            "l.toml:12:7: " + kPrefix +
                ": needs the model's architecture (the shapes of the adapted matrices) but the scenario gives only "
                "params; use a preset or an inline architecture in [model]" + library("lora"));
}

// kernels (axolotl's or Unsloth's fused LoRA functions) do not combine with
// LitGPT's fused q/k/v adapter, and name one of the two implementations.
TEST(LoraErrors, Kernels) {
  EXPECT_EQ(lora_error(kLlama, "rank = 8\ntargets = \"all-linear\"\nkernels = \"liger\"\n"),
            "l.toml:15:11: " + kPrefix +
                ", option 'kernels': is \"liger\"; use \"axolotl\" or \"unsloth\" (their fused LoRA functions), or "
                "\"none\" (PEFT's forward)" + library("lora"));
  EXPECT_EQ(lora_error(kLlama, "rank = 8\ntargets = \"q,k,v\"\nfused_qkv = true\nkernels = \"axolotl\"\n"),
            "l.toml:16:11: " + kPrefix +
                ", option 'kernels': and fused_qkv describe two different q, k, v adapters (axolotl's LoRA_QKV "
                "function, LitGPT's LoRAQKVLinear); keep one of them" + library("lora"));
}

// At lora_dropout above 0, and for targets no function covers, axolotl and
// Unsloth keep PEFT's forward (their patch checks: axolotl
// monkeypatch/lora_kernels.py @ 8c6a6ea6e can_patch, unsloth/models/llama.py @
// 015bdef0d9 line 3695), and so does memplan, saying so under details.
TEST(Lora, KernelsNeedNoDropout) {
  const auto run = [](const std::string& options) {
    return evaluate(lora(kLlama, "rank = 8\ntargets = \"all-linear\"\n" + options));
  };
  const auto detail = [](const Evaluation& e) {
    const std::string value = report_detail(e, "lora_kernels");
    return value.empty() ? std::string("(absent)") : value;
  };
  // String details come quoted, as the report's JSON writes them.
  EXPECT_EQ(detail(run("kernels = \"unsloth\"\n")), "\"unsloth\"");
  EXPECT_EQ(detail(run("dropout = 0.05\nkernels = \"axolotl\"\n")),
            "\"none: lora_dropout is not 0, where axolotl keeps PEFT's forward (its patch check)\"");
  EXPECT_EQ(detail(run("dropout = 0.05\n")), "(absent)");
  // Targets no function covers (q and v without k) keep PEFT's forward too.
  const Evaluation qv = evaluate(lora(kLlama, "rank = 8\ntargets = \"q,v\"\nkernels = \"unsloth\"\n"));
  EXPECT_EQ(detail(qv), "\"none: targets \\\"q,v\\\" adapt no group the fused functions cover (q, k and v together, "
                        "o, a gated MLP); unsloth keeps PEFT's forward\"");
}

}  // namespace
}  // namespace memplan::testing::trainability
