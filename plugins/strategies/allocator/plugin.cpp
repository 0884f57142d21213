// 'allocator': what PyTorch's CUDA caching allocator reserves beyond the bytes
// the tensors ask for (phase overhead; c10/cuda/CUDACachingAllocator.cpp):
//
//   rounding       every block is rounded up to a multiple of 512 bytes
//                  (kMinBlockSize); an allocation of 10 MiB or more
//                  (kMinLargeAlloc) gets a segment of its own, rounded up to
//                  2 MiB (kRoundLarge). Smaller ones share 2 MiB (up to 1 MiB)
//                  or 20 MiB segments. memplan rounds each item instance as one
//                  allocation; an item that stands for several tensors (a
//                  layer's activations) rounds once where the allocator rounds
//                  each tensor, so this is a lower bound (at most 2 MiB per
//                  tensor).
//   fragmentation  cached blocks that are free but too small or split for the
//                  next request: a fraction `fragmentation` of the memory the
//                  step allocates and frees (activations, gradients,
//                  transients). Persistent tensors allocated once (weights,
//                  master weights, optimizer states, KV cache) are taken to
//                  pack without it.
//
//   stream pools   the allocator reuses a freed block only for allocations on
//                  the stream that allocated it (get_free_block skips blocks of
//                  other streams), so each side stream keeps a pool of its own
//                  (items flagged with a stream, MEMPLAN_ITEM_STREAM_*, such as
//                  FSDP1's unshard and post-backward streams). A pool grows to
//                  the most its stream's tensors hold at once over the step and
//                  stays reserved in every phase after: forward, backward and
//                  the optimizer step each hold the pools' high points, whatever
//                  of them is live then. The item `allocator.stream_pools` of
//                  each phase is that high point less what the host's step rule
//                  already counts there. Side-stream blocks are reused exactly
//                  (the same tensors every step), so they get rounding and no
//                  fragmentation margin.
//   logits-sized   a cached block serves a request only if it is at least as
//                  large (get_free_block), so the loss's tensors (tokens x
//                  vocabulary) cannot reuse the blocks the layers leave, and a
//                  smaller tensor left in a split loss block forces a new
//                  segment at the next loss: the compute stream keeps the
//                  smaller requests' high point and the logits-sized ones'
//                  side by side, as two pools (add_pools).
//   expandable     expandable_segments = true (PYTORCH_ALLOC_CONF
//                  expandable_segments:True): one segment per stream and
//                  pool grows by mapped pages (find_expandable_block,
//                  map_block), every block is a 512-byte multiple
//                  (should_split), free blocks merge with their neighbours:
//                  no 2 MiB rounding, no logits-sized pool, no loss-path
//                  replay excess; fragmentation stays the user's knob.
//   releasable     the pools' items are free segments, which the allocator
//                  frees and retries when cudaMalloc fails
//                  (release_cached_blocks): flagged MEMPLAN_ITEM_RELEASABLE,
//                  the host lowers them where the device would be full.
//
// Every item the allocator hands out is considered, whatever its role: the
// tensors of the job and the buffers that are tensors too (FSDP's gathered
// parameters, DDP's gradient buckets, the cuBLAS workspace), but not memory
// outside the allocator (pool `device`: the CUDA context, NCCL's buffers) nor
// what other plugins already counted as the allocator's reserve. The added
// items are the allocator's reserve (pool `reserve`): they count in reserved
// and device memory, not in allocated memory. They follow the lifetime, first
// layer and count of what they come from, so the step timeline sees them when
// their tensors are alive.
#include <memplan/sdk.hpp>
#include <memplan/support/format.hpp>
#include <memplan/support/items.hpp>
#include <memplan/support/varying_lengths.hpp>

#include "step_lengths.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

namespace {

namespace sdk = memplan::sdk;

constexpr double kMinBlockSize = 512;                  // kMinBlockSize
constexpr double kMinLargeAlloc = 10.0 * 1024 * 1024;  // kMinLargeAlloc: own segment from here
constexpr double kRoundLarge = 2.0 * 1024 * 1024;      // kRoundLarge

constexpr std::array<memplan_option_spec, 10> kOptions{{
    {"fragmentation", MEMPLAN_OPTION_DOUBLE,
     "reserved-but-unused memory as a fraction of what the step allocates and frees (activations, gradients, "
     "transients), 0 to 1",
     "0.1", nullptr},
    {"rounding", MEMPLAN_OPTION_BOOL, "round every allocation as the caching allocator does (512 B; 2 MiB segments)",
     "true", nullptr},
    {"expandable_segments", MEMPLAN_OPTION_BOOL,
     "PYTORCH_ALLOC_CONF=expandable_segments:True: one growing segment per stream and pool, blocks rounded to "
     "512 B only, no segments of their own for the logits-sized requests",
     "false", nullptr},
    {"length_min", MEMPLAN_OPTION_INT,
     "the shortest sample's tokens, where steps run at their samples' own lengths (batches padded to their "
     "longest, no packing) up to seq_len: each step longer than all before maps new segments for the loss "
     "path's logits-sized requests and the shorter ones stay (needs run_samples)",
     "every step at seq_len", nullptr},
    {"length_mean", MEMPLAN_OPTION_DOUBLE,
     "with length_sd: the samples' tokens are a normal of this mean cut to [length_min, seq_len]", "uniform",
     nullptr},
    {"length_sd", MEMPLAN_OPTION_DOUBLE, "with length_mean: the normal's standard deviation, tokens", "uniform",
     nullptr},
    {"length_truncated", MEMPLAN_OPTION_BOOL,
     "with length_mean and length_sd: samples longer than seq_len are cut to seq_len (they run at it) instead of "
     "dropped", "false", nullptr},
    {"run_samples", MEMPLAN_OPTION_INT,
     "samples the whole run trains on one GPU (rows x epochs / data-parallel ranks), with length_min: its "
     "steps are these over micro_batch", "none", nullptr},
    {"length_quantile", MEMPLAN_OPTION_DOUBLE,
     "with length_min: plan with this quantile (0 to 1) of the pool over random orders of the samples instead of "
     "its mean (0.9: nine orders in ten stay below)", "the mean", nullptr},
    {"step_lengths", MEMPLAN_OPTION_STRING,
     "the run's micro-batches on one GPU in the order it trains on them, each one's tokens (its padded length, at "
     "most seq_len), as a list of integers or a string of them separated by commas, spaces or new lines: the loss "
     "path's segments followed over this order instead of the expectation over orders that length_min gives",
     "none", nullptr},
}};

// Bytes the allocator reserves for one allocation of `bytes`, beyond them.
// With expandable segments every block is round_size's 512-byte multiple:
// alloc_block maps pages into the stream's one segment instead of a
// get_allocation_size segment, and should_split splits any block that leaves
// 512 B or more (CUDACachingAllocator.cpp, try_allocate_expandable_block).
double rounding_waste(double bytes, bool expandable) {
  if (bytes <= 0) return 0;
  const double granule = bytes >= kMinLargeAlloc && !expandable ? kRoundLarge : kMinBlockSize;
  // bytes > 0, so the quotient is non-negative: the inline ceiling, no libm call per item.
  return memplan::support::ceil_nonnegative(bytes / granule) * granule - bytes;
}


class AllocatorOverhead {
 public:
  static constexpr sdk::PluginInfo info{"allocator", "1.10.0",
                                        "PyTorch caching allocator: block rounding and fragmentation",
                                        sdk::Kind::strategy, sdk::Phase::overhead, sdk::Reads::batch_and_seq_len};
  static std::span<const memplan_option_spec> options() { return kOptions; }

  explicit AllocatorOverhead(sdk::Options& options)
      : fragmentation_(options.number("fragmentation").value_or(0.1)),
        rounding_(options.boolean("rounding").value_or(true)),
        expandable_(options.boolean("expandable_segments").value_or(false)),
        rounding_name_(options.intern("allocator.rounding")),
        fragmentation_name_(options.intern("allocator.fragmentation")),
        stream_pools_name_(options.intern("allocator.stream_pools")),
        setup_cache_emptied_attr_(options.attribute(MEMPLAN_ATTR_SETUP_CACHE_EMPTIED)),
        setup_unfragmented_attr_(options.attribute(MEMPLAN_ATTR_SETUP_FRESH_SEGMENTS)),
        setup_largest_free_attr_(options.attribute(MEMPLAN_ATTR_SETUP_LARGEST_FREE_BLOCK)),
        loss_segments_attr_(options.attribute(MEMPLAN_ATTR_LOSS_SEGMENTS)),
        loss_segments_report_(options.attribute(MEMPLAN_ATTR_REPORT_PREFIX "allocator_loss_segments")),
        loss_first_step_attr_(options.attribute(MEMPLAN_ATTR_LOSS_FIRST_STEP)),
        loss_longer_step_attr_(options.attribute(MEMPLAN_ATTR_LOSS_LONGER_STEP)),
        loss_longer_segments_attr_(options.attribute(MEMPLAN_ATTR_LOSS_LONGER_SEGMENTS)),
        loss_segments_p10_report_(options.attribute(MEMPLAN_ATTR_REPORT_PREFIX "allocator_loss_segments_p10")),
        loss_segments_p90_report_(options.attribute(MEMPLAN_ATTR_REPORT_PREFIX "allocator_loss_segments_p90")) {
    if (!std::isfinite(fragmentation_) || fragmentation_ < 0 || fragmentation_ >= 1)
      options.fail("fragmentation", "must be a fraction from 0 up to (not including) 1, got " +
                                        memplan::support::number(fragmentation_));
    read_lengths(options);
  }

  void apply(sdk::Context& ctx) {
    // One group per (lifetime, first layer, count): the timeline treats items
    // with the same layers as one layer.
    // The groups are found first and added after: adding invalidates items().
    groups_.clear();  // keeps its capacity: no allocation once warm
    bool side_streams = false, setup = false, logits = false;
    const bool setup_unfragmented = ctx.attr_double(setup_unfragmented_attr_, 0) > 0;
    for (const sdk::ItemRef item : ctx.items()) {
      if (item.device() != sdk::Device::gpu || item.count() == 0 || item.pool() != sdk::Pool::allocated) continue;
      const double bytes = memplan::support::instance_bytes(item);
      Group& group = find(groups_, item);
      if (rounding_) group.rounding += rounding_waste(bytes, expandable_);
      // A side stream's blocks are reused exactly: no fragmentation margin.
      // The set-up's allocations get it like the step's: its plugin counts the
      // blocks of the last unit and the root, not what the units before left
      // split and scattered (fsdp/setup_cache.hpp, "Not modelled").
      // Not when the set-up's plugin says its tensors went into fresh segments
      // (setup.fresh_segments: a whole model moved onto the GPU at once).
      if (item.lifetime() != sdk::Lifetime::persistent && item.stream() == MEMPLAN_STREAM_COMPUTE &&
          !(item.lifetime() == sdk::Lifetime::setup && setup_unfragmented))
        group.fragmentation += fragmentation_ * bytes;
      side_streams = side_streams || item.stream() != MEMPLAN_STREAM_COMPUTE;
      setup = setup || item.lifetime() == sdk::Lifetime::setup;
      // Expandable segments: one segment per stream and pool, whose free
      // blocks merge across what were segment boundaries; no logits pool.
      logits = logits || (!expandable_ && item.stream() == MEMPLAN_STREAM_COMPUTE && logits_sized(item));
    }
    for (const Group& group : groups_) {
      add(ctx, group, rounding_name_, group.rounding);
      add(ctx, group, fragmentation_name_, group.fragmentation);
    }
    // In inference the logits come in the same pass as the layers' transients:
    // the size classes change nothing there, so the pools are not worked out.
    if (varying_ && !ctx.training())
      ctx.fail(std::string(lengths_option()) +
               " describes training steps of varying lengths (the loss path's segments); this plan serves: "
               "remove " + (listed_ ? "step_lengths" : "the length_* options and run_samples"));
    if (side_streams || setup || (logits && ctx.training()) || varying_) add_pools(ctx);
  }

 private:
  struct Group {
    sdk::Lifetime lifetime;
    int32_t layer;
    uint32_t count;
    uint32_t stream;
    double rounding = 0;       // per instance
    double fragmentation = 0;  // per instance
  };

  static Group& find(std::vector<Group>& groups, const sdk::ItemRef& item) {
    for (Group& group : groups)
      if (group.lifetime == item.lifetime() && group.layer == item.layer() && group.count == item.count() &&
          group.stream == item.stream())
        return group;
    groups.push_back(Group{item.lifetime(), item.layer(), item.count(), item.stream()});
    return groups.back();
  }

  static void add(sdk::Context& ctx, const Group& group, sdk::Name name, double bytes) {
    if (!memplan::support::add_bytes_if_any(ctx, {.name = name, .role = sdk::Role::overhead,
                                                  .lifetime = group.lifetime, .pool = sdk::Pool::reserve,
                                                  .layer = group.layer, .count = group.count, .bytes = bytes}))
      return;
    // A side stream's rounding belongs to its pool.
    if (group.stream != MEMPLAN_STREAM_COMPUTE) ctx.items()[ctx.items().size() - 1].set_stream(group.stream);
  }

  // The reserve of the pools in the forward, backward and optimizer phases:
  // each side stream's pool at its high point over the step; the compute
  // stream's memory as the host's step rule counts it (docs/estimate.md,
  // section 4), but never below what the set-up left reserved in it (items
  // of lifetime setup: the blocks wrapping or loading allocated and freed,
  // still cached when the first step starts, with the persistent tensors
  // that existed then: plugin_abi.h, memplan_exists_at_setup); less what the
  // host's rule counts over the whole plan.
  //
  // The logits-sized requests (logits_sized) cannot reuse the smaller blocks
  // the rest of the step leaves cached: get_free_block hands out a cached
  // block only when it is at least the request's size, and a segment goes
  // back to the device only on empty_cache or when cudaMalloc fails
  // (release_cached_blocks). Step after step the two classes end up in
  // segments of their own: the compute stream then reserves the high point of
  // the smaller requests (with the set-up's floor) plus the high point of the
  // logits-sized ones, as if they were two pools (never less than the one
  // pool's figure). Where the device is full, cudaMalloc fails and the
  // allocator frees its free segments and retries: the pools' items are
  // releasable, the host lowers them there.
  void add_pools(sdk::Context& ctx) {
    const bool accumulating = ctx.workload().grad_accum > 1;
    streams_.clear();
    for (const sdk::ItemRef item : ctx.items())
      if (counted(item) && item.stream() != MEMPLAN_STREAM_COMPUTE &&
          std::find(streams_.begin(), streams_.end(), item.stream()) == streams_.end())
        streams_.push_back(item.stream());
    const auto compute = [](const sdk::ItemRef& item) {
      return counted(item) && item.stream() == MEMPLAN_STREAM_COMPUTE;
    };
    // One pass for the compute stream's three views: all its items, the
    // smaller requests, the logits-sized ones.
    const auto [one_pool, smaller, larger] = compute_stream_classes(ctx, accumulating);
    // Where the activation plugin knows the order of the loss path's
    // logits-sized requests, their segments settle at what a replay of that
    // order gives (MEMPLAN_ATTR_LOSS_SEGMENTS), which can exceed the most
    // they hold at once: the pool is never less.
    const double larger_high = std::max({larger[0], larger[1], larger[2]});
    const double loss_segments = varying_ ? varying_length_pool(ctx) : ctx.attr_double(loss_segments_attr_, 0);
    if (loss_segments > 0) ctx.set_attr(loss_segments_report_, std::round(loss_segments));
    // The replay's settled segments and the two-pool figure rest on separate
    // cudaMalloc segments; with expandable segments the compute stream's
    // large pool is one segment (find_expandable_block) whose free blocks
    // merge with their neighbours (try_merge_blocks) and whose free tail
    // grows by mapping pages (get_free_block's expandable_size), so neither
    // applies.
    const double loss_excess = expandable_ ? 0.0 : std::max(0.0, loss_segments - larger_high);
    const PhaseTotals margin = loss_excess > 0 ? step_rule(ctx, accumulating, [this](const sdk::ItemRef& item) {
      return counted(item) && item.named(fragmentation_name_);
    })
                                               : PhaseTotals{};
    double setup_floor = 0;
    // A plugin whose framework empties the cache after its set-up (DeepSpeed's
    // stage-3 optimizer: stage3.py defragment calls empty_cache) sets
    // setup.cache_emptied: the set-up's blocks are returned, no floor.
    const bool emptied = ctx.attr_double(setup_cache_emptied_attr_, 0) > 0;
    for (const sdk::ItemRef item : ctx.items())
      if (!emptied && compute(item) &&
          memplan_exists_at_setup(static_cast<int32_t>(item.role()), static_cast<int32_t>(item.lifetime())))
        setup_floor += item.bytes();
    double side_pools = 0;
    for (uint32_t stream : streams_) {
      const PhaseTotals pool = step_rule(ctx, accumulating, [stream](const sdk::ItemRef& item) {
        return counted(item) && item.stream() == stream;
      });
      side_pools += std::max({pool[0], pool[1], pool[2]});
    }
    // Where the set-up left a free block B that holds the largest logits-sized
    // item (setup.largest_free_block), the logits-sized requests are served
    // from the set-up's cached segments, which best fit splits, as are the
    // smaller ones: up to B of the logits pool shares the set-up's free room
    // with the smaller requests, and only the rest maps segments of its own.
    // (The largest item, not request: an item may hold several tensors, so
    // the test errs towards segments of their own.)
    const double setup_free_block = emptied ? 0.0 : ctx.attr_double(setup_largest_free_attr_, 0);
    const double shared_room =
        setup_free_block > 0 && largest_logits_item(ctx) <= setup_free_block ? setup_free_block : 0.0;
    PhaseTotals wanted{};
    for (size_t phase = 0; phase < wanted.size(); ++phase) {
      const double together = std::max(one_pool[phase], setup_floor) + side_pools;
      const double larger = larger_high + std::max(0.0, loss_excess - margin[phase]);
      const double in_setup = std::min(larger, shared_room);
      const double apart =
          std::max(smaller[phase] + in_setup, setup_floor) + (larger - in_setup) + side_pools;
      wanted[phase] = expandable_ ? together : std::max(together, apart);
    }
    const PhaseTotals counted_now = step_rule(ctx, accumulating, counted);
    constexpr std::array<sdk::Lifetime, 3> kPhaseLifetimes{
        sdk::Lifetime::transient_forward, sdk::Lifetime::transient_backward, sdk::Lifetime::transient_optimizer};
    // Free segments: the host lowers them where the device would be full
    // (plugin_abi.h, MEMPLAN_ITEM_RELEASABLE).
    for (size_t phase = 0; phase < kPhaseLifetimes.size(); ++phase)
      if (memplan::support::add_bytes_if_any(
              ctx, {.name = stream_pools_name_, .role = sdk::Role::overhead, .lifetime = kPhaseLifetimes[phase],
                    .pool = sdk::Pool::reserve, .bytes = wanted[phase] - counted_now[phase]}))
        ctx.items()[ctx.items().size() - 1].set_releasable(true);
  }

  // The requests of the size of the logits (tokens x vocabulary), as the
  // activation plugins flag them (plugin_abi.h MEMPLAN_ITEM_VOCAB_SIZED;
  // megatron: the logits, the held output, the saved softmax or log-softmax
  // and the loss's forward and backward transients; inference: the logits and
  // the sampler's), each tensor larger than the blocks a layer's tensors leave.
  static bool logits_sized(const sdk::ItemRef& item) { return item.vocab_sized(); }

  // The largest logits-sized item of the compute stream, one instance.
  static double largest_logits_item(const sdk::Context& ctx) {
    double largest = 0;
    for (const sdk::ItemRef item : ctx.items())
      if (counted(item) && item.stream() == MEMPLAN_STREAM_COMPUTE && logits_sized(item))
        largest = std::max(largest, memplan::support::instance_bytes(item));
    return largest;
  }

  // Items in reserved memory: the allocator's tensors and its reserve.
  static bool counted(const sdk::ItemRef& item) {
    return item.device() == sdk::Device::gpu && item.count() > 0 && item.pool() != sdk::Pool::device;
  }

  // Forward, backward and optimizer-step high points of the items `selected`
  // picks, by the host's rule (plugin_abi.h memplan_step_high_points_n), with
  // the largest single layer's gradients and activations found here.
  using PhaseTotals = std::array<double, 3>;
  template <typename Selected>
  PhaseTotals step_rule(const sdk::Context& ctx, bool accumulating, Selected selected) {
    // By lifetime; set-up items are gone before the step this rule describes.
    std::array<double, MEMPLAN_LIFETIME_COUNT> lifetime{};
    layers_.clear();
    double largest_gradient_layer = 0, largest_activation_layer = 0;
    for (const sdk::ItemRef item : ctx.items()) {
      if (!selected(item)) continue;
      const auto kind = static_cast<size_t>(item.lifetime());
      if (kind < lifetime.size()) lifetime[kind] += item.bytes();
      const bool gradient = item.lifetime() == sdk::Lifetime::gradient;
      if (!gradient && item.lifetime() != sdk::Lifetime::activation) continue;
      double& largest = gradient ? largest_gradient_layer : largest_activation_layer;
      if (item.layer() < 0) {
        largest = std::max(largest, item.bytes());
        continue;
      }
      layers_.push_back(LayerSum{item.lifetime(), item.layer(), item.count(), memplan::support::instance_bytes(item)});
    }
    // A layer holds one instance of every item whose range covers it (a MoE
    // model's dense first layers and expert layers share the attention
    // items): the largest sum is at a range's first layer.
    for (const LayerSum& start : layers_) {
      double bytes = 0;
      for (const LayerSum& other : layers_)
        if (other.lifetime == start.lifetime && other.layer <= start.layer &&
            start.layer < static_cast<int64_t>(other.layer) + static_cast<int64_t>(other.count))
          bytes += other.bytes;
      double& largest =
          start.lifetime == sdk::Lifetime::gradient ? largest_gradient_layer : largest_activation_layer;
      largest = std::max(largest, bytes);
    }
    PhaseTotals high{};
    memplan_step_high_points_n(lifetime.data(), lifetime.size(), largest_gradient_layer, largest_activation_layer,
                               accumulating ? 1 : 0, high.data());
    return high;
  }

  // step_rule over the compute stream's items three ways at once: all of
  // them, those that are not logits-sized, and the logits-sized ones (the
  // same sums and single-layer bounds as three calls, in one pass over the
  // items and one over their layers).
  std::array<PhaseTotals, 3> compute_stream_classes(const sdk::Context& ctx, bool accumulating) {
    struct Sums {
      std::array<double, MEMPLAN_LIFETIME_COUNT> lifetime{};
      double largest_gradient_layer = 0;
      double largest_activation_layer = 0;
    };
    std::array<Sums, 3> sums{};  // 0: all, 1: smaller, 2: logits-sized
    layers_.clear();
    for (const sdk::ItemRef item : ctx.items()) {
      if (!counted(item) || item.stream() != MEMPLAN_STREAM_COMPUTE) continue;
      const uint8_t kind = logits_sized(item) ? 2 : 1;
      const auto lifetime = static_cast<size_t>(item.lifetime());
      if (lifetime < sums[0].lifetime.size()) {
        sums[0].lifetime[lifetime] += item.bytes();
        sums[kind].lifetime[lifetime] += item.bytes();
      }
      const bool gradient = item.lifetime() == sdk::Lifetime::gradient;
      if (!gradient && item.lifetime() != sdk::Lifetime::activation) continue;
      if (item.layer() < 0) {
        for (const size_t view : {size_t{0}, size_t{kind}}) {
          double& largest = gradient ? sums[view].largest_gradient_layer : sums[view].largest_activation_layer;
          largest = std::max(largest, item.bytes());
        }
        continue;
      }
      layers_.push_back(
          LayerSum{item.lifetime(), item.layer(), item.count(), memplan::support::instance_bytes(item), kind});
    }
    for (const LayerSum& start : layers_) {
      double all = 0, same = 0;
      for (const LayerSum& other : layers_)
        if (other.lifetime == start.lifetime && other.layer <= start.layer &&
            start.layer < static_cast<int64_t>(other.layer) + static_cast<int64_t>(other.count)) {
          all += other.bytes;
          if (other.kind == start.kind) same += other.bytes;
        }
      const bool gradient = start.lifetime == sdk::Lifetime::gradient;
      for (const auto& [view, bytes] : {std::pair{size_t{0}, all}, std::pair{size_t{start.kind}, same}}) {
        double& largest = gradient ? sums[view].largest_gradient_layer : sums[view].largest_activation_layer;
        largest = std::max(largest, bytes);
      }
    }
    std::array<PhaseTotals, 3> high{};
    for (size_t view = 0; view < high.size(); ++view)
      memplan_step_high_points_n(sums[view].lifetime.data(), sums[view].lifetime.size(),
                                 sums[view].largest_gradient_layer, sums[view].largest_activation_layer,
                                 accumulating ? 1 : 0, high[view].data());
    return high;
  }

  // The options that say the steps' lengths vary (length_*, run_samples).
  void read_lengths(sdk::Options& options) {
    const std::optional<int64_t> min = options.integer("length_min");
    const std::optional<double> mean = options.number("length_mean");
    const std::optional<double> sd = options.number("length_sd");
    const std::optional<int64_t> samples = options.integer("run_samples");
    const std::optional<bool> truncated = options.boolean("length_truncated");
    const std::optional<double> quantile = options.number("length_quantile");
    if (const std::optional<std::string> listed = options.string("step_lengths")) {
      const char* beside = min         ? "length_min"
                           : mean      ? "length_mean"
                           : sd        ? "length_sd"
                           : samples   ? "run_samples"
                           : truncated ? "length_truncated"
                           : quantile  ? "length_quantile"
                                       : nullptr;
      if (beside)
        options.fail(beside, "describes a random order of the samples, and step_lengths gives the run's own order: "
                             "keep one of them");
      if (expandable_)
        options.fail("step_lengths", "with expandable_segments = true the large pool is one segment whose free "
                                     "blocks merge, so a longer step keeps no segments of its own: remove "
                                     "step_lengths or expandable_segments");
      const std::string problem = memplan::plugins::parse_step_lengths(*listed, steps_);
      if (!problem.empty()) options.fail("step_lengths", problem);
      varying_ = listed_ = true;
      longest_at_ = static_cast<size_t>(std::max_element(steps_.begin(), steps_.end()) - steps_.begin()) + 1;
      // Only a step longer than every one before can map segments (the
      // segment grows with the length, and the 16-bit rule compares with the
      // longest so far): the walk needs those alone, about ln N of N steps.
      int64_t longest_so_far = 0;
      size_t kept = 0;
      for (const int64_t step : steps_)
        if (step > longest_so_far) steps_[kept++] = longest_so_far = step;
      steps_.resize(kept);
      steps_.shrink_to_fit();
      return;
    }
    if (!min) {
      const char* without = mean        ? "length_mean"
                            : sd        ? "length_sd"
                            : samples   ? "run_samples"
                            : truncated ? "length_truncated"
                            : quantile  ? "length_quantile"
                                        : nullptr;
      if (without)
        options.fail(without, "describes steps of varying lengths: give length_min too (the shortest sample's "
                              "tokens), or remove it");
      return;
    }
    if (*min < 1) options.fail("length_min", "must be at least 1 token, got " + std::to_string(*min));
    if (!samples)
      options.fail("length_min", "needs run_samples, the samples the run trains on one GPU (rows x epochs / "
                                 "data-parallel ranks): how many chances a longer step has to come");
    if (*samples < 1) options.fail("run_samples", "must be at least 1, got " + std::to_string(*samples));
    if (expandable_)
      options.fail("length_min", "with expandable_segments = true the large pool is one segment whose free "
                                 "blocks merge, so a longer step keeps no segments of its own: remove the "
                                 "length_* options or expandable_segments");
    if (mean.has_value() != sd.has_value())
      options.fail(mean ? "length_mean" : "length_sd",
                   "length_mean and length_sd go together (a normal cut to [length_min, seq_len]); give both, "
                   "or neither for lengths uniform on that range");
    if (mean && !std::isfinite(*mean)) options.fail("length_mean", "must be a finite number of tokens");
    if (sd && !(std::isfinite(*sd) && *sd > 0))
      options.fail("length_sd", "must be a positive number of tokens, got " + memplan::support::number(*sd));
    if (truncated.value_or(false) && !mean)
      options.fail("length_truncated", "describes the normal's mass above seq_len: give length_mean and length_sd "
                                       "too (with lengths uniform up to seq_len nothing is longer), or remove it");
    if (quantile && !(*quantile >= 0 && *quantile <= 1))
      options.fail("length_quantile", "must be a fraction from 0 to 1, got " + memplan::support::number(*quantile));
    varying_ = true;
    quantile_ = quantile.value_or(-1);
    lengths_.truncated = truncated.value_or(false);
    lengths_.min = *min;
    lengths_.mean = mean.value_or(0);
    lengths_.sd = sd.value_or(0);
    samples_ = static_cast<double>(*samples);
  }

  // The loss path's segments at the run's end where lengths vary: the
  // expectation over the samples' order (support/varying_lengths.hpp) from
  // what the activation plugin's replay maps at a first and at a longer step.
  double varying_length_pool(sdk::Context& ctx) {
    const memplan_workload& workload = ctx.workload();
    if (listed_ && workload.seq_len < steps_.back())  // the kept steps grow: the last is the longest
      ctx.fail("step_lengths holds a step of " + std::to_string(steps_.back()) + " tokens (step " +
               std::to_string(longest_at_) + "), above [batch] seq_len (" + std::to_string(workload.seq_len) +
               "), the longest step memplan prices: set seq_len to it (seq_len = \"max\" cannot be solved for: the "
               "listed steps fix the lengths)");
    if (!listed_ && workload.seq_len < lengths_.min)
      ctx.fail("length_min (" + std::to_string(lengths_.min) + ") is above [batch] seq_len (" +
               std::to_string(workload.seq_len) + "), the longest step; lower length_min");
    // Absent: no plugin replayed the path; present and 0: a longer step's requests fit the older blocks.
    const double longer = ctx.attr_double(loss_longer_step_attr_, -1);
    const double segments = ctx.attr_double(loss_longer_segments_attr_, -1);
    if (longer < 0 || segments < 0)
      ctx.fail(std::string(lengths_option()) +
               " says the steps' lengths vary, but no activation plugin replayed the loss path's "
               "logits-sized requests (megatron does for Hugging Face Transformers' eager losses, cross_entropy "
               "upcast-in-loss, upcast-in-loss-shift-copy and upcast-shift-copy, in training): the growth is "
               "modelled for those paths only; remove " +
               (listed_ ? "step_lengths" : "length_min and run_samples"));
    const double fixed = ctx.attr_double(loss_segments_attr_, 0);
    if (segments < 1) return fixed;  // logits so small that a longer step's requests fit the older segments
    const memplan::support::LossPoolAtMax pool{ctx.attr_double(loss_first_step_attr_, 0), longer,
                                               static_cast<int>(segments)};
    if (listed_) return listed_order_pool(workload.seq_len, pool);
    memplan::support::StepLengths lengths = lengths_;
    lengths.max = workload.seq_len;
    lengths.per_step = workload.micro_batch;
    lengths.steps = std::ceil(samples_ / static_cast<double>(workload.micro_batch));
    // A search revisits a few (micro_batch, seq_len) points over and over: a
    // small cache of the last ones, replaced in turn (the options are fixed per
    // instance, so these inputs are the whole key).
    VaryingMemo* found = nullptr;
    for (VaryingMemo& entry : varying_memo_)
      if (entry.max == lengths.max && entry.per_step == lengths.per_step && entry.first == pool.first &&
          entry.longer == pool.longer && entry.segments == pool.segments)
        found = &entry;
    if (!found) {
      found = &varying_memo_[varying_memo_next_];
      varying_memo_next_ = (varying_memo_next_ + 1) % varying_memo_.size();
      VaryingMemo& memo = *found;
      const memplan::support::VaryingLengthPool model(lengths, pool);
      if (!model.valid())
        ctx.fail("the steps' lengths (length_min " + std::to_string(lengths.min) + " to seq_len " +
                 std::to_string(lengths.max) + ") give no step a length: check length_mean and length_sd");
      const std::array<double, 3> quantiles{0.1, 0.9, quantile_ >= 0 ? quantile_ : 0.5};
      std::array<double, 3> at{};
      model.quantiles(quantiles, at);
      memo = {lengths.max, lengths.per_step, pool.first, pool.longer, pool.segments, model.mean(), at[0], at[1],
              at[2]};
    }
    const VaryingMemo& memo = *found;
    // The spread over orders, for the report's details: what one run can reach.
    ctx.set_attr(loss_segments_p10_report_, std::round(memo.p10));
    ctx.set_attr(loss_segments_p90_report_, std::round(memo.p90));
    return quantile_ >= 0 ? memo.chosen : memo.mean;
  }

  // The same pool over the run's own order (step_lengths): one walk per
  // (seq_len, replay figures), remembered as the expectation's are.
  double listed_order_pool(int64_t seq_len, const memplan::support::LossPoolAtMax& pool) {
    for (VaryingMemo& entry : varying_memo_)
      if (entry.max == seq_len && entry.first == pool.first && entry.longer == pool.longer &&
          entry.segments == pool.segments)
        return entry.chosen;
    VaryingMemo& memo = varying_memo_[varying_memo_next_];
    varying_memo_next_ = (varying_memo_next_ + 1) % varying_memo_.size();
    memo = {seq_len, -1, pool.first, pool.longer, pool.segments, 0, 0, 0,
            memplan::support::pool_over_order(steps_, seq_len, pool)};
    return memo.chosen;
  }

  // The option that says the lengths vary, for messages.
  const char* lengths_option() const { return listed_ ? "step_lengths" : "length_min"; }

  double fragmentation_;
  bool rounding_;
  bool expandable_;  // expandable_segments
  bool varying_ = false;  // length_min or step_lengths: the steps' lengths vary
  bool listed_ = false;   // step_lengths: in a known order
  std::vector<int64_t> steps_;  // step_lengths: the steps longer than all before them, in order
  size_t longest_at_ = 0;  // the longest listed step's position, 1-based
  memplan::support::StepLengths lengths_;
  double samples_ = 0;     // run_samples
  double quantile_ = -1;   // length_quantile; -1: the mean
  struct VaryingMemo {
    int64_t max = -1, per_step = -1;
    double first = -1, longer = -1;
    int segments = -1;
    double mean = 0, p10 = 0, p90 = 0, chosen = 0;
  };
  std::array<VaryingMemo, 16> varying_memo_{};
  size_t varying_memo_next_ = 0;
  sdk::Name rounding_name_;
  sdk::Name fragmentation_name_;
  sdk::Name stream_pools_name_;
  sdk::Attribute setup_cache_emptied_attr_;  // set by a plugin whose framework empties the cache after set-up
  sdk::Attribute setup_unfragmented_attr_;   // set by a plugin whose set-up allocates into fresh segments
  sdk::Attribute setup_largest_free_attr_;   // the largest block the set-up leaves free, where a plugin knows it
  sdk::Attribute loss_segments_attr_;        // the loss path's logits-sized segments, where their order is known
  sdk::Attribute loss_segments_report_;      // the same, for the report's details
  sdk::Attribute loss_first_step_attr_;       // the loss path's first step, for lengths that vary
  sdk::Attribute loss_longer_step_attr_;      // a step longer than all before
  sdk::Attribute loss_longer_segments_attr_;  // in how many segments
  sdk::Attribute loss_segments_p10_report_;   // the pool's 10th and 90th percentiles over orders, for details
  sdk::Attribute loss_segments_p90_report_;
  std::vector<Group> groups_;
  // Scratch for add_stream_pools, kept between evaluations (no allocation once warm).
  struct LayerSum {
    sdk::Lifetime lifetime;
    int32_t layer;
    uint32_t count;
    double bytes = 0;
    uint8_t kind = 0;  // compute_stream_classes: 1 smaller, 2 logits-sized
  };
  std::vector<LayerSum> layers_;
  std::vector<uint32_t> streams_;
};

}  // namespace

MEMPLAN_PLUGIN(AllocatorOverhead)
