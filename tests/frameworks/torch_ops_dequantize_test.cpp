// A packed linear layer that dequantizes with PyTorch's own ops and multiplies
// with torch.matmul (megatron packed_dequantize = "torch-ops"): AutoGPTQ
// 0.4.2's qlinear_cuda_old QuantLinear.forward at 128 rows or more unpacks the
// whole int4 matrix through an int32 bitwise_right_shift cast to int8 (5 bytes
// an element at once), scales it to fp16 and calls torch.matmul(x.half(),
// weight); autograd's mm saves that fp16 weight for x's gradient (x needs one
// where LoRA trains beneath), so a layer's matrices stay dequantized from its
// forward to its backward (plugins/activations/megatron/torch_ops_dequantize.hpp;
// docs/formulas.md, "Eager layers", the dequantized weight).
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "../../plugins/activations/megatron/torch_ops_dequantize.hpp"
#include "layer_shapes.hpp"
#include "test_support.hpp"

namespace memplan::testing {
namespace {

// Llama-2-7B's layer (and Qwen-7B's: h 4096, 32 heads without GQA, f 11008):
// q, k, v, o 4096 x 4096 = 16,777,216 elements each, gate, up, down
// 4096 x 11008 = 45,088,768 each.
//   forward (no_grad, nothing saved): the largest unpack, 5 x 45,088,768 = 225,443,840 B;
//   saved per layer: 2 x (4 x 16,777,216 + 3 x 45,088,768) = 2 x 202,375,168 = 404,750,336 B;
//   recomputed: at down's unpack the six matrices before it are saved,
//     2 x (67,108,864 + 90,177,536) + 5 x 45,088,768 = 314,572,800 + 225,443,840 = 540,016,640 B
//     (above the 404,750,336 all seven hold once the recomputation ends);
//   a forward that saves, beyond the layer's whole saves: max over i of 5 m_i - 2 (m_i + ... + m_n), at down
//     5 x 45,088,768 - 2 x 45,088,768 = 135,266,304 B (at up, 225,443,840 - 180,355,072 = 45,088,768).
// Tensor parallelism over 2 splits every matrix: each figure halves.
TEST(TorchOpsDequantize, ALayersMatricesStaySavedInFp16) {
  const plugins::TransformerShape x = llama(4096, 32, 32, 11008);
  const plugins::PackedProjections all{true, true, true};
  const plugins::TorchOpsDequantize d = plugins::torch_ops_dequantize(x, all, 1);
  EXPECT_DOUBLE_EQ(d.forward, 225'443'840.0);
  EXPECT_DOUBLE_EQ(d.saved_per_layer, 404'750'336.0);
  EXPECT_DOUBLE_EQ(d.recomputed, 540'016'640.0);
  EXPECT_DOUBLE_EQ(d.forward_beside_saves, 135'266'304.0);
  const plugins::TorchOpsDequantize split = plugins::torch_ops_dequantize(x, all, 2);
  EXPECT_DOUBLE_EQ(split.recomputed, 540'016'640.0 / 2);
  // Only the attention packed: q, k, v, o; at o's unpack q, k, v are saved,
  // 2 x 3 x 16,777,216 + 5 x 16,777,216 = 184,549,376 B.
  const plugins::TorchOpsDequantize attention = plugins::torch_ops_dequantize(x, {true, true, false}, 1);
  EXPECT_DOUBLE_EQ(attention.recomputed, 184'549'376.0);
  EXPECT_DOUBLE_EQ(attention.saved_per_layer, 2.0 * 4 * 16'777'216);
}

std::string gptq_lora(const std::string& activations, const std::string& strategies) {
  return "name = \"q\"\nmode = \"train\"\n[model]\npreset = \"llama-2-7b\"\n[batch]\nmicro_batch = 1\n"
         "seq_len = 256\n[precision]\nuse = \"quantized\"\nformat = \"gptq\"\nunquantized = \"fp16\"\n"
         "adapters = \"fp16\"\nactivations = \"fp16\"\n[optimizer]\nuse = \"adamw\"\n[activations]\n"
         "use = \"megatron\"\nlayer = \"eager\"\nflash_attention = true\n" +
         activations + "[[strategy]]\nuse = \"lora\"\nrank = 64\ntargets = \"all-linear\"\n" + strategies;
}

// Through the plugin, the same layer: with full recomputation the forward's
// unpack (225,443,840, forward_in_layers) and the recomputed layer's
// 540,016,640 (backward_in_layers): 765,460,480 B. Without recomputation every
// one of the 32 layers keeps its 404,750,336 B to its backward:
// 32 x 404,750,336 = 12,952,010,752 B, stored with the layers, and the
// forward's moment beyond them 135,266,304. Interleaved pipeline stages scale
// them as the other saves: pipeline 4 with 2 virtual stages holds 8 layers and
// (8 micro-batches a step) 4 in flight x 1.375 (Korthikanti et al.'s 1 + (p - 1)/(p v)):
// 8 x 404,750,336 x 4 x 1.375 = 17,809,014,784 B. Offloaded, the stored
// weights go to the host, and torchtune's window of two layers holds theirs:
// the offload window grows by 2 x 404,750,336 = 809,500,672 B. The "kernel" default
// (bitsandbytes' MatMul4Bit, AutoGPTQ's tritonv2) holds the largest matrix,
// 2 x 45,088,768 = 90,177,536 B, in forward and again in backward.
TEST(TorchOpsDequantize, ThroughTheMegatronPlugin) {
  const std::string recompute = "[[strategy]]\nuse = \"recompute\"\npolicy = \"full\"\n";
  const std::string torch_ops = "packed_dequantize = \"torch-ops\"\n";
  const auto dequantized = [](const std::string& toml) {
    return evaluate_paper(toml).item_bytes("activations.dequantized_weight", MEMPLAN_ROLE_ACTIVATIONS);
  };
  EXPECT_EQ(dequantized(gptq_lora(torch_ops, recompute)), 765'460'480u);
  const Evaluation stored = evaluate_paper(gptq_lora(torch_ops, ""));
  EXPECT_EQ(stored.item_bytes("activations.dequantized_weight", MEMPLAN_ROLE_ACTIVATIONS), 135'266'304u);
  EXPECT_EQ(stored.item_bytes("layers.0-31.activations.dequantized_weight", MEMPLAN_ROLE_ACTIVATIONS),
            uint64_t{32} * 404'750'336);
  EXPECT_EQ(dequantized(gptq_lora("", recompute)), 2u * 90'177'536);
  std::string pipeline = gptq_lora(torch_ops, "[[strategy]]\nuse = \"pipeline-parallel\"\nsize = 4\nvirtual_stages = 2\n");
  pipeline.replace(pipeline.find("seq_len = 256\n"), 14, "seq_len = 256\ngrad_accum = 8\n");
  const Evaluation interleaved = evaluate_paper(pipeline);
  EXPECT_EQ(interleaved.item_bytes("layers.0-7.activations.dequantized_weight", MEMPLAN_ROLE_ACTIVATIONS),
            17'809'014'784u);
  const auto window = [](const std::string& dequantize) {
    return evaluate_paper(gptq_lora("offload = true\n" + dequantize, ""))
        .item_bytes("activations.offload_window", MEMPLAN_ROLE_ACTIVATIONS);
  };
  EXPECT_EQ(window(torch_ops) - window(""), 2u * 2 * 404'750'336);  // the window in forward and in backward
}

TEST(TorchOpsDequantize, Errors) {
  const std::string library = " (plugin library " + plugin_dir() + "/memplan-megatron.so)";
  EXPECT_EQ(error_of(gptq_lora("packed_dequantize = \"torch\"\n", ""), "a.toml"),
            "a.toml:20:21: error: in [activations], activations plugin 'megatron', option 'packed_dequantize': "
            "must be \"kernel\" or \"torch-ops\", not \"torch\"" + library);
  EXPECT_EQ(error_of(gptq_lora("packed_dequantize = \"torch-ops\"\ndequantized_copies = 2\n", ""), "a.toml"),
            "a.toml:21:22: error: in [activations], activations plugin 'megatron', option 'dequantized_copies': "
            "describes a dequantizing kernel's temporaries; with packed_dequantize = \"torch-ops\" the matmul saves "
            "the dequantized weight instead: remove one of the two" + library);
  const std::string fp16 =
      "name = \"q\"\nmode = \"train\"\n[model]\npreset = \"llama-2-7b\"\n[batch]\nmicro_batch = 1\nseq_len = 256\n"
      "[precision]\nuse = \"mixed-fp16\"\n[optimizer]\nuse = \"adamw\"\n[activations]\nuse = \"megatron\"\n"
      "layer = \"eager\"\npacked_dequantize = \"torch-ops\"\n";
  const std::string error = error_of(fp16, "a.toml");
  EXPECT_NE(error.find("packed_dequantize = \"torch-ops\" sizes linear layers packed below one byte, and the plan "
                       "has none"),
            std::string::npos)
      << error;
  const std::string moe = error_of(
      "name = \"q\"\nmode = \"train\"\n[model]\npreset = \"mixtral-8x7b\"\n[batch]\nmicro_batch = 1\nseq_len = 256\n"
      "[precision]\nuse = \"quantized\"\nformat = \"gptq\"\n[optimizer]\nuse = \"adamw\"\n[activations]\n"
      "use = \"megatron\"\nlayer = \"eager\"\npacked_dequantize = \"torch-ops\"\n",
      "a.toml");
  EXPECT_NE(moe.find("the model's experts or latent attention are not modelled"), std::string::npos) << moe;
}

}  // namespace
}  // namespace memplan::testing
