// What `memplan explain` tries on a job that does not fit: each lever a
// plugin declares on its options, the micro-batch halved, then pairs; and,
// beside them, the layouts at the same GPU count (explain_layouts: the
// search over the sizes the plugins declare "@layout").
#include "memplan/core/explain.hpp"

#include <algorithm>
#include <cstdio>
#include <optional>

#include <memplan/conventions.h>

#include "memplan/core/estimator.hpp"
#include "memplan/core/search.hpp"

namespace memplan {
namespace {

// One change of the scenario: a plugin option to a value, or the micro-batch.
struct Change {
  size_t component = 0;      // index in scenario.components (plugin changes)
  OptionValue value;         // the option as it would be set
  int64_t micro_batch = 0;   // > 0: the micro-batch change instead
  int64_t grad_accum = 0;
  std::string text;          // "recompute.policy: none -> selective"
  size_t group = 0;          // changes of one option (or the micro-batch) share a group: a pair takes two groups
};

// `text` as an option value of `spec`'s type, or nullopt when it is not one.
std::optional<OptionValue> parse_value(const memplan_option_spec& spec, const std::string& text) {
  OptionValue value;
  value.key = spec.name;
  try {
    switch (spec.type) {
      case MEMPLAN_OPTION_INT: value.type = OptionValue::Type::integer; value.integer = std::stoll(text); break;
      case MEMPLAN_OPTION_DOUBLE: value.type = OptionValue::Type::floating; value.floating = std::stod(text); break;
      case MEMPLAN_OPTION_BOOL:
        if (text != "true" && text != "false") return std::nullopt;
        value.type = OptionValue::Type::boolean;
        value.boolean = text == "true";
        break;
      default: value.type = OptionValue::Type::string; value.text = text; break;
    }
  } catch (const std::exception&) {
    return std::nullopt;
  }
  return value;
}


// Every single change the levers and the micro-batch offer.
std::vector<Change> candidate_changes(const Scenario& scenario, const PluginRegistry& registry) {
  std::vector<Change> changes;
  size_t group = 0;
  for (size_t c = 0; c < scenario.components.size(); ++c) {
    const ComponentSpec& component = scenario.components[c];
    const LoadedPlugin* plugin = registry.find(component.use);
    if (plugin == nullptr) continue;
    for (const memplan_option_spec& spec : plugin->options) {
      if (spec.levers == nullptr) continue;
      std::string current = "(default)";
      for (const OptionValue& option : component.options)
        if (option.key == spec.name) current = option_value_text(option);
      ++group;
      for (const std::string& text : parse_levers(spec.levers).values) {
        if (text == current) continue;
        std::optional<OptionValue> value = parse_value(spec, text);
        if (!value) continue;
        changes.push_back(Change{c, *value, 0, 0, component.use + "." + spec.name + ": " + current + " -> " + text, group});
      }
    }
  }
  ++group;
  for (int64_t micro_batch = scenario.micro_batch / 2, factor = 2; micro_batch >= 1 &&
                                                                   scenario.micro_batch % micro_batch == 0;
       micro_batch /= 2, factor *= 2) {
    Change change;
    change.micro_batch = micro_batch;
    change.grad_accum = scenario.grad_accum * factor;
    change.text = "batch.micro_batch: " + std::to_string(scenario.micro_batch) + " -> " + std::to_string(micro_batch) +
                  " (grad_accum " + std::to_string(scenario.grad_accum) + " -> " + std::to_string(change.grad_accum) +
                  ": the same global batch)";
    change.group = group;
    changes.push_back(change);
    if (micro_batch == 1) break;
  }
  return changes;
}

// The scenario with `changes` made, evaluated; nullopt when a plugin refuses it.
std::optional<ExplainChange> evaluate(const Scenario& scenario, const PluginRegistry& registry,
                                      const std::vector<const Change*>& changes) {
  Scenario changed = scenario;
  ExplainChange result;
  for (const Change* change : changes) {
    result.changes.push_back(change->text);
    if (change->micro_batch > 0) {
      changed.micro_batch = change->micro_batch;
      changed.grad_accum = change->grad_accum;
      continue;
    }
    std::vector<OptionValue>& options = changed.components[change->component].options;
    auto existing = std::find_if(options.begin(), options.end(),
                                 [&](const OptionValue& option) { return option.key == change->value.key; });
    OptionValue value = change->value;
    value.key_location = value.value_location = changed.components[change->component].table_location;
    if (existing != options.end()) {
      value.key_location = existing->key_location;
      value.value_location = existing->value_location;
      *existing = value;
    } else {
      options.push_back(value);
    }
  }
  try {
    Estimator estimator(changed, registry);
    const Breakdown& b = estimator.evaluate();
    result.peak_bytes = b.peak;
    result.fits = estimator.fits();
    if (b.time.status == TimeStatus::timed) result.step_seconds = b.time.seconds;
  } catch (const Error&) {
    return std::nullopt;  // a combination the plugins refuse (e.g. offloading weights without sharding them)
  }
  return result;
}

// Cheapest in step time first when both are timed, else least memory.
bool cheaper(const ExplainChange& a, const ExplainChange& b) {
  if (a.changes.size() != b.changes.size()) return a.changes.size() < b.changes.size();
  if (a.step_seconds > 0 && b.step_seconds > 0 && a.step_seconds != b.step_seconds)
    return a.step_seconds < b.step_seconds;
  if (a.peak_bytes != b.peak_bytes) return a.peak_bytes < b.peak_bytes;
  return a.changes < b.changes;
}


// An integer option's value in the scenario, else its declared default, else 1.
int64_t integer_option(const ComponentSpec& component, const memplan_option_spec& spec) {
  for (const OptionValue& option : component.options)
    if (option.key == spec.name && option.type == OptionValue::Type::integer) return option.integer;
  try {
    if (spec.default_text != nullptr) return std::stoll(spec.default_text);
  } catch (const std::exception&) {
  }
  return 1;
}

// Layouts at the same GPU count: the search over the layout sizes the plugins
// declare ("@layout" among an integer option's levers), every value dividing
// the GPUs, with the option they declare "@fill" filling what each leaves and
// grad_accum keeping the global batch. Fitting rows, fastest first.
void explain_layouts(const Scenario& scenario, const PluginRegistry& registry, int64_t world, int64_t data_ranks,
                     Explanation& explanation) {
  struct Axis {
    SearchAxis axis;
    int64_t current = 1;
  };
  std::vector<Axis> axes;
  std::optional<Axis> fill;
  std::vector<std::string> seen;  // a plugin used twice: the search sets the first
  for (const ComponentSpec& component : scenario.components) {
    const LoadedPlugin* plugin = registry.find(component.use);
    if (plugin == nullptr || std::find(seen.begin(), seen.end(), component.use) != seen.end()) continue;
    seen.push_back(component.use);
    for (const memplan_option_spec& spec : plugin->options) {
      if (spec.type != MEMPLAN_OPTION_INT) continue;
      const OptionLevers levers = parse_levers(spec.levers);
      if (!levers.layout && !(levers.fill && !fill)) continue;
      Axis entry;
      entry.axis.key = component.use + "." + spec.name;
      entry.axis.plugin = component.use;
      entry.axis.option = spec.name;
      entry.axis.location = component.table_location;
      entry.current = integer_option(component, spec);
      if (levers.layout) axes.push_back(std::move(entry));
      else fill = std::move(entry);
    }
  }
  const int64_t gpus = scenario.hardware.count > 0 ? scenario.hardware.count : world;
  if (axes.empty() || gpus < 1) return;
  // The divisors in pairs (d, gpus / d) up to the square root: any GPU count answers at once.
  std::vector<int64_t> divisors, powers_of_two;
  for (int64_t d = 1; d <= gpus / d; ++d)
    if (gpus % d == 0) {
      divisors.push_back(d);
      if (d != gpus / d) divisors.push_back(gpus / d);
    }
  std::sort(divisors.begin(), divisors.end());
  for (int64_t d : divisors)
    if ((d & (d - 1)) == 0) powers_of_two.push_back(d);
  uint64_t combinations = 1;
  for (size_t a = 0; a < axes.size(); ++a) combinations *= divisors.size();
  const std::vector<int64_t>& values = combinations <= (uint64_t{1} << 16) ? divisors : powers_of_two;
  SearchSpace space;
  for (Axis& entry : axes) {
    for (int64_t value : values) {
      OptionValue option;
      option.key = entry.axis.option;
      option.type = OptionValue::Type::integer;
      option.integer = value;
      option.key_location = option.value_location = entry.axis.location;
      entry.axis.values.push_back(option);
    }
    space.combinations *= entry.axis.values.size();
    space.axes.push_back(entry.axis);
  }
  space.per_hardware = space.combinations;
  if (fill) space.fill = fill->axis;
  space.gpus = gpus;
  space.global_batch = scenario.micro_batch * scenario.grad_accum * data_ranks;
  space.top = 1;
  explanation.layout_gpus = gpus;
  explanation.layouts_tried = 0;  // the valid layouts: sizes whose product divides the GPUs
  SearchOptions options;  // one thread: explain answers in milliseconds
  run_search(scenario, space, registry, options, [&](const SearchRow& row) {
    if (row.status != SearchRow::Status::invalid) ++explanation.layouts_tried;
    if (row.status != SearchRow::Status::fits) return;
    ExplainChange change;
    for (size_t a = 0; a < axes.size(); ++a)
      if (std::to_string(axes[a].current) != row.values[a])
        change.changes.push_back(axes[a].axis.key + ": " + std::to_string(axes[a].current) + " -> " + row.values[a]);
    if (fill && row.fill_value != fill->current)
      change.changes.push_back(fill->axis.key + ": " + std::to_string(fill->current) + " -> " +
                               std::to_string(row.fill_value));
    if (row.grad_accum != scenario.grad_accum)
      change.changes.push_back("batch.grad_accum: " + std::to_string(scenario.grad_accum) + " -> " +
                               std::to_string(row.grad_accum) + " (the same global batch)");
    if (change.changes.empty()) return;  // the scenario's own layout
    change.peak_bytes = row.peak_bytes;
    change.step_seconds = row.step_seconds;
    change.fits = true;
    explanation.layouts.push_back(std::move(change));
  });
  std::stable_sort(explanation.layouts.begin(), explanation.layouts.end(),
                   [](const ExplainChange& a, const ExplainChange& b) {
                     if (a.step_seconds > 0 && b.step_seconds > 0 && a.step_seconds != b.step_seconds)
                       return a.step_seconds < b.step_seconds;
                     return a.peak_bytes < b.peak_bytes;
                   });
}

}  // namespace

OptionLevers parse_levers(const char* levers) {
  OptionLevers parsed;
  if (levers == nullptr) return parsed;
  std::string token;
  for (const char* c = levers;; ++c) {
    if (*c == ',' || *c == '\0') {
      if (token == "@layout") parsed.layout = true;
      else if (token == "@fill") parsed.fill = true;
      else if (!token.empty()) parsed.values.push_back(token);
      token.clear();
      if (*c == '\0') break;
    } else if (*c != ' ') {
      token += *c;
    }
  }
  return parsed;
}

Explanation explain(const Scenario& scenario, const PluginRegistry& registry) {
  Explanation explanation;
  Estimator estimator(scenario, registry);
  const Breakdown& b = estimator.evaluate();
  explanation.has_gpu = scenario.hardware.memory_bytes > 0;
  explanation.fits = estimator.fits();
  explanation.peak_bytes = b.peak;
  explanation.capacity_bytes = b.capacity(scenario.hardware.memory_bytes);
  explanation.peak_phase = b.peak_phase;
  explanation.fit_quantity = b.fit_quantity;
  explanation.components = b.components;
  if (b.time.status == TimeStatus::timed) explanation.step_seconds = b.time.seconds;
  if (!explanation.has_gpu || explanation.fits) return explanation;

  const std::vector<Change> changes = candidate_changes(scenario, registry);
  std::vector<ExplainChange> singles;
  for (const Change& change : changes) {
    ++explanation.candidates;
    if (auto result = evaluate(scenario, registry, {&change})) {
      if (result->fits) explanation.fixes.push_back(*result);
      else if (result->peak_bytes < explanation.peak_bytes) singles.push_back(*result);
    }
  }
  if (explanation.fixes.empty())
    for (size_t i = 0; i < changes.size(); ++i)
      for (size_t j = i + 1; j < changes.size(); ++j) {
        if (changes[i].group == changes[j].group) continue;
        ++explanation.candidates;
        if (auto result = evaluate(scenario, registry, {&changes[i], &changes[j]}); result && result->fits)
          explanation.fixes.push_back(*result);
      }
  std::sort(explanation.fixes.begin(), explanation.fixes.end(), cheaper);
  explain_layouts(scenario, registry, b.world_size,
                  estimator.attribute_int(MEMPLAN_ATTR_RANKS_DATA).value_or(1), explanation);
  if (explanation.fixes.empty()) {
    std::sort(singles.begin(), singles.end(),
              [](const ExplainChange& a, const ExplainChange& b) { return a.peak_bytes < b.peak_bytes; });
    explanation.closest = std::move(singles);
  }
  return explanation;
}

}  // namespace memplan
