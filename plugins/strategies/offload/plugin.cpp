// 'offload': CPU offload (ZeRO-Offload, Ren et al. 2021, "ZeRO-Offload:
// Democratizing Billion-Scale Model Training", arXiv 2101.06840; DeepSpeed's
// offload_optimizer and offload_param; PyTorch FSDP's CPUOffload). Moves plan
// items to the CPU (MEMPLAN_DEVICE_CPU): the report's per-GPU peak no longer
// counts them and per_cpu does. The moved items are the ones of the reported
// GPU's rank, after sharding: host memory per node is per_cpu times the GPUs
// the node runs.
//   optimizer = true:  optimizer states and master weights (ZeRO-Offload keeps
//                      the fp32 copy and the Adam moments on the CPU, which
//                      runs the optimizer step)
//   gradients:         the gradients (default: as optimizer; ZeRO-Offload
//                      moves each rank's reduced gradient partition to the
//                      CPU for the CPU optimizer step)
//   parameters = true: the weights (ZeRO-Infinity's offload_param, FSDP's
//                      offload_params): they are gathered to the GPU module by
//                      module, so this needs zero stage 3 (with
//                      gathered_parameters = true) or fsdp, which count that
//                      working set on the GPU. Buffers stored with the weights
//                      (non_parameter, e.g. bitsandbytes' quant_state) stay
//                      on the GPU: FSDP's CPUOffload moves the flat parameters
//                      only (FlatParamHandle._local_shard). The GPU copies
//                      of the shards the sharding plugin stages before each
//                      gather in a pool of their own (sharding.offload_staging,
//                      FSDP's pre-unshard stream) stay reserved:
//                      offload.parameter_staging, in reserved and device
//                      memory, not in allocated.
//   optimizer = true under ZeRO stage 3 (sharding.gradient_buckets
//                      "deepspeed-stage3"): DeepSpeed's stage3.py
//                      __partition_grads copies each reduced gradient
//                      partition to its host buffer, back to the GPU, and
//                      takes its norm in float64 there
//                      (_constant_buffered_norm2): 2 + 8 bytes per element of
//                      the largest partition, in backward
//                      (offload.gradient_norm_copy; option gradient_norm_copy).
//                      And the step skips the fp32 cast of each sub-group
//                      on the GPU (stage3.py _prepare_sub_group: only without
//                      offload_optimizer): zero's zero3.step_flat_gradient
//                      is removed, and the fp32 gradients (main_grads, which
//                      zero scaled to the largest sub-group) are the host's
//                      per-sub-group buffers of the whole partition
//                      (initialize_optimizer_states, v0.7.0 lines 911-916):
//                      their elements are divided back by
//                      zero3.step_sub_group_fraction before they move.
// Runs just after the sharding phase (500), so the items it moves are the
// shards, whatever the scenario order.
#include <memplan/sdk.hpp>
#include <memplan/support/precision_recipe.hpp>
#include <memplan/support/sharding.hpp>

#include <memplan/support/layout.hpp>

#include <algorithm>
#include <array>
#include <string>
#include <string_view>

namespace {

using memplan::sdk::Role;

constexpr std::array<memplan_option_spec, 5> kOptions{{
    {"optimizer", MEMPLAN_OPTION_BOOL, "move optimizer states and master weights to the CPU", "false", "true"},
    {"gradients", MEMPLAN_OPTION_BOOL, "move gradients to the CPU", "the value of optimizer", "true"},
    {"parameters", MEMPLAN_OPTION_BOOL, "move the weights to the CPU (needs zero stage 3 or fsdp)", "false", "true"},
    {"staging", MEMPLAN_OPTION_BOOL,
     "parameters: count the GPU copies of offloaded shards staged before each gather (FSDP's pre-unshard pool, kept "
     "reserved; DeepSpeed ZeRO-3's all_gather_coalesced copies, at each gather's instant)",
     "true (the paper profile: false)", nullptr},
    {"gradient_norm_copy", MEMPLAN_OPTION_BOOL,
     "optimizer under ZeRO stage 3: count DeepSpeed's GPU copy of each reduced gradient partition and its float64 "
     "copy for the gradient norm (stage3.py __partition_grads), in backward",
     "true (the paper profile: false)", nullptr},
}};

// Bytes per element of _constant_buffered_norm2's part.data.double().
constexpr double kFloat64Bytes = 8;

constexpr auto kAfterSharding = static_cast<memplan::sdk::Phase>(MEMPLAN_PHASE_SHARDING + 50);

class OffloadStrategy {
 public:
  static constexpr memplan::sdk::PluginInfo info{
      "offload", "1.4.0", "CPU offload of optimizer states, master weights, gradients and parameters (ZeRO-Offload)",
      memplan::sdk::Kind::strategy, kAfterSharding};
  static std::span<const memplan_option_spec> options() { return kOptions; }

  explicit OffloadStrategy(memplan::sdk::Options& options)
      : optimizer_(options.boolean("optimizer").value_or(false)),
        gradients_(options.boolean("gradients").value_or(optimizer_)),
        parameters_(options.boolean("parameters").value_or(false)),
        staging_(options.boolean("staging").value_or(true)),
        norm_copy_(options.boolean("gradient_norm_copy").value_or(true)),
        layout_(options),
        buckets_attr_(options.attribute(memplan::support::sharding::kGradientBucketsAttr)),
        norm_copy_name_(options.intern("offload.gradient_norm_copy")),
        gathers_attr_(options.attribute(memplan::support::sharding::kGatherAttr)),
        staging_attr_(options.attribute(MEMPLAN_ATTR_OFFLOAD_STAGING)),
        staging_name_(options.intern("offload.parameter_staging")),
        setup_cache_emptied_attr_(options.attribute(MEMPLAN_ATTR_SETUP_CACHE_EMPTIED)),
        sub_group_fraction_attr_(options.attribute(MEMPLAN_ATTR_STEP_SUB_GROUP_FRACTION)),
        step_flat_gradient_(options.intern("zero3.step_flat_gradient")),
        gather_staging_forward_attr_(options.attribute(MEMPLAN_ATTR_GATHER_STAGING_FORWARD)),
        gather_staging_backward_attr_(options.attribute(MEMPLAN_ATTR_GATHER_STAGING_BACKWARD)),
        gather_staging_name_(options.intern("offload.gather_staging")),
        optimizer_step_(options.intern(MEMPLAN_WORK_OPTIMIZER_STEP)),
        optimizer_step_experts_(options.intern(MEMPLAN_WORK_OPTIMIZER_STEP_EXPERTS)) {
    if (!optimizer_ && !gradients_ && !parameters_)
      options.fail("offloads nothing; set optimizer = true, gradients = true and/or parameters = true");
    if (!options.training() && (optimizer_ || gradients_))
      options.fail(optimizer_ ? "optimizer" : "gradients",
                   "moves training state, but the scenario has mode = \"infer\"");
  }

  void apply(memplan::sdk::Context& ctx) {
    if (parameters_) {
      const int64_t gathers = ctx.attr_int(gathers_attr_, -1);
      if (gathers < 0)
        throw memplan::sdk::PluginError(
            "parameters", "moves the weights to the CPU, but no strategy gathers them back to the GPU before use; add "
                          "[[strategy]] use = \"zero\" with stage = 3 and gathered_parameters = true, or use = "
                          "\"fsdp\" (DeepSpeed offloads parameters only with ZeRO stage 3)");
      if (gathers == 0)
        throw memplan::sdk::PluginError(
            "parameters", "moves the weights to the CPU, leaving only the gathered modules on the GPU, which zero "
                          "does not count unless gathered_parameters = true; set it in the zero table");
    }
    // zero's setup = "whole" (the whole module moved onto the GPU, then partitioned) is modelled without
    // parameter offload: with it DeepSpeed partitions onto the CPU and stage3.py skips defragment's empty_cache.
    if (parameters_ && ctx.attr_double(setup_cache_emptied_attr_, 0) > 0)
      throw memplan::sdk::PluginError(
          "parameters", "moves the weights to the CPU, but zero's setup = \"whole\" is modelled without parameter "
                        "offload (DeepSpeed then partitions onto the CPU and stage3.py skips defragment's "
                        "empty_cache, so the whole model's freed blocks stay cached on the GPU); remove one of the two");
    if (parameters_ && staging_) add_staging(ctx);
    if (parameters_ && staging_) add_gather_staging(ctx);
    if (optimizer_ && norm_copy_ && ctx.training()) add_gradient_norm_copy(ctx);
    if (optimizer_ && ctx.training()) undo_step_sub_group(ctx);
    // In place: no copy of each item's name per evaluation.
    for (memplan::sdk::ItemRef item : ctx.items()) {
      const Role role = item.role();
      const bool moved = (optimizer_ && (role == Role::optimizer_states || role == Role::master_weights)) ||
                         (gradients_ && role == Role::gradients) ||
                         (parameters_ && role == Role::weights && !item.non_parameter());
      if (moved) item.set_device(memplan::sdk::Device::cpu);
    }
    // The step runs on the CPU beside its states (DeepSpeed's CPU Adam): no
    // GPU memory traffic; the CPU's time is not modelled.
    if (optimizer_)
      memplan::support::sharding::partition_optimizer_step(ctx, optimizer_step_, optimizer_step_experts_, 0, 0);
  }

 private:
  // The GPU copies of offloaded shards that the sharding plugin stages in an
  // allocator pool of their own (FSDP's pre-unshard stream): freed after each
  // gather, but the pool keeps its blocks, which no other stream can use.
  void add_staging(memplan::sdk::Context& ctx) const {
    memplan::support::sharding::add_buffer(ctx, staging_name_, memplan::sdk::Lifetime::persistent,
                                           ctx.attr_double(staging_attr_, 0), 1, memplan::sdk::Pool::reserve);
  }

  // DeepSpeed ZeRO-3 with the partitions in host memory: all_gather_coalesced
  // copies the call's partitions to the GPU before gathering them
  // (partition_parameters.py, v0.7.0 lines 836-880: ds_tensor.to(cuda)),
  // beside the gathered set at that instant; zero's replay sizes it
  // (zero3.gather_staging_forward / _backward, plugins/strategies/zero/coordinator.hpp).
  void add_gather_staging(memplan::sdk::Context& ctx) const {
    memplan::support::sharding::add_buffer(ctx, gather_staging_name_, memplan::sdk::Lifetime::transient_forward,
                                           ctx.attr_double(gather_staging_forward_attr_, 0), 1);
    memplan::support::sharding::add_buffer(ctx, gather_staging_name_, memplan::sdk::Lifetime::transient_backward,
                                           ctx.attr_double(gather_staging_backward_attr_, 0), 1);
  }

  // DeepSpeed ZeRO-3 with offload_optimizer: no flat copy or fp32 cast of a
  // sub-group on the GPU at the step; the fp32 gradients are host buffers of
  // the whole partition (see the top of the file).
  void undo_step_sub_group(memplan::sdk::Context& ctx) const {
    const double fraction = ctx.attr_double(sub_group_fraction_attr_, 1);
    if (fraction > 0 && fraction < 1)
      for (memplan::sdk::ItemRef item : ctx.items())
        if (memplan::support::is_main_grad_copy(item))
          item.set_elements(item.elements() / fraction);
    const memplan::sdk::Items items = ctx.items();
    for (size_t i = 0; i < items.size(); ++i)
      if (items[i].named(step_flat_gradient_)) {
        ctx.remove(i);  // zero adds one; the view is stale after it
        break;
      }
  }

  // DeepSpeed ZeRO-3 with offload_optimizer (stage3.py, __partition_grads,
  // the same from v0.6.0 to v0.16.4): for each parameter of a flushed reduce
  // bucket, the reduced 16-bit partition is copied into the host gradient
  // buffer and back to the GPU (grad_buffer.to(grad_partition.device)), and at
  // the accumulation boundary its norm is taken as
  // part.data.double().norm(2) (_constant_buffered_norm2, parts of up to
  // 2.5e8 elements): a 16-bit and a float64 copy of the partition on the GPU
  // together, one parameter at a time, while the flushed bucket is reduced in
  // backward. Sized by the largest trainable module's partition (the sharded
  // weight items, one module each as zero's trace counts them: weight and
  // bias together), in the weights' dtype plus 8 bytes; the input embeddings
  // (and a head tied to them) are left out: their gradient is complete only
  // at the end of backward, when the layers' activations are gone.
  void add_gradient_norm_copy(memplan::sdk::Context& ctx) const {
    if (ctx.attr_string(buckets_attr_, "") != std::string_view("deepspeed-stage3")) return;
    const memplan_model& model = ctx.model();
    const int64_t expert_parallel = layout_.ranks(ctx).expert;
    double bytes = 0;
    for (memplan::sdk::ItemRef item : ctx.items()) {
      if (item.role() != Role::weights || item.non_parameter() || item.count() == 0 || !item.trainable() ||
          item.device() != memplan::sdk::Device::gpu)
        continue;
      const memplan::sdk::ParamClass param_class = item.param_class();
      if (param_class == memplan::sdk::ParamClass::embedding ||
          param_class == memplan::sdk::ParamClass::position_embedding)
        continue;
      const double partition = item.elements() / memplan::support::sharding::modules_in(item, model, expert_parallel);
      bytes = std::max(bytes, partition * (item.bytes_per_element() + kFloat64Bytes));
    }
    memplan::support::sharding::add_buffer(ctx, norm_copy_name_, memplan::sdk::Lifetime::transient_backward, bytes,
                                           1);
  }

  bool optimizer_;
  bool gradients_;
  bool parameters_;
  bool staging_;
  bool norm_copy_;
  memplan::support::LayoutReader layout_;  // the expert-parallel size, for the experts' modules
  memplan::sdk::Attribute buckets_attr_;   // sharding.gradient_buckets: "deepspeed-stage3" under zero stage 3
  memplan::sdk::Name norm_copy_name_;
  // Resolved once, in the constructor: no key lookup or interning per evaluation.
  memplan::sdk::Attribute gathers_attr_;  // sharding.gathers_parameters
  memplan::sdk::Attribute staging_attr_;  // sharding.offload_staging
  memplan::sdk::Name staging_name_;
  memplan::sdk::Attribute setup_cache_emptied_attr_;  // set by zero's setup = "whole"
  memplan::sdk::Attribute sub_group_fraction_attr_;   // zero3.step_sub_group_fraction: main_grads' scale
  memplan::sdk::Name step_flat_gradient_;             // zero's flat copy of a sub-group at the step
  memplan::sdk::Attribute gather_staging_forward_attr_, gather_staging_backward_attr_;  // set by zero, stage 3
  memplan::sdk::Name gather_staging_name_;            // offload.gather_staging
  memplan::sdk::Name optimizer_step_, optimizer_step_experts_;  // the step's memory traffic, moved off the GPU
};

}  // namespace

MEMPLAN_PLUGIN(OffloadStrategy)
