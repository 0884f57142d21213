// The 'quantized' precision plugin: bytes per weight of each format with its
// block scales, checked against the figures of the papers that define them
// and against hand derivations written beside each test.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <utility>

#include "test_support.hpp"

namespace memplan::testing {
namespace {

std::string scenario(const std::string& model, const std::string& precision_options) {
  return "name = \"quantized\"\nmode = \"infer\"\n[model]\n" + model + "[precision]\nuse = \"quantized\"\n" +
         precision_options;
}

const std::string kLlama2_7b = "preset = \"llama-2-7b\"\n";

uint64_t weights(const Evaluation& evaluation) { return evaluation.component(MEMPLAN_ROLE_WEIGHTS); }

// A weight's bytes on the GPU: for a quantized weight, its packed values and
// its quantization constants (the item's ".quant_state" companion).
uint64_t weight_item(const Evaluation& evaluation, const std::string& name) {
  return evaluation.item_bytes(name, MEMPLAN_ROLE_WEIGHTS) +
         evaluation.item_bytes(name + ".quant_state", MEMPLAN_ROLE_WEIGHTS);
}

// Bits per parameter of a params-only model: all of it is one quantized item.
double bits_per_parameter(const std::string& precision_options, double params) {
  Evaluation evaluation = evaluate_paper(scenario("params = " + std::to_string(params) + "\n", precision_options));
  return static_cast<double>(weights(evaluation)) * 8.0 / params;
}

// 2^16 x 10^5 parameters: a whole number of 64 x 256-element blocks, so no
// rounding hides in the sizes below.
constexpr double kBlockAligned = 65536.0 * 1e5;

// QLoRA (Dettmers et al. 2023, arXiv 2305.14314), section 3, "Double
// Quantization": NF4 in blocks of 64 with an fp32 absmax each costs
// 32/64 = 0.5 bits of constants per parameter, 4.5 bits in all:
// 0.5 + 4/64 = 0.5625 bytes per parameter.
TEST(QloraNf4, FourAndAHalfBitsWithoutDoubleQuantization) {
  Evaluation evaluation = evaluate_paper(scenario("params = 6553600000\n", "format = \"nf4\"\n"));
  EXPECT_EQ(weights(evaluation), 3'686'400'000u);  // 6.5536e9 x 0.5625
  EXPECT_DOUBLE_EQ(bits_per_parameter("format = \"nf4\"\n", kBlockAligned), 4.5);
  EXPECT_EQ(report_detail(evaluation, "quantized_bits_per_weight"), "4.5");
}

// Same section: double quantization stores the absmax constants in 8 bits
// with one fp32 constant per 256 of them, 8/64 + 32/(64 x 256) = 0.127 bits
// per parameter instead of 0.5. Bytes: 0.5 + 1/64 + 4/16384 = 0.515869140625
// (x 65536 = 33808 bytes per 65536 parameters).
TEST(QloraNf4, DoubleQuantizationCostsPoint127BitsPerParameter) {
  const std::string options = "format = \"nf4\"\ndouble_quant = true\n";
  Evaluation evaluation = evaluate_paper(scenario("params = 6553600000\n", options));
  EXPECT_EQ(weights(evaluation), 3'380'800'000u);  // 1e5 x 33808
  const double bits = bits_per_parameter(options, kBlockAligned);
  EXPECT_DOUBLE_EQ(bits, 4.0 + 8.0 / 64 + 32.0 / (64 * 256));
  EXPECT_NEAR(bits - 4.0, 0.127, 0.0005);  // the paper's rounded figure
}

// QLoRA, section 1: double quantization saves "an average of about 0.37 bits
// per parameter (approximately 3 GB for a 65B model)". 0.373 bits x 65e9 / 8
// = 3.03e9 bytes (GB = 10^9).
TEST(QloraNf4, DoubleQuantizationSavesAboutThreeGigabytesOnA65BModel) {
  const std::string model = "params = 65e9\n";
  const double plain = static_cast<double>(weights(evaluate_paper(scenario(model, "format = \"nf4\"\n"))));
  const double double_quant =
      static_cast<double>(weights(evaluate_paper(scenario(model, "format = \"nf4\"\ndouble_quant = true\n"))));
  EXPECT_NEAR((plain - double_quant) / kGB, 3.0, 0.05);
  EXPECT_NEAR((plain - double_quant) * 8 / 65e9, 0.373, 0.0005);
}

// GPTQ (Frantar et al. 2022, arXiv 2210.17323) and AWQ (Lin et al. 2023,
// arXiv 2306.00978) quantize to 4 bits in groups of 128 with an fp16 scale:
// 0.5 + 2/128 = 0.515625 bytes = 4.125 bits per weight. AWQ is asymmetric and
// also stores a 4-bit zero point per group: + 0.5/128 = 0.51953125 bytes =
// 4.15625 bits. Llama-2-7B's q projection is 4096 x 4096 per layer, 32 layers:
// 16,777,216 x 0.515625 = 8,650,752 bytes per layer, x 32 = 276,824,064;
// with zeros 16,777,216 x 0.51953125 = 8,716,288, x 32 = 278,921,216.
TEST(Int4Groupwise, Group128WithFp16ScalesAndOptionalFourBitZeros) {
  Evaluation gptq = evaluate_paper(scenario(kLlama2_7b, "format = \"int4\"\n"));
  EXPECT_EQ(weight_item(gptq, "layers.0-31.attn.q"), 276'824'064u);
  EXPECT_EQ(report_detail(gptq, "quantized_bits_per_weight"), "4.125");
  Evaluation awq = evaluate_paper(scenario(kLlama2_7b, "format = \"int4\"\nzero_point = true\n"));
  EXPECT_EQ(weight_item(awq, "layers.0-31.attn.q"), 278'921'216u);
  EXPECT_EQ(report_detail(awq, "quantized_bits_per_weight"), "4.15625");
  // group_size and scale_dtype override the defaults: 0.5 + 4/32 = 0.625 bytes.
  Evaluation g32 = evaluate_paper(scenario(kLlama2_7b, "format = \"int4\"\ngroup_size = 32\nscale_dtype = \"fp32\"\n"));
  EXPECT_EQ(weight_item(g32, "layers.0-31.attn.q"), 16'777'216u * 5 / 8 * 32);
}

// LLM.int8() (Dettmers et al. 2022, arXiv 2208.07339), section 3.1,
// vector-wise quantization: one scale per row, taken as one per model.hidden
// (4096) elements, fp16: 1 + 2/4096 bytes per weight. q: 4096 x 4096 +
// 4096 scales x 2 bytes = 16,785,408 bytes per layer, x 32 = 537,133,056.
// MLP: 3 x 4096 x 11008 = 135,266,304 weights + 33,024 scales x 2 =
// 135,332,352 bytes per layer, x 32 = 4,330,635,264.
TEST(Int8RowWise, OneFp16ScalePerRowOfHiddenElements) {
  Evaluation evaluation = evaluate_paper(scenario(kLlama2_7b, "format = \"int8\"\n"));
  EXPECT_EQ(weight_item(evaluation, "layers.0-31.attn.q"), 537'133'056u);
  EXPECT_EQ(weight_item(evaluation, "layers.0-31.mlp"), 4'330'635'264u);
  // A params-only model has no rows; group_size makes it explicit: 1 + 2/128.
  Evaluation grouped = evaluate_paper(scenario("params = 1.28e9\n", "format = \"int8\"\ngroup_size = 128\n"));
  EXPECT_EQ(weights(grouped), 1'300'000'000u);  // 1.28e9 + 1e7 scales x 2 bytes
}

// fp8 (E4M3) weights with one scale per tensor: the scales are negligible and
// not counted, 1 byte per weight: q = 4096^2 x 32 = 536,870,912 bytes. With
// blocks of 128 and fp32 scales: 1 + 4/128 = 1.03125 bytes, 553,648,128.
TEST(Fp8, PerTensorScaleIsNegligibleUnlessGrouped) {
  Evaluation per_tensor = evaluate_paper(scenario(kLlama2_7b, "format = \"fp8\"\n"));
  EXPECT_EQ(weight_item(per_tensor, "layers.0-31.attn.q"), 536'870'912u);
  EXPECT_EQ(report_detail(per_tensor, "quantized_bits_per_weight"), "8");
  Evaluation blocked = evaluate_paper(scenario(kLlama2_7b, "format = \"fp8\"\ngroup_size = 128\nscale_dtype = \"fp32\"\n"));
  EXPECT_EQ(weight_item(blocked, "layers.0-31.attn.q"), 553'648'128u);
}

// Formats with their block layouts (quantized_format.hpp gives the sources).
// kBlockAligned parameters are a whole number of 256-element blocks, so the
// bits per parameter are the block's exactly.
//   fp8-block: 8 bits + one fp32 scale per 128 x 128 block (DeepSeek-V3):
//     8 + 32/16384 = 8.001953125;
//   mxfp4 (OCP MX v1.0): 32 E2M1 values + one E8M0 byte: 4 + 8/32 = 4.25;
//   gptq, awq: 4 bits + fp16 scale + packed 4-bit zero per 128: 4 + 20/128 = 4.15625.
TEST(BlockScaledFormats, Fp8BlockMxfp4GptqAwq) {
  EXPECT_DOUBLE_EQ(bits_per_parameter("format = \"fp8-block\"\n", kBlockAligned), 8.001953125);
  EXPECT_DOUBLE_EQ(bits_per_parameter("format = \"mxfp4\"\n", kBlockAligned), 4.25);
  EXPECT_DOUBLE_EQ(bits_per_parameter("format = \"gptq\"\n", kBlockAligned), 4.15625);
  EXPECT_DOUBLE_EQ(bits_per_parameter("format = \"awq\"\n", kBlockAligned), 4.15625);
  // A symmetric GPTQ checkpoint written without qzeros: 4 + 16/128 = 4.125.
  EXPECT_DOUBLE_EQ(bits_per_parameter("format = \"gptq\"\nzero_point = false\n", kBlockAligned), 4.125);
}

// llama.cpp's GGUF types: 8 x sizeof(block_<type>) / elements per block, from
// the structs of ggml/src/ggml-common.h (each with its static_assert):
TEST(GgufBlocks, BitsPerWeightFromTheBlockStructs) {
  const std::pair<const char*, double> expected[] = {
      {"q4_0", 8.0 * (2 + 16) / 32},             // fp16 d, 16 bytes of nibbles: 4.5
      {"q4_1", 8.0 * (2 + 2 + 16) / 32},         // d and m: 5.0
      {"q5_0", 8.0 * (2 + 4 + 16) / 32},         // d, qh[4], qs[16]: 5.5
      {"q5_1", 8.0 * (2 + 2 + 4 + 16) / 32},     // 6.0
      {"q8_0", 8.0 * (2 + 32) / 32},             // 8.5
      {"q2_k", 8.0 * (16 + 64 + 2 + 2) / 256},   // scales[16], qs[64], d, dmin: 2.625
      {"q3_k", 8.0 * (32 + 64 + 12 + 2) / 256},  // hmask[32], qs[64], scales[12], d: 3.4375
      {"q4_k", 8.0 * (2 + 2 + 12 + 128) / 256},  // d, dmin, scales[12], qs[128]: 4.5
      {"q5_k", 8.0 * (2 + 2 + 12 + 32 + 128) / 256},  // + qh[32]: 5.5
      {"q6_k", 8.0 * (128 + 64 + 16 + 2) / 256},      // ql, qh, scales, d: 6.5625
      {"iq1_s", 8.0 * (2 + 32 + 16) / 256},           // d, qs[32], qh[8] uint16: 1.5625
      {"iq1_m", 8.0 * (32 + 16 + 8) / 256},           // qs, qh, scales; no d: 1.75
      {"iq2_xxs", 8.0 * (2 + 64) / 256},              // d, qs[32] uint16: 2.0625
      {"iq2_xs", 8.0 * (2 + 64 + 8) / 256},           // + scales[8]: 2.3125
      {"iq2_s", 8.0 * (2 + 64 + 8 + 8) / 256},        // d, qs[64], qh[8], scales[8]: 2.5625
      {"iq3_xxs", 8.0 * (2 + 96) / 256},              // d, qs[96]: 3.0625
      {"iq3_s", 8.0 * (2 + 64 + 8 + 32 + 4) / 256},   // d, qs, qh, signs, scales: 3.4375
      {"iq4_xs", 8.0 * (2 + 2 + 4 + 128) / 256},      // d, scales_h, scales_l[4], qs[128]: 4.25
      {"iq4_nl", 8.0 * (2 + 16) / 32},                // 4.5
  };
  for (const auto& [format, bits] : expected)
    EXPECT_DOUBLE_EQ(bits_per_parameter("format = \"" + std::string(format) + "\"\n", kBlockAligned), bits)
        << format;
  // The report's figure: Q4_K's 4.5 bits.
  Evaluation q4k = evaluate_paper(scenario(kLlama2_7b, "format = \"q4_k\"\n"));
  EXPECT_EQ(report_detail(q4k, "quantized_bits_per_weight"), "4.5");
  // layers.0-31.attn.q: 32 x 4096 x 4096 weights x 144/256 bytes = 301,989,888.
  EXPECT_EQ(weight_item(q4k, "layers.0-31.attn.q"), 301'989'888u);
}

// quantize = "..., embeddings": the token embedding in the format too, as a
// llama.cpp GGUF file stores token_embd and vLLM's GGUFEmbeddingMethod keeps
// it: 32000 x 4096 = 131,072,000 weights at q8_0's 34 bytes per 32 =
// 139,264,000 bytes (block scales inside the weight), where bf16 is
// 262,144,000; the LM head stays bf16 unless named.
TEST(Unquantized, EmbeddingsQuantizedWhenNamed) {
  Evaluation gguf = evaluate_paper(scenario(kLlama2_7b, "format = \"q8_0\"\nquantize = \"attention, mlp, embeddings\"\n"));
  EXPECT_EQ(weight_item(gguf, "embed_tokens"), 139'264'000u);
  EXPECT_EQ(weight_item(gguf, "lm_head"), 262'144'000u);
  EXPECT_EQ(weight_item(evaluate_paper(scenario(kLlama2_7b, "format = \"q8_0\"\n")), "embed_tokens"), 262'144'000u);
}

// dequantized_persistent: the dequantize_copies as a kernel's buffer kept for the run (exllama v1's temp_dq,
// auto-gptq _utils.py autogptq_post_init): role buffers, lifetime persistent, and no forward transient for an
// inference model to place. Llama-2-7B's largest matrix 4096 x 11008 = 45,088,768 weights in fp16:
// 90,177,536 bytes.
TEST(Unquantized, DequantizedCopiesKeptForTheRun) {
  const std::string gptq = "format = \"gptq\"\nactivations = \"fp16\"\ndequantize_copies = 1\n";
  Evaluation kept = evaluate_paper(scenario(kLlama2_7b, gptq + "dequantized_persistent = true\n"));
  EXPECT_EQ(kept.item_bytes("activations.dequantized_weight", MEMPLAN_ROLE_BUFFERS), 90'177'536u);
  EXPECT_EQ(kept.item_bytes("activations.dequantized_weight", MEMPLAN_ROLE_ACTIVATIONS), 0u);
  Evaluation transient = evaluate_paper(scenario(kLlama2_7b, gptq));
  EXPECT_EQ(transient.item_bytes("activations.dequantized_weight", MEMPLAN_ROLE_ACTIVATIONS), 90'177'536u);
  EXPECT_NE(error_of(scenario(kLlama2_7b, "format = \"gptq\"\ndequantized_persistent = true\n"))
                .find("give dequantize_copies"),
            std::string::npos);
}

// tied_head_stored: AutoAWQ's save_quantized keeps a tied LM head as a tensor of its own, which loading fills
// before tie_weights() shares the embedding: one more copy of the embedding at set-up (lifetime setup, the init
// phase's high point only). GPT-2 XL (tied) in AWQ with an fp16 embedding: 50,257 x 1,600 x 2 = 160,822,400
// bytes, at init only. An untied model has no such copy to make: an error.
TEST(Unquantized, TiedHeadStoredCopiedAtLoad) {
  const std::string awq = "format = \"awq\"\nunquantized = \"fp16\"\nactivations = \"fp16\"\n";
  Evaluation stored = evaluate_paper(scenario("preset = \"gpt2-xl\"\n", awq + "tied_head_stored = true\n"));
  Evaluation plain = evaluate_paper(scenario("preset = \"gpt2-xl\"\n", awq));
  EXPECT_EQ(stored.item_bytes("quantized.tied_head_copy", MEMPLAN_ROLE_WEIGHTS), 160'822'400u);
  EXPECT_EQ(stored.item_lifetime("quantized.tied_head_copy"), MEMPLAN_LIFETIME_SETUP);
  EXPECT_EQ(stored.breakdown().quantities[0].timeline[0] - plain.breakdown().quantities[0].timeline[0],
            160'822'400u);
  EXPECT_NE(error_of(scenario(kLlama2_7b, awq + "tied_head_stored = true\n")).find("not tied"), std::string::npos);
}

// unquantized_modules: single layers' modules a checkpoint keeps in 16 bits (bitsandbytes'
// llm_int8_skip_modules naming model.layers.<i>.mlp, as Unsloth's dynamic 4-bit checkpoints do). nf4 with
// double quantization is 4 + 8/64 + 32/(64 x 256) = 4.126953125 bits, 2113/4096 bytes a weight; a bf16 module
// costs 2 - 2113/4096 = 6079/4096 bytes a weight more. Llama-2-7B, layers 0-2's MLPs, 3 x 3 x 4096 x 11008 =
// 405,798,912 weights: +602,258,688 bytes; layer 5's o, 4096^2 = 16,777,216: +24,899,584.
TEST(Unquantized, ModulesKeptUnquantizedByLayer) {
  const std::string nf4 = "format = \"nf4\"\ndouble_quant = true\n";
  const uint64_t base = weights(evaluate_paper(scenario(kLlama2_7b, nf4)));
  Evaluation kept = evaluate_paper(scenario(kLlama2_7b, nf4 + "unquantized_modules = \"layers.0-2.mlp, layers.5.attn.o\"\n"));
  EXPECT_EQ(weights(kept) - base, 602'258'688u + 24'899'584u);
  EXPECT_EQ(weight_item(kept, "layers.0-2.mlp.unquantized"), 602'258'688u);
  EXPECT_EQ(weight_item(kept, "layers.5.attn.o.unquantized"), 24'899'584u);
  // "attn" is q, k, v and o: 4 x 16,777,216 x 6079/4096.
  EXPECT_EQ(weights(evaluate_paper(scenario(kLlama2_7b, nf4 + "unquantized_modules = \"layers.31.attn\"\n"))) - base,
            99'598'336u);
  EXPECT_EQ(error_of(scenario(kLlama2_7b, nf4 + "unquantized_modules = \"layers.32.mlp\"\n"), "q.toml"),
            "q.toml:9:23: error: in [precision], precision plugin 'quantized', option 'unquantized_modules': names "
            "\"layers.32.mlp\": the layers must be 0 to 31, first to last; write layers.<i>[-<j>].<part>, part mlp, "
            "attn, attn.q, attn.k, attn.v or attn.o, comma-separated (e.g. \"layers.1.mlp, layers.3.attn\")"
            " (plugin library " + plugin_dir() + "/memplan-quantized.so)");
  EXPECT_NE(error_of(scenario(kLlama2_7b, nf4 + "unquantized_modules = \"layers.1.norm\"\n")).find(
                "\"norm\" is not a module memplan counts"),
            std::string::npos);
}

// Embeddings, LM head and norms keep the `unquantized` dtype (bf16 by
// default): 32000 x 4096 x 2 = 262,144,000 bytes each for the embedding and
// the LM head; norms 32 x 2 x 4096 x 2 = 524,288; final norm 8,192.
TEST(Unquantized, EmbeddingsLmHeadAndNormsStayInBf16) {
  Evaluation evaluation = evaluate_paper(scenario(kLlama2_7b, "format = \"nf4\"\ndouble_quant = true\n"));
  EXPECT_EQ(weight_item(evaluation, "embed_tokens"), 262'144'000u);
  EXPECT_EQ(weight_item(evaluation, "lm_head"), 262'144'000u);
  EXPECT_EQ(weight_item(evaluation, "layers.0-31.norms"), 524'288u);
  EXPECT_EQ(weight_item(evaluation, "final_norm"), 8'192u);
  Evaluation fp32 = evaluate_paper(scenario(kLlama2_7b, "format = \"nf4\"\nunquantized = \"fp32\"\n"));
  EXPECT_EQ(weight_item(fp32, "embed_tokens"), 524'288'000u);
  EXPECT_EQ(weight_item(fp32, "lm_head"), 524'288'000u);
}

// MoE: the experts are quantized, the router is not. Mixtral 8x7B, int4 g128:
// router 4096 x 8 x 2 bytes x 32 layers = 2,097,152; experts
// 8 x 3 x 4096 x 14336 = 1,409,286,144 x 0.515625 = 726,663,168 per layer,
// x 32 = 23,253,221,376.
TEST(Unquantized, MoeRouterStaysUnquantizedExpertsAreQuantized) {
  Evaluation evaluation = evaluate_paper(scenario("preset = \"mixtral-8x7b\"\n", "format = \"int4\"\n"));
  EXPECT_EQ(weight_item(evaluation, "layers.0-31.moe.router"), 2'097'152u);
  EXPECT_EQ(weight_item(evaluation, "layers.0-31.moe.experts"), 23'253'221'376u);
}

// Llama-2-7B in int4 (g128, fp16 scales, no zeros), by hand:
// quantized: 32 x (4 x 4096^2 + 3 x 4096 x 11008) = 6,476,005,376 weights
//            x 0.515625 = 3,339,190,272 bytes;
// bf16:      2 x 32000 x 4096 + 32 x 2 x 4096 + 4096 = 262,410,240 weights
//            x 2 = 524,820,480 bytes;
// total 3,864,010,752 bytes (3.60 GiB), against 13,476,831,232 in bf16.
TEST(Llama2SevenBillion, Int4WeightsByHand) {
  Evaluation evaluation = evaluate_paper(scenario(kLlama2_7b, "format = \"int4\"\n"));
  EXPECT_EQ(weights(evaluation), 3'864'010'752u);
  EXPECT_EQ(evaluation.breakdown().params_total, 6'738'415'616.0);
  EXPECT_EQ(evaluation.breakdown().params_trainable, 0.0);
}

// A params-only model is one item, quantized whole, and the report says so.
TEST(ParamsOnly, TheSingleItemIsQuantizedWithANote) {
  Evaluation evaluation = evaluate_paper(scenario("params = 7e9\n", "format = \"int4\"\n"));
  EXPECT_EQ(weight_item(evaluation, "parameters"), 3'609'375'000u);  // 7e9 x 0.515625
  EXPECT_NE(report_detail(evaluation, "quantized_note").find("known only by its parameter count"), std::string::npos);
  Evaluation architecture = evaluate_paper(scenario(kLlama2_7b, "format = \"int4\"\n"));
  EXPECT_EQ(report_detail(architecture, "quantized_note"), "");
}

// Lightning Fabric's BitsandbytesPrecision (lightning @ 71aed751,
// src/lightning/fabric/plugins/precision/bitsandbytes.py: init_context replaces
// every torch.nn.Linear, the LM head included) with bitsandbytes 0.41.0
// (autograd/_functions.py: matmul_4bit takes gemv_4bit for one token only;
// MatMul4Bit.forward holds dequantize_4bit(B, state).to(A.dtype): an fp16
// copy, the quant_state's dtype, and a bf16 one). Llama-2-7B in nf4, by hand:
// lm_head 32000 x 4096 = 131,072,000 weights x 0.5 = 65,536,000 B of values
// + x 4/64 = 8,192,000 B of absmax; the embedding stays bf16 (262,144,000 B).
// The largest quantized matrix is then the head: 2 copies x 2 B x
// 131,072,000 = 524,288,000 B. With the head left in bf16 it is one MLP
// matrix, 11008 x 4096 = 45,088,768 (the host's "mlp" item holds the three):
// x 4 B = 180,355,072 B. Without dequantize_copies there is no such item.
TEST(FabricBitsandbytes, LmHeadQuantizedAndThePrefillsDequantizedCopies) {
  Evaluation evaluation = evaluate_paper(
      scenario(kLlama2_7b, "format = \"nf4\"\nquantize = \"attention, mlp, lm_head\"\ndequantize_copies = 2\n"));
  EXPECT_EQ(evaluation.item_bytes("lm_head", MEMPLAN_ROLE_WEIGHTS), 65'536'000u);
  EXPECT_EQ(evaluation.item_bytes("lm_head.quant_state", MEMPLAN_ROLE_WEIGHTS), 8'192'000u);
  EXPECT_EQ(weight_item(evaluation, "embed_tokens"), 262'144'000u);
  EXPECT_EQ(evaluation.item_bytes("activations.dequantized_weight", MEMPLAN_ROLE_ACTIVATIONS), 524'288'000u);
  Evaluation head_bf16 =
      evaluate_paper(scenario(kLlama2_7b, "format = \"nf4\"\nquantize = \"attention, mlp\"\ndequantize_copies = 2\n"));
  EXPECT_EQ(weight_item(head_bf16, "lm_head"), 262'144'000u);
  EXPECT_EQ(head_bf16.item_bytes("activations.dequantized_weight", MEMPLAN_ROLE_ACTIVATIONS), 180'355'072u);
  Evaluation plain = evaluate_paper(scenario(kLlama2_7b, "format = \"nf4\"\n"));
  EXPECT_EQ(plain.item_bytes("activations.dequantized_weight", MEMPLAN_ROLE_ACTIVATIONS), 0u);
}

// With tensor parallelism the quantized items split like any weight.
TEST(Layout, TensorParallelSplitsQuantizedWeights) {
  Evaluation evaluation = evaluate_paper(scenario(kLlama2_7b, "format = \"int4\"\n") +
                                   "[[strategy]]\nuse = \"tensor-parallel\"\nsize = 2\n");
  EXPECT_EQ(weight_item(evaluation, "layers.0-31.attn.q"), 276'824'064u / 2);
}

// ---- the format a model's config.json declares (quantization_config) ----

std::string fixture_config(const std::string& folder) {
  return "hf_config = \"" + source_dir() + "/tests/catalog/fixtures/" + folder + "/config.json\"\n";
}

// Llama 2 7B's config.json with a quantization_config, in a folder of its own.
class QuantizedConfig {
 public:
  explicit QuantizedConfig(const std::string& quantization) {
    std::ifstream in(source_dir() + "/tests/catalog/fixtures/llama-2-7b/config.json");
    std::ostringstream text;
    text << in.rdbuf();
    std::string config = text.str();
    config.insert(config.find('{') + 1, "\n  \"quantization_config\": " + quantization + ",");
    path_ = dir_.write("config.json", config);
  }
  std::string model() const { return "hf_config = \"" + path_ + "\"\n"; }

 private:
  TempDir dir_;
  std::string path_;
};

// gpt-oss-120b as published: the experts' weights in MXFP4 (OCP MX v1.0: 32
// E2M1 values and one E8M0 scale, 4.25 bits), everything else in bf16, as the
// config's modules_to_not_convert says (self_attn, router, embed_tokens,
// lm_head). By hand: expert weights 36 x 128 x 3 x 2880^2 =
// 114,661,785,600 x 0.53125 = 60,914,073,600 bytes (values 57,330,892,800 and
// scales 3,583,180,800); the other 116,829,156,672 - 114,661,785,600 =
// 2,167,371,072 parameters (attention, sinks, router, expert biases, norms,
// embedding, head) x 2 = 4,334,742,144 bytes; in all 65,248,815,744 bytes =
// 60.77 GiB, the checkpoint size the model card gives (OpenAI 2025, arXiv
// 2508.10925: 60.8 GiB) and why the model fits one 80 GB GPU.
TEST(FromModelConfig, GptOss120bKeepsAllButTheExpertsInBf16) {
  Evaluation evaluation = evaluate_paper(scenario(fixture_config("gpt-oss-120b"), ""));
  EXPECT_EQ(weights(evaluation), 65'248'815'744u);
  EXPECT_NEAR(weights(evaluation) / kGiB, 60.8, 0.05);
  EXPECT_EQ(weight_item(evaluation, "layers.0-35.moe.experts"), 60'914'073'600u);
  EXPECT_EQ(evaluation.item_bytes("layers.0-35.moe.experts.quant_state", MEMPLAN_ROLE_WEIGHTS), 3'583'180'800u);
  EXPECT_EQ(weight_item(evaluation, "layers.0-35.moe.experts_bias"), 36u * 128 * 8640 * 2);  // biases stay bf16
  EXPECT_EQ(weight_item(evaluation, "layers.0-35.attn.q"), 36u * 11'800'576 * 2);
  EXPECT_EQ(weight_item(evaluation, "layers.0-35.moe.router"), 36u * 368'768 * 2);
  EXPECT_EQ(report_detail(evaluation, "quantized_bits_per_weight"), "4.25");
  EXPECT_NE(report_detail(evaluation, "quantized_format")
                .find("mxfp4 from the model's quantization_config (quant_method mxfp4); quantized parts: mlp, experts"),
            std::string::npos)
      << report_detail(evaluation, "quantized_format");
  // format = "auto" says the same; the preset with the format named gives the same bytes.
  EXPECT_EQ(weights(evaluate_paper(scenario(fixture_config("gpt-oss-120b"), "format = \"auto\"\n"))),
            65'248'815'744u);
  EXPECT_EQ(weights(evaluate_paper(
                scenario("preset = \"gpt-oss-120b\"\n", "format = \"mxfp4\"\nquantize = \"experts\"\n"))),
            65'248'815'744u);
  // gpt-oss-20b: 24 x 32 x 3 x 2880^2 = 19,110,297,600 x 0.53125 =
  // 10,152,345,600 + (20,914,757,184 - 19,110,297,600) x 2 = 3,608,919,168:
  // 13,761,264,768 bytes = 12.82 GiB (the model card: 12.8 GiB).
  Evaluation small = evaluate_paper(scenario(fixture_config("gpt-oss-20b"), ""));
  EXPECT_EQ(weights(small), 13'761'264'768u);
  EXPECT_NEAR(weights(small) / kGiB, 12.8, 0.05);
}

// vLLM's mxfp4 MoE on its Triton backend (an H100 with triton_kernels):
// process_weights_after_loading swizzles the values for the triton_kernels
// matmul and deletes the loaded w13_weight/w2_weight, but the loaded
// w13_weight_scale/w2_weight_scale stay registered beside the swizzled scales
// its PrecisionConfig holds, and the biases become fp32
// (vllm/model_executor/layers/quantization/mxfp4.py @ 007d5005; at 0.19
// fused_moe/oracle/mxfp4.py @ 001eda31, convert_to_mxfp4_moe_kernel_format).
// gpt-oss-20b by hand: scales 19,110,297,600 / 32 = 597,196,800 bytes, once
// more; biases 24 x 32 x (2 x 2880 + 2880) = 6,635,520 x (4 - 2) =
// 13,271,040 bytes more: 13,761,264,768 + 597,196,800 + 13,271,040 =
// 14,371,732,608 bytes = 13.38 GiB (vLLM 0.11 logs 13.47 GiB of weights,
// validation/VLLM-v011-gpt-oss-20b-llmd-bench.toml).
TEST(FromModelConfig, VllmTritonMxfp4KeepsTheScalesTwiceAndFp32Biases) {
  const std::string options = "mxfp4_moe_scale_copies = 2\nmxfp4_moe_bias_dtype = \"fp32\"\n";
  Evaluation evaluation = evaluate_paper(scenario(fixture_config("gpt-oss-20b"), options));
  EXPECT_EQ(weights(evaluation), 14'371'732'608u);
  EXPECT_EQ(evaluation.item_bytes("layers.0-23.moe.experts.quant_state", MEMPLAN_ROLE_WEIGHTS), 1'194'393'600u);
  EXPECT_EQ(weight_item(evaluation, "layers.0-23.moe.experts_bias"), 6'635'520u * 4);
  EXPECT_EQ(weight_item(evaluation, "layers.0-23.attn.q"), weight_item(evaluate_paper(scenario(fixture_config("gpt-oss-20b"), "")), "layers.0-23.attn.q"));
  // The vllm profile sets both from 0.11; before, the checkpoint's bytes.
  auto served = [](const std::string& version) {
    return "name = \"served\"\nmode = \"infer\"\n[framework]\nuse = \"vllm\"\nversion = \"" + version +
           "\"\n[model]\n" + fixture_config("gpt-oss-20b") + "[precision]\nuse = \"quantized\"\n";
  };
  EXPECT_EQ(weights(evaluate(served("0.11"))), 14'371'732'608u);
  EXPECT_EQ(weights(evaluate(served("0.10"))), 13'761'264'768u);
  // gpt-oss-120b: 3,583,180,800 scales more and 36 x 128 x 8640 x 2 =
  // 79,626,240 bytes of biases: 65,248,815,744 + 3,662,807,040 = 68,911,622,784.
  EXPECT_EQ(weights(evaluate_paper(scenario(fixture_config("gpt-oss-120b"), options))), 68'911'622'784u);
  // Another format leaves them alone: int4's scales once, bf16 biases.
  EXPECT_EQ(weights(evaluate_paper(scenario(fixture_config("gpt-oss-20b"), "format = \"int4\"\n" + options))),
            weights(evaluate_paper(scenario(fixture_config("gpt-oss-20b"), "format = \"int4\"\n"))));
  EXPECT_NE(error_of(scenario(fixture_config("gpt-oss-20b"), "mxfp4_moe_scale_copies = 0\n"))
                .find("mxfp4_moe_scale_copies"),
            std::string::npos);
}

// vLLM's mxfp4 MoE below compute capability 9.0 runs Marlin, whose experts
// are allocated padded: a rank's intermediate size to a multiple of 128, the
// hidden size to 256 (mxfp4.py create_weights), with one scale copy and bf16
// biases (prepare_moe_fp4_layer_for_marlin). gpt-oss-20b on one A100 by hand:
// the experts' 24 x 32 x 3 x 2880 x 2880 = 19,110,297,600 values become
// 24 x 32 x 3 x 3072 x 2944 = 20,837,302,272, at 4.25 bits (17/32 B):
// +917,471,232 B; the biases 24 x 32 x (2 x 2880 + 2880) = 6,635,520 become
// 24 x 32 x (2 x 2944 + 3072) = 6,881,280, bf16: +491,520 B. From the
// checkpoint's 13,761,264,768: 14,679,227,520 B (13.67 GiB; vLLM 0.19 logs
// "Model loading took 13.72 GiB" on an A100,
// validation/VLLMX-v019-gpt-oss-20b-a100-80gb-tp1-u065.toml).
TEST(FromModelConfig, VllmMarlinMxfp4PadsTheExpertsBelowHopper) {
  auto served = [](const std::string& version, const std::string& gpu, int tp) {
    return "name = \"served\"\nmode = \"infer\"\n[framework]\nuse = \"vllm\"\nversion = \"" + version +
           "\"\n[model]\n" + fixture_config("gpt-oss-20b") + "[precision]\nuse = \"quantized\"\n" +
           (tp > 1 ? "[[strategy]]\nuse = \"tensor-parallel\"\nsize = " + std::to_string(tp) + "\n" : "") +
           "[hardware]\ngpu = \"" + gpu + "\"\ncount = " + std::to_string(tp) + "\n";
  };
  EXPECT_EQ(weights(evaluate(served("0.11", "a100-sxm-80gb", 1))), 14'679'227'520u);
  EXPECT_EQ(weights(evaluate(served("0.19", "a100-sxm-80gb", 1))), 14'679'227'520u);
  EXPECT_EQ(weights(evaluate(served("0.10.1", "a100-sxm-80gb", 1))), 14'679'227'520u);
  // Before gpt-oss's release the checkpoint's bytes; on an H100 the Triton
  // reading (two scale copies, fp32 biases; 2880 = 45 x 64 needs no padding).
  EXPECT_EQ(weights(evaluate(served("0.10", "a100-sxm-80gb", 1))), 13'761'264'768u);
  EXPECT_EQ(weights(evaluate(served("0.11", "h100-sxm-80gb", 1))), 14'371'732'608u);
  // TP 2 on an H100: a rank's intermediate 1440 -> 1472 (Triton's 64): the
  // experts' values and both scale copies 1472 / 1440 of the unpadded half,
  // the biases (2 x 1472 + 2880 / 2) / (2 x 1440 + 2880 / 2) of theirs.
  const Evaluation padded = evaluate(served("0.19", "h100-sxm-80gb", 2));
  EXPECT_EQ(padded.item_bytes("layers.0-23.moe.experts", MEMPLAN_ROLE_WEIGHTS), 9'555'148'800ull / 2 * 1472 / 1440);
}

// A format named in the scenario is used as before: the config's is ignored.
TEST(FromModelConfig, ANamedFormatOverridesTheConfig) {
  Evaluation named = evaluate_paper(scenario(fixture_config("gpt-oss-120b"), "format = \"int4\"\n"));
  Evaluation preset = evaluate_paper(scenario("preset = \"gpt-oss-120b\"\n", "format = \"int4\"\n"));
  EXPECT_EQ(weights(named), weights(preset));
  EXPECT_EQ(weight_item(named, "layers.0-35.attn.q"), weight_item(preset, "layers.0-35.attn.q"));
  EXPECT_LT(weight_item(named, "layers.0-35.attn.q"), 36u * 11'800'576 * 2);  // attention quantized too
  EXPECT_EQ(report_detail(named, "quantized_format"), "");
}

// GPTQ, AWQ and block-scaled 8-bit configs on Llama 2 7B: 6,476,005,376
// quantized weights (32 x (4 x 4096^2 + 3 x 4096 x 11008)) and 262,410,240
// bf16 ones (524,820,480 bytes); every quantized matrix is a whole number of
// groups, so no rounding hides below.
TEST(FromModelConfig, GptqAwqAndBlockScaled) {
  // TheBloke/Llama-2-7B-GPTQ's quantization_config: 4 bits, group 128, the
  // same as format = "gptq" (4 + 16/128 + 4/128 = 4.15625 bits).
  const QuantizedConfig gptq(R"({"bits": 4, "group_size": 128, "damp_percent": 0.01, "desc_act": false, )"
                             R"("sym": true, "true_sequential": true, "quant_method": "gptq"})");
  EXPECT_EQ(weights(evaluate_paper(scenario(gptq.model(), ""))),
            weights(evaluate_paper(scenario(kLlama2_7b, "format = \"gptq\"\n"))));
  // 8 bits per channel (group_size -1: one fp16 scale and one 8-bit zero per
  // row of 4096): 1 + 3/4096 bytes; 6,476,005,376 + 4,743,168 + 524,820,480.
  const QuantizedConfig gptq8(R"({"bits": 8, "group_size": -1, "desc_act": false, "quant_method": "gptq"})");
  EXPECT_EQ(weights(evaluate_paper(scenario(gptq8.model(), ""))), 7'005'569'024u);
  // AutoAWQ's older keys: w_bit 4, q_group_size 64: 0.5 + 2.5/64 =
  // 0.5390625 bytes (4.3125 bits); 3,490,971,648 + 524,820,480.
  const QuantizedConfig awq(R"({"quant_method": "awq", "zero_point": true, "q_group_size": 64, "w_bit": 4, )"
                            R"("version": "gemm"})");
  Evaluation awq_evaluation = evaluate_paper(scenario(awq.model(), ""));
  EXPECT_EQ(weights(awq_evaluation), 4'015'792'128u);
  EXPECT_EQ(report_detail(awq_evaluation, "quantized_bits_per_weight"), "4.3125");
  // DeepSeek-V3's: 8-bit floats with one fp32 scale per 128 x 128 block:
  // 1 + 4/16384 bytes; 6,476,005,376 + 1,581,056 + 524,820,480.
  const QuantizedConfig blocks(
      R"({"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8", "weight_block_size": [128, 128]})");
  EXPECT_EQ(weights(evaluate_paper(scenario(blocks.model(), ""))), 7'002'406'912u);
  // Without weight_block_size: one scale per tensor (not counted).
  const QuantizedConfig per_tensor(R"({"activation_scheme": "static", "quant_method": "fp8"})");
  EXPECT_EQ(weights(evaluate_paper(scenario(per_tensor.model(), ""))), 7'000'825'856u);
  // modules_to_not_convert keeps the attention in bf16 (4 x 4096^2 x 32 = 2,147,483,648 weights).
  const QuantizedConfig kept(R"({"bits": 4, "group_size": 128, "quant_method": "gptq", )"
                             R"("modules_to_not_convert": ["model.layers.*.self_attn", "lm_head"]})");
  EXPECT_EQ(weights(evaluate_paper(scenario(kept.model(), ""))),
            7'068'590'080u);  // 4,328,521,728 MLP weights x 133/256 + 2,147,483,648 x 2 + 524,820,480
}

// bitsandbytes checkpoints (BitsAndBytesConfig), on Llama 2 7B as above.
TEST(FromModelConfig, Bitsandbytes) {
  // unsloth/llama-2-7b-bnb-4bit's quantization_config: NF4 with double
  // quantization, the same as format = "nf4" with double_quant = true.
  const QuantizedConfig nf4(
      R"({"_load_in_4bit": true, "_load_in_8bit": false, "bnb_4bit_compute_dtype": "bfloat16", )"
      R"("bnb_4bit_quant_storage": "uint8", "bnb_4bit_quant_type": "nf4", "bnb_4bit_use_double_quant": true, )"
      R"("llm_int8_enable_fp32_cpu_offload": false, "llm_int8_has_fp16_weight": false, "llm_int8_skip_modules": null, )"
      R"("llm_int8_threshold": 6.0, "load_in_4bit": true, "load_in_8bit": false, "quant_method": "bitsandbytes"})");
  EXPECT_EQ(weights(evaluate_paper(scenario(nf4.model(), ""))),
            weights(evaluate_paper(scenario(kLlama2_7b, "format = \"nf4\"\ndouble_quant = true\n"))));
  // FP4 codes (BitsAndBytesConfig's default type) take the bytes of NF4: 4
  // bits and an fp32 absmax per 64, 0.5625 bytes.
  const QuantizedConfig fp4(R"({"load_in_4bit": true, "quant_method": "bitsandbytes"})");
  EXPECT_EQ(weights(evaluate_paper(scenario(fp4.model(), ""))),
            weights(evaluate_paper(scenario(kLlama2_7b, "format = \"nf4\"\n"))));
  // LLM.int8(): one fp32 scale (Int8Params.SCB) per row of 4096:
  // 6,476,005,376 x (1 + 4/4096) = 6,482,329,600 + 524,820,480.
  const QuantizedConfig int8(R"({"load_in_8bit": true, "quant_method": "bitsandbytes", )"
                             R"("llm_int8_skip_modules": ["lm_head"]})");
  EXPECT_EQ(weights(evaluate_paper(scenario(int8.model(), ""))), 7'007'150'080u);
}

// ---- errors, asserted exactly ----

std::string library() { return " (plugin library " + plugin_dir() + "/memplan-quantized.so)"; }

// Line numbers count from the scenario text's first line:
// 1 name, 2 mode, 3 [model], 4 preset, 5 [precision], 6 use, 7 first option.
// Quantized weights are frozen: training is allowed only once a trainability
// plugin ('lora', 'freeze') has frozen every quantized item (QLoRA; see
// tests/trainability/qlora_test.cpp). Without one, every weight is trainable
// and the first quantized item (attn.q of layers 0-31) is named with the fixes.
TEST(QuantizedErrors, TrainingNeedsTheQuantizedWeightsFrozen) {
  const std::string train = "name = \"q\"\nmode = \"train\"\n[model]\npreset = \"llama-2-7b\"\n[precision]\n"
                            "use = \"quantized\"\nformat = \"nf4\"\n[optimizer]\nuse = \"adamw\"\n"
                            "[activations]\nuse = \"none\"\n";
  EXPECT_EQ(error_of(train, "q.toml"),
            "q.toml:6:7: error: in [precision], precision plugin 'quantized': 'layers.0-31.attn.q' is trainable, but "
            "quantized weights are frozen: no gradient updates them. Freeze them with a trainability [[strategy]]: "
            "use = \"lora\" (QLoRA: adapters train on the frozen quantized weights), or use = \"freeze\" training "
            "only parts that stay unquantized (router, norms, embeddings, lm_head); or set skip_trainable = true in "
            "[precision] to keep trainable weights unquantized; or use a precision that does not quantize, such as "
            "mixed-bf16" + library());
}

const std::string kFormatNames =
    "int8, int4, nf4, fp8, fp8-block, mxfp4, gptq, awq, q4_0, q4_1, q5_0, q5_1, q8_0, q2_k, q3_k, q4_k, q5_k, q6_k, iq1_s, iq1_m, iq2_xxs, iq2_xs, iq2_s, iq3_xxs, iq3_s, iq4_xs, iq4_nl";

TEST(QuantizedErrors, FormatIsRequiredAndChecked) {
  EXPECT_EQ(error_of(scenario(kLlama2_7b, ""), "q.toml"),
            "q.toml:6:7: error: in [precision], precision plugin 'quantized': needs format = \"...\" (the quantized "
            "weight format: " + kFormatNames + ")" + library());
  EXPECT_EQ(error_of(scenario(kLlama2_7b, "format = \"int3\"\n"), "q.toml"),
            "q.toml:7:10: error: in [precision], precision plugin 'quantized', option 'format': is \"int3\", not a "
            "quantized format; use one of " + kFormatNames + ", or \"auto\"" + library());
  EXPECT_EQ(error_of(scenario(kLlama2_7b, "format = \"auto\"\n"), "q.toml"),
            "q.toml:6:7: error: in [precision], precision plugin 'quantized': format = \"auto\" takes the format the "
            "model's config.json declares, but the model declares none (no quantization_config in an hf_config); "
            "set format = \"...\" instead (the quantized weight format: " + kFormatNames + ")" + library());
}

TEST(QuantizedErrors, TheConfigsFormatMustBeOneThePluginReads) {
  const QuantizedConfig hqq(R"({"quant_method": "hqq", "nbits": 4, "group_size": 64})");
  EXPECT_EQ(error_of(scenario(hqq.model(), "")),
            "scenario.toml:6:7: error: in [precision], precision plugin 'quantized', option 'format': is \"auto\", and "
            "the model's quantization_config declares quant_method \"hqq\", which 'quantized' does not read; it "
            "reads mxfp4, fp8 (per tensor, or in blocks with weight_block_size), gptq, awq and bitsandbytes. Set "
            "format to one of " + kFormatNames + library());
  const QuantizedConfig bnb(R"({"quant_method": "bitsandbytes", "load_in_4bit": false})");
  EXPECT_EQ(error_of(scenario(bnb.model(), "")),
            "scenario.toml:6:7: error: in [precision], precision plugin 'quantized', option 'format': is \"auto\", and "
            "the model's quantization_config declares quant_method \"bitsandbytes\" without load_in_4bit or "
            "load_in_8bit; set format yourself" + library());
  const QuantizedConfig mx8(R"({"quant_method": "mxfp4", "bits": 8})");
  EXPECT_EQ(error_of(scenario(mx8.model(), "")),
            "scenario.toml:6:7: error: in [precision], precision plugin 'quantized', option 'format': is \"auto\", and "
            "the model's quantization_config declares quant_method \"mxfp4\" with 8 bits, which 'quantized' reads "
            "with 4 bits only; set format (and group_size) yourself" + library());
  // fp8 is 8 bits: a config that declares other bits is refused, not read as fp8 at 4 bits.
  const QuantizedConfig fp8_4(R"({"quant_method": "fp8", "bits": 4, "weight_block_size": [128, 128]})");
  EXPECT_EQ(error_of(scenario(fp8_4.model(), "")),
            "scenario.toml:6:7: error: in [precision], precision plugin 'quantized', option 'format': is \"auto\", and "
            "the model's quantization_config declares quant_method \"fp8\" with 4 bits, which 'quantized' reads "
            "with 8 bits only; set format (and group_size) yourself" + library());
  EXPECT_EQ(error_of(scenario(kLlama2_7b, "format = \"int4\"\nquantize = \"attention, norms\"\n")),
            "scenario.toml:8:12: error: in [precision], precision plugin 'quantized', option 'quantize': names "
            "\"norms\"; list the parts to quantize from attention, mlp, experts, lm_head, embeddings "
            "(comma-separated)" + library());
}

TEST(QuantizedErrors, OptionsThatDoNotApplyToTheFormat) {
  EXPECT_EQ(error_of(scenario(kLlama2_7b, "format = \"int4\"\ndouble_quant = true\n"), "q.toml"),
            "q.toml:8:16: error: in [precision], precision plugin 'quantized', option 'double_quant': applies to "
            "nf4 only (QLoRA's double quantization of the absmax constants); remove it, set double_quant = false "
            "(where a framework profile sets it: unsloth does) or use format = \"nf4\"" +
                library());
  // double_quant = false states nothing a format fixes: it is how a scenario turns off a profile's double
  // quantization (unsloth sets nf4 with it) to run another format.
  EXPECT_EQ(weights(evaluate_paper(scenario(kLlama2_7b, "format = \"q4_0\"\ndouble_quant = false\n"))),
            weights(evaluate_paper(scenario(kLlama2_7b, "format = \"q4_0\"\n"))));
  EXPECT_NE(error_of(scenario(kLlama2_7b, "format = \"q4_0\"\ndouble_quant = true\n"))
                .find("option 'double_quant': is fixed by the q4_0 block (18 bytes per 32 weights, llama.cpp's "
                      "block_q4_0); remove it (or set double_quant = false where a framework profile sets it"),
            std::string::npos);
  EXPECT_EQ(error_of(scenario(kLlama2_7b, "format = \"nf4\"\nzero_point = true\n"), "q.toml"),
            "q.toml:8:14: error: in [precision], precision plugin 'quantized', option 'zero_point': nf4 is "
            "symmetric: QLoRA scales each block by its absmax and stores no zero point; remove zero_point" +
                library());
  EXPECT_EQ(error_of(scenario(kLlama2_7b, "format = \"nf4\"\ndouble_quant = true\nscale_dtype = \"fp16\"\n"),
                     "q.toml"),
            "q.toml:9:15: error: in [precision], precision plugin 'quantized', option 'scale_dtype': is fixed by "
            "double_quant (8-bit scales with one fp32 constant per 256 of them, as QLoRA); remove scale_dtype or "
            "double_quant" + library());
  EXPECT_EQ(error_of(scenario(kLlama2_7b, "format = \"fp8\"\nscale_dtype = \"fp32\"\n"), "q.toml"),
            "q.toml:8:15: error: in [precision], precision plugin 'quantized', option 'scale_dtype': has no effect "
            "with fp8's one scale per tensor; give group_size too, or remove scale_dtype" + library());
}

TEST(QuantizedErrors, BadValues) {
  EXPECT_EQ(error_of(scenario(kLlama2_7b, "format = \"int4\"\ngroup_size = 0\n"), "q.toml"),
            "q.toml:8:14: error: in [precision], precision plugin 'quantized', option 'group_size': must be a "
            "positive integer, got 0" + library());
  EXPECT_EQ(error_of(scenario(kLlama2_7b, "format = \"int4\"\nscale_dtype = \"int8\"\n"), "q.toml"),
            "q.toml:8:15: error: in [precision], precision plugin 'quantized', option 'scale_dtype': is \"int8\"; "
            "use fp32, fp16, bf16 or fp8" + library());
  EXPECT_EQ(error_of(scenario(kLlama2_7b, "format = \"int4\"\nunquantized = \"fp64\"\n"), "q.toml"),
            "q.toml:8:15: error: in [precision], precision plugin 'quantized', option 'unquantized': is \"fp64\", "
            "not a known dtype; use fp32, fp16, bf16, fp8, int8, int4" + library());
  EXPECT_EQ(error_of(scenario("params = 7e9\n", "format = \"int8\"\n"), "q.toml"),
            "q.toml:7:10: error: in [precision], precision plugin 'quantized', option 'format': \"int8\" keeps one "
            "scale per row of model.hidden elements (LLM.int8()), but the model is known only by its parameter "
            "count; set group_size" + library());
}

TEST(QuantizedErrors, DequantizeCopies) {
  EXPECT_EQ(error_of(scenario(kLlama2_7b, "format = \"nf4\"\ndequantize_copies = -1\n"), "q.toml"),
            "q.toml:8:21: error: in [precision], precision plugin 'quantized', option 'dequantize_copies': must be 0 "
            "to 8 (copies of the largest quantized weight a forward holds dequantized; bitsandbytes' MatMul4Bit: 1 "
            "or 2), got -1" + library());
  EXPECT_EQ(error_of(scenario(kLlama2_7b, "format = \"nf4\"\ndequantize_copies = 9\n"), "q.toml"),
            "q.toml:8:21: error: in [precision], precision plugin 'quantized', option 'dequantize_copies': must be 0 "
            "to 8 (copies of the largest quantized weight a forward holds dequantized; bitsandbytes' MatMul4Bit: 1 "
            "or 2), got 9" + library());
  EXPECT_EQ(error_of(scenario(kLlama2_7b, "format = \"nf4\"\nquantize = \"mlp, head\"\n"), "q.toml"),
            "q.toml:8:12: error: in [precision], precision plugin 'quantized', option 'quantize': names \"head\"; "
            "list the parts to quantize from attention, mlp, experts, lm_head, embeddings (comma-separated)" + library());
  // Training: the megatron activation model counts the dequantized copy there.
  std::string training = scenario(kLlama2_7b, "format = \"nf4\"\ndequantize_copies = 2\n");
  training.replace(training.find("mode = \"infer\""), 14, "mode = \"train\"");
  training += "[optimizer]\nuse = \"sgd\"\n[activations]\nuse = \"none\"\n";
  EXPECT_NE(error_of(training, "q.toml").find("option 'dequantize_copies': models an inference forward (mode = "
                                              "\"infer\"); in training the megatron activation model counts the "
                                              "dequantized copies itself"),
            std::string::npos)
      << error_of(training, "q.toml");
  // Sized before the layout splits the weights: one GPU only.
  EXPECT_NE(error_of(scenario(kLlama2_7b, "format = \"nf4\"\ndequantize_copies = 2\n") +
                         "[hardware]\ngpu = \"a100-sxm-40gb\"\ncount = 2\n",
                     "q.toml")
                .find("option 'dequantize_copies': is sized for one GPU holding the whole model; with 2 GPUs"),
            std::string::npos);
  // A parameter count alone has no largest matrix.
  EXPECT_NE(error_of(scenario("params = 7e9\n", "format = \"nf4\"\ndequantize_copies = 2\n"), "q.toml")
                .find("option 'dequantize_copies': needs the model's architecture"),
            std::string::npos);
}

TEST(GgufBlocks, TheBlockFixesGroupScaleAndZeroPoint) {
  EXPECT_EQ(error_of(scenario(kLlama2_7b, "format = \"q4_k\"\ngroup_size = 32\n"), "q.toml"),
            "q.toml:8:14: error: in [precision], precision plugin 'quantized', option 'group_size': is fixed by the "
            "q4_k block (144 bytes per 256 weights, llama.cpp's block_q4_k); remove it" + library());
  EXPECT_NE(error_of(scenario(kLlama2_7b, "format = \"q8_0\"\nzero_point = true\n"), "q.toml")
                .find("option 'zero_point': is fixed by the q8_0 block (34 bytes per 32 weights"),
            std::string::npos);
}

}  // namespace
}  // namespace memplan::testing
