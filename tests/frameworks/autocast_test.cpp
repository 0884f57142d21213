// PyTorch automatic mixed precision over fp32 weights (the `autocast`
// precision recipe and the megatron plugin's eager layers under autocast):
// docs/formulas.md, "Eager layers under autocast". Sources:
// pytorch/pytorch aten/src/ATen/autocast_mode.cpp @ 008ec6b1840c94ff6d0f685bc10fbf585167c673
// (cached_cast: casts of fp32 leaves that require grad are cached until the
// outermost autocast exits; layer_norm on the fp32 list, linear on the
// lower-precision list) and torch/utils/checkpoint.py @
// 0008d771a4015b0b43165ea470653b52e92b2148 (CheckpointFunction: no-grad
// forward inside the caller's autocast, recompute under the saved autocast
// state). Every figure is the hand count written beside it.
#include <gtest/gtest.h>

#include <string>

#include "../../plugins/activations/megatron/transformer_activations.hpp"
#include "layer_shapes.hpp"
#include "test_support.hpp"

namespace memplan::testing {
namespace {

using plugins::ActivationSettings;
using plugins::LayerImplementation;
using plugins::RecomputePolicy;
using plugins::TransformerShape;

// Two layers, h 64, 4 heads, 2 kv heads, SwiGLU f 128, vocab 1000, untied:
// 202,048 parameters; the linear layers (q 4,096, k 2,048, v 2,048, o 4,096,
// MLP 24,576 per layer) 73,728, the LM head 64,000, the embedding 64,000 and
// the norms 320.
const std::string kTiny =
    "[model]\nlayers = 2\nhidden = 64\nheads = 4\nkv_heads = 2\nffn_hidden = 128\nvocab = 1000\nmlp = \"swiglu\"\n";

std::string tiny_train(const std::string& precision, const std::string& extra = "") {
  return "name = \"t\"\nmode = \"train\"\n" + kTiny + "[batch]\nmicro_batch = 1\nseq_len = 16\n[precision]\n" +
         precision + "\n[optimizer]\nuse = \"adam\"\n[activations]\nuse = \"none\"\n" + extra;
}

// fp32 weights (4) and Adam's fp32 moments (8) are there from the start, no
// master copy: init 12 x 202,048 = 2,424,576 bytes (mixed-fp16 with fp32
// gradients, the old mapping of such runs, has 2 + 4 + 8 = 14 per parameter).
// The 16-bit casts of the trained linear weights and the LM head,
// 2 x (73,728 + 64,000) = 275,456 bytes, exist from forward to backward only:
// forward 2,424,576 + 275,456 = 2,700,032. The embedding (not tied) and the
// norms get none.
TEST(Autocast, Fp32StatesAndCastsFromForwardToBackward) {
  const Evaluation e = evaluate_paper(tiny_train("use = \"autocast\""));
  EXPECT_EQ(e.component(MEMPLAN_ROLE_WEIGHTS), 4u * 202'048);
  EXPECT_EQ(e.component(MEMPLAN_ROLE_GRADIENTS), 4u * 202'048);
  EXPECT_EQ(e.component(MEMPLAN_ROLE_MASTER_WEIGHTS), 0u);
  EXPECT_EQ(e.component(MEMPLAN_ROLE_BUFFERS), 275'456u);
  EXPECT_EQ(e.item_bytes("layers.0-1.mlp.autocast", MEMPLAN_ROLE_BUFFERS), 2u * 24'576 * 2);
  EXPECT_EQ(e.item_bytes("lm_head.autocast", MEMPLAN_ROLE_BUFFERS), 2u * 64'000);
  EXPECT_EQ(e.item_bytes("embed_tokens.autocast", MEMPLAN_ROLE_BUFFERS), 0u);
  EXPECT_EQ(e.breakdown().timeline[kInit], 2'424'576u);
  EXPECT_EQ(e.breakdown().timeline[kForward], 2'700'032u);
  // The casts are not parameters.
  EXPECT_DOUBLE_EQ(e.breakdown().params_total, 202'048.0);
  // bf16 autocast casts to 2 bytes as well; with fp32 "activations" autocast is off: no casts.
  EXPECT_EQ(evaluate_paper(tiny_train("use = \"autocast\"\nactivations = \"bf16\"")).component(MEMPLAN_ROLE_BUFFERS),
            275'456u);
  EXPECT_EQ(evaluate_paper(tiny_train("use = \"autocast\"\nactivations = \"fp32\"")).component(MEMPLAN_ROLE_BUFFERS),
            0u);
}

// A tied LM head is F.linear with the embedding's weight: its cast is cached
// and saved, 2 x 64,000 = 128,000 bytes beside the linear layers' 147,456.
TEST(Autocast, TiedEmbeddingIsCastForTheHead) {
  const Evaluation e =
      evaluate_paper("name = \"t\"\nmode = \"train\"\n" + kTiny + "tied_embeddings = true\n" +
                     "[batch]\nmicro_batch = 1\nseq_len = 16\n[precision]\nuse = \"autocast\"\n[optimizer]\n"
                     "use = \"adam\"\n[activations]\nuse = \"none\"\n");
  EXPECT_EQ(e.item_bytes("embed_tokens.autocast", MEMPLAN_ROLE_BUFFERS), 128'000u);
  EXPECT_EQ(e.component(MEMPLAN_ROLE_BUFFERS), 128'000u + 147'456u);
}

// The casts follow their weights through the layout: tensor parallelism 2
// halves the linear layers and the (vocabulary-parallel) LM head: 137,728.
TEST(Autocast, SplitWithTheirWeights) {
  EXPECT_EQ(evaluate_paper(tiny_train("use = \"autocast\"", "[[strategy]]\nuse = \"tensor-parallel\"\nsize = 2\n"))
                .component(MEMPLAN_ROLE_BUFFERS),
            137'728u);
}

// Lines: 14 [precision], 15 use, 16 the option (18 after the two lines `paper` inserts).
TEST(Autocast, Errors) {
  const std::string library = " (plugin library " + plugin_dir() + "/memplan-autocast.so)";
  EXPECT_EQ(error_of(paper(tiny_train("use = \"autocast\"\nactivations = \"fp8\"")), "a.toml"),
            "a.toml:18:15: error: in [precision], precision plugin 'autocast', option 'activations': is the dtype "
            "autocast computes in: \"fp16\" (the default) or \"bf16\"" + library);
  const std::string infer = "name = \"t\"\nmode = \"infer\"\n" + kTiny +
                            "[batch]\nmicro_batch = 1\nseq_len = 16\n[precision]\nuse = \"autocast\"\n"
                            "[activations]\nuse = \"none\"\n";
  EXPECT_EQ(error_of(infer, "a.toml"),
            "a.toml:15:7: error: in [precision], precision plugin 'autocast': models autocast training (fp32 "
            "weights, gradients and states, 16-bit casts of the trained weights kept for backward), so it needs "
            "mode = \"train\"; for inference use [precision] use = \"bf16\" or \"fp32\"" + library);
}

// BERT-large (h 1024, 16 heads, f 4096, s 512), eager attention with dropout,
// LayerNorm, GELU, torch <= 1.10 (softmax input kept), under fp16 autocast
// over fp32 weights, per token of one layer:
//   two LayerNorms with fp32 inputs       2 x (4h + 8)      = 8,208
//   q, k, v each cast the fp32 norm output 3 x 2h          = 6,144
//   the MLP's first linear casts it        2h               = 2,048
//   residual dropout masks                 2h               = 2,048
//   q and the attention output (o's input) 2 x 2h, k and v 2 x 2h = 8,192
//   GELU MLP: fc1's output and GELU's       2 x 2f          = 16,384
//   attention: fp32 softmax input and output, 1-byte mask, the fp16 cast the
//   PV matmul saves: (4 + 4 + 1 + 2) as = 11 x 16 x 512     = 90,112
// = 133,136 bytes. At p = 2 with the softmax upcast but no autocast
// (softmax(x, dtype=float32) on fp16 takes _softmax's half_to_float path and
// keeps the fp16 input, not an fp32 copy): the fp16 LayerNorm inputs and one
// shared q/k/v input, 8h = 8,192 less, and the kept input at 2 B, 2as = 16,384
// less: 133,136 - 8,192 - 16,384 = 108,560. In pure fp16 without the upcast (HF BERT's eager
// attention calls softmax(scores, dim=-1) in the scores' dtype) the softmax's
// input and output are fp16 and its output is the PV matmul's input: (2 + 2 +
// 1 + 2) as = 7 x 8,192 in place of the upcast's (2 + 4 + 1 + 2) as = 9 x 8,192:
// 108,560 - 16,384 = 92,176.
TEST(Autocast, HuggingFaceBertLayerPerToken) {
  const TransformerShape x = bert_large_layer();
  ActivationSettings o = bert_eager(2);
  o.eager.softmax_keeps_input = true;
  ActivationSettings autocast = o;
  autocast.residual_bytes = 4;
  EXPECT_DOUBLE_EQ(plugins::stored_bytes_per_layer(x, autocast), 133'136.0 * 512);
  EXPECT_DOUBLE_EQ(plugins::stored_bytes_per_layer(x, o), 92'176.0 * 512);
  o.eager.softmax_upcast = true;
  EXPECT_DOUBLE_EQ(plugins::stored_bytes_per_layer(x, o), 108'560.0 * 512);
  // Full recomputation keeps the layer's fp32 input: 4h = 4,096 bytes per token (2h without autocast).
  autocast.recompute = RecomputePolicy::full;
  EXPECT_DOUBLE_EQ(plugins::stored_bytes_per_layer(x, autocast), 4'096.0 * 512);
}

// Llama-3.2-3B (h 3072, 24 heads, 8 kv heads, f 8192), SDPA flash, K/V
// repeated: 139,368 bytes per token at p = 2 without autocast
// (eager_layers_test.cpp). Under autocast over fp32 weights: each RMSNorm's
// normalized copy is cast back to the fp32 input dtype (+2h each, +4h), q, k
// and v each keep a cast of the norm output (+2 x 2h), gate and up each one
// (+2h): +10h = 30,720, 170,088 bytes.
TEST(Autocast, LlamaLayerPerToken) {
  ActivationSettings o = eager_bf16_flash();
  o.residual_bytes = 4;
  EXPECT_DOUBLE_EQ(plugins::stored_bytes_per_layer(llama(3072, 24, 8, 8192), o), 170'088.0);
}

// Through the plugins: BERT-large, one sequence of 512, fp16 autocast, SGD,
// eager layers, gradient checkpointing (full). Per layer the casts are
// 2 x (4 x 1,049,600 + 8,393,728) = 25,184,256 bytes (q, k, v, o with their
// biases; the MLP's two matrices and biases), the pooler's 2 x 1,049,600.
// The checkpointed no-grad forward still fills autocast's cache, so at the
// forward's end all 24 layers' casts are alive with the stored fp32 layer
// inputs (24 x 4 x 512 x 1024 = 50,331,648), the embedding dropout's mask
// (524,288) and the pooler's cast: forward - init = 604,422,144 + 50,331,648
// + 524,288 + 2,099,200 = 657,377,280. Backward's recomputation holds one
// layer's casts (activations.recompute.autocast, 25,184,256).
TEST(Autocast, CheckpointedLayersCacheCastsUntilTheForwardEnds) {
  const std::string bert = "name = \"b\"\nmode = \"train\"\n[model]\npreset = \"bert-large-uncased\"\n[batch]\n"
                           "seq_len = 512\n[precision]\nuse = \"autocast\"\n[optimizer]\nuse = \"sgd\"\n"
                           "[activations]\nuse = \"megatron\"\nlayer = \"eager\"\nsoftmax_keeps_input = true\n";
  const Evaluation stored = evaluate_paper(bert);
  EXPECT_EQ(stored.item_bytes("layers.0-23.activations", MEMPLAN_ROLE_ACTIVATIONS), 24ull * 133'136 * 512);
  EXPECT_EQ(stored.item_bytes("activations.recompute.autocast", MEMPLAN_ROLE_BUFFERS), 0u);
  const Evaluation e = evaluate_paper(bert + "[[strategy]]\nuse = \"recompute\"\npolicy = \"full\"\n");
  EXPECT_EQ(e.item_bytes("layers.0-23.activations", MEMPLAN_ROLE_ACTIVATIONS), 50'331'648u);
  EXPECT_EQ(e.item_bytes("activations.recompute.autocast", MEMPLAN_ROLE_BUFFERS), 25'184'256u);
  EXPECT_EQ(e.breakdown().timeline[kForward] - e.breakdown().timeline[kInit], 657'377'280u);
}

}  // namespace
}  // namespace memplan::testing
