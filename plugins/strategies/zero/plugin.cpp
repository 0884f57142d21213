// 'zero': ZeRO-DP (Rajbhandari et al. 2020, arXiv 1910.02054, section 5 and
// Table 1) over the N_d ranks that hold replicas of the model: the
// data-parallel ranks times the context-parallel ranks (Megatron-LM's
// distributed optimizer shards over that group; the ZeRO paper has no context
// parallelism, N_d = ranks.data there).
//   stage 1 (P_os):     optimizer states and fp32 master weights / N_d
//   stage 2 (P_os+g):   also gradients / N_d
//   stage 3 (P_os+g+p): also the 16-bit weights / N_d
// Experts under expert parallelism (layout.expert_parallel = ep) are sharded
// over the expert data-parallel group of N_d / ep ranks instead.
// The paper's K = 12 bytes per parameter counts master weights with the
// optimizer states, so stage 1 shards both. Partition padding (at most N_d - 1
// elements per tensor) is ignored.
//
// With gathered_parameters = true, stage 3 also counts what DeepSpeed's
// ZeRO-3 holds gathered: its parameter coordinator is replayed over the
// step's module trace (coordinator.hpp): the module in use, the parameters
// prefetched ahead of it, those kept because they are used again within
// stage3_max_reuse_distance elements, and the small ones
// (stage3_param_persistence_threshold) kept whole for good. The working set is
// taken where the activations peak: the last layer's forward and the loss
// (forward), the loss's backward and the last layer's backward, its
// recomputation included (backward); plus in backward the module's full
// gradient before it is reduce-scattered (with a tied LM head, the head's
// too: it waits for the embedding's, at the end of backward).
//
// setup = "whole" (stage 3): the model reaches deepspeed.initialize with whole
// parameters instead of being partitioned as it is built under
// deepspeed.zero.Init (transformers skips zero.Init for quantized models,
// PR #29587: "Disable zero.init when using DeepSpeed with QLoRA"). DeepSpeed
// v0.14.0 engine.py _configure_distributed_model then moves the whole module
// onto each GPU (self.module.to(self.device): no parameter has a ds_id), and
// the stage-3 optimizer partitions it parameter by parameter
// (parameter_offload.py _convert_to_zero_parameters -> Init(module=...) ->
// _zero_init_param -> partition: the rank's partition is allocated and filled
// before the whole tensor is freed). The set-up's high point is every
// parameter whole plus the first one's partition (the token embedding's),
// item zero3.setup_whole of lifetime setup. stage3.py then empties the cache
// (defragment: gc.collect + empty_cache), so it sets no floor under the step
// (attribute setup.cache_emptied for the 'allocator' plugin), and
// module.to allocates the parameters one after another with nothing freed
// between them, in fresh segments (setup.fresh_segments: no
// fragmentation margin on the item).
//
// The stage-3 step, sub-group by sub-group (stage3.py step ->
// _prepare_sub_group -> _prepare_fp32_grad_for_sub_group, the same lines at
// v0.7.0 (1686-1705), v0.14.0 (1847-1866), v0.18.3 (1977-1996) and v0.19.0
// (2208-2227)): single_grad_partition = flatten(the sub-group's 16-bit
// gradient partitions).to(the master's dtype). The flatten (torch.cat) is a
// new 16-bit tensor of the sub-group's elements and the cast a second one, in
// fp32; the cast is the master's .grad until _release_sub_group drops it.
// _create_fp16_sub_groups (v0.7.0 808-832, v0.18.3 1027-1050) walks each
// parameter group's parameters in order and closes a sub-group as soon as it
// holds >= sub_group_size partition elements (one sub-group when the group is
// no larger). The fp32 cast is the precision recipe's main_grads (the
// deepspeed profile sets it): at stage 3 this plugin scales those items to the
// largest sub-group's elements S and adds the flat 16-bit copy beside them,
// zero3.step_flat_gradient = S x dtype.gradients bytes (transient_optimizer;
// not when main_grads is in the gradients' own dtype: the flatten is then the
// .grad itself). Under offload_optimizer neither exists on the GPU
// (_prepare_sub_group skips the cast): 'offload' removes the copy and gives
// main_grads back their whole partition (attribute zero3.step_sub_group_fraction).
#include <memplan/sdk.hpp>
#include <memplan/support/backward_gradients.hpp>
#include <memplan/support/layout.hpp>
#include <memplan/support/precision_recipe.hpp>
#include <memplan/support/sharding.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "coordinator.hpp"

namespace {

namespace sharding = memplan::support::sharding;
namespace zero3 = memplan::plugins::zero3;
using memplan::sdk::Role;

// DeepSpeed's defaults (deepspeed/runtime/zero/config.py, DeepSpeedZeroConfig,
// v0.14.0): prefetch_bucket_size 5e7, max_live_parameters 1e9,
// max_reuse_distance 1e9 and param_persistence_threshold 1e5 elements.
constexpr int64_t kPrefetchBucketDefault = 50'000'000;
constexpr int64_t kMaxLiveDefault = 1'000'000'000;
constexpr int64_t kMaxReuseDefault = 1'000'000'000;
constexpr int64_t kPersistenceDefault = 100'000;
// sub_group_size: 1e9 partition elements (config.py, v0.7.0 line 92, v0.18.3 line 174).
constexpr int64_t kSubGroupDefault = 1'000'000'000;

constexpr std::array<memplan_option_spec, 9> kOptions{{
    {"stage", MEMPLAN_OPTION_INT, "0 (off), 1 (optimizer states), 2 (+ gradients) or 3 (+ weights)", "required",
     "1,2,3"},
    {"communication_overlap", MEMPLAN_OPTION_DOUBLE,
     "stage 3: the fraction of the parameter all-gathers and gradient reduce-scatters that may hide behind the "
     "compute of their pass (prefetching), in [0, 1]",
     "1: as far as the compute lasts", nullptr},
    {"gathered_parameters", MEMPLAN_OPTION_BOOL,
     "stage 3: count the parameters DeepSpeed's coordinator keeps gathered on the GPU",
     "true with stage 3 when the architecture is known", nullptr},
    {"prefetch_bucket_size", MEMPLAN_OPTION_INT,
     "stage 3: parameter elements fetched ahead of use (DeepSpeed stage3_prefetch_bucket_size)", "50000000", nullptr},
    {"max_live_parameters", MEMPLAN_OPTION_INT,
     "stage 3: gathered parameter elements resident at most (DeepSpeed stage3_max_live_parameters)", "1000000000",
     nullptr},
    {"max_reuse_distance", MEMPLAN_OPTION_INT,
     "stage 3: a parameter used again within this many elements of the trace stays gathered (DeepSpeed "
     "stage3_max_reuse_distance)",
     "1000000000", nullptr},
    {"param_persistence_threshold", MEMPLAN_OPTION_INT,
     "stage 3: parameters of at most this many elements stay gathered for good (DeepSpeed "
     "stage3_param_persistence_threshold)",
     "100000", nullptr},
    {"setup", MEMPLAN_OPTION_STRING,
     "stage 3: \"partitioned\" (the model is built under deepspeed.zero.Init, each parameter partitioned as it is "
     "created) or \"whole\" (the module reaches deepspeed.initialize whole, as transformers' quantized models do: "
     "the engine moves it onto the GPU and partitions it parameter by parameter)",
     "\"partitioned\"", nullptr},
    {"sub_group_size", MEMPLAN_OPTION_INT,
     "stage 3: partition elements per optimizer sub-group (DeepSpeed sub_group_size): the step flattens and casts "
     "one sub-group's gradients at a time",
     "1000000000", nullptr},
}};

class ZeroShardingStrategy {
 public:
  static constexpr memplan::sdk::PluginInfo info{
      "zero", "1.11.0",
      "ZeRO stages 0-3: shard optimizer states, gradients and weights over data-parallel ranks; ZeRO-3's gathered "
      "parameters",
      memplan::sdk::Kind::strategy, memplan::sdk::Phase::sharding, memplan::sdk::Reads::nothing};
  static std::span<const memplan_option_spec> options() { return kOptions; }

  explicit ZeroShardingStrategy(memplan::sdk::Options& options)
      : groups_(options),
        gathers_attr_(options.attribute(sharding::kGatherAttr)),
        gradient_buckets_attr_(options.attribute(sharding::kGradientBucketsAttr)),
        recompute_policy_attr_(options.attribute(MEMPLAN_ATTR_RECOMPUTE_POLICY)),
        gradients_dtype_attr_(options.attribute(MEMPLAN_ATTR_DTYPE_GRADIENTS)),
        lora_rank_attr_(options.attribute(MEMPLAN_ATTR_LORA_RANK)),
        largest_module_attr_(options.attribute("report.zero3_largest_module")),
        gathered_parameters_attr_(options.attribute("report.zero3_gathered_parameters")),
        gathered_forward_(options.intern("zero3.gathered_forward")),
        all_gather_(options.intern("zero3.all_gather")),
        gradient_reduction_(options.intern(MEMPLAN_WORK_GRADIENT_REDUCTION)),
        optimizer_step_(options.intern(MEMPLAN_WORK_OPTIMIZER_STEP)),
        optimizer_step_experts_(options.intern(MEMPLAN_WORK_OPTIMIZER_STEP_EXPERTS)),
        gathered_backward_(options.intern("zero3.gathered_backward")),
        module_gradient_(options.intern("zero3.module_gradient")),
        persistent_parameters_(options.intern("zero3.persistent_parameters")),
        setup_whole_(options.intern("zero3.setup_whole")),
        step_flat_gradient_(options.intern("zero3.step_flat_gradient")),
        sub_group_fraction_attr_(options.attribute(MEMPLAN_ATTR_STEP_SUB_GROUP_FRACTION)),
        staging_forward_attr_(options.attribute(MEMPLAN_ATTR_GATHER_STAGING_FORWARD)),
        staging_backward_attr_(options.attribute(MEMPLAN_ATTR_GATHER_STAGING_BACKWARD)),
        backward_gradients_attr_(options.attribute(MEMPLAN_ATTR_BACKWARD_GRADIENTS)),
        zero_stage_attr_(options.attribute(MEMPLAN_ATTR_ZERO_STAGE)),
        setup_cache_emptied_attr_(options.attribute(MEMPLAN_ATTR_SETUP_CACHE_EMPTIED)),
        setup_unfragmented_attr_(options.attribute(MEMPLAN_ATTR_SETUP_FRESH_SEGMENTS)) {
    overlap_ = options.number("communication_overlap").value_or(1.0);
    if (!std::isfinite(overlap_) || overlap_ < 0 || overlap_ > 1)
      options.fail("communication_overlap", "must be a fraction in [0, 1]");
    auto stage = options.integer("stage");
    if (!stage) options.fail("stage", "is required: 0, 1, 2 or 3");
    if (*stage < 0 || *stage > 3) options.fail("stage", "must be 0, 1, 2 or 3, got " + std::to_string(*stage));
    stage_ = static_cast<int>(*stage);
    // DeepSpeed gathers every stage-3 module before use: counted unless the scenario (or the paper view) says not.
    const bool has_architecture = options.model().has_architecture != 0;
    gathered_ = options.boolean("gathered_parameters").value_or(stage_ == 3 && has_architecture);
    if (gathered_ && stage_ != 3)
      options.fail("gathered_parameters", "counts the parameters ZeRO stage 3 gathers; stage " +
                                              std::to_string(stage_) + " keeps whole weights on every rank");
    if (gathered_ && !has_architecture)
      options.fail("gathered_parameters", "needs the model's architecture to size the gathered modules, but the "
                                          "scenario gives only params; give a preset or the architecture in [model]");
    for (const char* key :
         {"prefetch_bucket_size", "max_live_parameters", "max_reuse_distance", "param_persistence_threshold"}) {
      const auto value = options.integer(key);
      if (!value) continue;
      if (!gathered_)
        options.fail(key, "sizes the stage-3 gathered parameters, which are not counted; set gathered_parameters = "
                          "true with stage = 3");
      if (*value < 0) options.fail(key, "must be 0 or more elements, got " + std::to_string(*value));
    }
    settings_.prefetch_bucket =
        static_cast<double>(options.integer("prefetch_bucket_size").value_or(kPrefetchBucketDefault));
    settings_.max_live = static_cast<double>(options.integer("max_live_parameters").value_or(kMaxLiveDefault));
    settings_.max_reuse_distance =
        static_cast<double>(options.integer("max_reuse_distance").value_or(kMaxReuseDefault));
    settings_.persistence_threshold =
        static_cast<double>(options.integer("param_persistence_threshold").value_or(kPersistenceDefault));
    if (const auto sub_group = options.integer("sub_group_size")) {
      if (stage_ != 3)
        options.fail("sub_group_size", "sizes the sub-groups of ZeRO stage 3's optimizer step; stage " +
                                           std::to_string(stage_) + " steps its partition at once: remove sub_group_size or set stage = 3");
      if (*sub_group < 1) options.fail("sub_group_size", "must be 1 or more elements, got " + std::to_string(*sub_group));
      sub_group_size_ = static_cast<double>(*sub_group);
    }
    if (const auto setup = options.string("setup")) {
      if (*setup != "partitioned" && *setup != "whole")
        options.fail("setup", "must be \"partitioned\" (built under deepspeed.zero.Init) or \"whole\" (the module "
                              "reaches deepspeed.initialize whole), got \"" + std::string(*setup) + "\"");
      setup_whole_model_ = *setup == "whole";
      if (setup_whole_model_ && stage_ != 3)
        options.fail("setup", "\"whole\" sizes stage 3's partitioning of a whole module; stage " +
                                  std::to_string(stage_) + " keeps whole weights on every rank for good");
    }
  }

  void apply(memplan::sdk::Context& ctx) {
    const memplan::support::Ranks groups = groups_.ranks(ctx);
    if (stage_ > 0 && !groups.data_declared)
      ctx.fail("stage " + std::to_string(stage_) + " shards over the data-parallel group, but no strategy declares "
               "its size; add [[strategy]] use = \"data-parallel\" with its size (size = 1 on a single GPU)");
    if (stage_ == 0) return;
    ctx.set_attr(gradient_buckets_attr_, stage_ == 3 ? "deepspeed-stage3" : "deepspeed");
    // Stage 1 reduces after backward unless overlap_comm, and keeps its buckets through gradient accumulation:
    // comm-buffers places its buckets and their copies by the stage.
    ctx.set_attr(zero_stage_attr_, static_cast<int64_t>(stage_));
    if (stage_ == 3) {
      ctx.set_attr(gathers_attr_, gathered_ ? 1 : 0);
      if (gathered_) add_gathered(ctx, groups);
      // Before sharding: the stage's weights as each micro-batch gathers them, forward and backward.
      double weight_bytes = 0;
      for (const memplan::sdk::ItemRef item : ctx.items())
        if (item.role() == Role::weights && item.device() == memplan::sdk::Device::gpu && !item.non_parameter())
          weight_bytes += item.elements() * item.bytes_per_element() * static_cast<double>(item.count());
      sharding::fully_sharded_communication(ctx, all_gather_, gradient_reduction_, groups.dense_replicas(),
                                            groups.tensor, weight_bytes, true, overlap_);
    }
    const double dense = static_cast<double>(groups.dense_replicas());
    // The experts' states over the expert data-parallel group (data x context / expert, or with folding and an
    // expert tensor size of its own, tensor x context x data / (expert x expert tensor)).
    const double expert = static_cast<double>(groups.expert_replicas());
    const int stage = stage_;
    const double whole = setup_whole_model_ ? gpu_parameter_bytes(ctx) : 0;
    const double first_partition = setup_whole_model_ ? embedding_bytes(ctx) / dense : 0;
    sharding::shard(ctx, dense, expert, [stage](memplan::sdk::ItemRef item) {
      const Role role = item.role();
      return (stage >= 1 && (role == Role::optimizer_states || role == Role::master_weights)) ||
             (stage >= 2 && role == Role::gradients) || (stage >= 3 && role == Role::weights);
    });
    if (setup_whole_model_) add_setup_whole(ctx, whole, first_partition);
    if (stage == 3 && ctx.training()) add_step_sub_group(ctx, groups.expert);
    // Each rank steps its partition of the optimizer states (stage 1 and up).
    sharding::partition_optimizer_step(ctx, optimizer_step_, optimizer_step_experts_, dense, expert);
  }

 private:
  // The parameters on the GPU as they are now (whole before sharding, the
  // rank's partitions after); quantization constants and other non-parameters
  // are not partitioned and stay out.
  static double gpu_parameter_bytes(const memplan::sdk::Context& ctx) {
    double bytes = 0;
    for (const memplan::sdk::ItemRef item : ctx.items())
      if (item.role() == Role::weights && item.device() == memplan::sdk::Device::gpu && !item.non_parameter())
        bytes += item.bytes();
    return bytes;
  }

  // The token embedding's bytes: the first parameter in module order, whose
  // partition is allocated while every parameter is still whole.
  static double embedding_bytes(const memplan::sdk::Context& ctx) {
    double bytes = 0;
    for (const memplan::sdk::ItemRef item : ctx.items())
      if (item.role() == Role::weights && item.device() == memplan::sdk::Device::gpu && !item.non_parameter() &&
          item.param_class() == memplan::sdk::ParamClass::embedding)
        bytes += item.bytes();
    return bytes;
  }

  // setup = "whole" (see the top of the file): at the set-up's high point the
  // whole parameters and the first partition are on the GPU. The host counts
  // the rank's partitions (persistent) at init already, so the item is the
  // rest: whole - partitions + the first partition.
  void add_setup_whole(memplan::sdk::Context& ctx, double whole, double first_partition) {
    const double partitions = gpu_parameter_bytes(ctx);
    sharding::add_buffer(ctx, setup_whole_, memplan::sdk::Lifetime::setup,
                         std::max(0.0, whole - partitions) + first_partition, 1);
    ctx.set_attr(setup_cache_emptied_attr_, 1.0);
    // module.to allocates every parameter in turn with nothing freed between: fresh segments, no margin.
    ctx.set_attr(setup_unfragmented_attr_, 1.0);
  }

  // The precision recipe's fp32 gradient copies on the GPU (main_grads; support/precision_recipe.hpp).
  static bool main_grad(memplan::sdk::ItemRef item) {
    return memplan::support::is_main_grad_copy(item) && item.device() == memplan::sdk::Device::gpu &&
           item.count() > 0;
  }

  // After sharding: the step's copies of the largest sub-group (see the top of
  // the file). The parameters in model order: the embeddings, each layer's in
  // plan order, then the rest (final norm, untied head); one parameter per
  // module (weight and bias together), as the gathered trace counts them, in
  // one parameter group (a second group, e.g. the no-decay one, is not split
  // out).
  void add_step_sub_group(memplan::sdk::Context& ctx, int64_t expert_parallel) {
    double partition = 0, main_bytes = 0;
    for (const memplan::sdk::ItemRef item : ctx.items())
      if (main_grad(item)) {
        partition += item.elements() * static_cast<double>(item.count());
        main_bytes = item.bytes_per_element();
      }
    // Without the recipe's fp32 gradient copies a torch optimizer's foreach temporaries still follow the sub-groups:
    // the walk runs on them (one per trainable weight, the partition's elements).
    const bool on_foreach = partition <= 0;
    if (on_foreach)
      for (const memplan::sdk::ItemRef item : ctx.items())
        if (foreach_temporaries(item)) partition += item.elements() * static_cast<double>(item.count());
    if (partition <= 0) return;
    // One sub-group (the common case: sub_group_size at least the partition)
    // leaves main_grads whole; only more than one needs the walk.
    double largest = partition;
    if (sub_group_size_ < partition) {
      largest = largest_sub_group(ctx, expert_parallel, on_foreach);
      const double fraction = largest / partition;
      for (memplan::sdk::ItemRef item : ctx.items())
        if (main_grad(item) || foreach_temporaries(item)) item.set_elements(item.elements() * fraction);
      ctx.set_attr(sub_group_fraction_attr_, fraction);
    }
    if (on_foreach) return;  // no fp32 cast: no flat copy either
    const double gradient = gradient_bytes(ctx);
    if (main_bytes == gradient) return;  // .to() returns the flat copy itself: main_grads is it
    ctx.add(memplan::sdk::NewItem{.name = step_flat_gradient_,
                                  .role = Role::optimizer_states,
                                  .lifetime = memplan::sdk::Lifetime::transient_optimizer,
                                  .elements = largest,
                                  .bytes_per_element = gradient});
  }

  // A torch optimizer's foreach temporaries (the optimizer plugins' `<weight>.foreach_temps`, sized on the whole
  // partition): ZeRO-3 steps one sub-group at a time, handing the optimizer that sub-group's flat fp32 tensor alone
  // (stage3.py _optimizer_step @ v0.19.5-27: param_groups[...]['params'] = [fp32_param]; optimizer.step()), so
  // _multi_tensor_adam's temporaries are one sub-group's, like the fp32 gradient copies above. Found by a blind
  // test on ms-swift's ZeRO-3 examples (torch AdamW, sub_group_size 1e9): 3.3 GiB over on Qwen2.5-7B x 4 GPUs.
  static bool foreach_temporaries(const memplan::sdk::ItemRef item) {
    return item.role() == Role::optimizer_states && item.lifetime() == memplan::sdk::Lifetime::transient_optimizer &&
           item.name().ends_with(".foreach_temps");
  }

  // DeepSpeed's _create_fp16_sub_groups: the parameters in model order, a
  // sub-group closed once it holds sub_group_size elements; the largest
  // sub-group's elements.
  // `on_foreach`: the walk runs on the foreach temporaries (no main_grad copies).
  double largest_sub_group(const memplan::sdk::Context& ctx, int64_t expert_parallel, bool on_foreach) {
    const memplan_model& model = ctx.model();
    sub_group_modules_.clear();
    for (const memplan::sdk::ItemRef item : ctx.items()) {
      if (!(on_foreach ? foreach_temporaries(item) : main_grad(item))) continue;
      const double modules = sharding::modules_in(item, model, expert_parallel);
      const double module = item.elements() / modules;
      const memplan::sdk::ParamClass param_class = item.param_class();
      const bool front = param_class == memplan::sdk::ParamClass::embedding ||
                         param_class == memplan::sdk::ParamClass::position_embedding;
      for (uint32_t k = 0; k < item.count(); ++k) {
        const int64_t at = item.layer() >= 0 ? static_cast<int64_t>(item.layer()) + k
                           : front            ? -1
                                              : std::numeric_limits<int32_t>::max();
        for (int m = 0; m < static_cast<int>(modules); ++m)
          sub_group_modules_.push_back({at, static_cast<uint32_t>(sub_group_modules_.size()), module});
      }
    }
    // std::sort on (layer, plan order): stable_sort would allocate a buffer on every evaluation.
    std::sort(sub_group_modules_.begin(), sub_group_modules_.end(), [](const SubGroupModule& a, const SubGroupModule& b) {
      return a.at != b.at ? a.at < b.at : a.order < b.order;
    });
    double largest = 0, open = 0;
    for (const SubGroupModule& module : sub_group_modules_) {
      open += module.elements;
      if (open >= sub_group_size_) {
        largest = std::max(largest, open);
        open = 0;
      }
    }
    return std::max(largest, open);
  }

  // Before sharding: the weights on the rank are still whole.
  void add_gathered(memplan::sdk::Context& ctx, const memplan::support::Ranks& groups) {
    const std::string_view policy = ctx.attr_string(recompute_policy_attr_, "none");
    // Checkpointed layers run their forward again before their backward (HF's gradient checkpointing,
    // torch's per-op checkpointing); Megatron's selective recomputation replays no module with parameters.
    const bool replay = policy == "full" || policy == "op";
    build_trace(ctx, groups.expert, ctx.training(), replay);
    // Each rank's partition is staged on the GPU before its all-gather when it lives in host memory
    // (coordinator.hpp); 'offload' with parameters = true counts it from the attributes set below.
    zero3::Settings settings = settings_;
    settings.staging_share = 1.0 / static_cast<double>(groups.dense_replicas());
    const zero3::Result result = zero3::replay(trace_.parameters, trace_.steps, settings, workspace_);
    constexpr size_t kForward = static_cast<size_t>(zero3::Window::forward);
    constexpr size_t kBackward = static_cast<size_t>(zero3::Window::backward);
    sharding::add_buffer(ctx, gathered_forward_, memplan::sdk::Lifetime::transient_forward,
                         result.gathered_bytes[kForward], 1);
    ctx.set_attr(staging_forward_attr_, result.staged_bytes[kForward] - result.gathered_bytes[kForward]);
    ctx.set_attr(staging_backward_attr_,
                 ctx.training() ? result.staged_bytes[kBackward] - result.gathered_bytes[kBackward] : 0.0);
    double gathered = result.gathered_numel[kForward];
    if (ctx.training()) {
      sharding::add_buffer(ctx, gathered_backward_, memplan::sdk::Lifetime::transient_backward,
                           result.gathered_bytes[kBackward], 1);
      sharding::add_buffer(ctx, module_gradient_, memplan::sdk::Lifetime::transient_backward,
                           module_gradient_elements(ctx, groups.expert), gradient_bytes(ctx));
      gathered = std::max(gathered, result.gathered_numel[kBackward]);
      // Where the reduce bucket fills, for comm-buffers (conventions.h), when the trace holds every gradient
      // of one reduce group: the adapters are left out of it, and with expert parallelism the experts reduce
      // over a group of their own, whose change flushes the bucket too (stage3.py
      // reduce_independent_p_g_buckets_and_remove_grads). Otherwise no record: comm-buffers then counts a
      // whole bucket's copy at the high point.
      if (groups.expert <= 1 && !trains_untraced_weights(ctx)) {
        memplan::support::backward_gradients::encode(result.gathered_bytes[kBackward], workspace_.gradients,
                                                     backward_gradients_text_);
        ctx.set_attr(backward_gradients_attr_, backward_gradients_text_.c_str());
      }
    }
    const double persistent = result.persistent_bytes + persistent_adapter_bytes(ctx);
    // Whole copies beside their shards, on every rank from the first step on.
    sharding::add_buffer(ctx, persistent_parameters_, memplan::sdk::Lifetime::persistent, persistent, 1);
    ctx.set_attr(largest_module_attr_, sharding::largest_module(ctx, groups.expert, false));
    ctx.set_attr(gathered_parameters_attr_, gathered);
  }

  // The LoRA matrices small enough to persist. The trace leaves the adapters
  // out (they move no distance or bucket), but DeepSpeed marks every
  // parameter of at most stage3_param_persistence_threshold elements ds_persist
  // at Init (partition_parameters.py, _convert_to_deepspeed_param, v0.14.0):
  // its param.data stays whole on every rank for good, beside its partition
  // (ds_tensor, kept on the GPU even under parameter offload), while its
  // gradient and optimizer state are partitioned like every parameter's
  // (stage3.py re-gathers the persistent parameters after each step). Each
  // adapted d_in x d_out matrix has lora_A (r x d_in) and lora_B (d_out x r),
  // sized from the 'lora' plugin's item names and lora.rank; adapters of other
  // plugins are not recognised and count nothing here.
  double persistent_adapter_bytes(const memplan::sdk::Context& ctx) const {
    const double r = ctx.attr_double(lora_rank_attr_, 0);
    if (r <= 0) return 0;
    const memplan_model& m = ctx.model();
    const double h = static_cast<double>(m.hidden), q = static_cast<double>(m.heads * m.head_dim),
                 kv = static_cast<double>(m.kv_heads * m.head_dim), f = static_cast<double>(m.ffn_hidden),
                 fe = static_cast<double>(m.expert_ffn_hidden), experts = static_cast<double>(m.experts),
                 vocab = static_cast<double>(m.vocab);
    const double threshold = settings_.persistence_threshold;
    // Elements of the matrices of one adapted d_in x d_out weight that persist.
    auto persisting = [&](double d_in, double d_out) {
      return (r * d_in <= threshold ? r * d_in : 0) + (r * d_out <= threshold ? r * d_out : 0);
    };
    const bool gated = m.gated_mlp != 0;
    double bytes = 0;
    for (const memplan::sdk::ItemRef item : ctx.items()) {
      if (item.role() != Role::weights || item.param_class() != memplan::sdk::ParamClass::adapter) continue;
      const std::string_view name = item.name();
      double elements = 0;
      if (name == "lora.attn.q") elements = persisting(h, q);
      else if (name == "lora.attn.k" || name == "lora.attn.v") elements = persisting(h, kv);
      else if (name == "lora.attn.o") elements = persisting(q, h);
      else if (name == "lora.mlp") elements = (gated ? 2 : 1) * persisting(h, f) + persisting(f, h);
      else if (name == "lora.moe.router") elements = persisting(h, experts);
      else if (name == "lora.moe.experts") elements = experts * ((gated ? 2 : 1) * persisting(h, fe) + persisting(fe, h));
      else if (name == "lora.lm_head") elements = persisting(h, vocab);
      bytes += elements * item.bytes_per_element() * static_cast<double>(item.count());
    }
    return bytes;
  }

  // The full gradients held in backward before they are reduce-scattered:
  // the largest trainable module's. With the LM head tied to a trainable
  // input embedding, the head's gradient (from the loss's backward) waits in
  // autograd's input buffer of the shared parameter's AccumulateGrad node
  // until the embedding's arrives at the end of backward (a leaf used twice
  // is accumulated once; torch/csrc/autograd/engine.cpp, InputBuffer), and
  // DeepSpeed reduces a parameter only from that node's hook (stage3.py,
  // create_reduce_and_remove_grad_hooks: grad_acc.register_hook, v0.7.0 and
  // v0.14.0): every layer's backward then holds it beside its own module's
  // gradient, so the two add up.
  double module_gradient_elements(const memplan::sdk::Context& ctx, int64_t expert_parallel) const {
    const memplan_model& model = ctx.model();
    if (!model.tied_embeddings) return sharding::largest_module(ctx, expert_parallel, true);
    double head = 0, other = 0;
    for (const memplan::sdk::ItemRef item : ctx.items()) {
      if (item.role() != Role::weights || item.non_parameter() || item.count() == 0 || !item.trainable()) continue;
      const double module = item.elements() / sharding::modules_in(item, model, expert_parallel);
      if (item.param_class() == memplan::sdk::ParamClass::embedding) head = std::max(head, module);
      else other = std::max(other, module);
    }
    return head + other;
  }

  // dtype.gradients, which the precision plugin must have set (read by handle).
  double gradient_bytes(const memplan::sdk::Context& ctx) const {
    return ctx.required_attr_double(gradients_dtype_attr_, MEMPLAN_ATTR_DTYPE_GRADIENTS);
  }

  // The modules in the order ZeRO-3 fetches them (one parameter each): the
  // embeddings, each layer (its first norm, the attention projections, its
  // second norm, the MLP or experts), the final norm and the head (the
  // embedding again when tied); in backward the reverse, each checkpointed
  // layer's forward replayed first. LoRA adapters are left out of the trace
  // (under 0.2 % of a layer's elements: they move no distance or bucket).
  // Kept between evaluations, so that building it again allocates nothing.
  struct Trace {
    std::vector<zero3::Parameter> parameters;
    std::vector<double> gradient_elements;  // per parameter: its gradient's elements, 0 when frozen
    std::vector<zero3::TraceStep> steps;
    std::vector<int32_t> front, back;  // outside the layers: before them (embeddings) and after
    // Per layer, from the first: norm before attention, attention, norm before the MLP, MLP.
    std::vector<std::vector<int32_t>> attention, mlp, norms;
    size_t layers = 0;  // entries in use in attention, mlp and norms

    void clear(size_t layer_count) {
      parameters.clear();
      gradient_elements.clear();
      steps.clear();
      front.clear();
      back.clear();
      layers = layer_count;
      for (std::vector<std::vector<int32_t>>* per_layer : {&attention, &mlp, &norms}) {
        if (per_layer->size() < layers) per_layer->resize(layers);
        for (size_t at = 0; at < layers; ++at) (*per_layer)[at].clear();
      }
    }
  };

  void build_trace(const memplan::sdk::Context& ctx, int64_t expert_parallel, bool backward, bool replay) {
    using memplan::sdk::ParamClass;
    const memplan_model& model = ctx.model();
    Trace& trace = trace_;
    int32_t embedding = -1;
    int32_t first = std::numeric_limits<int32_t>::max(), end = -1;
    for (memplan::sdk::ItemRef item : ctx.items()) {
      if (!gathered_weight(item) || item.layer() < 0) continue;
      first = std::min(first, item.layer());
      end = std::max(end, static_cast<int32_t>(item.layer() + static_cast<int32_t>(item.count())));
    }
    trace.clear(end > first ? static_cast<size_t>(end - first) : 0);
    for (memplan::sdk::ItemRef item : ctx.items()) {
      if (!gathered_weight(item)) continue;
      const double modules = sharding::modules_in(item, model, expert_parallel);
      const double elements = item.elements();
      const double bytes_per_element = item.bytes_per_element();
      // ds_numel counts the stored tensor: packed 4-bit weights sit in 16-bit storage (bnb_4bit_quant_storage).
      const double numel = bytes_per_element >= 1 ? elements : elements * bytes_per_element / 2;
      const zero3::Parameter parameter{numel / modules, elements * bytes_per_element / modules};
      // A trainable module's gradient has the whole parameter's elements (the weights are not sharded yet).
      const double gradient = item.trainable() ? elements / modules : 0.0;
      auto add = [&](std::vector<int32_t>& into) {
        for (int m = 0; m < static_cast<int>(modules); ++m) {
          into.push_back(static_cast<int32_t>(trace.parameters.size()));
          trace.parameters.push_back(parameter);
          trace.gradient_elements.push_back(gradient);
        }
      };
      const ParamClass param_class = item.param_class();
      if (item.layer() < 0) {
        const bool leading = param_class == ParamClass::embedding || param_class == ParamClass::position_embedding;
        if (param_class == ParamClass::embedding && embedding < 0)
          embedding = static_cast<int32_t>(trace.parameters.size());
        add(leading ? trace.front : trace.back);
        continue;
      }
      for (uint32_t k = 0; k < item.count(); ++k) {
        const size_t at = static_cast<size_t>(item.layer() - first) + k;
        switch (param_class) {
          case ParamClass::attention:
          case ParamClass::attention_kv:
          case ParamClass::attention_latent: add(trace.attention[at]); break;
          // Latent attention's q_a_norm and kv_a_norm run inside attention (between its projections).
          case ParamClass::norm: add(item.name().starts_with("attn.") ? trace.attention[at] : trace.norms[at]); break;
          default: add(trace.mlp[at]); break;
        }
      }
    }
    // The head multiplies by the embedding.
    if (model.tied_embeddings && embedding >= 0) trace.back.push_back(embedding);
    using zero3::Window;
    const size_t layers = trace.layers;
    auto layer_forward = [&](size_t at, Window window) {
      const std::vector<int32_t>& n = trace.norms[at];
      if (!n.empty()) trace.steps.push_back({n[0], window});
      for (int32_t p : trace.attention[at]) trace.steps.push_back({p, window});
      for (size_t k = 1; k < n.size(); ++k) trace.steps.push_back({n[k], window});
      for (int32_t p : trace.mlp[at]) trace.steps.push_back({p, window});
    };
    for (int32_t p : trace.front) trace.steps.push_back({p, Window::none});
    for (size_t at = 0; at < layers; ++at) layer_forward(at, at + 1 == layers ? Window::forward : Window::none);
    for (int32_t p : trace.back) trace.steps.push_back({p, Window::forward});
    if (!backward) return;
    // A backward step readies its module's gradient, except the head's use of a tied embedding: that
    // gradient waits in autograd's input buffer of the shared parameter until the embedding's own backward,
    // and DeepSpeed hands a parameter to the reduce bucket only from its AccumulateGrad hook (stage3.py
    // create_reduce_and_remove_grad_hooks), at the end.
    auto backward_step = [&](int32_t p, Window window, bool ready) {
      trace.steps.push_back({p, window, ready ? trace.gradient_elements[static_cast<size_t>(p)] : 0.0});
    };
    const int32_t tied_head = model.tied_embeddings ? embedding : -1;
    // The activations are all still held from the loss's backward to the end of the last layer's.
    for (auto p = trace.back.rbegin(); p != trace.back.rend(); ++p) backward_step(*p, Window::backward, *p != tied_head);
    for (size_t at = layers; at-- > 0;) {
      const Window window = at + 1 == layers ? Window::backward : Window::none;
      if (replay) layer_forward(at, window);
      const size_t begin = trace.steps.size();
      layer_forward(at, window);
      std::reverse(trace.steps.begin() + static_cast<std::ptrdiff_t>(begin), trace.steps.end());
      for (size_t i = begin; i < trace.steps.size(); ++i)
        trace.steps[i].gradient_elements = trace.gradient_elements[static_cast<size_t>(trace.steps[i].parameter)];
    }
    for (auto p = trace.front.rbegin(); p != trace.front.rend(); ++p) backward_step(*p, Window::none, true);
  }

  // Trainable weights the gathered trace leaves out (adapters).
  static bool trains_untraced_weights(const memplan::sdk::Context& ctx) {
    for (const memplan::sdk::ItemRef item : ctx.items())
      if (item.role() == memplan::sdk::Role::weights && item.trainable() && item.count() > 0 &&
          !item.non_parameter() && !gathered_weight(item))
        return true;
    return false;
  }

  static bool gathered_weight(memplan::sdk::ItemRef item) {
    return item.role() == memplan::sdk::Role::weights && !item.non_parameter() && item.count() > 0 &&
           item.param_class() != memplan::sdk::ParamClass::adapter;
  }

  struct SubGroupModule {
    int64_t at;      // the layer, -1 before the layers, int32 max after them
    uint32_t order;  // plan order, within a layer
    double elements;
  };

  int stage_ = 0;
  double sub_group_size_ = kSubGroupDefault;
  std::vector<SubGroupModule> sub_group_modules_;  // kept between evaluations (no allocation once warm)
  bool gathered_ = false;
  bool setup_whole_model_ = false;  // setup = "whole"
  zero3::Settings settings_;
  memplan::support::LayoutReader groups_;
  // Every attribute by handle, resolved in the constructor: no key compared per evaluation.
  memplan::sdk::Attribute gathers_attr_;
  memplan::sdk::Attribute gradient_buckets_attr_;  // sharding.gradient_buckets, for comm-buffers
  memplan::sdk::Attribute recompute_policy_attr_;  // recompute.policy: checkpointed layers replay their gathers
  memplan::sdk::Attribute gradients_dtype_attr_;
  memplan::sdk::Attribute lora_rank_attr_;  // lora.rank: sizes the adapter matrices that persist
  memplan::sdk::Attribute largest_module_attr_;
  memplan::sdk::Attribute gathered_parameters_attr_;
  memplan::sdk::Name gathered_forward_;
  memplan::sdk::Name all_gather_, gradient_reduction_;  // stage 3's communication (ABI 1.2 work records)
  memplan::sdk::Name optimizer_step_, optimizer_step_experts_;  // the step's memory traffic, partitioned
  double overlap_ = 1;                                  // communication_overlap
  memplan::sdk::Name gathered_backward_;
  memplan::sdk::Name module_gradient_;
  memplan::sdk::Name persistent_parameters_;
  memplan::sdk::Name setup_whole_;                    // setup = "whole": the set-up's high point beyond the partitions
  memplan::sdk::Name step_flat_gradient_;             // the step's flat 16-bit copy of the largest sub-group
  memplan::sdk::Attribute sub_group_fraction_attr_;   // zero3.step_sub_group_fraction: main_grads scaled, for offload
  // zero3.gather_staging_{forward,backward}: bytes beyond the gathered set at an all-gather's staging instant, when
  // the partitions live in host memory (coordinator.hpp); 'offload' with parameters = true counts them.
  memplan::sdk::Attribute staging_forward_attr_, staging_backward_attr_;
  memplan::sdk::Attribute backward_gradients_attr_;  // sharding.backward_gradients: the replay's backward, for comm-buffers
  memplan::sdk::Attribute zero_stage_attr_;          // zero.stage, for comm-buffers
  std::string backward_gradients_text_;              // its text, kept between evaluations
  memplan::sdk::Attribute setup_cache_emptied_attr_;  // setup.cache_emptied: stage3.py empties the cache
  memplan::sdk::Attribute setup_unfragmented_attr_;   // setup.fresh_segments: module.to, nothing freed
  Trace trace_;                 // stage 3 with gathered parameters: rebuilt on every evaluation
  zero3::Workspace workspace_;  // ... and replayed
};

}  // namespace

MEMPLAN_PLUGIN(ZeroShardingStrategy)
