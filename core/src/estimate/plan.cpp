#include "memplan/core/plan.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <deque>
#include <mutex>
#include <shared_mutex>
#include <unordered_map>
#include <unordered_set>

#include "memplan/core/error.hpp"

namespace memplan {
namespace {

// Names live in a deque of strings (elements never move) indexed by their
// text; the set of their addresses answers is_interned_name. Leaked on
// purpose: plugins and reports may read a name during static destruction.
struct NameTable {
  std::shared_mutex mutex;
  std::deque<std::string> storage;
  std::unordered_map<std::string_view, const char*> by_text;
  std::unordered_set<const char*> addresses;
};

NameTable& names() {
  static NameTable* table = new NameTable();
  return *table;
}

}  // namespace

const char* intern_name(std::string_view text) {
  NameTable& table = names();
  {
    std::shared_lock lock(table.mutex);
    if (auto found = table.by_text.find(text); found != table.by_text.end()) return found->second;
  }
  std::unique_lock lock(table.mutex);
  if (auto found = table.by_text.find(text); found != table.by_text.end()) return found->second;
  if (table.storage.size() >= kMaxInternedNames)
    throw Error("more than " + std::to_string(kMaxInternedNames) +
                " distinct plan item names; a plugin makes up a new name on every evaluation");
  const std::string& stored = table.storage.emplace_back(text);
  table.by_text.emplace(std::string_view(stored), stored.c_str());
  table.addresses.insert(stored.c_str());
  return stored.c_str();
}

bool is_interned_name(const char* name) {
  NameTable& table = names();
  std::shared_lock lock(table.mutex);
  return table.addresses.count(name) != 0;
}

std::optional<std::string> item_problem(const memplan_item& item, ItemCheck check, bool* size_overflow) {
  if (size_overflow != nullptr) *size_overflow = false;
  if (item.name == nullptr) return std::string("no name");
  if (check == ItemCheck::in_place && !is_interned_name(item.name))
    return std::string("a name that is not interned (rule: items in the plan array take names from intern())");
  if (check != ItemCheck::values) {
    // Bounded read: a name longer than the limit is an error, not a reason to scan on.
    const size_t length = strnlen(item.name, kMaxItemName + 1);
    if (length == 0) return std::string("an empty name");
    if (length > kMaxItemName) return "a name longer than " + std::to_string(kMaxItemName) + " characters";
  }
  if (item.role < 0 || item.role >= MEMPLAN_ROLE_COUNT) return "unknown role " + std::to_string(item.role);
  if (item.lifetime < MEMPLAN_LIFETIME_PERSISTENT || item.lifetime >= MEMPLAN_LIFETIME_COUNT)
    return "unknown lifetime " + std::to_string(item.lifetime);
  if (item.device != MEMPLAN_DEVICE_GPU && item.device != MEMPLAN_DEVICE_CPU)
    return "unknown device " + std::to_string(item.device);
  if ((item.flags & MEMPLAN_ITEM_ALLOCATOR_RESERVE) && (item.flags & MEMPLAN_ITEM_OUTSIDE_ALLOCATOR))
    return std::string(
        "both MEMPLAN_ITEM_ALLOCATOR_RESERVE and MEMPLAN_ITEM_OUTSIDE_ALLOCATOR (rule: an item is in the "
        "allocator's reserve or outside the allocator, not both)");
  if ((item.flags & MEMPLAN_ITEM_RELEASABLE) && !(item.flags & MEMPLAN_ITEM_ALLOCATOR_RESERVE))
    return std::string(
        "MEMPLAN_ITEM_RELEASABLE without MEMPLAN_ITEM_ALLOCATOR_RESERVE (rule: only the allocator's reserve, its "
        "free cached segments, can be released; set the item's pool to reserve)");
  if (item.layer < -1) return "layer " + std::to_string(item.layer) + " (rule: -1 or a layer index)";
  if (!std::isfinite(item.elements) || item.elements < 0)
    return std::string("an element count that is negative or not finite");
  if (!std::isfinite(item.bytes_per_element) || item.bytes_per_element < 0)
    return std::string("bytes per element that are negative or not finite");
  // 2^62 bytes is far beyond any GPU or host; larger is a plugin bug, not a plan.
  if (std::ceil(item.elements * item.bytes_per_element) * static_cast<double>(item.count) > 4.6e18) {
    if (size_overflow != nullptr) *size_overflow = true;
    return std::string("a size beyond 2^62 bytes");
  }
  return std::nullopt;
}

std::optional<std::string> work_problem(const memplan_work& work) {
  if (work.name == nullptr) return std::string("no name");
  if (!is_interned_name(work.name))
    return std::string("a name that is not interned (rule: work records take names from intern())");
  if (work.kind < MEMPLAN_WORK_COMPUTE || work.kind > MEMPLAN_WORK_BUBBLE)
    return "unknown kind " + std::to_string(work.kind);
  if (work.kind == MEMPLAN_WORK_COLLECTIVE) {
    if (work.collective < 0 || work.collective >= MEMPLAN_COLLECTIVE_COUNT)
      return "unknown collective " + std::to_string(work.collective);
    if (work.ranks < 1) return "a group of " + std::to_string(work.ranks) + " ranks (rule: at least 1)";
    if (work.stride < 1) return "a stride of " + std::to_string(work.stride) + " (rule: at least 1)";
    if (!std::isfinite(work.overlap) || work.overlap < 0 || work.overlap > 1)
      return std::string("an overlap outside [0, 1]");
  }
  if (work.kind == MEMPLAN_WORK_BUBBLE && work.amount > 1e6)
    return std::string("a bubble beyond 10^6 times the compute time");
  if (work.pass < MEMPLAN_PASS_FORWARD || work.pass > MEMPLAN_PASS_OPTIMIZER)
    return "unknown pass " + std::to_string(work.pass);
  if (work.kind == MEMPLAN_WORK_COMPUTE && (work.math < 0 || work.math >= MEMPLAN_MATH_COUNT))
    return "unknown math " + std::to_string(work.math);
  if ((work.flags & ~MEMPLAN_WORK_MODEL_FLOPS) != 0) return "unknown flags " + std::to_string(work.flags);
  if (!std::isfinite(work.amount) || work.amount < 0 || work.amount > 1e30)
    return std::string("an amount that is negative, not finite or beyond 1e30");
  if (!std::isfinite(work.efficiency) || work.efficiency < 0 || work.efficiency > 1)
    return std::string("an efficiency outside [0, 1] (rule: a fraction of the peak; 0 when not known)");
  return std::nullopt;
}

}  // namespace memplan
