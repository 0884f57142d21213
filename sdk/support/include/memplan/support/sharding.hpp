// Helpers shared by the sharding strategies 'zero', 'fsdp' and 'offload'
// (header-only, compiled into each plugin): dividing items over the sharding
// group, and the sizes of the weights gathered before use.
#pragma once

#include <memplan/sdk.hpp>
#include <memplan/support/layout.hpp>

#include <algorithm>
#include <limits>
#include <cstdint>
#include <vector>

namespace memplan::support::sharding {

// Set by a sharding plugin that keeps only a shard of the weights and gathers
// each module or unit before use (zero stage 3, fsdp): 1 when it counts the
// gathered working set on the GPU, 0 when it does not. Read by 'offload',
// whose parameters = true needs it (conventions.h).
inline constexpr const char* kGatherAttr = MEMPLAN_ATTR_GATHERS_PARAMETERS;

// The groups the plugins shard over are those of support::Ranks
// (layout.hpp): Megatron-LM's distributed optimizer shards over the
// data-parallel x context-parallel group (intra_dp_cp_group,
// Ranks::dense_replicas), and over the expert data-parallel group
// (intra_expt_dp_group, dp x cp / ep) for the experts; DeepSpeed's ZeRO and
// PyTorch FSDP shard over the group they are given, the same ranks. Both
// refuse to guess the data-parallel size: Ranks::data_declared.

// Divides the GPU items for which `sharded(item)` holds: dense items by
// `dense`, expert items by `expert`. Buffers stored with the weights
// (non_parameter: bitsandbytes' quant_state, GPTQ's scales) stay whole: FSDP
// flattens and shards a module's parameters only (torch/distributed/fsdp
// _flat_param.py, FlatParamHandle over module.named_parameters), and ZeRO-3
// partitions param.data only (DeepSpeed partition_parameters.py).
// `sharded` is called with an sdk::ItemRef.
template <typename Predicate>
void shard(sdk::Context& ctx, double dense, double expert, Predicate sharded) {
  for (sdk::ItemRef item : ctx.items()) {
    if (item.device() != sdk::Device::gpu || item.non_parameter() || !sharded(item)) continue;
    const double ranks = item.param_class() == sdk::ParamClass::expert ? expert : dense;
    if (ranks == 1) continue;
    item.set_elements(item.elements() / ranks);
  }
}

// Weight elements on this rank (after tensor, pipeline and expert splits,
// before any sharding), by where they sit.
// Bytes are each item's own: a gathered working set holds every weight in
// the dtype it is stored in (under 'quantized' the 4-bit linear layers, and
// the embeddings, norms and LM head in 16 bits), or in `gather_bytes` when the
// sharding plugin casts before gathering (FSDP's MixedPrecision param_dtype);
// `linear_gather_bytes`, when positive, prices the linear layers' weights
// (Float8 all-gather).
struct WeightLayout {
  std::vector<double> per_layer;        // full weights of each layer on this rank, from first_layer on
  std::vector<double> trainable_layer;  // of which trainable
  std::vector<double> per_layer_bytes;  // the bytes of per_layer's weights
  int32_t first_layer = 0;
  double outside_layers = 0;            // embeddings, final norm, LM head: not in a layer
  double outside_bytes = 0;
  double trainable_outside = 0;
  double total = 0;
  double total_bytes = 0;
};

// Set by the sharding plugins for 'comm-buffers' (conventions.h).
inline constexpr const char* kGradientBucketsAttr = MEMPLAN_ATTR_GRADIENT_BUCKETS;

// The classes of linear (matrix) layers: the one list precision recipes and
// sharding rules share (a new matrix class goes here).
inline bool is_linear(sdk::ParamClass param_class) {
  return param_class == sdk::ParamClass::attention || param_class == sdk::ParamClass::attention_kv ||
         param_class == sdk::ParamClass::attention_latent || param_class == sdk::ParamClass::mlp || param_class == sdk::ParamClass::expert;
}

// A linear weight packed below one byte per element (a 4-bit base): the one rule the activation model (what
// 4-bit layers keep) and the recompute plugin (reentrant_when_packed) share.
inline bool is_packed_linear(const sdk::ItemRef& item) {
  return item.role() == sdk::Role::weights && item.bytes_per_element() < 1 && is_linear(item.param_class());
}

// Fills `layout`, a plugin state member kept between evaluations: its vectors
// keep their capacity, so a warm evaluation allocates nothing.
inline void weight_layout(const sdk::Context& ctx, WeightLayout& layout, double gather_bytes = 0,
                          double linear_gather_bytes = 0) {
  layout.per_layer.clear();
  layout.trainable_layer.clear();
  layout.per_layer_bytes.clear();
  layout.first_layer = 0;
  layout.outside_layers = 0;
  layout.outside_bytes = 0;
  layout.trainable_outside = 0;
  layout.total = 0;
  layout.total_bytes = 0;
  auto bytes_of = [&](sdk::ItemRef item) {
    if (linear_gather_bytes > 0 && is_linear(item.param_class())) return linear_gather_bytes;
    return gather_bytes > 0 ? gather_bytes : item.bytes_per_element();
  };
  int32_t begin = std::numeric_limits<int32_t>::max();
  int32_t end = -1;
  for (sdk::ItemRef item : ctx.items()) {
    if (item.role() != sdk::Role::weights || item.non_parameter() || item.layer() < 0 || item.count() == 0) continue;
    begin = std::min(begin, item.layer());
    end = std::max(end, static_cast<int32_t>(item.layer() + static_cast<int32_t>(item.count())));
  }
  if (end > begin) {
    layout.first_layer = begin;
    layout.per_layer.assign(static_cast<size_t>(end - begin), 0.0);
    layout.trainable_layer.assign(static_cast<size_t>(end - begin), 0.0);
    layout.per_layer_bytes.assign(static_cast<size_t>(end - begin), 0.0);
  }
  for (sdk::ItemRef item : ctx.items()) {
    // Gathering moves parameters; buffers stored with them are already whole.
    if (item.role() != sdk::Role::weights || item.non_parameter()) continue;
    const double elements = item.elements();
    const uint32_t count = item.count();
    layout.total += elements * count;
    layout.total_bytes += elements * bytes_of(item) * count;
    if (item.layer() < 0) {
      layout.outside_layers += elements * count;
      layout.outside_bytes += elements * bytes_of(item) * count;
      if (item.trainable()) layout.trainable_outside += elements * count;
      continue;
    }
    for (uint32_t k = 0; k < count; ++k) {
      const size_t at = static_cast<size_t>(item.layer() - begin) + k;
      layout.per_layer[at] += elements;
      layout.per_layer_bytes[at] += elements * bytes_of(item);
      if (item.trainable()) layout.trainable_layer[at] += elements;
    }
  }
}

// The same into a new WeightLayout (allocates its vectors).
inline WeightLayout weight_layout(const sdk::Context& ctx, double gather_bytes = 0, double linear_gather_bytes = 0) {
  WeightLayout layout;
  weight_layout(ctx, layout, gather_bytes, linear_gather_bytes);
  return layout;
}

// The largest sum of `values` over aligned windows of `width` consecutive
// entries (FSDP units of `width` layers).
inline double largest_window(const std::vector<double>& values, int64_t width) {
  double largest = 0;
  for (size_t start = 0; start < values.size(); start += static_cast<size_t>(width)) {
    double sum = 0;
    for (size_t k = start; k < std::min(values.size(), start + static_cast<size_t>(width)); ++k) sum += values[k];
    largest = std::max(largest, sum);
  }
  return largest;
}

// Modules (parameterised torch modules, which DeepSpeed ZeRO-3 gathers one at
// a time) in one instance of an item: the dense MLP is 2 (GELU: up, down) or 3
// (SwiGLU: gate, up, down) linear layers; the experts item holds E / ep
// experts of as many; a layer's norm item holds as many norms as it has
// hidden-wide norm weights (`norms`: 2, Gemma's 4), and at least one (latent
// attention's q_a_norm and kv_a_norm, narrower than h); anything else (q, k,
// v, o, router, embeddings, LM head, final norm) is one module.
inline double modules_in(sdk::ItemRef item, const memplan_model& model, int64_t expert_parallel) {
  const double projections = model.gated_mlp ? 3 : 2;
  switch (item.param_class()) {
    case sdk::ParamClass::mlp: return projections;
    case sdk::ParamClass::expert:
      return projections * std::max<double>(1.0, static_cast<double>(model.experts) / static_cast<double>(expert_parallel));
    case sdk::ParamClass::norm: {
      if (item.layer() < 0) return 1;
      const double width = static_cast<double>(model.hidden) * (model.layer_norm != 0 ? 2 : 1);
      return width > 0 ? std::max(1.0, std::floor(item.elements() / width + 0.5)) : 1;
    }
    case sdk::ParamClass::final_norm: return 1;
    default: return 1;
  }
}

// Elements of the largest module among the weight items (trainable ones only
// when `trainable_only`).
inline double largest_module(const sdk::Context& ctx, int64_t expert_parallel, bool trainable_only) {
  const memplan_model& model = ctx.model();
  double largest = 0;
  for (sdk::ItemRef item : ctx.items()) {
    if (item.role() != sdk::Role::weights || item.non_parameter() || item.count() == 0 ||
        (trainable_only && !item.trainable()))
      continue;
    largest = std::max(largest, item.elements() / modules_in(item, model, expert_parallel));
  }
  return largest;
}

// Adds one working-set item (role buffers, outside the layers), in `pool`
// (sdk::Pool::reserve for blocks an allocator pool keeps beyond its tensors).
inline void add_buffer(sdk::Context& ctx, sdk::Name name, sdk::Lifetime lifetime, double elements,
                       double bytes_per_element, sdk::Pool pool = sdk::Pool::allocated) {
  if (elements <= 0) return;
  ctx.add(sdk::NewItem{.name = name, .role = sdk::Role::buffers, .lifetime = lifetime, .pool = pool,
                       .elements = elements, .bytes_per_element = bytes_per_element});
}

// The same with a name interned on every call, for a plugin not on the fast
// path (fsdp, offload); a plugin on it interns in its constructor.
inline void add_buffer(sdk::Context& ctx, const char* name, sdk::Lifetime lifetime, double elements,
                       double bytes_per_element, sdk::Pool pool = sdk::Pool::allocated) {
  if (elements <= 0) return;
  add_buffer(ctx, ctx.intern(name), lifetime, elements, bytes_per_element, pool);
}

// The optimizer step's memory traffic (support/optimizer_traffic.hpp) on a
// rank that steps only its partition: the dense weights' record divided by
// `dense` ranks, the experts' by `expert`; a divisor of 0 removes the step
// from the GPU (an optimizer on the CPU). The names are the plugin's interned
// MEMPLAN_WORK_OPTIMIZER_STEP and MEMPLAN_WORK_OPTIMIZER_STEP_EXPERTS.
inline void partition_optimizer_step(sdk::Context& ctx, sdk::Name dense_step, sdk::Name expert_step, double dense,
                                     double expert) {
  ctx.for_each_work([&](memplan_work& work) {
    if (work.name == dense_step.text) work.amount = dense > 0 ? work.amount / dense : 0;
    if (work.name == expert_step.text) work.amount = expert > 0 ? work.amount / expert : 0;
  });
}

// Fully sharded data parallelism's communication (ZeRO stage 3, FSDP; ABI 1.2
// work records): each micro-batch all-gathers the stage's weights, `bytes`
// as they are gathered, before forward and (`gather_backward`: resharded after
// forward) again before backward, and reduce-scatters the gradients after its
// backward; the step's gradient all-reduce (MEMPLAN_WORK_GRADIENT_REDUCTION,
// which the step-work plugin records) becomes that reduce-scatter. At one
// micro-batch that is 3 x the parameters' volume against plain data
// parallelism's 2 x (Rajbhandari et al. 2020, section 7.2.2). The group: the
// `ranks` of the shard, `stride` ranks apart. `overlap` of each collective may
// hide behind the compute of its pass (prefetching: FSDP issues the next
// unit's all-gather while the current one computes, Zhao et al. 2023, arXiv
// 2304.11277, section 3.3; DeepSpeed ZeRO-3 prefetches stage3_prefetch_bucket_size
// elements ahead), as far as that compute lasts (the host's rule).
inline void fully_sharded_communication(sdk::Context& ctx, sdk::Name gather, sdk::Name gradient_reduction,
                                        int64_t ranks, int64_t stride, double bytes, bool gather_backward,
                                        double overlap) {
  if (!ctx.training() || ranks <= 1) return;
  // The records keep their groups (the dense gradients' and the experts' are reduced over different ranks).
  ctx.for_each_work([&](memplan_work& work) {
    if (work.name != gradient_reduction.text) return;
    work.collective = MEMPLAN_COLLECTIVE_REDUCE_SCATTER;
    work.pass = MEMPLAN_PASS_BACKWARD;
    work.overlap = overlap;
  });
  for (sdk::Pass pass : {sdk::Pass::forward, sdk::Pass::backward}) {
    if (pass == sdk::Pass::backward && !gather_backward) break;
    ctx.add_work(sdk::Work{.name = gather, .kind = sdk::WorkKind::collective, .pass = pass, .amount = bytes,
                           .efficiency = 1.0, .collective = sdk::Collective::all_gather, .ranks = ranks,
                           .stride = stride, .overlap = overlap});
  }
}

}  // namespace memplan::support::sharding
