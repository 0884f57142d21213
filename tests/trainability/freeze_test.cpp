// The 'freeze' strategy: which weights train, by part, layer range and
// experts per layer. Every figure is derived by hand beside its test from the
// parameter inventory (docs/estimate.md, section 1) and the mixed-precision
// recipe (bf16 weights and gradients, fp32 master weights and AdamW states:
// 2 + 2 + 4 + 8 bytes per trainable parameter; Micikevicius et al. 2017,
// arXiv 1710.03740; Rajbhandari et al. 2020, arXiv 1910.02054, section 3.1).
//
// Shapes used below:
//   Llama-2-7B: L 32, h 4096, f 11008, V 32000, SwiGLU, RMSNorm, untied.
//     attention per layer 4 x 4096^2 = 67,108,864; MLP 3 x 4096 x 11008 =
//     135,266,304; norms 2 x 4096 = 8,192; layer 202,383,360; embedding and
//     LM head 32000 x 4096 = 131,072,000 each; 6,738,415,616 in all.
//   Mixtral-8x7B: L 32, h 4096, 32 heads, 8 kv heads of 128, E 8, f_e 14336.
//     attention per layer 2 x 4096^2 + 2 x 4096 x 1024 = 41,943,040; router
//     4096 x 8 = 32,768; one expert 3 x 4096 x 14336 = 176,160,768, eight
//     1,409,286,144; norms 8,192; 46,702,792,704 in all.
#include <gtest/gtest.h>

#include <string>

#include "trainability_support.hpp"

namespace memplan::testing::trainability {
namespace {

const std::string kLlama = "preset = \"llama-2-7b\"\n";
const std::string kMixtral = "preset = \"mixtral-8x7b\"\n";
const std::string kMixedAdamW =
    "[precision]\nuse = \"mixed-bf16\"\n[optimizer]\nuse = \"adamw\"\n[activations]\nuse = \"none\"\n";

std::string freeze(const std::string& model, const std::string& options) {
  return train_scenario(model, kMixedAdamW + "[[strategy]]\nuse = \"freeze\"\n" + options);
}

uint64_t grad(const Evaluation& evaluation, const char* item) {
  return evaluation.item_bytes(item, MEMPLAN_ROLE_GRADIENTS);
}
uint64_t weight(const Evaluation& evaluation, const char* item) {
  return evaluation.item_bytes(item, MEMPLAN_ROLE_WEIGHTS);
}

// Router only, Mixtral: 32 layers x 4096 x 8 = 1,048,576 trainable; bf16
// gradients 2,097,152 bytes, fp32 master 4,194,304, AdamW 8,388,608. Nothing
// is removed: every weight stays, 46,702,792,704 x 2 = 93,405,585,408 bytes.
TEST(Freeze, RouterOnly) {
  Evaluation evaluation = evaluate_paper(freeze(kMixtral, "train = \"router\"\n"));
  EXPECT_EQ(evaluation.breakdown().params_trainable, 1'048'576.0);
  EXPECT_EQ(evaluation.breakdown().params_total, 46'702'792'704.0);
  EXPECT_EQ(role(evaluation, MEMPLAN_ROLE_GRADIENTS), 2'097'152u);
  EXPECT_EQ(role(evaluation, MEMPLAN_ROLE_MASTER_WEIGHTS), 4'194'304u);
  EXPECT_EQ(role(evaluation, MEMPLAN_ROLE_OPTIMIZER_STATES), 8'388'608u);
  EXPECT_EQ(role(evaluation, MEMPLAN_ROLE_WEIGHTS), 93'405'585'408u);
  EXPECT_EQ(grad(evaluation, "layers.0-31.moe.router"), 2'097'152u);
  EXPECT_EQ(grad(evaluation, "layers.0-31.moe.experts"), 0u);
}

// Embeddings only, Llama-2-7B: the token embedding, 131,072,000 parameters,
// trains (bf16 gradient 262,144,000 bytes); the untied LM head does not.
TEST(Freeze, EmbeddingsOnly) {
  Evaluation evaluation = evaluate_paper(freeze(kLlama, "train = \"embeddings\"\n"));
  EXPECT_EQ(evaluation.breakdown().params_trainable, 131'072'000.0);
  EXPECT_EQ(grad(evaluation, "embed_tokens"), 262'144'000u);
  EXPECT_EQ(grad(evaluation, "lm_head"), 0u);
  EXPECT_EQ(role(evaluation, MEMPLAN_ROLE_OPTIMIZER_STATES), 131'072'000u * 8);
  // "embeddings,lm_head": both, 262,144,000 parameters.
  Evaluation both = evaluate_paper(freeze(kLlama, "train = \"embeddings, lm_head\"\n"));
  EXPECT_EQ(both.breakdown().params_trainable, 262'144'000.0);
}

// layers = "0-1,30-31" on Llama-2-7B: 4 x 202,383,360 = 809,533,440
// trainable. Each layered item is cut into runs: q of layers 0-1 (2 x 4096^2
// x 2 bytes = 67,108,864) and 30-31 train, q of layers 2-29 (28 x 33,554,432
// = 939,524,096) is frozen; the weights' total is unchanged (13,476,831,232).
TEST(Freeze, LayerRangesCutLayeredItemsIntoRuns) {
  Evaluation evaluation = evaluate_paper(freeze(kLlama, "layers = \"0-1, 30-31\"\n"));
  EXPECT_EQ(evaluation.breakdown().params_trainable, 809'533'440.0);
  EXPECT_EQ(weight(evaluation, "layers.0-1.attn.q"), 67'108'864u);
  EXPECT_EQ(weight(evaluation, "layers.2-29.attn.q"), 939'524'096u);
  EXPECT_EQ(weight(evaluation, "layers.30-31.attn.q"), 67'108'864u);
  EXPECT_EQ(grad(evaluation, "layers.0-1.attn.q"), 67'108'864u);
  EXPECT_EQ(grad(evaluation, "layers.2-29.attn.q"), 0u);
  EXPECT_EQ(grad(evaluation, "layers.30-31.attn.q"), 67'108'864u);
  EXPECT_EQ(grad(evaluation, "embed_tokens"), 0u);  // "layers" covers only what is inside the layers
  EXPECT_EQ(role(evaluation, MEMPLAN_ROLE_WEIGHTS), 13'476'831'232u);
  EXPECT_EQ(role(evaluation, MEMPLAN_ROLE_GRADIENTS), 809'533'440u * 2);
}

// train = "all" with a layer selection: everything outside the layers
// (embedding and LM head 2 x 131,072,000, final norm 4,096) and the selected
// layers (2 x 202,383,360): 666,914,816 trainable.
TEST(Freeze, AllPartsOfTheSelectedLayersAndEverythingOutside) {
  Evaluation evaluation = evaluate_paper(freeze(kLlama, "train = \"all\"\nfirst_layers = 2\n"));
  EXPECT_EQ(evaluation.breakdown().params_trainable, 666'914'816.0);
  EXPECT_EQ(grad(evaluation, "final_norm"), 8'192u);
}

// first_layers = N is layers 0 to N-1, last_layers = N the last N: the MLP of
// layers 30-31 has a bf16 gradient of 2 x 135,266,304 x 2 = 541,065,216 bytes.
TEST(Freeze, FirstAndLastLayersShorthands) {
  Evaluation first = evaluate_paper(freeze(kLlama, "first_layers = 2\n"));
  Evaluation range = evaluate_paper(freeze(kLlama, "layers = \"0-1\"\n"));
  EXPECT_EQ(first.breakdown().params_trainable, 404'766'720.0);  // 2 x 202,383,360
  EXPECT_EQ(first.breakdown().sum, range.breakdown().sum);
  EXPECT_EQ(grad(first, "layers.0-1.mlp"), 541'065'216u);
  Evaluation last = evaluate_paper(freeze(kLlama, "last_layers = 2\n"));
  EXPECT_EQ(last.breakdown().params_trainable, 404'766'720.0);
  EXPECT_EQ(grad(last, "layers.30-31.mlp"), 541'065'216u);
  EXPECT_EQ(grad(last, "layers.0-29.mlp"), 0u);
}

// train = "attention" with first_layers = 6: q, k, v, o of layers 0-5 only,
// 6 x 67,108,864 = 402,653,184 parameters; the MLPs of those layers stay frozen.
TEST(Freeze, PartsInsideTheSelectedLayers) {
  Evaluation evaluation = evaluate_paper(freeze(kLlama, "train = \"attention\"\nfirst_layers = 6\n"));
  EXPECT_EQ(evaluation.breakdown().params_trainable, 402'653'184.0);
  EXPECT_EQ(grad(evaluation, "layers.0-5.attn.k"), 6u * 4096 * 4096 * 2);
  EXPECT_EQ(grad(evaluation, "layers.0-31.mlp"), 0u);
  EXPECT_EQ(role(evaluation, MEMPLAN_ROLE_GRADIENTS), 402'653'184u * 2);
}

// experts = 2 on Mixtral (train defaults to "layers"): per layer attention
// 41,943,040 + router 32,768 + 2 experts 352,321,536 + norms 8,192 =
// 394,305,536, x 32 = 12,617,777,152 trainable. The expert item of each
// trained run is cut into the trained experts (bf16: 32 x 352,321,536 x 2 =
// 22,548,578,304 bytes) and the six frozen ones (32 x 1,056,964,608 x 2 =
// 67,645,734,912).
TEST(Freeze, ExpertsPerLayerSplitTheExpertItem) {
  Evaluation evaluation = evaluate_paper(freeze(kMixtral, "experts = 2\n"));
  EXPECT_EQ(evaluation.breakdown().params_trainable, 12'617'777'152.0);
  EXPECT_EQ(weight(evaluation, "layers.0-31.moe.experts.trained"), 22'548'578'304u);
  EXPECT_EQ(weight(evaluation, "layers.0-31.moe.experts"), 67'645'734'912u);
  EXPECT_EQ(grad(evaluation, "layers.0-31.moe.experts.trained"), 22'548'578'304u);
  EXPECT_EQ(grad(evaluation, "layers.0-31.moe.experts"), 0u);
  EXPECT_EQ(evaluation.breakdown().params_total, 46'702'792'704.0);
}

// 'freeze' never touches adapters and sets every other weight's flag, so with
// 'lora' (rank 8 on q and v of Llama-2-7B: 2 x 8 x (4096 + 4096) x 32 =
// 4,194,304 adapter parameters) scenario order decides: freeze after lora
// makes the LM head (131,072,000) train next to the adapters; freeze before
// lora is undone by lora, which freezes every base weight.
TEST(Freeze, ComposesWithLoraByScenarioOrder) {
  const std::string lora = "[[strategy]]\nuse = \"lora\"\nrank = 8\ntargets = \"q,v\"\n";
  const std::string lm_head = "[[strategy]]\nuse = \"freeze\"\ntrain = \"lm_head\"\n";
  Evaluation after = evaluate_paper(train_scenario(kLlama, kMixedAdamW + lora + lm_head));
  EXPECT_EQ(after.breakdown().params_trainable, 4'194'304.0 + 131'072'000.0);
  Evaluation before = evaluate_paper(train_scenario(kLlama, kMixedAdamW + lm_head + lora));
  EXPECT_EQ(before.breakdown().params_trainable, 4'194'304.0);
}

// The runs compose with pipeline parallelism: 4 stages of 8 layers; seed
// 000's case B selection (experts 2 and router of layers 0-5) lies on the
// first stage: bf16 gradients 6 x (352,321,536 + 32,768) x 2 = 4,228,251,648
// bytes there, none on the last stage (layers 24-31).
TEST(Freeze, RunsComposeWithPipelineStages) {
  const std::string selection = "train = \"experts,router\"\nfirst_layers = 6\nexperts = 2\n";
  const std::string pipeline = "[[strategy]]\nuse = \"pipeline-parallel\"\nsize = 4\n";
  Evaluation first = evaluate_paper(freeze(kMixtral, selection + pipeline));
  EXPECT_EQ(role(first, MEMPLAN_ROLE_GRADIENTS), 4'228'251'648u);
  Evaluation last = evaluate_paper(freeze(kMixtral, selection + pipeline + "stage = \"last\"\n"));
  EXPECT_EQ(role(last, MEMPLAN_ROLE_GRADIENTS), 0u);
}

// ---- errors, asserted exactly ----
// Lines of freeze(...): 1 name, 2 mode, 3 [model], 4 preset, 5 [precision],
// 6 use, 7 [optimizer], 8 use, 9 [activations], 10 use, 11 [[strategy]],
// 12 use, 13 the first option. The column is the value's.

std::string freeze_error(const std::string& model, const std::string& options) {
  return error_of(freeze(model, options), "f.toml");
}

const std::string kPrefix = "error: in [[strategy]] #1, strategy plugin 'freeze'";

TEST(FreezeErrors, UnknownOrAbsentParts) {
  EXPECT_EQ(freeze_error(kMixtral, "train = \"router,foo\"\n"),
            "f.toml:13:9: " + kPrefix +
                ", option 'train': has \"foo\", not a part of the model; use layers, attention, mlp, experts, "
                "router, norms, embeddings, lm_head, all (comma-separated)" + library("freeze"));
  EXPECT_EQ(freeze_error(kMixtral, "train = \"mlp\"\n"),
            "f.toml:13:9: " + kPrefix +
                ", option 'train': has \"mlp\", but the model's MLPs are MoE experts; use \"experts\" (and "
                "\"router\" for the gate)" + library("freeze"));
  EXPECT_EQ(freeze_error(kLlama, "train = \"router\"\n"),
            "f.toml:13:9: " + kPrefix +
                ", option 'train': has \"router\", but the model is dense (no [model.moe] experts); use \"mlp\"" +
                library("freeze"));
  EXPECT_EQ(freeze_error("preset = \"gpt3-175b\"\n", "train = \"lm_head\"\n"),
            "f.toml:13:9: " + kPrefix +
                ", option 'train': has \"lm_head\", but the model ties its LM head to the token embedding; use "
                "\"embeddings\"" + library("freeze"));
  EXPECT_EQ(freeze_error(kLlama, ""),
            "f.toml:12:7: " + kPrefix +
                ": needs to know what trains: set train (e.g. train = \"router\" or \"embeddings,lm_head\") and/or "
                "the layers (layers = \"0-5\", first_layers = N or last_layers = N)" + library("freeze"));
}

TEST(FreezeErrors, LayerSelections) {
  EXPECT_EQ(freeze_error(kMixtral, "layers = \"0-40\"\n"),
            "f.toml:13:10: " + kPrefix + ", option 'layers': has \"0-40\", but the model's layers are 0 to 31" +
                library("freeze"));
  EXPECT_EQ(freeze_error(kMixtral, "layers = \"5-2\"\n"),
            "f.toml:13:10: " + kPrefix +
                ", option 'layers': has \"5-2\"; give layer numbers or inclusive ranges such as \"0-5\" or "
                "\"0-5,30-31\"" + library("freeze"));
  EXPECT_EQ(freeze_error(kMixtral, "layers = \"0-5,\"\n"),
            "f.toml:13:10: " + kPrefix +
                ", option 'layers': has \"\"; give layer numbers or inclusive ranges such as \"0-5\" or "
                "\"0-5,30-31\"" + library("freeze"));
  EXPECT_EQ(freeze_error(kMixtral, "layers = \"0-5\"\nfirst_layers = 6\n"),
            "f.toml:13:10: " + kPrefix +
                ", option 'layers': layers, first_layers and last_layers each select the trained layers; give "
                "only one of them" + library("freeze"));
  EXPECT_EQ(freeze_error(kMixtral, "first_layers = 0\n"),
            "f.toml:13:16: " + kPrefix +
                ", option 'first_layers': must be between 1 and the model's 32 layers, got 0" + library("freeze"));
  EXPECT_EQ(freeze_error(kMixtral, "last_layers = 33\n"),
            "f.toml:13:15: " + kPrefix +
                ", option 'last_layers': must be between 1 and the model's 32 layers, got 33" + library("freeze"));
  EXPECT_EQ(freeze_error(kLlama, "train = \"embeddings\"\nfirst_layers = 2\n"),
            "f.toml:14:16: " + kPrefix +
                ", option 'first_layers': selects layers, but train = \"embeddings\" names no part inside the "
                "layers (layers, attention, mlp, experts, router, norms)" + library("freeze"));
}

TEST(FreezeErrors, ExpertSelections) {
  EXPECT_EQ(freeze_error(kMixtral, "experts = 9\n"),
            "f.toml:13:11: " + kPrefix +
                ", option 'experts': must be between 1 and the model's 8 experts per layer, got 9" +
                library("freeze"));
  EXPECT_EQ(freeze_error(kLlama, "experts = 2\n"),
            "f.toml:13:11: " + kPrefix +
                ", option 'experts': selects MoE experts, but the model is dense (no [model.moe] experts)" +
                library("freeze"));
  EXPECT_EQ(freeze_error(kMixtral, "train = \"router\"\nexperts = 2\n"),
            "f.toml:14:11: " + kPrefix +
                ", option 'experts': selects experts, but train = \"router\" does not train them; add \"experts\" "
                "(or \"layers\") to train" + library("freeze"));
}

TEST(FreezeErrors, NeedsTrainingAndAnArchitecture) {
  const std::string infer = "name = \"f\"\nmode = \"infer\"\n[model]\npreset = \"llama-2-7b\"\n[precision]\n"
                            "use = \"bf16\"\n[[strategy]]\nuse = \"freeze\"\ntrain = \"embeddings\"\n";
  EXPECT_EQ(error_of(infer, "f.toml"),
            "f.toml:8:7: " + kPrefix +
                ": decides which weights train, but mode = \"infer\" trains nothing; remove this [[strategy]] or set "
                "mode = \"train\"" + library("freeze"));
  EXPECT_EQ(freeze_error("params = 7e9\n", "train = \"embeddings\"\n"),
            "f.toml:12:7: " + kPrefix +
                ": needs the model's architecture (layers, experts, embeddings) but the scenario gives only params; "
                "use a preset or an inline architecture in [model]" + library("freeze"));
}

}  // namespace
}  // namespace memplan::testing::trainability
