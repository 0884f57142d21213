// Optimizer states of 'lion', 'adafactor', 'adam-8bit' and 'adam-4bit', hand-counted on the
// tiny model of scenarios.hpp (bytes) and on parameter counts (bytes per
// parameter). The step's temporaries are in step_temporaries_test.cpp; here
// only persistent states are counted.
#include <gtest/gtest.h>

#include <string>

#include "scenarios.hpp"

namespace memplan::testing::optimizers {
namespace {

constexpr int32_t kStates = MEMPLAN_ROLE_OPTIMIZER_STATES;

uint64_t persistent_states(const Evaluation& evaluation) {
  return bytes_of(evaluation, kStates, MEMPLAN_LIFETIME_PERSISTENT);
}

// ---------------------------------------------------------------------------
// Lion (Chen et al. 2023, arXiv 2302.06675): "more memory-efficient than Adam
// as it only keeps track of the momentum" (abstract): one state per weight.

// 1e9 parameters: fp32 weights 4 + gradients 4 + one fp32 momentum 4 = 12
// bytes per parameter; mixed bf16: 2 + 2 + master 4 + momentum 4 = 12.
TEST(Lion, OneMomentumPerParameter) {
  const Evaluation fp32 = evaluate_paper(train(params_model(1e9), "use = \"fp32\"", "use = \"lion\""));
  EXPECT_DOUBLE_EQ(static_cast<double>(fp32.breakdown().sum) / 1e9, 12);
  EXPECT_EQ(fp32.component(kStates), 4'000'000'000u);
  const Evaluation mixed = evaluate_paper(train(params_model(1e9), "use = \"mixed-bf16\"", "use = \"lion\""));
  EXPECT_DOUBLE_EQ(static_cast<double>(mixed.breakdown().sum) / 1e9, 12);
  // In the recipe's optimizer-states dtype: pure bf16 keeps a 2-byte momentum.
  const Evaluation bf16 = evaluate_paper(train(params_model(1e9), "use = \"bf16\"", "use = \"lion\""));
  EXPECT_EQ(bf16.component(kStates), 2'000'000'000u);
}

// Half of AdamW's states, item by item, on a real architecture.
TEST(Lion, HalfOfAdamWsStates) {
  const std::string model = "[model]\npreset = \"llama-2-7b\"\n";
  const Evaluation lion = evaluate_paper(train(model, "use = \"mixed-bf16\"", "use = \"lion\""));
  const Evaluation adamw = evaluate_paper(train(model, "use = \"mixed-bf16\"", "use = \"adamw\""));
  // 4 B x 6,738,415,616 parameters.
  EXPECT_EQ(lion.component(kStates), 26'953'662'464u);
  EXPECT_EQ(2 * lion.component(kStates), adamw.component(kStates));
  EXPECT_EQ(2 * lion.item_bytes("layers.0-31.mlp", kStates), adamw.item_bytes("layers.0-31.mlp", kStates));
}

// ---------------------------------------------------------------------------
// Adafactor (Shazeer and Stern 2018, arXiv 1804.04235): an n x m matrix keeps
// n + m second-moment values, a 1-D weight its own size. fp32 recipe: 4 B each.

// Tiny model, per instance:
//   embed_tokens, lm_head  1000 + 64         = 1,064
//   q, o                   64 + 64           =   128
//   k, v                   64 + 32           =    96
//   MLP                    3 x (64 + 128)    =   576
//   norms (1-D)            2 x 64            =   128
//   layer sum 128 + 96 + 96 + 128 + 576 + 128 = 1,152, x 2 layers = 2,304
//   final_norm (1-D)                          =    64
//   total 1,064 + 2,304 + 64 + 1,064 = 4,496 elements = 17,984 bytes
TEST(Adafactor, FactoredSecondMomentOfTheTinyModel) {
  const Evaluation e = evaluate_paper(train(kTinyModel, "use = \"fp32\"", "use = \"adafactor\""));
  EXPECT_EQ(persistent_states(e), 17'984u);
  EXPECT_EQ(e.item_bytes("embed_tokens", kStates), 1'064u * 4);
  EXPECT_EQ(e.item_bytes("lm_head", kStates), 1'064u * 4);
  EXPECT_EQ(e.item_bytes("layers.0-1.attn.q", kStates), 128u * 4 * 2);
  EXPECT_EQ(e.item_bytes("layers.0-1.attn.k", kStates), 96u * 4 * 2);
  EXPECT_EQ(e.item_bytes("layers.0-1.attn.o", kStates), 128u * 4 * 2);
  EXPECT_EQ(e.item_bytes("layers.0-1.mlp", kStates), 576u * 4 * 2);
  EXPECT_EQ(e.item_bytes("layers.0-1.norms", kStates), 128u * 4 * 2);
  EXPECT_EQ(e.item_bytes("final_norm", kStates), 64u * 4);
}

// A first moment adds one full copy: 202,048 x 4 = 808,192 bytes. Hugging
// Face's Adafactor keeps it whenever beta1 is set.
TEST(Adafactor, OptionalFirstMoment) {
  const std::string fp32 = "use = \"fp32\"";
  EXPECT_EQ(persistent_states(evaluate_paper(train(kTinyModel, fp32, "use = \"adafactor\"\nfirst_moment = true"))),
            17'984u + 808'192u);
  EXPECT_EQ(persistent_states(evaluate_paper(train(kTinyModel, fp32, "use = \"adafactor\"\nbeta1 = 0.9"))),
            17'984u + 808'192u);
  EXPECT_EQ(persistent_states(evaluate_paper(train(kTinyModel, fp32, "use = \"adafactor\"\nbeta1 = 0.0"))),
            17'984u + 808'192u);
  EXPECT_EQ(persistent_states(
                evaluate_paper(train(kTinyModel, fp32, "use = \"adafactor\"\nbeta1 = 0.9\nfirst_moment = true"))),
            17'984u + 808'192u);
  EXPECT_EQ(persistent_states(evaluate_paper(train(kTinyModel, fp32, "use = \"adafactor\"\nfirst_moment = false"))),
            17'984u);
}

// Tensor parallelism divides the side that is not h (column-parallel q, k, v,
// gate, up, vocabulary; row-parallel o, down). t = 2, kv heads 2 >= 2:
//   embed, lm_head 500 + 64 = 564   q, o 64 + 32 = 96   k, v 64 + 16 = 80
//   MLP 3 x (64 + 64) = 384   norms 128 (replicated)
//   layer 96 + 80 + 80 + 96 + 384 + 128 = 864, x 2 = 1,728
//   total 564 + 1,728 + 64 + 564 = 2,920 elements = 11,680 bytes
// t = 4 > 2 kv heads, so each rank keeps one whole kv head (16 columns):
//   embed, lm_head 250 + 64 = 314   q, o 64 + 16 = 80   k, v 64 + 16 = 80
//   MLP 3 x (64 + 32) = 288   layer 4 x 80 + 288 + 128 = 736, x 2 = 1,472
//   total 314 + 1,472 + 64 + 314 = 2,164 elements = 8,656 bytes
TEST(Adafactor, TensorParallelSplitsTheNonHiddenSide) {
  auto with_tp = [](int t) {
    return evaluate_paper(train(kTinyModel, "use = \"fp32\"", "use = \"adafactor\"",
                          "[[strategy]]\nuse = \"tensor-parallel\"\nsize = " + std::to_string(t) + "\n"));
  };
  EXPECT_EQ(persistent_states(with_tp(2)), 11'680u);
  EXPECT_EQ(persistent_states(with_tp(4)), 8'656u);
}

// Biases are 1-D and keep a full second moment. With qkv_bias the q item is
// 4,096 + 64 elements: 64 + 64 + 64 = 192; k and v 2,048 + 32: 64 + 32 + 32 = 128.
TEST(Adafactor, BiasesKeepAFullSecondMoment) {
  const Evaluation e = evaluate_paper(train(kTinyModel + "qkv_bias = true\n", "use = \"fp32\"", "use = \"adafactor\""));
  EXPECT_EQ(e.item_bytes("layers.0-1.attn.q", kStates), 192u * 4 * 2);
  EXPECT_EQ(e.item_bytes("layers.0-1.attn.k", kStates), 128u * 4 * 2);
  EXPECT_EQ(e.item_bytes("layers.0-1.attn.o", kStates), 128u * 4 * 2);
}

// Mixture of experts, 4 experts of SwiGLU width 32: the experts item is
// 4 x 3 = 12 matrices of 64 x 32, 12 x (64 + 32) = 1,152 values; the router
// is one 64 x 4 matrix, 64 + 4 = 68.
TEST(Adafactor, ExpertsAndRouter) {
  const std::string moe =
      "[model]\nlayers = 2\nhidden = 64\nheads = 4\nkv_heads = 2\nvocab = 1000\nmlp = \"swiglu\"\n"
      "[model.moe]\nexperts = 4\ntop_k = 2\nexpert_ffn_hidden = 32\n";
  const Evaluation e = evaluate_paper(train(moe, "use = \"fp32\"", "use = \"adafactor\""));
  EXPECT_EQ(e.item_bytes("layers.0-1.moe.experts", kStates), 1'152u * 4 * 2);
  EXPECT_EQ(e.item_bytes("layers.0-1.moe.router", kStates), 68u * 4 * 2);
}

TEST(Adafactor, Errors) {
  EXPECT_EQ(error_of(train(params_model(1e9), "use = \"fp32\"", "use = \"adafactor\""), "a.toml"),
            "a.toml:11:7: error: in [optimizer], optimizer plugin 'adafactor': adafactor keeps a row and a column "
            "vector per weight matrix, so it needs the matrices' shapes; give the model's architecture (a preset, or "
            "layers, hidden, heads, ...) instead of only params (plugin library " +
                plugin_dir() + "/memplan-adafactor.so)");
  // Line 18 of the tiny scenario is the first key after `use` in [optimizer].
  EXPECT_EQ(error_of(train(kTinyModel, "use = \"fp32\"", "use = \"adafactor\"\nbeta1 = 1.5"), "a.toml"),
            "a.toml:18:9: error: in [optimizer], optimizer plugin 'adafactor', option 'beta1': must be in [0, 1), got "
            "1.5 (plugin library " + plugin_dir() + "/memplan-adafactor.so)");
  EXPECT_EQ(error_of(train(kTinyModel, "use = \"fp32\"", "use = \"adafactor\"\nbeta1 = 0.9\nfirst_moment = false"),
                     "a.toml"),
            "a.toml:18:9: error: in [optimizer], optimizer plugin 'adafactor', option 'beta1': keeps a first moment "
            "(Hugging Face's Adafactor keeps exp_avg whenever beta1 is set), but first_moment = false; remove one of "
            "the two (plugin library " + plugin_dir() + "/memplan-adafactor.so)");
}

// ---------------------------------------------------------------------------
// adam-8bit: bitsandbytes' Adam8bit (Dettmers et al. 2022, arXiv 2110.02861).
// Per tensor of n elements: two 1-byte codes per element and one fp32 absmax
// per block and state, 2n + 8 ceil(n / B) bytes; tensors under 4096 elements
// keep two fp32 states, 8n bytes (bitsandbytes/optim/optimizer.py).

// Tiny model, B = 256 (bitsandbytes >= 0.44):
//   embed_tokens, lm_head  64,000 elements: codes 128,000, 250 blocks: absmax 2,000
//   q, o (4,096 each)      codes 8,192, 16 blocks: absmax 128, per layer
//   MLP (3 x 8,192)        codes 49,152, 96 blocks: absmax 768, per layer
//   k, v (2,048 < 4,096)   fp32: 16,384 each, per layer
//   norms (2 x 64)         fp32: 1,024 per layer; final_norm (64) fp32: 512
//   codes  2 x 128,000 + 2 layers x (2 x 8,192 + 49,152)      = 387,072
//   absmax 2 x 2,000 + 2 layers x (2 x 128 + 768)              =   6,048
//   fp32   2 layers x (2 x 16,384 + 1,024) + 512               =  68,096
//   total                                                      = 461,216
TEST(Adam8bit, BlockwiseStatesOfTheTinyModel) {
  const Evaluation e = evaluate_paper(train(kTinyModel, "use = \"fp32\"", "use = \"adam-8bit\""));
  EXPECT_EQ(e.component(kStates), 461'216u);
  EXPECT_EQ(e.item_bytes("embed_tokens", kStates), 128'000u);
  EXPECT_EQ(e.item_bytes("embed_tokens.absmax", kStates), 2'000u);
  EXPECT_EQ(e.item_bytes("layers.0-1.mlp", kStates), 2u * 49'152);
  EXPECT_EQ(e.item_bytes("layers.0-1.mlp.absmax", kStates), 2u * 768);
  EXPECT_EQ(e.item_bytes("layers.0-1.attn.k.fp32", kStates), 2u * 16'384);
  EXPECT_EQ(e.item_bytes("layers.0-1.attn.k", kStates), 0u);
  EXPECT_EQ(e.item_bytes("final_norm.fp32", kStates), 512u);
}

// B = 2048 (the paper, bitsandbytes <= 0.43): blocks embed ceil(64,000 / 2,048)
// = 32, q and o 2, MLP 3 x 4 = 12. absmax 2 x 256 + 2 layers x (2 x 16 + 96)
// = 768; total 387,072 + 768 + 68,096 = 455,936.
TEST(Adam8bit, PaperBlockSize) {
  const Evaluation e = evaluate_paper(train(kTinyModel, "use = \"fp32\"", "use = \"adam-8bit\"\nblock_size = 2048"));
  EXPECT_EQ(e.component(kStates), 455'936u);
  EXPECT_EQ(e.item_bytes("embed_tokens.absmax", kStates), 256u);
}

// min_8bit_size = 0: every tensor 8-bit. Codes 2 x 202,048 = 404,096; blocks
// 250 + 250 + 2 layers x (16 + 8 + 8 + 16 + 96 + 2 norms x 1) + 1 = 793,
// absmax 8 x 793 = 6,344; total 410,440.
TEST(Adam8bit, MinimumSizeForEightBits) {
  const Evaluation e = evaluate_paper(train(kTinyModel, "use = \"fp32\"", "use = \"adam-8bit\"\nmin_8bit_size = 0"));
  EXPECT_EQ(e.component(kStates), 410'440u);
}

// The states are bitsandbytes' own dtypes, whatever the recipe says, and the
// fused update adds no temporaries: the optimizer step is persistent + gradients.
TEST(Adam8bit, IgnoresTheRecipesStateDtypeAndAddsNoTemporaries) {
  const Evaluation bf16 = evaluate_paper(train(kTinyModel, "use = \"bf16\"", "use = \"adam-8bit\""));
  EXPECT_EQ(bf16.component(kStates), 461'216u);
  EXPECT_EQ(bytes_of(bf16, kStates, MEMPLAN_LIFETIME_TRANSIENT_OPTIMIZER), 0u);
  // bf16 weights 2 x 202,048 = 404,096, gradients the same.
  EXPECT_EQ(optimizer_step(bf16), 404'096u + 461'216u + 404'096u);
}

// in_backward (torchtune's optimizer_in_bwd, one bitsandbytes optimizer per
// parameter stepped in its post-accumulate-grad hook, the gradient then freed:
// torchtune @ 1814feb17a90 training/memory.py register_optim_in_bwd_hooks).
// Tiny model in bf16: the states are unchanged (461,216); the gradients become
// one tensor, the largest trainable one, embed_tokens' 64,000 elements x 2 B =
// 128,000, at the backward high point, and none in the optimizer phase. The
// in-place 8-bit kernel adds no temporaries: optimizer = weights 404,096 +
// states 461,216 = 865,312; backward = 865,312 + 128,000 = 993,312.
TEST(Adam8bit, InBackwardKeepsOneGradientAndNoTemporaries) {
  const Evaluation e = evaluate_paper(train(kTinyModel, "use = \"bf16\"", "use = \"adam-8bit\"\nin_backward = true"));
  EXPECT_EQ(e.component(kStates), 461'216u);
  EXPECT_EQ(e.component(MEMPLAN_ROLE_GRADIENTS), 128'000u);
  EXPECT_EQ(e.item_bytes("gradients.in_backward", MEMPLAN_ROLE_GRADIENTS), 128'000u);
  EXPECT_EQ(bytes_of(e, MEMPLAN_ROLE_GRADIENTS, MEMPLAN_LIFETIME_GRADIENT), 0u);
  EXPECT_EQ(optimizer_step(e), 865'312u);
  EXPECT_EQ(e.breakdown().timeline[kBackward], 993'312u);
  EXPECT_EQ(error_of("name = \"t\"\nmode = \"train\"\n" + kTinyModel +
                         "[batch]\ngrad_accum = 2\n[precision]\nuse = \"bf16\"\n[optimizer]\nuse = \"adam-8bit\"\n"
                         "in_backward = true\n[activations]\nuse = \"none\"\n",
                     "a.toml"),
            "a.toml:17:15: error: in [optimizer], optimizer plugin 'adam-8bit', option 'in_backward': steps each "
            "parameter as its gradient appears, so gradients cannot accumulate over micro-batches; set [batch] "
            "grad_accum = 1 or in_backward = false (plugin library " + plugin_dir() + "/memplan-adam-8bit.so)");
}

// library = "torchao": torchao.prototype.low_bit_optim AdamW8bit (pytorch/ao
// @ v0.7.0, f04aec72a4e4). States (adam.py _new_buffer): 8-bit codes with one
// fp32 scale per block of 256 only for tensors of >= 4096 elements that are a
// multiple of 256, else torch.zeros_like(p), in the weight's dtype. Tiny model
// in bf16: every 8-bit tensor is a multiple of 256 (embed_tokens and lm_head
// 64,000 = 250 blocks), k and v (2,048) and the norms stay small as above but
// in bf16: 68,096 / 2 = 34,048; states 387,072 + 6,048 + 34,048 = 427,168.
// The step (adam.py single_param_adam, torch.compile'd per tensor, one tensor
// at a time) keeps the tensor's two new moments in fp32 while it re-quantizes
// them and updates the weight ("keep high precision copy for param update"):
// 2 x 4 B per element of the largest tensor, 64,000 x 8 = 512,000 (Inductor,
// PyTorch 2.11, H100: 8.04 B per element for a 128,256 x 3,072 tensor,
// docs/formulas.md). Without in_backward they meet all gradients: optimizer
// step = weights 404,096 + states 427,168 + gradients 404,096 + 512,000 =
// 1,747,360.
TEST(Adam8bit, TorchaoStatesAndStepMoments) {
  const Evaluation e = evaluate_paper(train(kTinyModel, "use = \"bf16\"", "use = \"adam-8bit\"\nlibrary = \"torchao\""));
  EXPECT_EQ(e.component(kStates), 427'168u + 512'000u);
  EXPECT_EQ(e.item_bytes("layers.0-1.attn.k.fp32", kStates), 16'384u);
  EXPECT_EQ(bytes_of(e, kStates, MEMPLAN_LIFETIME_TRANSIENT_OPTIMIZER), 512'000u);
  EXPECT_EQ(e.item_bytes("optimizer_states.step_fp32_moments", kStates), 512'000u);
  EXPECT_EQ(optimizer_step(e), 1'747'360u);
}

// torchao with in_backward, untied: lm_head (64,000) is stepped in its hook
// right after its own backward, inside backward: its moments join the one
// gradient at the backward high point: 404,096 + 427,168 + 128,000 + 512,000 =
// 1,471,264; the optimizer phase is weights + states, 831,264.
// Tied (tied_embeddings = true, no lm_head item): the embedding's gradient is
// complete only after the lookup's backward, the last of backward (PyTorch
// torch/_tensor.py register_post_accumulate_grad_hook: "called after all
// gradients for a tensor have been accumulated"), when no activation is left:
// weights 138,048 x 2 = 276,096, states 427,168 - 130,000 = 297,168; backward
// = 276,096 + 297,168 + 128,000 = 701,264; optimizer = that + 512,000 =
// 1,213,264.
TEST(Adam8bit, TorchaoInBackwardStepsTheLargestTensorWhereItsGradientIsComplete) {
  const std::string optimizer = "use = \"adam-8bit\"\nlibrary = \"torchao\"\nin_backward = true";
  const Evaluation untied = evaluate_paper(train(kTinyModel, "use = \"bf16\"", optimizer));
  EXPECT_EQ(bytes_of(untied, kStates, MEMPLAN_LIFETIME_TRANSIENT_BACKWARD), 512'000u);
  EXPECT_EQ(untied.breakdown().timeline[kBackward], 1'471'264u);
  EXPECT_EQ(optimizer_step(untied), 831'264u);
  const Evaluation tied =
      evaluate_paper(train(kTinyModel + "tied_embeddings = true\n", "use = \"bf16\"", optimizer));
  EXPECT_EQ(bytes_of(tied, kStates, MEMPLAN_LIFETIME_TRANSIENT_OPTIMIZER), 512'000u);
  EXPECT_EQ(tied.item_bytes("gradients.in_backward.last", MEMPLAN_ROLE_GRADIENTS), 128'000u);
  EXPECT_EQ(tied.breakdown().timeline[kBackward], 701'264u);
  EXPECT_EQ(optimizer_step(tied), 1'213'264u);
}

TEST(Adam8bit, Errors) {
  EXPECT_EQ(error_of(train(kTinyModel, "use = \"fp32\"", "use = \"adam-8bit\"\nblock_size = 0"), "a.toml"),
            "a.toml:18:14: error: in [optimizer], optimizer plugin 'adam-8bit', option 'block_size': must be a "
            "positive integer, got 0 (plugin library " + plugin_dir() + "/memplan-adam-8bit.so)");
  EXPECT_EQ(error_of(train(kTinyModel, "use = \"fp32\"", "use = \"adam-8bit\"\nmin_8bit_size = -1"), "a.toml"),
            "a.toml:18:17: error: in [optimizer], optimizer plugin 'adam-8bit', option 'min_8bit_size': must be 0 or "
            "more, got -1 (plugin library " + plugin_dir() + "/memplan-adam-8bit.so)");
  EXPECT_EQ(error_of(train(kTinyModel, "use = \"fp32\"", "use = \"adam-8bit\"\nlibrary = \"apex\""), "a.toml"),
            "a.toml:18:11: error: in [optimizer], optimizer plugin 'adam-8bit', option 'library': is \"apex\", not a "
            "library; use \"bitsandbytes\" or \"torchao\" (plugin library " + plugin_dir() + "/memplan-adam-8bit.so)");
}

// ---------------------------------------------------------------------------
// adam-4bit: torchao's AdamW4bit (pytorch/ao @ 1e7f132e3, torchao/prototype/
// low_bit_optim; the same layout at 36027d82d, torchao/optim). Per quantized
// tensor of n elements and per moment (subclass_4bit.py OptimState4bit.zeros):
// n / 2 bytes of packed codes and n / B fp32 scales; adam.py _new_buffer
// quantizes only tensors of >= 4096 elements that are a whole number of
// blocks, the others keep torch.zeros_like(p) (the weight's dtype).
//
// Tiny model in bf16, B = 128:
//   embed_tokens, lm_head  64,000 = 500 blocks: codes 2 x 32,000 = 64,000,
//                          scales 2 x 500 x 4 = 4,000 each
//   q, o (4,096 = 32 blocks)   codes 2 x 2,048 = 4,096, scales 256, per tensor
//   MLP (3 x 8,192 = 64 blocks) codes 3 x 8,192 = 24,576, scales 1,536
//   k, v (2,048 < 4,096)   bf16: 2 x 2,048 x 2 = 8,192 each
//   norms (2 x 64)         bf16: 512 per layer; final_norm 256
//   codes    2 x 64,000 + 2 layers x (2 x 4,096 + 24,576)        = 193,536
//   scales   2 x 4,000 + 2 layers x (2 x 256 + 1,536)            =  12,096
//   bf16     2 layers x (2 x 8,192 + 512) + 256                  =  34,048
//   total                                                        = 239,680
// The step is torchao's single_param_adam, as for its 8-bit states: both new
// moments in fp32 for the largest tensor, 64,000 x 8 = 512,000. Optimizer
// step = weights 404,096 + states 239,680 + gradients 404,096 + 512,000 =
// 1,559,872.
TEST(Adam4bit, PackedStatesOfTheTinyModel) {
  const Evaluation e = evaluate_paper(train(kTinyModel, "use = \"bf16\"", "use = \"adam-4bit\""));
  EXPECT_EQ(e.component(kStates), 239'680u + 512'000u);
  EXPECT_EQ(e.item_bytes("embed_tokens", kStates), 64'000u);
  EXPECT_EQ(e.item_bytes("embed_tokens.scale", kStates), 4'000u);
  EXPECT_EQ(e.item_bytes("layers.0-1.mlp", kStates), 2u * 24'576);
  EXPECT_EQ(e.item_bytes("layers.0-1.mlp.scale", kStates), 2u * 1'536);
  EXPECT_EQ(e.item_bytes("layers.0-1.attn.k.unquantized", kStates), 2u * 8'192);
  EXPECT_EQ(e.item_bytes("final_norm.unquantized", kStates), 256u);
  EXPECT_EQ(e.item_bytes("optimizer_states.step_fp32_moments", kStates), 512'000u);
  EXPECT_EQ(bytes_of(e, kStates, MEMPLAN_LIFETIME_TRANSIENT_OPTIMIZER), 512'000u);
  EXPECT_EQ(optimizer_step(e), 1'559'872u);
}

// B = 8,192: a tensor that is not a whole number of blocks keeps bf16 states.
//   embed_tokens, lm_head  64,000 (not a multiple): 2 x 64,000 x 2 = 256,000 each
//   q, o 4,096 (not a multiple): 16,384 each; k, v 8,192 for both layers' each
//   MLP 8,192 = 1 block: codes 2 x 4,096 = 8,192 and scales 2 x 4 = 8 per tensor
//   per layer: bf16 2 x 16,384 + 2 x 8,192 + 512 = 49,664; MLP 3 x 8,200 = 24,600
//   total 512,000 + 2 x (49,664 + 24,600) + 256 = 660,784
TEST(Adam4bit, TensorsNotAWholeNumberOfBlocksKeepTheWeightsDtype) {
  const Evaluation e =
      evaluate_paper(train(kTinyModel, "use = \"bf16\"", "use = \"adam-4bit\"\nblock_size = 8192"));
  EXPECT_EQ(e.component(kStates) - e.item_bytes("optimizer_states.step_fp32_moments", kStates), 660'784u);
  EXPECT_EQ(e.item_bytes("embed_tokens.unquantized", kStates), 256'000u);
  EXPECT_EQ(e.item_bytes("layers.0-1.mlp.scale", kStates), 2u * 24u);
}

TEST(Adam4bit, Errors) {
  EXPECT_EQ(error_of(train(kTinyModel, "use = \"bf16\"", "use = \"adam-4bit\"\nblock_size = 127"), "a.toml"),
            "a.toml:18:14: error: in [optimizer], optimizer plugin 'adam-4bit', option 'block_size': must be even "
            "(two 4-bit codes share a byte), got 127 (plugin library " + plugin_dir() + "/memplan-adam-4bit.so)");
  EXPECT_EQ(error_of(train(kTinyModel, "use = \"bf16\"", "use = \"adam-4bit\"\nblock_size = 0"), "a.toml"),
            "a.toml:18:14: error: in [optimizer], optimizer plugin 'adam-4bit', option 'block_size': must be a "
            "positive integer, got 0 (plugin library " + plugin_dir() + "/memplan-adam-4bit.so)");
}

}  // namespace
}  // namespace memplan::testing::optimizers
