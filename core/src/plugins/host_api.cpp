#include "plugins/host_api.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>

#include "memplan/core/breakdown.hpp"
#include "memplan/core/error.hpp"

namespace memplan {
namespace {

const OptionValue* find_option(memplan_ctx* ctx, const char* key) {
  for (const OptionValue& option : ctx->component->options)
    if (option.key == key) return &option;
  return nullptr;
}

// The host validated option types against the plugin's specs before create();
// this guards the plugin asking for a key or a type it did not declare.
const OptionValue* checked_option(memplan_ctx* ctx, const char* key, int32_t type, int* status) {
  *status = MEMPLAN_ERROR;
  if (key == nullptr) {
    host_report(ctx, nullptr, "asked for an option with a NULL name");
    return nullptr;
  }
  if (!ctx->configuring) {
    host_report(ctx, nullptr, std::string("asked for option '") + key + "' outside create(); read options there");
    return nullptr;
  }
  const memplan_option_spec* spec = nullptr;
  for (const memplan_option_spec& candidate : ctx->plugin->options)
    if (std::strcmp(candidate.name, key) == 0) spec = &candidate;
  if (spec == nullptr) {
    host_report(ctx, nullptr, std::string("asked for option '") + key + "', which its descriptor does not declare");
    return nullptr;
  }
  if (spec->type != type) {
    host_report(ctx, nullptr, std::string("read option '") + key + "' with a different type than it declares");
    return nullptr;
  }
  const OptionValue* option = find_option(ctx, key);
  *status = option == nullptr ? MEMPLAN_ABSENT : MEMPLAN_OK;
  return option;
}

int option_int(memplan_ctx* ctx, const char* key, int64_t* out) {
  int status = 0;
  if (const OptionValue* option = checked_option(ctx, key, MEMPLAN_OPTION_INT, &status)) *out = option->integer;
  return status;
}

int option_double(memplan_ctx* ctx, const char* key, double* out) {
  int status = 0;
  if (const OptionValue* option = checked_option(ctx, key, MEMPLAN_OPTION_DOUBLE, &status))
    *out = option->type == OptionValue::Type::integer ? static_cast<double>(option->integer) : option->floating;
  return status;
}

int option_bool(memplan_ctx* ctx, const char* key, int* out) {
  int status = 0;
  if (const OptionValue* option = checked_option(ctx, key, MEMPLAN_OPTION_BOOL, &status)) *out = option->boolean ? 1 : 0;
  return status;
}

const char* option_string(memplan_ctx* ctx, const char* key) {
  int status = 0;
  const OptionValue* option = checked_option(ctx, key, MEMPLAN_OPTION_STRING, &status);
  return option != nullptr ? option->text.c_str() : nullptr;
}

void report_error(memplan_ctx* ctx, const char* option_key, const char* message) {
  host_report(ctx, option_key, message != nullptr ? message : "(no message)");
}

const memplan_model* model(memplan_ctx* ctx) { return &ctx->model; }
const memplan_workload* workload(memplan_ctx* ctx) { return &ctx->workload; }

size_t item_count(memplan_ctx* ctx) { return ctx->configuring ? 0 : ctx->plan.items.size(); }

bool in_plan(memplan_ctx* ctx, size_t index) {
  if (index < ctx->plan.items.size()) return true;
  host_report(ctx, nullptr,
              "used item index " + std::to_string(index) + " but the plan has " +
                  std::to_string(ctx->plan.items.size()) + " items");
  return false;
}

bool apply_only(memplan_ctx* ctx, const char* what) {
  if (!ctx->configuring) return true;
  host_report(ctx, nullptr, std::string(what) + " during create(); the plan exists only during apply()");
  return false;
}

void report_bad_item(memplan_ctx* ctx, const memplan_item& item, const std::string& problem) {
  const std::string_view name =
      item.name != nullptr ? std::string_view(item.name, strnlen(item.name, kMaxItemName + 1)) : std::string_view();
  host_report(ctx, nullptr, "gave plan item '" + std::string(name) + "' " + problem);
}

int get_item(memplan_ctx* ctx, size_t index, memplan_item* out) {
  if (!apply_only(ctx, "read the plan") || !in_plan(ctx, index)) return MEMPLAN_ERROR;
  if (out == nullptr || out->struct_size == 0) {
    host_report(ctx, nullptr, "called get_item without an output struct and its struct_size");
    return MEMPLAN_ERROR;
  }
  const PlanItem& item = ctx->plan.items[index];
  memplan_item value{};
  value.struct_size = sizeof value;
  value.name = item.name;
  value.role = item.role;
  value.lifetime = item.lifetime;
  value.device = item.device;
  value.param_class = item.param_class;
  value.layer = item.layer;
  value.count = item.count;
  value.flags = item.flags;
  value.elements = item.elements;
  value.bytes_per_element = item.bytes_per_element;
  const uint32_t size = out->struct_size;
  std::memcpy(out, &value, std::min<size_t>(size, sizeof value));
  out->struct_size = size;
  return MEMPLAN_OK;
}

// Copies a plugin's item into the plan's representation after checking it:
// bad values are rejected here so no NaN or negative size reaches a report.
// The name is interned (ABI 1.0 plugins pass any string).
bool convert_item(memplan_ctx* ctx, const memplan_item* in, PlanItem& out) {
  if (in == nullptr || in->struct_size == 0) {
    host_report(ctx, nullptr, "passed an item without its struct_size");
    return false;
  }
  memplan_item item{};
  std::memcpy(&item, in, std::min<size_t>(in->struct_size, sizeof item));
  bool overflow = false;
  if (auto problem = item_problem(item, ItemCheck::handed_in, &overflow)) {
    ctx->size_overflow = overflow && !ctx->has_error;  // only when this is the error the call reports
    report_bad_item(ctx, item, *problem);
    return false;
  }
  // Most set_item calls keep the name the item had: no lookup then.
  const char* name = out.name != nullptr && std::strcmp(out.name, item.name) == 0 ? out.name : nullptr;
  if (name == nullptr) {
    try {
      name = intern_name(item.name);
    } catch (const memplan::Error& error) {
      host_report(ctx, nullptr, error.what());
      return false;
    }
  }
  static_cast<memplan_item&>(out) = item;
  out.struct_size = sizeof(memplan_item);
  out.name = name;
  return true;
}

int set_item(memplan_ctx* ctx, size_t index, const memplan_item* item) {
  if (!apply_only(ctx, "changed the plan") || !in_plan(ctx, index)) return MEMPLAN_ERROR;
  PlanItem converted = ctx->plan.items[index];
  if (!convert_item(ctx, item, converted)) return MEMPLAN_ERROR;
  ctx->plan.items[index] = converted;
  return MEMPLAN_OK;
}

int add_item(memplan_ctx* ctx, const memplan_item* item) {
  if (!apply_only(ctx, "changed the plan")) return MEMPLAN_ERROR;
  PlanItem converted;
  converted.name = nullptr;
  if (!convert_item(ctx, item, converted)) return MEMPLAN_ERROR;
  converted.added_by = ctx->plugin_index;
  ctx->plan.items.push_back(converted);
  return MEMPLAN_OK;
}

int remove_item(memplan_ctx* ctx, size_t index) {
  if (!apply_only(ctx, "changed the plan") || !in_plan(ctx, index)) return MEMPLAN_ERROR;
  ctx->plan.items.erase(ctx->plan.items.begin() + static_cast<std::ptrdiff_t>(index));
  return MEMPLAN_OK;
}

memplan_attribute* attribute_for_write(memplan_ctx* ctx, const char* key) {
  if (key == nullptr || key[0] == '\0') {
    host_report(ctx, nullptr, "set an attribute with an empty name");
    return nullptr;
  }
  memplan_attribute* attribute = ctx->attribute_slots[attribute_slot(*ctx, key)];
  attribute->set_by = ctx->plugin_index;
  return attribute;
}

int set_attr_int(memplan_ctx* ctx, const char* key, int64_t value) {
  memplan_attribute* attribute = attribute_for_write(ctx, key);
  if (attribute == nullptr) return MEMPLAN_ERROR;
  attribute->type = memplan_attribute::Type::integer;
  attribute->integer = value;
  return MEMPLAN_OK;
}

int set_attr_double(memplan_ctx* ctx, const char* key, double value) {
  if (!std::isfinite(value)) {
    host_report(ctx, nullptr, std::string("set attribute '") + (key ? key : "") + "' to a value that is not finite");
    return MEMPLAN_ERROR;
  }
  memplan_attribute* attribute = attribute_for_write(ctx, key);
  if (attribute == nullptr) return MEMPLAN_ERROR;
  attribute->type = memplan_attribute::Type::floating;
  attribute->floating = value;
  return MEMPLAN_OK;
}

int set_attr_string(memplan_ctx* ctx, const char* key, const char* value) {
  memplan_attribute* attribute = attribute_for_write(ctx, key);
  if (attribute == nullptr) return MEMPLAN_ERROR;
  attribute->type = memplan_attribute::Type::text;
  attribute->text = value != nullptr ? value : "";
  return MEMPLAN_OK;
}

template <typename Read>
int get_attr(memplan_ctx* ctx, const char* key, memplan_attribute::Type type, const char* type_name, Read read) {
  const memplan_attribute* attribute = key != nullptr ? ctx->find_attribute(key) : nullptr;
  if (attribute == nullptr) return MEMPLAN_ABSENT;
  if (attribute->type != type) {
    host_report(ctx, nullptr, std::string("read attribute '") + key + "' as " + type_name +
                                  ", but it holds another type");
    return MEMPLAN_ERROR;
  }
  read(*attribute);
  return MEMPLAN_OK;
}

int get_attr_int(memplan_ctx* ctx, const char* key, int64_t* out) {
  return get_attr(ctx, key, memplan_attribute::Type::integer, "an integer",
                  [&](const memplan_attribute& a) { *out = a.integer; });
}

int get_attr_double(memplan_ctx* ctx, const char* key, double* out) {
  return get_attr(ctx, key, memplan_attribute::Type::floating, "a double",
                  [&](const memplan_attribute& a) { *out = a.floating; });
}

const char* get_attr_string(memplan_ctx* ctx, const char* key) {
  const char* result = nullptr;
  get_attr(ctx, key, memplan_attribute::Type::text, "a string",
           [&](const memplan_attribute& a) { result = a.text.c_str(); });
  return result;
}

// ---- ABI 1.1 ----

const char* intern(memplan_ctx* ctx, const char* name) {
  const size_t length = name != nullptr ? strnlen(name, kMaxItemName + 1) : 0;
  if (length == 0 || length > kMaxItemName) {
    host_report(ctx, nullptr, "interned " + std::string(length == 0 ? "an empty name" : "a name longer than " +
                                                                          std::to_string(kMaxItemName) + " characters"));
    return nullptr;
  }
  try {
    return intern_name(std::string_view(name, length));
  } catch (const memplan::Error& error) {
    host_report(ctx, nullptr, error.what());
    return nullptr;
  }
}

memplan_item* plan_items(memplan_ctx* ctx, size_t* count, size_t* stride) {
  if (count != nullptr) *count = 0;
  if (stride != nullptr) *stride = sizeof(PlanItem);
  if (!apply_only(ctx, "read the plan")) return nullptr;
  if (count == nullptr || stride == nullptr) {
    host_report(ctx, nullptr, "called plan_items without the count and stride outputs");
    return nullptr;
  }
  *count = ctx->plan.items.size();
  ctx->plan_written = true;
  return ctx->plan.items.empty() ? nullptr : static_cast<memplan_item*>(ctx->plan.items.data());
}

memplan_work* plan_work(memplan_ctx* ctx, size_t* count, size_t* stride) {
  if (count != nullptr) *count = 0;
  if (stride != nullptr) *stride = sizeof(WorkRecord);
  if (!apply_only(ctx, "read the work records")) return nullptr;
  if (count == nullptr || stride == nullptr) {
    host_report(ctx, nullptr, "called plan_work without the count and stride outputs");
    return nullptr;
  }
  *count = ctx->plan.work.size();
  ctx->work_written = true;
  return ctx->plan.work.empty() ? nullptr : static_cast<memplan_work*>(ctx->plan.work.data());
}

int add_items(memplan_ctx* ctx, const memplan_item* items, size_t count) {
  if (!apply_only(ctx, "changed the plan")) return MEMPLAN_ERROR;
  if (count == 0) return MEMPLAN_OK;
  if (items == nullptr) {
    host_report(ctx, nullptr, "called add_items with no items");
    return MEMPLAN_ERROR;
  }
  std::vector<PlanItem>& plan = ctx->plan.items;
  // One capacity check, not one per item; growth stays geometric.
  if (plan.capacity() < plan.size() + count) plan.reserve(std::max(plan.size() + count, 2 * plan.capacity()));
  for (size_t i = 0; i < count; ++i) plan.emplace_back(items[i], ctx->plugin_index);
  ctx->plan_written = true;
  return MEMPLAN_OK;
}

int add_work(memplan_ctx* ctx, const memplan_work* work, size_t count) {
  if (!apply_only(ctx, "reported the step's work")) return MEMPLAN_ERROR;
  if (count == 0) return MEMPLAN_OK;
  if (work == nullptr) {
    host_report(ctx, nullptr, "called add_work with no records");
    return MEMPLAN_ERROR;
  }
  std::vector<WorkRecord>& records = ctx->plan.work;
  if (records.capacity() < records.size() + count)
    records.reserve(std::max(records.size() + count, 2 * records.capacity()));
  // The plugin's records are struct_size bytes apart: a plugin built against a
  // later 1.x header hands in larger ones, whose tail this host does not read.
  const uint32_t stride = work[0].struct_size;
  if (stride < offsetof(memplan_work, collective)) {
    host_report(ctx, nullptr, "called add_work with struct_size " + std::to_string(stride) +
                                  ", smaller than ABI 1.2's memplan_work");
    return MEMPLAN_ERROR;
  }
  const auto* bytes = reinterpret_cast<const unsigned char*>(work);
  for (size_t i = 0; i < count; ++i) {
    memplan_work record{};
    std::memcpy(&record, bytes + i * stride, std::min<size_t>(stride, sizeof record));
    record.struct_size = sizeof record;
    // A record is checked when it is handed in (and again after a plugin
    // edits the records in place: check_work).
    if (auto problem = work_problem(record)) [[unlikely]] {
      host_report(ctx, nullptr, "reported a work record that breaks a rule of plugin_abi.h: " + *problem);
      return MEMPLAN_ERROR;
    }
    records.emplace_back(record, ctx->plugin_index);
  }
  return MEMPLAN_OK;
}

int32_t attr_handle(memplan_ctx* ctx, const char* key) {
  if (key == nullptr || key[0] == '\0') {
    host_report(ctx, nullptr, "asked for the handle of an attribute with an empty name");
    return -1;
  }
  return static_cast<int32_t>(attribute_slot(*ctx, key));
}

memplan_attribute* attribute_at(memplan_ctx* ctx, int32_t handle) {
  if (handle >= 0 && static_cast<size_t>(handle) < ctx->attribute_slots.size()) [[likely]]
    return ctx->attribute_slots[static_cast<size_t>(handle)];
  host_report(ctx, nullptr, "used attribute handle " + std::to_string(handle) + ", which attr_handle did not return");
  return nullptr;
}

template <typename Read>
int get_attr_at(memplan_ctx* ctx, int32_t handle, memplan_attribute::Type type, const char* type_name, Read read) {
  const memplan_attribute* attribute = attribute_at(ctx, handle);
  if (attribute == nullptr) return MEMPLAN_ERROR;
  if (attribute->type == memplan_attribute::Type::unset) return MEMPLAN_ABSENT;
  if (attribute->type != type) {
    host_report(ctx, nullptr, "read attribute '" + attribute->key + "' as " + type_name + ", but it holds another type");
    return MEMPLAN_ERROR;
  }
  read(*attribute);
  return MEMPLAN_OK;
}

int get_attr_int_at(memplan_ctx* ctx, int32_t handle, int64_t* out) {
  return get_attr_at(ctx, handle, memplan_attribute::Type::integer, "an integer",
                     [&](const memplan_attribute& a) { *out = a.integer; });
}

int get_attr_double_at(memplan_ctx* ctx, int32_t handle, double* out) {
  return get_attr_at(ctx, handle, memplan_attribute::Type::floating, "a double",
                     [&](const memplan_attribute& a) { *out = a.floating; });
}

int set_attr_int_at(memplan_ctx* ctx, int32_t handle, int64_t value) {
  memplan_attribute* attribute = attribute_at(ctx, handle);
  if (attribute == nullptr) return MEMPLAN_ERROR;
  attribute->type = memplan_attribute::Type::integer;
  attribute->integer = value;
  attribute->set_by = ctx->plugin_index;
  return MEMPLAN_OK;
}

int set_attr_double_at(memplan_ctx* ctx, int32_t handle, double value) {
  memplan_attribute* attribute = attribute_at(ctx, handle);
  if (attribute == nullptr) return MEMPLAN_ERROR;
  if (!std::isfinite(value)) {
    host_report(ctx, nullptr, "set attribute '" + attribute->key + "' to a value that is not finite");
    return MEMPLAN_ERROR;
  }
  attribute->type = memplan_attribute::Type::floating;
  attribute->floating = value;
  attribute->set_by = ctx->plugin_index;
  return MEMPLAN_OK;
}

int get_attr_string_at(memplan_ctx* ctx, int32_t handle, const char** out) {
  return get_attr_at(ctx, handle, memplan_attribute::Type::text, "a string",
                     [&](const memplan_attribute& a) { *out = a.text.c_str(); });
}

int set_attr_string_at(memplan_ctx* ctx, int32_t handle, const char* value) {
  memplan_attribute* attribute = attribute_at(ctx, handle);
  if (attribute == nullptr) return MEMPLAN_ERROR;
  attribute->type = memplan_attribute::Type::text;
  attribute->text = value != nullptr ? value : "";  // assigns into the storage the slot already has
  attribute->set_by = ctx->plugin_index;
  return MEMPLAN_OK;
}

int timeline(memplan_ctx* ctx, memplan_timeline* out) {
  if (!apply_only(ctx, "asked for the timeline")) return MEMPLAN_ERROR;
  if (out == nullptr || out->struct_size == 0) {
    host_report(ctx, nullptr, "called timeline without an output struct and its struct_size");
    return MEMPLAN_ERROR;
  }
  // Items written in place are checked before the host sums them.
  if (!check_plan(ctx, ItemCheck::values)) return MEMPLAN_ERROR;
  Breakdown breakdown;
  summarize(ctx->plan, ctx->workload.grad_accum, breakdown, ctx->workload.gpu_memory_bytes);
  memplan_timeline value{};
  value.struct_size = sizeof value;
  for (int q = 0; q < MEMPLAN_QUANTITIES; ++q)
    for (int p = 0; p < MEMPLAN_STEP_PHASES; ++p) value.bytes[q][p] = breakdown.quantities[q].timeline[p];
  value.sum = breakdown.sum;
  const uint32_t size = out->struct_size;
  std::memcpy(out, &value, std::min<size_t>(size, sizeof value));
  out->struct_size = size;
  return MEMPLAN_OK;
}

memplan_host make_host_table() {
  memplan_host host{};
  host.struct_size = sizeof host;
  host.abi_major = MEMPLAN_ABI_MAJOR;
  host.abi_minor = MEMPLAN_ABI_MINOR;
  host.option_int = option_int;
  host.option_double = option_double;
  host.option_bool = option_bool;
  host.option_string = option_string;
  host.report_error = report_error;
  host.model = model;
  host.workload = workload;
  host.item_count = item_count;
  host.get_item = get_item;
  host.set_item = set_item;
  host.add_item = add_item;
  host.remove_item = remove_item;
  host.set_attr_int = set_attr_int;
  host.get_attr_int = get_attr_int;
  host.set_attr_double = set_attr_double;
  host.get_attr_double = get_attr_double;
  host.set_attr_string = set_attr_string;
  host.get_attr_string = get_attr_string;
  host.intern = intern;
  host.plan_items = plan_items;
  host.add_items = add_items;
  host.attr_handle = attr_handle;
  host.get_attr_int_at = get_attr_int_at;
  host.set_attr_int_at = set_attr_int_at;
  host.get_attr_double_at = get_attr_double_at;
  host.set_attr_double_at = set_attr_double_at;
  host.timeline = timeline;
  host.get_attr_string_at = get_attr_string_at;
  host.set_attr_string_at = set_attr_string_at;
  host.add_work = add_work;
  host.plan_work = plan_work;
  return host;
}

}  // namespace

size_t attribute_slot(memplan_ctx& ctx, const char* key) {
  thread_local std::string lookup;  // no allocation per lookup once it has grown
  lookup.assign(key);
  if (auto found = ctx.attribute_index.find(lookup); found != ctx.attribute_index.end()) return found->second;
  ctx.add_attribute(key);
  return ctx.attributes.size() - 1;
}

bool check_plan(memplan_ctx* ctx, ItemCheck check) {
  for (const PlanItem& item : ctx->plan.items) {
    // The check of every evaluation: a few comparisons, no string unless one fails.
    if (check == ItemCheck::values && item_values_valid(item)) [[likely]] continue;
    bool overflow = false;
    if (auto problem = item_problem(item, check, &overflow)) [[unlikely]] {
      ctx->size_overflow = overflow && !ctx->has_error;
      report_bad_item(ctx, item, *problem);
      return false;
    }
  }
  return true;
}

bool check_work(memplan_ctx* ctx) {
  for (const WorkRecord& record : ctx->plan.work)
    if (auto problem = work_problem(record)) [[unlikely]] {
      host_report(ctx, nullptr, "left a work record that breaks a rule of plugin_abi.h: '" +
                                    std::string(record.name != nullptr ? record.name : "") + "' has " + *problem);
      return false;
    }
  return true;
}

const memplan_host& host_table() {
  static const memplan_host table = make_host_table();
  return table;
}

void host_report(memplan_ctx* ctx, const char* option, const std::string& message) {
  if (ctx->has_error) return;  // the first error is the cause; later ones are consequences
  ctx->has_error = true;
  ctx->error_option = option != nullptr ? option : "";
  ctx->error_message = message;
}

}  // namespace memplan

const memplan_attribute* memplan_ctx::find_attribute(const char* key) const {
  thread_local std::string lookup;
  lookup.assign(key);
  const auto found = attribute_index.find(lookup);
  if (found == attribute_index.end()) return nullptr;
  const memplan_attribute& attribute = attributes[found->second];
  return attribute.type != memplan_attribute::Type::unset ? &attribute : nullptr;
}
