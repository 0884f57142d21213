// What frameworks allocate beyond the papers' tensors, plugin by plugin: the
// gathered units of FSDP at each weight's own dtype (a QLoRA base is 4-bit,
// its embeddings and head 16-bit), DeepSpeed's fp32 cast of the gradient
// partition through its profile, and Megatron-LM's gradient buffer.
#include <gtest/gtest.h>

#include "test_support.hpp"

namespace memplan::testing {
namespace {

// A small model: 2 layers, h 64, 4 heads, SwiGLU f 128, vocabulary 1000,
// untied. QLoRA (nf4 without double quantization: 4 bits + one fp32 absmax per
// 64 = 4.5 bits = 0.5625 bytes per linear weight) with LoRA r 4 on q and v
// (bf16 adapters), FSDP over 2 ranks, one layer per unit.
//   a layer: q, k, v, o 4 x 4096 + MLP 3 x 64 x 128 = 40,960 linear weights x
//            0.5 = 20,480 B (FSDP gathers the packed 4-bit values; the absmax
//            scales, bitsandbytes' quant_state, are not a parameter and stay
//            whole on every rank); its two RMSNorms 128 x 2 = 256 B; adapters
//            q r (h + q) + v r (h + kv) = 512 + 512 = 1,024 x 2 = 2,048 B:
//            22,784 B
//   the root: embeddings and LM head 2 x 64,000 x 2 + the final norm 128
//            = 256,128 B (16-bit: 'quantized' leaves them unquantized)
//   forward: the root, 256,128 B, through it; the 2 units, 45,568 B, while the layers' forward runs
//            (lifetime forward_in_layers: resharded after each unit's forward, not at the loss)
//   backward (FSDP1): the root, 256,128 B, through it; the 2 units, 45,568 B, inside the layers' backward
// At dtype.weights (the 4-bit size for everything) it would be far less: the
// embeddings and head would be priced at 0.5625 bytes.
TEST(FsdpGathers, EachWeightAtItsOwnDtype) {
  Evaluation e = evaluate_paper(
      "name = \"q\"\nmode = \"train\"\n[model]\nlayers = 2\nhidden = 64\nheads = 4\nffn_hidden = 128\n"
      "vocab = 1000\n[batch]\nseq_len = 16\n[precision]\nuse = \"quantized\"\nformat = \"nf4\"\n"
      "[optimizer]\nuse = \"adamw\"\n[activations]\nuse = \"none\"\n[[strategy]]\nuse = \"lora\"\nrank = 4\n"
      "targets = \"q,v\"\n[[strategy]]\nuse = \"data-parallel\"\nsize = 2\n[[strategy]]\nuse = \"fsdp\"\n");
  EXPECT_EQ(e.item_bytes("fsdp.gathered_forward", MEMPLAN_ROLE_BUFFERS), 256'128u);
  EXPECT_EQ(e.item_bytes("fsdp.gathered_forward_units", MEMPLAN_ROLE_BUFFERS), 45'568u);
  EXPECT_EQ(e.item_bytes("fsdp.gathered_backward", MEMPLAN_ROLE_BUFFERS), 256'128u);
  EXPECT_EQ(e.item_bytes("fsdp.gathered_backward_units", MEMPLAN_ROLE_BUFFERS), 45'568u);
}

// MixedPrecision(param_dtype = bf16) over fp32 shards (torchtitan): the units
// are gathered at 2 bytes. Llama-2-7B: a layer is 202,383,360 parameters; the
// root 2 x 131,072,000 + 4,096 = 262,148,096: forward = the root 262,148,096 x 2 =
// 524,296,192 B + the two units in flight 2 x 202,383,360 x 2 = 809,533,440 B (1,333,829,632 B
// while the layers run). float8_all_gather takes the linear layers at 1 byte: a layer's linear
// weights are 202,375,168 (its norms 8,192), so the units are 2 x (202,375,168 + 8,192 x 2) =
// 404,783,104 B and the root stays 524,296,192 B (929,079,296 B in all).
TEST(FsdpGathers, ParamDtypeAndFloat8AllGather) {
  const std::string base = "name = \"t\"\nmode = \"train\"\n[model]\npreset = \"llama-2-7b\"\n[precision]\n"
                           "use = \"fp32\"\n[optimizer]\nuse = \"adamw\"\n[activations]\nuse = \"none\"\n"
                           "[[strategy]]\nuse = \"data-parallel\"\nsize = 8\n[[strategy]]\nuse = \"fsdp\"\n"
                           "param_dtype = \"bf16\"\n";
  EXPECT_EQ(evaluate_paper(base).item_bytes("fsdp.gathered_forward", MEMPLAN_ROLE_BUFFERS), 524'296'192u);
  EXPECT_EQ(evaluate_paper(base).item_bytes("fsdp.gathered_forward_units", MEMPLAN_ROLE_BUFFERS), 809'533'440u);
  // reduce_dtype prices FSDP1's unsharded gradients, the root's (262,148,096) and the unit's being reduced
  // (202,383,360): x 4 in the fp32 gradients' own dtype, x 2 in bf16.
  EXPECT_EQ(evaluate_paper(base).item_bytes("fsdp.unsharded_gradients", MEMPLAN_ROLE_BUFFERS), 1'048'592'384u);
  EXPECT_EQ(evaluate_paper(base).item_bytes("fsdp.unsharded_gradients_units", MEMPLAN_ROLE_BUFFERS), 809'533'440u);
  EXPECT_EQ(evaluate_paper(base + "reduce_dtype = \"bf16\"\n").item_bytes("fsdp.unsharded_gradients",
                                                                          MEMPLAN_ROLE_BUFFERS),
            524'296'192u);
  EXPECT_EQ(evaluate_paper(base + "reduce_dtype = \"bf16\"\n").item_bytes("fsdp.unsharded_gradients_units",
                                                                          MEMPLAN_ROLE_BUFFERS),
            404'766'720u);
  EXPECT_EQ(evaluate_paper(base + "float8_all_gather = true\n").item_bytes("fsdp.gathered_forward",
                                                                           MEMPLAN_ROLE_BUFFERS),
            524'296'192u);
  EXPECT_EQ(evaluate_paper(base + "float8_all_gather = true\n").item_bytes("fsdp.gathered_forward_units",
                                                                           MEMPLAN_ROLE_BUFFERS),
            404'783'104u);
}

// reshard_after_forward = false keeps every unit gathered from its forward to
// its backward: the whole model at 2 bytes lives like an activation
// (6,738,415,616 x 2 = 13,476,831,232 B), and backward gathers nothing again.
TEST(FsdpGathers, NoReshardAfterForwardKeepsTheModelGathered) {
  Evaluation e = evaluate_paper(
      "name = \"r\"\nmode = \"train\"\n[model]\npreset = \"llama-2-7b\"\n[precision]\nuse = \"bf16\"\n"
      "[optimizer]\nuse = \"sgd\"\n[activations]\nuse = \"none\"\n[[strategy]]\nuse = \"data-parallel\"\n"
      "size = 8\n[[strategy]]\nuse = \"fsdp\"\nreshard_after_forward = false\n");
  EXPECT_EQ(e.item_bytes("fsdp.unsharded_parameters", MEMPLAN_ROLE_BUFFERS), 13'476'831'232u);
  EXPECT_EQ(e.item_bytes("fsdp.gathered_backward", MEMPLAN_ROLE_BUFFERS), 0u);
}

// gradient_sync: torch.distributed.pipelining calls
// set_requires_gradient_sync(last_backward) on an FSDP2 stage (stage.py,
// _configure_data_parallel_mode), and FSDP2 then keeps each unsharded gradient,
// upcast to reduce_dtype, in unsharded_accumulated_grad until the last
// micro-batch reduce-scatters it (FSDPParam.to_accumulated_grad_if_needed).
// Llama-2-7B, pipeline 2 (the first stage: 16 layers + the embedding), fp32
// reduce: (16 x 202,383,360 + 131,072,000) = 3,369,205,760 elements x 4 B =
// 13,476,823,040 B through backward; bf16 reduce halves it. "auto" is off for
// FSDP1, without a pipeline, and with one micro-batch; "last-micro-batch"
// without a pipeline holds the whole model: 6,738,415,616 x 4 = 26,953,662,464 B.
TEST(FsdpGathers, LastMicroBatchSyncAccumulatesUnshardedGradients) {
  auto scenario = [](const std::string& layout, const std::string& fsdp, int grad_accum) {
    return "name = \"a\"\nmode = \"train\"\n[model]\npreset = \"llama-2-7b\"\n[batch]\nmicro_batch = 1\n"
           "seq_len = 1024\ngrad_accum = " + std::to_string(grad_accum) +
           "\n[precision]\nuse = \"fp32\"\n[optimizer]\nuse = \"adamw\"\n[activations]\nuse = \"none\"\n"
           "[[strategy]]\nuse = \"data-parallel\"\nsize = 2\n" + layout +
           "[[strategy]]\nuse = \"fsdp\"\nparam_dtype = \"bf16\"\n" + fsdp;
  };
  const std::string pipeline = "[[strategy]]\nuse = \"pipeline-parallel\"\nsize = 2\n";
  // The same bytes in backward and, for micro-batches 2 to M, in forward.
  auto accumulated = [](const std::string& text) {
    Evaluation e = evaluate_paper(text);
    uint64_t forward = 0, backward = 0;
    for (const PlanItem& item : e.estimator().plan().items) {
      if (item.name_view() != "fsdp.accumulated_gradients") continue;
      EXPECT_TRUE(item.lifetime == MEMPLAN_LIFETIME_TRANSIENT_BACKWARD ||
                  item.lifetime == MEMPLAN_LIFETIME_TRANSIENT_FORWARD);
      (item.lifetime == MEMPLAN_LIFETIME_TRANSIENT_FORWARD ? forward : backward) += item.bytes();
    }
    EXPECT_EQ(forward, backward);
    return backward;
  };
  EXPECT_EQ(accumulated(scenario(pipeline, "api = \"fsdp2\"\nreduce_dtype = \"fp32\"\n", 4)), 13'476'823'040u);
  EXPECT_EQ(accumulated(scenario(pipeline, "api = \"fsdp2\"\nreduce_dtype = \"bf16\"\n", 4)), 6'738'411'520u);
  EXPECT_EQ(accumulated(scenario(pipeline, "api = \"fsdp2\"\nreduce_dtype = \"fp32\"\n", 1)), 0u);
  EXPECT_EQ(accumulated(scenario(pipeline, "api = \"fsdp1\"\nreduce_dtype = \"fp32\"\n", 4)), 0u);
  EXPECT_EQ(accumulated(scenario(pipeline, "api = \"fsdp2\"\ngradient_sync = \"every-micro-batch\"\n", 4)), 0u);
  EXPECT_EQ(accumulated(scenario("", "api = \"fsdp2\"\nreduce_dtype = \"fp32\"\n", 4)), 0u);
  EXPECT_EQ(accumulated(scenario("", "gradient_sync = \"last-micro-batch\"\nreduce_dtype = \"fp32\"\n", 2)),
            26'953'662'464u);
  EXPECT_NE(error_of(scenario("", "gradient_sync = \"sometimes\"\n", 2), "f.toml")
                .find("option 'gradient_sync': must be \"auto\", \"every-micro-batch\" or \"last-micro-batch\", "
                      "not \"sometimes\""),
            std::string::npos);
}

// frozen_gradients: FSDP1 with use_orig_params=True gives a unit that mixes
// frozen and trainable parameters a gradient over its whole flat parameter
// (the use_orig_params docstring of torch/distributed/fsdp/
// fully_sharded_data_parallel.py: "equivalent to not freezing those
// parameters"), and no_sync() (gradient_sync = "last-micro-batch") keeps those
// unsharded gradients until the last micro-batch. Llama-2-7B, bf16, LoRA r 8
// on q and v, FSDP over 2 ranks, 2 micro-batches. A layer: 202,383,360
// parameters + adapters 2 x 8 x (4096 + 4096) = 131,072 = 202,514,432; every
// layer has adapters, the root (embeddings, final norm, head) none, so no
// gradient: accumulated 32 x 202,514,432 x 2 B = 12,960,923,648 B, the unit
// being reduced 202,514,432 x 2 = 405,028,864 B (inside the layers' backward,
// lifetime backward_in_layers). Without the option only the adapters: 32 x
// 131,072 x 2 = 8,388,608 B and 262,144 B. fully_shard keeps
// one gradient per parameter: the option is refused with api = "fsdp2".
TEST(FsdpGathers, FrozenGradientsCountMixedUnitsWhole) {
  auto scenario = [](const std::string& fsdp) {
    return "name = \"f\"\nmode = \"train\"\n[model]\npreset = \"llama-2-7b\"\n[batch]\nmicro_batch = 1\n"
           "seq_len = 1024\ngrad_accum = 2\n[precision]\nuse = \"bf16\"\n[optimizer]\nuse = \"adamw\"\n"
           "[activations]\nuse = \"none\"\n[[strategy]]\nuse = \"lora\"\nrank = 8\ntargets = \"q,v\"\n"
           "[[strategy]]\nuse = \"data-parallel\"\nsize = 2\n[[strategy]]\nuse = \"fsdp\"\n"
           "gradient_sync = \"last-micro-batch\"\n" + fsdp;
  };
  auto bytes = [](const std::string& text, std::string_view name, int lifetime) {
    Evaluation e = evaluate_paper(text);
    uint64_t total = 0;
    for (const PlanItem& item : e.estimator().plan().items)
      if (item.name_view() == name && item.lifetime == lifetime) total += item.bytes();
    return total;
  };
  const std::string whole = scenario("frozen_gradients = true\n");
  EXPECT_EQ(bytes(whole, "fsdp.accumulated_gradients", MEMPLAN_LIFETIME_TRANSIENT_BACKWARD), 12'960'923'648u);
  EXPECT_EQ(bytes(whole, "fsdp.unsharded_gradients_units", MEMPLAN_LIFETIME_BACKWARD_IN_LAYERS), 405'028'864u);
  EXPECT_EQ(bytes(whole, "fsdp.unsharded_gradients", MEMPLAN_LIFETIME_TRANSIENT_BACKWARD), 0u);  // the root trains nothing
  const std::string adapters = scenario("");
  EXPECT_EQ(bytes(adapters, "fsdp.accumulated_gradients", MEMPLAN_LIFETIME_TRANSIENT_BACKWARD), 8'388'608u);
  EXPECT_EQ(bytes(adapters, "fsdp.unsharded_gradients_units", MEMPLAN_LIFETIME_BACKWARD_IN_LAYERS), 262'144u);
  EXPECT_NE(error_of(scenario("api = \"fsdp2\"\nfrozen_gradients = true\n"), "f.toml").find("frozen_gradients"),
            std::string::npos);
  // Combinations it does not count right are refused, naming the option.
  EXPECT_NE(error_of(scenario("setup = \"none\"\nseparate_embeddings = true\nfrozen_gradients = true\n"), "f.toml")
                .find("is not modelled with separate_embeddings"),
            std::string::npos);
  EXPECT_NE(error_of(scenario("unit_layers = 2\nfrozen_gradients = true\n"), "f.toml")
                .find("is modelled for one layer per unit"),
            std::string::npos);
}

// DeepSpeed's profile: the step casts the rank's gradient partition to fp32
// (stage_1_and_2.py: single_grad_partition = flat partition .to(fp32)).
// Llama-2-7B, ZeRO-2 over 8 ranks: 4 x 6,738,415,616 / 8 = 3,369,207,808 B,
// only during the optimizer step; none in the paper view.
TEST(DeepSpeedProfile, StepCastsTheGradientPartitionToFp32) {
  const std::string body = "[model]\npreset = \"llama-2-7b\"\n[precision]\nuse = \"mixed-bf16\"\n[optimizer]\n"
                           "use = \"adamw\"\n[activations]\nuse = \"none\"\n[[strategy]]\nuse = \"data-parallel\"\n"
                           "size = 8\n[[strategy]]\nuse = \"zero\"\nstage = 2\n";
  Evaluation ds = evaluate("name = \"d\"\nmode = \"train\"\n[framework]\nuse = \"deepspeed\"\n" + body);
  uint64_t cast = 0;
  for (const PlanItem& item : ds.estimator().plan().items)
    if (item.name_view().ends_with(".main_grad")) {
      EXPECT_EQ(item.lifetime, MEMPLAN_LIFETIME_TRANSIENT_OPTIMIZER);
      cast += item.bytes();
    }
  EXPECT_NEAR(static_cast<double>(cast), 3'369'207'808.0, 64);
  Evaluation paper_view = evaluate_paper("name = \"d\"\nmode = \"train\"\n" + body);
  for (const PlanItem& item : paper_view.estimator().plan().items)
    EXPECT_FALSE(item.name_view().ends_with(".main_grad")) << Estimator::display_name(item);
}

// DeepSpeed's profile by version (plugins/frameworks/deepspeed/profile.toml, [[since]]): ZeRO 1/2 flushes
// reduce a bucket's slices in place before v0.12.4 and flatten them for one all-reduce from it (commit
// 2afa1c7f2); the buckets are made before loss.backward() before v0.17.2 and at the first gradient hook from
// it (commit ed5f73755). Llama-2-7B, ZeRO-2 over 8 ranks, the default 5e8-element bf16 bucket (1e9 B): the
// 6,738,415,616 trainable elements overflow it in backward, so a flush copies a bucket's worth, 1e9 B.
TEST(DeepSpeedProfile, VersionPicksTheBucketsFlushCopyAndLifetime) {
  auto run = [](const std::string& version, const std::string& comm = "") {
    return evaluate("name = \"d\"\nmode = \"train\"\n[framework]\nuse = \"deepspeed\"\nversion = \"" + version +
                    "\"\n[model]\npreset = \"llama-2-7b\"\n[precision]\nuse = \"mixed-bf16\"\n[optimizer]\nuse = "
                    "\"adamw\"\n[activations]\nuse = \"none\"\n[[strategy]]\nuse = \"data-parallel\"\nsize = 8\n"
                    "[[strategy]]\nuse = \"zero\"\nstage = 2\n" + comm);
  };
  EXPECT_EQ(run("0.12.3").item_bytes("deepspeed.allreduce_copy", MEMPLAN_ROLE_BUFFERS), 0u);
  EXPECT_EQ(run("0.12.4").item_bytes("deepspeed.allreduce_copy", MEMPLAN_ROLE_BUFFERS), 1'000'000'000u);
  EXPECT_EQ(run("0.12.4").item_lifetime("deepspeed.allreduce_copy"), MEMPLAN_LIFETIME_BACKWARD_IN_LAYERS);
  EXPECT_EQ(run("0.17.1").item_lifetime("deepspeed.reduce_bucket"), MEMPLAN_LIFETIME_TRANSIENT_BACKWARD);
  EXPECT_EQ(run("0.17.2").item_lifetime("deepspeed.reduce_bucket"), MEMPLAN_LIFETIME_BACKWARD_LAYERS);
  EXPECT_EQ(run("0.19.5").item_lifetime("deepspeed.reduce_bucket"), MEMPLAN_LIFETIME_BACKWARD_LAYERS);
  // The profile's version defaults are no error where DeepSpeed's buckets are not used.
  EXPECT_EQ(error_of("name = \"d\"\nmode = \"train\"\n[framework]\nuse = \"deepspeed\"\nversion = \"0.9.0\"\n"
                     "[model]\npreset = \"llama-2-7b\"\n[precision]\nuse = \"bf16\"\n[optimizer]\nuse = \"sgd\"\n"
                     "[activations]\nuse = \"none\"\n[[strategy]]\nuse = \"data-parallel\"\nsize = 8\n[[strategy]]\n"
                     "use = \"comm-buffers\"\nbuckets = \"none\"\n"),
            "");
}

// Megatron-LM's profile: the fp32 gradient buffer exists from start-up, so
// forward already holds it. GPT-2 XL shape (1,557,686,400 parameters with the
// vocabulary padded to 50,304): the buffer is 4 bytes each, 6,230,745,600 B,
// at init and in every phase.
TEST(MegatronProfile, GradientBufferLivesFromStartUp) {
  Evaluation e = evaluate("name = \"m\"\nmode = \"train\"\n[framework]\nuse = \"megatron-lm\"\n[model]\n"
                          "preset = \"gpt2-xl\"\nvocab = 50304\n[batch]\nseq_len = 1024\n[precision]\n"
                          "use = \"mixed-bf16\"\n[optimizer]\nuse = \"adam\"\n[activations]\nuse = \"megatron\"\n");
  for (const PlanItem& item : e.estimator().plan().items) {
    if (item.role == MEMPLAN_ROLE_GRADIENTS && !item.name_view().ends_with(".grad") &&
        item.name_view() != "activations.tied_embedding_gradient") {
      EXPECT_EQ(item.lifetime, MEMPLAN_LIFETIME_PERSISTENT);
    }
  }
  // 18 bytes per parameter at init: bf16 weights, fp32 gradients, master weights and two Adam moments, and the
  // two 32 MiB cuBLAS workspaces of training and Transformer Engine's 32 MiB + 1 KiB (no GPU named: Hopper's size).
  EXPECT_EQ(e.breakdown().quantities[kAllocated].timeline[kInit],
            18ull * 1'557'686'400 + 64 * 1024 * 1024 + 33'555'456);
  // The embeddings' dense bf16 gradients before the hook adds them to the buffer (backward only):
  // 50,304 x 1,600 x 2 = 160,972,800 and 1,024 x 1,600 x 2 = 3,276,800 bytes.
  EXPECT_EQ(e.item_bytes("embed_tokens.grad", MEMPLAN_ROLE_GRADIENTS), 160'972'800u);
  EXPECT_EQ(e.item_bytes("embed_positions.grad", MEMPLAN_ROLE_GRADIENTS), 3'276'800u);
  // The tied embedding's second gradient at backward's end: the head's gradient waits in the shared
  // weight's input buffer until the embedding's arrives (input_buffer.cpp), and the hook runs on their sum:
  // 50,304 x 1,600 x 2 = 160,972,800 bytes beside the summed embed_tokens.grad, at backward's end only.
  EXPECT_EQ(e.item_bytes("activations.tied_embedding_gradient", MEMPLAN_ROLE_GRADIENTS), 160'972'800u);
  // The gradients component: the buffer, the two transients and that second gradient.
  EXPECT_EQ(e.component(MEMPLAN_ROLE_GRADIENTS), 6'230'745'600u + 160'972'800u + 3'276'800u + 160'972'800u);
}

// When the gradients are kept from step to step, the dense gradient each large weight's backward makes before
// it is added into the kept one lives at that backward only (precision recipes 1.2.1): an untied embedding's
// at backward's end (its backward is the last), an untied LM head's at backward's start (right after the
// loss's); a tied embedding's through the whole backward (the head's gradient waits in the input buffer).
// Before, an untied embedding's stood through the whole backward, beside every activation at its start.
TEST(MegatronProfile, KeptGradientsDenseCopiesAtTheirBackward) {
  const auto run = [](const std::string& model) {
    return evaluate("name = \"m\"\nmode = \"train\"\n[framework]\nuse = \"megatron-lm\"\n[model]\n" + model +
                    "[batch]\nseq_len = 1024\n[precision]\nuse = \"mixed-bf16\"\n[optimizer]\nuse = \"adam\"\n"
                    "[activations]\nuse = \"megatron\"\n");
  };
  Evaluation untied = run("preset = \"llama-2-7b\"\n");
  EXPECT_EQ(untied.item_lifetime("embed_tokens.grad"), MEMPLAN_LIFETIME_BACKWARD_END);
  EXPECT_EQ(untied.item_lifetime("lm_head.grad"), MEMPLAN_LIFETIME_BACKWARD_START);
  EXPECT_EQ(untied.item_bytes("lm_head.grad", MEMPLAN_ROLE_GRADIENTS), 32'000ull * 4096 * 2);
  Evaluation tied = run("preset = \"gpt2-xl\"\nvocab = 50304\n");
  EXPECT_EQ(tied.item_lifetime("embed_tokens.grad"), MEMPLAN_LIFETIME_TRANSIENT_BACKWARD);
  EXPECT_EQ(tied.item_lifetime("embed_positions.grad"), MEMPLAN_LIFETIME_BACKWARD_END);
}

// The allocator's reserve covers the buffers that are tensors of the
// allocator too: FSDP's gathered root and units (524,296,192 B through the
// forward and 809,533,440 B while its layers run, above) get the 10 %
// fragmentation margin with their own lifetimes, 52,429,619.2 -> 52,429,620 B
// (transient_forward) and 80,953,344 B (transient_forward_in_layers),
// 133,382,964 B in all; and the reserve counts in reserved memory only.
// With api "fsdp2" (no side streams assigned) the units are the compute
// stream's; FSDP1's own pools: tests/frameworks/stream_pools_test.cpp.
TEST(AllocatorReserve, CoversBufferTensors) {
  Evaluation e = evaluate_paper(
      "name = \"t\"\nmode = \"train\"\n[model]\npreset = \"llama-2-7b\"\n[precision]\nuse = \"fp32\"\n"
      "[optimizer]\nuse = \"adamw\"\n[activations]\nuse = \"none\"\n[[strategy]]\nuse = \"data-parallel\"\n"
      "size = 8\n[[strategy]]\nuse = \"fsdp\"\nparam_dtype = \"bf16\"\napi = \"fsdp2\"\n[[strategy]]\nuse = "
      "\"allocator\"\nrounding = false\n");
  uint64_t forward_reserve = 0;
  for (const PlanItem& item : e.estimator().plan().items)
    if (item.name_view() == "allocator.fragmentation" && (item.lifetime == MEMPLAN_LIFETIME_TRANSIENT_FORWARD ||
                                                          item.lifetime == MEMPLAN_LIFETIME_FORWARD_IN_LAYERS)) {
      EXPECT_EQ(item_quantity(item.flags), kReserved);
      forward_reserve += item.bytes();
    }
  EXPECT_EQ(forward_reserve, 133'382'964u);
  const Breakdown& b = e.breakdown();
  EXPECT_GT(b.quantities[kReserved].peak, b.quantities[kAllocated].peak);
  EXPECT_EQ(b.quantities[kDevice].peak, b.quantities[kReserved].peak);  // no context, no NCCL in this plan
}

// cuda-context's module_loading: "eager" makes the context the 1343 MiB the
// Hugging Face documentation measured with every kernel loaded; lazy keeps the 767 MiB measured after a training step (H100, CUDA 13.0).
TEST(CudaContextLoading, EagerModuleLoadingIsTheMeasuredContext) {
  const std::string base = "name = \"c\"\nmode = \"train\"\n[model]\nparams = 1e9\n[precision]\nuse = \"bf16\"\n"
                           "[optimizer]\nuse = \"sgd\"\n[activations]\nuse = \"none\"\n[[strategy]]\n"
                           "use = \"cuda-context\"\n";
  EXPECT_EQ(evaluate_paper(base + "module_loading = \"eager\"\n").item_bytes("cuda_context", MEMPLAN_ROLE_OVERHEAD),
            1343ull * 1024 * 1024);
  EXPECT_EQ(evaluate_paper(base).item_bytes("cuda_context", MEMPLAN_ROLE_OVERHEAD), 767ull * 1024 * 1024);
  // A size given wins over the default module_loading chooses (a profile sets module_loading by
  // version; a scenario that measured its context gives mib); a wrong value is still an error.
  EXPECT_EQ(evaluate_paper(base + "module_loading = \"eager\"\nmib = 100\n")
                .item_bytes("cuda_context", MEMPLAN_ROLE_OVERHEAD),
            100ull * 1024 * 1024);
  EXPECT_NE(error_of(base + "module_loading = \"early\"\nmib = 100\n").find(
                "option 'module_loading': must be \"lazy\" or \"eager\", not \"early\""),
            std::string::npos);
}

// A 4-bit (nf4) base is dequantized to bf16 for each matrix multiply, in
// forward and in backward (bitsandbytes MatMul4Bit): the largest, Llama-2-7B's
// 4,096 x 11,008 MLP matrix, is 90,177,536 B while a layer's forward runs
// (lifetime forward_in_layers: not at the forward's end, where the loss runs)
// and while a layer's backward runs (backward_in_layers: not at the loss's
// backward, where the 16-bit LM head runs). A bf16 base has none.
TEST(QuantizedBase, DequantizedWeightAtTheHighPoints) {
  const std::string head = "name = \"q\"\nmode = \"train\"\n[model]\npreset = \"llama-2-7b\"\n[batch]\nseq_len = 512\n";
  const std::string activations = "[optimizer]\nuse = \"adamw\"\n[activations]\nuse = \"megatron\"\n"
                                  "layer = \"eager\"\nflash_attention = true\ndropout = false\n";
  const std::string lora = "[[strategy]]\nuse = \"lora\"\nrank = 8\ntargets = \"q,v\"\n";
  const std::string tail = activations + lora;
  // Bytes of activations.dequantized_weight with `lifetime`.
  const auto dequantized = [](const Evaluation& e, int32_t lifetime) {
    uint64_t bytes = 0;
    for (const PlanItem& item : e.estimator().plan().items)
      if (item.name_view() == "activations.dequantized_weight" && item.lifetime == lifetime) bytes += item.bytes();
    return bytes;
  };
  const Evaluation nf4 = evaluate_paper(head + "[precision]\nuse = \"quantized\"\nformat = \"nf4\"\n" + tail);
  EXPECT_EQ(dequantized(nf4, MEMPLAN_LIFETIME_FORWARD_IN_LAYERS), 90'177'536u);
  EXPECT_EQ(dequantized(nf4, MEMPLAN_LIFETIME_FORWARD_END), 0u);
  EXPECT_EQ(dequantized(nf4, MEMPLAN_LIFETIME_BACKWARD_IN_LAYERS), 90'177'536u);
  EXPECT_EQ(dequantized(nf4, MEMPLAN_LIFETIME_BACKWARD_START), 0u);
  const Evaluation bf16 = evaluate_paper(head + "[precision]\nuse = \"bf16\"\n" + tail);
  EXPECT_EQ(bf16.item_bytes("activations.dequantized_weight", MEMPLAN_ROLE_ACTIVATIONS), 0u);
  // A quantized LM head (Lightning Fabric's BitsandbytesPrecision replaces every nn.Linear, the head included)
  // is dequantized at the forward's end and at the loss's backward, where it runs: 32,000 x 4,096 x 2 B =
  // 262,144,000 B there (lifetimes forward_end and backward_start), the layers' largest matrix while they run.
  const Evaluation head4 =
      evaluate_paper(head + "[precision]\nuse = \"quantized\"\nformat = \"nf4\"\n"
                            "quantize = \"attention,mlp,lm_head\"\n" + tail);
  EXPECT_EQ(dequantized(head4, MEMPLAN_LIFETIME_FORWARD_END), 262'144'000u);
  EXPECT_EQ(dequantized(head4, MEMPLAN_LIFETIME_FORWARD_IN_LAYERS), 90'177'536u);
  EXPECT_EQ(dequantized(head4, MEMPLAN_LIFETIME_BACKWARD_START), 262'144'000u);
  EXPECT_EQ(dequantized(head4, MEMPLAN_LIFETIME_BACKWARD_IN_LAYERS), 90'177'536u);
  // The head alone quantized: its dequantized copy, and none in the layers.
  const Evaluation only_head =
      evaluate_paper(head + "[precision]\nuse = \"quantized\"\nformat = \"nf4\"\nquantize = \"lm_head\"\n" + tail);
  EXPECT_EQ(dequantized(only_head, MEMPLAN_LIFETIME_FORWARD_END), 262'144'000u);
  EXPECT_EQ(dequantized(only_head, MEMPLAN_LIFETIME_FORWARD_IN_LAYERS), 0u);
  EXPECT_EQ(dequantized(only_head, MEMPLAN_LIFETIME_BACKWARD_START), 262'144'000u);
  EXPECT_EQ(dequantized(only_head, MEMPLAN_LIFETIME_BACKWARD_IN_LAYERS), 0u);
  // Unsloth from 2025.2.1 dequantizes the forward's matrices into one global buffer it never frees
  // (kernels/utils.py fast_dequantize(..., use_global_buffer = True)): the 90,177,536 B persist from the first
  // forward on, so the optimizer step's high point holds them too; backward's own
  // fast_dequantize calls still make a temporary while a layer's backward runs.
  const Evaluation buffered =
      evaluate_paper(head + "[precision]\nuse = \"quantized\"\nformat = \"nf4\"\n" + activations +
                     "dequantized_buffer = true\n" + lora);
  EXPECT_EQ(dequantized(buffered, MEMPLAN_LIFETIME_PERSISTENT), 90'177'536u);
  EXPECT_EQ(dequantized(buffered, MEMPLAN_LIFETIME_FORWARD_IN_LAYERS), 0u);
  EXPECT_EQ(dequantized(buffered, MEMPLAN_LIFETIME_BACKWARD_IN_LAYERS), 90'177'536u);
  EXPECT_EQ(buffered.breakdown().timeline[kOptimizerStep] - nf4.breakdown().timeline[kOptimizerStep], 90'177'536u);
  // The forward's high point is its end, the loss's moment (the loss's fp32 logits, 512 x 32,000 x 12 B =
  // 196,608,000 B, outweigh the matrix): the temporary is gone there, the buffer is not.
  EXPECT_EQ(buffered.breakdown().timeline[kForward] - nf4.breakdown().timeline[kForward], 90'177'536u);
}

// Activation offloading (torchtune's enable_activation_offloading): the layers'
// stored activations live in host memory; the GPU holds two layers' worth in
// forward and in backward. Llama-3.2-3B eager at 1024 tokens: a layer is
// 139,368 x 1024 = 142,712,832 B, 28 layers 3,995,959,296 B on the host, two
// layers 285,425,664 B on the GPU in each pass. torchtune's OffloadActivations
// wraps the model's whole forward but the output head (offload_scope =
// "model"): the final RMSNorm's saves go to the host too, its fp32 input copy,
// rsqrt and the trained scale's normalized bf16 copy, (4 h + 4 + 2 h) = 18,436
// B a token x 1024 = 18,878,464 B; the head's own saved input (2 h a token,
// the tied embedding trains under SGD) stays on the GPU.
constexpr uint64_t kFinalNormOnHost = 18'436ull * 1024;

TEST(ActivationOffload, TwoLayersStayOnTheGpu) {
  Evaluation e = evaluate_paper(
      "name = \"a\"\nmode = \"train\"\n[model]\npreset = \"llama-3.2-3b\"\n[batch]\nseq_len = 1024\n"
      "[precision]\nuse = \"bf16\"\n[optimizer]\nuse = \"sgd\"\n[activations]\nuse = \"megatron\"\n"
      "layer = \"eager\"\nflash_attention = true\ndropout = false\ncross_entropy = \"upcast\"\noffload = true\n");
  EXPECT_EQ(e.breakdown().cpu_components[MEMPLAN_ROLE_ACTIVATIONS], 28ull * 139'368 * 1024 + kFinalNormOnHost);
  EXPECT_EQ(e.item_bytes("layers.0-27.activations", MEMPLAN_ROLE_ACTIVATIONS), 0u);  // not on the GPU
  EXPECT_EQ(e.item_bytes("activations.final_norm", MEMPLAN_ROLE_ACTIVATIONS), 2ull * 3072 * 1024);  // the head's input
  EXPECT_EQ(e.item_bytes("activations.offload_window", MEMPLAN_ROLE_ACTIVATIONS), 2ull * 2 * 139'368 * 1024);
}

// offload_backward_layers = 1 (Unsloth's offloaded checkpointing before
// 2025.3.2 copies a layer's stored activations back when its backward starts)
// holds only the layer in flight in backward: the same scenario keeps two
// layers in forward and one in backward, 3 x 142,712,832 = 428,138,496 B over
// both passes; the host copy is unchanged. With 3 (a reload double buffer
// beside the last layer's input) backward holds three: 5 x 142,712,832.
TEST(ActivationOffload, BackwardHoldsTheLayersItIsTold) {
  Evaluation e = evaluate_paper(
      "name = \"a\"\nmode = \"train\"\n[model]\npreset = \"llama-3.2-3b\"\n[batch]\nseq_len = 1024\n"
      "[precision]\nuse = \"bf16\"\n[optimizer]\nuse = \"sgd\"\n[activations]\nuse = \"megatron\"\n"
      "layer = \"eager\"\nflash_attention = true\ndropout = false\ncross_entropy = \"upcast\"\noffload = true\n"
      "offload_backward_layers = 1\n");
  EXPECT_EQ(e.breakdown().cpu_components[MEMPLAN_ROLE_ACTIVATIONS], 28ull * 139'368 * 1024 + kFinalNormOnHost);
  EXPECT_EQ(e.item_bytes("activations.offload_window", MEMPLAN_ROLE_ACTIVATIONS), 3ull * 139'368 * 1024);
  uint64_t backward = 0;
  for (const PlanItem& item : e.estimator().plan().items)
    if (item.name_view() == "activations.offload_window" && item.lifetime == MEMPLAN_LIFETIME_TRANSIENT_BACKWARD)
      backward += item.bytes();
  EXPECT_EQ(backward, 139'368ull * 1024);
  const std::string three =
      "name = \"a\"\nmode = \"train\"\n[model]\npreset = \"llama-3.2-3b\"\n[batch]\nseq_len = 1024\n"
      "[precision]\nuse = \"bf16\"\n[optimizer]\nuse = \"sgd\"\n[activations]\nuse = \"megatron\"\n"
      "layer = \"eager\"\nflash_attention = true\ndropout = false\ncross_entropy = \"upcast\"\noffload = true\n"
      "offload_backward_layers = ";
  EXPECT_EQ(evaluate_paper(three + "3\n").item_bytes("activations.offload_window", MEMPLAN_ROLE_ACTIVATIONS),
            5ull * 139'368 * 1024);
  EXPECT_NE(error_of(paper(three + "0\n")).find("option 'offload_backward_layers': must be a positive integer, got 0"),
            std::string::npos);
}

// Optimizer in backward (torchtune's optimizer_in_bwd): each parameter steps
// in its gradient hook and its gradient is freed. Llama-2-7B in bf16 with
// AdamW: the largest tensor is the embedding (or the untied head), 32,000 x
// 4,096 = 131,072,000 elements: one gradient of 262,144,000 B and, for a
// for-loop step, its 3 temporaries of that tensor, 786,432,000 B, both at the
// backward high point; the optimizer phase holds the weights and states only
// (2 + 4 bytes x 6,738,415,616 = 40,430,493,696 B).
TEST(OptimizerInBackward, OneGradientAtATime) {
  const std::string base = "name = \"o\"\nmode = \"train\"\n[model]\npreset = \"llama-2-7b\"\n[precision]\n"
                           "use = \"bf16\"\n[optimizer]\nuse = \"adamw\"\nin_backward = true\n"
                           "implementation = \"for-loop\"\n[activations]\nuse = \"none\"\n";
  Evaluation e = evaluate_paper(base);
  EXPECT_EQ(e.component(MEMPLAN_ROLE_GRADIENTS), 262'144'000u);
  EXPECT_EQ(e.item_bytes("optimizer.in_backward_temps", MEMPLAN_ROLE_OPTIMIZER_STATES), 786'432'000u);
  const auto& t = e.breakdown().timeline;
  EXPECT_EQ(t[kOptimizerStep], 40'430'493'696u);
  EXPECT_EQ(t[kBackward], 40'430'493'696u + 262'144'000u + 786'432'000u);
  EXPECT_EQ(error_of("name = \"o\"\nmode = \"train\"\n[model]\npreset = \"llama-2-7b\"\n[batch]\ngrad_accum = 2\n"
                     "[precision]\nuse = \"bf16\"\n[optimizer]\nuse = \"adamw\"\nin_backward = true\n"
                     "[activations]\nuse = \"none\"\n",
                     "o.toml"),
            "o.toml:11:15: error: in [optimizer], optimizer plugin 'adamw', option 'in_backward': steps each parameter "
            "as its gradient appears, so gradients cannot accumulate over micro-batches; set [batch] grad_accum = 1 "
            "or in_backward = false (plugin library " +
                plugin_dir() + "/memplan-adamw.so)");
}

// One optimizer per parameter (torchtune's optimizer_in_bwd) sizes the step's
// temporaries for that one tensor: a foreach step over the one-tensor group
// allocates one tensor like it (_foreach_sqrt of exp_avg_sq), 131,072,000 x
// 2 B = 262,144,000; a fused one none. The gradient is the same.
TEST(OptimizerInBackward, TemporariesFollowTheImplementation) {
  const std::string base = "name = \"o\"\nmode = \"train\"\n[model]\npreset = \"llama-2-7b\"\n[precision]\n"
                           "use = \"bf16\"\n[optimizer]\nuse = \"adamw\"\nin_backward = true\n";
  const std::string tail = "\n[activations]\nuse = \"none\"\n";
  Evaluation foreach = evaluate_paper(base + "implementation = \"foreach\"" + tail);
  EXPECT_EQ(foreach.item_bytes("optimizer.in_backward_temps", MEMPLAN_ROLE_OPTIMIZER_STATES), 262'144'000u);
  EXPECT_EQ(foreach.breakdown().timeline[kBackward], 40'430'493'696u + 262'144'000u + 262'144'000u);
  Evaluation fused = evaluate_paper(base + "implementation = \"fused\"" + tail);
  EXPECT_EQ(fused.item_bytes("optimizer.in_backward_temps", MEMPLAN_ROLE_OPTIMIZER_STATES), 0u);
  EXPECT_EQ(fused.component(MEMPLAN_ROLE_GRADIENTS), 262'144'000u);
  EXPECT_EQ(fused.breakdown().timeline[kBackward], 40'430'493'696u + 262'144'000u);
}


// Unsloth's offloaded gradient checkpointing (use_gradient_checkpointing =
// "unsloth"; unslothai/unsloth-zoo @ ce232d6cef unsloth_zoo/gradient_checkpointing.py,
// UnslothCheckpointFunction: forward copies each layer's input to pinned host
// memory, backward copies it back into a GPU buffer and reruns the layer on the
// GPU), as torchtune's offload: the one-layer recompute working set is a GPU item
// of the same size as without offload, and the host holds only the checkpointed
// inputs: Llama-3.2-3B at 1024 tokens, 28 layers x 1024 x h 3072 x 2 B.
TEST(ActivationOffload, UnslothRecomputesOnTheGpu) {
  const std::string base =
      "name = \"u\"\nmode = \"train\"\n[model]\npreset = \"llama-3.2-3b\"\n[batch]\nseq_len = 1024\n"
      "[precision]\nuse = \"bf16\"\n[optimizer]\nuse = \"sgd\"\n[activations]\nuse = \"megatron\"\n"
      "flash_attention = true\ndropout = false\ncross_entropy = \"cut\"\n";
  const std::string recompute = "[[strategy]]\nuse = \"recompute\"\npolicy = \"full\"\n";
  Evaluation plain = evaluate_paper(base + recompute);
  Evaluation offloaded = evaluate_paper(base + "offload = true\noffload_scope = \"layers\"\n" + recompute);
  const auto working_set = plain.item_bytes("activations.recompute", MEMPLAN_ROLE_ACTIVATIONS);
  ASSERT_GT(working_set, 0u);
  EXPECT_EQ(offloaded.item_bytes("activations.recompute", MEMPLAN_ROLE_ACTIVATIONS), working_set);
  EXPECT_EQ(offloaded.breakdown().cpu_components[MEMPLAN_ROLE_ACTIVATIONS], 28ull * 1024 * 3072 * 2);
  // The final norm stays on the GPU (Unsloth offloads the checkpointed inputs only: offload_scope "layers", as
  // the unsloth profile sets); torchtune's scope ("model", the default) moves its saved input there, 2 h a
  // token for the fused norm (its output, the head's input, stays): 1024 x 6,144 B.
  EXPECT_EQ(evaluate_paper(base + "offload = true\n" + recompute).breakdown().cpu_components[MEMPLAN_ROLE_ACTIVATIONS],
            28ull * 1024 * 3072 * 2 + 1024ull * 6144);
  // Without offload the scope has nothing to qualify (the unsloth profile sets it; a run without Unsloth's
  // checkpointing says offload = false): the same estimate as without it.
  EXPECT_EQ(evaluate_paper(base + "offload_scope = \"layers\"\n" + recompute).breakdown().quantities[kAllocated].peak,
            plain.breakdown().quantities[kAllocated].peak);
  const std::string unsloth =
      "name = \"u\"\nmode = \"train\"\n[framework]\nuse = \"unsloth\"\n[model]\npreset = \"llama-3.2-3b\"\n"
      "[batch]\nseq_len = 1024\n[precision]\nuse = \"quantized\"\n[optimizer]\nuse = \"adamw\"\n[activations]\n"
      "use = \"megatron\"\noffload = false\n[[strategy]]\nuse = \"lora\"\ntargets = \"all-linear\"\n";
  EXPECT_EQ(evaluate(unsloth).breakdown().cpu_components[MEMPLAN_ROLE_ACTIVATIONS], 0u);
  EXPECT_NE(error_of(paper(base + "offload = true\noffload_scope = \"all\"\n")).find("must be \"model\" or \"layers\""),
            std::string::npos);
}

// A tied LM head is the token embedding's weight: where that is frozen (LoRA), F.linear(h, embedding.weight)
// saves no input for a weight gradient (autograd saves mm's operand only for the other one's gradient,
// derivatives.yaml), as an untied frozen head keeps none. Llama-3.2-3B eager, LoRA on q and v, 1024 tokens:
// the final norm keeps its fp32 input copy and rsqrt (its scale frozen: no normalized copy), 4 h + 4 =
// 12,292 B a token, and nothing for the head: 12,587,008 B (with a trained embedding, 2 h more a token).
TEST(ActivationOffload, AFrozenTiedHeadSavesNoInput) {
  const std::string job =
      "name = \"t\"\nmode = \"train\"\n[model]\npreset = \"llama-3.2-3b\"\n[batch]\nseq_len = 1024\n"
      "[precision]\nuse = \"bf16\"\n[optimizer]\nuse = \"adamw\"\n[activations]\nuse = \"megatron\"\n"
      "layer = \"eager\"\nflash_attention = true\ndropout = false\ncross_entropy = \"upcast\"\n";
  const Evaluation lora = evaluate_paper(job + "[[strategy]]\nuse = \"lora\"\nrank = 8\ntargets = \"q,v\"\n");
  EXPECT_EQ(lora.item_bytes("activations.final_norm", MEMPLAN_ROLE_ACTIVATIONS), 12'292ull * 1024);
}

}  // namespace
}  // namespace memplan::testing
