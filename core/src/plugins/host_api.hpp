// The host side of the plugin ABI: the memplan_ctx a plugin receives and the
// function table (memplan_host) it calls. Kept out of the public headers: it
// is the core's business how a context is laid out.
#pragma once

#include <memplan/conventions.h>
#include <memplan/plugin_abi.h>

#include <deque>
#include <string>
#include <unordered_map>
#include <vector>

#include "memplan/core/plan.hpp"
#include "memplan/core/plugin_registry.hpp"
#include "memplan/core/scenario.hpp"

// Attributes are reused between evaluations: clearing marks them unset but
// keeps their storage, so a warm evaluation allocates nothing.
struct memplan_attribute {
  std::string key;
  enum class Type { unset, integer, floating, text } type = Type::unset;
  int64_t integer = 0;
  double floating = 0;
  std::string text;
  int32_t set_by = -1;
  bool rank_factor = false;  // a ranks.* attribute: the host multiplies the integer ones into the world size

  // The key is set once, when the slot is made (slots are reused, never renamed).
  void set_key(std::string name) {
    key = std::move(name);
    rank_factor = key.rfind(MEMPLAN_ATTR_RANKS_PREFIX, 0) == 0;
  }
};

struct memplan_ctx {
  memplan::Plan plan;
  // A deque: adding an attribute never moves the others, so a string a plugin
  // read stays valid until that attribute is set again (as the ABI promises).
  std::deque<memplan_attribute> attributes;
  // attributes[i] by handle in one load: indexing a deque costs a division
  // and two loads, on every attribute call of every evaluation.
  std::vector<memplan_attribute*> attribute_slots;
  // The slot of each key: resolving a handle (every plugin's create(), which a
  // search runs again per configuration) costs a hash, not a scan of the keys.
  std::unordered_map<std::string, size_t> attribute_index;
  memplan_attribute& add_attribute(std::string key) {
    memplan_attribute& added = attributes.emplace_back();
    attribute_index.emplace(key, attributes.size() - 1);
    added.set_key(std::move(key));
    attribute_slots.push_back(&added);
    return added;
  }
  memplan_model model{};
  memplan_workload workload{};

  // The plugin being called.
  const memplan::LoadedPlugin* plugin = nullptr;
  const memplan::ComponentSpec* component = nullptr;
  int32_t plugin_index = -1;
  bool configuring = false;
  bool plan_written = false;  // the plugin took the plan array (ABI 1.1) or appended to it in bulk
  bool work_written = false;  // the plugin took the work records' array (ABI 1.2)

  // The first error the plugin reported during the current call.
  bool has_error = false;
  bool size_overflow = false;  // the error is an item beyond 2^62 bytes
  std::string error_option;
  std::string error_message;

  void begin_call(const memplan::LoadedPlugin* p, const memplan::ComponentSpec* c, int32_t index, bool config) {
    plugin = p;
    component = c;
    plugin_index = index;
    configuring = config;
    plan_written = false;
    work_written = false;
    has_error = false;
    size_overflow = false;
    error_option.clear();
    error_message.clear();
  }
  void clear_attributes() {
    for (memplan_attribute& attribute : attributes) attribute.type = memplan_attribute::Type::unset;
  }
  const memplan_attribute* find_attribute(const char* key) const;
};

namespace memplan {

struct HostState {
  memplan_ctx ctx;
  // Incremental evaluation (Estimator::evaluate_at): the plan and attributes
  // as they stood before the first plugin that reads micro_batch or seq_len.
  struct Snapshot {
    bool valid = false;
    std::vector<PlanItem> items;
    std::vector<WorkRecord> work;
    std::vector<memplan_attribute> attributes;
  } snapshot;
};

const memplan_host& host_table();

// Records an error on behalf of the host (e.g. a bad item) as if the plugin had reported it.
void host_report(memplan_ctx* ctx, const char* option, const std::string& message);

// The index of the attribute slot named `key`, made (unset) when missing:
// what attribute handles are.
size_t attribute_slot(memplan_ctx& ctx, const char* key);

// Checks every item of the plan; reports the first bad one as the current
// plugin's error and returns false.
bool check_plan(memplan_ctx* ctx, ItemCheck check);

// Checks every work record after a plugin edited them in place; reports the
// first bad one as the current plugin's error and returns false.
bool check_work(memplan_ctx* ctx);

}  // namespace memplan
