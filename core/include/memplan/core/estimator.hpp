// Composes a scenario's plugins and evaluates the memory plan.
//
// Construction resolves each component table to a loaded plugin of the right
// kind, validates the table's keys against the plugin's declared options, and
// calls the plugin's create(). evaluate() then runs every plugin's apply() in
// phase order over a fresh copy of the model's parameter inventory and
// summarizes the plan; it can run many times (a search evaluates millions of
// configurations) and allocates nothing once warm.
#pragma once

#include <deque>
#include <memory>
#include <optional>
#include <string_view>
#include <string>
#include <vector>

#include "memplan/core/breakdown.hpp"
#include "memplan/core/estimate.hpp"
#include "memplan/core/plan.hpp"
#include "memplan/core/plugin_registry.hpp"
#include "memplan/core/scenario.hpp"

namespace memplan {

struct HostState;  // the host side of the plugin ABI (host_api.hpp)

struct ConfiguredPlugin {
  const LoadedPlugin* plugin = nullptr;
  const ComponentSpec* component = nullptr;
  void* state = nullptr;
};

class Estimator {
 public:
  // The estimator keeps a reference to `scenario`, which must outlive it: a
  // temporary would dangle after the constructor (ASan found such uses), so
  // it does not bind.
  Estimator(const Scenario& scenario, const PluginRegistry& registry);
  Estimator(Scenario&&, const PluginRegistry&) = delete;
  ~Estimator();
  Estimator(const Estimator&) = delete;
  Estimator& operator=(const Estimator&) = delete;

  // Runs the plugins and returns the breakdown; throws Error on a plugin failure.
  // The first evaluation checks the plan after every plugin that wrote it in
  // place (ABI 1.1); later ones check it once, at the end, and evaluate again
  // checking after every plugin only when that check fails, to name the
  // plugin at fault.
  const Breakdown& evaluate();
  // The same at another micro-batch and sequence length (what a search
  // varies). Plugins before the first one that reads micro_batch or seq_len
  // (memplan_plugin_descriptor.reads) run once: later calls start from the
  // plan as it stood before that plugin.
  const Breakdown& evaluate_at(int64_t micro_batch, int64_t seq_len);
  // The index (in phase order) of the first plugin evaluate_at runs again.
  size_t first_plugin_reading_batch() const { return resume_at_; }
  // A configuration search changes a plugin's options between evaluations
  // without the scenario file: the plugin's create() runs again on the
  // estimator's copy of its table, with `value` in place of (or added to)
  // the option of that key; nothing is parsed. Throws Error, as the scenario
  // would, for a key the plugin does not declare, a value of the wrong type,
  // or one create() refuses; the plugin then keeps its configuration. The
  // next evaluation runs every plugin, checked.
  void set_option(size_t plugin, OptionValue value);
  // Several options of one plugin at once, with one create(): a search that
  // changes two options together must not pass through a combination of the
  // new one and the old other, which the plugin may refuse.
  void set_options(size_t plugin, std::vector<OptionValue> values);
  // The GPU count the strategies' layout is checked against ([hardware] count);
  // 0 checks nothing (a search probing the layout's world size).
  void set_gpu_count(int64_t count);
  // Micro-batches per optimizer step ([batch] grad_accum). Plugins may read it
  // when they are created (a pipeline's schedule), so each is created again.
  // Throws Error for a value below 1 or one a plugin refuses.
  void set_grad_accum(int64_t grad_accum);
  int64_t grad_accum() const;
  // The index in plugins() of the plugin of that name.
  std::optional<size_t> find_plugin(std::string_view name) const;

  int64_t micro_batch() const;
  int64_t seq_len() const;
  // Whether the last evaluation's peak fits the GPU (times the memory fraction).
  bool fits() const;
  // An attribute the plugins set in the last evaluation; nullopt when unset or of another type.
  std::optional<int64_t> attribute_int(std::string_view key) const;
  std::optional<double> attribute_double(std::string_view key) const;
  std::optional<std::string> attribute_string(std::string_view key) const;
  // The "report." attributes of the last evaluation, prefix removed, values as JSON.
  std::vector<std::pair<std::string, std::string>> report_details() const;

  // The last evaluation as a value the reports take (estimate.hpp); it copies
  // the plan and the details, so the evaluation loop does not make one.
  Estimate estimate() const;

  const Scenario& scenario() const { return scenario_; }
  const Plan& plan() const;  // after the last evaluate()
  const Breakdown& breakdown() const { return breakdown_; }
  const std::vector<ConfiguredPlugin>& plugins() const { return plugins_; }  // in phase order
  // "layers.0-31.attn.q" for layered items, the item's own name otherwise.
  static std::string display_name(const PlanItem& item);
  // Who added an item: a plugin name, or "model" for the parameter inventory.
  std::string origin(const PlanItem& item) const;

 private:
  void* create_state(const ConfiguredPlugin& configured);
  ComponentSpec& own_spec(const ConfiguredPlugin& configured);
  void run_plugins(bool checked, size_t from = 0);
  const Breakdown& finish_evaluation();
  void take_snapshot();
  void restore_snapshot();
  void check_world_size();
  double tokens_per_step() const;
  void read_memory_fraction();

  const Scenario& scenario_;
  std::vector<PlanItem> inventory_;
  std::deque<ComponentSpec> components_;  // the plugins' tables (a deque: plugins_ points into it)
  std::vector<ConfiguredPlugin> plugins_;
  int64_t gpu_count_ = 0;
  std::unique_ptr<HostState> host_;
  Breakdown breakdown_;
  bool checked_ = true;  // check the plan after each plugin (the first evaluation)
  size_t resume_at_ = 0;  // the first plugin that reads micro_batch or seq_len (or may)
  bool snapshot_wanted_ = false;
  void publish_hardware();

  static constexpr size_t kNoSlot = static_cast<size_t>(-1);
  size_t memory_fraction_slot_ = 0;  // the attribute slot of limits.memory_fraction
  size_t data_ranks_slot_ = 0;       // ranks.data: the data replicas, for the job's tokens per step
  size_t nvlink_sharp_slot_ = kNoSlot;  // hardware.nvlink_sharp, when the GPU has it
  size_t architecture_slot_ = kNoSlot;  // hardware.architecture, when the catalog gives it
  // Facts about the model that plugins read as attributes (model.quantization.*,
  // conventions.h): set by the host before plugins are created and before each evaluation.
  struct ModelFact {
    size_t slot;
    bool text;
    int64_t integer;
    std::string value;
  };
  std::vector<ModelFact> model_facts_;
  void publish_model();
};

}  // namespace memplan
