// The memory plan: a flat table of items that plugins transform in phases.
// An item is the ABI's memplan_item itself, so that a plugin of ABI 1.1 reads
// and edits the table in place (memplan_host.plan_items), plus what the host
// alone keeps. Names are interned (intern_name): an item is a plain value and
// evaluating a scenario allocates nothing once the table has its working size.
#pragma once

#include <memplan/plugin_abi.h>

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace memplan {

constexpr size_t kMaxItemName = 63;

// One stable copy of `text` per distinct text, valid while the process runs
// (thread-safe). Item names point into it. Throws Error beyond kMaxInternedNames
// distinct names, which only a plugin inventing a new name per evaluation reaches.
const char* intern_name(std::string_view text);
// Whether `name` is a pointer intern_name returned (the check of plugins' items).
bool is_interned_name(const char* name);
constexpr size_t kMaxInternedNames = 1u << 20;

struct PlanItem : memplan_item {
  int32_t added_by = -1;  // index of the plugin that added it; -1 for the model inventory

  PlanItem() : memplan_item{} {
    struct_size = sizeof(memplan_item);
    static const char* const unnamed = intern_name("unnamed");  // interned once, not per item
    name = unnamed;
    role = MEMPLAN_ROLE_WEIGHTS;
    lifetime = MEMPLAN_LIFETIME_PERSISTENT;
    device = MEMPLAN_DEVICE_GPU;
    param_class = MEMPLAN_CLASS_OTHER;
    layer = -1;
    count = 1;
  }

  // An item a plugin handed in (add_items), as the host keeps it.
  PlanItem(const memplan_item& item, int32_t by) : memplan_item(item), added_by(by) {
    struct_size = sizeof(memplan_item);
  }

  std::string_view name_view() const { return std::string_view(name); }
  void set_name(std::string_view text) { name = intern_name(text.substr(0, kMaxItemName)); }
  // ceil(elements * bytes_per_element) * count. Fractional sizes (int4,
  // block scales, shards) round up per instance: an allocation is whole
  // bytes. Inline, and the ceiling taken by hand below 2^62 (every valid
  // item): std::ceil is a libm call on baseline x86-64, and summing a plan
  // calls this for every item of every evaluation.
  uint64_t bytes() const {
    const double per_instance = elements * bytes_per_element;
    if (per_instance >= 0 && per_instance < 0x1p62) {
      const auto whole = static_cast<uint64_t>(per_instance);
      return (whole + (static_cast<double>(whole) < per_instance ? 1 : 0)) * static_cast<uint64_t>(count);
    }
    return static_cast<uint64_t>(std::ceil(per_instance)) * static_cast<uint64_t>(count);
  }
};

// ABI 1.2: a record of the step's work (memplan_work), as the host keeps it.
struct WorkRecord : memplan_work {
  int32_t added_by = -1;  // index of the plugin that added it

  WorkRecord(const memplan_work& work, int32_t by) : memplan_work(work), added_by(by) {
    struct_size = sizeof(memplan_work);
  }
};

struct Plan {
  std::vector<PlanItem> items;
  std::vector<WorkRecord> work;  // what the step computes and moves (docs/step-time.md)
};

// Why `work` is not a valid work record (a rule of plugin_abi.h), or nullopt.
// The name must be interned.
std::optional<std::string> work_problem(const memplan_work& work);

// How much of an item to check. `handed_in`: an item a plugin passes to a call
// of ABI 1.0 (any name; the host interns it). `in_place`: an item in the plan
// array, checked after a plugin of ABI 1.1 had it (the name must be interned).
// `values`: every rule but the name's, the check of each evaluation, which
// must cost little; the first evaluation makes the full one.
enum class ItemCheck { handed_in, in_place, values };

// Whether `item` passes every rule but the name's (ItemCheck::values), cheaply;
// item_problem says why it does not.
inline bool item_values_valid(const memplan_item& item) {
  const double bytes = item.elements * item.bytes_per_element;
  // NaN fails every comparison; infinity fails the size bound.
  return item.name != nullptr && item.role >= 0 && item.role < MEMPLAN_ROLE_COUNT &&
         item.lifetime >= MEMPLAN_LIFETIME_PERSISTENT && item.lifetime < MEMPLAN_LIFETIME_COUNT &&
         (item.device == MEMPLAN_DEVICE_GPU || item.device == MEMPLAN_DEVICE_CPU) &&
         (item.flags & (MEMPLAN_ITEM_ALLOCATOR_RESERVE | MEMPLAN_ITEM_OUTSIDE_ALLOCATOR)) !=
             (MEMPLAN_ITEM_ALLOCATOR_RESERVE | MEMPLAN_ITEM_OUTSIDE_ALLOCATOR) &&
         ((item.flags & MEMPLAN_ITEM_RELEASABLE) == 0 || (item.flags & MEMPLAN_ITEM_ALLOCATOR_RESERVE) != 0) &&
         item.layer >= -1 && item.elements >= 0 && item.elements <= 1e300 && item.bytes_per_element >= 0 &&
         item.bytes_per_element <= 1e300 && (bytes + 1) * static_cast<double>(item.count) <= 4.6e18;
}

// Why `item` is not a valid plan item (a rule of plugin_abi.h), or nullopt.
// `size_overflow` is set when the reason is a size beyond 2^62 bytes.
std::optional<std::string> item_problem(const memplan_item& item, ItemCheck check, bool* size_overflow);

}  // namespace memplan
