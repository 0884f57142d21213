// Plan items by their bytes: the size of an item, items that are a number of
// bytes, and sums over the plan.
//
// Bytes of an item = ceil(elements x bytes per element) x count: the host's
// rule (plugin_abi.h, memplan_item; docs/estimate.md section 4), which the
// report and the step timeline use. A plugin that sums the plan must use the
// same rule, or its figure and the report's disagree by the rounding.
//
// Many items are sized in bytes, not elements: the CUDA context, allocator
// slack, NCCL buffers, a rule of thumb's overhead, a KV cache per layer. Such
// an item has bytes_per_element = 1 and elements = the bytes (the host checks
// sizes only up to 2^62 bytes, far above any GPU).
#pragma once

#include <memplan/sdk.hpp>

#include <cmath>
#include <cstdint>

namespace memplan::support {

// ceil(elements x bytes per element) x count, as the host computes it.
inline double bytes(const sdk::Item& item) {
  return sdk::item_bytes(item.elements, item.bytes_per_element, item.count);
}
inline double bytes(const sdk::ItemRef& item) { return item.bytes(); }

// std::ceil(x) for x >= 0 (and NaN, infinity), bit for bit, without a call:
// on baseline x86-64 (no SSE4.1 roundsd) std::ceil is a libm call, which a
// plugin that rounds every item on every evaluation pays for each time.
// Below 2^52 the truncation to int64 is exact and the ceiling is it or it + 1
// (both exact doubles); from 2^52 on every double is an integer. An exact
// integer comes back as itself, so -0.0 stays -0.0 as std::ceil leaves it.
// Not for negative x (truncation rounds those up, not down).
inline double ceil_nonnegative(double x) {
  if (!(x < 0x1p52)) return x;
  const double truncated = static_cast<double>(static_cast<int64_t>(x));
  return truncated < x ? truncated + 1.0 : x;
}

// ceil(elements x bytes per element): one instance (one layer) of the item,
// what a framework allocates at a time (the allocator plugin rounds these).
inline double instance_bytes(const sdk::ItemRef& item) {
  return ceil_nonnegative(item.elements() * item.bytes_per_element());
}

// One item sized in bytes (1 byte per element). By default a persistent
// buffer on the GPU, outside the layers, in the allocator's tensors.
struct ByteItem {
  sdk::Name name;
  sdk::Role role = sdk::Role::buffers;
  sdk::Lifetime lifetime = sdk::Lifetime::persistent;
  sdk::Device device = sdk::Device::gpu;
  sdk::Pool pool = sdk::Pool::allocated;
  int32_t layer = -1;
  uint32_t count = 1;
  double bytes = 0;  // per instance
};

inline sdk::NewItem new_item(const ByteItem& item) {
  return sdk::NewItem{.name = item.name, .role = item.role, .lifetime = item.lifetime, .device = item.device,
                      .layer = item.layer, .count = item.count, .pool = item.pool, .elements = item.bytes,
                      .bytes_per_element = 1};
}

// Adds `item` as it is, even when it holds no bytes.
inline void add_bytes(sdk::Context& ctx, const ByteItem& item) { ctx.add(new_item(item)); }

// Adds `item` when it holds bytes: an item of 0 bytes would change no figure
// and only lengthen the breakdown. Returns whether it was added.
inline bool add_bytes_if_any(sdk::Context& ctx, const ByteItem& item) {
  if (!(item.bytes > 0)) return false;
  add_bytes(ctx, item);
  return true;
}

// The same for an item appended to a batch (sdk::ItemBatch), added later in one call.
inline void append_bytes(sdk::ItemBatch& batch, const ByteItem& item) { batch.append(new_item(item)); }

// Filters for sum_bytes.
inline bool on_gpu(const sdk::ItemRef& item) { return item.device() == sdk::Device::gpu; }

// The bytes of the items for which keep(item) holds, summed in plan order
// (as the host sums, so equal sums come out bit for bit equal).
template <typename Filter>
double sum_bytes(const sdk::Items& items, Filter keep) {
  double total = 0;
  for (const sdk::ItemRef item : items)
    if (keep(item)) total += item.bytes();
  return total;
}
template <typename Filter>
double sum_bytes(const sdk::Context& ctx, Filter keep) {
  return sum_bytes(ctx.items(), keep);
}

// The bytes of the GPU items of `role`.
inline double gpu_bytes_of(const sdk::Context& ctx, sdk::Role role) {
  return sum_bytes(ctx, [role](const sdk::ItemRef& item) { return on_gpu(item) && item.role() == role; });
}

}  // namespace memplan::support
