// cross_entropy = "chunked-fused": the LM head and the loss chunk by chunk inside the forward, the head
// input's gradient computed there (unslothai/unsloth-zoo unsloth_zoo/fused_losses/cross_entropy_loss.py,
// UnslothFusedLoss and get_chunk_size; docs/formulas.md, "Logits and loss"), and the unsloth profile's
// versions of it (plugins/frameworks/unsloth/README.md, "The loss by version").
#include <gtest/gtest.h>

#include <string>

#include "../../plugins/activations/megatron/fused_loss_chunks.hpp"
#include "test_support.hpp"

namespace {

using memplan::plugins::ChunkRounding;
using memplan::plugins::fused_loss_chunks;
using memplan::plugins::FusedLossChunking;
using memplan::testing::evaluate;
using memplan::testing::Evaluation;

constexpr double kGiB = 1073741824.0;

// get_chunk_size by hand, F the fp32 logits in GiB (rows x V x 4 / 2^30), T the target:
//   nearest, T 1 (unsloth 2025.8.5 to 2025.9.1 pass target_gb = 1):
//     Llama 3.1 (V 128,256), 4,096 rows: F = 1.957; round(0.489) = 0 -> max(0, 1) = 1 chunk;
//     8,192 rows: F = 3.914; round(0.978) = 1 -> 4 chunks;
//     Qwen3 (V 151,936), 4,096 rows: F = 2.318; round(0.580) = 1 -> 4 chunks;
//     F exactly 2 (rows x V = 2^29): round(0.5) = 0 (Python rounds halves to even) -> 1 chunk;
//     F exactly 6 (3 x 2^29): round(1.5) = 2 -> 8 chunks;
//   up, T 4 (zoo from 2026.7.1): 8,192 Llama rows: F = 3.914 <= 4 -> 1 chunk; 16,384 rows: F = 7.83,
//     ceil(0.489) = 1 -> 4 chunks; F exactly 4 -> 1 chunk;
//   a share of the GPU's memory as the target: 0.5 of 80 GiB = 40, so 16,384 Llama rows (F 7.83) are
//     one chunk under "nearest" (round(0.049) = 0) and four under "up" with the 4 GiB cap (the smaller
//     target holds);
//   torch.chunk cuts 10 rows into 4 pieces of ceil(10 / 4) = 3 rows: the largest chunk is 3 of 10 rows,
//     a ratio of 10 / 3.
TEST(FusedLossChunks, UnslothZoosRule) {
  const FusedLossChunking one_gib{0, 1, 0, ChunkRounding::nearest};
  EXPECT_EQ(fused_loss_chunks(one_gib, 4096, 128'256, 0), 1);
  EXPECT_EQ(fused_loss_chunks(one_gib, 8192, 128'256, 0), 4);
  EXPECT_EQ(fused_loss_chunks(one_gib, 4096, 151'936, 0), 4);
  EXPECT_EQ(fused_loss_chunks(one_gib, 1 << 20, 512, 0), 1);      // F = 2: a half rounds to even, 0
  EXPECT_EQ(fused_loss_chunks(one_gib, 3 << 20, 512, 0), 8);      // F = 6: round(1.5) = 2

  const FusedLossChunking capped{0, 4, 0.5, ChunkRounding::up};
  EXPECT_EQ(fused_loss_chunks(capped, 8192, 128'256, 80 * kGiB), 1);
  EXPECT_EQ(fused_loss_chunks(capped, 16'384, 128'256, 80 * kGiB), 4);
  EXPECT_EQ(fused_loss_chunks(capped, 2 << 20, 512, 80 * kGiB), 1);  // F = 4 = T: one chunk

  // A GPU of 6 GiB: half of it (3 GiB) is below the cap and holds: 8,192 Llama rows (F 3.914 > 3) in
  // ceil(3.914 / 3 / 4) x 4 = 4 chunks, against 1 on an 80 GiB GPU (above).
  EXPECT_EQ(fused_loss_chunks(capped, 8192, 128'256, 6 * kGiB), 4);

  const FusedLossChunking half_free{0, 0, 0.5, ChunkRounding::nearest};
  EXPECT_EQ(fused_loss_chunks(half_free, 16'384, 128'256, 80 * kGiB), 1);
  EXPECT_EQ(fused_loss_chunks(capped, 16'384, 128'256, 0), 4);  // no GPU named: the cap alone

  const FusedLossChunking fixed{4, 0, 0, ChunkRounding::up};  // UNSLOTH_CE_LOSS_N_CHUNKS = 4
  EXPECT_DOUBLE_EQ(fused_loss_chunks(fixed, 10, 128'256, 0), 10.0 / 3);
  EXPECT_EQ(fused_loss_chunks(fixed, 2, 128'256, 0), 2);  // never more pieces than rows
}

std::string unsloth(const std::string& version, int micro_batch, const std::string& extra = "",
                    int seq_len = 4096, const std::string& gpu = "h100-sxm-80gb") {
  return "name = \"u\"\nmode = \"train\"\n[framework]\nuse = \"unsloth\"\n" + version +
         "[model]\npreset = \"llama-3.1-8b\"\n[batch]\nmicro_batch = " + std::to_string(micro_batch) +
         "\nseq_len = " + std::to_string(seq_len) +
         "\n[precision]\nuse = \"quantized\"\nunquantized = \"bf16\"\nadapters = \"fp32\"\n"
         "[optimizer]\nuse = \"adam-8bit\"\n[activations]\nuse = \"megatron\"\n" + extra +
         "[[strategy]]\nuse = \"lora\"\nrank = 16\ntargets = \"all-linear\"\n[hardware]\ngpu = \"" + gpu + "\"\n";
}

uint64_t loss_forward(const Evaluation& e) {
  return e.item_bytes("activations.loss_forward", MEMPLAN_ROLE_ACTIVATIONS);
}

// One chunk's 16-bit logits and 16-bit gradient (2 x 2 bytes a logit) at the forward's end, with the head's
// 16-bit input beside the gradient buffer (2 x 4,096 = 8,192 bytes a row), nothing of the logits' size kept;
// the head's frozen input is kept as "cut" keeps it (the gradient buffer of its size). Llama 3.1 8B,
// V 128,256, rows = micro-batch x 4,096:
//   2025.8.4 (Cut Cross-Entropy): 0;
//   2025.8.5 (T 1, nearest): 4,096 rows, one chunk: 4 x 4,096 x 128,256 = 2,101,346,304 B + 33,554,432;
//     8,192 rows, four chunks of 2,048: 4 x 2,048 x 128,256 = 1,050,673,152 B + 67,108,864;
//   2025.9.2 (half the H100's memory, nearest): 8,192 rows in one chunk: 4,202,692,608 B + 67,108,864;
//     on a T4 (14.56 GiB as CUDA reports it: T = 7.28), 65,536 rows (F 31.31): round(1.075) x 4 = 4 chunks
//     of 16,384: 4 x 16,384 x 128,256 = 8,405,385,216 B + 536,870,912;
//   2026.7.1 and the latest (T 4, up): 8,192 rows (F 3.914) one chunk, 4,202,692,608 B + 67,108,864;
//     16,384 (F 7.83) four chunks of 4,096: 2,101,346,304 B + 134,217,728.
TEST(FusedLoss, TheUnslothProfileByVersion) {
  EXPECT_EQ(loss_forward(evaluate(unsloth("version = \"2025.8.4\"\n", 1))), 0u);
  EXPECT_EQ(loss_forward(evaluate(unsloth("version = \"2025.8.5\"\n", 1))), 2'101'346'304u + 33'554'432u);
  EXPECT_EQ(loss_forward(evaluate(unsloth("version = \"2025.8.5\"\n", 2))), 1'050'673'152u + 67'108'864u);
  EXPECT_EQ(loss_forward(evaluate(unsloth("version = \"2025.9.2\"\n", 2))), 4'202'692'608u + 67'108'864u);
  EXPECT_EQ(loss_forward(evaluate(unsloth("version = \"2025.9.2\"\n", 1, "", 65'536, "t4-16gb"))),
            8'405'385'216u + 536'870'912u);
  EXPECT_EQ(loss_forward(evaluate(unsloth("version = \"2026.7.1\"\n", 2))), 4'202'692'608u + 67'108'864u);
  EXPECT_EQ(loss_forward(evaluate(unsloth("", 4))), 2'101'346'304u + 134'217'728u);

  const Evaluation fused = evaluate(unsloth("", 1)), cut = evaluate(unsloth("version = \"2025.8.4\"\n", 1));
  for (const char* item : {"activations.logits", "activations.cross_entropy", "activations.loss_backward"})
    EXPECT_EQ(fused.item_bytes(item, MEMPLAN_ROLE_ACTIVATIONS), 0u) << item;
  EXPECT_EQ(fused.item_bytes("activations.final_norm", MEMPLAN_ROLE_ACTIVATIONS),
            cut.item_bytes("activations.final_norm", MEMPLAN_ROLE_ACTIVATIONS));

  // UNSLOTH_CE_LOSS_N_CHUNKS = 8: 4 x 4,096 rows in pieces of 2,048: 4 x 2,048 x 128,256.
  EXPECT_EQ(loss_forward(evaluate(unsloth("", 4, "loss_chunks = 8\n"))), 1'050'673'152u + 134'217'728u);
  EXPECT_EQ(memplan::testing::report_detail(evaluate(unsloth("", 4, "loss_chunks = 8\n")), "loss_chunks"), "8");
  // The chunk computed eagerly (UNSLOTH_FUSED_CE_COMPILE_DISABLE=1): p + 16 = 18 bytes a chunk element, the
  // figure unsloth-zoo issue #946 measured (18.00-18.02); 2 x 4,096 rows in one chunk under the 4 GiB cap:
  // 18 x 8,192 x 128,256 = 18,912,116,736 B, with the head's input.
  EXPECT_EQ(loss_forward(evaluate(unsloth("", 2, "cross_entropy = \"chunked-fused-eager\"\n"))),
            18'912'116'736u + 67'108'864u);
  // A scenario that names another loss composes with the profile's chunk options, which then size nothing.
  EXPECT_EQ(loss_forward(evaluate(unsloth("", 4, "cross_entropy = \"cut\"\n"))), 0u);
}

// A trained head (full fine-tuning under the profile, bf16): grad_lm_head = zeros_like(lm_head_weight) made in
// the forward and kept for backward, and one chunk's own head gradient before it is added in: twice the head's
// bf16 gradient, 2 x 128,256 x 4,096 x 2 = 2,101,346,304 B, beside the chunk (4,096 rows, one chunk under the
// 4 GiB cap: 2,101,346,304 B) and the head's input (33,554,432 B).
TEST(FusedLoss, ATrainedHeadsGradientInTheForward) {
  const Evaluation e = evaluate(
      "name = \"u\"\nmode = \"train\"\n[framework]\nuse = \"unsloth\"\n[model]\npreset = \"llama-3.1-8b\"\n"
      "[batch]\nseq_len = 4096\n[precision]\nuse = \"bf16\"\n[optimizer]\nuse = \"adamw\"\n[activations]\n"
      "use = \"megatron\"\n[hardware]\ngpu = \"h100-sxm-80gb\"\n");
  EXPECT_EQ(loss_forward(e), 2'101'346'304u + 33'554'432u + 2'101'346'304u);
}

// Unsloth's other loss paths by version (plugins/frameworks/unsloth/README.md, "The loss by version"): up to
// 2024.11.7 the Triton fast_cross_entropy_loss over the LM head's 16-bit logits, kept and overwritten by their
// gradient (cross_entropy "in-place": 2 bytes a logit, nothing more in either pass); from 2024.11.8 Cut
// Cross-Entropy at every size; from 2024.12.5 micro-batches of at most 1,024 tokens back on the Triton loss
// (short_batch_tokens); from 2025.10.8 those take the fused loss too. Llama 3.1 8B, V 128,256, LoRA (a frozen
// head): 2,048 tokens keep 2 x 2,048 x 128,256 = 525,336,576 B of logits, 1,024 tokens 262,668,288 B; Cut
// Cross-Entropy keeps none but the head's 16-bit input (2 x 4,096 bytes a token, with the final norm's); the
// fused loss puts one chunk at 1,024 tokens, 4 x 1,024 x 128,256 = 525,336,576 B, and the head's input,
// 8,388,608 B, at the forward's end.
TEST(FusedLoss, ShortMicroBatchesAndTheTritonLoss) {
  const auto logits = [](const Evaluation& e) { return e.item_bytes("activations.logits", MEMPLAN_ROLE_ACTIVATIONS); };
  const auto norm = [](const Evaluation& e) { return e.item_bytes("activations.final_norm", MEMPLAN_ROLE_ACTIVATIONS); };
  const auto at = [](const std::string& version, int micro_batch, int seq_len, const std::string& extra = "") {
    return evaluate(unsloth("version = \"" + version + "\"\n", micro_batch, extra, seq_len));
  };
  const Evaluation triton = at("2024.11.7", 1, 2048);
  EXPECT_EQ(logits(triton), 525'336'576u);
  // The logits the model returns get accelerate's fp32 copy as the forward returns (convert_outputs_to_fp32 under
  // the Trainer's mixed precision; the profile's returned_logits_fp32_copy, megatron 1.32.0): 4 x 2,048 x 128,256 =
  // 1,050,673,152 B at the forward's end; none where the loop applies no such wrapper.
  EXPECT_EQ(loss_forward(triton), 1'050'673'152u);
  EXPECT_EQ(loss_forward(at("2024.11.7", 1, 2048, "returned_logits_fp32_copy = false\n")), 0u);
  // Its gradient is written over the kept logits: the loss's moment in backward holds them alone, 2 bytes a
  // logit less than "compiled", which writes a 16-bit gradient beside them.
  const auto backward = [](const Evaluation& e) {
    return e.item_bytes("activations.loss_backward", MEMPLAN_ROLE_ACTIVATIONS);
  };
  EXPECT_EQ(backward(at("2024.11.7", 1, 2048, "cross_entropy = \"compiled\"\n")), backward(triton) + 525'336'576u);

  // Cut Cross-Entropy at 1,024 tokens from 2024.11.8 to 2024.12.4: no logits, the head's input kept.
  const Evaluation cut = at("2024.11.8", 1, 1024), short_triton = at("2024.12.5", 1, 1024);
  EXPECT_EQ(logits(cut), 0u);
  EXPECT_EQ(norm(cut), norm(short_triton) + 1024ull * 8'192);
  EXPECT_EQ(logits(short_triton), 262'668'288u);
  EXPECT_EQ(logits(at("2025.1.5", 2, 512)), 262'668'288u);
  EXPECT_EQ(logits(at("2025.1.5", 1, 1025)), 0u);
  EXPECT_EQ(norm(at("2025.1.5", 1, 1025)), norm(at("2024.11.8", 1, 1025)));
  EXPECT_EQ(logits(at("2025.10.7", 1, 1024)), 262'668'288u);
  // A scenario turns the short path off.
  const Evaluation off = at("2025.1.5", 1, 1024, "short_batch_tokens = 0\n");
  EXPECT_EQ(logits(off), 0u);
  EXPECT_EQ(norm(off), norm(cut));

  const Evaluation fused = at("2025.10.8", 1, 1024);
  EXPECT_EQ(logits(fused), 0u);
  EXPECT_EQ(loss_forward(fused), 525'336'576u + 8'388'608u);
}

TEST(FusedLoss, OptionErrors) {
  const auto error = [](const std::string& extra) {
    return memplan::testing::error_of(unsloth("", 1, extra), "u.toml");
  };
  EXPECT_NE(error("loss_chunk_target_gib = -1\n").find("option 'loss_chunk_target_gib': must be a size in GiB"),
            std::string::npos);
  EXPECT_NE(error("loss_chunk_target_gib = nan\n").find("'loss_chunk_target_gib' must be a finite number"),
            std::string::npos);  // the host refuses it before the plugin reads it
  EXPECT_NE(error("loss_chunk_free_share = 1.5\n").find("option 'loss_chunk_free_share': must be a share"),
            std::string::npos);
  EXPECT_NE(error("short_batch_tokens = -1\n").find("option 'short_batch_tokens': must be 0 (no short path)"),
            std::string::npos);
  EXPECT_NE(error("short_batch_cross_entropy = \"triton\"\n")
                .find("option 'short_batch_cross_entropy': must be one of \"unfused\""),
            std::string::npos);
  const std::string plain = "name = \"p\"\nmode = \"train\"\n[model]\npreset = \"llama-3.1-8b\"\n[batch]\n"
                            "seq_len = 1024\n[precision]\nuse = \"bf16\"\n[optimizer]\nuse = \"adamw\"\n"
                            "[activations]\nuse = \"megatron\"\nshort_batch_cross_entropy = \"in-place\"\n";
  EXPECT_NE(memplan::testing::error_of(plain, "p.toml")
                .find("option 'short_batch_cross_entropy': needs short_batch_tokens"),
            std::string::npos);
  EXPECT_NE(error("loss_chunk_rounding = \"down\"\n")
                .find("option 'loss_chunk_rounding': must be \"nearest\" or \"up\", not \"down\""),
            std::string::npos);
}

}  // namespace
