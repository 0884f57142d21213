// The parallel layout of the reported rank, as the layout plugins declare it
// in attributes (sdk/include/memplan/conventions.h), read once per evaluation
// into one typed value, with one set of defaults for what no plugin declared.
//
//   field                  attribute                      declared by            default
//   data                   ranks.data                     data-parallel          1
//   tensor                 ranks.tensor                   tensor-parallel        1
//   pipeline               ranks.pipeline                 pipeline-parallel      1
//   context                ranks.context                  context-parallel       1
//   expert                 layout.expert_parallel         expert-parallel        1
//   expert_tensor          layout.expert_tensor_parallel  expert-parallel        tensor
//   sequence_parallel      layout.sequence_parallel       tensor-parallel        off
//   stage_layers           layout.stage_layers            pipeline-parallel      the model's layers
//   inflight_microbatches  layout.inflight_microbatches   pipeline-parallel      1
//   stage_has_embedding    layout.stage_has_embedding     pipeline-parallel      yes
//   stage_has_lm_head      layout.stage_has_lm_head       pipeline-parallel      yes
//
// Without a plugin for a dimension the job has one rank in it, and one stage
// holding every layer with one micro-batch in flight: the defaults. A rank
// count that is declared but not positive reads as 1 too (the built-in layout
// plugins declare only positive sizes).
//
// ranks.data is the one dimension whose absence matters besides its value:
// the sharding plugins (zero stage >= 1, fsdp) shard over the data-parallel
// group and refuse to guess its size, so `data_declared` says whether a
// strategy declared it. Before this header they read ranks.data with a
// default of 0 to tell, and every other plugin with a default of 1; both
// readings are this one.
#pragma once

#include <memplan/sdk.hpp>

#include <algorithm>
#include <cstdint>
#include <limits>

namespace memplan::support {

// The ranks of each parallel dimension: what the sharding plugins need.
struct Ranks {
  int64_t data = 1;
  int64_t tensor = 1;
  int64_t pipeline = 1;
  int64_t context = 1;
  int64_t expert = 1;  // experts are divided over these ranks, taken from data x context (x tensor, folded)
  int64_t expert_tensor = 1;  // each expert's matrices are split over these ranks (the tensor size by default)
  bool data_declared = false;

  // The ranks that hold replicas of a dense weight: the sharding group of
  // Megatron-LM's distributed optimizer (intra_dp_cp_group, data x context),
  // and the group ZeRO and FSDP are given, the same ranks.
  int64_t dense_replicas() const { return data * context; }
  // The ranks that hold replicas of an expert's shard: the expert data-parallel group (Megatron-Core's
  // intra_expt_dp_group), tensor x context x data / (expert x expert tensor); data x context / expert when the
  // experts keep the tensor-parallel split.
  int64_t expert_replicas() const {
    const int64_t carved = expert * expert_tensor;
    return carved > 0 ? std::max<int64_t>(1, data * context * tensor / carved) : 1;
  }
  // Every GPU of the job.
  int64_t world() const { return data * tensor * pipeline * context; }
};

// The ranks and the reported pipeline stage.
struct Layout : Ranks {
  bool sequence_parallel = false;
  int64_t stage_layers = 0;           // layers on the reported stage
  int64_t inflight_microbatches = 1;  // micro-batches whose activations the stage holds at once
  bool stage_has_embedding = true;
  bool stage_has_lm_head = true;

  // The reported stage holds the first or the last layers (not a middle stage).
  bool edge_stage() const { return stage_has_embedding || stage_has_lm_head; }
};

// The one default of a rank count: undeclared (or not positive) is 1 rank.
inline int64_t rank_count(int64_t declared) { return declared > 0 ? declared : 1; }

// The attribute handles, resolved once in a plugin's constructor; read() per
// evaluation costs a handle lookup per attribute and allocates nothing.
class LayoutReader {
 public:
  explicit LayoutReader(const sdk::Options& options)
      : data_(options.attribute(MEMPLAN_ATTR_RANKS_DATA)),
        tensor_(options.attribute(MEMPLAN_ATTR_RANKS_TENSOR)),
        pipeline_(options.attribute(MEMPLAN_ATTR_RANKS_PIPELINE)),
        context_(options.attribute(MEMPLAN_ATTR_RANKS_CONTEXT)),
        expert_(options.attribute(MEMPLAN_ATTR_EXPERT_PARALLEL)),
        expert_tensor_(options.attribute(MEMPLAN_ATTR_EXPERT_TENSOR_PARALLEL)),
        sequence_parallel_(options.attribute(MEMPLAN_ATTR_SEQUENCE_PARALLEL)),
        stage_layers_(options.attribute(MEMPLAN_ATTR_STAGE_LAYERS)),
        inflight_(options.attribute(MEMPLAN_ATTR_INFLIGHT_MICROBATCHES)),
        has_embedding_(options.attribute(MEMPLAN_ATTR_STAGE_HAS_EMBEDDING)),
        has_lm_head_(options.attribute(MEMPLAN_ATTR_STAGE_HAS_LM_HEAD)) {}

  // The five rank counts: five host calls.
  Ranks ranks(const sdk::Context& ctx) const {
    Ranks ranks;
    const int64_t data = ctx.attr_int(data_, 0);
    ranks.data_declared = data > 0;
    ranks.data = rank_count(data);
    ranks.tensor = tensor(ctx);
    ranks.pipeline = rank_count(ctx.attr_int(pipeline_, 1));
    ranks.context = rank_count(ctx.attr_int(context_, 1));
    ranks.expert = expert(ctx);
    ranks.expert_tensor = rank_count(ctx.attr_int(expert_tensor_, ranks.tensor));
    return ranks;
  }

  // Everything: ten host calls.
  Layout read(const sdk::Context& ctx) const {
    Layout layout;
    static_cast<Ranks&>(layout) = ranks(ctx);
    layout.sequence_parallel = ctx.attr_int(sequence_parallel_, 0) != 0;
    layout.stage_layers = stage_layers(ctx);
    layout.inflight_microbatches = ctx.attr_int(inflight_, 1);
    layout.stage_has_embedding = ctx.attr_int(has_embedding_, 1) != 0;
    layout.stage_has_lm_head = stage_has_lm_head(ctx);
    return layout;
  }

  // Single fields, with the same defaults, for a plugin that needs one or two
  // of them on every evaluation.
  int64_t data(const sdk::Context& ctx) const { return rank_count(ctx.attr_int(data_, 0)); }
  int64_t tensor(const sdk::Context& ctx) const { return rank_count(ctx.attr_int(tensor_, 1)); }
  int64_t expert(const sdk::Context& ctx) const { return rank_count(ctx.attr_int(expert_, 1)); }
  // The model is fetched only when no plugin declared the stage (it costs a
  // host call and a copy per evaluation).
  int64_t stage_layers(const sdk::Context& ctx) const {
    constexpr int64_t kAbsent = std::numeric_limits<int64_t>::min();
    const int64_t declared = ctx.attr_int(stage_layers_, kAbsent);
    return declared != kAbsent ? declared : ctx.model().layers;
  }
  bool stage_has_lm_head(const sdk::Context& ctx) const { return ctx.attr_int(has_lm_head_, 1) != 0; }

 private:
  sdk::Attribute data_, tensor_, pipeline_, context_, expert_, expert_tensor_, sequence_parallel_, stage_layers_, inflight_,
      has_embedding_, has_lm_head_;
};

}  // namespace memplan::support
