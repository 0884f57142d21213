// 'zero' stage 3: DeepSpeed's optimizer step, one sub-group at a time
// (deepspeed/runtime/zero/stage3.py, step -> _prepare_sub_group ->
// _prepare_fp32_grad_for_sub_group: flatten(the sub-group's 16-bit gradient
// partitions).to(the master's dtype); the same lines at v0.7.0 1686-1705 and
// v0.18.3 1977-1996; sub-groups from _create_fp16_sub_groups, v0.7.0 808-832:
// parameters in order, a sub-group closes once it holds >= sub_group_size
// partition elements; config.py default sub_group_size 1e9). The fp32 cast is
// the recipe's main_grads, scaled by zero to the largest sub-group S; zero adds
// the flat 16-bit copy, zero3.step_flat_gradient = 2 B x S in fp16.
//
// The model: GPT-2 with h 4096, ffn 16384, 60 layers, vocab 50,257, positions
// 1024 (validation/PLC-gpt2-12b-ds3-8gpu-bs1.toml), 12,292,845,568 parameters,
// over 8 ranks: the partition P = 1,536,605,696 elements. Per rank and module
// (weight and bias together, / 8): embedding 25,731,584, positions 524,288;
// per layer q, k, v, o 2,097,664 each, the MLP's two projections 8,389,888
// each (memplan's MLP item holds both: 16,779,776), two norms 1,024 each
// (25,172,480 per layer); the final norm 1,024.
#include <gtest/gtest.h>

#include <string>
#include <string_view>

#include "test_support.hpp"

namespace memplan::testing {
namespace {

std::string gpt2_12b(const std::string& zero, const std::string& precision = "main_grads = \"fp32\"\n",
                     const std::string& extra = "") {
  return "name = \"z3step\"\nmode = \"train\"\n[model]\npreset = \"gpt2-xl\"\nlayers = 60\nhidden = 4096\n"
         "heads = 16\nffn_hidden = 16384\n[batch]\nmicro_batch = 1\nseq_len = 1024\n[precision]\nuse = "
         "\"mixed-fp16\"\n" +
         precision +
         "[optimizer]\nuse = \"adam\"\nimplementation = \"fused\"\n[activations]\nuse = \"none\"\n[[strategy]]\n"
         "use = \"data-parallel\"\nsize = 8\n[[strategy]]\nuse = \"zero\"\nstage = 3\n" +
         zero + extra;
}

// The GPU bytes of the items whose names end with `suffix`.
uint64_t gpu_bytes_ending(const Evaluation& e, std::string_view suffix) {
  uint64_t bytes = 0;
  for (const PlanItem& item : e.estimator().plan().items)
    if (item.device == MEMPLAN_DEVICE_GPU && Estimator::display_name(item).ends_with(suffix)) bytes += item.bytes();
  return bytes;
}

// The GPU bytes of the recipe's fp32 gradient copies (items named *.main_grad).
uint64_t main_grad_bytes(const Evaluation& e) { return gpu_bytes_ending(e, ".main_grad"); }

constexpr const char* kFlat = "zero3.step_flat_gradient";

// sub_group_size 1e12 (PyTorch Lightning's DeepSpeedStrategy default): one
// sub-group, the whole partition. Flat copy 2 x 1,536,605,696 =
// 3,073,211,392 B; the fp32 cast 4 x 1,536,605,696 = 6,146,422,784 B, as
// main_grads priced it before; both in the optimizer phase only.
TEST(ZeroStage3Step, OneSubGroupFlattensTheWholePartition) {
  const Evaluation e = evaluate_paper(gpt2_12b("sub_group_size = 1000000000000\n"));
  EXPECT_EQ(e.item_bytes(kFlat, MEMPLAN_ROLE_OPTIMIZER_STATES), 3'073'211'392u);
  EXPECT_EQ(main_grad_bytes(e), 6'146'422'784u);
}

// sub_group_size 1e9 (DeepSpeed's default), by hand: the embeddings
// (26,255,872) and 38 layers (956,554,240) hold 982,810,112 elements; layer
// 39's q, k, v, o bring it to 991,200,768, its first MLP projection to
// 999,590,656 and its second to 1,007,980,544 >= 1e9: the first sub-group
// closes there; the rest, 1,536,605,696 - 1,007,980,544 = 528,625,152, is the
// second. S = 1,007,980,544 (DeepSpeed's GPT-2 order, ln_1, c_attn, c_proj,
// ln_2, c_fc, c_proj, gives 1,007,982,592: memplan puts the layer's norms
// last). Flat copy 2 x S = 2,015,961,088 B; fp32 cast 4 x S = 4,031,922,176 B
// (the recipe's 9 items scaled by S / P, each of their 363 instances rounded
// up to a whole byte: within 1 KiB).
TEST(ZeroStage3Step, SubGroupsCloseOnceTheyReachTheSize) {
  const Evaluation e = evaluate_paper(gpt2_12b(""));
  EXPECT_EQ(e.item_bytes(kFlat, MEMPLAN_ROLE_OPTIMIZER_STATES), 2'015'961'088u);
  EXPECT_NEAR(static_cast<double>(main_grad_bytes(e)), 4'031'922'176.0, 1024.0);
  // The optimizer phase holds 2 + 4 B x S instead of 2 + 4 B x P: 6 x 528,625,152 = 3,171,750,912 B less.
  const Evaluation whole = evaluate_paper(gpt2_12b("sub_group_size = 1000000000000\n"));
  const double less = static_cast<double>(whole.breakdown().quantities[kAllocated].timeline[kOptimizerStep]) -
                      static_cast<double>(e.breakdown().quantities[kAllocated].timeline[kOptimizerStep]);
  EXPECT_NEAR(less, 3'171'750'912.0, 1024.0);
}

// A torch optimizer under ZeRO-3 is handed one sub-group's flat fp32 tensor per step() (stage3.py _optimizer_step
// @ v0.19.5-27): torch.optim.Adam's foreach temporaries (_foreach_sqrt of exp_avg_sq, 1 x the parameters at 4 B)
// are one sub-group's, 4 x S = 4,031,922,176 B (within 1 KiB, as main_grads), not the partition's 4 x P =
// 6,146,422,784 B; with one sub-group they stay the partition's; without main_grads the same 4 x S.
uint64_t foreach_temp_bytes(const Evaluation& e) { return gpu_bytes_ending(e, ".foreach_temps"); }
TEST(ZeroStage3Step, ForeachTemporariesAreOneSubGroups) {
  const auto foreach = [](const std::string& zero, const std::string& precision = "main_grads = \"fp32\"\n") {
    std::string text = gpt2_12b(zero, precision);
    text.replace(text.find("implementation = \"fused\""), 24, "implementation = \"foreach\"");
    return evaluate_paper(text);
  };
  EXPECT_NEAR(static_cast<double>(foreach_temp_bytes(foreach(""))), 4'031'922'176.0, 1024.0);
  EXPECT_NEAR(static_cast<double>(foreach_temp_bytes(foreach("sub_group_size = 1000000000000\n"))), 6'146'422'784.0,
              1024.0);
  // Without the recipe's fp32 gradient copies the sub-group walk runs on the temporaries themselves: the same S.
  EXPECT_NEAR(static_cast<double>(foreach_temp_bytes(foreach("", ""))), 4'031'922'176.0, 1024.0);
}

// main_grads in the gradients' dtype: .to() returns the flat tensor itself,
// which is then the master's .grad: no second copy. Without main_grads (the
// recipe prices no cast) nothing is added either.
TEST(ZeroStage3Step, NoCopyWithoutACast) {
  const Evaluation same = evaluate_paper(gpt2_12b("sub_group_size = 1000000000000\n", "main_grads = \"fp16\"\n"));
  EXPECT_EQ(same.item_bytes(kFlat, MEMPLAN_ROLE_OPTIMIZER_STATES), 0u);
  EXPECT_EQ(main_grad_bytes(same), 3'073'211'392u);  // 2 x P
  const Evaluation none = evaluate_paper(gpt2_12b("", ""));
  EXPECT_EQ(none.item_bytes(kFlat, MEMPLAN_ROLE_OPTIMIZER_STATES), 0u);
  EXPECT_EQ(main_grad_bytes(none), 0u);
}

// offload_optimizer: _prepare_sub_group skips the cast, and the fp32
// gradients are host buffers of every sub-group (initialize_optimizer_states,
// v0.7.0 911-916): nothing on the GPU, and the host holds the whole
// partition's 4 x P whatever the sub-group size.
TEST(ZeroStage3Step, OptimizerOffloadKeepsNeitherOnTheGpu) {
  const std::string offload = "[[strategy]]\nuse = \"offload\"\noptimizer = true\n";
  const Evaluation small = evaluate_paper(gpt2_12b("", "main_grads = \"fp32\"\n", offload));
  const Evaluation whole = evaluate_paper(gpt2_12b("sub_group_size = 1000000000000\n", "main_grads = \"fp32\"\n", offload));
  EXPECT_EQ(small.item_bytes(kFlat, MEMPLAN_ROLE_OPTIMIZER_STATES), 0u);
  EXPECT_EQ(main_grad_bytes(small), 0u);
  EXPECT_EQ(whole.item_bytes(kFlat, MEMPLAN_ROLE_OPTIMIZER_STATES), 0u);
  EXPECT_EQ(small.breakdown().cpu_components[MEMPLAN_ROLE_OPTIMIZER_STATES],
            whole.breakdown().cpu_components[MEMPLAN_ROLE_OPTIMIZER_STATES]);
  // Adam's moments 8 x P + the fp32 gradients 4 x P on the host.
  EXPECT_NEAR(static_cast<double>(whole.breakdown().cpu_components[MEMPLAN_ROLE_OPTIMIZER_STATES]),
              12.0 * 1'536'605'696.0, 64.0);
}

TEST(ZeroStage3Step, Errors) {
  const std::string library = " (plugin library " + plugin_dir() + "/memplan-zero.so)";
  std::string stage2 = gpt2_12b("sub_group_size = 1000\n");
  stage2.replace(stage2.find("stage = 3"), 9, "stage = 2");
  EXPECT_EQ(error_of(stage2, "z.toml"),
            "z.toml:26:18: error: in [[strategy]] #2, strategy plugin 'zero', option 'sub_group_size': sizes the "
            "sub-groups of ZeRO stage 3's optimizer step; stage 2 steps its partition at once: remove sub_group_size or "
            "set stage = 3" + library);
  // A DeepSpeed JSON config's 1e12 copied as is: TOML reads it as a float; the message says how to write it.
  EXPECT_EQ(error_of(gpt2_12b("sub_group_size = 1e12\n"), "z.toml"),
            "z.toml:26:18: error: in [[strategy]] #2, 'sub_group_size' of strategy plugin 'zero' must be an integer, "
            "not a float (TOML reads 1e+12 as a float: write the whole number, 1000000000000)");
  EXPECT_EQ(error_of(gpt2_12b("sub_group_size = 0\n"), "z.toml"),
            "z.toml:26:18: error: in [[strategy]] #2, strategy plugin 'zero', option 'sub_group_size': must be 1 or "
            "more elements, got 0" + library);
}

}  // namespace
}  // namespace memplan::testing
