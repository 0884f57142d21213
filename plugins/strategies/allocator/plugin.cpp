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

#include <array>
#include <cmath>
#include <string>
#include <vector>

namespace {

namespace sdk = memplan::sdk;

constexpr double kMinBlockSize = 512;                  // kMinBlockSize
constexpr double kMinLargeAlloc = 10.0 * 1024 * 1024;  // kMinLargeAlloc: own segment from here
constexpr double kRoundLarge = 2.0 * 1024 * 1024;      // kRoundLarge

constexpr std::array<memplan_option_spec, 2> kOptions{{
    {"fragmentation", MEMPLAN_OPTION_DOUBLE,
     "reserved-but-unused memory as a fraction of what the step allocates and frees (activations, gradients, "
     "transients), 0 to 1",
     "0.1"},
    {"rounding", MEMPLAN_OPTION_BOOL, "round every allocation as the caching allocator does (512 B; 2 MiB segments)",
     "true"},
}};

// Bytes the allocator reserves for one allocation of `bytes`, beyond them.
double rounding_waste(double bytes) {
  if (bytes <= 0) return 0;
  const double granule = bytes >= kMinLargeAlloc ? kRoundLarge : kMinBlockSize;
  // bytes > 0, so the quotient is non-negative: the inline ceiling, no libm call per item.
  return memplan::support::ceil_nonnegative(bytes / granule) * granule - bytes;
}


class AllocatorOverhead {
 public:
  static constexpr sdk::PluginInfo info{"allocator", "1.2.1",
                                        "PyTorch caching allocator: block rounding and fragmentation",
                                        sdk::Kind::strategy, sdk::Phase::overhead, sdk::Reads::nothing};
  static std::span<const memplan_option_spec> options() { return kOptions; }

  explicit AllocatorOverhead(sdk::Options& options)
      : fragmentation_(options.number("fragmentation").value_or(0.1)),
        rounding_(options.boolean("rounding").value_or(true)),
        rounding_name_(options.intern("allocator.rounding")),
        fragmentation_name_(options.intern("allocator.fragmentation")) {
    if (!std::isfinite(fragmentation_) || fragmentation_ < 0 || fragmentation_ >= 1)
      options.fail("fragmentation", "must be a fraction from 0 up to (not including) 1, got " +
                                        memplan::support::number(fragmentation_));
  }

  void apply(sdk::Context& ctx) {
    // One group per (lifetime, first layer, count): the timeline treats items
    // with the same layers as one layer.
    // The groups are found first and added after: adding invalidates items().
    groups_.clear();  // keeps its capacity: no allocation once warm
    for (const sdk::ItemRef item : ctx.items()) {
      if (item.device() != sdk::Device::gpu || item.count() == 0 || item.pool() != sdk::Pool::allocated) continue;
      const double bytes = memplan::support::instance_bytes(item);
      Group& group = find(groups_, item);
      if (rounding_) group.rounding += rounding_waste(bytes);
      if (item.lifetime() != sdk::Lifetime::persistent) group.fragmentation += fragmentation_ * bytes;
    }
    for (const Group& group : groups_) {
      add(ctx, group, rounding_name_, group.rounding);
      add(ctx, group, fragmentation_name_, group.fragmentation);
    }
  }

 private:
  struct Group {
    sdk::Lifetime lifetime;
    int32_t layer;
    uint32_t count;
    double rounding = 0;       // per instance
    double fragmentation = 0;  // per instance
  };

  static Group& find(std::vector<Group>& groups, const sdk::ItemRef& item) {
    for (Group& group : groups)
      if (group.lifetime == item.lifetime() && group.layer == item.layer() && group.count == item.count())
        return group;
    groups.push_back(Group{item.lifetime(), item.layer(), item.count()});
    return groups.back();
  }

  static void add(sdk::Context& ctx, const Group& group, sdk::Name name, double bytes) {
    memplan::support::add_bytes_if_any(ctx, {.name = name, .role = sdk::Role::overhead, .lifetime = group.lifetime,
                                             .pool = sdk::Pool::reserve, .layer = group.layer, .count = group.count,
                                             .bytes = bytes});
  }

  double fragmentation_;
  bool rounding_;
  sdk::Name rounding_name_;
  sdk::Name fragmentation_name_;
  std::vector<Group> groups_;
};

}  // namespace

MEMPLAN_PLUGIN(AllocatorOverhead)
