// The 'megatron' activation model outside the transformer layers: the
// embedding dropout's mask on the stage holding the embedding; the final
// norm's input and output, the fp32 logits and the loss's saved softmax on the
// stage holding the LM head. Korthikanti et al. 2022 (arXiv 2205.05198),
// section 4.3, count sbhp/t for the embedding dropout (p stages' micro-batches
// on the first stage) and 4sbh/t (1 + v/h) for the output layer with sequence
// parallelism: the final norm's input and output (2 bytes each) and the fp32
// logits of Megatron-LM's vocab-parallel cross entropy, which computes the
// softmax in place.
#include <gtest/gtest.h>

#include <string>
#include <string_view>

#include "test_support.hpp"

namespace memplan::testing {
namespace {

constexpr int32_t kAct = MEMPLAN_ROLE_ACTIVATIONS;

// Bytes of the activation items with `lifetime` (MEMPLAN_LIFETIME_*), those named `name` or all when empty.
uint64_t activation_bytes(const Evaluation& e, int32_t lifetime, std::string_view name = "") {
  uint64_t bytes = 0;
  for (const PlanItem& item : e.estimator().plan().items)
    if (item.role == kAct && item.lifetime == lifetime && (name.empty() || item.name_view() == name))
      bytes += item.bytes();
  return bytes;
}

// GPT-3 175B (h 12288, v 51200, 96 layers) at s 2048, b 1, fp16, dropout on,
// tensor parallel 8 with sequence parallelism.
std::string gpt3(const std::string& extra_activations, const std::string& pipeline = "", int grad_accum = 1) {
  return "name = \"gpt3\"\nmode = \"train\"\n[model]\npreset = \"gpt3-175b\"\n[batch]\nmicro_batch = 1\n"
         "seq_len = 2048\ngrad_accum = " + std::to_string(grad_accum) +
         "\n[precision]\nuse = \"mixed-fp16\"\n[optimizer]\nuse = \"adam\"\n[activations]\nuse = \"megatron\"\n" +
         extra_activations + "[[strategy]]\nuse = \"tensor-parallel\"\nsize = 8\nsequence_parallel = true\n" + pipeline;
}

// sbh/t = 2048 x 12288 / 8 = 3,145,728; 4sbh/t = 12,582,912; 4sbv/t = 4 x 2048 x 51200 / 8 = 52,428,800.
TEST(MegatronOutsideLayers, KorthikantiSection43WithVocabParallelCrossEntropy) {
  Evaluation e = evaluate_paper(gpt3("cross_entropy = \"vocab-parallel\"\n"));
  EXPECT_EQ(e.item_bytes("activations.embedding_dropout", kAct), 3'145'728u);
  EXPECT_EQ(e.item_bytes("activations.final_norm", kAct), 12'582'912u);
  EXPECT_EQ(e.item_bytes("activations.logits", kAct), 52'428'800u);
  EXPECT_EQ(e.item_bytes("activations.cross_entropy", kAct), 0u);  // computed in place in the logits
  // The paper's output-layer total 4sbh/t (1 + v/h) = 12,582,912 + 52,428,800.
  EXPECT_EQ(e.item_bytes("activations.final_norm", kAct) + e.item_bytes("activations.logits", kAct), 65'011'712u);
  // The per-layer item is Table 2's "tensor + sequence parallel" row, unchanged: 358,612,992 x 96.
  EXPECT_EQ(e.item_bytes("layers.0-95.activations", kAct), uint64_t{96} * 358'612'992u);
}

// By default the loss keeps its own fp32 softmax next to the fp32 logits.
TEST(MegatronOutsideLayers, UnfusedCrossEntropyKeepsASecondFp32Copy) {
  Evaluation e = evaluate_paper(gpt3(""));
  EXPECT_EQ(e.item_bytes("activations.logits", kAct), 52'428'800u);
  EXPECT_EQ(e.item_bytes("activations.cross_entropy", kAct), 52'428'800u);
}

// Llama 3.1 8B (h 4096, v 128256, 32 layers, GQA 8 kv heads, SwiGLU 14336) at
// s 8192, b 1, bf16, no dropout, FlashAttention, one GPU.
std::string llama3_8b(const std::string& batch, const std::string& activations, const std::string& strategies = "") {
  return "name = \"llama3\"\nmode = \"train\"\n[model]\npreset = \"llama-3.1-8b\"\n[batch]\n" + batch +
         "[precision]\nuse = \"mixed-bf16\"\n[optimizer]\nuse = \"adamw\"\n[activations]\nuse = \"megatron\"\n"
         "flash_attention = true\n" + activations + strategies;
}
const std::string kOneSequence = "micro_batch = 1\nseq_len = 8192\n";

// A 128k vocabulary at sequence 8192 is gigabytes:
//   logits 4 x 8192 x 128256 = 4,202,692,608 bytes (3.91 GiB), the softmax as much again;
//   final norm input and output 2 x 2 x 8192 x 4096 = 134,217,728.
// Per layer, in bytes per token: norms 4 x 2 x 4096 = 32,768; Q and attention
// output 2 x 2 x 4096 = 16,384; K and V 2 x 2 x 1024 = 4,096; SwiGLU
// 3 x 2 x 14336 = 86,016; log-sum-exp 4 x 32 = 128: 139,392 x 8192 =
// 1,141,899,264 per layer, 36,540,776,448 for 32 layers. The vocabulary adds
// 23% to the layers' activations at the forward's end.
// The logits and the softmax are this (only) micro-batch's: autograd frees them
// once the loss and the LM head have run, before any layer's backward, so they
// are transients of the forward's end (lifetime forward_end), and backward's start holds them again as the loss's
// moment (lifetime backward_start): 2 x 4,202,692,608 = 8,405,385,216, less the
// head's weight gradient 2 x 4096 x 128256 = 1,050,673,152 (the loss's fp32
// tensors are freed before it is allocated; floor: the head's input gradient
// 2 x 8192 x 128256 = 2,101,346,304, smaller) = 7,354,712,064. The component
// sums every activation item: 36,540,776,448 + 134,217,728 + 8,405,385,216 + 7,354,712,064.
// Megatron-LM's vocab_parallel_cross_entropy before core_r0.8.0 subtracted the max out of place
// (megatron/core/tensor_parallel/cross_entropy.py:24 @ core_r0.7.0, 55817ec9 to 9634c0e4): a second fp32 copy
// beside output.float() at the loss's forward high point, 4 bytes more per logit; in place from 9634c0e4
// (tag core_r0.8.0, 2024-08-12). GPT-345M's 1 x 1024 tokens x 50,304 = 51,511,296 logit elements, fp16:
//   "vocab-parallel":      the forward's transient, the 16-bit logits beside the fp32 copy, 2 x 51,511,296 = 103,022,592
//   "vocab-parallel-copy": 6 x 51,511,296 = 309,067,776
// The megatron-lm profile gives the run's date its loss: 2023-07-16 the copy, a day from 2024-08-12 on (and no
// date or version: the latest) the in-place one.
TEST(MegatronOutsideLayers, VocabParallelLossBeforeCoreR08CopiesTheLogits) {
  auto loss_forward = [](const std::string& framework, const std::string& loss) {
    const std::string text = "name = \"g\"\nmode = \"train\"\n" + framework +
                             "[model]\nlayers = 24\nhidden = 1024\nheads = 16\nffn_hidden = 4096\nvocab = 50304\n"
                             "mlp = \"gelu\"\nnorm = \"layernorm\"\nposition_embeddings = 1024\ntied_embeddings = true\n"
                             "[batch]\nseq_len = 1024\n[precision]\nuse = \"mixed-fp16\"\n[optimizer]\nuse = \"adam\"\n"
                             "[activations]\nuse = \"megatron\"\n" + loss;
    return (framework.empty() ? evaluate_paper(text) : evaluate(text))
        .item_bytes("activations.loss_forward", MEMPLAN_ROLE_ACTIVATIONS);
  };
  EXPECT_EQ(loss_forward("", "cross_entropy = \"vocab-parallel\"\n"), 103'022'592u);
  EXPECT_EQ(loss_forward("", "cross_entropy = \"vocab-parallel-copy\"\n"), 309'067'776u);
  EXPECT_EQ(loss_forward("[framework]\nuse = \"megatron-lm\"\ndate = 2023-07-16\n", ""), 309'067'776u);
  EXPECT_EQ(loss_forward("[framework]\nuse = \"megatron-lm\"\ndate = 2024-08-12\n", ""), 103'022'592u);
  EXPECT_EQ(loss_forward("[framework]\nuse = \"megatron-lm\"\n", ""), 103'022'592u);
}

// Megatron-Core's --cross-entropy-loss-fusion (megatron/core/fusions/fused_cross_entropy.py @ d98e8a64, its
// helpers under torch.compile through jit_fuser): the compiled helpers' in-place updates of the fp32 logits are
// written into a new buffer and copied back, one more fp32 tensor of the logits' size in each pass
// (docs/formulas.md, "Logits and loss"). GPT-345M's 51,511,296 logit elements, fp16:
//   forward (activations.loss_forward, beside the kept fp32 copy): the 16-bit logits and the new buffer,
//     (2 + 4) x 51,511,296 = 309,067,776 (the eager "vocab-parallel" loss: 2 x 51,511,296 = 103,022,592)
//   backward (activations.loss_backward, the high point's whole at backward's start: the saved softmax, the new
//     buffer and the 16-bit gradient): (4 + 4 + 2) x 51,511,296 = 515,112,960 (eager: 6 x 51,511,296 =
//     309,067,776); kept: 4 x 51,511,296 either way.
TEST(MegatronOutsideLayers, FusedVocabParallelLossUnderCompileCopiesOnce) {
  auto evaluation = [](const std::string& loss) {
    return evaluate_paper("name = \"g\"\nmode = \"train\"\n[model]\nlayers = 24\nhidden = 1024\nheads = 16\n"
                          "ffn_hidden = 4096\nvocab = 50304\nmlp = \"gelu\"\nnorm = \"layernorm\"\n"
                          "position_embeddings = 1024\ntied_embeddings = true\n[batch]\nseq_len = 1024\n[precision]\n"
                          "use = \"mixed-fp16\"\n[optimizer]\nuse = \"adam\"\n[activations]\nuse = \"megatron\"\n"
                          "cross_entropy = \"" + loss + "\"\n");
  };
  const Evaluation fused = evaluation("vocab-parallel-fused");
  const Evaluation eager = evaluation("vocab-parallel");
  EXPECT_EQ(fused.item_bytes("activations.loss_forward", MEMPLAN_ROLE_ACTIVATIONS), 309'067'776u);
  EXPECT_EQ(eager.item_bytes("activations.loss_forward", MEMPLAN_ROLE_ACTIVATIONS), 103'022'592u);
  EXPECT_EQ(fused.item_bytes("activations.loss_backward", MEMPLAN_ROLE_ACTIVATIONS), 515'112'960u);
  EXPECT_EQ(eager.item_bytes("activations.loss_backward", MEMPLAN_ROLE_ACTIVATIONS), 309'067'776u);
  EXPECT_EQ(fused.item_bytes("activations.logits", MEMPLAN_ROLE_ACTIVATIONS),
            eager.item_bytes("activations.logits", MEMPLAN_ROLE_ACTIVATIONS));
  EXPECT_EQ(eager.item_bytes("activations.logits", MEMPLAN_ROLE_ACTIVATIONS), 4u * 51'511'296u);
}

// --defer-embedding-wgrad-compute (megatron/core/tensor_parallel/layers.py @ d98e8a64: grad_output_buffer and
// embedding_activation_buffer, drained by pipeline_parallel/schedules.py finish_embedding_wgrad_compute after the
// step's last micro-batch): GPT-345M (h 1024, V 50,304, 1024 tokens, fp16), grad_accum 4. Per micro-batch the
// logits gradient 1024 x 50,304 x 2 = 103,022,592 B and the head's input 1024 x 1024 x 2 = 2,097,152 B.
//   limit 2: 2 x 103,022,592 + (2 - 1) x 2,097,152 = 208,142,336 B, in forward and in backward
//   limit 0 (every micro-batch): 4 x 103,022,592 + 3 x 2,097,152 = 418,381,824 B
TEST(MegatronOutsideLayers, DeferredEmbeddingWgradKeepsTheLogitsGradients) {
  auto text = [](const std::string& options) {
    return std::string("name = \"g\"\nmode = \"train\"\n[model]\nlayers = 24\nhidden = 1024\nheads = 16\n"
                          "ffn_hidden = 4096\nvocab = 50304\nmlp = \"gelu\"\nnorm = \"layernorm\"\n"
                          "position_embeddings = 1024\ntied_embeddings = true\n[batch]\nseq_len = 1024\ngrad_accum = 4\n"
                          "[precision]\nuse = \"mixed-fp16\"\n[optimizer]\nuse = \"adam\"\n[activations]\nuse = "
                          "\"megatron\"\ncross_entropy = \"vocab-parallel\"\n") + options;
  };
  auto deferred = [&](const std::string& options) { return evaluate_paper(text(options)); };
  const Evaluation two = deferred("defer_embedding_wgrad = true\nwgrad_deferral_limit = 2\n");
  EXPECT_EQ(two.item_bytes_at("activations.deferred_wgrad", MEMPLAN_LIFETIME_TRANSIENT_FORWARD), 208'142'336u);
  EXPECT_EQ(two.item_bytes_at("activations.deferred_wgrad", MEMPLAN_LIFETIME_TRANSIENT_BACKWARD), 208'142'336u);
  EXPECT_EQ(deferred("defer_embedding_wgrad = true\n").item_bytes_at("activations.deferred_wgrad",
                                                                   MEMPLAN_LIFETIME_TRANSIENT_BACKWARD),
            418'381'824u);
  EXPECT_EQ(deferred("").item_bytes("activations.deferred_wgrad", MEMPLAN_ROLE_ACTIVATIONS), 0u);
  EXPECT_NE(error_of(text("wgrad_deferral_limit = 2\n")).find("set defer_embedding_wgrad = true"), std::string::npos);
}

TEST(MegatronOutsideLayers, LargeVocabularyLogitsAreGigabytes) {
  Evaluation e = evaluate_paper(llama3_8b(kOneSequence, "dropout = false\n"));
  EXPECT_EQ(e.item_bytes("activations.logits", kAct), 4'202'692'608u);
  EXPECT_EQ(e.item_bytes("activations.cross_entropy", kAct), 4'202'692'608u);
  EXPECT_EQ(activation_bytes(e, MEMPLAN_LIFETIME_FORWARD_END, "activations.logits"), 4'202'692'608u);
  EXPECT_EQ(activation_bytes(e, MEMPLAN_LIFETIME_FORWARD_END, "activations.cross_entropy"), 4'202'692'608u);
  EXPECT_EQ(activation_bytes(e, MEMPLAN_LIFETIME_BACKWARD_START, "activations.loss_backward"), 7'354'712'064u);
  EXPECT_EQ(e.item_bytes("activations.final_norm", kAct), 134'217'728u);
  EXPECT_EQ(e.item_bytes("activations.embedding_dropout", kAct), 0u);  // no dropout, no mask
  EXPECT_EQ(e.item_bytes("layers.0-31.activations", kAct), 36'540'776'448u);
  EXPECT_EQ(activation_bytes(e, MEMPLAN_LIFETIME_ACTIVATION), uint64_t{36'540'776'448} + 134'217'728u);
  EXPECT_EQ(e.component(kAct),
            uint64_t{36'540'776'448} + 134'217'728u + 2 * uint64_t{4'202'692'608} + 7'354'712'064u);
}

// With dropout the embedding keeps a 1-byte mask per element: s b h = 33,554,432.
TEST(MegatronOutsideLayers, EmbeddingDropoutMask) {
  Evaluation e = evaluate_paper(llama3_8b(kOneSequence, "dropout = true\n"));
  EXPECT_EQ(e.item_bytes("activations.embedding_dropout", kAct), 33'554'432u);
}

// Tensor parallelism splits the vocabulary-parallel logits t ways; the final
// norm's activations are split only with sequence parallelism.
TEST(MegatronOutsideLayers, TensorAndSequenceParallelism) {
  Evaluation tp = evaluate_paper(llama3_8b(kOneSequence, "dropout = true\n",
                                     "[[strategy]]\nuse = \"tensor-parallel\"\nsize = 8\n"));
  EXPECT_EQ(tp.item_bytes("activations.logits", kAct), 525'336'576u);  // 4,202,692,608 / 8
  EXPECT_EQ(tp.item_bytes("activations.final_norm", kAct), 134'217'728u);
  EXPECT_EQ(tp.item_bytes("activations.embedding_dropout", kAct), 33'554'432u);
  Evaluation sp = evaluate_paper(llama3_8b(kOneSequence, "dropout = true\n",
                                     "[[strategy]]\nuse = \"tensor-parallel\"\nsize = 8\nsequence_parallel = true\n"));
  EXPECT_EQ(sp.item_bytes("activations.logits", kAct), 525'336'576u);
  EXPECT_EQ(sp.item_bytes("activations.final_norm", kAct), 16'777'216u);
  EXPECT_EQ(sp.item_bytes("activations.embedding_dropout", kAct), 4'194'304u);
}

// Pipeline parallelism (1F1B, p = 8, 16 micro-batches): the first stage holds
// the embedding dropout of p = 8 micro-batches, Korthikanti's sbhp/t =
// 3,145,728 x 8, and no logits; the last stage holds one micro-batch's final
// norm and logits and no embedding dropout.
TEST(MegatronOutsideLayers, PipelineStagesHoldTheirOwnEnd) {
  const std::string vocab_parallel = "cross_entropy = \"vocab-parallel\"\n";
  Evaluation first = evaluate_paper(gpt3(vocab_parallel, "[[strategy]]\nuse = \"pipeline-parallel\"\nsize = 8\n", 16));
  EXPECT_EQ(first.item_bytes("activations.embedding_dropout", kAct), 25'165'824u);
  EXPECT_EQ(first.item_bytes("activations.final_norm", kAct), 0u);
  EXPECT_EQ(first.item_bytes("activations.logits", kAct), 0u);
  Evaluation last = evaluate_paper(
      gpt3(vocab_parallel, "[[strategy]]\nuse = \"pipeline-parallel\"\nsize = 8\nstage = \"last\"\n", 16));
  EXPECT_EQ(last.item_bytes("activations.embedding_dropout", kAct), 0u);
  EXPECT_EQ(last.item_bytes("activations.final_norm", kAct), 12'582'912u);
  EXPECT_EQ(last.item_bytes("activations.logits", kAct), 52'428'800u);
}

// Full recomputation checkpoints the transformer layers only; the embedding,
// final norm and loss keep their activations (the logits and the loss's saves
// until the loss's and the head's backward have run: transients of the forward's end, see
// LossMomentAndRecomputationAreNotSummed).
TEST(MegatronOutsideLayers, FullRecomputeKeepsThem) {
  Evaluation e = evaluate_paper(llama3_8b(kOneSequence, "dropout = false\n",
                                    "[[strategy]]\nuse = \"recompute\"\npolicy = \"full\"\n"));
  EXPECT_EQ(e.item_bytes("activations.logits", kAct), 4'202'692'608u);
  EXPECT_EQ(e.item_bytes("activations.final_norm", kAct), 134'217'728u);
  // Each layer keeps only its input: 2 x 8192 x 4096 = 67,108,864, x 32.
  EXPECT_EQ(e.item_bytes("layers.0-31.activations", kAct), uint64_t{32} * 67'108'864u);
}

// Activations are per micro-batch: accumulating gradients over 8 micro-batches
// stores the same activations as one step of one micro-batch (only pipeline
// schedules hold several micro-batches at once), and doubling the micro-batch
// doubles them. What accumulation changes is the timeline: the accumulated
// gradients already exist while the next micro-batch runs forward.
// At the forward's end: layers 36,540,776,448 + final norm 134,217,728 stored,
// and the logits and softmax 2 x 4,202,692,608 (the forward's end's transients, freed by
// the loss's and the head's backward). The loss's moment (backward_start) is
// those saves, 8,405,385,216, less the head's weight gradient 1,050,673,152
// without accumulation (7,354,712,064; see LargeVocabularyLogitsAreGigabytes);
// with accumulation the head's gradient already exists, nothing is taken off:
// 8,405,385,216, and 16,810,770,432 at micro-batch 2.
TEST(MegatronOutsideLayers, ActivationsArePerMicroBatch) {
  Evaluation one = evaluate_paper(llama3_8b(kOneSequence + "grad_accum = 1\n", "dropout = false\n"));
  Evaluation eight = evaluate_paper(llama3_8b(kOneSequence + "grad_accum = 8\n", "dropout = false\n"));
  Evaluation doubled = evaluate_paper(llama3_8b("micro_batch = 2\nseq_len = 8192\ngrad_accum = 8\n", "dropout = false\n"));
  const uint64_t activations = uint64_t{36'540'776'448} + 134'217'728u + 2 * uint64_t{4'202'692'608};
  EXPECT_EQ(activation_bytes(one, MEMPLAN_LIFETIME_ACTIVATION), uint64_t{36'540'776'448} + 134'217'728u);
  EXPECT_EQ(activation_bytes(eight, MEMPLAN_LIFETIME_ACTIVATION), uint64_t{36'540'776'448} + 134'217'728u);
  EXPECT_EQ(activation_bytes(doubled, MEMPLAN_LIFETIME_ACTIVATION), 2 * (uint64_t{36'540'776'448} + 134'217'728u));
  EXPECT_EQ(one.component(kAct), activations + 7'354'712'064u);
  EXPECT_EQ(eight.component(kAct), activations + 8'405'385'216u);
  EXPECT_EQ(doubled.component(kAct), 2 * activations + 16'810'770'432u);
  const auto& t1 = one.breakdown().timeline;
  const auto& t8 = eight.breakdown().timeline;
  EXPECT_EQ(t1[kForward] - t1[kInit], activations);
  EXPECT_EQ(t8[kForward] - t8[kInit], activations + eight.component(MEMPLAN_ROLE_GRADIENTS));
}

std::string library() { return " (plugin library " + plugin_dir() + "/memplan-megatron.so)"; }

// Lines: 1 name, 2 mode, 3 [model], 4 preset, 5 [batch], 6 micro_batch, 7 seq_len, 8 [precision], 9 use,
// 10 [optimizer], 11 use, 12 [activations], 13 use, 14 flash_attention, 15 cross_entropy.
TEST(MegatronOutsideLayers, CrossEntropyOptionIsChecked) {
  EXPECT_EQ(error_of(llama3_8b(kOneSequence, "cross_entropy = \"fused\"\n"), "m.toml"),
            "m.toml:15:17: error: in [activations], activations plugin 'megatron', option 'cross_entropy': must be one of "
            "\"unfused\", \"vocab-parallel\", \"vocab-parallel-copy\", \"vocab-parallel-fused\", \"upcast-shift-copy\", "
            "\"shift-copy\", "
            "\"upcast-in-loss-shift-copy\", "
            "\"upcast-in-loss\", \"upcast\", \"chunked\", \"compiled\", \"loss-parallel\", \"upcast-compiled\", "
            "\"chunked-compiled\", \"cut\", \"chunked-fused\", \"chunked-fused-eager\", \"in-place\", not \"fused\"" + library());
}

// Eager layers under tensor parallelism with a sequence-parallel final norm
// (torchtitan: "norm": SequenceParallel(), "output": ColwiseParallel with
// Shard(1) input, models/llama3/infra/parallelize.py @ v0.2.2): the norm's
// fp32 input copy, rsqrt and normalized copy sit on the rank's s / t tokens;
// the LM head's input is all-gathered to every token before the matmul,
// which saves it whole. Llama 3.1 8B, s 8192, b 1, bf16, t 8:
//   8192 / 8 x (4 x 4096 + 4 + 2 x 4096) + 8192 x 2 x 4096 = 25,169,920 + 67,108,864 = 92,278,784;
// without sequence parallelism every rank holds all tokens:
//   8192 x (4 x 4096 + 4 + 2 x 4096) + 67,108,864 = 268,468,224.
TEST(MegatronOutsideLayers, EagerFinalNormUnderSequenceParallelism) {
  const std::string eager = "layer = \"eager\"\ndropout = false\n";
  Evaluation sp = evaluate_paper(llama3_8b(kOneSequence, eager,
                                           "[[strategy]]\nuse = \"tensor-parallel\"\nsize = 8\nsequence_parallel = true\n"));
  EXPECT_EQ(sp.item_bytes("activations.final_norm", kAct), 92'278'784u);
  Evaluation tp = evaluate_paper(llama3_8b(kOneSequence, eager, "[[strategy]]\nuse = \"tensor-parallel\"\nsize = 8\n"));
  EXPECT_EQ(tp.item_bytes("activations.final_norm", kAct), 268'468'224u);
}

// A frozen final norm and LM head (LoRA on the layers' q and v only) save
// neither the norm's normalized copy nor the head's input: autograd saves an
// operand of mul and mm only for the other operand's gradient
// (pytorch/pytorch tools/autograd/gen_variable_type.py, guard_for: a saved
// input used by one derivative is saved under should_compute_output;
// derivatives.yaml mul.Tensor, mm), and the norm's last step is
// weight x normalized (transformers LlamaRMSNorm @ v4.38). Llama 3.1 8B,
// s 8192, b 1, eager: the fp32 input copy and rsqrt stay,
// 8192 x (4 x 4096 + 4) = 134,250,496, where a trained head and norm keep
// 268,468,224 (EagerFinalNormUnderSequenceParallelism).
TEST(MegatronOutsideLayers, FrozenHeadSavesNoNormalizedCopy) {
  const std::string eager = "layer = \"eager\"\ndropout = false\n";
  Evaluation lora = evaluate_paper(
      llama3_8b(kOneSequence, eager, "[[strategy]]\nuse = \"lora\"\nrank = 8\ntargets = \"q,v\"\n"));
  EXPECT_EQ(lora.item_bytes("activations.final_norm", kAct), 134'250'496u);
  Evaluation full = evaluate_paper(llama3_8b(kOneSequence, eager));
  EXPECT_EQ(full.item_bytes("activations.final_norm", kAct), 268'468'224u);
}

// output_held: the training loop keeps the model's output object until the
// next forward replaces it (Answer.AI fsdp_qlora train.py @ 50efa1e:
// `output = model(...)`, `loss = output.loss`, `loss.backward()`, `output`
// reassigned only after the next forward has run), so the logits the model
// returns are alive in every phase: a persistent item of s x b x V elements
// (here 8192 x 128,256 = 1,050,673,152) times the bytes of the returned
// logits: 4 where transformers <= 4.45 upcasts in the model
// (upcast-shift-copy: 4,202,692,608 B), 2 (bf16) where the loss upcasts its
// own copy (upcast-in-loss: 2,101,346,304 B). Under "unfused" the fp32 logits
// kept into backward are the same tensor: they become the held output, not a
// second copy, except at the forward's end, where the step before's held
// output is still bound to the loop's variable beside this forward's logits
// until the assignment: a forward_end twin of 4,202,692,608 B (megatron 1.33.0).
TEST(MegatronOutsideLayers, HeldOutputIsPersistent) {
  Evaluation upcast = evaluate_paper(llama3_8b(kOneSequence, "cross_entropy = \"upcast-shift-copy\"\noutput_held = true\n"));
  EXPECT_EQ(upcast.item_bytes("activations.held_output", kAct), 4'202'692'608u);
  for (const PlanItem& item : upcast.estimator().plan().items)
    if (item.name_view() == "activations.held_output") {
      EXPECT_EQ(item.lifetime, MEMPLAN_LIFETIME_PERSISTENT);
    }
  Evaluation in_loss = evaluate_paper(llama3_8b(kOneSequence, "cross_entropy = \"upcast-in-loss\"\noutput_held = true\n"));
  EXPECT_EQ(in_loss.item_bytes("activations.held_output", kAct), 2'101'346'304u);
  Evaluation unfused = evaluate_paper(llama3_8b(kOneSequence, "output_held = true\n"));
  EXPECT_EQ(unfused.item_bytes_at("activations.held_output", MEMPLAN_LIFETIME_PERSISTENT), 4'202'692'608u);
  EXPECT_EQ(unfused.item_bytes_at("activations.held_output", MEMPLAN_LIFETIME_FORWARD_END), 4'202'692'608u);
  EXPECT_EQ(unfused.item_bytes("activations.logits", kAct), 0u);
  // The losses that keep no returned logits into backward have no twin: this forward's logits are counted in the
  // loss's own forward high point.
  EXPECT_EQ(upcast.item_bytes_at("activations.held_output", MEMPLAN_LIFETIME_FORWARD_END), 0u);
  EXPECT_EQ(in_loss.item_bytes_at("activations.held_output", MEMPLAN_LIFETIME_FORWARD_END), 0u);
  EXPECT_EQ(evaluate_paper(llama3_8b(kOneSequence, "")).item_bytes("activations.held_output", kAct), 0u);
  // A loss that returns no logits leaves the held output nothing of their size: Megatron-LM's model returns the
  // loss, Cut Cross-Entropy's forward no logits (the fsdp-qlora profile holds the output; a scenario under it
  // may choose such a loss).
  for (const std::string loss : {"vocab-parallel", "cut"}) {
    const std::string text = "cross_entropy = \"" + loss + "\"\n";
    const Evaluation held = evaluate_paper(llama3_8b(kOneSequence, text + "output_held = true\n"));
    EXPECT_EQ(held.item_bytes("activations.held_output", kAct), 0u) << loss;
    EXPECT_EQ(held.breakdown().quantities[kAllocated].peak,
              evaluate_paper(llama3_8b(kOneSequence, text)).breakdown().quantities[kAllocated].peak)
        << loss;
  }
}

}  // namespace
}  // namespace memplan::testing

namespace memplan::testing {
namespace {

// An encoder without an output head (output_head = "none", no final norm)
// computes no logits and no loss; the same backbone with a tied LM head does:
// fp32 logits 4 x s x b x V = 4 x 512 x 8 x 30522 = 500,072,448 bytes, and the
// saved softmax the same again.
TEST(MegatronOutputHead, NoHeadNoLogits) {
  const std::string backbone =
      "name = \"t\"\nmode = \"train\"\n[model]\nlayers = 2\nhidden = 1024\nheads = 16\nffn_hidden = 4096\n"
      "vocab = 30522\nmlp = \"gelu\"\nnorm = \"layernorm\"\n";
  const std::string rest = "[batch]\nmicro_batch = 8\nseq_len = 512\n[precision]\nuse = \"mixed-bf16\"\n"
                           "[optimizer]\nuse = \"adamw\"\n[activations]\nuse = \"megatron\"\n";
  Evaluation encoder = evaluate_paper(backbone + "final_norm = false\noutput_head = \"none\"\n" + rest);
  EXPECT_EQ(encoder.item_bytes("activations.logits", MEMPLAN_ROLE_ACTIVATIONS), 0u);
  EXPECT_EQ(encoder.item_bytes("activations.cross_entropy", MEMPLAN_ROLE_ACTIVATIONS), 0u);
  EXPECT_EQ(encoder.item_bytes("activations.final_norm", MEMPLAN_ROLE_ACTIVATIONS), 0u);
  Evaluation decoder = evaluate_paper(backbone + "tied_embeddings = true\n" + rest);
  EXPECT_EQ(decoder.item_bytes("activations.logits", MEMPLAN_ROLE_ACTIVATIONS), 500'072'448u);
  EXPECT_EQ(decoder.item_bytes("activations.cross_entropy", MEMPLAN_ROLE_ACTIVATIONS), 500'072'448u);
}

// The interleaved schedule keeps extra model chunks in flight, but the LM head
// lives in the last chunk only, of which the last stage holds one micro-batch
// (as without interleaving): Llama-2-7B, s = 4096, b = 1: logits
// 4 x 4096 x 32000 = 524,288,000 bytes; final norm 2 x 2 x 4096 x 4096 = 67,108,864.
TEST(MegatronOutputHead, InterleavingDoesNotMultiplyTheHead) {
  Evaluation last = evaluate_paper(
      "name = \"t\"\nmode = \"train\"\n[model]\npreset = \"llama-2-7b\"\n[batch]\nmicro_batch = 1\nseq_len = 4096\n"
      "grad_accum = 8\n[precision]\nuse = \"mixed-bf16\"\n[optimizer]\nuse = \"adamw\"\n[activations]\n"
      "use = \"megatron\"\nflash_attention = true\ndropout = false\n[[strategy]]\nuse = \"pipeline-parallel\"\n"
      "size = 4\nvirtual_stages = 2\nstage = \"last\"\n");
  EXPECT_EQ(last.item_bytes("activations.logits", MEMPLAN_ROLE_ACTIVATIONS), 524'288'000u);
  EXPECT_EQ(last.item_bytes("activations.final_norm", MEMPLAN_ROLE_ACTIVATIONS), 67'108'864u);
}

}  // namespace
}  // namespace memplan::testing

namespace memplan::testing {
namespace {

// The same for serving: an encoder without a head computes no logits, even
// with logits = "all" (250,000-token vocabulary, 64 x 512 tokens would be
// 4 x 32,768 x 250,000 = 32,768,000,000 bytes of logits).
TEST(InferenceOutputHead, NoHeadNoLogits) {
  Evaluation encoder = evaluate_paper(
      "name = \"t\"\nmode = \"infer\"\n[model]\nlayers = 2\nhidden = 1024\nheads = 16\nffn_hidden = 4096\n"
      "vocab = 250000\nmlp = \"gelu\"\nnorm = \"layernorm\"\nfinal_norm = false\noutput_head = \"none\"\n"
      "[batch]\nmicro_batch = 64\nseq_len = 512\n[precision]\nuse = \"bf16\"\n[activations]\nuse = \"inference\"\n"
      "logits = \"all\"\n");
  EXPECT_EQ(encoder.item_bytes("activations.logits", MEMPLAN_ROLE_ACTIVATIONS), 0u);
}

}  // namespace
}  // namespace memplan::testing

namespace memplan::testing {
namespace {

// Backward's start under full recomputation: the loss's moment and the last
// layer's recomputation are max'ed, not summed. Autograd frees a node's saved
// tensors once it has run (torch/csrc/autograd/engine.cpp, Engine::evaluate_function,
// release_variables()), and backward runs the loss and the LM head before any
// layer: the logits and the softmax of the micro-batch are gone when the first
// layer is recomputed. GPT-3 175B at b 2, s 2048, fp16 + Adam, tensor parallel 8
// with sequence parallelism, ZeRO-3 over 64 data-parallel ranks (so the
// gradients, not the activations, are small), full recompute.
//   P: 14 bytes (fp16 weight 2, fp32 master 4, Adam 8) x 341,455,488 parameters on this
//      GPU (175B / 8 / 64) = 4,780,376,832.
//   A (stored): each layer's input 2 x 2 x 2048 x 12288 / 8 = 12,582,912 x 96 =
//      1,207,959,552, the embedding dropout mask 6,291,456, the final norm 25,165,824:
//      1,239,416,832.
//   Working set (transient_backward): one layer's Table 2 row at b 2, 2 x 358,612,992 = 717,225,984.
//   Saves (transient_forward): fp32 logits 4 x 2 x 2048 x 51200 / 8 = 104,857,600 and
//      the softmax as much: 209,715,200 < the working set, so the loss's moment adds
//      nothing beyond it: S = max(0, 209,715,200 - 717,225,984) = 0.
//   G1: one layer's fp16 gradients on this GPU: q, k, v, o 589,872 each (with
//      biases), the MLP 4,718,832, the norms 1,536 = 7,079,856.
//   backward = P + T_b + max(A + G1 + S, G + A1 + E)
//            = 4,780,376,832 + 717,225,984 + 1,239,416,832 + 7,079,856 = 6,744,099,504
//   (the end, G + A1 + E = 682,910,976 + 25,165,824 + the tied embedding's second
//   gradient 51200 x 12288 x 2 / 8 = 157,286,400: 865,363,200, is smaller than the start's
//   1,246,496,688). Counting the saves as stored activations beside the working set would
//   give 209,715,200 more.
// With the vocabulary 8x larger (409,600: the same scenario, a larger loss) the saves
// are 2 x 4 x 2 x 2048 x 409600 / 8 = 1,677,721,600 > the working set, and the loss's
// moment is the high point: S = 1,677,721,600 - 717,225,984 - the tied embedding's
// gradient 2 x 409600 x 12288 / 512 = 19,660,800 (the loss frees its fp32 tensors before
// the head's weight gradient is allocated; floor: the head's input gradient
// 2 x 2 x 2048 x 409600 / 8 = 419,430,400, smaller) = 940,834,816. The embedding's
// gradient is now G1 (19,660,800 > 7,079,856), P = 14 x 350,057,088 = 4,900,799,232:
//   backward = 4,900,799,232 + 717,225,984 + 1,239,416,832 + 19,660,800 + 940,834,816
//            = 7,817,937,664 = P + A + saves, the forward's end: the working set is not added
//   (the end: G 682,910,976 + the larger embedding's 358,400 x 12288 x 2 / 512 = 17,203,200
//   more = 700,114,176, A1 25,165,824 and E 409600 x 12288 x 2 / 8 = 1,258,291,200 come to
//   1,983,571,200, below the start's A + G1 + S = 2,199,912,448).
TEST(MegatronOutsideLayers, LossMomentAndRecomputationAreNotSummed) {
  const std::string zero3 = "[[strategy]]\nuse = \"recompute\"\npolicy = \"full\"\n"
                            "[[strategy]]\nuse = \"data-parallel\"\nsize = 64\n[[strategy]]\nuse = \"zero\"\nstage = 3\n";
  std::string scenario = gpt3("", zero3);
  scenario.replace(scenario.find("micro_batch = 1"), 15, "micro_batch = 2");
  Evaluation e = evaluate_paper(scenario);
  EXPECT_EQ(activation_bytes(e, MEMPLAN_LIFETIME_ACTIVATION), 1'239'416'832u);
  EXPECT_EQ(activation_bytes(e, MEMPLAN_LIFETIME_TRANSIENT_BACKWARD, "activations.recompute"), 717'225'984u);
  EXPECT_EQ(activation_bytes(e, MEMPLAN_LIFETIME_FORWARD_END), 209'715'200u);
  EXPECT_EQ(activation_bytes(e, MEMPLAN_LIFETIME_BACKWARD_START), 0u);
  EXPECT_EQ(e.breakdown().timeline[kBackward], 6'744'099'504u);
  EXPECT_EQ(e.breakdown().peak, 6'744'099'504u);

  std::string larger = scenario;
  larger.replace(larger.find("preset = \"gpt3-175b\"\n"), 21, "preset = \"gpt3-175b\"\nvocab = 409600\n");
  Evaluation loss = evaluate_paper(larger);
  EXPECT_EQ(activation_bytes(loss, MEMPLAN_LIFETIME_FORWARD_END), 1'677'721'600u);
  EXPECT_EQ(activation_bytes(loss, MEMPLAN_LIFETIME_BACKWARD_START, "activations.loss_backward"), 940'834'816u);
  EXPECT_EQ(loss.breakdown().timeline[kBackward], 7'817'937'664u);
  EXPECT_EQ(loss.breakdown().timeline[kForward], 7'817'937'664u);
}

// A tied embedding is one leaf used twice in one graph, with one AccumulateGrad
// node: the LM head's gradient (backward's start) waits in that node's input
// buffer, and at backward's end the embedding's backward (embedding_dense_backward,
// a whole vocabulary x hidden gradient) arrives beside it and is added to it
// (torch/csrc/autograd/input_buffer.cpp, InputBuffer::accumulate). Llama-3.2-3B
// (tied, 3,212,749,824 parameters: embedding 128,256 x 3,072 = 394,002,432, 28 layers
// of 100,669,440, final norm 3,072), bf16 weights, gradients and AdamW states, one GPU,
// b 1, s 512, no recompute:
//   E (transient_backward_end) = 128,256 x 3,072 x 2 = 788,004,864;
//   P = 6 x 3,212,749,824 = 19,276,498,944; G = 2 x 3,212,749,824 = 6,425,499,648;
//   A1 = one layer's stored activations, 1,293,221,888 / 28 = 46,186,496 (above the
//   final norm's 6,291,456; the logits and the loss's saves are the forward's end's transients);
//   backward's end G + A1 + E = 7,259,691,008, above its start A + G1 + S =
//   1,299,513,344 + 788,004,864 (the embedding's gradient) + 131,334,144 = 2,218,852,352:
//   backward = P + 7,259,691,008 = 26,536,189,952 (25,748,185,088 without the second
//   gradient). Untied, the embedding's gradient meets no other: no item.
// Llama-3.2-3B at b 1, s 512 with `precision` (a [precision] table's body) and `strategies`.
std::string llama32_3b(const std::string& precision, const std::string& strategies = "") {
  return "name = \"tied\"\nmode = \"train\"\n[model]\npreset = \"llama-3.2-3b\"\n[batch]\nmicro_batch = 1\n"
         "seq_len = 512\n[precision]\n" + precision + "[optimizer]\nuse = \"adamw\"\n[activations]\n"
         "use = \"megatron\"\nflash_attention = true\ndropout = false\n" + strategies;
}

TEST(MegatronOutsideLayers, TiedEmbeddingsSecondGradientAtBackwardsEnd) {
  const std::string scenario = llama32_3b("use = \"bf16\"\n");
  Evaluation tied = evaluate_paper(scenario);
  uint64_t second = 0;
  for (const PlanItem& item : tied.estimator().plan().items)
    if (item.name_view() == "activations.tied_embedding_gradient") {
      EXPECT_EQ(item.lifetime, MEMPLAN_LIFETIME_BACKWARD_END);
      EXPECT_EQ(item.role, MEMPLAN_ROLE_GRADIENTS);
      second += item.bytes();
    }
  EXPECT_EQ(second, 788'004'864u);
  EXPECT_EQ(tied.breakdown().timeline[kInit], 19'276'498'944u);
  EXPECT_EQ(tied.breakdown().timeline[kBackward], 26'536'189'952u);

  std::string untied = scenario;
  untied.replace(untied.find("[batch]"), 7, "tied_embeddings = false\n[batch]");
  Evaluation separate = evaluate_paper(untied);
  EXPECT_EQ(separate.item_bytes("activations.tied_embedding_gradient", MEMPLAN_ROLE_GRADIENTS), 0u);
}

// FSDP's MixedPrecision param_dtype: autograd computes with the gathered bf16
// parameters, so the second gradient is bf16 over fp32 weights: 788,004,864
// again (128,256 x 3,072 x 2), not the fp32 weight's 1,576,009,728.
TEST(MegatronOutsideLayers, TiedSecondGradientInTheGatheredDtype) {
  const std::string autocast = "use = \"fp32\"\nactivations = \"bf16\"\n";
  Evaluation e = evaluate_paper(llama32_3b(
      autocast, "[[strategy]]\nuse = \"data-parallel\"\nsize = 8\n[[strategy]]\nuse = \"fsdp\"\napi = \"fsdp2\"\n"
                "param_dtype = \"bf16\"\n"));
  EXPECT_EQ(e.item_bytes("activations.tied_embedding_gradient", MEMPLAN_ROLE_GRADIENTS), 788'004'864u);
  Evaluation own = evaluate_paper(llama32_3b(autocast));
  EXPECT_EQ(own.item_bytes("activations.tied_embedding_gradient", MEMPLAN_ROLE_GRADIENTS), 1'576'009'728u);
}

}  // namespace
}  // namespace memplan::testing
