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
#include <cmath>
#include <concepts>
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <exception>
#include <new>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

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
  work = MEMPLAN_PHASE_WORK,  // ABI 1.2
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
  setup = MEMPLAN_LIFETIME_SETUP,
  backward_start = MEMPLAN_LIFETIME_BACKWARD_START,
  backward_end = MEMPLAN_LIFETIME_BACKWARD_END,
  backward_layers = MEMPLAN_LIFETIME_BACKWARD_LAYERS,
  backward_in_layers = MEMPLAN_LIFETIME_BACKWARD_IN_LAYERS,
  forward_in_layers = MEMPLAN_LIFETIME_FORWARD_IN_LAYERS,
  forward_end = MEMPLAN_LIFETIME_FORWARD_END,
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
  attention_latent = MEMPLAN_CLASS_ATTENTION_LATENT,
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
  // The host's interned copy of `name` when the item came from Context::item:
  // set() and add() reuse it while `name` is unchanged, and intern otherwise.
  const char* interned_name = nullptr;
};

// What apply() reads of the workload (ABI 1.1, memplan_plugin_descriptor.reads).
// A host sweeping micro-batch or sequence length reuses the plan as it stood
// before the first plugin that reads them. `unknown` (the default) is read
// as "everything"; declare `nothing` or the fields only when it is true: a
// test compares such sweeps with full evaluations.
enum class Reads : uint32_t {
  unknown = 0,
  nothing = MEMPLAN_READS_DECLARED,
  micro_batch = MEMPLAN_READS_DECLARED | MEMPLAN_READS_MICRO_BATCH,
  seq_len = MEMPLAN_READS_DECLARED | MEMPLAN_READS_SEQ_LEN,
  batch_and_seq_len = MEMPLAN_READS_DECLARED | MEMPLAN_READS_MICRO_BATCH | MEMPLAN_READS_SEQ_LEN,
  grad_accum = MEMPLAN_READS_DECLARED | MEMPLAN_READS_GRAD_ACCUM,  // ABI 1.2: create() reads grad_accum
};

struct PluginInfo {
  const char* name;
  const char* version;
  const char* summary;
  Kind kind;
  Phase phase;
  Reads reads = Reads::unknown;
};

// An item name the host interned (Options::intern, Context::intern): valid for
// the plugin state's life; using it costs nothing.
struct Name {
  const char* text = nullptr;
  std::string_view view() const { return text != nullptr ? std::string_view(text) : std::string_view(); }
};

// ABI 1.2: one record of a step's work (memplan_work), for Context::add_work.
enum class WorkKind : int32_t {
  compute = MEMPLAN_WORK_COMPUTE,
  memory = MEMPLAN_WORK_MEMORY,
  collective = MEMPLAN_WORK_COLLECTIVE,
  bubble = MEMPLAN_WORK_BUBBLE,
};
enum class Collective : int32_t {
  all_reduce = MEMPLAN_COLLECTIVE_ALL_REDUCE,
  all_gather = MEMPLAN_COLLECTIVE_ALL_GATHER,
  reduce_scatter = MEMPLAN_COLLECTIVE_REDUCE_SCATTER,
  all_to_all = MEMPLAN_COLLECTIVE_ALL_TO_ALL,
  send_recv = MEMPLAN_COLLECTIVE_SEND_RECV,
};
enum class Pass : int32_t {
  forward = MEMPLAN_PASS_FORWARD,
  backward = MEMPLAN_PASS_BACKWARD,
  optimizer = MEMPLAN_PASS_OPTIMIZER,
};
enum class Math : int32_t {
  fp32 = MEMPLAN_MATH_FP32,
  tf32 = MEMPLAN_MATH_TF32,
  bf16 = MEMPLAN_MATH_BF16,
  fp16 = MEMPLAN_MATH_FP16,
  fp8 = MEMPLAN_MATH_FP8,
};
struct Work {
  Name name;
  WorkKind kind = WorkKind::compute;
  Pass pass = Pass::forward;
  Math math = Math::bf16;
  bool model_flops = false;  // counts in model FLOPs (MFU); false: hardware FLOPs only (recomputation)
  double amount = 0;         // FLOPs, bytes or (bubble) a fraction of the compute time
  double efficiency = 0;     // fraction of the peak, in (0, 1]; 0: not known (amounts reported, no time)
  // Collectives: the group and how much of the time compute hides.
  Collective collective = Collective::all_reduce;
  int64_t ranks = 1;
  int64_t stride = 1;
  double overlap = 0;
};

// An attribute resolved once (Options::attribute); read and written by handle.
struct Attribute {
  int32_t handle = -1;
};

// A plan item to add on the fast path (Context::add): as Item, with an
// interned name instead of an owned string.
struct NewItem {
  Name name;
  Role role = Role::weights;
  Lifetime lifetime = Lifetime::persistent;
  Device device = Device::gpu;
  ParamClass param_class = ParamClass::other;
  int32_t layer = -1;
  uint32_t count = 1;
  bool trainable = false;
  Pool pool = Pool::allocated;
  bool non_parameter = false;
  double elements = 0;
  double bytes_per_element = 0;
};

// ceil(elements x bytes per element) x count: the bytes of an item (the host's rule).
inline double item_bytes(double elements, double bytes_per_element, uint32_t count) {
  return std::ceil(elements * bytes_per_element) * count;
}

// One item of the host's plan array, read and written in place (ABI 1.1).
// Valid until the plan grows or shrinks (Context::add, Context::remove).
class ItemRef {
 public:
  explicit ItemRef(memplan_item* raw) : raw_(raw) {}

  std::string_view name() const { return raw_->name != nullptr ? std::string_view(raw_->name) : std::string_view(); }
  bool named(Name name) const { return raw_->name == name.text || name_view_equals(name.view()); }
  Role role() const { return static_cast<Role>(raw_->role); }
  Lifetime lifetime() const { return static_cast<Lifetime>(raw_->lifetime); }
  Device device() const { return static_cast<Device>(raw_->device); }
  ParamClass param_class() const { return static_cast<ParamClass>(raw_->param_class); }
  int32_t layer() const { return raw_->layer; }
  uint32_t count() const { return raw_->count; }
  bool trainable() const { return (raw_->flags & MEMPLAN_ITEM_TRAINABLE) != 0; }
  bool non_parameter() const { return (raw_->flags & MEMPLAN_ITEM_NON_PARAMETER) != 0; }
  bool vocab_sized() const { return (raw_->flags & MEMPLAN_ITEM_VOCAB_SIZED) != 0; }  // plugin_abi.h
  // The stream whose allocator pool holds the item (MEMPLAN_ITEM_STREAM_*): 0 is the compute stream.
  uint32_t stream() const { return (raw_->flags & MEMPLAN_ITEM_STREAM_MASK) >> MEMPLAN_ITEM_STREAM_SHIFT; }
  Pool pool() const {
    return (raw_->flags & MEMPLAN_ITEM_OUTSIDE_ALLOCATOR) != 0   ? Pool::device
           : (raw_->flags & MEMPLAN_ITEM_ALLOCATOR_RESERVE) != 0 ? Pool::reserve
                                                                 : Pool::allocated;
  }
  double elements() const { return raw_->elements; }
  double bytes_per_element() const { return raw_->bytes_per_element; }
  double bytes() const { return item_bytes(raw_->elements, raw_->bytes_per_element, raw_->count); }

  void set_name(Name name) { raw_->name = name.text; }
  void set_role(Role role) { raw_->role = static_cast<int32_t>(role); }
  void set_lifetime(Lifetime lifetime) { raw_->lifetime = static_cast<int32_t>(lifetime); }
  void set_device(Device device) { raw_->device = static_cast<int32_t>(device); }
  void set_param_class(ParamClass param_class) { raw_->param_class = static_cast<int32_t>(param_class); }
  void set_layer(int32_t layer) { raw_->layer = layer; }
  void set_count(uint32_t count) { raw_->count = count; }
  void set_trainable(bool on) { set_flag(MEMPLAN_ITEM_TRAINABLE, on); }
  void set_non_parameter(bool on) { set_flag(MEMPLAN_ITEM_NON_PARAMETER, on); }
  void set_releasable(bool on) { set_flag(MEMPLAN_ITEM_RELEASABLE, on); }  // plugin_abi.h MEMPLAN_ITEM_RELEASABLE
  void set_vocab_sized(bool on) { set_flag(MEMPLAN_ITEM_VOCAB_SIZED, on); }  // plugin_abi.h MEMPLAN_ITEM_VOCAB_SIZED
  // Streams above 255 do not fit the flags' 8 bits: the caller numbers its streams from MEMPLAN_STREAM_*.
  void set_stream(uint32_t stream) {
    raw_->flags = (raw_->flags & ~MEMPLAN_ITEM_STREAM_MASK) | ((stream << MEMPLAN_ITEM_STREAM_SHIFT) & MEMPLAN_ITEM_STREAM_MASK);
  }
  void set_pool(Pool pool) {
    raw_->flags &= ~(MEMPLAN_ITEM_ALLOCATOR_RESERVE | MEMPLAN_ITEM_OUTSIDE_ALLOCATOR);
    if (pool == Pool::reserve) raw_->flags |= MEMPLAN_ITEM_ALLOCATOR_RESERVE;
    if (pool == Pool::device) raw_->flags |= MEMPLAN_ITEM_OUTSIDE_ALLOCATOR;
  }
  void set_elements(double elements) { raw_->elements = elements; }
  void set_bytes_per_element(double bytes) { raw_->bytes_per_element = bytes; }

  memplan_item& raw() { return *raw_; }
  const memplan_item& raw() const { return *raw_; }

 private:
  bool name_view_equals(std::string_view text) const { return raw_->name != nullptr && name() == text; }
  void set_flag(uint32_t flag, bool on) { raw_->flags = on ? (raw_->flags | flag) : (raw_->flags & ~flag); }
  memplan_item* raw_;
};

// Items to append in one call (Context::add(const ItemBatch&)): a plugin
// state member, cleared at the start of apply(), so that adding allocates
// nothing once warm and the plan array, which adding moves, is not touched
// while the plugin still walks it.
class ItemBatch {
 public:
  void clear() { items_.clear(); }
  size_t size() const { return items_.size(); }
  // Appends a copy of `item` and returns it to edit; valid until the next append.
  ItemRef copy_of(const ItemRef& item) {
    items_.push_back(item.raw());
    items_.back().struct_size = sizeof(memplan_item);
    return ItemRef(&items_.back());
  }
  ItemRef append(const NewItem& item) {
    memplan_item& raw = items_.emplace_back();
    raw.struct_size = sizeof raw;
    ItemRef added(&raw);
    added.set_name(item.name);
    added.set_role(item.role);
    added.set_lifetime(item.lifetime);
    added.set_device(item.device);
    added.set_param_class(item.param_class);
    added.set_layer(item.layer);
    added.set_count(item.count);
    added.set_trainable(item.trainable);
    added.set_pool(item.pool);
    added.set_non_parameter(item.non_parameter);
    added.set_elements(item.elements);
    added.set_bytes_per_element(item.bytes_per_element);
    return added;
  }
  const memplan_item* data() const { return items_.data(); }

 private:
  std::vector<memplan_item> items_;
};

// The plan array as a range of ItemRef (Context::items).
class Items {
 public:
  Items(memplan_item* first, size_t count, size_t stride) : first_(first), count_(count), stride_(stride) {}

  class iterator {
   public:
    iterator(memplan_item* at, size_t stride) : at_(reinterpret_cast<char*>(at)), stride_(stride) {}
    ItemRef operator*() const { return ItemRef(reinterpret_cast<memplan_item*>(at_)); }
    iterator& operator++() {
      at_ += stride_;
      return *this;
    }
    bool operator!=(const iterator& other) const { return at_ != other.at_; }
    bool operator==(const iterator& other) const { return at_ == other.at_; }

   private:
    char* at_;
    size_t stride_;
  };

  size_t size() const { return count_; }
  bool empty() const { return count_ == 0; }
  ItemRef operator[](size_t index) const {
    return ItemRef(reinterpret_cast<memplan_item*>(reinterpret_cast<char*>(first_) + index * stride_));
  }
  iterator begin() const { return iterator(first_, stride_); }
  iterator end() const {
    return iterator(reinterpret_cast<memplan_item*>(reinterpret_cast<char*>(first_) + count_ * stride_), stride_);
  }

 private:
  memplan_item* first_;
  size_t count_;
  size_t stride_;
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

  // A name for items added or renamed on the fast path; intern in the
  // constructor and keep it.
  Name intern(const char* name) const {
    const char* text = host_->intern(ctx_, name);
    if (text == nullptr) throw HostReportedError();
    return Name{text};
  }
  // An attribute handle; resolve in the constructor and keep it.
  Attribute attribute(const char* key) const {
    const int32_t handle = host_->attr_handle(ctx_, key);
    if (handle < 0) throw HostReportedError();
    return Attribute{handle};
  }

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

  // Facts the host publishes as attributes before create(), such as the
  // model's weight format (model.quantization.*, conventions.h); nullopt when
  // absent.
  std::optional<std::string> fact_string(const char* key) const {
    const char* value = host_->get_attr_string(ctx_, key);
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  }
  std::optional<int64_t> fact_integer(const char* key) const {
    int64_t value = 0;
    const int status = host_->get_attr_int(ctx_, key, &value);
    return read(status, value);
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

  // The plan array, read and written in place: the fast path. Valid until
  // add() or remove().
  Items items() const {
    size_t count = 0;
    size_t stride = 0;
    memplan_item* first = host_->plan_items(ctx_, &count, &stride);
    if (first == nullptr && count != 0) throw HostReportedError();
    return Items(first, count, stride);
  }
  size_t size() const { return items().size(); }

  // A copy of item `index` that owns its name (the ABI 1.0 style).
  Item item(size_t index) const { return from_raw(at(index).raw()); }
  void set(size_t index, const Item& item) {
    ItemRef target = at(index);
    const char* name = target.name() == item.name ? target.raw().name : name_of(item);
    memplan_item raw = to_raw(item);
    raw.name = name;
    raw.struct_size = target.raw().struct_size;
    target.raw() = raw;
  }
  void add(const Item& item) {
    memplan_item raw = to_raw(item);
    raw.name = name_of(item);
    check(host_->add_items(ctx_, &raw, 1));
  }
  void add(const NewItem& item) {
    memplan_item raw{};
    raw.struct_size = sizeof raw;
    raw.name = item.name.text;
    raw.role = static_cast<int32_t>(item.role);
    raw.lifetime = static_cast<int32_t>(item.lifetime);
    raw.device = static_cast<int32_t>(item.device);
    raw.param_class = static_cast<int32_t>(item.param_class);
    raw.layer = item.layer;
    raw.count = item.count;
    raw.flags = flags_of(item.trainable, item.pool, item.non_parameter, 0);
    raw.elements = item.elements;
    raw.bytes_per_element = item.bytes_per_element;
    check(host_->add_items(ctx_, &raw, 1));
  }
  void add(const ItemBatch& batch) {
    if (batch.size() > 0) check(host_->add_items(ctx_, batch.data(), batch.size()));
  }
  void remove(size_t index) { check(host_->remove_item(ctx_, index)); }

  // ABI 1.2: the work records, read and edited in place (a strategy that does
  // some work another way rewrites the record that counted it). Valid until
  // add_work. Call the callback with each memplan_work&.
  template <typename Visit>
  void for_each_work(Visit visit) {
    size_t count = 0, stride = 0;
    memplan_work* first = host_->plan_work(ctx_, &count, &stride);
    if (first == nullptr && count != 0) throw HostReportedError();
    auto* bytes = reinterpret_cast<unsigned char*>(first);
    for (size_t i = 0; i < count; ++i) visit(*reinterpret_cast<memplan_work*>(bytes + i * stride));
  }

  // ABI 1.2: a record of the step's work (FLOPs or bytes moved), from which
  // the host derives the step's time. Work of zero amount is not recorded.
  void add_work(const Work& work) {
    // Nothing to record: no amount, or a collective within one GPU.
    if (work.amount == 0 || (work.kind == WorkKind::collective && work.ranks <= 1)) return;
    memplan_work raw{};
    raw.struct_size = sizeof raw;
    raw.name = work.name.text;
    raw.kind = static_cast<int32_t>(work.kind);
    raw.pass = static_cast<int32_t>(work.pass);
    raw.math = static_cast<int32_t>(work.math);
    raw.flags = work.model_flops ? MEMPLAN_WORK_MODEL_FLOPS : 0u;
    raw.amount = work.amount;
    raw.efficiency = work.efficiency;
    raw.collective = static_cast<int32_t>(work.collective);
    raw.ranks = static_cast<int32_t>(work.ranks);
    raw.stride = work.stride;
    raw.overlap = work.overlap;
    check(host_->add_work(ctx_, &raw, 1));
  }

  // The step timeline of the plan as it stands (what the report computes).
  memplan_timeline timeline() const {
    memplan_timeline value{};
    value.struct_size = sizeof value;
    check(host_->timeline(ctx_, &value));
    return value;
  }

  // Attributes by handle (Options::attribute): no string lookup.
  int64_t attr_int(Attribute attribute, int64_t fallback) const {
    int64_t value = 0;
    const int status = host_->get_attr_int_at(ctx_, attribute.handle, &value);
    if (status == MEMPLAN_ABSENT) return fallback;
    check(status);
    return value;
  }
  double attr_double(Attribute attribute, double fallback) const {
    double value = 0;
    const int status = host_->get_attr_double_at(ctx_, attribute.handle, &value);
    if (status == MEMPLAN_ABSENT) return fallback;
    check(status);
    return value;
  }
  // A dtype (or other) attribute an earlier plugin must have set; `key` names it in the error.
  double required_attr_double(Attribute attribute, const char* key) const {
    double value = 0;
    const int status = host_->get_attr_double_at(ctx_, attribute.handle, &value);
    if (status == MEMPLAN_ABSENT)
      fail(std::string("attribute '") + key + "' is not set; is a [precision] plugin configured?");
    check(status);
    return value;
  }
  std::string_view attr_string(Attribute attribute, std::string_view fallback) const {
    const char* value = nullptr;
    const int status = host_->get_attr_string_at(ctx_, attribute.handle, &value);
    if (status == MEMPLAN_ABSENT) return fallback;
    check(status);
    return value != nullptr ? std::string_view(value) : fallback;
  }
  void set_attr(Attribute attribute, const char* value) {
    check(host_->set_attr_string_at(ctx_, attribute.handle, value));
  }
  void set_attr(Attribute attribute, int64_t value) { check(host_->set_attr_int_at(ctx_, attribute.handle, value)); }
  void set_attr(Attribute attribute, int value) { set_attr(attribute, static_cast<int64_t>(value)); }
  void set_attr(Attribute attribute, double value) {
    check(host_->set_attr_double_at(ctx_, attribute.handle, value));
  }

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
  void check(int status) const {
    if (status != MEMPLAN_OK) throw HostReportedError();
  }
  static constexpr uint32_t kKnownFlags = MEMPLAN_ITEM_TRAINABLE | MEMPLAN_ITEM_ALLOCATOR_RESERVE |
                                          MEMPLAN_ITEM_OUTSIDE_ALLOCATOR | MEMPLAN_ITEM_NON_PARAMETER;
  static uint32_t flags_of(bool trainable, Pool pool, bool non_parameter, uint32_t other) {
    return (trainable ? MEMPLAN_ITEM_TRAINABLE : 0u) | (pool == Pool::reserve ? MEMPLAN_ITEM_ALLOCATOR_RESERVE : 0u) |
           (pool == Pool::device ? MEMPLAN_ITEM_OUTSIDE_ALLOCATOR : 0u) |
           (non_parameter ? MEMPLAN_ITEM_NON_PARAMETER : 0u) | (other & ~kKnownFlags);
  }
  // The interned name of `item`: the one it came with while unchanged.
  const char* name_of(const Item& item) const {
    if (item.interned_name != nullptr && item.name == item.interned_name) return item.interned_name;
    return intern(item.name.c_str()).text;
  }
  ItemRef at(size_t index) const {
    const Items all = items();
    if (index >= all.size()) {
      // snprintf, not std::to_string: its helpers would be exported from the plugin.
      char text[96];
      std::snprintf(text, sizeof text, "used item index %zu but the plan has %zu items", index, all.size());
      fail(text);
    }
    return all[index];
  }
  static Item from_raw(const memplan_item& raw) {
    Item item;
    if (raw.name != nullptr) item.name.assign(raw.name);
    item.interned_name = raw.name;
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
    raw.flags = flags_of(item.trainable, item.pool, item.non_parameter, item.other_flags);
    raw.elements = item.elements;
    raw.bytes_per_element = item.bytes_per_element;
    return raw;
  }
};

// Names made of an item's name and a fixed suffix ("attn.q" + ".grad"),
// interned once per source name and kept: a plugin state member. Looked up by
// the source's interned pointer, trying the entry after the last one found
// first (plugins walk the plan in the same order every evaluation).
class SuffixedNames {
 public:
  explicit SuffixedNames(const char* suffix) : suffix_(suffix) {}

  Name operator()(const HostView& host, const ItemRef& source) {
    const char* from = source.raw().name;
    if (next_ < cache_.size() && cache_[next_].first == from) return Name{cache_[next_++].second};
    for (size_t i = 0; i < cache_.size(); ++i)
      if (cache_[i].first == from) {
        next_ = i + 1;
        return Name{cache_[i].second};
      }
    const std::string text = std::string(source.name()) + suffix_;
    const Name made = host.intern(text.c_str());
    cache_.emplace_back(from, made.text);
    next_ = cache_.size();
    return made;
  }
 private:
  std::string suffix_;
  std::vector<std::pair<const char*, const char*>> cache_;
  size_t next_ = 0;
};

// What MEMPLAN_PLUGIN needs of a plugin class, one requirement at a time so
// that a class that lacks one is told which (check_plugin_class below turns
// each into a static_assert with a message; a bare concept failure would list
// the requirement as the compiler spells it).
template <typename P>
concept HasPluginInfo = requires { requires std::same_as<std::remove_cvref_t<decltype(P::info)>, PluginInfo>; };
template <typename P>
concept HasOptionSpecs = requires {
  { P::options() } -> std::convertible_to<std::span<const memplan_option_spec>>;
};
template <typename P>
concept ConstructibleFromOptions = std::constructible_from<P, Options&>;
template <typename P>
concept HasApply = requires(P& plugin, Context& ctx) { plugin.apply(ctx); };

// A class MEMPLAN_PLUGIN can export.
template <typename P>
concept Plugin = HasPluginInfo<P> && HasOptionSpecs<P> && ConstructibleFromOptions<P> && HasApply<P>;

namespace detail {

template <typename P>
constexpr bool check_plugin_class() {
  static_assert(HasPluginInfo<P>,
                "MEMPLAN_PLUGIN(Class): Class needs a member `static constexpr memplan::sdk::PluginInfo info{name, "
                "version, summary, kind, phase}`");
  static_assert(HasOptionSpecs<P>,
                "MEMPLAN_PLUGIN(Class): Class needs `static std::span<const memplan_option_spec> options()` (return "
                "{} for a plugin without options)");
  static_assert(ConstructibleFromOptions<P>,
                "MEMPLAN_PLUGIN(Class): Class needs a public constructor `explicit Class(memplan::sdk::Options&)` "
                "(it reads the options, once per scenario)");
  static_assert(HasApply<P>,
                "MEMPLAN_PLUGIN(Class): Class needs a public member `void apply(memplan::sdk::Context&)` (it "
                "transforms the plan, once per evaluation)");
  return Plugin<P>;
}

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
    d.reads = static_cast<uint32_t>(Plugin::info.reads);
    return d;
  }();
  return &value;
}

// The descriptor of a class that passed check_plugin_class, and nothing for
// one that did not: its static_assert has said why, and instantiating the
// descriptor would only add errors about the same missing member.
template <typename P>
const memplan_plugin_descriptor* checked_descriptor() noexcept {
  if constexpr (Plugin<P>)
    return descriptor<P>();
  else
    return nullptr;
}

}  // namespace detail
}  // namespace memplan::sdk

// Generates the library's one exported entry point for a plugin class, after
// checking the class against memplan::sdk::Plugin.
#define MEMPLAN_PLUGIN(PluginClass)                                                          \
  static_assert(::memplan::sdk::detail::check_plugin_class<PluginClass>(),                  \
                "MEMPLAN_PLUGIN(" #PluginClass "): not a plugin class (see the message above)"); \
  extern "C" MEMPLAN_EXPORT const memplan_plugin_descriptor* memplan_plugin_v1(void) {      \
    return ::memplan::sdk::detail::checked_descriptor<PluginClass>();                        \
  }

#endif  // MEMPLAN_SDK_HPP
