// What a publisher runs: keygen, create, sign.
#include <algorithm>
#include <set>
#include <system_error>
#include <vector>
#include <unistd.h>

#include "crypto.hpp"
#include "manifest.hpp"
#include "store.hpp"
#include "verify.hpp"
#include "memplan/core/plugin_registry.hpp"

namespace memplan::bundle {
namespace fs = std::filesystem;

namespace {

constexpr size_t kMaxKeyFile = 64 * 1024;

void copy_file_exactly(const fs::path& from, const fs::path& to) {
  std::error_code error;
  fs::create_directories(to.parent_path(), error);
  if (!error) fs::copy_file(from, to, fs::copy_options::none, error);
  if (error) refuse("cannot copy " + display(from) + " to " + display(to) + ": " + error.message());
}

void check_identity(const std::string& name, const std::string& version, const std::string& publisher) {
  if (!valid_bundle_name(name))
    refuse("--name '" + name + "' is not a valid bundle name (rule: 1 to 64 lower-case letters, digits and dashes, "
           "starting with a letter), e.g. --name acme-optimizers");
  if (!parse_version(version))
    refuse("--version '" + version + "' is not a version (1 to 4 numbers separated by dots), e.g. --version 1.2.0");
  if (publisher.empty() || publisher.size() > 128 ||
      std::any_of(publisher.begin(), publisher.end(), [](unsigned char c) { return c < 0x20 || c == 0x7f; }))
    refuse("--publisher must be 1 to 128 printable characters, e.g. --publisher \"Acme Corp\"");
}

}  // namespace

fs::path public_key_path_for(const fs::path& private_key) {
  fs::path public_key = private_key;
  if (public_key.extension() == ".pem") public_key.replace_extension();
  public_key += ".pub.pem";
  return public_key;
}

KeygenResult generate_key(const fs::path& private_key) {
  const fs::path public_key = public_key_path_for(private_key);
  std::error_code error;
  for (const fs::path& file : {private_key, public_key})
    if (fs::exists(fs::symlink_status(file, error)))
      refuse(display(file) + " already exists; keygen never overwrites a key. Choose another --out, or remove the "
             "old key if you are sure nothing needs it");
  // A missing folder is made, as `mkdir -p` would (`--out keys/acme.pem` in a
  // fresh checkout); folders made here are the owner's alone, since they hold
  // a private key.
  const fs::path folder = fs::absolute(private_key, error).parent_path();
  if (!fs::is_directory(folder, error)) {
    std::vector<fs::path> made;
    for (fs::path missing = folder; !missing.empty() && !fs::exists(missing, error); missing = missing.parent_path())
      made.push_back(missing);
    fs::create_directories(folder, error);
    if (error) refuse("cannot create the folder " + display(folder) + " for the key: " + error.message());
    for (const fs::path& created : made) fs::permissions(created, fs::perms::owner_all, error);
  }
  std::string why;
  auto pair = crypto::generate_ed25519(why);
  if (!pair) refuse(why);
  write_new_file(private_key, pair->private_pem, 0600);
  try {
    write_new_file(public_key, pair->public_pem, 0644);
  } catch (...) {
    fs::remove(private_key, error);
    throw;
  }
  return KeygenResult{private_key, public_key, crypto::key_id(pair->raw_public_key)};
}

Manifest create_bundle(const CreateRequest& request) {
  check_identity(request.name, request.version, request.publisher);
  if (request.libraries.empty())
    refuse("a bundle needs at least one plugin library: add --library path/to/memplan-NAME.so");
  fs::path target = fs::absolute(request.folder).lexically_normal();
  if (target.filename().empty()) target = target.parent_path();  // "out/acme/"
  std::error_code error;
  if (fs::exists(fs::symlink_status(target, error)))
    refuse(display(target) + " already exists; `memplan bundle create` makes a new folder. Choose another path or "
           "remove the old one");
  // The folders above the bundle are made as `mkdir -p` would (`out/acme` in a fresh checkout).
  if (!fs::is_directory(target.parent_path(), error)) {
    fs::create_directories(target.parent_path(), error);
    if (error)
      refuse("cannot create the folder " + display(target.parent_path()) + " that would hold the bundle: " +
             error.message());
  }

  Manifest manifest;
  manifest.name = request.name;
  manifest.version = request.version;
  manifest.publisher = request.publisher;

  // Every library passes the registry's checks (one registry, so two
  // libraries offering the same plugin are refused here already).
  PluginRegistry probe;
  std::set<std::string> files;
  for (const fs::path& library : request.libraries) {
    std::string why;
    if (!fs::is_regular_file(library, error))
      refuse("--library " + display(library) + " is not a file; pass the path of a plugin library (.so)");
    const size_t before = probe.plugins().size();
    if (!probe.load_library(library.string()))
      refuse("cannot put " + display(library) + " in a bundle: " + probe.diagnostics().back());
    LibraryEntry entry;
    entry.file = "lib/" + library.filename().string();
    if (auto escape = path_escape_reason(entry.file)) refuse("--library file name " + entry.file + " " + *escape);
    if (!files.insert(entry.file).second)
      refuse("two --library files are named " + library.filename().string() + "; rename one of them");
    for (size_t i = before; i < probe.plugins().size(); ++i) {
      entry.plugins.push_back(probe.plugins()[i]->name);
      entry.abi_major = probe.plugins()[i]->descriptor.abi_major;
      entry.abi_minor = probe.plugins()[i]->descriptor.abi_minor;
    }
    entry.platform = host_platform();
    manifest.libraries.push_back(std::move(entry));
  }

  std::vector<std::pair<fs::path, std::string>> data_files;  // source, bundle path
  if (request.data) {
    const fs::path& data = *request.data;
    if (!fs::is_directory(data, error)) refuse("--data " + display(data) + " is not a folder");
    for (auto it = fs::recursive_directory_iterator(data, error); !error && it != fs::recursive_directory_iterator();
         it.increment(error)) {
      const fs::file_status status = it->symlink_status(error);
      const std::string relative = "data/" + it->path().lexically_relative(data).generic_string();
      if (fs::is_directory(status)) continue;
      if (!fs::is_regular_file(status))
        refuse("--data holds " + display(it->path()) + ", which is not a regular file (a link, a device...); bundles "
               "hold regular files only");
      if (auto escape = path_escape_reason(relative)) refuse("--data file " + relative + " " + *escape);
      data_files.emplace_back(it->path(), relative);
    }
    if (error) refuse("cannot read --data " + display(data) + ": " + error.message());
    std::sort(data_files.begin(), data_files.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
  }

  // Built beside the target, renamed into place when complete.
  const fs::path temporary = target.parent_path() / (".tmp-" + std::to_string(::getpid()) + "-" +
                                                     target.filename().string());
  fs::remove_all(temporary, error);
  try {
    fs::create_directories(temporary, error);
    if (error) refuse("cannot create " + display(temporary) + ": " + error.message());
    for (size_t i = 0; i < request.libraries.size(); ++i) {
      LibraryEntry& entry = manifest.libraries[i];
      copy_file_exactly(request.libraries[i], temporary / entry.file);
      std::string why;
      auto sha = crypto::sha256_file_hex(temporary / entry.file, why);
      if (!sha) refuse("cannot hash " + display(temporary / entry.file) + ": " + why);
      entry.sha256 = *sha;
      entry.size = fs::file_size(temporary / entry.file);
    }
    for (const auto& [source, relative] : data_files) {
      copy_file_exactly(source, temporary / relative);
      std::string why;
      auto sha = crypto::sha256_file_hex(temporary / relative, why);
      if (!sha) refuse("cannot hash " + display(temporary / relative) + ": " + why);
      manifest.data.push_back(DataEntry{relative, *sha, fs::file_size(temporary / relative), {}});
    }
    write_new_file(temporary / kManifestFile, write_manifest(manifest), 0644);
    fs::rename(temporary, target, error);
    if (error) refuse("cannot move the new bundle to " + display(target) + ": " + error.message());
  } catch (...) {
    fs::remove_all(temporary, error);
    throw;
  }
  return manifest;
}

std::string sign_bundle(const fs::path& folder, const fs::path& private_key) {
  std::string why;
  auto pem = read_regular_file(private_key, kMaxKeyFile, why);
  if (!pem) refuse("cannot read the key " + display(private_key) + ": it " + why);
  auto raw = crypto::public_key_of_private_pem(*pem, why);
  if (!raw) refuse(display(private_key) + " is not an Ed25519 private key: " + why);
  const std::string id = crypto::key_id(*raw);

  const fs::path manifest_path = folder / kManifestFile;
  auto text = read_regular_file(manifest_path, kMaxManifestBytes, why);
  if (!text) refuse(display(manifest_path) + " " + why + "; sign a folder made by `memplan bundle create`");
  Manifest manifest = parse_manifest(*text, display(manifest_path));
  // Sign only what is consistent: a signature vouches for these files.
  for (const LibraryEntry& library : manifest.libraries)
    if (std::string refusal = check_file(folder, library.file, library.size, library.sha256); !refusal.empty())
      refuse(refusal + "; recreate the bundle before signing it");
  for (const DataEntry& data : manifest.data)
    if (std::string refusal = check_file(folder, data.file, data.size, data.sha256); !refusal.empty())
      refuse(refusal + "; recreate the bundle before signing it");

  // The key id goes into the manifest first: the signature covers it.
  manifest.key_id = id;
  const std::string bytes = write_manifest(manifest);
  if (bytes != *text) write_file_atomically(manifest_path, bytes);
  auto signature = crypto::sign(*pem, bytes, why);
  if (!signature) refuse(display(private_key) + ": " + why);
  write_file_atomically(folder / kSignatureFile, write_signature(Signature{id, *signature}));
  return id;
}

}  // namespace memplan::bundle
