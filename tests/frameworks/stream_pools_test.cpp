// FSDP1's side streams and the caching allocator's pool per stream
// (docs/formulas.md, "Allocator pools per stream"). PyTorch's caching
// allocator reuses a freed block only for allocations on the stream that
// allocated it (c10/cuda/CUDACachingAllocator.cpp, get_free_block). FSDP1
// allocates the padded unsharded flat parameters inside its unshard stream
// (_runtime_utils._unshard -> FlatParamHandle.unshard, @ 3ade90a6) and frees
// them with record_stream on the compute stream (_flat_param.py,
// _free_unsharded_flat_param); it allocates each sharded gradient
// (new_sharded_grad, later _saved_grad_shard and .grad) inside its
// post-backward stream (_runtime_utils._post_backward_hook). Each pool stays
// at its high point over the step in every phase.
#include <gtest/gtest.h>

#include <string>

#include "test_support.hpp"

namespace memplan::testing {
namespace {

// Llama-2-7B, full fine-tune in fp32 with AdamW, FSDP over 8 ranks gathering
// in bf16 (MixedPrecision param_dtype), no activations, allocator without
// rounding (fragmentation 0.1 of the compute stream's freed bytes).
std::string full_finetune(const std::string& api) {
  return "name = \"t\"\nmode = \"train\"\n[model]\npreset = \"llama-2-7b\"\n[precision]\nuse = \"fp32\"\n"
         "[optimizer]\nuse = \"adamw\"\n[activations]\nuse = \"none\"\n[[strategy]]\nuse = \"data-parallel\"\n"
         "size = 8\n[[strategy]]\nuse = \"fsdp\"\nparam_dtype = \"bf16\"\n" + api +
         "[[strategy]]\nuse = \"allocator\"\nrounding = false\n";
}

// Per rank, Llama-2-7B's 6,738,415,616 parameters / 8 = 842,301,952:
//   persistent P: fp32 weights and Adam's two states, 12 B each = 10,107,623,424
//   sharded gradients G (fp32, post-backward stream): 4 B each = 3,369,207,808
//   gathered in bf16 (unshard stream), forward and backward alike (BACKWARD_PRE):
//     the root (embeddings, head, final norm: 262,148,096 x 2 = 524,296,192)
//     + 2 layers (202,383,360 x 2 = 404,766,720 each) = 1,333,829,632; in
//     backward the root through it, the 2 layers inside the layers' backward
//   unsharded gradients in backward (compute stream): root + 1 layer in fp32
//     = 464,531,456 x 4 = 1,858,125,824, and their 10 % margin 185,812,583;
//     the layer's (809,533,440, margin 80,953,344) inside the layers' backward
// Optimizer step: P + G, and the unshard pool still holds its 1,333,829,632:
//   reserved 14,810,660,864, allocated 13,476,831,232.
// Forward: P + the gathered units, and the post-backward pool holds the
//   gradients' bytes (freed by zero_grad(set_to_none=True), kept reserved):
//   14,810,660,864.
// Backward: both pools are live at their high points, nothing added: the layer units and the layer's
//   gradient (lifetime backward_in_layers) meet every gradient at the last layer's backward:
//   P + G + 1,333,829,632 + 1,858,125,824 + 185,812,583 = 16,854,599,271.
TEST(StreamPools, Fsdp1FullFineTune) {
  Evaluation e = evaluate_paper(full_finetune("api = \"fsdp1\"\n"));
  const StepPeak& reserved = e.breakdown().quantities[kReserved];
  const StepPeak& allocated = e.breakdown().quantities[kAllocated];
  EXPECT_EQ(reserved.timeline[kOptimizerStep], 14'810'660'864u);
  EXPECT_EQ(allocated.timeline[kOptimizerStep], 13'476'831'232u);
  EXPECT_EQ(reserved.timeline[kForward], 14'810'660'864u);
  EXPECT_EQ(reserved.timeline[kBackward], 16'854'599'271u);
  uint64_t forward = 0, backward = 0, optimizer = 0;
  for (const PlanItem& item : e.estimator().plan().items) {
    if (item.name_view() != "allocator.stream_pools") continue;
    EXPECT_EQ(item_quantity(item.flags), kReserved);
    if (item.lifetime == MEMPLAN_LIFETIME_TRANSIENT_FORWARD) forward += item.bytes();
    if (item.lifetime == MEMPLAN_LIFETIME_TRANSIENT_BACKWARD) backward += item.bytes();
    if (item.lifetime == MEMPLAN_LIFETIME_TRANSIENT_OPTIMIZER) optimizer += item.bytes();
  }
  EXPECT_EQ(forward, 3'369'207'808u);
  EXPECT_EQ(backward, 0u);
  EXPECT_EQ(optimizer, 1'333'829'632u);
}

// What FSDP1's wrapping leaves cached (items of lifetime setup, fsdp's
// setup = "unit") is the floor of the compute stream's pool: the caching
// allocator keeps those blocks, so the step's compute-stream memory never
// reserves less than they and the persistent tensors of the time (every
// persistent item but the optimizer states) did. Llama-2-7B in bf16 with
// SGD (no states), FSDP over 8 ranks, no activations, allocator without
// rounding:
//   persistent: the weights' shards, 6,738,415,616 x 2 / 8 = 1,684,603,904
//   set-up (Fsdp.SetupUnitByUnit): 1,048,592,384 allocated at its high point,
//     481,844,224 more cached, and the 10 % margin on the allocated part,
//     104,859,238.4 (the units before the last leave blocks split): the floor
//     is 3,319,899,750.4; init allocates 1,684,603,904 + 1,048,592,384 = 2,733,196,288
//   the compute stream's step: forward 1,684,603,904; backward + the
//     unsharded gradients (root + 1 unit in bf16, 929,062,912: the unit's
//     inside the layers' backward, which the last layer's meets) and their
//     margin (92,906,291.2) = 2,706,573,107.2: both below the floor
//   side pools: the unshard stream's 1,333,829,632 (root + 2 units), the
//     post-backward stream's sharded gradients 1,684,603,904
//   reserved in every phase: 3,319,899,750.4 + 1,333,829,632 + 1,684,603,904
//     = 6,338,333,286.4; without the set-up (setup = "none") backward reserves
//     2,706,573,107.2 + the two pools = 5,725,006,643.2.
TEST(StreamPools, SetupCacheIsTheComputePoolsFloor) {
  const std::string text =
      "name = \"t\"\nmode = \"train\"\n[model]\npreset = \"llama-2-7b\"\n[precision]\nuse = \"bf16\"\n"
      "[optimizer]\nuse = \"sgd\"\n[activations]\nuse = \"none\"\n[[strategy]]\nuse = \"data-parallel\"\n"
      "size = 8\n[[strategy]]\nuse = \"allocator\"\nrounding = false\n[[strategy]]\nuse = \"fsdp\"\n";
  Evaluation e = evaluate_paper(text);
  const StepPeak& reserved = e.breakdown().quantities[kReserved];
  // Items round to whole bytes: within 2 of the hand figures.
  EXPECT_NEAR(static_cast<double>(reserved.timeline[kInit]), 3'319'899'750.4, 2);
  EXPECT_EQ(e.breakdown().quantities[kAllocated].timeline[kInit], 2'733'196'288u);
  for (int phase : {kForward, kBackward, kOptimizerStep})
    EXPECT_NEAR(static_cast<double>(reserved.timeline[static_cast<size_t>(phase)]), 6'338'333'286.4, 2) << phase;
  Evaluation none = evaluate_paper(text + "setup = \"none\"\n");
  EXPECT_NEAR(static_cast<double>(none.breakdown().quantities[kReserved].timeline[kBackward]), 5'725'006'643.2, 2);
}

// FSDP1 is the plugin's default; "fsdp2" assigns no streams: every buffer is
// the compute stream's, with the 10 % margin on what the step frees (the
// gathered units 133,382,964, the gradients 336,920,781), and no pool is
// kept: the optimizer step reserves P + G + G's margin = 13,813,752,013.
TEST(StreamPools, DefaultIsFsdp1AndFsdp2HasNone) {
  EXPECT_EQ(evaluate_paper(full_finetune("")).breakdown().quantities[kReserved].timeline[kOptimizerStep],
            14'810'660'864u);
  Evaluation fsdp2 = evaluate_paper(full_finetune("api = \"fsdp2\"\n"));
  EXPECT_EQ(fsdp2.breakdown().quantities[kReserved].timeline[kOptimizerStep], 13'813'752'013u);
  EXPECT_EQ(fsdp2.item_bytes("allocator.stream_pools", MEMPLAN_ROLE_OVERHEAD), 0u);
}

// Gradient accumulation keeps the gradients live in forward: the
// post-backward pool adds nothing there, the unshard pool still adds the
// gathered units in the optimizer step.
TEST(StreamPools, AccumulatedGradientsAreLiveInForward) {
  std::string scenario = full_finetune("");
  scenario.replace(scenario.find("[precision]"), 0, "[batch]\ngrad_accum = 4\n");
  Evaluation e = evaluate_paper(scenario);
  uint64_t forward = 0, optimizer = 0;
  for (const PlanItem& item : e.estimator().plan().items) {
    if (item.name_view() != "allocator.stream_pools") continue;
    if (item.lifetime == MEMPLAN_LIFETIME_TRANSIENT_FORWARD) forward += item.bytes();
    if (item.lifetime == MEMPLAN_LIFETIME_TRANSIENT_OPTIMIZER) optimizer += item.bytes();
  }
  EXPECT_EQ(forward, 0u);
  EXPECT_EQ(optimizer, 1'333'829'632u);
}

// The logits-sized requests and the smaller blocks (docs/formulas.md section 7,
// "Logits-sized requests"). The caching allocator hands a cached block to a
// request only if the block is at least as large (get_free_block: lower_bound
// by size), splits a larger one (should_split), and gives segments back only
// on empty_cache or a failed cudaMalloc (release_cached_blocks). The loss's
// fp32 tensors (here 4 x 1024 x 32,768 = 134,217,728 B each) are larger than
// any block the layers' tensors leave (the largest, s x ffn x 2 = 8 MiB), so
// those cannot serve them; once a smaller tensor that outlives the step's
// backward (a gradient) sits in a split loss block, the next loss needs a new
// segment: step after step each class keeps segments of its own, and the
// compute stream reserves both high points, as two pools.
//
// A 2-layer model (hidden 1024, ffn 4096, vocab 32,768), s 1024, b 1, bf16,
// SGD, full recomputation, loss "upcast", allocator without rounding or
// margin; the plan's items, in bytes:
//   persistent P: weights 184,569,856 + cuBLAS workspaces 33,554,432 (given as
//     cublas_workspace_mib = 32: the pools, not the workspaces, are under test) = 218,124,288
//   gradients G 184,569,856 (the largest single one, the LM head's, 67,108,864)
//   activations A: the layers' checkpoints 4,194,304, embedding dropout 1,048,576,
//     final norm 4,194,304 (smaller: 9,437,184; the largest single one A1 4,194,304)
//   transients: forward the saved log-softmax 134,217,728 (logits-sized; freed once
//     the loss has run backward, before any layer's, so not a stored activation)
//     and the loss's forward 134,217,728 (logits-sized); backward the recomputed
//     layer 119,537,664 (smaller); at backward's start (lifetime backward_start)
//     the loss's moment S 216,006,656 (logits-sized: its two fp32 gradients
//     268,435,456 and the log-softmax 134,217,728, less the working set, which it
//     never meets, and less the LM head's gradient 67,108,864, which it never meets
//     either, but not below the 16-bit logits gradient the head's backward holds,
//     67,108,864)
// One pool (the host's rule, docs/estimate.md section 4), what is allocated:
//   forward 218,124,288 + 9,437,184 + 268,435,456 = 495,996,928
//   backward 218,124,288 + 119,537,664 + max(min(G + A, A + 67,108,864) + 216,006,656,
//     min(G + A, G + 4,194,304)) = 218,124,288 + 119,537,664 + max(292,552,704, 188,764,160)
//     = 630,214,656 (the loss's moment; backward's end no longer holds the log-softmax)
// Logits-sized requests alone: forward 134,217,728 + 134,217,728 = 268,435,456,
//   their high point; backward 216,006,656.
// Smaller requests alone: forward P + 9,437,184 = 227,561,472; backward
//   P + 119,537,664 + max(min(194,007,040, 76,546,048), min(194,007,040, 188,764,160)) = 526,426,112;
//   optimizer P + G = 402,694,144.
// Reserved, each plus 268,435,456: forward 495,996,928 (the one pool's figure),
//   backward 794,861,568 (allocator.stream_pools 794,861,568 - 630,214,656 = 164,646,912),
//   optimizer 671,129,600.
std::string two_layers(const std::string& extra) {
  return "name = \"t\"\nmode = \"train\"\n[model]\nlayers = 2\nhidden = 1024\nheads = 16\nffn_hidden = 4096\n"
         "vocab = 32768\nmlp = \"gelu\"\nnorm = \"layernorm\"\n[batch]\nmicro_batch = 1\nseq_len = 1024\n"
         "[precision]\nuse = \"bf16\"\n[optimizer]\nuse = \"sgd\"\n[activations]\nuse = \"megatron\"\n"
         "cross_entropy = \"upcast\"\n[[strategy]]\nuse = \"recompute\"\npolicy = \"full\"\n[[strategy]]\n"
         "use = \"allocator\"\nrounding = false\nfragmentation = 0\n[[strategy]]\nuse = \"cuda-context\"\n"
         "cublas_workspace_mib = 32\n" + extra;
}

TEST(StreamPools, LogitsSizedRequestsKeepSegmentsOfTheirOwn) {
  Evaluation e = evaluate_paper(two_layers(""));
  const StepPeak& allocated = e.breakdown().quantities[kAllocated];
  const StepPeak& reserved = e.breakdown().quantities[kReserved];
  EXPECT_EQ(allocated.timeline[kForward], 495'996'928u);
  EXPECT_EQ(allocated.timeline[kBackward], 630'214'656u);
  EXPECT_EQ(reserved.timeline[kForward], 495'996'928u);
  EXPECT_EQ(reserved.timeline[kBackward], 794'861'568u);
  EXPECT_EQ(reserved.timeline[kOptimizerStep], 671'129'600u);
  // The cached free segments are releasable (plugin_abi.h MEMPLAN_ITEM_RELEASABLE).
  for (const PlanItem& item : e.estimator().plan().items)
    if (item.name_view() == "allocator.stream_pools") {
      EXPECT_NE(item.flags & MEMPLAN_ITEM_RELEASABLE, 0u);
    }
}

// The same plan with expandable_segments = true (PYTORCH_ALLOC_CONF
// expandable_segments:True). PyTorch c10/cuda/CUDACachingAllocator.cpp (read
// at maggiemoss/pytorch @ 2553b0a80209b9395a17c37bad5fc0a728e88dd5):
// find_expandable_block gives the stream's large pool one segment (address
// space for 1 1/8 of the GPU's memory), map_block maps 20 MiB pages into it,
// try_merge_blocks merges a freed block with its free neighbours, and
// get_free_block counts a free block before the unmapped tail as the size it
// can grow to. There are no separate cudaMalloc segments for a smaller tensor
// to pin, so the logits-sized requests keep no pool of their own: with
// neither rounding nor margin, reserved is the one pool's figure, what is
// allocated, in every phase: forward 495,996,928, backward 630,214,656 (not
// 794,861,568), and no allocator.stream_pools item (the one pool adds
// nothing over the host's rule).
TEST(StreamPools, ExpandableSegmentsKeepNoLogitsPool) {
  std::string scenario = two_layers("");
  scenario.replace(scenario.find("fragmentation = 0\n"), 18, "fragmentation = 0\nexpandable_segments = true\n");
  Evaluation e = evaluate_paper(scenario);
  const StepPeak& allocated = e.breakdown().quantities[kAllocated];
  const StepPeak& reserved = e.breakdown().quantities[kReserved];
  EXPECT_EQ(reserved.timeline[kForward], 495'996'928u);
  EXPECT_EQ(reserved.timeline[kBackward], 630'214'656u);
  EXPECT_EQ(reserved.timeline[kOptimizerStep], allocated.timeline[kOptimizerStep]);
  EXPECT_EQ(e.item_bytes("allocator.stream_pools", MEMPLAN_ROLE_OVERHEAD), 0u);
}

// Where the device is full, cudaMalloc fails and the allocator frees its free
// segments and retries: the host lowers the releasable reserve so that device
// memory stays within the GPU's. The same plan with the CUDA context
// (cuda-context set to 512 MiB: 536,870,912 B outside the allocator) on a GPU of 1.1875 GiB
// (1,275,068,416 B): backward would need 794,861,568 + 536,870,912 =
// 1,331,732,480, 56,664,064 more than the GPU; the backward pool's item
// (794,861,568 - 630,214,656 = 164,646,912) is larger, so 56,664,064 of it
// gives way and the device reaches the GPU's memory exactly: backward
// reserves 794,861,568 - 56,664,064 = 738,197,504 and the device shows
// 1,275,068,416. The optimizer step's 671,129,600 + 536,870,912 =
// 1,208,000,512 fits: unchanged. What holds tensors does not give way: on
// a GPU of 1 GiB (1,073,741,824 B) backward would be 257,990,656 over; the
// whole pool item (164,646,912) gives way, backward reserves what is
// allocated, 630,214,656, and the device shows 630,214,656 + 536,870,912 =
// 1,167,085,568, 93,343,744 B above the GPU's memory.
TEST(StreamPools, FreeSegmentsGiveWayAtTheGpusMemory) {
  Evaluation e = evaluate_paper(two_layers("mib = 512\n[hardware]\nmemory_gib = 1.1875\n"));
  const StepPeak& reserved = e.breakdown().quantities[kReserved];
  EXPECT_EQ(reserved.timeline[kBackward], 738'197'504u);
  EXPECT_EQ(e.breakdown().quantities[kDevice].timeline[kBackward], 1'275'068'416u);
  EXPECT_EQ(reserved.timeline[kOptimizerStep], 671'129'600u);
  Evaluation smaller = evaluate_paper(two_layers("mib = 512\n[hardware]\nmemory_gib = 1\n"));
  EXPECT_EQ(smaller.breakdown().quantities[kReserved].timeline[kBackward], 630'214'656u);
  EXPECT_EQ(smaller.breakdown().quantities[kDevice].timeline[kBackward], 1'167'085'568u);
}

// Lines 17 use = "fsdp", 18 param_dtype, 19 the option under test.
TEST(StreamPools, ApiError) {
  const std::string error = error_of(paper(full_finetune("api = \"fsdp3\"\n")), "t.toml");
  EXPECT_NE(error.find("option 'api': must be \"fsdp1\" (FullyShardedDataParallel) or \"fsdp2\" (fully_shard), not "
                       "\"fsdp3\""),
            std::string::npos)
      << error;
}

}  // namespace
}  // namespace memplan::testing
