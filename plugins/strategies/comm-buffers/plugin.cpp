// 'comm-buffers': communication memory per GPU (phase overhead).
//
// NCCL buffers (role buffers, persistent, outside PyTorch's allocator: they
// count in device memory only, not in allocated or reserved memory). NCCL
// gives each channel of a communicator its own buffers per connection, one
// FIFO per protocol (NVIDIA/nccl issue #1450; src/init.cc):
//   Simple  NCCL_BUFFSIZE, default 4 MiB (1 << 22)
//   LL128   NCCL_LL128_BUFFSIZE, default 120 x 640 x 8 x 8 = 4,915,200 bytes
//   LL      NCCL_LL_BUFFSIZE, default 8 x 512 x 8 x 16 = 524,288 bytes
// and memory grows linearly with the channels and with the communicators
// (NVIDIA/nccl issues #864 and #986). memplan counts
//   communicators x nccl_channels x nccl_peers x (buffsize [+ LL128 + LL])
// with one communicator per parallel group of more than one rank (ranks.data,
// ranks.tensor, ranks.pipeline, ranks.context, and the expert-parallel group
// layout.expert_parallel) unless `communicators` is set,
// and nccl_peers = 2 connections per channel (a ring's and a tree's). The
// channel count NCCL picks at init depends on the topology (its NCCL_DEBUG=INFO
// log prints it); 16 is an assumption, not a measurement.
//
// Gradient buckets (role buffers, tensors from the caching allocator), training
// with data parallelism (DeepSpeed's ZeRO buckets on one data rank too):
//   "ddp"        PyTorch DistributedDataParallel: the reducer's bucket tensors
//                hold a copy of every gradient (bucket_cap_mb, 25 MiB by
//                default, sets how gradients are grouped, not how much memory
//                the buckets take). gradient_as_bucket_view = true makes the
//                gradients views of the buckets and saves exactly that copy
//                (PyTorch DDP documentation; PR #41954 measured ~1 GB less peak
//                for a model with ~1 GB of gradients).
//   "deepspeed"  DeepSpeed ZeRO 1/2 (deepspeed/runtime/zero/stage_1_and_2.py
//                @ v0.19.5, setup_buckets and _release_ipg_buffers): with
//                contiguous_gradients (the default) each backward allocates a
//                reduce bucket of reduce_bucket_size elements in the gradients'
//                dtype, and a second one with overlap_comm ("double
//                buffers"), freed after backward: from the first gradient hook
//                (lifetime backward_layers; transient_backward before v0.17.2,
//                lazy_buckets), on one data rank too; each flush copies the
//                bucket's gradients (deepspeed.allreduce_copy, reduce_copy).
//                The post-step all-gather writes in place into the flat 16-bit
//                weights when torch has all_gather_into_tensor (every PyTorch
//                since 1.13; runtime/utils.py all_gather_dp_groups), so
//                allgather_bucket_size allocates nothing unless given.
//                ZeRO-3 (stage3.py @ v0.14.0, DeepSpeedZeroOptimizer_Stage3
//                __init__: with contiguous_gradients, the default, one flat
//                IPG buffer of reduce_bucket_size elements in the parameters'
//                dtype, allocated when the optimizer is built and kept):
//                persistent, single, when the sharding plugin declares
//                "deepspeed-stage3".
//   "none"       gradients reduced from their own contiguous buffer
//                (Megatron-LM's DDP and distributed optimizer, FSDP).
//   "auto"       (the default) what the sharding plugin declares in
//                sharding.gradient_buckets ('zero' declares "deepspeed",
//                'fsdp' "none"), else "ddp".
//
// Communicators and their fixed memory (NCCL 2.19+ with cuMem, the default on
// CUDA 12 drivers: src/misc/cudawrap.cc NCCL_CUMEM_ENABLE; NVIDIA/nccl tag
// v2.27.7-1). Every device allocation NCCL makes is its own cuMem mapping,
// rounded up to the allocation granularity (2 MiB; src/include/alloc.h), and
// ncclCommInitRank makes three per p2p channel (src/channel.cc: the shared and
// the channel's peer arrays, the ring's user ranks) and two per communicator
// (src/init.cc: devCommAndChans, rankToLocalRank): (3 x 32 + 2) x 2 MiB = 196
// MiB with NCCL's 32 p2p channels (pow2Up of the collective channels; 32 on
// NVLink systems and in 1-rank communicators). It is paid by every
// communicator PyTorch creates, one of a single rank included: PyTorch creates
// a group's communicator at its first collective, and frameworks that run
// collectives on every group whatever its size (Megatron-LM: the batch
// broadcast on the tensor group, the gradient all-reduce on the data group,
// the gradient norm on the model-parallel group, barriers on the world) pay
// it for groups of one rank too (`one_rank_groups`). A measured single-GPU
// process (NVIDIA/nccl PR #2366, RTX 3090, default runtime connect): 484 MiB
// with the CUDA context, of which a bare context is about 256-290 MiB.
// Buffers are allocated at the first operation of each kind (runtime connect,
// NCCL 2.22+): ring/tree FIFOs (nccl.buffers, above) for groups that run
// collectives; send/receive buffers (nccl.p2p) for groups that exchange with
// peers: pipeline stages (one peer at the first and last stage, two between),
// context-parallel rings (two peers, one at size 2) and expert all-to-all
// (every other rank): per peer, p2p channels x (a receive buffer of the three
// protocols rounded up to CUDA_IPC_MIN, 10 MiB, + a 2 MiB send side) (src/
// transport/p2p.cc, src/enqueue.cc; the 10,485,760- and 2,097,152-byte
// allocations NVIDIA/nccl issue #1685 counted on 8x H100).
//
// NVLS (NVLink SHARP), where the GPUs sit on an NVSwitch with multicast
// (hardware.nvlink_sharp, from the GPU catalog: HGX H100/H200 8-GPU; option
// `nvls` overrides it). NCCL v2.27.7-1 enables it for a communicator with
// more than 2 GPUs on the node (src/transport/nvls.cc: NCCL_NVLS_ENABLE
// default 2 = auto, `gpuCount <= 2` returns without it) and then holds:
//   at init      one 2 MiB cuMem mapping per collective channel for
//                nvlsDevPeers (src/channel.cc initNvlsChannel) and a credit
//                buffer rounded up to 2 MiB: (24 + 1) x 2 MiB = 50 MiB with
//                the 24 collective channels NCCL builds on 8x H100 (logged
//                "24 coll channels, 16 nvls channels" in aws-samples/aws-do-eks
//                nccl-test README on p5.48xlarge);
//   lazily       at the first collective its tuner routes to NVLS
//                (ncclNvlsBufferSetup): 16 NVLS channels (NVLS_NCHANNELS_SM90)
//                x 2 x (128 KiB chunk x 8 steps) x local GPUs = 32 MiB per
//                local GPU, 256 MiB at 8 (logged "nvlsPerRankSize 33554432
//                nvlsTotalSize 268435456" on 8x H100).
// The tuner (src/graph/tuning.cc) picks NVLS only for sum all-reduces of at
// least 1.25-2 MiB on 5 to 8 local GPUs; reduce-scatter and all-gather stay on
// rings, and at 3-4 GPUs ring Simple wins. So the lazy buffer goes to the
// groups that all-reduce large tensors: the tensor group without sequence
// parallelism (the layers' activation all-reduces) and the data group when
// gradients are all-reduced (no sharding plugin declares reduce-scatter
// buckets, or ZeRO 1/2 all-reduces its flushed buckets: reduce_copy "bucket").
// Each communicator pays for itself (resources are shared only through
// ncclCommSplit with splitShare). Local GPUs of a group follow the
// usual rank order, tensor fastest, then context, data, pipeline
// (Megatron-LM's "tp-cp-ep-dp-pp"), on nodes of gpus_per_node GPUs.
// nvls_mib, when given, replaces the lazy buffer with a fixed size for every
// communicator of more than 2 ranks that runs collectives (older NCCLs: 768
// MiB in 2.21.5, 2,304 MiB on 8x H200 in vllm-project/vllm issue #9699).
#include <memplan/dtypes.hpp>
#include <memplan/sdk.hpp>
#include <memplan/support/backward_gradients.hpp>
#include <memplan/support/format.hpp>
#include <memplan/support/items.hpp>
#include <memplan/support/layout.hpp>
#include <memplan/support/parameter_shapes.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace {

namespace sdk = memplan::sdk;
namespace support = memplan::support;

constexpr double kLl128Bytes = 120.0 * 640 * 8 * 8;  // NCCL DEFAULT_LL128_BUFFSIZE
constexpr double kLlBytes = 8.0 * 512 * 8 * 16;      // NCCL DEFAULT_LL_BUFFSIZE

constexpr double kGranularity = 2.0 * 1024 * 1024;  // cuMem allocation granularity and CUDA_IPC_MIN
constexpr double kMiB = support::kMiB;
constexpr double kNvlsCollChannels = 24;         // NCCL's collective channels on 8x H100 NVSwitch (logged)
constexpr double kNvlsBufferPerGpu = 32 * kMiB;  // 16 NVLS channels x 2 x 1 MiB, per local GPU
constexpr int64_t kNvlsMinLocalGpus = 3;         // nvls.cc: no NVLS at 2 GPUs or fewer
constexpr int64_t kNvlsAllReduceLocalGpus = 5;   // tuning.cc: below 5 GPUs ring Simple beats NVLS

constexpr std::array<memplan_option_spec, 22> kOptions{{
    {"nccl_channels", MEMPLAN_OPTION_INT, "channels per NCCL communicator", "16", nullptr},
    {"nccl_peers", MEMPLAN_OPTION_INT, "connections with buffers per channel", "2 (ring and tree)", nullptr},
    {"nccl_buffsize", MEMPLAN_OPTION_INT, "NCCL_BUFFSIZE: the Simple protocol's buffer per connection, bytes",
     "4194304 (4 MiB)", nullptr},
    {"nccl_protocols", MEMPLAN_OPTION_STRING,
     "\"all\" (Simple, LL128 and LL buffers) or \"simple\" (NCCL_PROTO=Simple)", "\"all\"", nullptr},
    {"communicators", MEMPLAN_OPTION_INT, "NCCL communicators on each GPU",
     "one per parallel group of more than one rank", nullptr},
    {"buckets", MEMPLAN_OPTION_STRING,
     "gradient buckets: \"ddp\", \"deepspeed\", \"none\", or \"auto\" (what the sharding plugin declares, else "
     "\"ddp\")",
     "\"auto\"", nullptr},
    {"unsharded_buckets", MEMPLAN_OPTION_STRING,
     "what buckets = \"auto\" gives where no sharding plugin declares buckets: \"ddp\" (PyTorch DDP's persistent "
     "buckets) or \"none\" (DeepSpeed's engine without ZeRO: it all-reduces after backward through a flat "
     "temporary, engine.py allreduce_gradients -> buffered_allreduce_fallback, not at the backward's high point)",
     "\"ddp\"; the deepspeed profile sets \"none\"", nullptr},
    {"gradient_as_bucket_view", MEMPLAN_OPTION_BOOL, "ddp: gradients are views of the buckets (no copy)", "false",
     nullptr},
    {"reduce_bucket_size", MEMPLAN_OPTION_DOUBLE, "deepspeed: elements reduced at a time", "5e8", nullptr},
    {"allgather_bucket_size", MEMPLAN_OPTION_DOUBLE,
     "deepspeed: elements all-gathered at a time through a bucket, during the optimizer step (only PyTorch without "
     "all_gather_into_tensor uses one)",
     "none", nullptr},
    {"overlap_comm", MEMPLAN_OPTION_BOOL, "deepspeed: overlap gradient reduction with backward (a second reduce bucket)",
     "false", nullptr},
    {"lazy_buckets", MEMPLAN_OPTION_BOOL,
     "deepspeed ZeRO 1/2: the reduce buckets are allocated at the first gradient hook, after the loss's backward "
     "(v0.17.2 on), not when the optimizer's backward starts (before)",
     "true", nullptr},
    {"reduce_copy", MEMPLAN_OPTION_STRING,
     "deepspeed ZeRO 1/2: what a flush of the reduce bucket copies: \"bucket\" (its gradients flattened into one "
     "tensor for one all-reduce: use_multi_rank_bucket_allreduce, DeepSpeed 0.12.4 on), \"rank\" (each destination "
     "rank's slices flattened in turn: use_multi_rank_bucket_allreduce false) or \"none\" (slices reduced in place, "
     "before 0.12.4)",
     "\"bucket\"", nullptr},
    {"communication_data_type", MEMPLAN_OPTION_STRING,
     "deepspeed ZeRO 1/2: the dtype gradients are reduced in (DeepSpeed's communication_data_type); another than the "
     "gradients' adds a cast copy of each flush",
     "the gradients' dtype (DeepSpeed's default from 0.9.2)", nullptr},
    {"nvls", MEMPLAN_OPTION_BOOL,
     "the GPUs sit on an NVSwitch with NVLink SHARP, so NCCL sets up NVLS memory per communicator of more than 2 "
     "GPUs on a node",
     "the GPU catalog's nvlink_sharp (hardware.nvlink_sharp)", nullptr},
    {"gpus_per_node", MEMPLAN_OPTION_INT, "GPUs per node, for which ranks of a group share NVLS", "8", nullptr},
    {"nvls_mib", MEMPLAN_OPTION_DOUBLE,
     "a fixed NVLS buffer per communicator of more than 2 ranks that runs collectives, MiB (older NCCLs: 768 with "
     "2.21)",
     "NCCL 2.27's: 32 MiB per local GPU, for groups that all-reduce large tensors", nullptr},
    {"nccl", MEMPLAN_OPTION_BOOL, "count NCCL's buffers", "true", nullptr},
    {"groups", MEMPLAN_OPTION_STRING,
     "the process groups with an NCCL communicator, comma-separated: world, data, tensor, pipeline, context, expert, "
     "model (tensor x pipeline), embedding (first and last pipeline stage), data-context (data x context), "
     "gradient-norm (tensor x pipeline; every rank when the optimizer is sharded)",
     "\"data, tensor, pipeline, context, expert\"", nullptr},
    {"one_rank_groups", MEMPLAN_OPTION_BOOL,
     "groups of one rank get a communicator too (the framework runs collectives on every group whatever its size)",
     "false", nullptr},
    {"nccl_cumem", MEMPLAN_OPTION_BOOL,
     "NCCL allocates through cuMem (NCCL 2.19+ on CUDA 12 drivers): each communicator holds (3 x p2p channels + 2) "
     "x 2 MiB from its creation",
     "true", nullptr},
    {"nccl_p2p_channels", MEMPLAN_OPTION_INT, "NCCL's p2p channels per communicator and per send/receive peer",
     "32", nullptr},
}};

enum class Buckets { automatic, ddp, deepspeed, none };

// What a flush of DeepSpeed ZeRO 1/2's reduce bucket copies (stage_1_and_2.py average_tensor, with
// reduce_scatter, the default): "bucket" from v0.12.4 (2afa1c7f2, use_multi_rank_bucket_allreduce true by
// default: allreduce_and_scatter hands every slice to allreduce_bucket, whose self.flatten makes one new tensor
// of the bucket's gradients), "rank" with use_multi_rank_bucket_allreduce false (allreduce_no_retain flattens
// one destination rank's slices at a time), "none" before v0.12.4 (dist.reduce on narrow views of the bucket).
enum class ReduceCopy { bucket, rank, none };

// A process group that can have its own NCCL communicator.
// data-context and gradient-norm are Megatron-LM's groups for the gradient
// reduction (data x context ranks: core/distributed/distributed_data_parallel.py
// reduces over get_data_parallel_group(with_context_parallel=True)) and for the
// gradient norm (the model-parallel group, tensor x pipeline; under the
// distributed optimizer the intra-instance group, which with one instance
// holds every rank: core/optimizer/__init__.py sets grad_stats_parallel_group,
// core/parallel_state.py builds the group from all "tp-ep-pp" groups), at
// NVIDIA/Megatron-LM core_r0.14.0 (32ad5c89).
enum class Group { world, data, tensor, pipeline, context, expert, model, embedding, data_context, gradient_norm };
constexpr std::array<const char*, 10> kGroupNames{"world",     "data",   "tensor", "pipeline",     "context",
                                                  "expert",    "model",  "embedding", "data-context",
                                                  "gradient-norm"};

struct GroupUse {
  int64_t ranks = 1;        // ranks in the group, 0 when this GPU is in none
  bool collectives = true;  // runs collectives (ring/tree buffers)
  int64_t peers = 0;        // send/receive peers (p2p buffers)
  bool at_one_rank = true;  // a framework that runs collectives on groups of one rank runs this one's
  int64_t local = 1;        // of its ranks, those on this GPU's node
  bool large_all_reduce = false;  // sums large tensors with all-reduce (what NCCL's tuner sends to NVLS)
};

// Ranks of a group of `size` that share a node of `node` GPUs, when the
// group's ranks are `stride` apart in the rank order.
int64_t local_ranks(int64_t size, int64_t stride, int64_t node) {
  if (size <= 1) return size;
  if (stride >= node) return 1;
  return std::min(size, std::max<int64_t>(1, node / stride));
}

// The layout the strategies set (memplan/support/layout.hpp), and what the
// sharding plugin declared of the gradients, read once per evaluation.
struct Layout : support::Layout {
  bool gradients_all_reduced = false;  // training, with gradients (or ZeRO 1/2's flushed buckets) all-reduced
  bool optimizer_sharded = false;      // a sharding plugin splits the optimizer over the data ranks
};

// `buckets`: sharding.gradient_buckets, "ddp" when unset. `bucket_all_reduce`: DeepSpeed ZeRO 1/2 reduces each
// flush of its bucket with one all-reduce of the flattened gradients (reduce_copy "bucket", v0.12.4 on).
Layout read_layout(const support::LayoutReader& reader, const sdk::Context& ctx, std::string_view buckets,
                   bool bucket_all_reduce) {
  Layout layout;
  static_cast<support::Layout&>(layout) = reader.read(ctx);
  // ZeRO and FSDP declare their reduce-scatter buckets; without them gradients are all-reduced, and so are
  // ZeRO 1/2's flushed buckets where DeepSpeed all-reduces them.
  layout.gradients_all_reduced = ctx.training() && (buckets == "ddp" || bucket_all_reduce);
  layout.optimizer_sharded = ctx.training() && buckets != "ddp";
  return layout;
}

// What the group is on the reported GPU.
GroupUse group_use(const Layout& layout, Group group) {
  const int64_t data = layout.data, tensor = layout.tensor, pipeline = layout.pipeline, context = layout.context;
  switch (group) {
    case Group::world: return {data * tensor * pipeline * context, true, 0};
    case Group::data: return {data, true, 0};
    case Group::tensor: return {tensor, true, 0};
    case Group::model: return {tensor * pipeline, true, 0};
    case Group::data_context: return {data * context, true, 0};
    case Group::gradient_norm:
      return {layout.optimizer_sharded ? data * tensor * pipeline * context : tensor * pipeline, true, 0};
    case Group::pipeline:
      // Send/receive only; the first and the last stage have one neighbour.
      return {pipeline, false, pipeline <= 1 ? 0 : layout.edge_stage() || pipeline == 2 ? 1 : 2, false};
    case Group::context: return {context, false, context <= 1 ? 0 : context == 2 ? 1 : 2, false};
    case Group::expert:  // all-to-all with every other rank; none at one rank
      return {layout.expert, true, layout.expert - 1, false};
    case Group::embedding:
      // The tied embedding's all-reduce between the first and the last stage.
      return {pipeline > 1 && layout.edge_stage() ? 2 : 0, true, 0, false};
  }
  return {};
}

// Where the group's ranks sit (on nodes of `node` GPUs, in the rank order
// tensor, context, data, pipeline) and whether it all-reduces large tensors:
// what decides NCCL's NVLS memory.
void add_nvls_facts(const Layout& layout, Group group, int64_t node, GroupUse& use) {
  const int64_t data = layout.data, tensor = layout.tensor, pipeline = layout.pipeline, context = layout.context;
  switch (group) {
    case Group::world: use.local = std::min(use.ranks, node); break;
    case Group::tensor: use.local = local_ranks(tensor, 1, node); break;
    case Group::context: use.local = local_ranks(context, tensor, node); break;
    case Group::data: use.local = local_ranks(data, tensor * context, node); break;
    case Group::data_context: use.local = local_ranks(data * context, tensor, node); break;
    case Group::pipeline: use.local = local_ranks(pipeline, tensor * context * data, node); break;
    case Group::model:
      use.local = local_ranks(tensor, 1, node) * local_ranks(pipeline, tensor * context * data, node);
      break;
    case Group::gradient_norm:
      use.local = layout.optimizer_sharded
                      ? std::min(use.ranks, node)
                      : local_ranks(tensor, 1, node) * local_ranks(pipeline, tensor * context * data, node);
      break;
    case Group::expert: use.local = local_ranks(use.ranks, tensor, node); break;
    case Group::embedding: use.local = std::min<int64_t>(use.ranks, 2); break;  // never more than 2: no NVLS
  }
  if (group == Group::tensor) use.large_all_reduce = !layout.sequence_parallel;
  // The gradient norm all-reduces a handful of floats: rings, never NVLS.
  if (group == Group::data || group == Group::data_context) use.large_all_reduce = layout.gradients_all_reduced;
}

class CommBuffers {
 public:
  static constexpr sdk::PluginInfo info{"comm-buffers", "1.7.0",
                                        "NCCL communicators and buffers, data-parallel gradient buckets (DDP, DeepSpeed)",
                                        sdk::Kind::strategy, sdk::Phase::overhead, sdk::Reads::nothing};
  static std::span<const memplan_option_spec> options() { return kOptions; }

  explicit CommBuffers(sdk::Options& options)
      : channels_(options.positive_integer("nccl_channels", 16)),
        peers_(options.positive_integer("nccl_peers", 2)),
        buffsize_(options.positive_integer("nccl_buffsize", int64_t{1} << 22)),
        nccl_(options.boolean("nccl").value_or(true)),
        view_(options.boolean("gradient_as_bucket_view").value_or(false)),
        overlap_comm_(options.boolean("overlap_comm").value_or(false)),
        lazy_buckets_(options.boolean("lazy_buckets").value_or(true)),
        one_rank_groups_(options.boolean("one_rank_groups").value_or(false)),
        cumem_(options.boolean("nccl_cumem").value_or(true)),
        p2p_channels_(options.positive_integer("nccl_p2p_channels", 32)),
        nvls_option_(options.boolean("nvls")),
        gpus_per_node_(options.positive_integer("gpus_per_node", 8)),
        layout_(options),
        nvlink_sharp_attr_(options.attribute(MEMPLAN_ATTR_HARDWARE_NVLINK_SHARP)),
        gradients_dtype_attr_(options.attribute(MEMPLAN_ATTR_DTYPE_GRADIENTS)),
        gradient_buckets_attr_(options.attribute(MEMPLAN_ATTR_GRADIENT_BUCKETS)),
        backward_gradients_attr_(options.attribute(MEMPLAN_ATTR_BACKWARD_GRADIENTS)),
        zero_stage_attr_(options.attribute(MEMPLAN_ATTR_ZERO_STAGE)),
        names_(options) {
    read_groups(options);
    const std::string protocols = options.string("nccl_protocols").value_or("all");
    if (protocols != "all" && protocols != "simple")
      options.fail("nccl_protocols", "must be \"all\" or \"simple\", not \"" + protocols + "\"");
    all_protocols_ = protocols == "all";
    if (options.integer("communicators")) {
      const std::optional<int64_t> value = options.integer("communicators");
      if (*value < 0) options.fail("communicators", "must not be negative, got " + std::to_string(*value));
      communicators_ = *value;
    }
    const std::string buckets = options.string("buckets").value_or("auto");
    if (buckets != "auto" && buckets != "ddp" && buckets != "deepspeed" && buckets != "none")
      options.fail("buckets", "must be \"auto\", \"ddp\", \"deepspeed\" or \"none\", not \"" + buckets + "\"");
    buckets_ = buckets == "auto"        ? Buckets::automatic
               : buckets == "ddp"       ? Buckets::ddp
               : buckets == "deepspeed" ? Buckets::deepspeed
                                        : Buckets::none;
    const std::string unsharded = options.string("unsharded_buckets").value_or("ddp");
    if (unsharded != "ddp" && unsharded != "none")
      options.fail("unsharded_buckets", "must be \"ddp\" or \"none\", not \"" + unsharded + "\"");
    unsharded_none_ = unsharded == "none";
    reduce_bucket_ = elements(options, "reduce_bucket_size", 5e8);
    allgather_bucket_ = elements(options, "allgather_bucket_size", 0);
    nvls_ = options.number("nvls_mib").value_or(0) * kMiB;
    if (!std::isfinite(nvls_) || nvls_ < 0) options.fail("nvls_mib", "must be a non-negative number of MiB");
    if (buckets_ == Buckets::deepspeed || buckets_ == Buckets::none) {
      if (options.boolean("gradient_as_bucket_view"))
        options.fail("gradient_as_bucket_view", "is an option of PyTorch DDP; it needs buckets = \"ddp\"");
    }
    if (buckets_ == Buckets::ddp || buckets_ == Buckets::none) {
      for (const char* key : {"reduce_bucket_size", "allgather_bucket_size"})
        if (options.number(key)) options.fail(key, "is a DeepSpeed option; it needs buckets = \"deepspeed\"");
      if (options.boolean("overlap_comm"))
        options.fail("overlap_comm", "is a DeepSpeed option; it needs buckets = \"deepspeed\"");
      // lazy_buckets and reduce_copy describe a DeepSpeed version (the deepspeed profile sets them by version,
      // ZeRO stage 0 included): nothing to apply to without DeepSpeed's buckets, so no error.
      if (options.string("communication_data_type"))
        options.fail("communication_data_type", "is a DeepSpeed option; it needs buckets = \"deepspeed\"");
    }
    const std::string copy = options.string("reduce_copy").value_or("bucket");
    if (copy != "bucket" && copy != "rank" && copy != "none")
      options.fail("reduce_copy", "must be \"bucket\", \"rank\" or \"none\", not \"" + copy + "\"");
    reduce_copy_ = copy == "bucket" ? ReduceCopy::bucket : copy == "rank" ? ReduceCopy::rank : ReduceCopy::none;
    if (const std::optional<std::string> dtype = options.string("communication_data_type")) {
      if (*dtype != "fp32" && *dtype != "fp16" && *dtype != "bf16")
        options.fail("communication_data_type", "must be \"fp32\", \"fp16\" or \"bf16\" (DeepSpeed's "
                                                "communication_data_type), not \"" + *dtype + "\"");
      communication_bytes_ = sdk::dtype_bytes(*dtype);
    }
  }

  void apply(sdk::Context& ctx) {
    // The host's storage of the attribute: valid until it is set again, which no plugin after the sharding ones does.
    const std::string_view declared = ctx.attr_string(gradient_buckets_attr_, "ddp");
    const bool stage3 = declared == "deepspeed-stage3";
    const bool zero = declared == "deepspeed" || stage3;  // DeepSpeed's ZeRO optimizer runs
    Buckets buckets = buckets_;
    // unsharded_buckets = "none" where no sharding plugin declared buckets: DeepSpeed's engine without ZeRO.
    const bool engine_fallback = buckets == Buckets::automatic && !zero && declared != "none" && unsharded_none_;
    if (buckets == Buckets::automatic)
      buckets = zero                                   ? Buckets::deepspeed
                : declared == "none" || unsharded_none_ ? Buckets::none
                                                        : Buckets::ddp;
    if (nccl_)
      add_nccl(ctx, declared, buckets == Buckets::deepspeed && !stage3 && reduce_copy_ == ReduceCopy::bucket);
    if (!ctx.training()) return;
    // One data rank reduces nothing, but DeepSpeed's ZeRO optimizer makes its buckets whatever the world size:
    // ZeRO-3 its flat IPG bucket (stage3.py __init__, "# IPG": only contiguous_gradients decides; v0.7.0,
    // v0.14.0, v0.18.3), ZeRO 1/2 a bucket per backward (stage_1_and_2.py setup_buckets, v0.19.4, and
    // backward_prologue / backward() before: no world-size test), flushed through the same all-reduce.
    if (layout_.data(ctx) <= 1 && !(zero && buckets == Buckets::deepspeed)) return;
    switch (buckets) {
      case Buckets::ddp:
        if (!view_) add(ctx, names_.ddp_buckets, sdk::Lifetime::persistent, gradient_bytes(ctx));
        break;
      case Buckets::deepspeed: {
        const double bytes = ctx.attr_double(gradients_dtype_attr_, 2.0);
        if (stage3) {  // one flat bucket, allocated when the optimizer is built and kept
          add(ctx, names_.reduce_bucket, sdk::Lifetime::persistent, reduce_bucket_ * bytes);
          // Each flush hands the bucket's gradients to reduce_scatter_coalesced (runtime/comm/
          // coalesced_collectives.py, v0.7.0 to v0.19.4), which interleaves them into one new flat tensor
          // (torch.cat) before the reduce-scatter, on one rank too: a bucket's worth in backward. A gradient
          // flushes the bucket only when it would overflow it (stage3.py reduce_independent_p_g_buckets_and_
          // remove_grads: bucket.elements + param.ds_numel > reduce_bucket_size, v0.7.0 to v0.19.4); trainable
          // gradients that fill less than a bucket are flushed once, by independent_gradient_partition_epilogue,
          // at the end of backward: in the releases read here the engine calls it after loss.backward() returns
          // (engine.py allreduce_gradients); later stage3.py runs it from the last gradient hook
          // (update_hook_state_and_maybe_run_epilogue, once every expected hook has fired; the release that
          // moved it is not pinned). Either way the activations (the checkpoints, the last layer's
          // recomputation, the loss's tensors) are gone by then: that copy is at no high point
          // (DSX-mtb-medium-z3-8gpu and -small-z3 measure none). The flushes before it come where
          // the gradients ready so far overflow the bucket; 'zero' publishes which gathered parameters are held
          // then (sharding.backward_gradients), and flush_excess places them.
          const double trainable = trainable_elements(ctx) * static_cast<double>(layout_.data(ctx));
          if (trainable > reduce_bucket_)
            add(ctx, names_.reduce_scatter_copy, sdk::Lifetime::transient_backward, flush_excess(ctx, bytes));
          break;  // stage3.py never reads allgather_bucket_size (v0.7.0 to v0.18.3): the coordinator gathers
        }
        // Stages 1 and 2: the buckets go at the epilogue (_release_ipg_buffers). From v0.17.2 (ed5f73755,
        // "Enable torch.autocast with ZeRO") they come with the first gradient hook (process_gradients ->
        // backward_prologue, renamed setup_buckets in v0.18.3), after the loss's and the head's backward: alive
        // while the layers' backward runs and through its end, not beside the loss's backward (lazy_buckets).
        // Before, the optimizer's backward() made them before it called loss.backward(): the whole backward.
        // Stage 1 runs the epilogue only at the accumulation boundary (engine.py allreduce_gradients), so with
        // gradient accumulation its buckets stay from the first micro-batch's backward through the next ones'
        // forward and whole backward (setup_buckets allocates only while ready_for_gradients is false, which
        // _release_ipg_buffers alone resets), the loss's included.
        const bool stage1 = ctx.attr_int(zero_stage_attr_, 0) == 1;
        const bool kept_across_micro_batches = stage1 && ctx.workload().grad_accum > 1;
        const double bucket_bytes = (overlap_comm_ ? 2 : 1) * reduce_bucket_ * bytes;
        add(ctx, names_.reduce_bucket,
            lazy_buckets_ && !kept_across_micro_batches ? sdk::Lifetime::backward_layers
                                                        : sdk::Lifetime::transient_backward,
            bucket_bytes);
        if (kept_across_micro_batches) add(ctx, names_.reduce_bucket, sdk::Lifetime::transient_forward, bucket_bytes);
        add_allreduce_copy(ctx, stage1, bytes);
        // The post-step all-gather skips a group of one rank (runtime/utils.py all_gather_dp_groups, v0.19.4).
        if (layout_.data(ctx) > 1)
          add(ctx, names_.allgather_bucket, sdk::Lifetime::transient_optimizer, allgather_bucket_ * bytes);
        break;
      }
      case Buckets::automatic:
      case Buckets::none:
        // DeepSpeed's engine without ZeRO: allreduce_gradients -> buffered_allreduce_fallback flattens the
        // gradients into buckets of up to allreduce_bucket_size (5e8) elements, one at a time, after backward
        // (runtime/engine.py @ v0.9.0 1756-1772, allreduce_bucket's flatten 2172-2173): one bucket's copy beside
        // every gradient at backward's end.
        if (engine_fallback)
          add(ctx, names_.allreduce_copy, sdk::Lifetime::backward_end,
              std::min(gradient_bytes(ctx), 5e8 * ctx.attr_double(gradients_dtype_attr_, 2.0)));
        break;
    }
  }

 private:
  void read_groups(sdk::Options& options) {
    const std::string text = options.string("groups").value_or("data, tensor, pipeline, context, expert");
    size_t start = 0;
    while (start <= text.size()) {
      size_t end = text.find(',', start);
      if (end == std::string::npos) end = text.size();
      std::string name = text.substr(start, end - start);
      name.erase(0, name.find_first_not_of(" \t"));
      name.erase(name.find_last_not_of(" \t") + 1);
      start = end + 1;
      if (name.empty()) {
        if (end == text.size() && !groups_.empty()) break;
        options.fail("groups", "has an empty entry in \"" + text + "\"; list group names separated by commas");
      }
      size_t found = 0;
      while (found < kGroupNames.size() && name != kGroupNames[found]) ++found;
      if (found == kGroupNames.size())
        options.fail("groups", "names \"" + name + "\", not a process group; use world, data, tensor, pipeline, "
                               "context, expert, model, embedding, data-context or gradient-norm");
      const Group group = static_cast<Group>(found);
      for (Group listed : groups_)
        if (listed == group) options.fail("groups", "names \"" + name + "\" twice");
      groups_.push_back(group);
    }
  }

  static double elements(sdk::Options& options, const char* key, double fallback) {
    const double value = options.number(key).value_or(fallback);
    if (!std::isfinite(value) || value < 0)
      options.fail(key, "must be a non-negative count, got " + support::number(value));
    return value;
  }

  // `buckets`: sharding.gradient_buckets, "ddp" when unset.
  void add_nccl(sdk::Context& ctx, std::string_view buckets, bool bucket_all_reduce) const {
    const double per_connection = static_cast<double>(buffsize_) + (all_protocols_ ? kLl128Bytes + kLlBytes : 0);
    int64_t communicators = 0;  // every communicator this GPU holds
    int64_t collective = 0;     // ... of more than one rank that run collectives
    int64_t nvls_groups = 0;    // ... of more than two ranks
    int64_t nvls_setups = 0;    // ... with NVLS set up (more than 2 GPUs on the node share it)
    double nvls_buffers = 0;    // NVLS buffers of those that all-reduce large tensors, bytes
    int64_t peers = 0;          // send/receive peers over all groups
    const bool nvls = nvls_option_.value_or(ctx.attr_int(nvlink_sharp_attr_, 0) != 0);
    const Layout layout = read_layout(layout_, ctx, buckets, bucket_all_reduce);
    for (Group group : groups_) {
      GroupUse use = group_use(layout, group);
      if (use.ranks <= 0) continue;
      if (use.ranks == 1 && (!one_rank_groups_ || !use.at_one_rank)) continue;
      ++communicators;
      if (use.ranks > 1 && use.collectives) ++collective;
      if (use.ranks > 2 && use.collectives) ++nvls_groups;
      peers += use.peers;
      if (!nvls) continue;
      add_nvls_facts(layout, group, gpus_per_node_, use);
      if (use.local < kNvlsMinLocalGpus) continue;
      ++nvls_setups;
      if (use.large_all_reduce && use.local >= kNvlsAllReduceLocalGpus)
        nvls_buffers += kNvlsBufferPerGpu * static_cast<double>(use.local);
    }
    if (communicators_) collective = *communicators_;
    if (cumem_ && communicators > 0) {
      add_device(ctx, names_.communicators, communicators,
                 (3.0 * static_cast<double>(p2p_channels_) + 2.0) * kGranularity);
    }
    if (nvls_setups > 0) add_device(ctx, names_.nvls_setup, nvls_setups, (kNvlsCollChannels + 1) * kGranularity);
    if (nvls_ > 0) {
      if (nvls_groups > 0) add_device(ctx, names_.nvls, nvls_groups, nvls_);
    } else if (nvls_buffers > 0) {
      add_device(ctx, names_.nvls, 1, nvls_buffers);
    }
    if (collective > 0)
      add_device(ctx, names_.buffers, collective, static_cast<double>(channels_ * peers_) * per_connection);
    if (peers > 0) {
      const double receive = std::ceil(per_connection / kGranularity) * kGranularity;
      add_device(ctx, names_.p2p, peers, static_cast<double>(p2p_channels_) * (receive + kGranularity));
    }
  }

  // NCCL allocates its memory itself (cudaMalloc / cuMem), not through
  // PyTorch's allocator: device memory only, from the start.
  static void add_device(sdk::Context& ctx, sdk::Name name, int64_t count, double bytes_each) {
    support::add_bytes(ctx, {.name = name, .pool = sdk::Pool::device, .count = static_cast<uint32_t>(count),
                             .bytes = bytes_each});
  }

  // The bytes of the gradients the step produces on this GPU.
  // The GPU's gradients, as backward makes them or kept from step to step (gradient_buffer = "persistent":
  // PyTorch before 2.0, whose zero_grad() zeroes the .grad tensors in place instead of freeing them, PR #92731):
  // DDP's reducer copies each into its bucket either way. (Megatron-LM's persistent grad buffer is its own
  // buckets: its profile says buckets = "none".)
  static double gradient_bytes(const sdk::Context& ctx) {
    return support::sum_bytes(ctx, [](const sdk::ItemRef& item) {
      return item.role() == sdk::Role::gradients &&
             (item.lifetime() == sdk::Lifetime::gradient || item.lifetime() == sdk::Lifetime::persistent) &&
             support::on_gpu(item);
    });
  }

  // DeepSpeed ZeRO-3's flushes of its reduce bucket in backward (stage3.py, v0.7.0 to v0.19.4), placed on the
  // sharding plugin's record of the backward (support/backward_gradients.hpp): a gradient that would overflow a
  // non-empty bucket flushes it first (reduce_independent_p_g_buckets_and_remove_grads), and the flush hands
  // the bucket's gradients to reduce_scatter_coalesced (runtime/comm/coalesced_collectives.py), whose
  // torch.cat copies them, beside the parameters gathered at that module. A gradient larger than the bucket
  // is not copied into it (__add_grad_to_ipg_bucket) and is reduced alone, in place (a single tensor
  // divisible by the ranks is not copied): no copy. The coordinator releases each module once its backward
  // is done, so a flush late in backward meets a smaller gathered set than the backward's high point, where
  // the sharding plugin counts its gathered set: each flush adds what its copy and gathered set exceed that
  // with, at most its copy (a larger gathered set later in backward is the sharding plugin's to count).
  // Returned: the most over the flushes. The other tensors at a later flush (fewer checkpoints, the loss's
  // gone) are taken as at the high point: an upper bound. The epilogue's flush of what is left, after
  // backward, is left out: the activations are gone by then (DSX-mtb-medium-z3-8gpu and -small-z3, whose
  // gradients fit one bucket, measure no copy at the high point). Without a record (the sharding plugin
  // publishes none when its trace misses gradients: adapters, experts reduced over a group of their own) the
  // whole bucket's copy is taken to meet the high point, as the first flush of a model of many buckets does.
  double flush_excess(const sdk::Context& ctx, double bytes) {
    const double whole_bucket = reduce_bucket_ * bytes;
    const std::string_view text = ctx.attr_string(backward_gradients_attr_, "");
    if (text.empty()) return whole_bucket;
    if (!support::backward_gradients::decode(text, record_))
      ctx.fail(std::string(MEMPLAN_ATTR_BACKWARD_GRADIENTS) +
               " is not a record of the backward (support/backward_gradients.hpp: whole numbers separated by "
               "single spaces, the high point's gathered bytes then one elements-bytes pair per step): the "
               "sharding plugin that set it wrote it wrong");
    double bucket = 0, worst = 0;
    size_t steps_in_bucket = 0;
    for (const support::backward_gradients::Step& step : record_.steps) {
      if (bucket > 0 && bucket + step.elements > reduce_bucket_) {
        const bool oversized_alone = steps_in_bucket == 1 && bucket > reduce_bucket_;
        const double copy = oversized_alone ? 0.0 : bucket * bytes;
        worst = std::max(worst, std::min(copy, step.gathered_bytes + copy - record_.peak_gathered_bytes));
        bucket = 0;
        steps_in_bucket = 0;
      }
      bucket += step.elements;
      ++steps_in_bucket;
    }
    return worst;
  }

  // DeepSpeed ZeRO 1/2's copy of a reduce bucket's gradients at each flush (stage_1_and_2.py @ v0.19.4,
  // reduce_ipg_grads -> average_tensor): with reduce_copy "bucket" allreduce_bucket flattens the bucket's
  // gradients into one new tensor, "rank" one destination rank's share of them at a time (at most a
  // partition: 1 / data ranks of the trainable elements), "none" reduces views in place; a
  // communication_data_type wider or narrower than the gradients adds a cast of what is reduced (tensor.to,
  // alive beside the flattened copy from v0.12.4; before, the cast of the bucket's part is the only copy). A
  // bucket flushes when the next gradient would overflow it (reduce_independent_p_g_buckets_and_remove_grads),
  // so while the trainable elements exceed the bucket some flush copies about a bucket's worth (at most
  // reduce_bucket_size elements: the fill short of the gradient that overflows it is not known here, an upper
  // bound), and the epilogue (independent_gradient_partition_epilogue, after backward) flushes the rest. A
  // parameter larger than the bucket is reduced alone (extra_large_param_to_reduce), its slices flattened in
  // groups that pass reduce_bucket_size only by their last slice: up to the whole parameter, counted so.
  // Stage 2, and stage 1 with overlap_comm, flush from the gradient hooks while the layers' backward runs: the
  // copy is alive then (lifetime backward_in_layers), counted at backward's start with the first layer's
  // gradients and the buckets, as the first flush of a model of many buckets meets it; a model whose
  // trainable gradients fit one bucket flushes only in the epilogue, beside all the gradients
  // (backward_end). Stage 1 without overlap_comm reduces after backward (the engine's reduce_gradients):
  // every flush beside the gradients, backward_end. Under overlap_comm the copy is made on the reduction
  // stream (with get_accelerator().stream(self.reduction_stream)), whose pool keeps it.
  void add_allreduce_copy(sdk::Context& ctx, bool stage1, double grad_bytes) {
    // Only the width is known of the gradients' dtype: a cast between fp16 and bf16 is not counted (README).
    const double cast_bytes =
        communication_bytes_ && *communication_bytes_ != grad_bytes ? *communication_bytes_ : 0.0;
    if (reduce_copy_ == ReduceCopy::none && cast_bytes == 0) return;
    const Trainable trainable = trainable_tensors(ctx);
    double fill = std::min(trainable.elements, std::max(reduce_bucket_, trainable.largest));
    if (reduce_copy_ == ReduceCopy::rank)
      fill = std::min(fill, std::ceil(trainable.elements / static_cast<double>(layout_.data(ctx))));
    const double bytes = fill * ((reduce_copy_ == ReduceCopy::none ? 0.0 : grad_bytes) + cast_bytes);
    if (!(bytes > 0)) return;
    const bool hooks_flush = !stage1 || overlap_comm_;
    const sdk::Lifetime lifetime = hooks_flush && trainable.elements > reduce_bucket_
                                       ? sdk::Lifetime::backward_in_layers
                                       : sdk::Lifetime::backward_end;
    support::add_bytes(ctx, {.name = names_.allreduce_copy, .lifetime = lifetime, .bytes = bytes});
    if (overlap_comm_) ctx.items()[ctx.items().size() - 1].set_stream(MEMPLAN_STREAM_DEEPSPEED_REDUCTION);
  }

  // The trainable parameters on this GPU (stages 1 and 2 keep whole weights on every data rank): what the
  // rank's backward puts through the reduce buckets, and its largest single tensor
  // (support/parameter_shapes.hpp). An item whose tensors it cannot tell apart (adapters, a model given by its
  // parameter count alone) is taken to hold none larger than the bucket: as one tensor, a params-only model
  // would be one flush of every gradient.
  struct Trainable {
    double elements = 0, largest = 0;
  };
  Trainable trainable_tensors(const sdk::Context& ctx) const {
    Trainable trainable;
    const support::RankLayout ranks = support::rank_layout(ctx, layout_);
    for (const sdk::ItemRef item : ctx.items()) {
      if (item.role() != sdk::Role::weights || !item.trainable() || item.non_parameter() || item.count() == 0)
        continue;
      trainable.elements += item.elements() * static_cast<double>(item.count());
      const support::TensorShapes shapes = support::tensor_shapes(item, ctx.model(), ranks);
      if (shapes.known) trainable.largest = std::max({trainable.largest, shapes.matrix_size(), shapes.vector_size});
    }
    return trainable;
  }

  // The rank's gradient elements, wherever they are (the 'offload' strategy may have moved them to the host;
  // DeepSpeed still buckets them on the GPU); under ZeRO-3 a 1 / data-ranks share of the trainable ones.
  static double trainable_elements(const sdk::Context& ctx) {
    double elements = 0;
    for (const sdk::ItemRef item : ctx.items())
      if (item.role() == sdk::Role::gradients && item.lifetime() == sdk::Lifetime::gradient)
        elements += item.elements() * static_cast<double>(item.count());
    return elements;
  }

  static void add(sdk::Context& ctx, sdk::Name name, sdk::Lifetime lifetime, double bytes) {
    support::add_bytes_if_any(ctx, {.name = name, .lifetime = lifetime, .bytes = bytes});
  }

  // The names of the items apply() adds, interned once.
  struct Names {
    explicit Names(const sdk::Options& options)
        : communicators(options.intern("nccl.communicators")),
          nvls_setup(options.intern("nccl.nvls_setup")),
          nvls(options.intern("nccl.nvls")),
          buffers(options.intern("nccl.buffers")),
          p2p(options.intern("nccl.p2p")),
          ddp_buckets(options.intern("ddp.buckets")),
          reduce_bucket(options.intern("deepspeed.reduce_bucket")),
          allgather_bucket(options.intern("deepspeed.allgather_bucket")),
          reduce_scatter_copy(options.intern("deepspeed.reduce_scatter_copy")),
          allreduce_copy(options.intern("deepspeed.allreduce_copy")) {}
    sdk::Name communicators, nvls_setup, nvls, buffers, p2p, ddp_buckets, reduce_bucket, allgather_bucket,
        reduce_scatter_copy, allreduce_copy;
  };

  int64_t channels_;
  int64_t peers_;
  int64_t buffsize_;
  bool nccl_;
  bool view_;
  bool overlap_comm_;
  bool lazy_buckets_;
  bool one_rank_groups_;
  bool cumem_;
  int64_t p2p_channels_;
  std::optional<bool> nvls_option_;
  int64_t gpus_per_node_;
  support::LayoutReader layout_;
  sdk::Attribute nvlink_sharp_attr_;
  sdk::Attribute gradients_dtype_attr_;
  sdk::Attribute gradient_buckets_attr_;  // sharding.gradient_buckets, set by zero and fsdp
  sdk::Attribute backward_gradients_attr_;  // sharding.backward_gradients, set by zero at stage 3
  sdk::Attribute zero_stage_attr_;          // zero.stage, set by zero
  Names names_;
  support::backward_gradients::Record record_;  // read on each evaluation (its capacity kept)
  std::vector<Group> groups_;
  bool all_protocols_ = true;
  std::optional<int64_t> communicators_;
  Buckets buckets_ = Buckets::ddp;
  bool unsharded_none_ = false;  // unsharded_buckets = "none": auto without a sharding declaration keeps no buckets
  ReduceCopy reduce_copy_ = ReduceCopy::bucket;
  std::optional<double> communication_bytes_;  // communication_data_type's bytes; unset: the gradients' dtype
  double reduce_bucket_ = 5e8;
  double allgather_bucket_ = 0;
  double nvls_ = 0;
};

}  // namespace

MEMPLAN_PLUGIN(CommBuffers)
