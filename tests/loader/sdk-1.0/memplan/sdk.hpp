// memplan C++ plugin SDK: write an ordinary class, register it with one macro.
//
//   class MyOptimizer {
//    public:
//     static constexpr memplan::sdk::PluginInfo info{
//         "my-optimizer", "1.0.0", "One fp32 state per weight",
//         memplan::sdk::Kind::optimizer, memplan::sdk::Phase::optimizer};
//     static std::span<const memplan_option_spec> options() { return {}; }
//     explicit MyOptimizer(memplan::sdk::Options& options);   // read and validate options
//     void apply(memplan::sdk::Context& ctx);                 // transform the plan
//   };
//   MEMPLAN_PLUGIN(MyOptimizer)
//
// Everything here is header-only and compiled into the plugin: the host and the
// plugin share only the C structs of <memplan/plugin_abi.h>. Every exception a
// plugin throws is caught in the generated entry points and reported to the
// host as an error message; none crosses the library boundary.
#ifndef MEMPLAN_SDK_HPP
#define MEMPLAN_SDK_HPP

#include <memplan/conventions.h>
#include <memplan/plugin_abi.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <exception>
#include <new>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>

namespace memplan::sdk {

enum class Kind : int32_t {
  optimizer = MEMPLAN_KIND_OPTIMIZER,
  precision = MEMPLAN_KIND_PRECISION,
  activations = MEMPLAN_KIND_ACTIVATIONS,
  strategy = MEMPLAN_KIND_STRATEGY,
};

enum class Phase : int32_t {
  trainability = MEMPLAN_PHASE_TRAINABILITY,
  precision = MEMPLAN_PHASE_PRECISION,
  layout = MEMPLAN_PHASE_LAYOUT,
  optimizer = MEMPLAN_PHASE_OPTIMIZER,
  sharding = MEMPLAN_PHASE_SHARDING,
  activations = MEMPLAN_PHASE_ACTIVATIONS,
  overhead = MEMPLAN_PHASE_OVERHEAD,
  budget = MEMPLAN_PHASE_BUDGET,
};

enum class Role : int32_t {
  weights = MEMPLAN_ROLE_WEIGHTS,
  gradients = MEMPLAN_ROLE_GRADIENTS,
  master_weights = MEMPLAN_ROLE_MASTER_WEIGHTS,
  optimizer_states = MEMPLAN_ROLE_OPTIMIZER_STATES,
  activations = MEMPLAN_ROLE_ACTIVATIONS,
  kv_cache = MEMPLAN_ROLE_KV_CACHE,
  buffers = MEMPLAN_ROLE_BUFFERS,
  overhead = MEMPLAN_ROLE_OVERHEAD,
};

enum class Lifetime : int32_t {
  persistent = MEMPLAN_LIFETIME_PERSISTENT,
  gradient = MEMPLAN_LIFETIME_GRADIENT,
  activation = MEMPLAN_LIFETIME_ACTIVATION,
  transient_forward = MEMPLAN_LIFETIME_TRANSIENT_FORWARD,
  transient_backward = MEMPLAN_LIFETIME_TRANSIENT_BACKWARD,
  transient_optimizer = MEMPLAN_LIFETIME_TRANSIENT_OPTIMIZER,
};

enum class Device : int32_t { gpu = MEMPLAN_DEVICE_GPU, cpu = MEMPLAN_DEVICE_CPU };

// Which of the report's three quantities an item counts in (plugin_abi.h,
// MEMPLAN_ITEM_ALLOCATOR_RESERVE / MEMPLAN_ITEM_OUTSIDE_ALLOCATOR):
//   allocated  a tensor from the framework's allocator: allocated, reserved and device memory;
//   reserve    held by the allocator beyond its tensors: reserved and device memory;
//   device     on the GPU outside the allocator (CUDA context, NCCL buffers): device memory only.
enum class Pool : int32_t { allocated = 0, reserve = 1, device = 2 };

enum class ParamClass : int32_t {
  other = MEMPLAN_CLASS_OTHER,
  embedding = MEMPLAN_CLASS_EMBEDDING,
  position_embedding = MEMPLAN_CLASS_POSITION_EMBEDDING,
  attention = MEMPLAN_CLASS_ATTENTION,
  mlp = MEMPLAN_CLASS_MLP,
  norm = MEMPLAN_CLASS_NORM,
  router = MEMPLAN_CLASS_ROUTER,
  expert = MEMPLAN_CLASS_EXPERT,
  lm_head = MEMPLAN_CLASS_LM_HEAD,
  adapter = MEMPLAN_CLASS_ADAPTER,
  attention_kv = MEMPLAN_CLASS_ATTENTION_KV,
  final_norm = MEMPLAN_CLASS_FINAL_NORM,
};

// A plan item as plugins see it. It owns its name, so an item read before the
// plan grows stays valid after (adding items may move the host's storage).
struct Item {
  std::string name;
  Role role = Role::weights;
  Lifetime lifetime = Lifetime::persistent;
  Device device = Device::gpu;
  ParamClass param_class = ParamClass::other;
  int32_t layer = -1;
  uint32_t count = 1;
  bool trainable = false;
  Pool pool = Pool::allocated;
  // MEMPLAN_ITEM_NON_PARAMETER: a buffer or attribute stored with the weights
  // (e.g. quantization scales), which sharding and offloading leave whole.
  bool non_parameter = false;
  // Flag bits this SDK does not know, kept as they came so that a plugin
  // built against it does not clear what a newer host or plugin set.
  uint32_t other_flags = 0;
  double elements = 0;
  double bytes_per_element = 0;
};

struct PluginInfo {
  const char* name;
  const char* version;
  const char* summary;
  Kind kind;
  Phase phase;
};

// Thrown by plugin code to report a problem; `option` names the scenario key
// at fault (the host then adds its file:line:column) or is empty.
class PluginError : public std::runtime_error {
 public:
  PluginError(std::string option, const std::string& message)
      : std::runtime_error(message), option_(std::move(option)) {}
  const std::string& option() const noexcept { return option_; }

 private:
  std::string option_;
};

// Thrown after a host call already recorded the reason; carries no message of its own.
class HostReportedError : public std::exception {
 public:
  const char* what() const noexcept override { return "error already reported to the host"; }
};

// Shared access to the host for both Options and Context.
class HostView {
 public:
  HostView(const memplan_host* host, memplan_ctx* ctx) : host_(host), ctx_(ctx) {}

  // Copies sized by struct_size and zero-filled past it: a host built for an
  // older ABI minor has a smaller struct, and reading past it is undefined.
  const memplan_model& model() const {
    if (!model_) model_ = sized_copy<memplan_model>(host_->model(ctx_));
    return *model_;
  }
  const memplan_workload& workload() const {
    if (!workload_) workload_ = sized_copy<memplan_workload>(host_->workload(ctx_));
    return *workload_;
  }
  bool training() const { return workload().mode == MEMPLAN_MODE_TRAIN; }

  [[noreturn]] void fail(const std::string& message) const { throw PluginError({}, message); }

 protected:
  const memplan_host* host_;
  memplan_ctx* ctx_;

 private:
  template <typename Struct>
  static Struct sized_copy(const Struct* from) {
    Struct copy{};
    if (from != nullptr) std::memcpy(&copy, from, std::min<size_t>(from->struct_size, sizeof copy));
    copy.struct_size = sizeof copy;
    return copy;
  }
  mutable std::optional<memplan_model> model_;
  mutable std::optional<memplan_workload> workload_;
};

// The plugin's scenario options. The host has already rejected unknown keys
// and wrong types; the plugin validates values.
class Options : public HostView {
 public:
  using HostView::HostView;

  std::optional<int64_t> integer(const char* key) const {
    int64_t value = 0;
    const int status = host_->option_int(ctx_, key, &value);  // before read(): argument order is unspecified
    return read(status, value);
  }
  std::optional<double> number(const char* key) const {
    double value = 0;
    const int status = host_->option_double(ctx_, key, &value);
    return read(status, value);
  }
  std::optional<bool> boolean(const char* key) const {
    int value = 0;
    const int status = host_->option_bool(ctx_, key, &value);
    auto found = read(status, value);
    if (!found) return std::nullopt;
    return *found != 0;
  }
  std::optional<std::string> string(const char* key) const {
    const char* value = host_->option_string(ctx_, key);
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  }

  // A positive integer option with a default, e.g. a parallel size.
  int64_t positive_integer(const char* key, int64_t fallback) const {
    int64_t value = integer(key).value_or(fallback);
    if (value < 1) fail(key, "must be a positive integer, got " + std::to_string(value));
    return value;
  }

  using HostView::fail;
  [[noreturn]] void fail(const char* key, const std::string& message) const {
    throw PluginError(key, message);
  }

 private:
  template <typename T>
  static std::optional<T> read(int status, T value) {
    if (status == MEMPLAN_OK) return value;
    if (status == MEMPLAN_ABSENT) return std::nullopt;
    throw HostReportedError();
  }
};

// The plan and attributes during apply().
class Context : public HostView {
 public:
  using HostView::HostView;

  size_t size() const { return host_->item_count(ctx_); }

  Item item(size_t index) const {
    memplan_item raw{};
    raw.struct_size = sizeof raw;
    check(host_->get_item(ctx_, index, &raw));
    return from_raw(raw);
  }
  void set(size_t index, const Item& item) {
    memplan_item raw = to_raw(item);
    check(host_->set_item(ctx_, index, &raw));
  }
  void add(const Item& item) {
    memplan_item raw = to_raw(item);
    check(host_->add_item(ctx_, &raw));
  }
  void remove(size_t index) { check(host_->remove_item(ctx_, index)); }

  int64_t attr_int(const char* key, int64_t fallback) const {
    int64_t value = 0;
    int status = host_->get_attr_int(ctx_, key, &value);
    if (status == MEMPLAN_ABSENT) return fallback;
    check(status);
    return value;
  }
  double attr_double(const char* key, double fallback) const {
    double value = 0;
    int status = host_->get_attr_double(ctx_, key, &value);
    if (status == MEMPLAN_ABSENT) return fallback;
    check(status);
    return value;
  }
  std::string_view attr_string(const char* key, std::string_view fallback) const {
    const char* value = host_->get_attr_string(ctx_, key);
    return value == nullptr ? fallback : std::string_view(value);
  }
  // Reads a dtype attribute the precision plugin must have set.
  double required_attr_double(const char* key) const {
    double value = 0;
    int status = host_->get_attr_double(ctx_, key, &value);
    if (status == MEMPLAN_ABSENT)
      fail(std::string("attribute '") + key + "' is not set; is a [precision] plugin configured?");
    check(status);
    return value;
  }
  void set_attr(const char* key, int64_t value) { check(host_->set_attr_int(ctx_, key, value)); }
  void set_attr(const char* key, int value) { set_attr(key, static_cast<int64_t>(value)); }
  void set_attr(const char* key, double value) { check(host_->set_attr_double(ctx_, key, value)); }
  void set_attr(const char* key, const char* value) { check(host_->set_attr_string(ctx_, key, value)); }

 private:
  static void check(int status) {
    if (status != MEMPLAN_OK) throw HostReportedError();
  }
  static constexpr uint32_t kKnownFlags = MEMPLAN_ITEM_TRAINABLE | MEMPLAN_ITEM_ALLOCATOR_RESERVE |
                                          MEMPLAN_ITEM_OUTSIDE_ALLOCATOR | MEMPLAN_ITEM_NON_PARAMETER;
  static Item from_raw(const memplan_item& raw) {
    Item item;
    if (raw.name != nullptr) item.name.assign(raw.name);
    item.role = static_cast<Role>(raw.role);
    item.lifetime = static_cast<Lifetime>(raw.lifetime);
    item.device = static_cast<Device>(raw.device);
    item.param_class = static_cast<ParamClass>(raw.param_class);
    item.layer = raw.layer;
    item.count = raw.count;
    item.trainable = (raw.flags & MEMPLAN_ITEM_TRAINABLE) != 0;
    item.pool = (raw.flags & MEMPLAN_ITEM_OUTSIDE_ALLOCATOR) != 0   ? Pool::device
                : (raw.flags & MEMPLAN_ITEM_ALLOCATOR_RESERVE) != 0 ? Pool::reserve
                                                                    : Pool::allocated;
    item.non_parameter = (raw.flags & MEMPLAN_ITEM_NON_PARAMETER) != 0;
    item.other_flags = raw.flags & ~kKnownFlags;
    item.elements = raw.elements;
    item.bytes_per_element = raw.bytes_per_element;
    return item;
  }
  static memplan_item to_raw(const Item& item) {
    memplan_item raw{};
    raw.struct_size = sizeof raw;
    raw.name = item.name.c_str();
    raw.role = static_cast<int32_t>(item.role);
    raw.lifetime = static_cast<int32_t>(item.lifetime);
    raw.device = static_cast<int32_t>(item.device);
    raw.param_class = static_cast<int32_t>(item.param_class);
    raw.layer = item.layer;
    raw.count = item.count;
    raw.flags = (item.trainable ? MEMPLAN_ITEM_TRAINABLE : 0u) |
                (item.pool == Pool::reserve ? MEMPLAN_ITEM_ALLOCATOR_RESERVE : 0u) |
                (item.pool == Pool::device ? MEMPLAN_ITEM_OUTSIDE_ALLOCATOR : 0u) |
                (item.non_parameter ? MEMPLAN_ITEM_NON_PARAMETER : 0u) | (item.other_flags & ~kKnownFlags);
    raw.elements = item.elements;
    raw.bytes_per_element = item.bytes_per_element;
    return raw;
  }
};

namespace detail {

inline void report(const memplan_host* host, memplan_ctx* ctx, const char* option, const char* message) {
  host->report_error(ctx, option, message);
}

// Runs plugin code and turns every exception into a reported error.
template <typename Body>
int guarded(const memplan_host* host, memplan_ctx* ctx, Body&& body) noexcept {
  try {
    body();
    return MEMPLAN_OK;
  } catch (const HostReportedError&) {
    return MEMPLAN_ERROR;
  } catch (const PluginError& error) {
    report(host, ctx, error.option().empty() ? nullptr : error.option().c_str(), error.what());
  } catch (const std::bad_alloc&) {
    report(host, ctx, nullptr, "out of memory");
  } catch (const std::exception& error) {
    report(host, ctx, nullptr, (std::string("unexpected exception: ") + error.what()).c_str());
  } catch (...) {
    report(host, ctx, nullptr, "unexpected exception of unknown type");
  }
  return MEMPLAN_ERROR;
}

template <typename Plugin>
int create(const memplan_host* host, memplan_ctx* ctx, void** state) noexcept {
  *state = nullptr;
  return guarded(host, ctx, [&] {
    Options options(host, ctx);
    *state = new Plugin(options);
  });
}

template <typename Plugin>
int apply(void* state, const memplan_host* host, memplan_ctx* ctx) noexcept {
  return guarded(host, ctx, [&] {
    Context context(host, ctx);
    static_cast<Plugin*>(state)->apply(context);
  });
}

template <typename Plugin>
void destroy(void* state) noexcept {
  delete static_cast<Plugin*>(state);
}

template <typename Plugin>
const memplan_plugin_descriptor* descriptor() noexcept {
  static const memplan_plugin_descriptor value = [] {
    std::span<const memplan_option_spec> specs = Plugin::options();
    memplan_plugin_descriptor d{};
    d.struct_size = sizeof d;
    d.abi_major = MEMPLAN_ABI_MAJOR;
    d.abi_minor = MEMPLAN_ABI_MINOR;
    d.name = Plugin::info.name;
    d.version = Plugin::info.version;
    d.summary = Plugin::info.summary;
    d.kind = static_cast<int32_t>(Plugin::info.kind);
    d.phase = static_cast<int32_t>(Plugin::info.phase);
    d.options = specs.data();
    d.option_count = static_cast<uint32_t>(specs.size());
    d.option_spec_size = sizeof(memplan_option_spec);
    d.create = &create<Plugin>;
    d.apply = &apply<Plugin>;
    d.destroy = &destroy<Plugin>;
    return d;
  }();
  return &value;
}

}  // namespace detail
}  // namespace memplan::sdk

// Generates the library's one exported entry point for a plugin class.
#define MEMPLAN_PLUGIN(PluginClass)                                                         \
  extern "C" MEMPLAN_EXPORT const memplan_plugin_descriptor* memplan_plugin_v1(void) {     \
    return ::memplan::sdk::detail::descriptor<PluginClass>();                               \
  }

#endif  // MEMPLAN_SDK_HPP
