#include "memplan/core/plugin_registry.hpp"

#define BOOST_DLL_USE_STD_FS
#include <dlfcn.h>

#include <algorithm>
#include <boost/dll/shared_library.hpp>
#include <mutex>
#include <cstring>
#include <filesystem>

#include "memplan/core/scenario.hpp"

namespace memplan {
namespace {

// The descriptor fields of ABI 1.0 end with `destroy`; a plugin built
// against 1.0 is exactly this large, later minors only larger.
constexpr size_t kMinimumDescriptorSize = offsetof(memplan_plugin_descriptor, destroy) + sizeof(void (*)(void*));
constexpr size_t kVersionFieldsSize = offsetof(memplan_plugin_descriptor, abi_minor) + sizeof(uint16_t);
constexpr size_t kMinimumOptionSpecSize = offsetof(memplan_option_spec, default_text) + sizeof(const char*);
constexpr size_t kMaxPluginName = 48;

std::string abi_text(unsigned major, unsigned minor) {
  return std::to_string(major) + "." + std::to_string(minor);
}

bool valid_plugin_name(const char* name) {
  if (name == nullptr) return false;
  const size_t length = std::strlen(name);
  if (length == 0 || length > kMaxPluginName || name[0] < 'a' || name[0] > 'z') return false;
  for (size_t i = 0; i < length; ++i) {
    const char c = name[i];
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return false;
  }
  return name[length - 1] != '-';
}

bool valid_option_name(const char* name) {
  if (name == nullptr || name[0] == '\0' || std::strcmp(name, "use") == 0) return false;
  for (const char* c = name; *c != '\0'; ++c)
    if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '_')) return false;
  return true;
}

bool known_kind(int32_t kind) { return kind >= MEMPLAN_KIND_OPTIMIZER && kind <= MEMPLAN_KIND_STRATEGY; }

}  // namespace

struct PluginRegistry::Libraries {
  std::vector<boost::dll::shared_library> handles;
};

PluginRegistry::PluginRegistry() : libraries_(std::make_unique<Libraries>()) {}
PluginRegistry::~PluginRegistry() {
  // Plugins' strings point into their libraries: drop them first.
  plugins_.clear();
  // Libraries are never unloaded: unloading costs a cold start time for
  // nothing at exit, and a plugin's static objects (an interned name, a
  // cached descriptor) may still be in use by another registry's copy of the
  // same library. The dynamic loader counts opens, so a library loaded again
  // is not mapped again. Kept reachable from here, not leaked.
  static std::mutex kept_mutex;
  static auto* kept = new std::vector<boost::dll::shared_library>();
  const std::lock_guard<std::mutex> lock(kept_mutex);
  for (boost::dll::shared_library& library : libraries_->handles) kept->push_back(std::move(library));
}

bool PluginRegistry::load_folder(const std::string& folder) {
  std::error_code error;
  if (!std::filesystem::is_directory(folder, error)) {
    diagnostics_.push_back("plugin folder " + folder +
                           " does not exist or is not a folder; fix or remove it from the plugin search path");
    return false;
  }
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(folder, error))
    if (entry.is_regular_file() && entry.path().extension() == ".so") files.push_back(entry.path().string());
  std::sort(files.begin(), files.end());
  for (const std::string& file : files) load_library(file);
  return true;
}

bool PluginRegistry::load_library(const std::string& given_path) { return load_library(given_path, nullptr); }

bool PluginRegistry::load_library(const std::string& given_path, const PreloadCheck& check) {
  return load_library(given_path, check, nullptr);
}

bool PluginRegistry::load_library(const std::string& given_path, const PreloadCheck& check,
                                  const PluginCheck& plugin_check) {
  // Messages show the path as the user laid it out (absolute, normalized);
  // the canonical path (symlinks resolved) only identifies the file, so the
  // same library reached through two search folders is seen once.
  std::error_code fs_error;
  const std::string path = std::filesystem::absolute(given_path, fs_error).lexically_normal().string();
  std::string identity = std::filesystem::weakly_canonical(given_path, fs_error).string();
  if (fs_error) identity = path;
  if (std::find(seen_files_.begin(), seen_files_.end(), identity) != seen_files_.end()) return true;
  seen_files_.push_back(identity);

  auto reject = [&](const std::string& why) {
    diagnostics_.push_back("plugin library " + path + " was not loaded: " + why);
    return false;
  };

  if (check) {
    if (std::string why = check(path); !why.empty()) return reject(why);
  }

  boost::dll::shared_library library;
  boost::dll::fs::error_code error;
  ::dlerror();  // clear, so the message read below is this load's
  library.load(path, boost::dll::load_mode::rtld_now | boost::dll::load_mode::rtld_local, error);
  if (error || !library.is_loaded()) {
    const char* reason = ::dlerror();
    return reject(std::string("the dynamic loader refused it (") + (reason ? reason : error.message()) +
                  "). Rebuild it for this platform against the memplan SDK, or remove it from the plugin path.");
  }
  if (!library.has(MEMPLAN_ENTRY_POINT))
    return reject(std::string("it exports no '") + MEMPLAN_ENTRY_POINT +
                  "' function, so it is not a memplan plugin. Register the plugin class with MEMPLAN_PLUGIN(...) "
                  "from <memplan/sdk.hpp> (or declare the entry point extern \"C\"), or remove the file from the "
                  "plugin path.");

  auto entry = library.get<const memplan_plugin_descriptor*()>(MEMPLAN_ENTRY_POINT);
  const memplan_plugin_descriptor* raw = entry();
  if (raw == nullptr)
    return reject(std::string("its '") + MEMPLAN_ENTRY_POINT + "' returned no descriptor (NULL). Return the "
                  "address of a static descriptor.");
  // Every ABI version starts with struct_size, abi_major and abi_minor, so
  // the version can be read (and judged) before the size of the rest.
  if (raw->struct_size < kVersionFieldsSize)
    return reject("its descriptor is " + std::to_string(raw->struct_size) + " bytes, too small to hold its version. "
                  "Rebuild it against the memplan SDK.");
  if (raw->abi_major != MEMPLAN_ABI_MAJOR)
    return reject("it was built for plugin ABI " + abi_text(raw->abi_major, raw->abi_minor) + " but this memplan "
                  "implements ABI " + abi_text(MEMPLAN_ABI_MAJOR, MEMPLAN_ABI_MINOR) + " (rule: the ABI major "
                  "versions must be equal). Rebuild the plugin against memplan SDK " +
                  std::to_string(MEMPLAN_ABI_MAJOR) + ".x.");
  if (raw->abi_minor > MEMPLAN_ABI_MINOR)
    return reject("it was built for plugin ABI " + abi_text(raw->abi_major, raw->abi_minor) +
                  ", newer than this memplan's ABI " + abi_text(MEMPLAN_ABI_MAJOR, MEMPLAN_ABI_MINOR) +
                  " (rule: the plugin's ABI minor must not exceed the host's). Upgrade memplan, or rebuild the "
                  "plugin against SDK " + abi_text(MEMPLAN_ABI_MAJOR, MEMPLAN_ABI_MINOR) + ".");

  if (raw->struct_size < kMinimumDescriptorSize)
    return reject("its descriptor is " + std::to_string(raw->struct_size) + " bytes, smaller than the " +
                  std::to_string(kMinimumDescriptorSize) + " bytes of ABI 1.0. Rebuild it against the memplan SDK.");

  auto plugin = std::make_unique<LoadedPlugin>();
  std::memcpy(&plugin->descriptor, raw, std::min<size_t>(raw->struct_size, sizeof plugin->descriptor));
  const memplan_plugin_descriptor& d = plugin->descriptor;
  if (!valid_plugin_name(d.name))
    return reject("its plugin name " + (d.name ? "'" + std::string(d.name) + "'" : std::string("(NULL)")) +
                  " is not valid (rule: 1 to 48 lower-case letters, digits and dashes, starting with a letter). "
                  "Rename the plugin.");
  plugin->name = d.name;
  const std::string who = "plugin '" + plugin->name + "'";
  if (d.version == nullptr || d.version[0] == '\0')
    return reject(who + " has no version string. Set one, e.g. \"1.0.0\".");
  if (!known_kind(d.kind))
    return reject(who + " declares unknown kind " + std::to_string(d.kind) +
                  " (rule: optimizer, precision, activations or strategy).");
  if (d.phase <= 0) return reject(who + " declares phase " + std::to_string(d.phase) + " (rule: a positive phase).");
  if (d.create == nullptr || d.apply == nullptr || d.destroy == nullptr)
    return reject(who + " leaves create, apply or destroy NULL (rule: all three callbacks are required).");
  if (d.option_count > 0) {
    if (d.options == nullptr || d.option_spec_size < kMinimumOptionSpecSize)
      return reject(who + " declares options with a missing or too small option table.");
    const auto* bytes = reinterpret_cast<const unsigned char*>(d.options);
    for (uint32_t i = 0; i < d.option_count; ++i) {
      memplan_option_spec spec{};
      std::memcpy(&spec, bytes + size_t{i} * d.option_spec_size, std::min<size_t>(d.option_spec_size, sizeof spec));
      if (!valid_option_name(spec.name))
        return reject(who + " declares an invalid option name (rule: lower-case letters, digits and underscores, "
                            "not 'use').");
      if (spec.type < MEMPLAN_OPTION_INT || spec.type > MEMPLAN_OPTION_STRING)
        return reject(who + " declares option '" + spec.name + "' with unknown type " + std::to_string(spec.type) + ".");
      plugin->options.push_back(spec);
    }
  }
  if (plugin_check) {
    if (std::string why = plugin_check(*plugin); !why.empty()) return reject(why);
  }
  if (const LoadedPlugin* existing = find(plugin->name))
    return reject(who + " is already provided by " + existing->path +
                  " (rule: plugin names are unique; the first one found is kept). Rename one of the plugins, or "
                  "remove one library from the plugin path.");

  plugin->version = d.version;
  plugin->summary = d.summary ? d.summary : "";
  plugin->path = path;
  libraries_->handles.push_back(std::move(library));
  plugins_.push_back(std::move(plugin));
  return true;
}

const LoadedPlugin* PluginRegistry::find(std::string_view name) const {
  for (const auto& plugin : plugins_)
    if (plugin->name == name) return plugin.get();
  return nullptr;
}

std::vector<std::string> PluginRegistry::names(int32_t kind) const {
  std::vector<std::string> names;
  for (const auto& plugin : plugins_)
    if (kind == 0 || plugin->descriptor.kind == kind) names.push_back(plugin->name);
  return names;
}

}  // namespace memplan
