#include "manifest.hpp"

#include <charconv>
#include <set>
#include <sstream>

#include "common/toml_guard.hpp"
#include "common/toml_reader.hpp"

namespace memplan::bundle {
namespace {

constexpr size_t kMaxPublisher = 128;

bool is_hex(std::string_view text, size_t length) {
  if (text.size() != length) return false;
  for (char c : text)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

bool valid_plugin_name(std::string_view name) {
  if (name.empty() || name.size() > 48 || name[0] < 'a' || name[0] > 'z' || name.back() == '-') return false;
  for (char c : name)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return false;
  return true;
}

bool printable(std::string_view text) {
  for (unsigned char c : text)
    if (c < 0x20 || c == 0x7f) return false;
  return true;
}

const toml::node& required(const TomlReader& reader, const toml::table& table, std::string_view key) {
  const toml::node* node = table.get(key);
  if (node == nullptr)
    fail_at(reader.table_location(), "in " + reader.section() + ", '" + std::string(key) +
                                         "' is missing; recreate the bundle with memplan bundle create");
  return *node;
}

std::string required_string(const TomlReader& reader, const toml::table& table, std::string_view key) {
  required(reader, table, key);
  return *reader.string(key);
}

uint64_t required_count(const TomlReader& reader, const toml::table& table, std::string_view key, uint64_t max) {
  required(reader, table, key);
  const int64_t value = *reader.integer(key);
  if (value < 0 || static_cast<uint64_t>(value) > max)
    reader.fail_key(key, "must be between 0 and " + std::to_string(max));
  return static_cast<uint64_t>(value);
}

std::string file_entry(const TomlReader& reader, const toml::table& table) {
  std::string file = required_string(reader, table, "file");
  if (auto why = path_escape_reason(file))
    reader.fail_key("file", "'" + file + "' " + *why +
                                "; file names in a manifest are relative paths inside the bundle folder, "
                                "such as \"lib/memplan-example.so\"");
  return file;
}

std::string sha256_entry(const TomlReader& reader, const toml::table& table) {
  std::string sha = required_string(reader, table, "sha256");
  if (!is_hex(sha, 64)) reader.fail_key("sha256", "must be 64 lower-case hexadecimal digits");
  return sha;
}

}  // namespace

std::optional<std::string> path_escape_reason(std::string_view path) {
  if (path.empty()) return "is empty";
  if (path.size() > 255) return "is longer than 255 characters";
  if (path.front() == '/') return "is an absolute path, outside the bundle folder";
  if (!printable(path) || path.find('\\') != std::string_view::npos)
    return "contains a backslash or a control character";
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    const std::string_view part = path.substr(start, end - start);
    if (part == "..") return "leaves the bundle folder through '..'";
    if (part.empty() || part == ".") return "has an empty or '.' part";
    start = end + 1;
  }
  return std::nullopt;
}

std::string toml_quote(std::string_view text) {
  std::string quoted = "\"";
  for (unsigned char c : text) {
    switch (c) {
      case '"': quoted += "\\\""; break;
      case '\\': quoted += "\\\\"; break;
      case '\n': quoted += "\\n"; break;
      case '\t': quoted += "\\t"; break;
      default:
        if (c < 0x20 || c == 0x7f) {
          char escape[8];
          std::snprintf(escape, sizeof escape, "\\u%04x", c);
          quoted += escape;
        } else {
          quoted.push_back(static_cast<char>(c));
        }
    }
  }
  return quoted + "\"";
}

std::string host_platform() {
#if defined(__linux__)
  std::string os = "linux";
#elif defined(__APPLE__)
  std::string os = "macos";
#elif defined(_WIN32)
  std::string os = "windows";
#else
  std::string os = "unknown";
#endif
#if defined(__x86_64__) || defined(_M_X64)
  return os + "-x86_64";
#elif defined(__aarch64__) || defined(_M_ARM64)
  return os + "-aarch64";
#else
  return os + "-unknown";
#endif
}

Manifest parse_manifest(std::string_view text, const std::string& display_path) {
  toml::table root;
  try {
    root = parse_toml(text, display_path);
  } catch (const toml::parse_error& error) {
    fail_at(location_of(display_path, error.source()), "invalid TOML: " + std::string(error.description()));
  }
  TomlReader reader(root, display_path, "the manifest's top level");
  reader.reject_unknown_keys({"format", "name", "version", "publisher", "key_id", "library", "data"});
  Manifest manifest;
  required(reader, root, "format");
  manifest.format = *reader.integer("format");
  if (manifest.format != 1)
    reader.fail_key("format", "is " + std::to_string(manifest.format) +
                                  ", but this memplan reads manifest format 1; upgrade memplan");
  manifest.name = required_string(reader, root, "name");
  if (!valid_bundle_name(manifest.name))
    reader.fail_key("name", "'" + manifest.name + "' is not a valid bundle name (rule: 1 to 64 lower-case letters, "
                            "digits and dashes, starting with a letter)");
  manifest.version = required_string(reader, root, "version");
  if (!parse_version(manifest.version))
    reader.fail_key("version", "'" + manifest.version + "' is not a version (1 to 4 numbers separated by dots)");
  manifest.publisher = required_string(reader, root, "publisher");
  if (manifest.publisher.empty() || manifest.publisher.size() > kMaxPublisher || !printable(manifest.publisher))
    reader.fail_key("publisher", "must be 1 to 128 printable characters");
  manifest.key_id = required_string(reader, root, "key_id");
  if (!manifest.key_id.empty() && !is_hex(manifest.key_id, 16))
    reader.fail_key("key_id", "must be \"\" (unsigned) or 16 lower-case hexadecimal digits");

  std::set<std::string> files{kManifestFile, kSignatureFile, kOriginFile};
  std::set<std::string> plugins;
  auto claim_file = [&](const TomlReader& entry_reader, const std::string& file) {
    if (!files.insert(file).second)
      entry_reader.fail_key("file", "'" + file + "' is listed twice or names the manifest, signature or origin file");
  };

  if (const toml::node* node = root.get("library")) {
    if (!node->is_array_of_tables()) reader.fail_key("library", "must be an array of tables ([[library]])");
    size_t index = 0;
    for (const toml::node& element : *node->as_array()) {
      const toml::table& table = *element.as_table();
      TomlReader entry_reader(table, display_path, "[[library]] #" + std::to_string(++index));
      entry_reader.reject_unknown_keys({"file", "plugins", "abi_major", "abi_minor", "platform", "sha256", "size"});
      LibraryEntry library;
      library.location = entry_reader.table_location();
      library.file = file_entry(entry_reader, table);
      claim_file(entry_reader, library.file);
      const toml::node& names = required(entry_reader, table, "plugins");
      if (!names.is_array() || names.as_array()->empty())
        entry_reader.fail_key("plugins", "must be a non-empty array of plugin names");
      for (const toml::node& name : *names.as_array()) {
        if (!name.is_string() || !valid_plugin_name(name.as_string()->get()))
          fail_at(location_of(display_path, name.source()),
                  "in " + entry_reader.section() + ", 'plugins' entries must be plugin names (1 to 48 lower-case "
                  "letters, digits and dashes, starting with a letter)");
        const std::string& plugin = name.as_string()->get();
        if (!plugins.insert(plugin).second)
          fail_at(location_of(display_path, name.source()),
                  "plugin '" + plugin + "' is listed twice in this bundle; plugin names are unique, so rename one "
                  "of the plugins");
        library.plugins.push_back(plugin);
      }
      library.abi_major = static_cast<uint32_t>(required_count(entry_reader, table, "abi_major", 65535));
      library.abi_minor = static_cast<uint32_t>(required_count(entry_reader, table, "abi_minor", 65535));
      library.platform = required_string(entry_reader, table, "platform");
      if (library.platform.empty() || library.platform.size() > 64 || !printable(library.platform))
        entry_reader.fail_key("platform", "must be a platform name such as \"" + host_platform() + "\"");
      library.sha256 = sha256_entry(entry_reader, table);
      library.size = required_count(entry_reader, table, "size", uint64_t{1} << 40);
      manifest.libraries.push_back(std::move(library));
    }
  }
  if (const toml::node* node = root.get("data")) {
    if (!node->is_array_of_tables()) reader.fail_key("data", "must be an array of tables ([[data]])");
    size_t index = 0;
    for (const toml::node& element : *node->as_array()) {
      const toml::table& table = *element.as_table();
      TomlReader entry_reader(table, display_path, "[[data]] #" + std::to_string(++index));
      entry_reader.reject_unknown_keys({"file", "sha256", "size"});
      DataEntry data;
      data.location = entry_reader.table_location();
      data.file = file_entry(entry_reader, table);
      if (data.file.rfind("data/", 0) != 0)
        entry_reader.fail_key("file", "'" + data.file + "' must lie under data/");
      claim_file(entry_reader, data.file);
      data.sha256 = sha256_entry(entry_reader, table);
      data.size = required_count(entry_reader, table, "size", uint64_t{1} << 40);
      manifest.data.push_back(std::move(data));
    }
  }
  if (manifest.libraries.empty())
    fail_at(SourceLocation{display_path, 1, 1},
            "the manifest lists no [[library]]; a bundle holds at least one plugin library");
  return manifest;
}

std::string write_manifest(const Manifest& manifest) {
  std::ostringstream out;
  out << "# memplan bundle manifest (docs/bundles.md). bundle.sig signs these exact bytes:\n"
      << "# edit nothing after `memplan bundle sign`.\n"
      << "format = " << manifest.format << "\n"
      << "name = " << toml_quote(manifest.name) << "\n"
      << "version = " << toml_quote(manifest.version) << "\n"
      << "publisher = " << toml_quote(manifest.publisher) << "\n"
      << "key_id = " << toml_quote(manifest.key_id) << "\n";
  for (const LibraryEntry& library : manifest.libraries) {
    out << "\n[[library]]\n"
        << "file = " << toml_quote(library.file) << "\n"
        << "plugins = [";
    for (size_t i = 0; i < library.plugins.size(); ++i) out << (i ? ", " : "") << toml_quote(library.plugins[i]);
    out << "]\n"
        << "abi_major = " << library.abi_major << "\n"
        << "abi_minor = " << library.abi_minor << "\n"
        << "platform = " << toml_quote(library.platform) << "\n"
        << "sha256 = " << toml_quote(library.sha256) << "\n"
        << "size = " << library.size << "\n";
  }
  for (const DataEntry& data : manifest.data) {
    out << "\n[[data]]\n"
        << "file = " << toml_quote(data.file) << "\n"
        << "sha256 = " << toml_quote(data.sha256) << "\n"
        << "size = " << data.size << "\n";
  }
  return out.str();
}

}  // namespace memplan::bundle
