// Training on quantized weights (QLoRA: Dettmers et al. 2023, "QLoRA:
// Efficient Finetuning of Quantized LLMs", arXiv 2305.14314): the 'quantized'
// precision with every quantized weight frozen by 'lora' or 'freeze'.
//
// NF4 with double quantization costs 0.5 + 1/64 + 4/16384 = 8452/16384 =
// 0.515869140625 bytes per weight (QLoRA section 3; tests/precision/
// quantized_test.cpp); every item size below is a whole number of 16384-weight
// blocks, so the products are exact.
//
// Training defaults, from the QLoRA reference code (github.com/artidoro/qlora,
// qlora.py): LoRA layers in bf16 (module.to(torch.bfloat16) under --bf16),
// gradients in the adapters' dtype, no master copy, optim "paged_adamw_32bit"
// (two fp32 states): 2 + 2 + 8 = 12 bytes per adapter parameter.
#include <gtest/gtest.h>

#include <string>

#include "trainability_support.hpp"

namespace memplan::testing::trainability {
namespace {

const std::string kLlama = "preset = \"llama-2-7b\"\n";
const std::string kNf4 = "[precision]\nuse = \"quantized\"\nformat = \"nf4\"\ndouble_quant = true\n";
const std::string kRest = "[optimizer]\nuse = \"adamw\"\n[activations]\nuse = \"none\"\n";

std::string qlora(const std::string& model, const std::string& precision_options, const std::string& strategies) {
  return train_scenario(model, kNf4 + precision_options + kRest + strategies);
}

const std::string kLoraQv = "[[strategy]]\nuse = \"lora\"\nrank = 8\ntargets = \"q,v\"\n";

// QLoRA's defaults (qlora.py: lora_r 64, all linear layers but lm_head,
// nf4, double quantization) on Llama-2-7B:
//   quantized q k v o and MLP: 32 x (4 x 4096^2 + 3 x 4096 x 11008) =
//     6,476,005,376 weights x 8452/16384 = 3,340,771,328 bytes
//   bf16 embeddings, LM head, norms: 262,410,240 x 2 = 524,820,480
//   adapters: 32 x (4 x 64 x 8192 + 3 x 64 x (4096 + 11008)) = 159,907,840,
//     bf16 319,815,680 bytes; gradients the same; no master copy;
//     AdamW fp32 states 8 x 159,907,840 = 1,279,262,720
TEST(Qlora, ReferenceDefaultsOnLlama2SevenBillion) {
  Evaluation evaluation =
      evaluate_paper(qlora(kLlama, "", "[[strategy]]\nuse = \"lora\"\nrank = 64\nalpha = 16\ntargets = \"all-linear\"\n"));
  EXPECT_EQ(evaluation.breakdown().params_trainable, 159'907'840.0);
  EXPECT_EQ(role(evaluation, MEMPLAN_ROLE_WEIGHTS), 3'340'771'328u + 524'820'480u + 319'815'680u);
  EXPECT_EQ(role(evaluation, MEMPLAN_ROLE_GRADIENTS), 319'815'680u);
  EXPECT_EQ(role(evaluation, MEMPLAN_ROLE_MASTER_WEIGHTS), 0u);
  EXPECT_EQ(role(evaluation, MEMPLAN_ROLE_OPTIMIZER_STATES), 1'279'262'720u);
  // q: packed 4-bit values 32 x 16,777,216 / 2, and its constants (quant_state) 32 x 16,777,216 x 260/16384.
  EXPECT_EQ(evaluation.item_bytes("layers.0-31.attn.q", MEMPLAN_ROLE_WEIGHTS) +
                evaluation.item_bytes("layers.0-31.attn.q.quant_state", MEMPLAN_ROLE_WEIGHTS),
            32u * 16'777'216 / 16384 * 8452);
  EXPECT_EQ(evaluation.item_bytes("layers.0-31.attn.q.quant_state", MEMPLAN_ROLE_WEIGHTS),
            32u * 16'777'216 / 16384 * 260);
  EXPECT_EQ(evaluation.item_bytes("layers.0-31.attn.q", MEMPLAN_ROLE_GRADIENTS), 0u);
  EXPECT_EQ(detail(evaluation, "lora_scaling"), "0.25");  // 16 / 64
}

// Each training dtype is an option. LoRA r = 8 on q and v: 4,194,304
// adapter parameters (lora_test.cpp).
//   default:                  gradients bf16 8,388,608; master 0; states fp32 33,554,432
//   adapters = "fp32":        adapter weights and (their own dtype) gradients 16,777,216 each
//   gradients = "fp32":       gradients 16,777,216, adapters still bf16 (8,388,608)
//   master_weights = "fp32":  a master copy of 16,777,216
//   optimizer_states = "int8" (8-bit Adam, scales not counted): 2 x 4,194,304 = 8,388,608
//   main_grads = "fp32" (DeepSpeed ZeRO 1/2's fp32 cast of the gradient partition at the step):
//     4 x 4,194,304 = 16,777,216 more optimizer-state bytes, in the optimizer phase only
//     (<weight>.main_grad); the deepspeed profile sets it
TEST(Qlora, TrainingDtypesAreOptions) {
  Evaluation plain = evaluate_paper(qlora(kLlama, "", kLoraQv));
  EXPECT_EQ(role(plain, MEMPLAN_ROLE_GRADIENTS), 8'388'608u);
  EXPECT_EQ(role(plain, MEMPLAN_ROLE_MASTER_WEIGHTS), 0u);
  EXPECT_EQ(role(plain, MEMPLAN_ROLE_OPTIMIZER_STATES), 33'554'432u);
  EXPECT_EQ(plain.item_bytes("layers.0-31.lora.attn.q", MEMPLAN_ROLE_WEIGHTS), 4'194'304u);

  Evaluation fp32_adapters = evaluate_paper(qlora(kLlama, "adapters = \"fp32\"\n", kLoraQv));
  EXPECT_EQ(fp32_adapters.item_bytes("layers.0-31.lora.attn.q", MEMPLAN_ROLE_WEIGHTS), 8'388'608u);
  EXPECT_EQ(role(fp32_adapters, MEMPLAN_ROLE_GRADIENTS), 16'777'216u);

  Evaluation fp32_gradients = evaluate_paper(qlora(kLlama, "gradients = \"fp32\"\n", kLoraQv));
  EXPECT_EQ(role(fp32_gradients, MEMPLAN_ROLE_GRADIENTS), 16'777'216u);
  EXPECT_EQ(fp32_gradients.item_bytes("layers.0-31.lora.attn.q", MEMPLAN_ROLE_WEIGHTS), 4'194'304u);

  Evaluation master = evaluate_paper(qlora(kLlama, "master_weights = \"fp32\"\n", kLoraQv));
  EXPECT_EQ(role(master, MEMPLAN_ROLE_MASTER_WEIGHTS), 16'777'216u);

  Evaluation eight_bit = evaluate_paper(qlora(kLlama, "optimizer_states = \"int8\"\n", kLoraQv));
  EXPECT_EQ(role(eight_bit, MEMPLAN_ROLE_OPTIMIZER_STATES), 8'388'608u);

  Evaluation main_grads = evaluate_paper(qlora(kLlama, "main_grads = \"fp32\"\n", kLoraQv));
  EXPECT_EQ(role(main_grads, MEMPLAN_ROLE_OPTIMIZER_STATES), 33'554'432u + 16'777'216u);
  EXPECT_EQ(main_grads.item_bytes("layers.0-31.lora.attn.q.main_grad", MEMPLAN_ROLE_OPTIMIZER_STATES), 8'388'608u);
  EXPECT_EQ(main_grads.breakdown().timeline[kOptimizerStep] - plain.breakdown().timeline[kOptimizerStep],
            16'777'216u);
  // Under the deepspeed profile it is the default.
  EXPECT_EQ(role(evaluate(qlora(kLlama, "", kLoraQv) + "[framework]\nuse = \"deepspeed\"\n"),
                 MEMPLAN_ROLE_OPTIMIZER_STATES),
            33'554'432u + 16'777'216u);
}

// Weights that stay unquantized may train without adapters: the token
// embedding of Llama-2-7B (131,072,000) in bf16, its gradient 262,144,000
// bytes, fp32 AdamW 1,048,576,000.
TEST(Qlora, FreezingEverythingQuantizedLetsUnquantizedPartsTrain) {
  Evaluation evaluation = evaluate_paper(qlora(kLlama, "", "[[strategy]]\nuse = \"freeze\"\ntrain = \"embeddings\"\n"));
  EXPECT_EQ(evaluation.breakdown().params_trainable, 131'072'000.0);
  EXPECT_EQ(role(evaluation, MEMPLAN_ROLE_GRADIENTS), 262'144'000u);
  EXPECT_EQ(role(evaluation, MEMPLAN_ROLE_OPTIMIZER_STATES), 1'048'576'000u);
}

// skip_trainable keeps trainable linear weights in the unquantized dtype (as
// bitsandbytes' llm_int8_skip_modules keeps named modules in 16 bits): with
// first_layers = 2, q of layers 0-1 is bf16, 2 x 16,777,216 x 2 = 67,108,864
// bytes; q of layers 2-31 stays nf4, 30 x 16,777,216 x 8452/16384 = 259,645,440.
TEST(Qlora, SkipTrainableKeepsTrainedLinearWeightsUnquantized) {
  Evaluation evaluation =
      evaluate_paper(qlora(kLlama, "skip_trainable = true\n", "[[strategy]]\nuse = \"freeze\"\nfirst_layers = 2\n"));
  EXPECT_EQ(evaluation.item_bytes("layers.0-1.attn.q", MEMPLAN_ROLE_WEIGHTS), 67'108'864u);
  EXPECT_EQ(evaluation.item_bytes("layers.0-1.attn.q", MEMPLAN_ROLE_GRADIENTS), 67'108'864u);
  EXPECT_EQ(evaluation.item_bytes("layers.2-31.attn.q", MEMPLAN_ROLE_WEIGHTS) +
                evaluation.item_bytes("layers.2-31.attn.q.quant_state", MEMPLAN_ROLE_WEIGHTS),
            259'645'440u);
  EXPECT_EQ(evaluation.breakdown().params_trainable, 404'766'720.0);  // 2 x 202,383,360
}

// QLoRA, section 1: "reduces the average memory requirements of finetuning a
// 65B parameter model from >780GB of GPU memory to <48GB". LLaMA-65B (Touvron
// et al. 2023: 80 layers, hidden 8192, 64 heads, SwiGLU 22016, vocabulary
// 32000) has 2 x 32000 x 8192 + 80 x (4 x 8192^2 + 3 x 8192 x 22016 +
// 2 x 8192) + 8192 = 65,285,660,672 parameters.
//   16-bit finetuning: bf16 weights and gradients, fp32 Adam states, no master
//   copy: 12 bytes x 65,285,660,672 = 783,427,928,064 bytes (> 780 GB).
//   QLoRA (r = 64 on every linear layer of the blocks, nf4 with double
//   quantization, bf16 adapters, paged AdamW 32-bit):
//     base: 80 x 809,500,672 quantized weights x 8452/16384 = 33,407,713,280
//           + (2 x 262,144,000 + 80 x 16,384 + 8,192) x 2 = 1,051,213,824
//     adapters: 80 x (4 x 64 x 16384 + 3 x 64 x 30208) = 799,539,200;
//           weights and gradients 1,599,078,400 bytes each, states 6,396,313,600
//     model states 44,053,397,504 bytes (< 48 GB), before activations.
TEST(Qlora, SixtyFiveBillionFromOver780GigabytesToUnder48) {
  const std::string llama65b =
      "layers = 80\nhidden = 8192\nheads = 64\nffn_hidden = 22016\nvocab = 32000\nmlp = \"swiglu\"\n";
  Evaluation full = evaluate_paper(train_scenario(
      llama65b, "[precision]\nuse = \"bf16\"\noptimizer_states = \"fp32\"\n" + kRest));
  EXPECT_EQ(full.breakdown().params_total, 65'285'660'672.0);
  EXPECT_EQ(full.breakdown().sum, 783'427'928'064u);
  EXPECT_GT(static_cast<double>(full.breakdown().sum), 780 * kGB);

  Evaluation qlora65 =
      evaluate_paper(qlora(llama65b, "", "[[strategy]]\nuse = \"lora\"\nrank = 64\ntargets = \"all-linear\"\n"));
  EXPECT_EQ(qlora65.breakdown().params_trainable, 799'539'200.0);
  EXPECT_EQ(role(qlora65, MEMPLAN_ROLE_WEIGHTS), 33'407'713'280u + 1'051'213'824u + 1'599'078'400u);
  EXPECT_EQ(qlora65.breakdown().sum, 44'053'397'504u);
  EXPECT_LT(static_cast<double>(qlora65.breakdown().sum), 48 * kGB);
}

// Sharding and CPU offload move parameters; bitsandbytes keeps the absmax
// constants (quant_state) as a plain attribute of each Params4bit, not a
// parameter (bitsandbytes 0.43.0 nn/modules.py, Params4bit._quantize), so
// FSDP (which flattens parameters only) and ZeRO-3 (which partitions
// param.data) leave them whole on every rank's GPU, with CPU offload too.
// Llama-2-7B's MLP, nf4 with double quantization, 2 ranks:
//   values    32 x 3 x 4096 x 11008 = 4,328,521,728 weights x 0.5 / 2 = 1,082,130,432 B
//   constants 4,328,521,728 x 260/16384 = 68,689,920 B on each rank, offload or not
// The parameter count leaves the constants out: 6,738,415,616 base + 4,194,304
// adapters (r 8 on q and v: 32 x 2 x 8 x (4096 + 4096)).
TEST(Qlora, QuantStateStaysWholeUnderShardingAndOffload) {
  const std::string ranks = "[[strategy]]\nuse = \"data-parallel\"\nsize = 2\n";
  for (const char* sharding : {"[[strategy]]\nuse = \"fsdp\"\n", "[[strategy]]\nuse = \"zero\"\nstage = 3\ngathered_parameters = true\n"}) {
    SCOPED_TRACE(sharding);
    Evaluation sharded = evaluate_paper(qlora(kLlama, "", kLoraQv + ranks + sharding));
    EXPECT_EQ(sharded.item_bytes("layers.0-31.mlp", MEMPLAN_ROLE_WEIGHTS), 1'082'130'432u);
    EXPECT_EQ(sharded.item_bytes("layers.0-31.mlp.quant_state", MEMPLAN_ROLE_WEIGHTS), 68'689'920u);
    EXPECT_EQ(sharded.breakdown().params_total, 6'742'609'920.0);
    Evaluation offloaded = evaluate_paper(
        qlora(kLlama, "", kLoraQv + ranks + sharding + "[[strategy]]\nuse = \"offload\"\nparameters = true\n"));
    EXPECT_EQ(offloaded.item_bytes("layers.0-31.mlp", MEMPLAN_ROLE_WEIGHTS), 0u);
    EXPECT_EQ(offloaded.item_bytes("layers.0-31.mlp.quant_state", MEMPLAN_ROLE_WEIGHTS), 68'689'920u);
  }
}

// scales_in_parameter (torchao's NF4Tensor, torchtune's QLoRA: the parameter
// holds its scalers and scale factors, and FSDP2 shards them with the values,
// torchao/dtypes/nf4tensor.py): no quant_state item; the MLP's item carries
// values and constants, 4,328,521,728 x 0.5 + 68,689,920 = 2,232,950,784 B,
// / 2 ranks = 1,116,475,392 B; the parameter count is unchanged.
TEST(Qlora, ScalesInTheParameterAreShardedWithIt) {
  const std::string ranks = "[[strategy]]\nuse = \"data-parallel\"\nsize = 2\n[[strategy]]\nuse = \"fsdp\"\n";
  Evaluation e = evaluate_paper(qlora(kLlama, "scales_in_parameter = true\n", kLoraQv + ranks));
  EXPECT_EQ(e.item_bytes("layers.0-31.mlp", MEMPLAN_ROLE_WEIGHTS), 1'116'475'392u);
  EXPECT_EQ(e.item_bytes("layers.0-31.mlp.quant_state", MEMPLAN_ROLE_WEIGHTS), 0u);
  EXPECT_EQ(e.breakdown().params_total, 6'742'609'920.0);
}

// Serving unmerged adapters on quantized weights (mode = "infer"): nothing
// trains, so trainable flags are no error; the adapters, 4,194,304
// parameters for r = 8 on q and v, take the `adapters` dtype: bf16 by
// default (8,388,608 bytes), fp32 with adapters = "fp32" (16,777,216).
TEST(Qlora, ServingAdaptersOnQuantizedWeights) {
  const std::string infer = "name = \"q\"\nmode = \"infer\"\n[model]\n" + kLlama + kNf4;
  Evaluation plain = evaluate_paper(infer + kLoraQv);
  EXPECT_EQ(plain.item_bytes("layers.0-31.lora.attn.q", MEMPLAN_ROLE_WEIGHTS) +
                plain.item_bytes("layers.0-31.lora.attn.v", MEMPLAN_ROLE_WEIGHTS),
            8'388'608u);
  EXPECT_EQ(role(plain, MEMPLAN_ROLE_GRADIENTS), 0u);
  Evaluation fp32 = evaluate_paper(infer + "adapters = \"fp32\"\n" + kLoraQv);
  EXPECT_EQ(fp32.item_bytes("layers.0-31.lora.attn.q", MEMPLAN_ROLE_WEIGHTS) +
                fp32.item_bytes("layers.0-31.lora.attn.v", MEMPLAN_ROLE_WEIGHTS),
            16'777'216u);
}

// quantize_working_bytes: quantizing the base on the GPU while the model is
// built (torchao 0.1's to_nf4, pytorch/ao @ v0.1 torchao/dtypes/nf4tensor.py:
// the scaled bf16 copy, 2 B a weight, and quantize_tensor_nearest's
// (value.unsqueeze(-1) - nf4).abs(), two (numel, 16) bf16 tensors, 64 B,
// beside the bf16 source, 2 B) holds 68 bytes a weight of the matrix being
// quantized, one matrix at a time: Llama-2-7B's largest is an MLP matrix,
// 4096 x 11008 = 45,088,768 weights, 68 x 45,088,768 = 3,066,036,224 B, at
// set-up only (its blocks stay cached). It describes nf4, in training and in a
// model's build logged before any step (mode "infer", the init peak: the same
// 3,066,036,224 B at init); other formats get none (int8 below).
TEST(QloraSetup, TorchaoNf4QuantizationAtSetUp) {
  const Evaluation e = evaluate_paper(qlora(kLlama, "quantize_working_bytes = 68\n", kLoraQv));
  EXPECT_EQ(e.item_bytes("quantized.quantize_working", MEMPLAN_ROLE_BUFFERS), 3'066'036'224u);
  EXPECT_EQ(e.item_lifetime("quantized.quantize_working"), MEMPLAN_LIFETIME_SETUP);
  std::string built = qlora(kLlama, "quantize_working_bytes = 68\n", kLoraQv);
  built.replace(built.find("mode = \"train\""), 14, "mode = \"infer\"");
  built.replace(built.find("[optimizer]\nuse = \"adamw\"\n"), 26, "");
  const Evaluation init = evaluate_paper(built);
  EXPECT_EQ(init.item_bytes("quantized.quantize_working", MEMPLAN_ROLE_BUFFERS), 3'066'036'224u);
  const Evaluation none = evaluate_paper(qlora(kLlama, "", kLoraQv));
  EXPECT_EQ(none.item_bytes("quantized.quantize_working", MEMPLAN_ROLE_BUFFERS), 0u);
  const std::string int8 = "[precision]\nuse = \"quantized\"\nformat = \"int8\"\nquantize_working_bytes = 68\n";
  EXPECT_EQ(evaluate_paper(train_scenario(kLlama, int8 + kRest + kLoraQv))
                .item_bytes("quantized.quantize_working", MEMPLAN_ROLE_BUFFERS),
            0u);

  EXPECT_EQ(error_of(qlora(kLlama, "quantize_working_bytes = -1\n", kLoraQv), "a.toml"),
            "a.toml:9:26: error: in [precision], precision plugin 'quantized', option 'quantize_working_bytes': must "
            "be 0 to 1024 (bytes per element of the matrix being quantized), got -1 (plugin library " +
                plugin_dir() + "/memplan-quantized.so)");
}

// ---- errors, asserted exactly ----

const std::string kFix =
    "' is trainable, but quantized weights are frozen: no gradient updates them. Freeze them with a trainability "
    "[[strategy]]: use = \"lora\" (QLoRA: adapters train on the frozen quantized weights), or use = \"freeze\" "
    "training only parts that stay unquantized (router, norms, embeddings, lm_head); or set skip_trainable = true "
    "in [precision] to keep trainable weights unquantized; or use a precision that does not quantize, such as "
    "mixed-bf16";

// Lines: 1 name, 2 mode, 3 [model], 4 preset, 5 [precision], 6 use: the
// error points at the precision table's `use` and names the first trainable
// quantized item.
TEST(QloraErrors, TrainableQuantizedWeightsNameTheFixes) {
  EXPECT_EQ(error_of(qlora(kLlama, "", ""), "q.toml"),
            "q.toml:6:7: error: in [precision], precision plugin 'quantized': 'layers.0-31.attn.q" + kFix +
                library("quantized"));
  EXPECT_EQ(error_of(qlora(kLlama, "", "[[strategy]]\nuse = \"freeze\"\nlast_layers = 2\n"), "q.toml"),
            "q.toml:6:7: error: in [precision], precision plugin 'quantized': 'layers.30-31.attn.q" + kFix +
                library("quantized"));
}

TEST(QloraErrors, TrainingDtypesAreChecked) {
  EXPECT_EQ(error_of(qlora(kLlama, "master_weights = \"fp64\"\n", kLoraQv), "q.toml"),
            "q.toml:9:18: error: in [precision], precision plugin 'quantized', option 'master_weights': is "
            "\"fp64\", not a known dtype; use fp32, fp16, bf16, fp8, int8, int4, or \"none\"" +
                library("quantized"));
  EXPECT_EQ(error_of(qlora(kLlama, "adapters = \"none\"\n", kLoraQv), "q.toml"),
            "q.toml:9:12: error: in [precision], precision plugin 'quantized', option 'adapters': is \"none\", not "
            "a known dtype; use fp32, fp16, bf16, fp8, int8, int4" + library("quantized"));
}

}  // namespace
}  // namespace memplan::testing::trainability
