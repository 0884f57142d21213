// The torchtune README's "Memory and training speed" table (pytorch/torchtune
// @ 30b8519e86d2, 2024-09-24): which batch its Llama 3.1 405B QLoRA row ran
// (validation/TT31-405b-qlora-fsdp8.toml, header "batch"), and what its 70B
// LoRA row leaves room for (below).
//
// The table's note says batch size 2 for every row; the row's config
// (recipes/configs/llama3_1/405B_qlora.yaml at that commit) says
// "batch_size: 1". At two samples of 2048 packed tokens the tensors that the
// code keeps alive at the end of forward already exceed the printed figure,
// 44.8 GiB = 48,103,633,715 B. Hand derivation, per GPU of 8 (FSDP2):
//
//   NF4 layer weights (torchao to_nf4: 4-bit codes, an int8 scaler per 64
//   values, an fp32 factor per 256 scalers: 0.5 + 1/64 + 4/16384 B per value),
//   sharded over 8:
//     per layer q, o 16384 x 16384, k, v 1024 x 16384, gate/up/down
//     3 x 53248 x 16384 = 3,187,671,040 values; x 126 layers
//     = 401,646,551,040 x 0.515869140625 / 8            = 25,899,632,640 B
//   the root (embedding, output, final norm) gathered from forward to the end
//   of backward (FSDP2 _lazy_init: the root's post_forward_mesh_info = None):
//     (2 x 128256 x 16384 + 16384) x 2 B                 =  8,405,417,984 B
//     and its own bf16 shards, 1/8 of that               =  1,050,677,248 B
//   the LoRA adapters (rank 16 on q, k, v, o and the MLP), bf16, sharded:
//     126 x 16 x (2 x 32768 + 2 x 17408 + 3 x 69632) x 2 B / 8
//                                                        =    155,860,992 B
//     and their two AdamW states                         =    311,721,984 B
//   the 126 checkpointed layer inputs (checkpoint_wrapper on every layer):
//     126 x 2 x 2048 x 16384 x 2 B                      = 16,911,433,728 B
//   sum at 2 samples                                     = 52,734,744,576 B
//   sum at 1 sample (the inputs halved)                  = 44,279,027,712 B
#include <gtest/gtest.h>

#include <string>

#include "test_support.hpp"

namespace memplan::testing {
namespace {

constexpr uint64_t kMeasured = 48'103'633'715;  // 44.8 x 2^30, the row as printed

uint64_t floor_at_end_of_forward(const Evaluation& e) {
  uint64_t nf4 = 0;
  for (const char* name : {"layers.0-125.attn.q", "layers.0-125.attn.k", "layers.0-125.attn.v",
                           "layers.0-125.attn.o", "layers.0-125.mlp"})
    nf4 += e.item_bytes(name, MEMPLAN_ROLE_WEIGHTS);
  EXPECT_EQ(nf4, 25'899'632'640u);
  const uint64_t root_shards = e.item_bytes("embed_tokens", MEMPLAN_ROLE_WEIGHTS) +
                               e.item_bytes("lm_head", MEMPLAN_ROLE_WEIGHTS) +
                               e.item_bytes("final_norm", MEMPLAN_ROLE_WEIGHTS);
  EXPECT_EQ(root_shards, 1'050'677'248u);
  uint64_t adapters = 0, adapter_states = 0;
  for (const char* name : {"layers.0-125.lora.attn.q", "layers.0-125.lora.attn.k", "layers.0-125.lora.attn.v",
                           "layers.0-125.lora.attn.o", "layers.0-125.lora.mlp"}) {
    adapters += e.item_bytes(name, MEMPLAN_ROLE_WEIGHTS);
    adapter_states += e.item_bytes(name, MEMPLAN_ROLE_OPTIMIZER_STATES);
  }
  EXPECT_EQ(adapters, 155'860'992u);
  EXPECT_EQ(adapter_states, 311'721'984u);
  // The root's gathered copy: fsdp_root_parameters elements in bf16.
  uint64_t root_gathered = 0;
  for (const auto& [key, value] : e.estimator().report_details())
    if (key == "fsdp_root_parameters") root_gathered = 2 * std::stoull(value);
  EXPECT_EQ(root_gathered, 8'405'417'984u);
  const uint64_t inputs = e.item_bytes("layers.0-125.activations", MEMPLAN_ROLE_ACTIVATIONS);
  return nf4 + root_shards + adapters + adapter_states + root_gathered + inputs;
}

TEST(TorchtuneReadme, Qlora405bAtTwoSamplesExceedsTheRow) {
  const std::string case_text = validation_case("TT31-405b-qlora-fsdp8");
  const std::string one = "micro_batch = 1\n";
  ASSERT_NE(case_text.find(one), std::string::npos);
  ASSERT_NE(case_text.find("# measured_bytes = 48103633715\n"), std::string::npos);

  std::string two_samples = case_text;
  two_samples.replace(two_samples.find(one), one.size(), "micro_batch = 2\n");
  const Evaluation two = evaluate(two_samples, "TT31-405b-qlora-fsdp8.toml");
  EXPECT_EQ(two.item_bytes("layers.0-125.activations", MEMPLAN_ROLE_ACTIVATIONS), 16'911'433'728u);
  const uint64_t floor_two = floor_at_end_of_forward(two);
  EXPECT_EQ(floor_two, 52'734'744'576u);
  EXPECT_GT(floor_two, kMeasured);  // two samples cannot fit under the printed figure

  const Evaluation one_sample = evaluate(case_text, "TT31-405b-qlora-fsdp8.toml");
  EXPECT_EQ(one_sample.item_bytes("layers.0-125.activations", MEMPLAN_ROLE_ACTIVATIONS), 8'455'716'864u);
  const uint64_t floor_one = floor_at_end_of_forward(one_sample);
  EXPECT_EQ(floor_one, 44'279'027'712u);
  EXPECT_LT(floor_one, kMeasured);
}

// The table's Llama 3.1 70B LoRA row (27.6 GiB = 29,635,274,342 B;
// validation/TT31-70b-lora-fsdp8.toml, header "gap analysis"): at the note's
// 2 x 2048 tokens, what FSDP2 and checkpointing keep alive while the last
// layer's backward starts, before its recomputation, is above the figure.
// Hand derivation, per GPU of 8:
//   bf16 layer shards: 80 x (2 x 8192^2 + 2 x 1024 x 8192 + 3 x 28672 x 8192)
//     = 68,451,041,280 x 2 B / 8                          = 17,112,760,320 B
//   the layers' norms 80 x 2 x 8192 x 2 B / 8             =        327,680 B
//   root shards (2 x 128256 x 8192 + 8192) x 2 B / 8      =    525,338,624 B
//   adapters (rank 16 on q, k, v) 80 x 16 x (16384 + 2 x 9216) x 2 B / 8
//                                                         =     11,141,120 B
//     and their two AdamW states                          =     22,282,240 B
//   the root gathered (FSDP2 keeps it unsharded after forward)
//     (2 x 1,050,673,152 + 8192) x 2 B                    =  4,202,708,992 B
//   two layer units (the one in backward and the one FSDPParamGroup.
//     _backward_prefetch gathers next), 856,211,456 elements each with the
//     adapters and norms, x 2 x 2 B                       =  3,424,845,824 B
//   the 80 checkpointed inputs 80 x 2 x 2048 x 8192 x 2 B =  5,368,709,120 B
//   sum                                                   = 30,668,113,920 B
TEST(TorchtuneReadme, Lora70bBackwardBeforeRecomputationExceedsTheRow) {
  const std::string case_text = validation_case("TT31-70b-lora-fsdp8");
  ASSERT_NE(case_text.find("micro_batch = 2\nseq_len = 2048\n"), std::string::npos);
  ASSERT_NE(case_text.find("# measured_bytes = 29635274342\n"), std::string::npos);
  const Evaluation e = evaluate(case_text, "TT31-70b-lora-fsdp8.toml");
  uint64_t layers = 0;
  for (const char* name : {"layers.0-79.attn.q", "layers.0-79.attn.k", "layers.0-79.attn.v", "layers.0-79.attn.o",
                           "layers.0-79.mlp"})
    layers += e.item_bytes(name, MEMPLAN_ROLE_WEIGHTS);
  EXPECT_EQ(layers, 17'112'760'320u);
  const uint64_t norms = e.item_bytes("layers.0-79.norms", MEMPLAN_ROLE_WEIGHTS);
  EXPECT_EQ(norms, 327'680u);
  const uint64_t root_shards = e.item_bytes("embed_tokens", MEMPLAN_ROLE_WEIGHTS) +
                               e.item_bytes("lm_head", MEMPLAN_ROLE_WEIGHTS) +
                               e.item_bytes("final_norm", MEMPLAN_ROLE_WEIGHTS);
  EXPECT_EQ(root_shards, 525'338'624u);
  uint64_t adapters = 0, adapter_states = 0;
  for (const char* name : {"layers.0-79.lora.attn.q", "layers.0-79.lora.attn.k", "layers.0-79.lora.attn.v"}) {
    adapters += e.item_bytes(name, MEMPLAN_ROLE_WEIGHTS);
    adapter_states += e.item_bytes(name, MEMPLAN_ROLE_OPTIMIZER_STATES);
  }
  EXPECT_EQ(adapters, 11'141'120u);
  EXPECT_EQ(adapter_states, 22'282'240u);
  const uint64_t gathered = e.item_bytes("fsdp.gathered_backward", MEMPLAN_ROLE_BUFFERS);
  EXPECT_EQ(gathered, 4'202'708'992ull + 3'424'845'824ull);
  const uint64_t inputs = e.item_bytes("layers.0-79.activations", MEMPLAN_ROLE_ACTIVATIONS);
  EXPECT_EQ(inputs, 5'368'709'120u);
  const uint64_t before_recomputation = layers + norms + root_shards + adapters + adapter_states + gathered + inputs;
  EXPECT_EQ(before_recomputation, 30'668'113'920u);
  EXPECT_GT(before_recomputation, 29'635'274'342u);
}

}  // namespace
}  // namespace memplan::testing
