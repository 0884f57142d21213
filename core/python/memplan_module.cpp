// The Python module `memplan` (docs/python.md): memplan.estimate(scenario)
// evaluates a scenario, given as TOML text or as a dict, the way `memplan run`
// does and returns the JSON report as a dict (or another format's text);
// memplan.plugins() lists the plugins `memplan plugins` lists; errors raise
// memplan.Error with the core's located message ("file:line:column: error: ...").
//
// Plugins and data are found from the module's own file, as the command line
// finds them from its binary: the nearest folder above the module that holds
// lib/memplan/plugins and share/memplan is the prefix (build/ for the module
// the build puts in build/lib/python/; <prefix> for an installed one in
// <prefix>/lib/python3/dist-packages/). MEMPLAN_PREFIX, or the keyword
// prefix=, names it instead.
//
// Like the rest of the core this file names no particular plugin.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#define BOOST_DLL_USE_STD_FS
#include <boost/dll/runtime_symbol_info.hpp>

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "memplan/bundle/bundle.hpp"
#include "memplan/core/catalog.hpp"
#include "memplan/core/error.hpp"
#include "memplan/core/estimator.hpp"
#include "memplan/core/install_layout.hpp"
#include "memplan/core/limits.hpp"
#include "memplan/core/report.hpp"
#include "memplan/core/scenario.hpp"

namespace py = pybind11;

namespace {

// The prefix holding lib/memplan/plugins and share/memplan.
std::filesystem::path find_prefix(const std::optional<std::string>& given) {
  if (given && !given->empty()) return *given;
  if (const char* env = std::getenv("MEMPLAN_PREFIX"); env != nullptr && env[0] != '\0') return env;
  const std::filesystem::path module = boost::dll::this_line_location();
  for (std::filesystem::path folder = module.parent_path(); !folder.empty(); folder = folder.parent_path()) {
    if (std::filesystem::is_directory(folder / "lib" / "memplan" / "plugins") &&
        std::filesystem::is_directory(folder / "share" / "memplan"))
      return folder;
    if (folder == folder.parent_path()) break;
  }
  throw memplan::Error("memplan: error: found no memplan installation (lib/memplan/plugins and share/memplan) in "
                       "any folder above the module " + module.string() +
                       "; set MEMPLAN_PREFIX or pass prefix= to name the folder that holds them");
}

memplan::InstallLayout layout_for(const std::optional<std::string>& prefix) {
  const std::filesystem::path folder = find_prefix(prefix);
  return memplan::InstallLayout{folder / "lib" / "memplan" / "plugins", folder / "share" / "memplan"};
}

void warn(const std::string& text) {
  if (PyErr_WarnEx(PyExc_UserWarning, text.c_str(), 1) != 0) throw py::error_already_set();
}

// ---- dict -> TOML text -------------------------------------------------------

std::string toml_string(const std::string& text) {
  std::string out = "\"";
  for (const unsigned char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (c < 0x20 || c == 0x7f) {
          char escaped[8];
          std::snprintf(escaped, sizeof escaped, "\\u%04x", c);
          out += escaped;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

std::string toml_key(const py::handle& key) {
  if (!py::isinstance<py::str>(key))
    throw py::type_error("memplan.estimate: scenario keys must be strings, got " +
                         py::repr(key).cast<std::string>());
  const std::string text = key.cast<std::string>();
  bool bare = !text.empty();
  for (const char c : text)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-')) bare = false;
  return bare ? text : toml_string(text);
}

bool is_table(const py::handle& value) { return py::isinstance<py::dict>(value); }

bool is_array_of_tables(const py::handle& value) {
  if (!py::isinstance<py::list>(value) && !py::isinstance<py::tuple>(value)) return false;
  const py::sequence items = py::reinterpret_borrow<py::sequence>(value);
  if (py::len(items) == 0) return false;
  for (const py::handle item : items)
    if (!is_table(item)) return false;
  return true;
}

std::string toml_value(const py::handle& value) {
  if (py::isinstance<py::bool_>(value)) return value.cast<bool>() ? "true" : "false";
  if (py::isinstance<py::int_>(value)) return py::str(value).cast<std::string>();
  if (py::isinstance<py::float_>(value)) {
    const double number = value.cast<double>();
    if (std::isnan(number)) return "nan";
    if (std::isinf(number)) return number > 0 ? "inf" : "-inf";
    return py::repr(value).cast<std::string>();  // shortest text that reads back the same: 0.1, 1e-05, 2.0
  }
  if (py::isinstance<py::str>(value)) return toml_string(value.cast<std::string>());
  if (py::isinstance<py::list>(value) || py::isinstance<py::tuple>(value)) {
    std::string out = "[";
    bool first = true;
    for (const py::handle item : py::reinterpret_borrow<py::sequence>(value)) {
      out += (first ? "" : ", ") + toml_value(item);
      first = false;
    }
    return out + "]";
  }
  if (is_table(value)) {  // a table inside an array: inline
    std::string out = "{";
    bool first = true;
    for (const auto& [key, item] : py::reinterpret_borrow<py::dict>(value)) {
      out += (first ? " " : ", ") + toml_key(key) + " = " + toml_value(item);
      first = false;
    }
    return out + (first ? "}" : " }");
  }
  throw py::type_error("memplan.estimate: a scenario value must be a bool, int, float, str, list or dict, got " +
                       py::repr(value).cast<std::string>());
}

// Writes `table` under the header path `path` (empty: the top level): its
// plain keys first, then its sub-tables and arrays of tables, in the dict's order.
void write_table(std::string& out, const py::dict& table, const std::string& path) {
  for (const auto& [key, value] : table)
    if (!is_table(value) && !is_array_of_tables(value)) out += toml_key(key) + " = " + toml_value(value) + "\n";
  for (const auto& [key, value] : table) {
    const std::string name = path.empty() ? toml_key(key) : path + "." + toml_key(key);
    if (is_table(value)) {
      out += "\n[" + name + "]\n";
      write_table(out, py::reinterpret_borrow<py::dict>(value), name);
    } else if (is_array_of_tables(value)) {
      for (const py::handle item : py::reinterpret_borrow<py::sequence>(value)) {
        out += "\n[[" + name + "]]\n";
        write_table(out, py::reinterpret_borrow<py::dict>(item), name);
      }
    }
  }
}

std::string dict_to_toml(const py::dict& scenario) {
  std::string out;
  write_table(out, scenario, "");
  return out;
}

std::string scenario_text(const py::handle& scenario) {
  if (py::isinstance<py::str>(scenario)) return scenario.cast<std::string>();
  if (py::isinstance<py::bytes>(scenario)) return scenario.cast<std::string>();
  if (is_table(scenario)) return dict_to_toml(py::reinterpret_borrow<py::dict>(scenario));
  throw py::type_error("memplan.estimate: the scenario is TOML text (str) or a dict, got " +
                       py::repr(py::type::of(scenario)).cast<std::string>());
}

// ---- the API -----------------------------------------------------------------

py::object estimate(const py::handle& scenario, const std::string& format_name, const std::vector<std::string>& set,
                    const std::string& path, bool allow_unsigned, const std::optional<std::string>& prefix) {
  const auto format = memplan::parse_report_format(format_name);
  if (!format)
    throw py::value_error("memplan.estimate: unknown format '" + format_name +
                          "'; use json, table, csv, markdown or html");
  const std::string text = scenario_text(scenario);
  const memplan::InstallLayout layout = layout_for(prefix);
  std::string report;
  std::vector<std::string> warnings;
  {
    py::gil_scoped_release unlocked;  // the estimate is C++ only; other Python threads may run
    // The installed bundles' catalog files too, as `memplan run` reads them.
    const memplan::Catalog catalog = memplan::bundle::load_catalog_with_bundles(layout.data_dir, allow_unsigned, warnings);
    const memplan::Scenario parsed = memplan::parse_scenario(text, path, catalog, set);
    warnings.insert(warnings.end(), parsed.warnings.begin(), parsed.warnings.end());
    // As `memplan run` does (core/cli/scenario_report.cpp).
    memplan::PluginRegistry registry;
    memplan::PluginLoadOptions load_options;
    load_options.installed = memplan::bundle::installed_bundles_source(allow_unsigned);
    load_options.index_dir = memplan::plugin_index_dir_from_environment();
    memplan::load_plugins(registry, layout, &parsed, load_options);
    for (const std::string& diagnostic : registry.diagnostics()) warnings.push_back("memplan: warning: " + diagnostic);
    memplan::Estimator estimator(parsed, registry);
    const memplan::ScenarioLimits limits = memplan::evaluate_with_limits(estimator);
    std::ostringstream out;
    memplan::write_report(out, estimator.estimate(), limits, *format);
    report = out.str();
  }
  for (const std::string& warning : warnings) warn(warning);
  if (*format != memplan::ReportFormat::json) return py::str(report);
  return py::module_::import("json").attr("loads")(report);
}

py::list plugins(bool allow_unsigned, const std::optional<std::string>& prefix) {
  const memplan::InstallLayout layout = layout_for(prefix);
  memplan::PluginRegistry registry;
  memplan::PluginLoadOptions load_options;
  load_options.installed = memplan::bundle::installed_bundles_source(allow_unsigned);
  load_options.index_dir = memplan::plugin_index_dir_from_environment();
  memplan::load_plugins(registry, layout, nullptr, load_options);
  py::list found;
  auto entry = [&](std::string_view kind, const std::string& name, const std::string& version,
                   const std::string& library) {
    py::dict plugin;
    plugin["kind"] = std::string(kind);
    plugin["name"] = name;
    plugin["version"] = version;
    plugin["library"] = library;
    found.append(plugin);
  };
  // The order of `memplan plugins`: kind by kind, then the framework profiles (data files, not libraries).
  for (int32_t kind : {MEMPLAN_KIND_PRECISION, MEMPLAN_KIND_OPTIMIZER, MEMPLAN_KIND_ACTIVATIONS, MEMPLAN_KIND_STRATEGY})
    for (const auto& plugin : registry.plugins())
      if (plugin->descriptor.kind == kind) entry(memplan::kind_name(kind), plugin->name, plugin->version, plugin->path);
  std::vector<std::string> warnings;
  const memplan::Catalog catalog = memplan::bundle::load_catalog_with_bundles(layout.data_dir, allow_unsigned, warnings);
  for (const std::string& warning : warnings) warn(warning);
  for (const memplan::FrameworkProfile& profile : catalog.frameworks())
    entry("framework", profile.name, profile.version, profile.file);
  for (const std::string& diagnostic : registry.diagnostics()) warn("memplan: warning: " + diagnostic);
  return found;
}

}  // namespace

PYBIND11_MODULE(memplan, m) {
  m.doc() = "memplan: GPU memory estimates of LLM training and serving jobs (docs/python.md)";
  m.attr("__version__") = MEMPLAN_VERSION;
  py::register_exception<memplan::Error>(m, "Error");
  m.def("estimate", &estimate, py::arg("scenario"), py::kw_only(), py::arg("format") = "json",
        py::arg("set") = std::vector<std::string>{}, py::arg("path") = "<scenario>", py::arg("allow_unsigned") = false,
        py::arg("prefix") = py::none(),
        "Estimates a scenario (TOML text, or a dict: nested dicts are tables, a list of dicts an array of tables)\n"
        "as `memplan run` does. format='json' (the default) returns the JSON report as a dict; 'table', 'csv',\n"
        "'markdown' and 'html' return text. set=['key.path=value', ...] are `memplan run --set` overrides; path\n"
        "names the scenario in errors and its default name, and relative paths in it are read from its folder.\n"
        "Raises memplan.Error with the message 'file:line:column: error: ...'.");
  m.def("scenario_toml", [](const py::dict& scenario) { return dict_to_toml(scenario); }, py::arg("scenario"),
        "The TOML text estimate() reads for a dict scenario (error locations point into it).");
  m.def("plugins", &plugins, py::kw_only(), py::arg("allow_unsigned") = false, py::arg("prefix") = py::none(),
        "The plugins `memplan plugins` lists: dicts with kind, name, version and library (for a framework\n"
        "profile, its file).");
}
