// The overhead plugins (phase overhead): 'cuda-context', 'allocator' and
// 'comm-buffers'. Every figure is derived by hand in the comments.
#include <gtest/gtest.h>

#include <string>

#include "test_support.hpp"

namespace memplan::testing {
namespace {

constexpr int32_t kOverhead = MEMPLAN_ROLE_OVERHEAD;
constexpr int32_t kBuffers = MEMPLAN_ROLE_BUFFERS;

// 1e9 parameters in bf16 with SGD: 2e9 bytes of weights and 2e9 of gradients.
// Lines: 1 name, 2 mode, 3 [model], 4 params, 5 [precision], 6 use, 7 [optimizer], 8 use, 9 [activations],
// 10 use, 11.. activation options and strategies.
std::string scenario(const std::string& activations_and_strategies) {
  return "name = \"overhead\"\nmode = \"train\"\n[model]\nparams = 1e9\n[precision]\nuse = \"bf16\"\n[optimizer]\n"
         "use = \"sgd\"\n[activations]\n" + activations_and_strategies;
}
const std::string kNoActivations = "use = \"none\"\n";

std::string library(const std::string& name) { return " (plugin library " + plugin_dir() + "/memplan-" + name + ".so)"; }

// ---- cuda-context ----------------------------------------------------------

// Defaults: a 767 MiB context (overhead; measured after a training step on an
// H100 with CUDA 13.0 and PyTorch 2.11: device memory in use minus reserved,
// 766.8125 MiB, validation/measured/h100-2026-11-26.jsonl) and, in training, two
// of PyTorch's 32 MiB Hopper cuBLAS workspaces (buffers; no GPU named, so
// Hopper's size): one per thread that runs GEMMs, the caller's forward and the
// autograd engine's backward (11 of the 12 H100 training snapshots in
// validation/measured/ hold exactly two 32 MiB blocks from before their
// recording; OLMo 3 7B's holds more, its weights' blocks of that size among them):
// 804,257,792 + 67,108,864 bytes, persistent.
TEST(CudaContext, DefaultsAreShownAsItems) {
  Evaluation e = evaluate_paper(scenario(kNoActivations + "[[strategy]]\nuse = \"cuda-context\"\n"));
  EXPECT_EQ(e.item_bytes("cuda_context", kOverhead), 804'257'792u);
  EXPECT_EQ(e.item_bytes("cublas_workspace", kBuffers), 67'108'864u);
  EXPECT_EQ(e.item_bytes("cudnn_workspace", kBuffers), 0u);
  EXPECT_EQ(e.breakdown().timeline[kInit], uint64_t{2'000'000'000} + 804'257'792u + 67'108'864u);
  EXPECT_EQ(e.breakdown().peak, uint64_t{4'000'000'000} + 804'257'792u + 67'108'864u);
}

// The workspace by the GPU's architecture (the catalog's `architecture`,
// attribute hardware.architecture; PyTorch's CublasHandlePool.cpp
// parseChosenWorkspaceSize): ":4096:8" = 33,554,432 B from compute capability
// 9 (H100 sm_90, B200 sm_100), ":4096:2:16:8" = 4,194,304 x 2 + 16,384 x 8 =
// 8,519,680 B below (A100 sm_80, L40S sm_89, T4 sm_75), 128 MiB =
// 134,217,728 B on ROCm's gfx942 (MI300X). Two in training, one in inference.
TEST(CudaContext, CublasWorkspaceByArchitecture) {
  const auto workspaces = [](const std::string& gpu, const std::string& mode) {
    std::string toml = scenario(kNoActivations + "[[strategy]]\nuse = \"cuda-context\"\n[hardware]\ngpu = \"" + gpu +
                                "\"\n");
    if (mode == "infer") {
      toml.replace(toml.find("mode = \"train\""), 14, "mode = \"infer\"");
      const std::string optimizer = "[optimizer]\nuse = \"sgd\"\n";
      toml.erase(toml.find(optimizer), optimizer.size());
    }
    return evaluate_paper(toml).item_bytes("cublas_workspace", kBuffers);
  };
  EXPECT_EQ(workspaces("h100-sxm-80gb", "train"), 2u * 33'554'432);
  EXPECT_EQ(workspaces("b200-180gb", "train"), 2u * 33'554'432);
  EXPECT_EQ(workspaces("rtx-5090-32gb", "train"), 2u * 33'554'432);  // sm_120: 12.0
  EXPECT_EQ(workspaces("v100-sxm-32gb", "train"), 2u * 8'519'680);    // sm_70
  EXPECT_EQ(workspaces("a100-sxm-80gb", "train"), 2u * 8'519'680);
  EXPECT_EQ(workspaces("l40s-48gb", "train"), 2u * 8'519'680);
  EXPECT_EQ(workspaces("t4-16gb", "train"), 2u * 8'519'680);
  EXPECT_EQ(workspaces("mi300x-192gb", "train"), 2u * 134'217'728);
  EXPECT_EQ(workspaces("a100-sxm-80gb", "infer"), 8'519'680u);
  EXPECT_EQ(workspaces("h100-sxm-80gb", "infer"), 33'554'432u);
}

// PyTorch's non-Hopper cuBLAS workspace, 4096 KiB x 2 + 16 KiB x 8 = 8.125 MiB
// = 8,519,680 bytes; a measured context in bytes; a cuDNN workspace of 64 MiB.
TEST(CudaContext, Options) {
  Evaluation e = evaluate_paper(scenario(kNoActivations + "[[strategy]]\nuse = \"cuda-context\"\nbytes = 287047680\n"
                                                    "cublas_workspace_mib = 8.125\ncudnn_workspace_mib = 64\n"));
  EXPECT_EQ(e.item_bytes("cuda_context", kOverhead), 287'047'680u);  // PyTorch PR #86509, lazy loading
  EXPECT_EQ(e.item_bytes("cublas_workspace", kBuffers), 8'519'680u);
  EXPECT_EQ(e.item_bytes("cudnn_workspace", kBuffers), 67'108'864u);
  Evaluation mib = evaluate_paper(scenario(kNoActivations + "[[strategy]]\nuse = \"cuda-context\"\nmib = 1024\n"));
  EXPECT_EQ(mib.item_bytes("cuda_context", kOverhead), 1'073'741'824u);
}

// Transformer Engine's own cuBLASLt workspaces (te_workspaces; transformer_engine/pytorch/module/base.py
// get_cublas_workspace_size_bytes @ v2.8): 32 MiB + 1 KiB = 33,555,456 B from compute capability 9, 4 MiB =
// 4,194,304 B below; five with grouped GEMM (one per cuBLAS stream beside the first); none by default. The
// megatron-core profile sets one: an H100 run holds 33,555,456 B of it.
TEST(CudaContext, TransformerEngineWorkspaces) {
  const auto te = [](const std::string& gpu, const std::string& options) {
    return evaluate_paper(scenario(kNoActivations + "[[strategy]]\nuse = \"cuda-context\"\n" + options +
                                   "[hardware]\ngpu = \"" + gpu + "\"\n"))
        .item_bytes("te_cublas_workspace", kBuffers);
  };
  EXPECT_EQ(te("h100-sxm-80gb", ""), 0u);
  EXPECT_EQ(te("h100-sxm-80gb", "te_workspaces = 1\n"), 33'555'456u);
  EXPECT_EQ(te("a100-sxm-80gb", "te_workspaces = 1\n"), 4'194'304u);
  EXPECT_EQ(te("b200-180gb", "te_workspaces = 5\n"), 5u * 33'555'456);
  EXPECT_EQ(evaluate("name = \"c\"\nmode = \"train\"\n[framework]\nuse = \"megatron-core\"\n[model]\npreset = "
                     "\"gpt2-xl\"\n[batch]\nseq_len = 1024\n[precision]\nuse = \"mixed-bf16\"\n[optimizer]\nuse = \"adam\"\n[activations]\n"
                     "use = \"megatron\"\n[hardware]\ngpu = \"h100-sxm-80gb\"\n")
                .item_bytes("te_cublas_workspace", kBuffers),
            33'555'456u);
  EXPECT_NE(error_of(scenario(kNoActivations + "[[strategy]]\nuse = \"cuda-context\"\nte_workspaces = -1\n"))
                .find("option 'te_workspaces': must be a count from 0 to 64"),
            std::string::npos);
}

// cuda.context_growth_bytes and cuda.context_start_bytes: the context less the 527 MiB (552,599,552 B) the H100 process held right after
// creating it (cuda-context README; vLLM 0.19's start-up snapshot reads 0.51 GiB): 767 - 527 = 240 MiB =
// 251,658,240 B by default in training; a measured size below 527 MiB grows by nothing; eager loading has
// every kernel from the start.
TEST(CudaContext, GrowthAfterStartUp) {
  const auto growth = [](const std::string& options) {
    return evaluate_paper(scenario(kNoActivations + "[[strategy]]\nuse = \"cuda-context\"\n" + options))
        .estimator()
        .attribute_int("cuda.context_growth_bytes");
  };
  EXPECT_EQ(growth(""), 251'658'240);
  EXPECT_EQ(growth("mib = 1024\n"), 1'073'741'824 - 552'599'552);
  EXPECT_EQ(growth("bytes = 287047680\n"), 0);
  EXPECT_EQ(growth("module_loading = \"eager\"\n"), 0);
  // cuda.context_start_bytes, the rest: 527 MiB by default, the whole 1343 MiB under eager loading.
  const auto start = [](const std::string& options) {
    return evaluate_paper(scenario(kNoActivations + "[[strategy]]\nuse = \"cuda-context\"\n" + options))
        .estimator()
        .attribute_int("cuda.context_start_bytes");
  };
  EXPECT_EQ(start(""), 552'599'552);
  EXPECT_EQ(start("module_loading = \"eager\"\n"), 1343ll << 20);
  EXPECT_EQ(start("bytes = 287047680\n"), 287'047'680);
}

// Lines 11 [[strategy]], 12 use, 13 mib, 14 bytes.
TEST(CudaContext, Errors) {
  EXPECT_EQ(error_of(scenario(kNoActivations + "[[strategy]]\nuse = \"cuda-context\"\nmib = 512\nbytes = 1\n"), "c.toml"),
            "c.toml:14:9: error: in [[strategy]] #1, strategy plugin 'cuda-context', option 'bytes': gives the "
            "context size a second time; set either mib or bytes" + library("cuda-context"));
  EXPECT_EQ(error_of(scenario(kNoActivations + "[[strategy]]\nuse = \"cuda-context\"\nmib = -1\n"), "c.toml"),
            "c.toml:13:7: error: in [[strategy]] #1, strategy plugin 'cuda-context', option 'mib': must be a "
            "non-negative number of MiB, got -1" + library("cuda-context"));
}

// ---- allocator -------------------------------------------------------------

// 2e9-byte weights, gradients and activations (ratio 1 of the bf16 weights):
// each is one allocation of 10 MiB or more, so its segment rounds up to 2 MiB:
// ceil(2e9 / 2,097,152) = 954 blocks = 2,000,683,008 bytes, 683,008 more, for
// each of the three. Fragmentation 0.1 of what the step allocates and frees
// (gradients and activations): 0.1 x 4e9 = 4e8.
TEST(Allocator, RoundingAndFragmentation) {
  Evaluation e = evaluate_paper(scenario("use = \"ratio\"\nfactor = 1\n[[strategy]]\nuse = \"allocator\"\n"));
  EXPECT_EQ(e.item_bytes("allocator.rounding", kOverhead), uint64_t{3} * 683'008u);
  EXPECT_EQ(e.item_bytes("allocator.fragmentation", kOverhead), 400'000'000u);
  EXPECT_EQ(e.component(kOverhead), 402'049'024u);
  // The added items follow their tensors' lifetimes: weights 2,000,683,008 at
  // init; backward holds all activations (2,200,683,008) plus the largest
  // single gradient (2e9), or the reverse: 2,000,683,008 + 4,200,683,008.
  EXPECT_EQ(e.breakdown().timeline[kInit], 2'000'683'008u);
  EXPECT_EQ(e.breakdown().peak, 6'201'366'016u);
  EXPECT_EQ(e.breakdown().peak_phase, kBackward);
}

// expandable_segments = true: each block is round_size's multiple of 512 B
// and no get_allocation_size segment (try_allocate_expandable_block maps pages
// into the stream's one segment; should_split splits off any 512 B or more;
// CUDACachingAllocator.cpp at maggiemoss/pytorch @ 2553b0a8). 2e9 B =
// 3,906,250 x 512: no rounding for any of the three; the margin is the
// user's knob, unchanged: 4e8 (without the option: 3 x 683,008 of rounding).
TEST(Allocator, ExpandableSegmentsRoundTo512Bytes) {
  Evaluation e = evaluate_paper(scenario("use = \"ratio\"\nfactor = 1\n[[strategy]]\nuse = \"allocator\"\n"
                                         "expandable_segments = true\n"));
  EXPECT_EQ(e.item_bytes("allocator.rounding", kOverhead), 0u);
  EXPECT_EQ(e.item_bytes("allocator.fragmentation", kOverhead), 400'000'000u);
}

// Llama-2-7B's tensors are all multiples of 2 MiB (e.g. attn.q 4096 x 4096 x 2
// = 16 x 2 MiB; the embedding 32000 x 4096 x 2 = 125 x 2 MiB) or of 512 bytes
// (a layer's two RMSNorms, 16,384 bytes): rounding adds nothing.
TEST(Allocator, TransformerShapesRoundExactly) {
  const std::string llama = "name = \"a\"\nmode = \"train\"\n[model]\npreset = \"llama-2-7b\"\n[precision]\n"
                            "use = \"bf16\"\n[optimizer]\nuse = \"sgd\"\n[activations]\nuse = \"none\"\n"
                            "[[strategy]]\nuse = \"allocator\"\nfragmentation = 0\n";
  EXPECT_EQ(evaluate_paper(llama).component(kOverhead), 0u);
}

TEST(Allocator, OptionsAndErrors) {
  Evaluation off = evaluate_paper(scenario("use = \"ratio\"\nfactor = 1\n[[strategy]]\nuse = \"allocator\"\n"
                                     "fragmentation = 0\nrounding = false\n"));
  EXPECT_EQ(off.component(kOverhead), 0u);
  Evaluation quarter = evaluate_paper(scenario("use = \"ratio\"\nfactor = 1\n[[strategy]]\nuse = \"allocator\"\n"
                                         "fragmentation = 0.25\nrounding = false\n"));
  EXPECT_EQ(quarter.component(kOverhead), 1'000'000'000u);
  // Lines 11 [[strategy]], 12 use, 13 fragmentation.
  EXPECT_EQ(error_of(scenario(kNoActivations + "[[strategy]]\nuse = \"allocator\"\nfragmentation = 1\n"), "a.toml"),
            "a.toml:13:17: error: in [[strategy]] #1, strategy plugin 'allocator', option 'fragmentation': must be a "
            "fraction from 0 up to (not including) 1, got 1" + library("allocator"));
}

// ---- comm-buffers ------------------------------------------------------------

// 1e9 parameters, mixed bf16 with Adam, data parallel 8 x tensor parallel 2.
std::string parallel(const std::string& comm_options, const std::string& precision = "mixed-bf16") {
  return "name = \"comm\"\nmode = \"train\"\n[model]\nparams = 1e9\n[precision]\nuse = \"" + precision +
         "\"\n[optimizer]\nuse = \"adam\"\n[activations]\nuse = \"none\"\n[[strategy]]\nuse = \"data-parallel\"\n"
         "size = 8\n[[strategy]]\nuse = \"tensor-parallel\"\nsize = 2\n[[strategy]]\nuse = \"comm-buffers\"\n" +
         comm_options;
}

// NCCL: per connection 4,194,304 (Simple) + 4,915,200 (LL128) + 524,288 (LL)
// = 9,633,792 bytes; x 16 channels x 2 connections = 308,281,344 per
// communicator; the data- and tensor-parallel groups make 2: 616,562,688.
// Each communicator also holds, from its creation, NCCL's per-channel arrays
// as cuMem mappings of 2 MiB: (3 x 32 p2p channels + 2) x 2,097,152 =
// 205,520,896; x 2 = 411,041,792 (NVIDIA/nccl v2.27.7-1 src/channel.cc,
// src/init.cc, src/include/alloc.h).
// DDP: the buckets copy the rank's gradients, 1e9 / 2 x 2 bytes = 1e9.
TEST(CommBuffers, NcclAndDdpDefaults) {
  Evaluation e = evaluate_paper(parallel(""));
  EXPECT_EQ(e.item_bytes("nccl.buffers", kBuffers), 616'562'688u);
  EXPECT_EQ(e.item_bytes("nccl.communicators", kBuffers), 411'041'792u);
  EXPECT_EQ(e.item_bytes("ddp.buckets", kBuffers), 1'000'000'000u);
  EXPECT_EQ(e.component(kBuffers), 1'616'562'688u + 411'041'792u);
}

// Older NCCL (or NCCL_CUMEM_ENABLE=0) has no per-communicator mappings; 16
// p2p channels make (3 x 16 + 2) x 2 MiB = 104,857,600 per communicator.
TEST(CommBuffers, CommunicatorMemory) {
  EXPECT_EQ(evaluate_paper(parallel("nccl_cumem = false\n")).item_bytes("nccl.communicators", kBuffers), 0u);
  EXPECT_EQ(evaluate_paper(parallel("nccl_p2p_channels = 16\n")).item_bytes("nccl.communicators", kBuffers),
            2u * 104'857'600u);
}

// Pipeline stages only send and receive (NCCL 2.22+ connects what is used):
// no ring buffers for the pipeline group; per peer 32 p2p channels x (the
// three protocols' 9,633,792 bytes rounded up to 2 MiB = 10,485,760 received
// + 2,097,152 sent) = 402,653,184. The first stage has one peer, a middle
// stage two (pipeline 4 of a 32-layer model: first_stage_layers moves no peer).
TEST(CommBuffers, PipelineStagesSendAndReceive) {
  const std::string pipeline = "name = \"comm\"\nmode = \"train\"\n[model]\npreset = \"llama-2-7b\"\n[precision]\n"
                               "use = \"bf16\"\n[optimizer]\nuse = \"sgd\"\n[activations]\nuse = \"none\"\n"
                               "[[strategy]]\nuse = \"pipeline-parallel\"\nsize = 4\n[[strategy]]\n"
                               "use = \"comm-buffers\"\n";
  Evaluation first = evaluate_paper(pipeline);
  EXPECT_EQ(first.item_bytes("nccl.p2p", kBuffers), 402'653'184u);
  EXPECT_EQ(first.item_bytes("nccl.buffers", kBuffers), 0u);
  EXPECT_EQ(first.item_bytes("nccl.communicators", kBuffers), 205'520'896u);
  std::string last_stage = pipeline;
  last_stage.insert(last_stage.find("size = 4\n") + 9, "stage = \"last\"\n");
  Evaluation last = evaluate_paper(last_stage);
  EXPECT_EQ(last.item_bytes("nccl.p2p", kBuffers), 402'653'184u);
}

// Megatron-LM runs collectives on every group whatever its size (its profile:
// groups world, tensor, data, model, ...; one_rank_groups). One GPU: world,
// tensor, data and model are 4 one-rank communicators, 4 x 205,520,896 =
// 822,083,584, and no buffers (a one-rank communicator connects nothing).
// Tensor parallel 8: world, tensor and model have 8 ranks (3 x 308,281,344 of
// ring buffers), data 1.
TEST(CommBuffers, MegatronCommunicators) {
  const std::string one = "name = \"comm\"\nmode = \"train\"\n[framework]\nuse = \"megatron-lm\"\n[model]\n"
                          "params = 1e9\n[precision]\nuse = \"mixed-bf16\"\n[optimizer]\nuse = \"adam\"\n"
                          "[activations]\nuse = \"none\"\n";
  Evaluation single = evaluate(one);
  EXPECT_EQ(single.item_bytes("nccl.communicators", kBuffers), 822'083'584u);
  EXPECT_EQ(single.item_bytes("nccl.buffers", kBuffers), 0u);
  const std::string tp8 = "name = \"comm\"\nmode = \"train\"\n[framework]\nuse = \"megatron-lm\"\n[model]\n"
                          "preset = \"llama-2-7b\"\n[precision]\nuse = \"mixed-bf16\"\n[optimizer]\nuse = \"adam\"\n"
                          "[activations]\nuse = \"none\"\n[[strategy]]\nuse = \"tensor-parallel\"\nsize = 8\n";
  Evaluation tensor = evaluate(tp8);
  EXPECT_EQ(tensor.item_bytes("nccl.communicators", kBuffers), 822'083'584u);
  EXPECT_EQ(tensor.item_bytes("nccl.buffers", kBuffers), 3u * 308'281'344u);
}

// Megatron-LM (core_r0.14.0) reduces gradients over the data x context group
// (core/distributed/distributed_data_parallel.py, with_context_parallel=True)
// and all-reduces the gradient norm over the model-parallel group, or under
// the distributed optimizer over the intra-instance group, every rank with one
// instance (core/optimizer/__init__.py grad_stats_parallel_group). On 8x H100
// SXM (NVLink SHARP), hand derivation with the plugin's constants:
// - context parallelism 8, data parallelism 1: communicators world (8),
//   tensor (1), data-context (8), gradient-norm (tensor x pipeline = 1),
//   context (8, send/receive): 5 x 205,520,896 = 1,027,604,480 B; ring/tree
//   buffers for the two of more than one rank that run collectives, world and
//   data-context: 2 x 308,281,344 = 616,562,688 B; NVLS set up by the three of
//   8 GPUs: 3 x 52,428,800 = 157,286,400 B; data-context all-reduces the fp32
//   gradients on 8 GPUs: one NVLS buffer of 8 x 32 MiB = 268,435,456 B.
//   (Counting the plain data group instead, 1 rank, gave 2 buffers' worth less
//   and no NVLS buffer.)
// - the distributed optimizer ('zero' stage 1) over data parallelism 8:
//   world, tensor (1), data-context (8) and gradient-norm (every rank: 8):
//   4 x 205,520,896 = 822,083,584 B; buffers for world, data-context and
//   gradient-norm: 3 x 308,281,344 = 924,844,032 B; NVLS set up 3 times; no
//   NVLS buffer (the gradients are reduce-scattered, the norm is a few floats).
TEST(CommBuffers, MegatronGradientGroups) {
  auto scenario = [](const std::string& strategies) {
    return "name = \"comm\"\nmode = \"train\"\n[framework]\nuse = \"megatron-lm\"\n[model]\npreset = \"llama-2-7b\"\n"
           "[precision]\nuse = \"mixed-bf16\"\n[optimizer]\nuse = \"adam\"\n[activations]\nuse = \"none\"\n" +
           strategies + "[hardware]\ngpu = \"h100-sxm-80gb\"\ncount = 8\n";
  };
  Evaluation cp8 = evaluate(scenario("[[strategy]]\nuse = \"data-parallel\"\nsize = 1\n"
                                     "[[strategy]]\nuse = \"context-parallel\"\nsize = 8\n"));
  EXPECT_EQ(cp8.item_bytes("nccl.communicators", kBuffers), 1'027'604'480u);
  EXPECT_EQ(cp8.item_bytes("nccl.buffers", kBuffers), 616'562'688u);
  EXPECT_EQ(cp8.item_bytes("nccl.nvls_setup", kBuffers), 157'286'400u);
  EXPECT_EQ(cp8.item_bytes("nccl.nvls", kBuffers), 268'435'456u);
  Evaluation distributed = evaluate(scenario("[[strategy]]\nuse = \"data-parallel\"\nsize = 8\n"
                                             "[[strategy]]\nuse = \"zero\"\nstage = 1\n"));
  EXPECT_EQ(distributed.item_bytes("nccl.communicators", kBuffers), 822'083'584u);
  EXPECT_EQ(distributed.item_bytes("nccl.buffers", kBuffers), 924'844'032u);
  EXPECT_EQ(distributed.item_bytes("nccl.nvls_setup", kBuffers), 157'286'400u);
  EXPECT_EQ(distributed.item_bytes("nccl.nvls", kBuffers), 0u);
}

// NVLS (NCCL v2.27.7-1, src/transport/nvls.cc; tuner src/graph/tuning.cc) on
// H100 SXM, whose catalog entry says nvlink_sharp. Megatron-LM TP 8 on one
// node, no sequence parallelism: the world, tensor and model groups (8 GPUs
// each) set NVLS up, (24 collective channels + 1 credit buffer) x 2 MiB =
// 52,428,800 B each; the tensor group all-reduces activations (sum, MBs),
// which the tuner sends to NVLS: 16 channels x 2 x 1 MiB x 8 GPUs =
// 268,435,456 B. With sequence parallelism the tensor group reduce-scatters
// and all-gathers (rings): no buffer. Data parallelism over 4 GPUs: NVLS is set
// up (more than 2 GPUs) but never chosen at 4 (ring Simple is faster): no
// buffer; plain DDP over 8 all-reduces its gradients: 268,435,456 B. Without
// NVLink SHARP (A100) nothing.
TEST(CommBuffers, NvlsOnNvlinkSharpNodes) {
  auto scenario = [](const std::string& gpu, const std::string& strategies) {
    return "name = \"comm\"\nmode = \"train\"\n[framework]\nuse = \"megatron-lm\"\n[model]\npreset = \"llama-2-7b\"\n"
           "[precision]\nuse = \"mixed-bf16\"\n[optimizer]\nuse = \"adam\"\n[activations]\nuse = \"none\"\n" +
           strategies + "[hardware]\ngpu = \"" + gpu + "\"\ncount = 8\n";
  };
  const std::string tp8 = "[[strategy]]\nuse = \"tensor-parallel\"\nsize = 8\n";
  Evaluation tensor = evaluate(scenario("h100-sxm-80gb", tp8));
  EXPECT_EQ(tensor.item_bytes("nccl.nvls_setup", kBuffers), 3u * 52'428'800u);
  EXPECT_EQ(tensor.item_bytes("nccl.nvls", kBuffers), 268'435'456u);
  Evaluation sequence = evaluate(scenario("h100-sxm-80gb", tp8 + "sequence_parallel = true\n"));
  EXPECT_EQ(sequence.item_bytes("nccl.nvls_setup", kBuffers), 3u * 52'428'800u);
  EXPECT_EQ(sequence.item_bytes("nccl.nvls", kBuffers), 0u);
  Evaluation dp4 = evaluate(scenario("h100-sxm-80gb", "[[strategy]]\nuse = \"data-parallel\"\nsize = 4\n"
                                                      "[[strategy]]\nuse = \"tensor-parallel\"\nsize = 2\n"));
  EXPECT_EQ(dp4.item_bytes("nccl.nvls", kBuffers), 0u);
  // The world (8 GPUs) and the data group (4 GPUs, 2 apart) set NVLS up; tensor and model groups have 2.
  EXPECT_EQ(dp4.item_bytes("nccl.nvls_setup", kBuffers), 2u * 52'428'800u);
  Evaluation dp8 = evaluate(scenario("h100-sxm-80gb", "[[strategy]]\nuse = \"data-parallel\"\nsize = 8\n"));
  EXPECT_EQ(dp8.item_bytes("nccl.nvls", kBuffers), 268'435'456u);
  Evaluation a100 = evaluate(scenario("a100-sxm-80gb", tp8));
  EXPECT_EQ(a100.item_bytes("nccl.nvls_setup", kBuffers) + a100.item_bytes("nccl.nvls", kBuffers), 0u);
  // The option overrides the catalog.
  Evaluation off = evaluate(scenario("h100-sxm-80gb", tp8 + "[[strategy]]\nuse = \"comm-buffers\"\nnvls = false\n"));
  EXPECT_EQ(off.item_bytes("nccl.nvls_setup", kBuffers) + off.item_bytes("nccl.nvls", kBuffers), 0u);
}

TEST(CommBuffers, NcclOptions) {
  // Simple protocol only: 2 x 16 x 2 x 4,194,304.
  EXPECT_EQ(evaluate_paper(parallel("nccl_protocols = \"simple\"\n")).item_bytes("nccl.buffers", kBuffers), 268'435'456u);
  // One communicator of 32 channels with one connection each: 32 x 9,633,792.
  EXPECT_EQ(evaluate_paper(parallel("communicators = 1\nnccl_channels = 32\nnccl_peers = 1\n"))
                .item_bytes("nccl.buffers", kBuffers),
            308'281'344u);
  // NCCL_BUFFSIZE = 1 MiB: 2 x 16 x 2 x (1,048,576 + 4,915,200 + 524,288).
  EXPECT_EQ(evaluate_paper(parallel("nccl_buffsize = 1048576\n")).item_bytes("nccl.buffers", kBuffers), 415'236'096u);
  EXPECT_EQ(evaluate_paper(parallel("nccl = false\n")).item_bytes("nccl.buffers", kBuffers), 0u);
}

// gradient_as_bucket_view = true: the gradients are the buckets, no copy.
// buckets = "none" (Megatron-LM's contiguous buffers, FSDP): nothing either.
TEST(CommBuffers, DdpBucketViewAndNone) {
  EXPECT_EQ(evaluate_paper(parallel("gradient_as_bucket_view = true\n")).item_bytes("ddp.buckets", kBuffers), 0u);
  EXPECT_EQ(evaluate_paper(parallel("buckets = \"none\"\n")).item_bytes("ddp.buckets", kBuffers), 0u);
}

// Gradients kept from step to step (gradient_buffer = "persistent": PyTorch before 2.0, whose zero_grad()
// zeroes .grad in place, torch PR #92731) are still copied into DDP's buckets: the same 1e9 / 2 x 2 bytes
// (comm-buffers 1.7.0; before, only gradients of backward's lifetime were, and the buckets vanished).
TEST(CommBuffers, DdpBucketsCopyGradientsKeptBetweenSteps) {
  std::string kept = parallel("");
  const std::string precision = "use = \"mixed-bf16\"\n";
  kept.replace(kept.find(precision), precision.size(), precision + "gradient_buffer = \"persistent\"\n");
  Evaluation e = evaluate_paper(kept);
  EXPECT_EQ(e.item_bytes("ddp.buckets", kBuffers), 1'000'000'000u);
  EXPECT_EQ(e.component(MEMPLAN_ROLE_GRADIENTS), 1'000'000'000u);
}

// DeepSpeed's engine without ZeRO all-reduces after backward through buffered_allreduce_fallback's flat
// temporaries (runtime/engine.py @ v0.9.0 1756-1772, 2172-2173): no persistent buckets. unsharded_buckets = "none"
// says what "auto" gives where no sharding plugin declares buckets (the deepspeed profile's); "ddp" keeps DDP's
// 1e9 x 2 B = 2,000,000,000 / 2 (tensor parallel 2) = 1,000,000,000 B of persistent buckets.
TEST(CommBuffers, UnshardedBucketsUnderDeepSpeedsEngine) {
  EXPECT_EQ(evaluate_paper(parallel("")).item_bytes("ddp.buckets", kBuffers), 1'000'000'000u);
  EXPECT_EQ(evaluate_paper(parallel("unsharded_buckets = \"none\"\n")).item_bytes("ddp.buckets", kBuffers), 0u);
  const std::string deepspeed = "name = \"d\"\nmode = \"train\"\n[framework]\nuse = \"deepspeed\"\n[model]\nparams = 1e9\n"
                                "[precision]\nuse = \"mixed-bf16\"\n[optimizer]\nuse = \"adam\"\n[activations]\nuse = "
                                "\"none\"\n[[strategy]]\nuse = \"data-parallel\"\nsize = 8\n";
  EXPECT_EQ(evaluate(deepspeed).item_bytes("ddp.buckets", kBuffers), 0u);
  // What it allocates instead: one flattened bucket of up to 5e8 elements beside every gradient at backward's end,
  // min(2e9 B of bf16 gradients, 5e8 x 2 B) = 1,000,000,000 B (engine.py @ v0.9.0 2172-2173).
  EXPECT_EQ(evaluate(deepspeed).item_bytes_at("deepspeed.allreduce_copy", MEMPLAN_LIFETIME_BACKWARD_END), 1'000'000'000u);
  EXPECT_NE(error_of(parallel("unsharded_buckets = \"fsdp\"\n")).find("option 'unsharded_buckets': must be \"ddp\" or "
                                                                     "\"none\""),
            std::string::npos);
}

// DeepSpeed ZeRO 1/2 (deepspeed/runtime/zero/stage_1_and_2.py @ v0.19.4):
// each backward allocates a reduce bucket of reduce_bucket_size = 5e8
// elements x 2 bytes = 1e9 at its first gradient hook (process_gradients ->
// backward_prologue, v0.17.2 on; setup_buckets from v0.18.3), and a second one with overlap_comm ("double
// buffers"), freed at the epilogue (_release_ipg_buffers): lifetime
// backward_layers. Each flush flattens the bucket's gradients into one new
// tensor for one all-reduce (average_tensor -> allreduce_and_scatter ->
// allreduce_bucket, use_multi_rank_bucket_allreduce true by default since
// v0.12.4). Here 1e9 parameters over tensor-parallel 2: 5e8 trainable
// elements on the rank, exactly one bucket, so the only flush is the
// epilogue's, after backward, beside every gradient: 5e8 x 2 B = 1e9
// (backward_end). The post-step all-gather writes in place
// (all_gather_into_tensor), so allgather_bucket_size allocates only when
// given: then during the optimizer step.
TEST(CommBuffers, DeepSpeedBuckets) {
  Evaluation overlap = evaluate_paper(parallel("buckets = \"deepspeed\"\noverlap_comm = true\n"));
  EXPECT_EQ(overlap.item_bytes("deepspeed.reduce_bucket", kBuffers), 2'000'000'000u);
  Evaluation plain = evaluate_paper(parallel("buckets = \"deepspeed\"\nnccl = false\n"));
  EXPECT_EQ(plain.item_bytes("deepspeed.reduce_bucket", kBuffers), 1'000'000'000u);
  EXPECT_EQ(plain.item_bytes("deepspeed.allreduce_copy", kBuffers), 1'000'000'000u);
  EXPECT_EQ(plain.item_bytes("deepspeed.allgather_bucket", kBuffers), 0u);
  const auto& t = plain.breakdown().timeline;
  // Backward's end holds every gradient (1e9), the bucket and the epilogue's copy; the step only the gradients.
  EXPECT_EQ(t[kBackward] - t[kInit], plain.component(MEMPLAN_ROLE_GRADIENTS) + uint64_t{2'000'000'000});
  EXPECT_EQ(t[kOptimizerStep] - t[kInit], plain.component(MEMPLAN_ROLE_GRADIENTS));
  Evaluation smaller = evaluate_paper(parallel("buckets = \"deepspeed\"\nnccl = false\nreduce_bucket_size = 2e8\n"
                                         "allgather_bucket_size = 2e8\noverlap_comm = true\n"));
  // 2 x 2e8 x 2 bytes of reduce buckets, 2e8 x 2 bytes of all-gather bucket, and a flush's copy of a full
  // bucket, 2e8 x 2 bytes (5e8 trainable elements overflow it in backward).
  EXPECT_EQ(smaller.component(kBuffers), 1'600'000'000u);
}

// Where and how much a ZeRO 1/2 flush copies (comm-buffers README, "Gradient buckets"; stage_1_and_2.py @
// v0.19.4, average_tensor and allreduce_bucket; the rank's 5e8 trainable elements as above, bucket 2e8):
// - stage 2: the hooks flush while the layers' backward runs, so the 2e8-element copy (4e8 B) is alive only
//   then (backward_in_layers);
// - stage 1 without overlap_comm: the engine reduces after backward (reduce_gradients), beside every
//   gradient (backward_end); with overlap_comm the hooks flush in backward again;
// - reduce_copy "rank" (use_multi_rank_bucket_allreduce false): one destination rank's slices at a time, at
//   most a partition, 5e8 / 8 = 6.25e7 elements = 1.25e8 B; "none" (before v0.12.4): nothing;
// - communication_data_type fp32 on bf16 gradients adds the cast, 2e8 x 4 B = 8e8 B, beside the flattened
//   copy (1.2e9 B in all), or alone (8e8 B) where the slices are reduced in place;
// - lazy_buckets false (before v0.17.2): the buckets through the whole backward (transient_backward).
TEST(CommBuffers, DeepSpeedFlushCopies) {
  const std::string bucket = "buckets = \"deepspeed\"\nnccl = false\nreduce_bucket_size = 2e8\n";
  const auto copy_of = [](const Evaluation& e) { return e.item_bytes("deepspeed.allreduce_copy", kBuffers); };
  Evaluation stage2 = evaluate_paper(parallel(bucket + "[[strategy]]\nuse = \"zero\"\nstage = 2\n"));
  EXPECT_EQ(copy_of(stage2), 400'000'000u);
  EXPECT_EQ(stage2.item_lifetime("deepspeed.allreduce_copy"), MEMPLAN_LIFETIME_BACKWARD_IN_LAYERS);
  EXPECT_EQ(stage2.item_lifetime("deepspeed.reduce_bucket"), MEMPLAN_LIFETIME_BACKWARD_LAYERS);
  Evaluation stage1 = evaluate_paper(parallel(bucket + "[[strategy]]\nuse = \"zero\"\nstage = 1\n"));
  EXPECT_EQ(copy_of(stage1), 400'000'000u);
  EXPECT_EQ(stage1.item_lifetime("deepspeed.allreduce_copy"), MEMPLAN_LIFETIME_BACKWARD_END);
  Evaluation stage1_overlap =
      evaluate_paper(parallel(bucket + "overlap_comm = true\n[[strategy]]\nuse = \"zero\"\nstage = 1\n"));
  EXPECT_EQ(stage1_overlap.item_lifetime("deepspeed.allreduce_copy"), MEMPLAN_LIFETIME_BACKWARD_IN_LAYERS);
  EXPECT_EQ(copy_of(evaluate_paper(parallel(bucket + "reduce_copy = \"rank\"\n"))), 125'000'000u);
  EXPECT_EQ(copy_of(evaluate_paper(parallel(bucket + "reduce_copy = \"none\"\n"))), 0u);
  EXPECT_EQ(copy_of(evaluate_paper(parallel(bucket + "communication_data_type = \"fp32\"\n"))), 1'200'000'000u);
  EXPECT_EQ(copy_of(evaluate_paper(parallel(bucket + "reduce_copy = \"none\"\ncommunication_data_type = \"fp32\"\n"))),
            800'000'000u);
  EXPECT_EQ(copy_of(evaluate_paper(parallel(bucket + "communication_data_type = \"bf16\"\n"))), 400'000'000u);
  Evaluation eager = evaluate_paper(parallel(bucket + "lazy_buckets = false\n"));
  EXPECT_EQ(eager.item_lifetime("deepspeed.reduce_bucket"), MEMPLAN_LIFETIME_TRANSIENT_BACKWARD);
}

// A parameter larger than the bucket is reduced alone (stage_1_and_2.py @ v0.19.4 extra_large_param_to_reduce)
// and its slices are flattened in groups that pass reduce_bucket_size only by their last slice: up to the
// whole parameter. Llama-2-7B (its shapes known), ZeRO-2 over 8 ranks, bucket 1e8 elements: the embedding and
// the LM head, 32,000 x 4,096 = 131,072,000 elements each, are the largest tensors: a flush copies
// 131,072,000 x 2 B = 262,144,000 B. Stage 1 with 4 micro-batches reduces at the accumulation boundary only,
// so its bucket (1e8 x 2 B) stays from the first micro-batch's backward through the next ones' forward and
// whole backward (setup_buckets allocates only while ready_for_gradients is false, which only
// _release_ipg_buffers resets): transient_forward and transient_backward, not backward_layers.
TEST(CommBuffers, DeepSpeedFlushOfAParameterLargerThanTheBucket) {
  auto run = [](int stage, int grad_accum) {
    return evaluate_paper("name = \"d\"\nmode = \"train\"\n[model]\npreset = \"llama-2-7b\"\n[batch]\ngrad_accum = " +
                          std::to_string(grad_accum) +
                          "\n[precision]\nuse = \"mixed-bf16\"\n[optimizer]\nuse = \"adamw\"\n[activations]\nuse = "
                          "\"none\"\n[[strategy]]\nuse = \"data-parallel\"\nsize = 8\n[[strategy]]\nuse = \"zero\"\nstage = " +
                          std::to_string(stage) +
                          "\n[[strategy]]\nuse = \"comm-buffers\"\nnccl = false\nreduce_bucket_size = 1e8\n");
  };
  EXPECT_EQ(run(2, 1).item_bytes("deepspeed.allreduce_copy", kBuffers), 262'144'000u);
  // (Each Evaluation named: a range-for over a temporary's member would outlive it.)
  const Evaluation stage1 = run(1, 4);
  uint64_t forward_bucket = 0;
  for (const PlanItem& item : stage1.estimator().plan().items)
    if (item.name_view() == "deepspeed.reduce_bucket" && item.lifetime == MEMPLAN_LIFETIME_TRANSIENT_FORWARD)
      forward_bucket += item.bytes();
  EXPECT_EQ(forward_bucket, 200'000'000u);
  EXPECT_EQ(stage1.item_lifetime("deepspeed.reduce_bucket"), MEMPLAN_LIFETIME_TRANSIENT_BACKWARD);
  const Evaluation stage2 = run(2, 4);
  EXPECT_EQ(stage2.item_lifetime("deepspeed.reduce_bucket"), MEMPLAN_LIFETIME_BACKWARD_LAYERS);
  for (const PlanItem& item : stage2.estimator().plan().items)
    EXPECT_FALSE(item.name_view() == "deepspeed.reduce_bucket" && item.lifetime == MEMPLAN_LIFETIME_TRANSIENT_FORWARD);
}

TEST(CommBuffers, DeepSpeedFlushOptionsAreChecked) {
  const std::string bucket = "buckets = \"deepspeed\"\nnccl = false\n";
  EXPECT_NE(error_of(parallel(bucket + "reduce_copy = \"all\"\n")).find(
                "option 'reduce_copy': must be \"bucket\", \"rank\" or \"none\", not \"all\""),
            std::string::npos);
  EXPECT_NE(error_of(parallel(bucket + "communication_data_type = \"int8\"\n"))
                .find("option 'communication_data_type': must be \"fp32\", \"fp16\" or \"bf16\""),
            std::string::npos);
  EXPECT_NE(error_of(parallel("buckets = \"ddp\"\ncommunication_data_type = \"fp32\"\n"))
                .find("option 'communication_data_type': is a DeepSpeed option; it needs buckets = \"deepspeed\""),
            std::string::npos);
  // reduce_copy and lazy_buckets say which DeepSpeed version runs (the deepspeed profile sets them by version,
  // for ZeRO stage 0 too): without DeepSpeed's buckets they apply to nothing, and are no error.
  EXPECT_EQ(error_of(parallel("buckets = \"ddp\"\nreduce_copy = \"rank\"\n")), "");
  EXPECT_EQ(error_of(parallel("buckets = \"none\"\nlazy_buckets = false\n")), "");
}

// ZeRO-3 builds one flat reduce bucket of reduce_bucket_size elements in the
// parameters' dtype with its optimizer and keeps it (DeepSpeed v0.14.0
// runtime/zero/stage3.py, DeepSpeedZeroOptimizer_Stage3.__init__ with
// contiguous_gradients, the default): 5e8 x 2 bytes = 1e9 from init on, one
// bucket even with overlap_comm.
TEST(CommBuffers, ZeroStage3KeepsOneBucket) {
  for (const char* overlap : {"", "overlap_comm = true\n"}) {
    Evaluation e = evaluate_paper(parallel("nccl = false\nbuckets = \"deepspeed\"\n" + std::string(overlap) +
                                           "[[strategy]]\nuse = \"zero\"\nstage = 3\n"));
    EXPECT_EQ(e.item_bytes("deepspeed.reduce_bucket", kBuffers), 1'000'000'000u) << overlap;
    Evaluation without = evaluate_paper(parallel("nccl = false\nbuckets = \"none\"\n[[strategy]]\nuse = \"zero\"\n"
                                                 "stage = 3\n"));
    EXPECT_EQ(e.breakdown().timeline[kInit] - without.breakdown().timeline[kInit], 1'000'000'000u) << overlap;
  }
}

// On one data rank ZeRO-3 still builds its flat bucket: stage3.py allocates it in
// __init__ whenever contiguous_gradients is on, whatever the world size (the
// "# IPG" block of DeepSpeedZeroOptimizer_Stage3.__init__ at v0.7.0, v0.14.0
// and v0.18.3): 5e8 x 2 bytes, persistent. ZeRO-2 on one rank makes its
// per-backward bucket too (below). stage3.py never reads allgather_bucket_size
// (the parameter coordinator gathers the weights; the engine passes the size
// to stage 1/2 and the BF16 optimizer only): no all-gather bucket under ZeRO-3,
// on one rank or on 8. Each flush goes through reduce_scatter_coalesced
// (runtime/comm/coalesced_collectives.py, v0.7.0 to v0.19.4), which copies the
// bucket's gradients into one interleaved flat tensor (torch.cat) in backward:
// reduce_bucket_size x 2 bytes, deepspeed.reduce_scatter_copy. One rank, 1e9
// trainable: 5e8 x 2 = 1e9 B. A bucket flushes when a gradient would overflow
// it (stage3.py reduce_independent_p_g_buckets_and_remove_grads, v0.14.0 to
// v0.19.4): with a bucket of 2e9 elements the 1e9 trainable never fill it, and
// the only flush is independent_gradient_partition_epilogue, after backward
// (engine.py allreduce_gradients): no copy at the backward high point (0 B;
// comm-buffers 1.3.3; validation DSX-mtb-medium-z3-8gpu, DSX-mtb-small-z3-8gpu).
// Tensor parallel 2 x data parallel 8: the rank's shard of 5e8 elements fills
// the default bucket of 5e8 without overflowing it: flushed by the epilogue
// only, no copy (the kept bucket alone, 1e9 B); with reduce_bucket_size 2e8 the
// gradients overflow it in backward: a copy of 2e8 x 2 = 4e8 B.
TEST(CommBuffers, ZeroStage3BucketOnOneRank) {
  auto one_rank = [](int stage, const std::string& comm = "allgather_bucket_size = 2e8\n") {
    return "name = \"comm\"\nmode = \"train\"\n[model]\nparams = 1e9\n[precision]\nuse = \"mixed-bf16\"\n"
           "[optimizer]\nuse = \"adam\"\n[activations]\nuse = \"none\"\n[[strategy]]\nuse = \"data-parallel\"\n"
           "size = 1\n[[strategy]]\nuse = \"comm-buffers\"\n" +
           comm + "[[strategy]]\nuse = \"zero\"\nstage = " + std::to_string(stage) + "\n";
  };
  Evaluation three = evaluate_paper(one_rank(3));
  EXPECT_EQ(three.item_bytes("deepspeed.reduce_bucket", kBuffers), 1'000'000'000u);
  EXPECT_EQ(three.item_bytes("deepspeed.allgather_bucket", kBuffers), 0u);
  EXPECT_EQ(three.item_bytes("deepspeed.reduce_scatter_copy", kBuffers), 1'000'000'000u);
  EXPECT_EQ(three.component(kBuffers), 2'000'000'000u);  // no communicator on one rank
  Evaluation large_bucket = evaluate_paper(one_rank(3, "reduce_bucket_size = 2e9\n"));
  EXPECT_EQ(large_bucket.item_bytes("deepspeed.reduce_scatter_copy", kBuffers), 0u);
  EXPECT_EQ(large_bucket.item_bytes("deepspeed.reduce_bucket", kBuffers), 4'000'000'000u);
  // The boundary on one rank: 1e9 trainable elements fill a bucket of exactly 1e9 without overflowing it
  // (bucket.elements + param.ds_numel > reduce_bucket_size is false at the last one): the epilogue's flush
  // only, no copy; one element less and a gradient overflows it in backward: the plugin's bound for the
  // copy, a whole bucket, 999,999,999 x 2 = 1,999,999,998 B (DeepSpeed copies the gradients then in the
  // bucket, at most that).
  EXPECT_EQ(evaluate_paper(one_rank(3, "reduce_bucket_size = 1e9\n"))
                .item_bytes("deepspeed.reduce_scatter_copy", kBuffers),
            0u);
  EXPECT_EQ(evaluate_paper(one_rank(3, "reduce_bucket_size = 999999999\n"))
                .item_bytes("deepspeed.reduce_scatter_copy", kBuffers),
            1'999'999'998u);
  // ZeRO-2 on one rank makes its bucket per backward too (stage_1_and_2.py @ v0.19.4 setup_buckets has no
  // world-size test; MiniTrainBench's 1-GPU ZeRO-2 record, DSX-mtb-small-noac-z2-1gpu): 5e8 x 2 = 1e9 B, and
  // the 1e9 trainable elements overflow it in backward, whose flush flattens a bucket's worth, 1e9 B. No
  // all-gather bucket, though allgather_bucket_size is given: runtime/utils.py all_gather_dp_groups skips a
  // group of one rank.
  Evaluation two = evaluate_paper(one_rank(2));
  EXPECT_EQ(two.item_bytes("deepspeed.reduce_bucket", kBuffers), 1'000'000'000u);
  EXPECT_EQ(two.item_bytes("deepspeed.allreduce_copy", kBuffers), 1'000'000'000u);
  EXPECT_EQ(two.item_bytes("deepspeed.allgather_bucket", kBuffers), 0u);
  EXPECT_EQ(two.component(kBuffers), 2'000'000'000u);
  Evaluation eight = evaluate_paper(parallel("nccl = false\nbuckets = \"deepspeed\"\nallgather_bucket_size = 2e8\n"
                                             "[[strategy]]\nuse = \"zero\"\nstage = 3\n"));
  EXPECT_EQ(eight.item_bytes("deepspeed.allgather_bucket", kBuffers), 0u);
  EXPECT_EQ(eight.item_bytes("deepspeed.reduce_scatter_copy", kBuffers), 0u);
  EXPECT_EQ(eight.component(kBuffers), 1'000'000'000u);
  Evaluation small_bucket = evaluate_paper(parallel("nccl = false\nbuckets = \"deepspeed\"\nreduce_bucket_size = 2e8\n"
                                                    "[[strategy]]\nuse = \"zero\"\nstage = 3\n"));
  EXPECT_EQ(small_bucket.item_bytes("deepspeed.reduce_scatter_copy", kBuffers), 400'000'000u);
  EXPECT_EQ(small_bucket.component(kBuffers), 800'000'000u);
}

// Where ZeRO-3's bucket flushes (comm-buffers 1.4.0 with zero 1.9.0's record of
// the backward, sharding.backward_gradients). A gradient that would overflow a
// non-empty bucket flushes it first (stage3.py
// reduce_independent_p_g_buckets_and_remove_grads, v0.7.0 line 1074, v0.19.4),
// and reduce_scatter_coalesced's copy is of what the bucket holds then, beside
// the parameters gathered at that moment; each flush counts what copy and
// gathered set exceed the high point's gathered set with, at most its copy.
// Model: 4 layers, h 1024, 8 heads, ffn 4096 (gelu: two 4,194,304-element
// projections), RMSNorm, untied embedding and head, mixed bf16 (2-byte
// gradients and gathered weights), 8 data ranks; no prefetch and no reuse
// distance, so each step holds only its own module gathered (the norms, 1,024
// elements, persist and are not counted). Gradients in backward order: head,
// final norm 1,024, then per layer from the last: the two projections, norm,
// o, v, k, q (1,048,576 each), norm; the embedding's at the end (its flush,
// the epilogue's, after backward, is not counted).
// Vocabulary 32,000 (head and embedding 32,768,000 elements), bucket 4e7; the
// high point's gathered set is the head, 65,536,000 B:
//   layer 3's first projection: 32,769,024 + 4,194,304 = 36,963,328 fits;
//   its second would make 41,157,632: flush of 36,963,328 (73,926,656 B)
//   beside that projection (8,388,608 B): 82,315,264 - 65,536,000 =
//   16,779,264 over the high point;
//   then 4,194,304 + layer 3's rest (4,196,352) + layers 2 and 1 (12,584,960
//   each) + layer 0's first projection = 37,754,880; its second flushes it:
//   8,388,608 + 75,509,760 - 65,536,000 = 18,362,368;
//   then 8,390,656 (layer 0 from that projection on); the embedding's
//   32,768,000 would pass 4e7: its copy, 16,781,312 B, beside the embedding's
//   65,536,000: 16,781,312 over.
// The item is the most, 18,362,368 B. Before (and still without the record,
// gathered_parameters = false) the whole bucket, 4e7 x 2 = 80,000,000 B.
// Vocabulary 1,024 (1,048,576 elements each), bucket 3e6: the high point's
// gathered set is layer 3's projection, 8,388,608 B. A projection (4,194,304)
// passes the bucket alone: DeepSpeed does not copy it into the bucket
// (__add_grad_to_ipg_bucket) and reduces it alone, in place
// (reduce_scatter_coalesced copies no single tensor divisible by the ranks):
// no copy when the next gradient flushes it. Counted as a copy, the flush at
// the second projection would add 8,388,608 + 8,388,608 - 8,388,608 =
// 8,388,608 B. The flushes that copy: head and final norm (1,049,600
// elements) at layer 3's first projection, 2,099,200 B, all over the high
// point (8,388,608 + 2,099,200 - 8,388,608); from layer 2 on, the previous
// layer's k, q and norm (2,098,176) at each first projection: 4,196,352; the
// others (at a k, beside 2,097,152 B; at the embedding) stay under it. Item:
// 4,196,352 B.
TEST(CommBuffers, ZeroStage3FlushesWhereTheGradientsOverflowTheBucket) {
  auto scenario = [](bool gathered, int vocab, const char* bucket) {
    return std::string("name = \"flush\"\nmode = \"train\"\n[model]\nlayers = 4\nhidden = 1024\nheads = 8\n"
                       "ffn_hidden = 4096\nvocab = ") +
           std::to_string(vocab) +
           "\nmlp = \"gelu\"\nnorm = \"rmsnorm\"\ntied_embeddings = false\n[batch]\nmicro_batch = 1\n"
           "seq_len = 128\n[precision]\nuse = \"mixed-bf16\"\n[optimizer]\nuse = \"adam\"\n[activations]\n"
           "use = \"none\"\n[[strategy]]\nuse = \"data-parallel\"\nsize = 8\n[[strategy]]\nuse = \"zero\"\n"
           "stage = 3\ngathered_parameters = " +
           (gathered ? "true\nprefetch_bucket_size = 0\nmax_reuse_distance = 0\n" : "false\n") +
           "[[strategy]]\nuse = \"comm-buffers\"\nnccl = false\nreduce_bucket_size = " + bucket + "\n";
  };
  Evaluation replayed = evaluate_paper(scenario(true, 32000, "40000000"));
  EXPECT_EQ(replayed.item_bytes("zero3.gathered_backward", kBuffers), 65'536'000u);
  EXPECT_EQ(replayed.item_bytes("deepspeed.reduce_scatter_copy", kBuffers), 18'362'368u);
  EXPECT_EQ(replayed.item_bytes("deepspeed.reduce_bucket", kBuffers), 80'000'000u);
  Evaluation unreplayed = evaluate_paper(scenario(false, 32000, "40000000"));
  EXPECT_EQ(unreplayed.item_bytes("deepspeed.reduce_scatter_copy", kBuffers), 80'000'000u);
  Evaluation oversized = evaluate_paper(scenario(true, 1024, "3000000"));
  EXPECT_EQ(oversized.item_bytes("zero3.gathered_backward", kBuffers), 8'388'608u);
  EXPECT_EQ(oversized.item_bytes("deepspeed.reduce_scatter_copy", kBuffers), 4'196'352u);
}

// Where 'zero' cannot trace every gradient it publishes no record, and the
// whole bucket's copy counts at the high point (reduce_bucket_size x 2 B):
// LoRA's adapters (left out of the trace): r 8 on q and v of the model above,
// 4 x 2 x (8 x 1,024 x 2) = 131,072 trainable elements overflow a bucket of
// 1e5: 200,000 B; Mixtral 8x7B with expert parallelism 2, whose experts reduce
// over a group of their own: 5e8 x 2 = 1e9 B.
TEST(CommBuffers, ZeroStage3WithoutARecordCountsTheWholeBucket) {
  const std::string lora =
      "name = \"flush\"\nmode = \"train\"\n[model]\nlayers = 4\nhidden = 1024\nheads = 8\nffn_hidden = 4096\n"
      "vocab = 32000\nmlp = \"gelu\"\nnorm = \"rmsnorm\"\ntied_embeddings = false\n[batch]\nmicro_batch = 1\n"
      "seq_len = 128\n[precision]\nuse = \"mixed-bf16\"\n[optimizer]\nuse = \"adam\"\n[activations]\n"
      "use = \"none\"\n[[strategy]]\nuse = \"lora\"\nrank = 8\ntargets = \"q,v\"\n[[strategy]]\n"
      "use = \"data-parallel\"\nsize = 8\n[[strategy]]\nuse = \"zero\"\nstage = 3\ngathered_parameters = true\n"
      "[[strategy]]\nuse = \"comm-buffers\"\nnccl = false\nreduce_bucket_size = 100000\n";
  EXPECT_EQ(evaluate_paper(lora).item_bytes("deepspeed.reduce_scatter_copy", kBuffers), 200'000u);
  const std::string mixtral =
      "name = \"flush\"\nmode = \"train\"\n[model]\npreset = \"mixtral-8x7b\"\n[batch]\nmicro_batch = 1\n"
      "seq_len = 128\n[precision]\nuse = \"mixed-bf16\"\n[optimizer]\nuse = \"adam\"\n[activations]\n"
      "use = \"none\"\n[[strategy]]\nuse = \"data-parallel\"\nsize = 8\n[[strategy]]\nuse = \"expert-parallel\"\n"
      "size = 2\n[[strategy]]\nuse = \"zero\"\nstage = 3\ngathered_parameters = true\n[[strategy]]\n"
      "use = \"comm-buffers\"\nnccl = false\n";
  EXPECT_EQ(evaluate_paper(mixtral).item_bytes("deepspeed.reduce_scatter_copy", kBuffers), 1'000'000'000u);
}

// 'zero' declares its bucketed reduce, so the default buckets = "auto" follows it; 'fsdp' declares none.
TEST(CommBuffers, AutomaticBucketsFollowTheShardingPlugin) {
  Evaluation zero = evaluate_paper(parallel("nccl = false\n[[strategy]]\nuse = \"zero\"\nstage = 2\n"));
  EXPECT_EQ(zero.item_bytes("deepspeed.reduce_bucket", kBuffers), 1'000'000'000u);
  EXPECT_EQ(zero.item_bytes("ddp.buckets", kBuffers), 0u);
  Evaluation plain_ddp = evaluate_paper(parallel("nccl = false\n"));
  EXPECT_EQ(plain_ddp.item_bytes("ddp.buckets", kBuffers), 1'000'000'000u);
}

// NVLS buffers: one per communicator of more than 2 ranks (data-parallel 8
// here; tensor-parallel 2 has none): 256 MiB, NCCL 2.30's figure for 8 GPUs of sm90.
TEST(CommBuffers, NvlsBufferPerLargeCommunicator) {
  Evaluation e = evaluate_paper(parallel("nvls_mib = 256\n"));
  EXPECT_EQ(e.item_bytes("nccl.nvls", kBuffers), 268'435'456u);
  EXPECT_EQ(e.breakdown().quantities[kAllocated].peak + 268'435'456u + 616'562'688u + 411'041'792u,
            e.breakdown().quantities[kDevice].peak);  // outside the allocator, with NCCL's other buffers
}

// Expert parallelism has its own (all-to-all) communicator: Mixtral with data
// parallel 8 and expert parallel 8 has 2 communicators, 2 x 308,281,344.
TEST(CommBuffers, ExpertParallelGroupIsACommunicator) {
  const std::string mixtral = "name = \"comm\"\nmode = \"train\"\n[model]\npreset = \"mixtral-8x7b\"\n[precision]\n"
                              "use = \"mixed-bf16\"\n[optimizer]\nuse = \"adamw\"\n[activations]\nuse = \"none\"\n"
                              "[[strategy]]\nuse = \"data-parallel\"\nsize = 8\n[[strategy]]\nuse = \"expert-parallel\"\n"
                              "size = 8\n[[strategy]]\nuse = \"comm-buffers\"\nbuckets = \"none\"\n";
  EXPECT_EQ(evaluate_paper(mixtral).item_bytes("nccl.buffers", kBuffers), 616'562'688u);
}

// One GPU: no group, no communicator, no data parallelism: nothing.
TEST(CommBuffers, SingleGpuHasNone) {
  const std::string one = "name = \"comm\"\nmode = \"train\"\n[model]\nparams = 1e9\n[precision]\nuse = \"bf16\"\n"
                          "[optimizer]\nuse = \"sgd\"\n[activations]\nuse = \"none\"\n[[strategy]]\n"
                          "use = \"comm-buffers\"\n";
  EXPECT_EQ(evaluate_paper(one).component(kBuffers), 0u);
}

// Serving with tensor parallelism 4: one communicator (its buffers and its
// own 205,520,896 bytes), no gradient buckets.
TEST(CommBuffers, InferenceHasNcclOnly) {
  const std::string infer = "name = \"comm\"\nmode = \"infer\"\n[model]\nparams = 1e9\n[precision]\nuse = \"bf16\"\n"
                            "[[strategy]]\nuse = \"tensor-parallel\"\nsize = 4\n[[strategy]]\nuse = \"comm-buffers\"\n";
  EXPECT_EQ(evaluate_paper(infer).component(kBuffers), 308'281'344u + 205'520'896u);
}

// Lines: 1-10 as parallel(), 11 [[strategy]], 12 use, 13 size, 14 [[strategy]], 15 use, 16 size,
// 17 [[strategy]], 18 use, 19.. options.
TEST(CommBuffers, Errors) {
  EXPECT_EQ(error_of(parallel("buckets = \"none\"\ngradient_as_bucket_view = true\n"), "b.toml"),
            "b.toml:20:27: error: in [[strategy]] #3, strategy plugin 'comm-buffers', option "
            "'gradient_as_bucket_view': is an option of PyTorch DDP; it needs buckets = \"ddp\"" +
                library("comm-buffers"));
  // With buckets = "auto" (the default) DeepSpeed's options apply when 'zero' runs; with "ddp" they cannot.
  EXPECT_EQ(error_of(parallel("buckets = \"ddp\"\nreduce_bucket_size = 2e8\n"), "b.toml"),
            "b.toml:20:22: error: in [[strategy]] #3, strategy plugin 'comm-buffers', option 'reduce_bucket_size': "
            "is a DeepSpeed option; it needs buckets = \"deepspeed\"" + library("comm-buffers"));
  EXPECT_EQ(error_of(parallel("buckets = \"fsdp\"\n"), "b.toml"),
            "b.toml:19:11: error: in [[strategy]] #3, strategy plugin 'comm-buffers', option 'buckets': must be "
            "\"auto\", \"ddp\", \"deepspeed\" or \"none\", not \"fsdp\"" + library("comm-buffers"));
  EXPECT_EQ(error_of(parallel("groups = \"world, dp\"\n"), "b.toml"),
            "b.toml:19:10: error: in [[strategy]] #3, strategy plugin 'comm-buffers', option 'groups': names \"dp\", "
            "not a process group; use world, data, tensor, pipeline, context, expert, model, embedding, "
            "data-context or gradient-norm" +
                library("comm-buffers"));
  EXPECT_EQ(error_of(parallel("groups = \"data, data\"\n"), "b.toml"),
            "b.toml:19:10: error: in [[strategy]] #3, strategy plugin 'comm-buffers', option 'groups': names \"data\" "
            "twice" + library("comm-buffers"));
  EXPECT_EQ(error_of(parallel("groups = \"data,,tensor\"\n"), "b.toml"),
            "b.toml:19:10: error: in [[strategy]] #3, strategy plugin 'comm-buffers', option 'groups': has an empty "
            "entry in \"data,,tensor\"; list group names separated by commas" + library("comm-buffers"));
}

}  // namespace
}  // namespace memplan::testing
