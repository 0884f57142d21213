#include "memplan/core/estimator.hpp"

#include <memplan/conventions.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "plugins/host_api.hpp"
#include "memplan/core/text.hpp"

namespace memplan {
namespace {

// TOML reads 1e12 and 2.0 as floats: where an integer option gets a float
// that is a whole number, say how to write it (a value copied as is from a
// framework's JSON config, where 1e12 is a number like any other).
std::string whole_number_hint(const memplan_option_spec& spec, const OptionValue& option) {
  if (spec.type != MEMPLAN_OPTION_INT || option.type != OptionValue::Type::floating || option.list) return "";
  const double value = option.floating;
  if (!std::isfinite(value) || value != std::floor(value) || std::fabs(value) >= 9.0e18) return "";
  return " (TOML reads " + option_value_text(option) + " as a float: write the whole number, " +
         std::to_string(static_cast<long long>(value)) + ")";
}


std::string with_article(std::string_view noun) {
  const bool vowel = !noun.empty() && std::string_view("aeiou").find(noun[0]) != std::string_view::npos;
  return (vowel ? "an " : "a ") + std::string(noun);
}

std::string_view option_type_name(int32_t type) {
  switch (type) {
    case MEMPLAN_OPTION_INT: return "an integer";
    case MEMPLAN_OPTION_DOUBLE: return "a number";
    case MEMPLAN_OPTION_BOOL: return "a boolean (true or false)";
    default: return "a string";
  }
}

std::string_view value_type_name(OptionValue::Type type) {
  switch (type) {
    case OptionValue::Type::integer: return "an integer";
    case OptionValue::Type::floating: return "a float";
    case OptionValue::Type::boolean: return "a boolean";
    default: return "a string";
  }
}

bool accepts(int32_t spec_type, OptionValue::Type value_type) {
  switch (spec_type) {
    case MEMPLAN_OPTION_INT: return value_type == OptionValue::Type::integer;
    case MEMPLAN_OPTION_DOUBLE:
      return value_type == OptionValue::Type::integer || value_type == OptionValue::Type::floating;
    case MEMPLAN_OPTION_BOOL: return value_type == OptionValue::Type::boolean;
    default: return value_type == OptionValue::Type::string;
  }
}

std::string plugin_label(const LoadedPlugin& plugin) {
  return std::string(kind_name(plugin.descriptor.kind)) + " plugin '" + plugin.name + "'";
}

// A model that only ABI 1.3's memplan_model can describe (latent attention,
// dense layers before the routed ones) would reach a plugin built for an older
// minor as a plain model: it would size K and V, the KV cache and the MLP of
// every layer wrongly without knowing. Such a plugin is refused for it.
void require_model_abi(const ModelSpec& model, const LoadedPlugin& plugin, const ComponentSpec& component) {
  constexpr uint16_t kModelMinor = 3;
  if (plugin.descriptor.abi_minor >= kModelMinor) return;
  const char* feature = model.latent_attention() ? "multi-head latent attention (kv_lora_rank)"
                        : model.dense_layers > 0 ? "dense layers before the expert layers (dense_layers)"
                                                 : nullptr;
  if (feature == nullptr) return;
  fail_at(component.use_location,
          "in " + component.section + ", " + plugin_label(plugin) + " was built for plugin ABI 1." +
              std::to_string(plugin.descriptor.abi_minor) + ", which cannot describe this model's " + feature +
              " (rule: such a model needs plugins built for ABI 1." + std::to_string(kModelMinor) +
              " or later); rebuild the plugin against SDK 1." + std::to_string(kModelMinor) +
              " or later (plugin library " + plugin.path + ")");
}

// Throws the error a plugin call left in the context, located at the option it
// names (or at the component's `use`), naming the library.
[[noreturn]] void fail_plugin_call(const memplan_ctx& ctx, const char* callback, int status) {
  const ComponentSpec& component = *ctx.component;
  const LoadedPlugin& plugin = *ctx.plugin;
  std::string message = ctx.has_error ? ctx.error_message
                                      : std::string(callback) + "() returned status " + std::to_string(status) +
                                            " (not MEMPLAN_OK) without reporting why";
  SourceLocation where = component.use_location;
  std::string subject = "in " + component.section + ", " + plugin_label(plugin);
  if (!ctx.error_option.empty()) {
    for (const OptionValue& option : component.options)
      if (option.key == ctx.error_option) where = option.value_location;
    subject += ", option '" + ctx.error_option + "'";
  }
  const std::string text = where.str() + ": error: " + subject + ": " + message + " (plugin library " + plugin.path + ")";
  if (ctx.size_overflow) throw PlanTooLargeError(text);
  throw Error(text);
}

}  // namespace

Estimator::Estimator(const Scenario& scenario, const PluginRegistry& registry)
    : scenario_(scenario), inventory_(parameter_inventory(scenario.model)), host_(std::make_unique<HostState>()) {
  memplan_ctx& ctx = host_->ctx;
  ctx.model = to_abi_model(scenario.model, count_parameters(inventory_));
  ctx.workload.struct_size = sizeof ctx.workload;
  ctx.workload.mode = scenario.mode;
  ctx.workload.micro_batch = scenario.micro_batch;
  ctx.workload.seq_len = scenario.seq_len;
  ctx.workload.grad_accum = scenario.grad_accum;
  ctx.workload.gpu_count = scenario.hardware.count;
  gpu_count_ = scenario.hardware.count;
  ctx.workload.gpu_memory_bytes = scenario.hardware.memory_bytes;

  // The checkpoint's weight format, readable by plugins from create() on.
  const WeightFormat& format = scenario.model.weight_format;
  if (!format.method.empty()) {
    auto fact = [&](const char* key, bool text, int64_t integer, std::string value) {
      model_facts_.push_back(ModelFact{attribute_slot(ctx, key), text, integer, std::move(value)});
    };
    fact(MEMPLAN_ATTR_MODEL_QUANT_METHOD, true, 0, format.method);
    if (format.bits != 0) fact(MEMPLAN_ATTR_MODEL_QUANT_BITS, false, format.bits, "");
    if (format.group_size != 0) fact(MEMPLAN_ATTR_MODEL_QUANT_GROUP_SIZE, false, format.group_size, "");
    if (format.block_elements != 0) fact(MEMPLAN_ATTR_MODEL_QUANT_BLOCK, false, format.block_elements, "");
    if (!format.value_type.empty()) fact(MEMPLAN_ATTR_MODEL_QUANT_VALUE_TYPE, true, 0, format.value_type);
    if (format.double_quant) fact(MEMPLAN_ATTR_MODEL_QUANT_DOUBLE_QUANT, false, 1, "");
    fact(MEMPLAN_ATTR_MODEL_QUANT_UNQUANTIZED, true, 0, format.unquantized);
    publish_model();
  }
  for (const ComponentSpec& component : scenario.components) {
    const LoadedPlugin* plugin = registry.find(component.use);
    if (plugin == nullptr) {
      std::vector<std::string> same_kind = registry.names(component.kind);
      std::string message = "no " + std::string(kind_name(component.kind)) + " plugin named '" + component.use +
                            "'" + did_you_mean(component.use, registry.names()) + " Available " +
                            std::string(kind_name(component.kind)) + " plugins: " +
                            (same_kind.empty() ? std::string("none") : join_alternatives(same_kind, ", ")) +
                            ". `memplan plugins` lists every plugin and where it was found.";
      if (!registry.diagnostics().empty())
        message += " Note: " + std::to_string(registry.diagnostics().size()) + " plugin librar" +
                   (registry.diagnostics().size() == 1 ? "y was" : "ies were") +
                   " rejected while loading (see the warnings above).";
      fail_at(component.use_location, message);
    }
    if (plugin->descriptor.kind != component.kind)
      fail_at(component.use_location,
              "'" + component.use + "' is " + with_article(kind_name(plugin->descriptor.kind)) + " plugin, but " +
                  component.section + " needs " + with_article(kind_name(component.kind)) + " plugin; move it to " +
                  (plugin->descriptor.kind == MEMPLAN_KIND_STRATEGY
                       ? std::string("a [[strategy]] table")
                       : "the [" + std::string(kind_name(plugin->descriptor.kind)) + "] table"));
    require_model_abi(scenario.model, *plugin, component);
    for (const ConfiguredPlugin& earlier : plugins_)
      if (earlier.plugin == plugin)
        fail_at(component.use_location, "'" + component.use + "' is used twice (" + earlier.component->section +
                                             " and " + component.section + "); keep one table");
    // The estimator's own copy of the table: set_option changes it, not the scenario.
    plugins_.push_back(ConfiguredPlugin{plugin, &components_.emplace_back(component), nullptr});
  }
  // Phase order; scenario order within a phase.
  std::stable_sort(plugins_.begin(), plugins_.end(), [](const ConfiguredPlugin& a, const ConfiguredPlugin& b) {
    return a.plugin->descriptor.phase < b.plugin->descriptor.phase;
  });
  try {
    for (ConfiguredPlugin& configured : plugins_) configured.state = create_state(configured);
  } catch (...) {
    // A throwing constructor runs no destructor: free the states created so far.
    for (ConfiguredPlugin& configured : plugins_)
      if (configured.state != nullptr) configured.plugin->descriptor.destroy(configured.state);
    throw;
  }
  host_->ctx.plan.items.reserve(inventory_.size() * 8);
  memory_fraction_slot_ = attribute_slot(host_->ctx, MEMPLAN_ATTR_MEMORY_FRACTION);
  data_ranks_slot_ = attribute_slot(host_->ctx, MEMPLAN_ATTR_RANKS_DATA);
  if (scenario.hardware.nvlink_sharp) nvlink_sharp_slot_ = attribute_slot(host_->ctx, MEMPLAN_ATTR_HARDWARE_NVLINK_SHARP);
  if (!scenario.hardware.architecture.empty())
    architecture_slot_ = attribute_slot(host_->ctx, MEMPLAN_ATTR_HARDWARE_ARCHITECTURE);
  // A descriptor of ABI 1.0, or one that does not declare what it reads, may read anything.
  constexpr uint32_t kBatchFields = MEMPLAN_READS_MICRO_BATCH | MEMPLAN_READS_SEQ_LEN;
  while (resume_at_ < plugins_.size()) {
    const uint32_t reads = plugins_[resume_at_].plugin->descriptor.reads;
    if (!(reads & MEMPLAN_READS_DECLARED) || (reads & kBatchFields)) break;
    ++resume_at_;
  }
  breakdown_.fit_quantity = scenario_.hardware.fit_quantity;  // a setting of the scenario: once, not per evaluation
}

Estimator::~Estimator() {
  for (ConfiguredPlugin& configured : plugins_)
    if (configured.state != nullptr) configured.plugin->descriptor.destroy(configured.state);
}

ComponentSpec& Estimator::own_spec(const ConfiguredPlugin& configured) {
  for (ComponentSpec& spec : components_)
    if (&spec == configured.component) return spec;
  throw Error("internal error: a configured plugin without its table");  // unreachable: every one points into components_
}

std::optional<size_t> Estimator::find_plugin(std::string_view name) const {
  for (size_t i = 0; i < plugins_.size(); ++i)
    if (plugins_[i].plugin->name == name) return i;
  return std::nullopt;
}

void Estimator::set_option(size_t index, OptionValue value) {
  std::vector<OptionValue> values;
  values.push_back(std::move(value));
  set_options(index, std::move(values));
}

void Estimator::set_options(size_t index, std::vector<OptionValue> values) {
  if (index >= plugins_.size())
    throw Error(scenario_.file + ": error: set_option names plugin " + std::to_string(index) + " of " +
                std::to_string(plugins_.size()));
  ConfiguredPlugin& configured = plugins_[index];
  ComponentSpec& spec = own_spec(configured);
  const std::vector<OptionValue> before = spec.options;
  for (OptionValue& value : values) {
    // Errors point where the key stands in the scenario, else at the table.
    auto existing = std::find_if(spec.options.begin(), spec.options.end(),
                                 [&](const OptionValue& option) { return option.key == value.key; });
    if (existing != spec.options.end()) {
      value.key_location = existing->key_location;
      value.value_location = existing->value_location;
      *existing = std::move(value);
    } else {
      value.key_location = value.value_location = spec.table_location;
      spec.options.push_back(std::move(value));
    }
  }
  void* state = nullptr;
  try {
    state = create_state(configured);
  } catch (...) {
    spec.options = before;  // the plugin keeps its configuration and state
    throw;
  }
  configured.plugin->descriptor.destroy(configured.state);
  configured.state = state;
  // The next evaluation checks after each plugin and takes a new snapshot.
  checked_ = true;
  host_->snapshot.valid = false;
}

void Estimator::set_gpu_count(int64_t count) {
  gpu_count_ = count;
  host_->ctx.workload.gpu_count = count;
  checked_ = true;
  host_->snapshot.valid = false;
}

void Estimator::set_grad_accum(int64_t grad_accum) {
  if (grad_accum < 1)
    throw Error(scenario_.file + ": error: grad_accum " + std::to_string(grad_accum) + " (rule: at least 1)");
  if (grad_accum == host_->ctx.workload.grad_accum) return;
  const int64_t before = host_->ctx.workload.grad_accum;
  host_->ctx.workload.grad_accum = grad_accum;
  // Created again in full before any state is replaced: a refusal leaves the estimator as it was.
  // Only plugins that read it when created (or that do not say what they read) are created again.
  auto reads_grad_accum = [](const ConfiguredPlugin& configured) {
    const uint32_t reads = configured.plugin->descriptor.reads;
    return !(reads & MEMPLAN_READS_DECLARED) || (reads & MEMPLAN_READS_GRAD_ACCUM);
  };
  std::vector<void*> states(plugins_.size(), nullptr);
  size_t created = 0;
  try {
    for (; created < plugins_.size(); ++created)
      if (reads_grad_accum(plugins_[created])) states[created] = create_state(plugins_[created]);
  } catch (...) {
    for (size_t i = 0; i < created; ++i)
      if (states[i] != nullptr) plugins_[i].plugin->descriptor.destroy(states[i]);
    host_->ctx.workload.grad_accum = before;
    throw;
  }
  for (size_t i = 0; i < plugins_.size(); ++i) {
    if (!reads_grad_accum(plugins_[i])) continue;
    plugins_[i].plugin->descriptor.destroy(plugins_[i].state);
    plugins_[i].state = states[i];
  }
  checked_ = true;
  host_->snapshot.valid = false;
}

void* Estimator::create_state(const ConfiguredPlugin& configured) {
  const ComponentSpec& component = *configured.component;
  const LoadedPlugin& plugin = *configured.plugin;
  std::vector<std::string> declared;
  for (const memplan_option_spec& spec : plugin.options) declared.emplace_back(spec.name);
  for (const OptionValue& option : component.options) {
    const memplan_option_spec* spec = nullptr;
    for (const memplan_option_spec& candidate : plugin.options)
      if (option.key == candidate.name) spec = &candidate;
    if (spec == nullptr)
      fail_at(option.key_location, "unknown key '" + option.key + "' in " + component.section + " for " +
                                       plugin_label(plugin) + did_you_mean(option.key, declared) +
                                       (declared.empty() ? std::string(" It takes no options.")
                                                         : " Accepted keys: " + join_alternatives(declared, ", ") +
                                                               "."));
    if (!accepts(spec->type, option.type))
      fail_at(option.value_location, "in " + component.section + ", '" + option.key + "' of " +
                                         plugin_label(plugin) + " must be " +
                                         std::string(option_type_name(spec->type)) + ", not " +
                                         (option.list ? std::string("a list") : std::string(value_type_name(option.type))) +
                                         whole_number_hint(*spec, option));
  }
  memplan_ctx& ctx = host_->ctx;
  const auto index = static_cast<int32_t>(&configured - plugins_.data());
  ctx.begin_call(&plugin, &component, index, true);
  void* state = nullptr;
  const int status = plugin.descriptor.create(&host_table(), &ctx, &state);
  if (status != MEMPLAN_OK || ctx.has_error) {
    if (state != nullptr) plugin.descriptor.destroy(state);
    fail_plugin_call(ctx, "create", status);
  }
  return state;
}

// Facts about the hardware that plugins read as attributes (conventions.h),
// set by the host before the first plugin runs, in the slot resolved at
// construction (no key compared per evaluation).
void Estimator::publish_hardware() {
  if (nvlink_sharp_slot_ != kNoSlot) {
    memplan_attribute& attribute = host_->ctx.attributes[nvlink_sharp_slot_];
    attribute.type = memplan_attribute::Type::integer;
    attribute.integer = 1;
    attribute.set_by = -1;  // the host
  }
  if (architecture_slot_ != kNoSlot) {
    memplan_attribute& attribute = host_->ctx.attributes[architecture_slot_];
    attribute.type = memplan_attribute::Type::text;
    attribute.text = scenario_.hardware.architecture;  // same length each time: no allocation after the first
    attribute.set_by = -1;
  }
}

void Estimator::publish_model() {
  for (const ModelFact& fact : model_facts_) {
    memplan_attribute& attribute = host_->ctx.attributes[fact.slot];
    attribute.type = fact.text ? memplan_attribute::Type::text : memplan_attribute::Type::integer;
    attribute.integer = fact.integer;
    if (fact.text) attribute.text = fact.value;  // same length each time: no allocation after the first
    attribute.set_by = -1;  // the host
  }
}

void Estimator::run_plugins(bool checked, size_t from) {
  memplan_ctx& ctx = host_->ctx;
  if (from == 0) {
    ctx.plan.items.assign(inventory_.begin(), inventory_.end());
    ctx.plan.work.clear();  // keeps its capacity
    ctx.clear_attributes();
    publish_hardware();
    publish_model();
  }
  // Parameters are counted once, before the first layout plugin: a run that
  // resumes past that point keeps the counts of the run it resumes.
  bool counted = from > 0 && plugins_[from - 1].plugin->descriptor.phase >= MEMPLAN_PHASE_LAYOUT;
  auto count_parameters_now = [&] {
    breakdown_.params_total = 0;
    breakdown_.params_trainable = 0;
    for (const PlanItem& item : ctx.plan.items) {
      // Buffers stored with the weights (quantization scales) are not parameters.
      if (item.role != MEMPLAN_ROLE_WEIGHTS || (item.flags & MEMPLAN_ITEM_NON_PARAMETER)) continue;
      const double n = item.elements * item.count;
      breakdown_.params_total += n;
      if (item.flags & MEMPLAN_ITEM_TRAINABLE) breakdown_.params_trainable += n;
    }
    counted = true;
  };
  for (size_t i = from; i < plugins_.size(); ++i) {
    const ConfiguredPlugin& configured = plugins_[i];
    // Parameter counts are the model's, before layout plugins split weights across ranks.
    if (!counted && configured.plugin->descriptor.phase >= MEMPLAN_PHASE_LAYOUT) count_parameters_now();
    if (i == resume_at_ && snapshot_wanted_) take_snapshot();
    ctx.begin_call(configured.plugin, configured.component, static_cast<int32_t>(i), false);
    const int status = configured.plugin->descriptor.apply(configured.state, &host_table(), &ctx);
    if (status == MEMPLAN_OK && !ctx.has_error && checked && ctx.plan_written) check_plan(&ctx, ItemCheck::in_place);
    // Work records are few: checked after every plugin that edited them in place.
    if (status == MEMPLAN_OK && !ctx.has_error && ctx.work_written) check_work(&ctx);
    if (status != MEMPLAN_OK || ctx.has_error) fail_plugin_call(ctx, "apply", status);
  }
  if (!counted) count_parameters_now();
  if (resume_at_ == plugins_.size() && snapshot_wanted_) take_snapshot();
}

void Estimator::take_snapshot() {
  HostState::Snapshot& snapshot = host_->snapshot;
  snapshot.items.assign(host_->ctx.plan.items.begin(), host_->ctx.plan.items.end());
  snapshot.work.assign(host_->ctx.plan.work.begin(), host_->ctx.plan.work.end());
  snapshot.attributes.assign(host_->ctx.attributes.begin(), host_->ctx.attributes.end());
  snapshot.valid = true;
}

void Estimator::restore_snapshot() {
  memplan_ctx& ctx = host_->ctx;
  const HostState::Snapshot& snapshot = host_->snapshot;
  ctx.plan.items.assign(snapshot.items.begin(), snapshot.items.end());
  ctx.plan.work.assign(snapshot.work.begin(), snapshot.work.end());
  // Attributes keep their places (handles are indices); those added since are unset.
  for (size_t i = 0; i < ctx.attributes.size(); ++i) {
    memplan_attribute& attribute = ctx.attributes[i];
    if (i >= snapshot.attributes.size()) {
      attribute.type = memplan_attribute::Type::unset;
      continue;
    }
    const memplan_attribute& saved = snapshot.attributes[i];
    attribute.type = saved.type;
    attribute.integer = saved.integer;
    attribute.floating = saved.floating;
    if (saved.type == memplan_attribute::Type::text) attribute.text = saved.text;
    attribute.set_by = saved.set_by;
  }
}

const Breakdown& Estimator::evaluate() {
  run_plugins(checked_);
  return finish_evaluation();
}

const Breakdown& Estimator::finish_evaluation() {
  memplan_ctx& ctx = host_->ctx;
  if (!checked_) {
    // Plugins of ABI 1.1 wrote the plan in place: check it once, and find who
    // wrote a bad item by evaluating again with a check after each plugin.
    ctx.begin_call(nullptr, nullptr, -1, false);
    if (!check_plan(&ctx, ItemCheck::values)) {
      const std::string message = ctx.error_message;
      run_plugins(true);
      throw Error(scenario_.file + ": error: " + message +
                  ", but no plugin did when evaluated again with a check after each (rule: apply() gives the same "
                  "plan for the same configuration)");
    }
  }
  checked_ = false;
  read_memory_fraction();
  if (scenario_.mode == MEMPLAN_MODE_INFER) breakdown_.params_trainable = 0;  // nothing trains in inference
  check_world_size();
  // The releasable reserve gives way at the memory the job may use (the
  // GPU's, times limits.memory_fraction), the capacity `fits` compares with.
  summarize(ctx.plan, ctx.workload.grad_accum, breakdown_, breakdown_.capacity(ctx.workload.gpu_memory_bytes));
  time_step(ctx.plan.work, scenario_.hardware.performance, ctx.workload.grad_accum, tokens_per_step(),
            breakdown_.time);
  if (breakdown_.too_large)
    throw PlanTooLargeError(scenario_.file + ": error: the plan at micro_batch " +
                            std::to_string(ctx.workload.micro_batch) + ", seq_len " +
                            std::to_string(ctx.workload.seq_len) +
                            " needs more than 2^62 bytes per GPU; check the model's dimensions and the batch");
  return breakdown_;
}

// The job's tokens per optimizer step: each replica (ranks.data) runs
// grad_accum micro-batches of micro_batch sequences of seq_len tokens.
double Estimator::tokens_per_step() const {
  const memplan_attribute& data = host_->ctx.attributes[data_ranks_slot_];
  const double replicas =
      data.type == memplan_attribute::Type::integer && data.integer > 0 ? static_cast<double>(data.integer) : 1.0;
  const memplan_workload& workload = host_->ctx.workload;
  return static_cast<double>(workload.micro_batch) * static_cast<double>(workload.seq_len) *
         static_cast<double>(workload.grad_accum > 0 ? workload.grad_accum : 1) * replicas;
}

void Estimator::check_world_size() {
  const memplan_ctx& ctx = host_->ctx;
  const size_t prefix = std::strlen(MEMPLAN_ATTR_RANKS_PREFIX);
  auto is_rank_factor = [&](const memplan_attribute& attribute) {
    return attribute.rank_factor && attribute.type == memplan_attribute::Type::integer;
  };
  auto setter = [&](const memplan_attribute& attribute) -> const ConfiguredPlugin& {
    return plugins_[static_cast<size_t>(attribute.set_by)];
  };
  int64_t world = 1;
  for (const memplan_attribute& attribute : ctx.attributes) {
    if (!is_rank_factor(attribute)) continue;
    if (attribute.integer < 1 || __builtin_mul_overflow(world, attribute.integer, &world))
      fail_at(setter(attribute).component->use_location,
              "plugin '" + setter(attribute).plugin->name + "' set " + attribute.key + " = " +
                  std::to_string(attribute.integer) +
                  ", which makes no world size (rule: every ranks.* factor is at least 1 and their product fits "
                  "in 64 bits); check the parallel sizes");
  }
  breakdown_.world_size = world;
  if (gpu_count_ <= 0 || gpu_count_ == world) return;
  // Only a mismatch builds the message: this runs on every evaluation.
  std::vector<std::string> factors;
  for (const memplan_attribute& attribute : ctx.attributes)
    if (is_rank_factor(attribute) && attribute.integer > 1)
      factors.push_back(attribute.key.substr(prefix) + " " + std::to_string(attribute.integer) + " (set by '" +
                        setter(attribute).plugin->name + "')");
  fail_at(scenario_.hardware.count_location,
          "[hardware] count = " + std::to_string(gpu_count_) + " but the strategies lay the job out on " +
              std::to_string(world) + " GPU" + (world == 1 ? "" : "s") +
              (factors.empty() ? std::string(" (no strategy splits it; add the strategies that use the other GPUs, "
                                             "e.g. data parallelism)")
                               : " (" + join_alternatives(factors, " x ") + ")") +
              "; change count, or the strategies' sizes so that their product equals count");
}

void Estimator::read_memory_fraction() {
  const memplan_attribute* attribute = &host_->ctx.attributes[memory_fraction_slot_];
  breakdown_.memory_fraction = 1.0;
  if (attribute->type == memplan_attribute::Type::unset) return;
  const std::string& setter = plugins_[static_cast<size_t>(attribute->set_by)].plugin->name;
  if (attribute->type != memplan_attribute::Type::floating || !(attribute->floating > 0) || attribute->floating > 1)
    fail_at(plugins_[static_cast<size_t>(attribute->set_by)].component->use_location,
            "plugin '" + setter + "' set " + MEMPLAN_ATTR_MEMORY_FRACTION +
                " to something other than a number in (0, 1]; fix the plugin");
  breakdown_.memory_fraction = attribute->floating;
}

const Breakdown& Estimator::evaluate_at(int64_t micro_batch, int64_t seq_len) {
  host_->ctx.workload.micro_batch = micro_batch;
  host_->ctx.workload.seq_len = seq_len;
  if (host_->snapshot.valid && !checked_) {
    restore_snapshot();
    run_plugins(false, resume_at_);
    return finish_evaluation();
  }
  // The first step of a sweep runs every plugin and keeps the plan at resume_at_.
  snapshot_wanted_ = true;
  try {
    run_plugins(checked_);
  } catch (...) {
    snapshot_wanted_ = false;
    host_->snapshot.valid = false;
    throw;
  }
  snapshot_wanted_ = false;
  return finish_evaluation();
}

int64_t Estimator::micro_batch() const { return host_->ctx.workload.micro_batch; }
int64_t Estimator::seq_len() const { return host_->ctx.workload.seq_len; }
int64_t Estimator::grad_accum() const { return host_->ctx.workload.grad_accum; }

bool Estimator::fits() const {
  return breakdown_.peak <= breakdown_.capacity(scenario_.hardware.memory_bytes);
}

std::vector<std::pair<std::string, std::string>> Estimator::report_details() const {
  std::vector<std::pair<std::string, std::string>> details;
  const size_t prefix = std::strlen(MEMPLAN_ATTR_REPORT_PREFIX);
  for (const memplan_attribute& attribute : host_->ctx.attributes) {
    if (attribute.key.compare(0, prefix, MEMPLAN_ATTR_REPORT_PREFIX) != 0) continue;
    std::string value;
    switch (attribute.type) {
      case memplan_attribute::Type::integer: value = std::to_string(attribute.integer); break;
      case memplan_attribute::Type::floating: {
        char buffer[32];
        std::snprintf(buffer, sizeof buffer, "%.17g", attribute.floating);
        value = buffer;
        break;
      }
      case memplan_attribute::Type::text: value = json_string(attribute.text); break;
      default: continue;
    }
    details.emplace_back(attribute.key.substr(prefix), value);
  }
  return details;
}

namespace {

// The set attribute `key`, if it holds `type`.
const memplan_attribute* find_typed(const memplan_ctx& ctx, std::string_view key, memplan_attribute::Type type) {
  const memplan_attribute* attribute = ctx.find_attribute(std::string(key).c_str());
  return attribute != nullptr && attribute->type == type ? attribute : nullptr;
}

}  // namespace

std::optional<int64_t> Estimator::attribute_int(std::string_view key) const {
  const auto* a = find_typed(host_->ctx, key, memplan_attribute::Type::integer);
  return a ? std::optional<int64_t>(a->integer) : std::nullopt;
}

std::optional<double> Estimator::attribute_double(std::string_view key) const {
  const auto* a = find_typed(host_->ctx, key, memplan_attribute::Type::floating);
  return a ? std::optional<double>(a->floating) : std::nullopt;
}

std::optional<std::string> Estimator::attribute_string(std::string_view key) const {
  const auto* a = find_typed(host_->ctx, key, memplan_attribute::Type::text);
  return a ? std::optional<std::string>(a->text) : std::nullopt;
}

const Plan& Estimator::plan() const { return host_->ctx.plan; }

std::string Estimator::display_name(const PlanItem& item) { return item_display_name(item); }

Estimate Estimator::estimate() const {
  Estimate estimate{scenario_, breakdown_, micro_batch(), seq_len(), plan().items, plan().work, {},
                    report_details()};
  // The configuration evaluated, which set_option and set_gpu_count may have changed.
  estimate.scenario.components.assign(components_.begin(), components_.end());
  estimate.scenario.hardware.count = gpu_count_;
  estimate.scenario.grad_accum = host_->ctx.workload.grad_accum;
  for (const ConfiguredPlugin& configured : plugins_) {
    const LoadedPlugin& plugin = *configured.plugin;
    estimate.plugins.push_back(PluginUse{plugin.descriptor.kind, plugin.name, plugin.version, plugin.path});
  }
  return estimate;
}

std::string Estimator::origin(const PlanItem& item) const {
  if (item.added_by < 0 || static_cast<size_t>(item.added_by) >= plugins_.size()) return "model";
  return plugins_[static_cast<size_t>(item.added_by)].plugin->name;
}

}  // namespace memplan
