#include "memplan/core/plugin_registry.hpp"

#define BOOST_DLL_USE_STD_FS
#include <dlfcn.h>

#include <algorithm>
#include <boost/dll/shared_library.hpp>
#include <mutex>
#include <cstring>
#include <filesystem>

#include "memplan/core/scenario.hpp"
#include "plugins/plugin_index.hpp"

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

// A plugin the index names, whose library is not open yet.
struct PendingPlugin {
  std::string path;
  std::string name;
  int32_t kind = 0;
  uint64_t discovered = 0;
};

struct PluginRegistry::State {
  std::mutex mutex;  // const lookups may open a library
  std::vector<boost::dll::shared_library> handles;
  std::vector<std::unique_ptr<LoadedPlugin>> plugins;  // in `discovered` order
  std::vector<PendingPlugin> pending;                  // in `discovered` order
  std::vector<std::string> diagnostics;
  std::vector<std::string> seen_files;  // canonical paths of every library tried
  std::filesystem::path index_dir;      // empty: no index
  uint64_t next_discovered = 0;

  // Each takes the caller's lock.
  bool load_folder(const std::string& folder);
  bool load_library(const std::string& given_path, const PreloadCheck& check, const PluginCheck& plugin_check);
  bool open_library(const std::string& path, uint64_t discovered, const PreloadCheck& check,
                    const PluginCheck& plugin_check);
  bool claim_file(const std::string& given_path, std::string& path);
  const std::string* taken_by(std::string_view name) const;
  void add_pending(const std::string& given_path, const plugin_index::Entry& entry);
  const LoadedPlugin* open_pending(size_t position);
  void insert(std::unique_ptr<LoadedPlugin> plugin);
  bool reject(const std::string& path, const std::string& why) {
    diagnostics.push_back("plugin library " + path + " was not loaded: " + why);
    return false;
  }
};

std::string duplicate_rule(const std::string& who, const std::string& existing_path) {
  return who + " is already provided by " + existing_path +
         " (rule: plugin names are unique; the first one found is kept). Rename one of the plugins, or remove one "
         "library from the plugin path.";
}

PluginRegistry::PluginRegistry() : state_(std::make_unique<State>()) {}
PluginRegistry::~PluginRegistry() {
  // Plugins' strings point into their libraries: drop them first.
  state_->plugins.clear();
  // Libraries are never unloaded: unloading costs a cold start time for
  // nothing at exit, and a plugin's static objects (an interned name, a
  // cached descriptor) may still be in use by another registry's copy of the
  // same library. The dynamic loader counts opens, so a library loaded again
  // is not mapped again. Kept reachable from here, not leaked.
  static std::mutex kept_mutex;
  static auto* kept = new std::vector<boost::dll::shared_library>();
  const std::lock_guard<std::mutex> lock(kept_mutex);
  for (boost::dll::shared_library& library : state_->handles) kept->push_back(std::move(library));
}

void PluginRegistry::use_index(std::filesystem::path index_dir) {
  const std::lock_guard<std::mutex> lock(state_->mutex);
  state_->index_dir = std::move(index_dir);
}

void PluginRegistry::add_diagnostic(std::string diagnostic) {
  const std::lock_guard<std::mutex> lock(state_->mutex);
  state_->diagnostics.push_back(std::move(diagnostic));
}

bool PluginRegistry::load_folder(const std::string& folder) {
  const std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->load_folder(folder);
}

bool PluginRegistry::load_library(const std::string& given_path) { return load_library(given_path, nullptr); }

bool PluginRegistry::load_library(const std::string& given_path, const PreloadCheck& check) {
  return load_library(given_path, check, nullptr);
}

bool PluginRegistry::load_library(const std::string& given_path, const PreloadCheck& check,
                                  const PluginCheck& plugin_check) {
  const std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->load_library(given_path, check, plugin_check);
}

bool PluginRegistry::State::load_folder(const std::string& folder) {
  std::error_code error;
  if (!std::filesystem::is_directory(folder, error)) {
    diagnostics.push_back("plugin folder " + folder +
                          " does not exist or is not a folder; fix or remove it from the plugin search path");
    return false;
  }
  const std::vector<plugin_index::LibraryFile> files = plugin_index::list_libraries(folder);
  const std::filesystem::path base(folder);
  if (index_dir.empty()) {
    for (const plugin_index::LibraryFile& file : files) load_library((base / file.file_name).string(), nullptr, nullptr);
    return true;
  }
  std::string canonical = std::filesystem::weakly_canonical(folder, error).string();
  if (error) canonical = std::filesystem::absolute(folder, error).lexically_normal().string();
  if (const auto index = plugin_index::read_valid(index_dir, canonical, files)) {
    for (const plugin_index::Entry& entry : index->entries) {
      const std::string path = (base / entry.file.file_name).string();
      if (entry.open_always)
        load_library(path, nullptr, nullptr);
      else
        add_pending(path, entry);
    }
    return true;
  }
  // No index, or a stale one: open every library, as without an index, and
  // record what each registered for the next run.
  plugin_index::FolderIndex fresh{canonical, {}};
  for (const plugin_index::LibraryFile& file : files) {
    const size_t before = plugins.size() + pending.size();
    const uint64_t discovered = next_discovered;
    load_library((base / file.file_name).string(), nullptr, nullptr);
    plugin_index::Entry entry{file, true, {}, 0};
    if (plugins.size() + pending.size() > before)
      for (const auto& plugin : plugins)
        if (plugin->discovered == discovered) entry = {file, false, plugin->name, plugin->descriptor.kind};
    fresh.entries.push_back(std::move(entry));
  }
  plugin_index::write(index_dir, fresh);
  return true;
}

// Records the library as tried; false when its file was tried before (the
// same library reached through two search folders is seen once). `path` is
// the path as the user laid it out (absolute, normalized), for messages; the
// canonical path (symlinks resolved) only identifies the file.
bool PluginRegistry::State::claim_file(const std::string& given_path, std::string& path) {
  std::error_code fs_error;
  path = std::filesystem::absolute(given_path, fs_error).lexically_normal().string();
  std::string identity = std::filesystem::weakly_canonical(given_path, fs_error).string();
  if (fs_error) identity = path;
  if (std::find(seen_files.begin(), seen_files.end(), identity) != seen_files.end()) return false;
  seen_files.push_back(identity);
  return true;
}

const std::string* PluginRegistry::State::taken_by(std::string_view name) const {
  for (const auto& plugin : plugins)
    if (plugin->name == name) return &plugin->path;
  for (const PendingPlugin& plugin : pending)
    if (plugin.name == name) return &plugin.path;
  return nullptr;
}

void PluginRegistry::State::add_pending(const std::string& given_path, const plugin_index::Entry& entry) {
  std::string path;
  if (!claim_file(given_path, path)) return;
  const uint64_t discovered = next_discovered++;
  // The name rule (check 7) needs only the name, which the index holds: the
  // same warning as when the library is opened.
  if (const std::string* existing = taken_by(entry.plugin)) {
    reject(path, duplicate_rule("plugin '" + entry.plugin + "'", *existing));
    return;
  }
  pending.push_back(PendingPlugin{path, entry.plugin, entry.kind, discovered});
}

const LoadedPlugin* PluginRegistry::State::open_pending(size_t position) {
  const PendingPlugin plugin = pending[position];
  pending.erase(pending.begin() + static_cast<std::ptrdiff_t>(position));
  if (!open_library(plugin.path, plugin.discovered, nullptr, nullptr)) return nullptr;
  for (const auto& loaded : plugins)
    if (loaded->discovered == plugin.discovered) return loaded.get();
  return nullptr;
}

void PluginRegistry::State::insert(std::unique_ptr<LoadedPlugin> plugin) {
  const auto position = std::upper_bound(
      plugins.begin(), plugins.end(), plugin->discovered,
      [](uint64_t discovered, const std::unique_ptr<LoadedPlugin>& other) { return discovered < other->discovered; });
  plugins.insert(position, std::move(plugin));
}

bool PluginRegistry::State::load_library(const std::string& given_path, const PreloadCheck& check,
                                         const PluginCheck& plugin_check) {
  std::string path;
  if (!claim_file(given_path, path)) return true;
  return open_library(path, next_discovered++, check, plugin_check);
}

bool PluginRegistry::State::open_library(const std::string& path, uint64_t discovered, const PreloadCheck& check,
                                         const PluginCheck& plugin_check) {
  auto reject = [&](const std::string& why) { return this->reject(path, why); };

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
  if (const std::string* existing = taken_by(plugin->name)) return reject(duplicate_rule(who, *existing));

  plugin->version = d.version;
  plugin->summary = d.summary ? d.summary : "";
  plugin->path = path;
  plugin->discovered = discovered;
  handles.push_back(std::move(library));
  insert(std::move(plugin));
  return true;
}

const LoadedPlugin* PluginRegistry::find(std::string_view name) const {
  const std::lock_guard<std::mutex> lock(state_->mutex);
  for (const auto& plugin : state_->plugins)
    if (plugin->name == name) return plugin.get();
  for (size_t i = 0; i < state_->pending.size(); ++i)
    if (state_->pending[i].name == name) return state_->open_pending(i);
  return nullptr;
}

std::vector<std::string> PluginRegistry::names(int32_t kind) const {
  const std::lock_guard<std::mutex> lock(state_->mutex);
  std::vector<std::pair<uint64_t, std::string>> found;
  for (const auto& plugin : state_->plugins)
    if (kind == 0 || plugin->descriptor.kind == kind) found.emplace_back(plugin->discovered, plugin->name);
  for (const PendingPlugin& plugin : state_->pending)
    if (kind == 0 || plugin.kind == kind) found.emplace_back(plugin.discovered, plugin.name);
  std::sort(found.begin(), found.end());
  std::vector<std::string> names;
  for (auto& [discovered, name] : found) names.push_back(std::move(name));
  return names;
}

const std::vector<std::unique_ptr<LoadedPlugin>>& PluginRegistry::plugins() const {
  const std::lock_guard<std::mutex> lock(state_->mutex);
  while (!state_->pending.empty()) state_->open_pending(0);
  return state_->plugins;
}

const std::vector<std::string>& PluginRegistry::diagnostics() const { return state_->diagnostics; }

size_t PluginRegistry::opened_library_count() const {
  const std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->handles.size();
}

}  // namespace memplan
