// 'fsdp': PyTorch Fully Sharded Data Parallel (Zhao et al. 2023, "PyTorch
// FSDP: Experiences on Scaling Fully Sharded Data Parallel", arXiv
// 2304.11277). FULL_SHARD has ZeRO stage 3's semantics: weights, gradients,
// master weights and optimizer states are divided over the shard group, the
// data-parallel (x context-parallel) ranks. With shard_size smaller than that
// group it is HYBRID_SHARD: shards of shard_size ranks, replicated across the
// data-parallel ranks / shard_size groups. Experts under expert parallelism
// are sharded over shard group / ep ranks.
//
// Each FSDP unit (unit_layers transformer layers, as transformer_auto_wrap_policy
// wraps them) is all-gathered to full size before its forward and its
// backward. The root unit (the weights outside the layers: embeddings, final
// norm, LM head) is gathered at the start of forward and, as FSDP does for
// the root, kept until the end of backward. With limit_all_gathers (default
// True) the rate limiter keeps at most two units' gathered parameters alive:
// the one computing and the next one being gathered. Working sets:
//   forward:  root + min(2, units) units while the layers' forward runs (the
//             units: lifetime forward_in_layers); at the forward's end, where
//             the loss runs, the root (and a separate LM head's unit) alone
//   backward: root + min(1 + prefetch, units) units, prefetch 1 for
//             backward_prefetch = "pre" (BACKWARD_PRE, FSDP's default), else 0
//             + the unsharded gradients of the unit being reduced and of the
//             root (reduce-scattered when the root's backward ends)
//             + with api = "fsdp2", the previous unit's reduce-scatter input,
//             kept until the next unit's post-backward (lifetime
//             backward_layers)
//           with api = "fsdp1" (and no separate_embeddings) the units' parts
//           apart: FSDP1 reshards every unit but the root after its forward and
//           gathers it again in its pre-backward hook, so the units and a
//           unit's gradient live only while the layers' backward runs (lifetime
//           backward_in_layers), and at the loss's backward the root's hook
//           has prefetched the last unit (BACKWARD_PRE; lifetime backward_start)
// in the weights' own dtypes (each item's: under 'quantized' the 4-bit linear
// layers and the 16-bit embeddings and head; or MixedPrecision's param_dtype
// when given; Float8 all-gather prices the linear layers at 1 byte) and, for
// the gradients, FSDP1's reduce_dtype (its cast copy) or FSDP2's param_dtype
// (autograd's own; the reduce-scatter input in reduce_dtype), as transient
// items.
//
// With CPU offload of the parameters, every gather starts with a GPU copy of
// the unit's CPU shard, made on the pre-unshard stream (FSDP1
// FlatParamHandle.pre_unshard -> flat_param_to(device), or the low-precision
// _mp_shard under MixedPrecision; torch/distributed/fsdp/_flat_param.py,
// _runtime_utils._unshard) and handed to the unshard stream with
// record_stream. The caching allocator reuses a block only on the stream that
// allocated it (c10/cuda/CUDACachingAllocator.cpp), so these copies fill a
// pool of their own: the copies of the gathers in flight, the root's shard and
// one unit's (limit_all_gathers lets two gathers run at once). FSDP declares
// that size (sharding.offload_staging); 'offload' keeps it reserved.
//
// Communication (ABI 1.2 work records; ring volumes): every micro-batch
// all-gathers the stage's weights in the dtype they are gathered in before
// forward, and again before backward when they were resharded after forward;
// it reduce-scatters the gradients after each micro-batch's backward (FSDP
// reduces every micro-batch unless no_sync is used), so FSDP rewrites the
// step's gradient all-reduce (MEMPLAN_WORK_GRADIENT_REDUCTION) into a
// reduce-scatter per micro-batch. With one micro-batch that is ZeRO-3's 3 x
// the parameters' volume against plain data parallelism's 2 x (Rajbhandari et
// al. 2020, section 7.2.2). Group: the shard group, stride tensor-parallel
// ranks. No overlap is assumed (a bound from above).
//
// api = "fsdp1" (FullyShardedDataParallel, the default) or "fsdp2"
// (fully_shard) says whose streams hold these buffers. FSDP1 allocates the
// padded unsharded flat parameters inside its unshard stream (FlatParamHandle
// .unshard under _runtime_utils._unshard's `with stream(unshard_stream)`) and
// frees them with record_stream on the compute stream, so their blocks go back
// to the unshard stream's pool; it allocates each reduce-scattered sharded
// gradient (new_sharded_grad, kept as _saved_grad_shard and then .grad) inside
// its post-backward stream (_post_backward_hook) (torch/distributed/fsdp/
// _runtime_utils.py, _flat_param.py @ 3ade90a6). FSDP1 therefore tags its
// gathered-parameter buffers with stream MEMPLAN_STREAM_FSDP_UNSHARD and the
// rank's GPU gradients with MEMPLAN_STREAM_FSDP_POST_BACKWARD; the 'allocator'
// plugin keeps each pool's high point reserved. "fsdp2" tags nothing (its
// streams are not modelled).
//
// separate_embeddings = true: the token (and position) embeddings and the LM
// head are FSDP units of their own, gathered only while they run, as torchtune's
// custom_sharded_layers ['tok_embeddings', 'output'] shards them
// (recipes/full_finetune_distributed.py @ 30b8519e8: fully_shard on every
// module whose name is listed, before the root; training/_distributed.py
// shard_model). The root then holds only the rest (the final norm), and each
// of those modules counts as a unit beside the layers' units: the working sets
// take the larger of the largest layer unit and the largest such module, both
// in forward and backward (limit_all_gathers' two units; FSDP2's implicit
// prefetch of one), and the unsharded gradients the larger trainable one.
//
// reshard_after_forward = false (FSDP2's fully_shard option, FSDP1's
// SHARD_GRAD_OP; torchtitan's default under pipeline parallelism,
// torchtitan v0.2.2 models/llama3/infra/parallelize.py) keeps every unit
// gathered from its forward to its backward: the whole unsharded model lives
// like an activation, and backward gathers nothing again.
//
// gradient_sync = "last-micro-batch" (FSDP2's set_requires_gradient_sync(False)
// on every micro-batch but the last): FSDPParamGroup.post_backward returns
// without a reduce-scatter and FSDPParam.to_accumulated_grad_if_needed moves
// each unsharded gradient into unsharded_accumulated_grad, upcast to
// reduce_dtype, which later micro-batches add to (accumulate_unsharded_grad_
// if_needed) until the last one reduce-scatters it (FSDPParamGroup.post_backward,
// FSDPParam in torch/distributed/_composable/fsdp/, torch 2.4 to 2.5, moved to
// torch/distributed/fsdp/_fully_shard/ in 2.6; read in stored copies of those
// trees, not at a pinned commit). With more
// than one micro-batch the whole stage's trainable weights are held unsharded
// in reduce_dtype through backward: fsdp.accumulated_gradients.
// torch.distributed.pipelining does this for every FSDP2 stage
// (stage.py, _PipelineStageBase.backward_maybe_with_nosync /
// _configure_data_parallel_mode: set_requires_gradient_sync(last_backward)),
// so "auto" means "last-micro-batch" for api = "fsdp2" under pipeline
// parallelism and "every-micro-batch" otherwise.
// FSDP1's no_sync() (gradient_sync = "last-micro-batch" with api = "fsdp1";
// Lightning Fabric's no_backward_sync, accelerate's accumulate without
// sync_each_batch) does the same: its docstring, "FSDP will accumulate the
// full model gradients (instead of gradient shards) until the eventual sync"
// (torch/distributed/fsdp/fully_sharded_data_parallel.py, no_sync, torch 2.x):
// each flat parameter's unsharded .grad stays on the GPU and later backwards
// add to it.
//
// frozen_gradients = true (FSDP1 with use_orig_params=True and a unit that
// mixes frozen and trainable parameters, as LoRA inside a wrapped block): the
// unit's flat parameter requires grad, and autograd produces its gradient
// over the whole flat parameter, frozen parameters included; the
// use_orig_params docstring (same file, torch 2.1 to 2.4) says so: mixing
// frozen and non-frozen parameters makes "the gradient memory usage ...
// equivalent to not freezing those parameters". Each unit with a trainable
// parameter then counts all its parameters in the unsharded gradients (the
// unit being reduced, and the accumulated ones above); a unit without one
// (the root of a LoRA model: embeddings, final norm, head) has no gradient.
// Not counted: the reduce-scattered shard of those gradients between the
// last micro-batch's backward and the next forward.
//
// reentrant_checkpoint_around_units = true (Hugging Face gradient_checkpointing
// on a model whose decoder layers accelerate wrapped as FSDP1 units: the model
// calls self._gradient_checkpointing_func(decoder_layer.__call__, ...) with the
// unit itself, as transformers did before its decoder layers checkpoint inside
// their own __call__ (GradientCheckpointingLayer; the version not
// established here), use_reentrant True): FSDP1 units
// whose flat parameter needs no gradient (LoRA's leaves wrapped as units of
// their own, peft's fsdp_auto_wrap_policy, or use_orig_params=False) register
// the reshard-only hook on their forward inputs (torch/distributed/fsdp/
// _runtime_utils.py, _register_post_backward_reshard_only_hook, torch 2.1 to
// 2.x since PR #101982; the stored copy @ 3ade90a6): register_multi_grad_hook
// (torch/autograd/graph.py) keeps, in the hook's closure, each input's
// grad_fn or, for a leaf, its AccumulateGrad node, which holds the tensor. The
// original forward runs under no_grad (CheckpointFunction.forward), so the
// hook is registered in backward's recompute, whose inputs are detached leaves
// with requires_grad (checkpoint's detach_variable) that the nested backward
// gives a .grad (CheckpointFunction.backward returns inp.grad). The handle is
// kept in flat_param._post_backward_hook_state until the final callback
// (_finalize_params) removes it when the whole backward ends: every layer's
// input and its gradient stay alive to backward's end. The plugin declares it
// (attribute fsdp.kept_layer_inputs, the layers of the stage); the activation
// model sizes it (plugins/activations/megatron/plugin.cpp,
// activations.kept_layer_inputs). Checkpointing applied inside the units
// (apply_activation_checkpointing after wrapping, as fsdp_qlora does) hooks the
// original forward's non-leaf inputs instead: nothing is kept.
#include <memplan/dtypes.hpp>
#include <memplan/sdk.hpp>
#include <memplan/support/layout.hpp>
#include <memplan/support/sharding.hpp>

#include "setup_cache.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

namespace {

namespace sharding = memplan::support::sharding;
using memplan::sdk::Role;

constexpr std::array<memplan_option_spec, 15> kOptions{{
    {"shard_size", MEMPLAN_OPTION_INT,
     "ranks in one shard group; fewer than the data-parallel ranks is HYBRID_SHARD", "all data-parallel ranks (FULL_SHARD)",
     nullptr},
    {"unit_layers", MEMPLAN_OPTION_INT, "transformer layers per FSDP unit (wrapped module)", "1", nullptr},
    {"backward_prefetch", MEMPLAN_OPTION_STRING,
     "\"pre\" (BACKWARD_PRE), \"post\" (BACKWARD_POST) or \"none\"", "\"pre\"", nullptr},
    {"param_dtype", MEMPLAN_OPTION_STRING,
     "MixedPrecision(Policy) param_dtype: the dtype units are gathered in", "each weight's own dtype", nullptr},
    {"reduce_dtype", MEMPLAN_OPTION_STRING,
     "MixedPrecision(Policy) reduce_dtype: FSDP1's unsharded gradients' dtype (its cast copy before the "
     "reduce-scatter), FSDP2's reduce-scatter input's (its autograd gradients stay in param_dtype)",
     "the gradients' dtype (FSDP2: param_dtype when given)", nullptr},
    {"reshard_after_forward", MEMPLAN_OPTION_BOOL,
     "free each unit's gathered weights after its forward (false: keep them until its backward)", "true", nullptr},
    {"communication_overlap", MEMPLAN_OPTION_DOUBLE,
     "the fraction of the all-gathers and reduce-scatters that may hide behind the compute of their pass "
     "(prefetching), in [0, 1]",
     "1: as far as the compute lasts", nullptr},
    {"float8_all_gather", MEMPLAN_OPTION_BOOL,
     "gather the linear layers' weights in fp8 (torchao Float8Linear with enable_fsdp_float8_all_gather)", "false",
     nullptr},
    {"api", MEMPLAN_OPTION_STRING,
     "\"fsdp1\" (FullyShardedDataParallel: gathered parameters in the unshard stream's allocator pool, sharded "
     "gradients in the post-backward stream's) or \"fsdp2\" (fully_shard: its streams not modelled)",
     "\"fsdp1\"", nullptr},
    {"setup", MEMPLAN_OPTION_STRING,
     "what wrapping leaves cached before the first step: \"unit\" (FSDP1 brings each unit's parameters to the GPU, "
     "flattens and shards them in turn; the blocks stay cached) or \"none\" (the model is built sharded: FSDP2 "
     "on the meta device)",
     "\"unit\" with api = \"fsdp1\", \"none\" with \"fsdp2\"", nullptr},
    {"sync_module_states", MEMPLAN_OPTION_BOOL,
     "rank 0 broadcasts each unit's parameters while wrapping (FSDP1's sync_module_states, accelerate's "
     "fsdp_sync_module_states / cpu_ram_efficient_loading): buckets of up to 250 MiB copied",
     "false", nullptr},
    {"gradient_sync", MEMPLAN_OPTION_STRING,
     "when gradients are reduce-scattered: \"every-micro-batch\", \"last-micro-batch\" (FSDP2's "
     "set_requires_gradient_sync(False) on the others: the stage's unsharded gradients accumulate in reduce_dtype "
     "through backward) or \"auto\" (last-micro-batch for api \"fsdp2\" under pipeline parallelism, as "
     "torch.distributed.pipelining does)",
     "\"auto\"", nullptr},
    {"separate_embeddings", MEMPLAN_OPTION_BOOL,
     "the embeddings and the LM head are FSDP units of their own, gathered only while used (torchtune's "
     "custom_sharded_layers = ['tok_embeddings', 'output']), not part of the root kept gathered through backward",
     "false", nullptr},
    {"frozen_gradients", MEMPLAN_OPTION_BOOL,
     "FSDP1 with use_orig_params=True: a unit holding any trainable parameter gets a gradient over its whole flat "
     "parameter, frozen ones included (the use_orig_params docstring: gradient memory 'equivalent to not freezing "
     "those parameters'); the unsharded gradients count them",
     "false", nullptr},
    {"reentrant_checkpoint_around_units", MEMPLAN_OPTION_BOOL,
     "FSDP1: reentrant checkpointing wraps each unit's call from outside (Hugging Face gradient_checkpointing on "
     "FSDP-wrapped decoder layers): units whose flat parameter needs no gradient (LoRA's leaves wrapped apart) hook "
     "their recomputed inputs, which keeps each layer's input and its gradient until backward ends",
     "false", nullptr},
}};

class FsdpStrategy {
 public:
  static constexpr memplan::sdk::PluginInfo info{
      "fsdp", "1.13.0",
      "PyTorch FSDP: FULL_SHARD or HYBRID_SHARD (ZeRO-3 semantics) with the gathered units in flight",
      memplan::sdk::Kind::strategy, memplan::sdk::Phase::sharding};
  static std::span<const memplan_option_spec> options() { return kOptions; }

  explicit FsdpStrategy(memplan::sdk::Options& options)
      : unit_layers_(options.positive_integer("unit_layers", 1)),
        group_attributes_(options),
        attributes_(options),
        names_(options) {
    if (options.integer("shard_size")) shard_size_ = options.positive_integer("shard_size", 1);
    const std::string prefetch = options.string("backward_prefetch").value_or("pre");
    if (prefetch != "pre" && prefetch != "post" && prefetch != "none")
      options.fail("backward_prefetch", "must be \"pre\", \"post\" or \"none\", not \"" + prefetch + "\"");
    backward_prefetch_ = prefetch == "pre" ? 1 : 0;
    param_bytes_ = dtype_option(options, "param_dtype");
    reduce_bytes_ = dtype_option(options, "reduce_dtype");
    reshard_after_forward_ = options.boolean("reshard_after_forward").value_or(true);
    float8_all_gather_ = options.boolean("float8_all_gather").value_or(false);
    overlap_ = options.number("communication_overlap").value_or(1.0);
    if (!std::isfinite(overlap_) || overlap_ < 0 || overlap_ > 1)
      options.fail("communication_overlap", "must be a fraction in [0, 1]");
    const std::string api = options.string("api").value_or("fsdp1");
    if (api != "fsdp1" && api != "fsdp2")
      options.fail("api", "must be \"fsdp1\" (FullyShardedDataParallel) or \"fsdp2\" (fully_shard), not \"" + api +
                              "\"");
    fsdp1_ = api == "fsdp1";
    const std::string setup = options.string("setup").value_or(fsdp1_ ? "unit" : "none");
    if (setup != "unit" && setup != "none")
      options.fail("setup", "must be \"unit\" (FSDP1 wraps unit by unit) or \"none\", not \"" + setup + "\"");
    setup_units_ = setup == "unit";
    if (setup_units_ && !fsdp1_)
      options.fail("setup", "\"unit\" is FSDP1's wrapping (FullyShardedDataParallel); fully_shard (api = \"fsdp2\") "
                            "shards modules built on the meta device: remove it or set api = \"fsdp1\"");
    sync_module_states_ = options.boolean("sync_module_states").value_or(false);
    if (sync_module_states_ && !fsdp1_)
      options.fail("sync_module_states", "is FullyShardedDataParallel's (api = \"fsdp1\"); with api = \"fsdp2\" "
                                         "remove it");
    if (sync_module_states_ && !setup_units_)
      options.fail("sync_module_states", "broadcasts while FSDP1 wraps unit by unit; it needs setup = \"unit\"");
    const std::string sync = options.string("gradient_sync").value_or("auto");
    if (sync != "auto" && sync != "every-micro-batch" && sync != "last-micro-batch")
      options.fail("gradient_sync",
                   "must be \"auto\", \"every-micro-batch\" or \"last-micro-batch\", not \"" + sync + "\"");
    gradient_sync_ = sync == "auto" ? GradientSync::automatic
                     : sync == "last-micro-batch" ? GradientSync::last_micro_batch
                                                  : GradientSync::every_micro_batch;
    separate_embeddings_ = options.boolean("separate_embeddings").value_or(false);
    frozen_gradients_ = options.boolean("frozen_gradients").value_or(false);
    checkpoint_around_units_ = options.boolean("reentrant_checkpoint_around_units").value_or(false);
    if (checkpoint_around_units_ && !fsdp1_)
      options.fail("reentrant_checkpoint_around_units",
                   "is FullyShardedDataParallel's reshard-only hook (api = \"fsdp1\"); with api = \"fsdp2\" remove it");
    if (checkpoint_around_units_ && unit_layers_ > 1)
      options.fail("reentrant_checkpoint_around_units",
                   "is modelled for one decoder layer per unit (unit_layers = 1): with more, the model checkpoints each "
                   "layer inside its unit, whose inputs keep nothing; remove it or set unit_layers = 1");
    if (frozen_gradients_ && !fsdp1_)
      options.fail("frozen_gradients", "is FullyShardedDataParallel's flat parameters (api = \"fsdp1\"); "
                                       "fully_shard (api = \"fsdp2\") keeps one gradient per parameter: remove it");
    // The mixed units' whole gradients are counted layer by layer, with the
    // root taken whole before any embedding leaves it: one layer per unit and
    // the root's weights in one unit is what that counts right.
    if (frozen_gradients_ && separate_embeddings_)
      options.fail("frozen_gradients", "is not modelled with separate_embeddings (the root's flat parameter would "
                                       "still count the separated embeddings' gradient): remove one of them");
    if (frozen_gradients_ && unit_layers_ > 1)
      options.fail("frozen_gradients", "is modelled for one layer per unit (unit_layers = 1): with more, a unit "
                                       "whose adapters sit on some of its layers only would be undercounted");
    if (separate_embeddings_ && setup_units_)
      options.fail("separate_embeddings",
                   "is not modelled with FSDP1's unit-by-unit wrapping (setup = \"unit\", the default with api = "
                   "\"fsdp1\"): its set-up takes the weights outside the layers as one root unit; set setup = "
                   "\"none\" to leave the wrapping out, or api = \"fsdp2\" (torchtune's custom_sharded_layers)");
    if (!options.model().has_architecture)
      options.fail("needs the model's layers to size its units, but the scenario gives only params; give a preset "
                   "or the architecture in [model], or use [[strategy]] use = \"zero\" with stage = 3");
  }

  void apply(memplan::sdk::Context& ctx) {
    const memplan::support::Ranks groups = group_attributes_.ranks(ctx);
    if (!groups.data_declared)
      ctx.fail("shards over the data-parallel group, but no strategy declares its size; add [[strategy]] use = "
               "\"data-parallel\" with its size (size = 1 on a single GPU)");
    const int64_t replicas = groups.dense_replicas();
    const int64_t shard = shard_size_ > 0 ? shard_size_ : replicas;
    if (shard > replicas || replicas % shard != 0)
      throw memplan::sdk::PluginError(
          "shard_size", std::to_string(shard) + " does not divide the " + std::to_string(replicas) +
                            " data-parallel ranks" + (groups.context > 1 ? " (times context-parallel ranks)" : "") +
                            "; HYBRID_SHARD replicates whole shard groups, so choose a divisor");
    if (groups.expert_tensor != groups.tensor)
      throw memplan::sdk::PluginError(
          "shard_size", "the experts have an expert tensor size of their own (expert-parallel tensor_size " +
                            std::to_string(groups.expert_tensor) + ", tensor " + std::to_string(groups.tensor) +
                            "), Megatron-Core's MoE parallel folding, which fsdp does not model (it shards the experts "
                            "over data x context / expert); remove tensor_size or use zero");
    if (shard % groups.expert != 0)
      throw memplan::sdk::PluginError(
          "shard_size", "the experts are sharded over the shard group's " + std::to_string(shard) + " ranks / " +
                            std::to_string(groups.expert) +
                            " expert-parallel ranks, which is not a whole number; choose a multiple of the "
                            "expert-parallel size");
    ctx.set_attr(attributes_.gathers, 1);
    ctx.set_attr(attributes_.gradient_buckets, "none");
    // MixedPrecision(Policy)'s param_dtype: the unsharded parameters autograd computes with, and so the
    // dtype of the gradients it hands back before FSDP reduces them.
    if (param_bytes_ > 0) ctx.set_attr(attributes_.gathered_weight_bytes, param_bytes_);
    add_working_set(ctx, static_cast<double>(shard));
    if (setup_units_ && ctx.training()) add_setup(ctx, static_cast<double>(shard));
    add_accumulated_gradients(ctx, groups.pipeline);
    const double dense = static_cast<double>(shard);
    const double expert = dense / static_cast<double>(groups.expert);
    sharding::shard(ctx, dense, expert, [](memplan::sdk::ItemRef item) {
      const Role role = item.role();
      return role == Role::weights || role == Role::gradients || role == Role::master_weights ||
             role == Role::optimizer_states;
    });
    // Each rank steps its shard of the flat parameters.
    sharding::partition_optimizer_step(ctx, names_.optimizer_step, names_.optimizer_step_experts, dense, expert);
    ctx.set_attr(attributes_.shard_group, shard);
    if (checkpoint_around_units_) declare_kept_layer_inputs(ctx);
    if (fsdp1_) assign_fsdp1_streams(ctx);
    add_communication(ctx, shard, static_cast<int64_t>(groups.tensor));
    if (shard < replicas) reduce_across_replicas(ctx, replicas / shard);
  }

  // HYBRID_SHARD reduces gradients in two steps (torch.distributed.fsdp
  // _runtime_utils.py, _reduce_grad: a reduce-scatter over the shard group,
  // then an all-reduce of the shard over the replicate group): each
  // reduce-scatter record narrows to its shard group, and an all-reduce of its
  // 1/shard over the `copies` replicas joins it, the groups laid out with the
  // shard group innermost (its ranks contiguous in the record's group).
  void reduce_across_replicas(memplan::sdk::Context& ctx, int64_t copies) const {
    std::array<memplan_work, 2> joined{};
    size_t count = 0;
    ctx.for_each_work([&](memplan_work& work) {
      if (work.name != names_.gradient_reduction.text || work.ranks % copies != 0 || count == joined.size()) return;
      work.ranks = static_cast<int32_t>(work.ranks / copies);
      joined[count++] = work;
    });
    for (size_t i = 0; i < count; ++i) {
      const memplan_work& shard = joined[i];
      ctx.add_work(memplan::sdk::Work{.name = names_.replica_reduction,
                                      .kind = memplan::sdk::WorkKind::collective,
                                      .pass = static_cast<memplan::sdk::Pass>(shard.pass),
                                      .amount = shard.amount / static_cast<double>(shard.ranks),
                                      .efficiency = shard.efficiency,
                                      .collective = memplan::sdk::Collective::all_reduce,
                                      .ranks = copies,
                                      .stride = shard.stride * shard.ranks,
                                      .overlap = shard.overlap});
    }
  }

  // The gathers of each micro-batch, and the gradients' reduce-scatter in place of the all-reduce.
  void add_communication(memplan::sdk::Context& ctx, double shard, int64_t stride) {
    sharding::fully_sharded_communication(ctx, names_.gather, names_.gradient_reduction, static_cast<int64_t>(shard),
                                          stride, stage_weight_bytes_, reshard_after_forward_, overlap_);
  }

  // reentrant_checkpoint_around_units: the layers whose unit's flat parameter
  // needs no gradient (no trainable weight but adapters wrapped apart; with
  // frozen_gradients a unit holding a trainable adapter needs one), declared
  // for the activation model (the header's note).
  void declare_kept_layer_inputs(memplan::sdk::Context& ctx) {
    const int64_t layers = ctx.model().layers;
    if (layers <= 0) return;
    // Scratch kept between evaluations (no allocation once warm).
    std::vector<bool>& needs_gradient = layer_needs_gradient_;
    std::vector<bool>& held = layer_held_;
    needs_gradient.assign(static_cast<size_t>(layers), false);
    held.assign(static_cast<size_t>(layers), false);
    for (memplan::sdk::ItemRef item : ctx.items()) {
      if (item.role() != Role::weights || item.layer() < 0) continue;
      const bool trains =
          item.trainable() && (item.param_class() != memplan::sdk::ParamClass::adapter || frozen_gradients_);
      for (int64_t l = item.layer(); l < static_cast<int64_t>(item.layer()) + item.count() && l < layers; ++l) {
        held[static_cast<size_t>(l)] = true;
        if (trains) needs_gradient[static_cast<size_t>(l)] = true;
      }
    }
    int64_t frozen = 0;
    for (int64_t l = 0; l < layers; ++l)
      if (held[static_cast<size_t>(l)] && !needs_gradient[static_cast<size_t>(l)]) ++frozen;
    ctx.set_attr(attributes_.kept_layer_inputs, frozen);
  }

 private:
  // The gradient elements of a unit (or the root) with `trainable` of its
  // `elements` trainable: with frozen_gradients, the whole flat parameter
  // once any of it trains (see the comment at the top).
  double gradient_elements(double trainable, double elements) const {
    return frozen_gradients_ && trainable > 0 ? elements : trainable;
  }

  // Before sharding: the weights on the rank are still whole.
  static double dtype_option(memplan::sdk::Options& options, const char* key) {
    const std::optional<std::string> name = options.string(key);
    if (!name) return 0;
    const std::optional<double> bytes = memplan::sdk::dtype_bytes(*name);
    if (!bytes) options.fail(key, "is \"" + *name + "\", not a known dtype; use " + memplan::sdk::dtype_names());
    return *bytes;
  }

  // What wrapping leaves on the GPU (setup_cache.hpp): the high point's
  // transient allocations, and the rest of the blocks it leaves cached, both
  // of lifetime setup on the compute stream (the 'allocator' plugin keeps
  // them as the floor of that stream's pool). The weights as stored, before
  // sharding.
  void add_setup(memplan::sdk::Context& ctx, double shard) {
    // The gathered layout is the stored one unless the units gather in another dtype.
    const bool gathered_as_stored = param_bytes_ == 0 && !float8_all_gather_;
    if (!gathered_as_stored) sharding::weight_layout(ctx, stored_);
    const sharding::WeightLayout& stored = gathered_as_stored ? weights_ : stored_;
    const double unit = sharding::largest_window(stored.per_layer_bytes, unit_layers_);
    root_tensors_.clear();
    for (memplan::sdk::ItemRef item : ctx.items())
      if (item.role() == Role::weights && !item.non_parameter() && item.layer() < 0 &&
          item.device() == memplan::sdk::Device::gpu)
        root_tensors_.push_back(item.bytes());
    // A layer's tensors are many, each below a bucket: the two buckets in flight hold the unit, up to 2 x 250 MiB.
    const double unit_copies = std::min(unit, 2 * memplan::plugins::fsdp_setup::kBroadcastBucket);
    const memplan::plugins::fsdp_setup::SetupMemory memory =
        memplan::plugins::fsdp_setup::setup_memory(unit, unit_copies, root_tensors_, shard, sync_module_states_);
    using memplan::sdk::Lifetime;
    sharding::add_buffer(ctx, names_.setup_transient, Lifetime::setup, memory.transient, 1);
    // The blocks beyond the high point's; none when the high point's
    // allocations were all carved from blocks counted there (a stage whose
    // root is only the final norm).
    sharding::add_buffer(ctx, names_.setup_cache, Lifetime::setup, std::max(0.0, memory.cached - memory.transient), 1,
                         memplan::sdk::Pool::reserve);
  }

  // FSDP1's side streams (see the comment at the top): the gathered flat
  // parameters in the unshard stream's pool, the sharded gradients (the
  // rank's GPU gradients, all reduce-scattered by FSDP) in the post-backward
  // stream's. The unsharded gradients autograd computes stay on the compute stream.
  void assign_fsdp1_streams(memplan::sdk::Context& ctx) const {
    for (memplan::sdk::ItemRef item : ctx.items()) {
      if (item.device() != memplan::sdk::Device::gpu) continue;
      if (item.named(names_.gathered_forward) || item.named(names_.gathered_forward_units) ||
          item.named(names_.gathered_backward) ||
          item.named(names_.gathered_backward_units) || item.named(names_.gathered_at_loss) ||
          item.named(names_.unsharded_parameters))
        item.set_stream(MEMPLAN_STREAM_FSDP_UNSHARD);
      else if (item.role() == Role::gradients && item.lifetime() == memplan::sdk::Lifetime::gradient)
        item.set_stream(MEMPLAN_STREAM_FSDP_POST_BACKWARD);
    }
  }

  // gradient_sync "last-micro-batch" (see the comment at the top): with more
  // than one micro-batch, every trainable weight of the stage keeps an
  // unsharded gradient in reduce_dtype from the first micro-batch's backward
  // to the last one's reduce-scatter.
  void add_accumulated_gradients(memplan::sdk::Context& ctx, int64_t pipeline) const {
    const bool last = gradient_sync_ == GradientSync::last_micro_batch ||
                      (gradient_sync_ == GradientSync::automatic && !fsdp1_ && pipeline > 1);
    if (!last || !ctx.training() || ctx.workload().grad_accum <= 1) return;
    double trainable = gradient_elements(weights_.trainable_outside, weights_.outside_layers);
    for (size_t i = 0; i < weights_.trainable_layer.size(); ++i)
      trainable += gradient_elements(weights_.trainable_layer[i], weights_.per_layer[i]);
    const double bytes = reduce_bytes_ > 0 ? reduce_bytes_
                                           : ctx.required_attr_double(attributes_.gradients_dtype,
                                                                      MEMPLAN_ATTR_DTYPE_GRADIENTS);
    // Alive from the first micro-batch's backward to the last one's, so
    // through the forwards of micro-batches 2 to M as well.
    sharding::add_buffer(ctx, names_.accumulated_gradients, memplan::sdk::Lifetime::transient_backward, trainable,
                         bytes);
    sharding::add_buffer(ctx, names_.accumulated_gradients, memplan::sdk::Lifetime::transient_forward, trainable,
                         bytes);
  }

  void add_working_set(memplan::sdk::Context& ctx, double shard) {
    sharding::weight_layout(ctx, weights_, param_bytes_, float8_all_gather_ ? 1.0 : 0.0);
    const sharding::WeightLayout& weights = weights_;
    const double unit = sharding::largest_window(weights.per_layer, unit_layers_);
    const double unit_bytes = sharding::largest_window(weights.per_layer_bytes, unit_layers_);
    unit_gradients_.resize(weights.trainable_layer.size());
    for (size_t i = 0; i < unit_gradients_.size(); ++i)
      unit_gradients_[i] = gradient_elements(weights.trainable_layer[i], weights.per_layer[i]);
    const double trainable_unit = sharding::largest_window(unit_gradients_, unit_layers_);
    double units = std::ceil(static_cast<double>(weights.per_layer.size()) / static_cast<double>(unit_layers_));
    stage_weight_bytes_ = weights.outside_bytes;
    for (double bytes : weights.per_layer_bytes) stage_weight_bytes_ += bytes;
    // The root: the weights outside the layers, less the embeddings and head when they are units of their own.
    Root root{weights.outside_layers, weights.outside_bytes,
              gradient_elements(weights.trainable_outside, weights.outside_layers)};
    double gathered_unit = unit_bytes;
    double gradient_unit = trainable_unit;
    double head_unit = 0;  // a unit gathered at the forward's end: the LM head's, when it is a unit of its own
    if (separate_embeddings_) {
      const Root own = separate_units(ctx, root, param_bytes_);
      if (own.elements > 0) {
        gathered_unit = std::max(unit_bytes, own.bytes);
        gradient_unit = std::max(trainable_unit, gradient_elements(own.trainable, own.elements));
        units += own.count;
        head_unit = gathered_unit;
      }
    }
    using memplan::sdk::Lifetime;
    if (reshard_after_forward_) {
      // Each layer unit is resharded when its forward ends (FSDP1 _post_forward_reshard, FSDP2's post-forward
      // hook) and its block freed then, so the two units in flight exist only while the layers' forward runs
      // (lifetime forward_in_layers), not at the forward's end, where the LM head and the loss run beside the
      // root (never resharded after forward) and, when it is a unit of its own, the head's unit.
      const double layer_units = std::min(2.0, units) * gathered_unit;
      const double backward_units = std::min(1.0 + backward_prefetch_, units) * gathered_unit;
      sharding::add_buffer(ctx, names_.gathered_forward, Lifetime::transient_forward, root.bytes + head_unit, 1);
      sharding::add_buffer(ctx, names_.gathered_forward_units, Lifetime::forward_in_layers,
                           std::max(0.0, layer_units - head_unit), 1);
      if (split_fsdp1_units()) {
        // FSDP1 reshards every unit but the root after its forward (_runtime_utils.py _post_forward: the root's
        // parameters stay unsharded for backward) and gathers a unit again in its pre-backward hook, with the
        // next one prefetched: while the layers' backward runs. The root's pre-backward hook, on the loss,
        // prefetches the last unit (BACKWARD_PRE): at the loss's backward the root and that unit are gathered;
        // at the embedding's backward, the root alone.
        sharding::add_buffer(ctx, names_.gathered_backward, Lifetime::transient_backward, root.bytes, 1);
        sharding::add_buffer(ctx, names_.gathered_backward_units, Lifetime::backward_in_layers, backward_units, 1);
        sharding::add_buffer(ctx, names_.gathered_at_loss, Lifetime::backward_start,
                             std::min(backward_prefetch_, units) * gathered_unit, 1);
      } else {
        sharding::add_buffer(ctx, names_.gathered_backward, Lifetime::transient_backward, root.bytes + backward_units,
                             1);
      }
    } else {
      // Every unit stays gathered from its forward to its backward (activation lifetime), plus the next
      // unit in flight during forward.
      double all_layers = 0;
      for (double bytes : weights.per_layer_bytes) all_layers += bytes;
      sharding::add_buffer(ctx, names_.unsharded_parameters, Lifetime::activation,
                           weights.outside_bytes + all_layers, 1);
      // The next unit gathered while one computes: by the forward's end every unit is gathered (above).
      if (units > 1)
        sharding::add_buffer(ctx, names_.gathered_forward_units, Lifetime::forward_in_layers, unit_bytes, 1);
    }
    if (ctx.training()) {
      const double gradient_bytes = ctx.required_attr_double(attributes_.gradients_dtype, MEMPLAN_ATTR_DTYPE_GRADIENTS);
      // FSDP1 casts the flat gradient to reduce_dtype before its reduce-scatter (that copy is the unit's
      // working gradient); fully_shard's autograd gradients stay in the gathered parameters' dtype and only the
      // reduce-scatter input is in reduce_dtype, which defaults to the gradients' own (foreach_reduce:
      // reduce_dtype = reduce_dtype or grad_dtype).
      const double autograd_bytes = param_bytes_ > 0 ? param_bytes_ : gradient_bytes;
      const double reduce_bytes = reduce_bytes_ > 0 ? reduce_bytes_ : (fsdp1_ ? gradient_bytes : autograd_bytes);
      const double unsharded_bytes = fsdp1_ ? reduce_bytes : autograd_bytes;
      if (split_fsdp1_units()) {
        // A unit's flat gradient exists from its backward to its post-backward reduce-scatter, inside the
        // layers' backward. The root's views are outputs of one split of its flat parameter
        // (_flat_param.py _get_unflat_views_*), whose backward (split_with_sizes_backward: a cat) runs once every
        // view's gradient has arrived, at the embedding's backward: before it the LM head's gradient (and the
        // final norm's) waits in autograd's input buffer from the head's backward on, after the loss's; the flat
        // gradient then exists to the root's post-backward at backward's end. Counted as R from the head's
        // backward through the end (backward_layers): at most the waiting gradients during the layers (V h for a
        // tied head, about R), and at the end R, which the cat's inputs briefly double.
        sharding::add_buffer(ctx, names_.unsharded_gradients, Lifetime::backward_layers, root.trainable,
                             unsharded_bytes);
        sharding::add_buffer(ctx, names_.unsharded_gradients_units, Lifetime::backward_in_layers, gradient_unit,
                             unsharded_bytes);
      } else {
        sharding::add_buffer(ctx, names_.unsharded_gradients, Lifetime::transient_backward,
                             root.trainable + gradient_unit, unsharded_bytes);
      }
      // fully_shard keeps a unit's reduce-scatter input in comm_ctx.reduce_scatter_state until the next unit's
      // post_backward, after that unit's backward has run (FSDPParamGroup.post_backward): one unit's worth in
      // reduce_dtype beside the next unit's gathered parameters and gradients, from the first unit's
      // post-backward on (not at the loss's backward before it: lifetime backward_layers).
      if (!fsdp1_ && units > 1)
        sharding::add_buffer(ctx, names_.reduce_scatter_input, Lifetime::backward_layers, gradient_unit,
                             reduce_bytes);
    }
    // The staged shard copies of the root and of one unit, in the dtype they are gathered in.
    ctx.set_attr(attributes_.offload_staging, (root.bytes + (units > 0 ? gathered_unit : 0.0)) / shard);
    ctx.set_attr(attributes_.unit_parameters, unit);
    ctx.set_attr(attributes_.root_parameters, root.elements);
  }

  // FSDP1's layer units apart from its root in backward (add_working_set). Not with separate_embeddings,
  // whose head unit is gathered at the loss's backward and embedding unit at the embedding's: their
  // moments are not the layers'.
  bool split_fsdp1_units() const { return fsdp1_ && !separate_embeddings_; }

  // The weights outside the layers: elements, bytes as gathered, trainable
  // elements (and, for separate units, how many modules and the largest one's).
  struct Root {
    double elements = 0, bytes = 0, trainable = 0, count = 0;
  };

  // With separate_embeddings: takes the embeddings and LM head out of `root`
  // and returns the largest of them as one unit (elements, bytes as gathered,
  // trainable elements) and how many there are. The gathered dtype follows
  // weight_layout's: param_dtype when given; the embeddings are not linear
  // layers, so a Float8 all-gather leaves them in their own dtype.
  static Root separate_units(const memplan::sdk::Context& ctx, Root& root, double gather_bytes) {
    Root largest;
    for (memplan::sdk::ItemRef item : ctx.items()) {
      if (item.role() != Role::weights || item.non_parameter() || item.layer() >= 0) continue;
      const memplan::sdk::ParamClass c = item.param_class();
      if (c != memplan::sdk::ParamClass::embedding && c != memplan::sdk::ParamClass::position_embedding &&
          c != memplan::sdk::ParamClass::lm_head)
        continue;
      const double elements = item.elements() * item.count();
      const double bytes = elements * (gather_bytes > 0 ? gather_bytes : item.bytes_per_element());
      const double trainable = item.trainable() ? elements : 0.0;
      root.elements -= elements;
      root.bytes -= bytes;
      root.trainable -= trainable;
      largest.count += 1;
      largest.elements = std::max(largest.elements, elements);
      largest.bytes = std::max(largest.bytes, bytes);
      largest.trainable = std::max(largest.trainable, trainable);
    }
    root.elements = std::max(root.elements, 0.0);
    root.bytes = std::max(root.bytes, 0.0);
    root.trainable = std::max(root.trainable, 0.0);
    return largest;
  }

  // The attributes apply() reads and writes, resolved once: no key lookup per
  // evaluation. The report's in the order apply() first sets them (the unit
  // and root in add_working_set, then the shard group), the order the report
  // prints them in.
  struct Attributes {
    explicit Attributes(const memplan::sdk::Options& options)
        : gathers(options.attribute(sharding::kGatherAttr)),
          gradient_buckets(options.attribute(sharding::kGradientBucketsAttr)),
          gradients_dtype(options.attribute(MEMPLAN_ATTR_DTYPE_GRADIENTS)),
          offload_staging(options.attribute(MEMPLAN_ATTR_OFFLOAD_STAGING)),
          unit_parameters(options.attribute("report.fsdp_unit_parameters")),
          root_parameters(options.attribute("report.fsdp_root_parameters")),
          shard_group(options.attribute("report.fsdp_shard_group")),
          kept_layer_inputs(options.attribute(MEMPLAN_ATTR_KEPT_LAYER_INPUTS)),
          gathered_weight_bytes(options.attribute(MEMPLAN_ATTR_GATHERED_WEIGHT_BYTES)) {}
    memplan::sdk::Attribute gathers, gradient_buckets, gradients_dtype, offload_staging, unit_parameters,
        root_parameters, shard_group, kept_layer_inputs, gathered_weight_bytes;
  };
  // The working set's item names, interned once.
  struct Names {
    explicit Names(const memplan::sdk::Options& options)
        : gathered_forward(options.intern("fsdp.gathered_forward")),
          gathered_forward_units(options.intern("fsdp.gathered_forward_units")),
          gathered_backward(options.intern("fsdp.gathered_backward")),
          gathered_backward_units(options.intern("fsdp.gathered_backward_units")),
          gathered_at_loss(options.intern("fsdp.gathered_at_loss")),
          unsharded_parameters(options.intern("fsdp.unsharded_parameters")),
          unsharded_gradients(options.intern("fsdp.unsharded_gradients")),
          unsharded_gradients_units(options.intern("fsdp.unsharded_gradients_units")),
          accumulated_gradients(options.intern("fsdp.accumulated_gradients")),
          reduce_scatter_input(options.intern("fsdp.reduce_scatter_input")),
          gather(options.intern("fsdp.all_gather")),
          gradient_reduction(options.intern(MEMPLAN_WORK_GRADIENT_REDUCTION)),
          optimizer_step(options.intern(MEMPLAN_WORK_OPTIMIZER_STEP)),
          optimizer_step_experts(options.intern(MEMPLAN_WORK_OPTIMIZER_STEP_EXPERTS)),
          replica_reduction(options.intern("fsdp.replica_all_reduce")),
          setup_transient(options.intern("fsdp.setup_unshard")),
          setup_cache(options.intern("fsdp.setup_cache")) {}
    memplan::sdk::Name gathered_forward, gathered_forward_units, gathered_backward, gathered_backward_units,
        gathered_at_loss,
        unsharded_parameters, unsharded_gradients, unsharded_gradients_units, accumulated_gradients,
        reduce_scatter_input;
    memplan::sdk::Name gather, gradient_reduction, optimizer_step, optimizer_step_experts, replica_reduction;
    memplan::sdk::Name setup_transient, setup_cache;
  };

  int64_t unit_layers_;
  memplan::support::LayoutReader group_attributes_;
  Attributes attributes_;
  Names names_;
  sharding::WeightLayout weights_;  // refilled each evaluation, its vectors' capacity kept
  sharding::WeightLayout stored_;   // the same in the weights' stored dtypes, for the set-up
  std::vector<double> root_tensors_;
  int64_t shard_size_ = 0;
  double backward_prefetch_ = 1;
  double param_bytes_ = 0;   // 0: each weight's own dtype
  double reduce_bytes_ = 0;  // 0: the gradients' dtype
  bool reshard_after_forward_ = true;
  bool float8_all_gather_ = false;
  double stage_weight_bytes_ = 0;  // the stage's weights as gathered (whole), for the all-gathers
  double overlap_ = 1;             // communication_overlap
  bool fsdp1_ = true;
  bool setup_units_ = true;          // setup = "unit"
  bool sync_module_states_ = false;
  enum class GradientSync { automatic, every_micro_batch, last_micro_batch };
  GradientSync gradient_sync_ = GradientSync::automatic;
  bool separate_embeddings_ = false;
  bool checkpoint_around_units_ = false;  // reentrant checkpointing around the units (HF gradient_checkpointing)
  std::vector<bool> layer_needs_gradient_, layer_held_;  // declare_kept_layer_inputs' scratch
  bool frozen_gradients_ = false;       // FSDP1 use_orig_params: mixed units' gradients over the whole flat parameter
  std::vector<double> unit_gradients_;  // each layer's gradient elements, refilled each evaluation
};

}  // namespace

MEMPLAN_PLUGIN(FsdpStrategy)
