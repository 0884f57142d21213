// 'fsdp': PyTorch FSDP FULL_SHARD / HYBRID_SHARD on Llama-2-7B (P =
// 6,738,415,616), mixed bf16 + AdamW, 8 data-parallel ranks. Hand derivation:
//   persistent per GPU (ZeRO-3):   (2 + 4 + 8) x P / 8 = 11,792,227,328 B
//   gradients:                     2 x P / 8           =  1,684,603,904 B
//   one layer (unit_layers = 1):   4 x 4096^2 + 3 x 4096 x 11008 + 2 x 4096 = 202,383,360 elements
//   root unit (outside the layers): embed 131,072,000 + LM head 131,072,000
//                                   + final norm 4,096 = 262,148,096 elements
//   in forward the root stays gathered (FSDP reshards every unit but the root after its forward) and
//   two layer units are in flight while the layers' forward runs (limit_all_gathers), none at the loss:
//   fsdp.gathered_forward         root x 2 B    = 524,296,192 B (transient_forward)
//   fsdp.gathered_forward_units   2 units x 2 B = 809,533,440 B (forward_in_layers)
//   in backward FSDP1 keeps the root gathered from its forward on and gathers a unit again in its
//   pre-backward hook, the next one prefetched (BACKWARD_PRE), while the layers' backward runs; the
//   root's pre-backward hook on the loss prefetches the last unit:
//   fsdp.gathered_backward        root x 2 B    = 524,296,192 B (transient_backward)
//   fsdp.gathered_backward_units  2 units x 2 B = 809,533,440 B (backward_in_layers)
//   fsdp.gathered_at_loss         1 unit x 2 B  = 404,766,720 B (backward_start)
//   fsdp.unsharded_gradients      root x 2 B    = 524,296,192 B (transient_backward)
//   fsdp.unsharded_gradients_units 1 unit x 2 B = 404,766,720 B (backward_in_layers)
// Without activations backward's end, the last layer's backward, is the high point (plugin_abi.h's step
// rule: the units beside every gradient; the first layer's moment holds only G1 = 50,595,840 B of them):
// persistent + the root's working set + gradients + the units = 11,792,227,328 + 1,048,592,384 +
// 1,684,603,904 + 1,214,300,160 = 15,739,723,776 B (an upper bound: the last layer's backward has no next
// unit to prefetch, and its own gradients and the root's are not reduced yet).
#include <gtest/gtest.h>

#include <string>

#include "test_support.hpp"

namespace memplan::testing {
namespace {

std::string llama7b(int data_parallel, const std::string& fsdp, const std::string& extra = "") {
  return "name = \"fsdp\"\nmode = \"train\"\n[model]\npreset = \"llama-2-7b\"\n[batch]\nmicro_batch = 1\n"
         "seq_len = 4096\n[precision]\nuse = \"mixed-bf16\"\n[optimizer]\nuse = \"adamw\"\n[activations]\n"
         "use = \"none\"\n[[strategy]]\nuse = \"data-parallel\"\nsize = " +
         std::to_string(data_parallel) + "\n[[strategy]]\nuse = \"fsdp\"\n" + fsdp + extra;
}

// The model states and the step's working set; setup = "none" leaves out
// what wrapping leaves cached before the step (Fsdp.SetupUnitByUnit).
TEST(Fsdp, FullShardHasZeroThreeStatesPlusTheGatheredUnits) {
  Evaluation e = evaluate_paper(llama7b(8, "setup = \"none\"\n"));
  const Breakdown& b = e.breakdown();
  EXPECT_EQ(b.timeline[kInit], 11'792'227'328u);
  EXPECT_EQ(e.component(MEMPLAN_ROLE_GRADIENTS), 1'684'603'904u);
  EXPECT_EQ(e.item_bytes("fsdp.gathered_forward", MEMPLAN_ROLE_BUFFERS), 524'296'192u);
  EXPECT_EQ(e.item_bytes("fsdp.gathered_forward_units", MEMPLAN_ROLE_BUFFERS), 809'533'440u);
  EXPECT_EQ(e.item_bytes("fsdp.gathered_backward", MEMPLAN_ROLE_BUFFERS), 524'296'192u);
  EXPECT_EQ(e.item_bytes("fsdp.gathered_backward_units", MEMPLAN_ROLE_BUFFERS), 809'533'440u);
  EXPECT_EQ(e.item_bytes("fsdp.unsharded_gradients", MEMPLAN_ROLE_BUFFERS), 524'296'192u);
  EXPECT_EQ(e.item_bytes("fsdp.unsharded_gradients_units", MEMPLAN_ROLE_BUFFERS), 404'766'720u);
  EXPECT_EQ(e.item_bytes("fsdp.gathered_at_loss", MEMPLAN_ROLE_BUFFERS), 404'766'720u);
  // No activations: the layers' moment (root and units) is the forward's high point.
  EXPECT_EQ(b.timeline[kForward], 11'792'227'328u + 524'296'192u + 809'533'440u);
  EXPECT_EQ(b.peak, 15'739'723'776u);
  EXPECT_EQ(b.peak_phase, kBackward);
  // The same model states as ZeRO stage 3 over the same ranks.
  std::string zero3_text = llama7b(8, "");
  zero3_text.replace(zero3_text.find("use = \"fsdp\"\n"), 13, "use = \"zero\"\nstage = 3\n");
  ASSERT_NE(zero3_text.find("stage = 3"), std::string::npos);
  Evaluation zero3 = evaluate_paper(zero3_text);
  EXPECT_EQ(zero3.breakdown().timeline[kInit], b.timeline[kInit]);
  const auto details = e.estimator().report_details();
  ASSERT_EQ(details.size(), 3u);
  EXPECT_EQ(details[0], (std::pair<std::string, std::string>{"fsdp_unit_parameters", "202383360"}));
  EXPECT_EQ(details[1], (std::pair<std::string, std::string>{"fsdp_root_parameters", "262148096"}));
  EXPECT_EQ(details[2], (std::pair<std::string, std::string>{"fsdp_shard_group", "8"}));
}

// What FSDP1 leaves on the GPU while it wraps the model unit by unit
// (plugins/strategies/fsdp/setup_cache.hpp; torch/distributed/fsdp/
// _init_utils.py @ 00743e70, _init_param_handle_from_module; c10d comm.cpp
// broadcast_coalesced). Llama-2-7B in bf16 (mixed-bf16's weights), 8 ranks:
//   layer unit U = 202,383,360 x 2 = 404,766,720 B; root: embed 262,144,000,
//   final norm 8,192, LM head 262,144,000 = 524,296,192 B.
// Without sync_module_states:
//   high point: max(U + U, root + root) = 1,048,592,384 (fsdp.setup_unshard)
//   blocks: the last layer's parameters and flat parameter, 809,533,440;
//   the root's embedding and norm carved from the flat block (404,766,720
//   -> 142,614,528 free), its head (262,144,000) and flat parameter
//   (524,296,192) new: 1,595,973,632; its shard (524,296,192 / 8 =
//   65,537,024) carved from the free 142,614,528: weights, not cache:
//   1,530,436,608 in all, fsdp.setup_cache = 481,844,224 beyond the high point.
// With sync_module_states (rank 0 broadcasts; 250 MiB = 262,144,000 B buckets):
//   the layer (above one bucket) is copied in buckets, two in flight: U;
//   the root: [embed] alone (a view), [norm, head] copied: 262,152,192.
//   blocks: layer 3 x U = 1,214,300,160; the root's embed and head carved
//   from the two U blocks (142,614,528 and 142,622,720 left after the norm),
//   its copies new (262,152,192), its flat parameter new (524,296,192), its
//   shard carved: 2,000,748,544 - 65,537,024 = 1,935,211,520;
//   fsdp.setup_cache = 1,935,211,520 - 1,048,592,384 = 886,619,136.
TEST(Fsdp, SetupUnitByUnit) {
  Evaluation plain = evaluate_paper(llama7b(8, ""));
  EXPECT_EQ(plain.item_bytes("fsdp.setup_unshard", MEMPLAN_ROLE_BUFFERS), 1'048'592'384u);
  EXPECT_EQ(plain.item_bytes("fsdp.setup_cache", MEMPLAN_ROLE_BUFFERS), 481'844'224u);
  // Init is the larger of the persistent items and the set-up's high point
  // beside what exists then (not Adam's states, 8 x P / 8 = 6,738,415,616):
  // 11,792,227,328 - 6,738,415,616 + 1,530,436,608 = 6,584,248,320 reserved,
  // below the persistent 11,792,227,328 (StreamPools.SetupCacheIsTheComputePoolsFloor
  // has a set-up above them).
  EXPECT_EQ(plain.breakdown().quantities[kReserved].timeline[kInit], 11'792'227'328u);
  // Gone before the step: forward, backward and the peak are those without it.
  Evaluation none = evaluate_paper(llama7b(8, "setup = \"none\"\n"));
  EXPECT_EQ(plain.breakdown().timeline[kForward], none.breakdown().timeline[kForward]);
  EXPECT_EQ(plain.breakdown().peak, none.breakdown().peak);
  Evaluation sync = evaluate_paper(llama7b(8, "sync_module_states = true\n"));
  EXPECT_EQ(sync.item_bytes("fsdp.setup_unshard", MEMPLAN_ROLE_BUFFERS), 1'048'592'384u);
  EXPECT_EQ(sync.item_bytes("fsdp.setup_cache", MEMPLAN_ROLE_BUFFERS), 886'619'136u);
  // FSDP2 builds the model sharded (meta device, to_empty on the shards): nothing.
  EXPECT_EQ(evaluate_paper(llama7b(8, "api = \"fsdp2\"\n")).item_bytes("fsdp.setup_unshard", MEMPLAN_ROLE_BUFFERS),
            0u);
}

// HYBRID_SHARD: 32 data-parallel ranks in shard groups of 8 hold what
// FULL_SHARD over 8 ranks holds.
TEST(Fsdp, HybridShardShardsWithinItsGroup) {
  Evaluation hybrid = evaluate_paper(llama7b(32, "shard_size = 8\n"));
  Evaluation full = evaluate_paper(llama7b(8, ""));
  EXPECT_EQ(hybrid.breakdown().sum, full.breakdown().sum);
  EXPECT_EQ(hybrid.breakdown().peak, 15'739'723'776u);
  EXPECT_EQ(hybrid.breakdown().world_size, 32);
  // FULL_SHARD over 32: model states 16 x P / 32 = 3,369,207,808 B.
  EXPECT_EQ(evaluate_paper(llama7b(32, "")).breakdown().timeline[kOptimizerStep], 3'369'207'808u);
}

TEST(Fsdp, UnitsAndPrefetch) {
  // backward_prefetch = "none": one unit in the layers' backward, 202,383,360 x 2 B; the root's 524,296,192 B.
  Evaluation unprefetched = evaluate_paper(llama7b(8, "backward_prefetch = \"none\"\n"));
  EXPECT_EQ(unprefetched.item_bytes("fsdp.gathered_backward_units", MEMPLAN_ROLE_BUFFERS), 404'766'720u);
  EXPECT_EQ(unprefetched.item_bytes("fsdp.gathered_backward", MEMPLAN_ROLE_BUFFERS), 524'296'192u);
  // Units of 4 layers: 809,533,440 elements; forward the root 262,148,096 x 2 and 2 x 809,533,440 x 2 in
  // flight while the layers run; a unit's unsharded gradient 809,533,440 x 2, the root's 262,148,096 x 2.
  Evaluation four = evaluate_paper(llama7b(8, "unit_layers = 4\n"));
  EXPECT_EQ(four.item_bytes("fsdp.gathered_forward", MEMPLAN_ROLE_BUFFERS), 524'296'192u);
  EXPECT_EQ(four.item_bytes("fsdp.gathered_forward_units", MEMPLAN_ROLE_BUFFERS), 3'238'133'760u);
  EXPECT_EQ(four.item_bytes("fsdp.unsharded_gradients", MEMPLAN_ROLE_BUFFERS), 262'148'096u * 2);
  EXPECT_EQ(four.item_bytes("fsdp.unsharded_gradients_units", MEMPLAN_ROLE_BUFFERS), 809'533'440u * 2);
  // One unit of all 32 layers: there is no second unit to prefetch; the root and the one unit are the
  // whole model, 6,738,415,616 x 2.
  Evaluation whole = evaluate_paper(llama7b(8, "unit_layers = 32\n"));
  EXPECT_EQ(whole.item_bytes("fsdp.gathered_forward", MEMPLAN_ROLE_BUFFERS) +
                whole.item_bytes("fsdp.gathered_forward_units", MEMPLAN_ROLE_BUFFERS),
            6'738'415'616u * 2);
  EXPECT_EQ(whole.item_bytes("fsdp.gathered_forward_units", MEMPLAN_ROLE_BUFFERS), 32ull * 202'383'360 * 2);
}

// separate_embeddings (torchtune's custom_sharded_layers ['tok_embeddings',
// 'output']): the embedding and the LM head are units of their own, the root
// only the final norm (4,096). Llama-2-7B: each of them (131,072,000) is
// smaller than a layer unit (202,383,360): forward (4,096 + 2 x 202,383,360)
// x 2 B = 809,541,632 while the layers run, of which the root and one unit,
// (4,096 + 202,383,360) x 2 B = 404,774,912, at the forward's end (the head's
// unit runs there); unsharded gradients (4,096 + 202,383,360) x 2 B =
// 404,774,912. Llama-3.1-70B: the embedding (128,256 x 8,192 = 1,050,673,152)
// is larger than a layer (855,654,400) and sets the unit: backward (8,192 + 2 x
// 1,050,673,152) x 2 B = 4,202,708,992; gradients (8,192 + 1,050,673,152) x 2 B
// = 2,101,362,688.
TEST(Fsdp, SeparateEmbeddingsLeaveTheRootTheFinalNorm) {
  Evaluation e = evaluate_paper(llama7b(8, "api = \"fsdp2\"\nseparate_embeddings = true\n"));
  EXPECT_EQ(e.item_bytes("fsdp.gathered_forward", MEMPLAN_ROLE_BUFFERS), 404'774'912u);
  EXPECT_EQ(e.item_bytes("fsdp.gathered_forward_units", MEMPLAN_ROLE_BUFFERS), 404'766'720u);
  EXPECT_EQ(e.item_bytes("fsdp.gathered_backward", MEMPLAN_ROLE_BUFFERS), 809'541'632u);
  EXPECT_EQ(e.item_bytes("fsdp.unsharded_gradients", MEMPLAN_ROLE_BUFFERS), 404'774'912u);
  const auto details = e.estimator().report_details();
  ASSERT_EQ(details.size(), 3u);
  EXPECT_EQ(details[1], (std::pair<std::string, std::string>{"fsdp_root_parameters", "4096"}));
  std::string seventy = llama7b(8, "api = \"fsdp2\"\nseparate_embeddings = true\n");
  seventy.replace(seventy.find("llama-2-7b"), 10, "llama-3.1-70b");
  Evaluation big = evaluate_paper(seventy);
  EXPECT_EQ(big.item_bytes("fsdp.gathered_backward", MEMPLAN_ROLE_BUFFERS), 4'202'708'992u);
  EXPECT_EQ(big.item_bytes("fsdp.unsharded_gradients", MEMPLAN_ROLE_BUFFERS), 2'101'362'688u);
}

// fully_shard's gradients (torch/distributed/fsdp/_fully_shard/_fsdp_param_group.py, post_backward;
// _fsdp_collectives.py, foreach_reduce): autograd computes each unit's unsharded gradients in the gathered
// parameters' dtype (param_dtype bf16), and foreach_reduce packs them into a reduce-scatter input in
// reduce_dtype (fp32), which comm_ctx.reduce_scatter_state keeps until the next unit's post-backward, after
// that unit's backward: lifetime backward_layers. Llama-2-7B, 8 ranks, as at the top:
//   fsdp.unsharded_gradients  (R + U) x 2 B = 464,531,456 x 2 =   929,062,912 B
//   fsdp.reduce_scatter_input  U x 4 B      = 202,383,360 x 4 =   809,533,440 B
// Without activations backward's end is the high point: persistent + T_b + G + L = 11,792,227,328 +
// (1,333,829,632 + 929,062,912) + 1,684,603,904 + 809,533,440 = 16,549,257,216 B. FSDP1 with the same policy
// casts the flat gradient to reduce_dtype before its reduce-scatter: the root's R x 4 B = 1,048,592,384 from the
// head's backward on, a unit's U x 4 B = 809,533,440 inside the layers' backward, no input kept after it.
TEST(Fsdp, Fsdp2KeepsTheReduceScatterInputThroughTheNextUnit) {
  const std::string policy = "param_dtype = \"bf16\"\nreduce_dtype = \"fp32\"\nsetup = \"none\"\n";
  Evaluation two = evaluate_paper(llama7b(8, "api = \"fsdp2\"\n" + policy));
  EXPECT_EQ(two.item_bytes("fsdp.unsharded_gradients", MEMPLAN_ROLE_BUFFERS), 929'062'912u);
  EXPECT_EQ(two.item_bytes("fsdp.reduce_scatter_input", MEMPLAN_ROLE_BUFFERS), 809'533'440u);
  EXPECT_EQ(two.breakdown().peak, 16'549'257'216u);
  Evaluation one = evaluate_paper(llama7b(8, policy));
  EXPECT_EQ(one.item_bytes("fsdp.unsharded_gradients", MEMPLAN_ROLE_BUFFERS), 1'048'592'384u);
  EXPECT_EQ(one.item_bytes("fsdp.unsharded_gradients_units", MEMPLAN_ROLE_BUFFERS), 809'533'440u);
  EXPECT_EQ(one.item_bytes("fsdp.reduce_scatter_input", MEMPLAN_ROLE_BUFFERS), 0u);
  // Without reduce_dtype fully_shard reduces in the gradients' own dtype, param_dtype's bf16 here over fp32
  // weights (foreach_reduce: reduce_dtype or grad_dtype): U x 2 B = 404,766,720.
  std::string fp32 = llama7b(8, "api = \"fsdp2\"\nparam_dtype = \"bf16\"\nsetup = \"none\"\n");
  fp32.replace(fp32.find("mixed-bf16"), 10, "fp32");
  EXPECT_EQ(evaluate_paper(fp32).item_bytes("fsdp.reduce_scatter_input", MEMPLAN_ROLE_BUFFERS), 404'766'720u);
}

// FSDP1's root gradient is not beside the loss's backward: the root's views are one split of its flat parameter,
// whose backward runs once every view's gradient has arrived (at the embedding's backward); the LM head's
// gradient, from the head's backward after the loss's, waits for it (lifetime backward_layers, fsdp 1.12.0,
// counted as the flat gradient R from then on). MiniTrainBench's small
// FSDP1 row (validation/MTB-small-fsdp-8gpu.toml), its backward high point the loss's backward:
//   persistent 60,289,024 (with two cuBLAS workspaces of 8,519,680 B, the A100's size) + backward transients 17,065,984 (the root gathered, 8,652,800, and the recomputed
//   block, 8,413,184) + activations 4,194,304 + the largest gradient group 2,097,152 (the embedding's shard)
//   + the loss's backward 46,126,080 (its tensors, 39,821,312, and the unit the root's hook prefetches,
//   6,304,768) = 129,772,544 B, without the root's flat gradient (8,652,800 B).
TEST(Fsdp, Fsdp1RootGradientComesWithTheHeadsBackward) {
  const std::string id = "MTB-small-fsdp-8gpu";
  const Evaluation e = evaluate(validation_case(id), id + ".toml");
  EXPECT_EQ(e.item_lifetime("fsdp.unsharded_gradients"), MEMPLAN_LIFETIME_BACKWARD_LAYERS);
  EXPECT_EQ(e.item_bytes("fsdp.unsharded_gradients", MEMPLAN_ROLE_BUFFERS), 8'652'800u);
  EXPECT_EQ(e.breakdown().quantities[kAllocated].timeline[kBackward], 129'772'544u);
}

// Mixtral 8x7B with 8 expert-parallel ranks out of 8 data-parallel ranks:
// experts are sharded over 8 / 8 = 1 rank, the dense weights over 8.
// Weights per GPU: 2 x (1,605,636,096 / 8 + 32 x 176,160,768) = 11,675,698,176.
TEST(Fsdp, ExpertsShardOverTheShardGroupDividedByEp) {
  const std::string mixtral =
      "name = \"fsdp\"\nmode = \"train\"\n[model]\npreset = \"mixtral-8x7b\"\n[precision]\nuse = \"mixed-bf16\"\n"
      "[optimizer]\nuse = \"adamw\"\n[activations]\nuse = \"none\"\n[[strategy]]\nuse = \"data-parallel\"\nsize = 8\n"
      "[[strategy]]\nuse = \"expert-parallel\"\nsize = 8\n[[strategy]]\nuse = \"fsdp\"\n";
  EXPECT_EQ(evaluate_paper(mixtral).component(MEMPLAN_ROLE_WEIGHTS), 11'675'698'176u);
  EXPECT_EQ(error_of(mixtral + "shard_size = 4\n", "f.toml"),
            "f.toml:19:14: error: in [[strategy]] #3, strategy plugin 'fsdp', option 'shard_size': the experts are "
            "sharded over the shard group's 4 ranks / 8 expert-parallel ranks, which is not a whole number; choose a "
            "multiple of the expert-parallel size (plugin library " + plugin_dir() + "/memplan-fsdp.so)");
}

TEST(Fsdp, Errors) {
  const std::string library = " (plugin library " + plugin_dir() + "/memplan-fsdp.so)";
  EXPECT_EQ(error_of(llama7b(8, "shard_size = 3\n"), "f.toml"),
            "f.toml:19:14: error: in [[strategy]] #2, strategy plugin 'fsdp', option 'shard_size': 3 does not divide "
            "the 8 data-parallel ranks; HYBRID_SHARD replicates whole shard groups, so choose a divisor" + library);
  EXPECT_EQ(error_of(llama7b(8, "backward_prefetch = \"later\"\n"), "f.toml"),
            "f.toml:19:21: error: in [[strategy]] #2, strategy plugin 'fsdp', option 'backward_prefetch': must be "
            "\"pre\", \"post\" or \"none\", not \"later\"" + library);
  EXPECT_EQ(error_of("name = \"fsdp\"\nmode = \"train\"\n[model]\npreset = \"llama-2-7b\"\n[precision]\nuse = "
                     "\"mixed-bf16\"\n[optimizer]\nuse = \"adamw\"\n[activations]\nuse = \"none\"\n"
                     "[[strategy]]\nuse = \"fsdp\"\n",
                     "f.toml"),
            "f.toml:12:7: error: in [[strategy]] #1, strategy plugin 'fsdp': shards over the data-parallel group, but "
            "no strategy declares its size; add [[strategy]] use = \"data-parallel\" with its size (size = 1 on a "
            "single GPU)" + library);
  EXPECT_EQ(error_of("name = \"fsdp\"\nmode = \"train\"\n[model]\nparams = 7e9\n[precision]\nuse = \"mixed-bf16\"\n"
                     "[optimizer]\nuse = \"adamw\"\n[activations]\nuse = \"none\"\n[[strategy]]\nuse = \"fsdp\"\n",
                     "f.toml"),
            "f.toml:12:7: error: in [[strategy]] #1, strategy plugin 'fsdp': needs the model's layers to size its "
            "units, but the scenario gives only params; give a preset or the architecture in [model], or use "
            "[[strategy]] use = \"zero\" with stage = 3" + library);
  EXPECT_EQ(error_of(llama7b(8, "setup = \"eager\"\n"), "f.toml"),
            "f.toml:19:9: error: in [[strategy]] #2, strategy plugin 'fsdp', option 'setup': must be \"unit\" (FSDP1 "
            "wraps unit by unit) or \"none\", not \"eager\"" + library);
  EXPECT_EQ(error_of(llama7b(8, "setup = \"none\"\nsync_module_states = true\n"), "f.toml"),
            "f.toml:20:22: error: in [[strategy]] #2, strategy plugin 'fsdp', option 'sync_module_states': "
            "broadcasts while FSDP1 wraps unit by unit; it needs setup = \"unit\"" + library);
}

// reentrant_checkpoint_around_units: Hugging Face gradient_checkpointing
// calls each FSDP1-wrapped decoder layer through torch's reentrant checkpoint;
// the reshard-only hook that FSDP1 registers on a frozen unit's inputs
// (torch/distributed/fsdp/_runtime_utils.py _register_post_backward_reshard_only_hook,
// torch >= 2.1; torch/autograd/graph.py register_multi_grad_hook keeps each
// leaf input's AccumulateGrad in its closure) keeps, in backward's recompute,
// every layer's detached input and the .grad the nested backward gives it
// until the final callback removes the hooks when backward ends
// (plugins/strategies/fsdp/plugin.cpp, the header's note).
// Llama-2-70B (80 layers, hidden 8192, vocabulary 32000), bf16, LoRA r 8 on q
// and v (the decoder-layer units hold no trainable weight but the adapters,
// wrapped apart), full recomputation, 1 x 2048 tokens, 2 ranks. Hand derivation:
//   input gradients at backward's end: 80 x 2048 x 8192 x 2 B  = 2,684,354,560 B
//   freed by the loss's backward by then, of the stored activations (the paper view's head):
//     final norm     2048 x 8192 x (2 + 2) B                    =    67,108,864 B
//   (the fp32 logits and the cross entropy's softmax, 2048 x 32000 x 4 B = 262,144,000 B each,
//   are this micro-batch's: autograd frees them once the loss and the head have run backward,
//   so they are forward transients, never counted in backward beside the recomputation,
//   and the loss's moment at backward's start, 524,288,000 B, is below the working set:
//   nothing of them to take off)
//   activations.kept_layer_inputs = 2,684,354,560 - 67,108,864 = 2,617,245,696 B,
// added to backward's high point (transient_backward) and to nothing else.
// Units whose flat parameter trains (full fine-tuning; mixed units under
// frozen_gradients) register no such hook; the per-op policies keep no
// checkpointed input: nothing is added.
TEST(Fsdp, ReentrantCheckpointAroundFrozenUnitsKeepsLayerInputs) {
  auto scenario = [](const std::string& lora, const std::string& policy, const std::string& fsdp) {
    return "name = \"k\"\nmode = \"train\"\n[model]\npreset = \"llama-2-70b\"\n[batch]\nmicro_batch = 1\n"
           "seq_len = 2048\n[precision]\nuse = \"bf16\"\n[optimizer]\nuse = \"adamw\"\n[activations]\n"
           "use = \"megatron\"\nflash_attention = true\n" + lora + "[[strategy]]\nuse = \"recompute\"\npolicy = \"" +
           policy + "\"\n[[strategy]]\nuse = \"data-parallel\"\nsize = 2\n[[strategy]]\nuse = \"fsdp\"\n"
           "setup = \"none\"\n" + fsdp;
  };
  const std::string lora = "[[strategy]]\nuse = \"lora\"\nrank = 8\ntargets = \"q,v\"\n";
  const std::string option = "reentrant_checkpoint_around_units = true\n";
  Evaluation kept = evaluate_paper(scenario(lora, "full", option));
  EXPECT_EQ(kept.item_bytes("activations.kept_layer_inputs", MEMPLAN_ROLE_ACTIVATIONS), 2'617'245'696u);
  Evaluation plain = evaluate_paper(scenario(lora, "full", ""));
  EXPECT_EQ(plain.item_bytes("activations.kept_layer_inputs", MEMPLAN_ROLE_ACTIVATIONS), 0u);
  const Breakdown& with = kept.breakdown();
  const Breakdown& without = plain.breakdown();
  EXPECT_EQ(with.timeline[kBackward] - without.timeline[kBackward], 2'617'245'696u);
  EXPECT_EQ(with.timeline[kForward], without.timeline[kForward]);
  EXPECT_EQ(with.timeline[kOptimizerStep], without.timeline[kOptimizerStep]);
  EXPECT_EQ(evaluate_paper(scenario("", "full", option))
                .item_bytes("activations.kept_layer_inputs", MEMPLAN_ROLE_ACTIVATIONS),
            0u);
  EXPECT_EQ(evaluate_paper(scenario(lora, "full", option + "frozen_gradients = true\n"))
                .item_bytes("activations.kept_layer_inputs", MEMPLAN_ROLE_ACTIVATIONS),
            0u);
  // The option describes checkpointing of whole units: other recompute policies are refused, and so are
  // units of more than one layer (the model then checkpoints each layer inside its unit).
  EXPECT_NE(error_of(scenario(lora, "selective", option), "k.toml")
                .find("reentrant_checkpoint_around_units describes gradient checkpointing of whole units; add "
                      "[[strategy]] use = \"recompute\" with policy = \"full\", or remove the option"),
            std::string::npos);
  EXPECT_NE(error_of(scenario(lora, "full", option + "unit_layers = 2\n"), "k.toml")
                .find("option 'reentrant_checkpoint_around_units': is modelled for one decoder layer per unit"),
            std::string::npos);
  EXPECT_NE(error_of(scenario(lora, "full", "api = \"fsdp2\"\n" + option), "k.toml")
                .find("option 'reentrant_checkpoint_around_units': is FullyShardedDataParallel's"),
            std::string::npos);
}

// The kept gradient of an input has the input's dtype: under autocast on fp32
// weights the residual stream, and so each layer's input, is fp32 (eager
// layers: the autocast plugin's dtype.residual). Llama-2-70B,
// 2048 tokens: 80 x 2048 x 8192 x 4 B = 5,368,709,120 B of kept gradients, less
// what the loss's backward and the head's stored activations free by then (the
// plan's activations.final_norm, .logits, .cross_entropy stored as activations
// and .loss_backward; here the logits and the softmax are forward transients,
// freed before the recomputation, and the loss's moment is 0: the final norm
// alone, its fp32 input copy and rsqrt and 16-bit output, 67,117,056 B).
TEST(Fsdp, KeptLayerInputsHaveTheResidualStreamsDtype) {
  const std::string toml =
      "name = \"k\"\nmode = \"train\"\n[model]\npreset = \"llama-2-70b\"\n[batch]\nmicro_batch = 1\n"
      "seq_len = 2048\n[precision]\nuse = \"autocast\"\n[optimizer]\nuse = \"adamw\"\n[activations]\n"
      "use = \"megatron\"\nflash_attention = true\nlayer = \"eager\"\n[[strategy]]\nuse = \"lora\"\nrank = 8\n"
      "targets = \"q,v\"\n[[strategy]]\nuse = \"recompute\"\npolicy = \"full\"\n[[strategy]]\nuse = \"data-parallel\"\nsize = 2\n"
      "[[strategy]]\nuse = \"fsdp\"\nsetup = \"none\"\nreentrant_checkpoint_around_units = true\n";
  const Evaluation e = evaluate_paper(toml);
  uint64_t freed = 0;
  for (const PlanItem& item : e.estimator().plan().items)
    for (const char* name : {"activations.final_norm", "activations.logits", "activations.cross_entropy",
                             "activations.loss_backward"})
      if (item.name_view() == name && item.role == MEMPLAN_ROLE_ACTIVATIONS &&
          (item.lifetime == MEMPLAN_LIFETIME_ACTIVATION || item.lifetime == MEMPLAN_LIFETIME_BACKWARD_START))
        freed += item.bytes();
  EXPECT_EQ(freed, 67'117'056u);
  const uint64_t kept = e.item_bytes("activations.kept_layer_inputs", MEMPLAN_ROLE_ACTIVATIONS);
  EXPECT_NEAR(static_cast<double>(kept), 5'368'709'120.0 - static_cast<double>(freed), 2.0);
  // The stored inputs, the same tensors, are fp32 too: 5,368,709,120 B.
  EXPECT_EQ(e.item_bytes("layers.0-79.activations", MEMPLAN_ROLE_ACTIVATIONS), 5'368'709'120u);
}

}  // namespace
}  // namespace memplan::testing
