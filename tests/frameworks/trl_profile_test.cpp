// The trl profile (plugins/frameworks/trl/profile.toml, README.md beside it): TRL's SFTTrainer on the
// Transformers Trainer by TRL version, and the megatron options it sets for the metrics compute_loss computes
// over the returned logits after the loss (megatron 1.34.0: returned_logits_shifted_copies,
// returned_logits_chunk_copies, returned_logits_chunk_rows; docs/formulas.md, "Logits and loss").
#include <gtest/gtest.h>

#include <string>

#include "test_support.hpp"

namespace {

using memplan::testing::error_of;
using memplan::testing::evaluate;
using memplan::testing::Evaluation;

// Llama 3.1 8B (V 128,256), LoRA r 16 on every linear (a frozen head), on an H100.
std::string sft(const std::string& framework, int micro_batch, int seq_len, const std::string& extra = "") {
  return "name = \"t\"\nmode = \"train\"\n[framework]\n" + framework +
         "[model]\npreset = \"llama-3.1-8b\"\n[batch]\nmicro_batch = " + std::to_string(micro_batch) +
         "\nseq_len = " + std::to_string(seq_len) +
         "\n[precision]\nuse = \"bf16\"\nadapters = \"fp32\"\n[optimizer]\nuse = \"adamw\"\n[activations]\n"
         "use = \"megatron\"\n" + extra +
         "[[strategy]]\nuse = \"lora\"\nrank = 16\ntargets = \"all-linear\"\n[hardware]\ngpu = \"h100-sxm-80gb\"\n";
}

std::string trl(const std::string& version) { return "use = \"trl\"\nversion = \"" + version + "\"\n"; }

uint64_t loss_forward(const Evaluation& e) {
  return e.item_bytes("activations.loss_forward", MEMPLAN_ROLE_ACTIVATIONS);
}

uint64_t at(const std::string& version, int micro_batch, int seq_len, const std::string& extra = "") {
  return loss_forward(evaluate(sft(trl(version), micro_batch, seq_len, extra)));
}

// What the loss's forward-end moment holds beyond the loss's saves (activations.loss_forward), by TRL version.
// Logits b x s x 128,256: b 2, s 1,024: 262,668,288; b 1, s 1,024: 131,334,144; b 1, s 512: 65,667,072.
//   0.12-0.14 (transformers 4.46's loss, upcast-in-loss-shift-copy): the 16-bit logits, the fp32 copy and the
//     shifted fp32 copy, 2 + 4 + 4 = 10 bytes a logit: 2,626,682,880 at b 2;
//   0.15 (the accuracy's shifted copy, in the logits' 16 bits without bf16 mixed precision): the logits and
//     the copy, 2 + 2 = 4 < 10: hidden under the loss's own copies, 2,626,682,880;
//   0.18 (transformers >= 4.50: upcast-in-loss, 2 + 4 = 6): the metric's 4 < 6: 1,576,009,728;
//   0.19 (bf16 = True: accelerate's fp32 copy of the returned logits; the 16-bit ones freed): the fp32 logits
//     and their fp32 shifted copy, 4 + 4 = 8: 2,101,346,304 at b 2; at b 1 the slice is contiguous (no copy),
//     and the conversion's 2 + 4 = 6 holds: 788,004,864;
//   0.22 (the entropy one batch row at a time, three tensors of a row's fp32 logits, before the copy): b 1,
//     4 + 3 x 4 = 16: 2,101,346,304; b 2, the larger of 3 / 2 row-copies and the one shifted copy,
//     4 + 1.5 x 4 = 10: 2,626,682,880;
//   0.23 (128 rows at a time): b 1, s 512, 3 x 128 / 512 = 0.75 copies, 4 + 3 = 7: 459,669,504; b 2, s 1,024:
//     the shifted copy (0.1875 < 1), 8: 2,101,346,304;
//   1.3-1.5 (two shifted copies bound at once): 4 + 2 x 4 = 12: 3,152,019,456 at b 2;
//   1.6 (one): 8: 2,101,346,304;
//   1.7 (chunked_nll by default, read as cut: no logits returned): 0.
TEST(TrlProfile, MetricsOverTheReturnedLogitsByVersion) {
  EXPECT_EQ(at("0.14", 2, 1024), 2'626'682'880u);
  EXPECT_EQ(at("0.15", 2, 1024), 2'626'682'880u);
  EXPECT_EQ(at("0.18", 2, 1024), 1'576'009'728u);
  // A 0.18 script with bf16 = True says so: 4 + 4 = 8.
  EXPECT_EQ(at("0.18", 2, 1024, "returned_logits_fp32_copy = true\n"), 2'101'346'304u);
  EXPECT_EQ(at("0.19", 2, 1024), 2'101'346'304u);
  EXPECT_EQ(at("0.19", 1, 1024), 788'004'864u);
  EXPECT_EQ(at("0.22", 1, 1024), 2'101'346'304u);
  EXPECT_EQ(at("0.22", 2, 1024), 2'626'682'880u);
  EXPECT_EQ(at("0.23", 1, 512), 459'669'504u);
  EXPECT_EQ(at("0.23", 2, 1024), 2'101'346'304u);
  EXPECT_EQ(at("1.3", 2, 1024), 3'152'019'456u);
  EXPECT_EQ(at("1.6", 2, 1024), 2'101'346'304u);
  const Evaluation chunked = evaluate(sft(trl("1.7"), 2, 1024));
  EXPECT_EQ(loss_forward(chunked), 0u);
  EXPECT_EQ(chunked.item_bytes("activations.logits", MEMPLAN_ROLE_ACTIVATIONS), 0u);
  // use_liger_kernel = True (docs/frameworks.md, the Liger row: cross_entropy "cut"): no logits, no metrics.
  EXPECT_EQ(at("1.6", 2, 1024, "cross_entropy = \"cut\"\n"), 0u);
  // A scenario turns a metric off: 1.6 at b 2 without the copy is the conversion's 6: 1,576,009,728.
  EXPECT_EQ(at("1.6", 2, 1024, "returned_logits_shifted_copies = 0\n"), 1'576'009'728u);
}

// A run known by its day gets the release of that day: 2025-09-05 is 0.22 (released 2025-08-29), 2025-09-12
// is 0.23 (2025-09-10). At b 1, s 1,024: 0.22's whole-row entropy, 16 bytes a logit, 2,101,346,304; 0.23's
// 128-row chunks, 3 x 128 / 1,024 = 0.375 copies (4 + 1.5 < the conversion's 6): 788,004,864.
TEST(TrlProfile, ARunsDayPicksItsRelease) {
  EXPECT_EQ(loss_forward(evaluate(sft("use = \"trl\"\ndate = 2025-09-05\n", 1, 1024))), 2'101'346'304u);
  EXPECT_EQ(loss_forward(evaluate(sft("use = \"sfttrainer\"\ndate = 2025-09-12\n", 1, 1024))), 788'004'864u);
}

// The megatron options themselves, under the paper profile (no framework defaults). Logits b 2 x s 1,024 x
// 128,256 = 262,668,288:
//   upcast-in-loss (2 + 4 = 6 at the forward's end), the fp32 copy and two shifted copies: 4 + 2 x 4 = 12,
//     3,152,019,456;
//   unfused (the loss keeps the returned fp32 logits themselves, counted as its saves) and one shifted copy:
//     the copy alone, 4: 1,050,673,152;
//   chunks of 100 rows, 5 at once, in the 16-bit logits without the fp32 copy: 2 + 5 x 2 x 100 / 2,048 = 2.488...;
//     under upcast-in-loss's 6: unchanged, 1,576,009,728; under compiled (nothing at the forward's end) the
//     16-bit logits are the graph's saved input, counted as its saves: 5 x 2 x 100 x 128,256 = 128,256,000;
//   one batch row (rows 0) at b 4, s 512, 3 tensors, under compiled: 3 x 2 x 512 x 128,256 = 394,002,432.
TEST(TrlProfile, TheLoopsMetricCopiesAsOptions) {
  const auto plain = [](int micro_batch, int seq_len, const std::string& extra) {
    return loss_forward(memplan::testing::evaluate_paper(
        "name = \"p\"\nmode = \"train\"\n[model]\npreset = \"llama-3.1-8b\"\n[batch]\nmicro_batch = " +
        std::to_string(micro_batch) + "\nseq_len = " + std::to_string(seq_len) +
        "\n[precision]\nuse = \"bf16\"\n[optimizer]\nuse = \"adamw\"\n[activations]\nuse = \"megatron\"\n"
        "flash_attention = true\n" + extra));
  };
  EXPECT_EQ(plain(2, 1024,
                  "cross_entropy = \"upcast-in-loss\"\nreturned_logits_fp32_copy = true\n"
                  "returned_logits_shifted_copies = 2\n"),
            3'152'019'456u);
  EXPECT_EQ(plain(2, 1024, "cross_entropy = \"unfused\"\nreturned_logits_shifted_copies = 1\n"), 1'050'673'152u);
  EXPECT_EQ(plain(2, 1024,
                  "cross_entropy = \"upcast-in-loss\"\nreturned_logits_chunk_copies = 5\n"
                  "returned_logits_chunk_rows = 100\n"),
            1'576'009'728u);
  EXPECT_EQ(plain(2, 1024,
                  "cross_entropy = \"compiled\"\nreturned_logits_chunk_copies = 5\n"
                  "returned_logits_chunk_rows = 100\n"),
            128'256'000u);
  EXPECT_EQ(plain(4, 512, "cross_entropy = \"compiled\"\nreturned_logits_chunk_copies = 3\n"), 394'002'432u);
  EXPECT_EQ(plain(2, 1024, "cross_entropy = \"cut\"\nreturned_logits_shifted_copies = 1\n"), 0u);

  const std::string negative = memplan::testing::paper(
      "name = \"p\"\nmode = \"train\"\n[model]\npreset = \"llama-3.1-8b\"\n[precision]\nuse = \"bf16\"\n"
      "[optimizer]\nuse = \"adamw\"\n[activations]\nuse = \"megatron\"\nreturned_logits_chunk_copies = -1\n");
  const std::string error = error_of(negative, "p.toml");
  EXPECT_NE(error.find("p.toml:"), std::string::npos) << error;
  EXPECT_NE(error.find("option 'returned_logits_chunk_copies': must be 0 or a positive count, got -1"),
            std::string::npos)
      << error;
}

// A k-bit model with a PEFT config: up to 0.25 prepare_model_for_kbit_training and get_peft_model leave fp32
// adapters (and AdamW's states with them); from 0.26 every trainable parameter is cast to bf16. LoRA r 16 on
// every linear of Llama 3.1 8B: per layer 16 x ((4,096 + 4,096) x 2 + (4,096 + 1,024) x 2 + (4,096 + 14,336) x 3)
// = 1,310,720 parameters, x 32 layers = 41,943,040; AdamW's two states: 8 bytes a parameter in fp32
// (335,544,320), 4 in bf16 (167,772,160); the gradients 4 and 2 bytes (167,772,160 and 83,886,080).
TEST(TrlProfile, KbitAdaptersByVersion) {
  const auto qlora = [](const std::string& version) {
    return evaluate("name = \"q\"\nmode = \"train\"\n[framework]\nuse = \"trl\"\nversion = \"" + version +
                    "\"\n[model]\npreset = \"llama-3.1-8b\"\n[batch]\nseq_len = 1024\n[precision]\nuse = "
                    "\"quantized\"\nformat = \"nf4\"\n[optimizer]\nuse = \"adamw\"\n[activations]\nuse = "
                    "\"megatron\"\n[[strategy]]\nuse = \"lora\"\nrank = 16\ntargets = \"all-linear\"\n"
                    "[hardware]\ngpu = \"h100-sxm-80gb\"\n");
  };
  const Evaluation v25 = qlora("0.25"), v26 = qlora("0.26");
  EXPECT_EQ(v25.component(MEMPLAN_ROLE_OPTIMIZER_STATES), 335'544'320u);
  EXPECT_EQ(v26.component(MEMPLAN_ROLE_OPTIMIZER_STATES), 167'772'160u);
  EXPECT_EQ(v25.component(MEMPLAN_ROLE_GRADIENTS), 167'772'160u);
  EXPECT_EQ(v26.component(MEMPLAN_ROLE_GRADIENTS), 83'886'080u);
}

// Sharded QLoRA (the profile's with_strategy = ["fsdp"] block): TRL skips prepare_model_for_kbit_training when
// the 4-bit parameters are on the CPU or meta device, as under FSDP (sft_trainer.py @ v0.13.0 180-205), so the
// unquantized weights stay bf16 instead of fp32. Llama 3.1 8B's token embedding, 128,256 x 4,096 =
// 525,336,576 parameters: 2,101,346,304 bytes in fp32, 1,050,673,152 in bf16, before FSDP's 2-way shard: a rank
// holds 1,050,673,152 and 525,336,576.
TEST(TrlProfile, ShardedQloraKeepsTheLoadedDtype) {
  const auto qlora = [](const std::string& strategies, const std::string& precision = "") {
    return evaluate("name = \"q\"\nmode = \"train\"\n[framework]\nuse = \"trl\"\nversion = \"0.13\"\n[model]\n"
                    "preset = \"llama-3.1-8b\"\n[batch]\nseq_len = 1024\n[precision]\nuse = \"quantized\"\n"
                    "format = \"nf4\"\n" + precision + "[optimizer]\nuse = \"adamw\"\n[activations]\nuse = \"megatron\"\n"
                    "[[strategy]]\nuse = \"lora\"\nrank = 16\ntargets = \"all-linear\"\n" + strategies +
                    "[hardware]\ngpu = \"h100-sxm-80gb\"\ncount = 2\n");
  };
  const std::string ddp = "[[strategy]]\nuse = \"data-parallel\"\nsize = 2\n";
  const std::string fsdp = ddp + "[[strategy]]\nuse = \"fsdp\"\n";
  EXPECT_EQ(qlora(ddp).item_bytes("embed_tokens", MEMPLAN_ROLE_WEIGHTS), 2'101'346'304u);
  EXPECT_EQ(qlora(fsdp).item_bytes("embed_tokens", MEMPLAN_ROLE_WEIGHTS), 1'050'673'152u / 2);
  // The scenario's own value wins over the block, as over any profile default.
  EXPECT_EQ(qlora(fsdp, "unquantized = \"fp32\"\n").item_bytes("embed_tokens", MEMPLAN_ROLE_WEIGHTS),
            2'101'346'304u / 2);
}

// From 0.27 SFTConfig passes use_reentrant = False on transformers 4.x: the recomputed layer's high point of
// Llama-3.2-3B with PEFT's fp32 LoRA r 16 on every linear, without autocast, is up's adapter (45,056 bytes a
// token) non-reentrant and down's (59,392) reentrant (Profiles.VersionPicksTheCheckpointVariant): 14,336 x
// 2,048 tokens apart between 0.26 and 0.27.
TEST(TrlProfile, NonReentrantCheckpointingFrom027) {
  const auto recompute = [](const std::string& version, const std::string& extra) {
    const Evaluation e = evaluate(
        "name = \"c\"\nmode = \"train\"\n[framework]\nuse = \"trl\"\nversion = \"" + version +
        "\"\n[model]\npreset = \"llama-3.2-3b\"\n[batch]\nseq_len = 2048\n[precision]\nuse = \"bf16\"\nadapters = "
        "\"fp32\"\n[optimizer]\nuse = \"adamw\"\n[activations]\nuse = \"megatron\"\nautocast = false\n[[strategy]]\n"
        "use = \"lora\"\nrank = 16\nalpha = 32\ntargets = \"all-linear\"\n[[strategy]]\nuse = \"recompute\"\n"
        "policy = \"full\"\n" + extra);
    return e.item_bytes("activations.recompute", MEMPLAN_ROLE_ACTIVATIONS);
  };
  EXPECT_EQ(recompute("0.26", "") - recompute("0.27", ""), (59'392u - 45'056u) * 2048u);
  EXPECT_EQ(recompute("0.27", "reentrant = true\n"), recompute("0.26", ""));
}

// The name: "trl" is the profile now (no longer a built_on_it name of hf-transformers), with its aliases.
TEST(TrlProfile, NamesAndBase) {
  const Evaluation e = evaluate(sft("use = \"SFTTrainer\"\nversion = \"0.24\"\n", 1, 1024));
  EXPECT_EQ(e.scenario().framework.name, "trl");
}

}  // namespace
