// Installing, removing and loading bundles of the per-user store.
//
// An install never leaves a half-written bundle visible: the bundle is
// verified where it is, copied into <store>/bundles/.tmp-<pid>-<name>,
// verified again there (so what lands is what was checked), given its origin
// record, and only then renamed to <store>/bundles/<name> -- exchanged
// atomically with an older version (renameat2 RENAME_EXCHANGE) where one is
// installed. Folders starting with '.' are never read as bundles. An install
// that fails, or is stopped by SIGINT, SIGTERM or SIGHUP, removes its
// temporary folder; what a crash leaves, the next install, removal or list
// deletes (store.hpp says when a temporary folder is stale). Install and
// removal hold the store lock (store.hpp) while they read and change the store.
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <iterator>
#include <set>

#include "crypto.hpp"
#include "install.hpp"
#include "manifest.hpp"
#include "store.hpp"
#include "verify.hpp"
#include "memplan/core/plugin_registry.hpp"
#include "memplan/core/text.hpp"

namespace memplan::bundle {
namespace fs = std::filesystem;

namespace {

// Test hook: MEMPLAN_TEST_INTERRUPT_INSTALL=after-copy ends the process right
// after the copy into the store, as a crash or kill -9 would, so the tests can
// show that no half-installed bundle is ever visible; =sigterm-after-copy
// sends the process SIGTERM there, as `kill` would, so they can show that a
// signal leaves no temporary folder. Documented in docs/bundles.md.
void maybe_interrupt(const std::string& point) {
  const char* hook = std::getenv("MEMPLAN_TEST_INTERRUPT_INSTALL");
  if (hook == nullptr) return;
  if (hook == point) {
    std::cerr << "memplan: MEMPLAN_TEST_INTERRUPT_INSTALL: stopping " << point << "\n";
    std::_Exit(75);
  }
  if (hook == "sigterm-" + point) {
    std::cerr << "memplan: MEMPLAN_TEST_INTERRUPT_INSTALL: sending SIGTERM " << point << "\n";
    std::raise(SIGTERM);
  }
}

void copy_into(const fs::path& from, const fs::path& to) {
  std::error_code error;
  fs::create_directories(to.parent_path(), error);
  if (!error) fs::copy_file(from, to, fs::copy_options::none, error);
  if (error) refuse("cannot copy " + display(from) + " into the store: " + error.message());
}

// Moves `prepared` to `target` atomically. An existing target is exchanged
// with it in one step, so readers see the old bundle or the new one, never none.
void move_into_place(const fs::path& prepared, const fs::path& target) {
  std::error_code error;
  if (!fs::exists(fs::symlink_status(target, error))) {
    fs::rename(prepared, target, error);
    if (error) refuse("cannot move the new bundle to " + display(target) + ": " + error.message());
    return;
  }
#ifdef RENAME_EXCHANGE
  if (::renameat2(AT_FDCWD, prepared.c_str(), AT_FDCWD, target.c_str(), RENAME_EXCHANGE) == 0) {
    fs::remove_all(prepared, error);  // now the old version; a leftover is cleaned up next time
    return;
  }
#endif
  // No atomic exchange on this file system: move the old one aside first.
  const fs::path old = target.parent_path() / temporary_folder_name("old-" + target.filename().string());
  fs::rename(target, old, error);
  if (!error) fs::rename(prepared, target, error);
  if (error) refuse("cannot replace " + display(target) + ": " + error.message());
  fs::remove_all(old, error);
}

// How a refusal names a signer (a key id from verified_signer(), or "").
std::string signer_identity(const std::string& key_id) {
  return key_id.empty() ? "no trusted signature" : "key " + key_id;
}

std::string signer_text(const VerifiedBundle& bundle) {
  if (bundle.trusted) return "signed by key " + bundle.manifest.key_id + " (" + bundle.signer_label + ")";
  if (bundle.is_signed) return "signed by untrusted key " + bundle.manifest.key_id + ", accepted by --allow-unsigned";
  return "unsigned, accepted by --allow-unsigned";
}

// A library registers one plugin (its entry point returns one descriptor), and
// the manifest must say which: install's rule that plugin names are unique
// across bundles reads manifests, and only holds if they tell the truth. Only
// loading shows what a library registers, so this runs at load, before the
// plugin takes its name.
std::string check_declared_plugins(const std::string& bundle_name, const LibraryEntry& library,
                                   const LoadedPlugin& plugin) {
  if (library.plugins == std::vector<std::string>{plugin.name}) return "";
  std::string listed;
  for (const std::string& name : library.plugins) listed += (listed.empty() ? "" : ", ") + toml_quote(name);
  return "it registers plugin '" + plugin.name + "', but the manifest of bundle '" + bundle_name + "' lists [" +
         listed + "] for " + library.file + " (rule: the plugins a library registers must be exactly its manifest's "
         "`plugins` list). Do not use this bundle: remove it (`memplan bundle remove " + bundle_name + "`) and ask "
         "its publisher to recreate it with `memplan bundle create`";
}

}  // namespace

std::string install_bundle(const fs::path& home, const InstallRequest& request) {
  const TrustStore trust(home);
  FolderInstall install{request.source, trust, VerifyPolicy{request.allow_unsigned, true}, request.force, Origin{}, true};
  install.origin.source = display(request.source);
  return install_folder(home, install);
}

std::string install_folder(const fs::path& home, const FolderInstall& install) {
  const TrustStore& trust = install.trust;
  const VerifyPolicy& policy = install.policy;
  const InstallRequest request{install.source, policy.allow_unsigned, install.force};
  // Verified before anything is written.
  const VerifiedBundle source = verify_bundle(request.source, trust, policy);
  for (const std::string& warning : source.warnings)
    std::cerr << "memplan: warning: " << terminal_text(warning) << "\n";  // the path may hold control characters
  const Manifest& manifest = source.manifest;
  const fs::path bundles = bundles_folder(home);
  const fs::path target = bundles / manifest.name;

  std::error_code error;
  const fs::path source_real = fs::weakly_canonical(request.source, error);
  const fs::path store_real = fs::weakly_canonical(bundles, error);
  if (install.refuse_source_in_store && !error && source_real.string().rfind(store_real.string() + "/", 0) == 0)
    refuse(display(request.source) + " is inside the bundle store; install from the publisher's copy instead");

  fs::create_directories(bundles, error);
  if (error) refuse("cannot create the bundle store " + display(bundles) + ": " + error.message());
  // Held from the checks below, which read the whole store, to the rename.
  const StoreLock lock = StoreLock::acquire(home);

  // Signers are compared as verified now, never as manifest fields: an
  // unsigned bundle can copy any publisher and key id into its manifest.
  const std::string signer = source.trusted ? manifest.key_id : "";
  for (const InstalledBundle& installed : installed_bundles(home)) {
    if (!installed.manifest) continue;
    const Manifest& other = *installed.manifest;
    if (installed.folder.filename() == manifest.name) {
      if (request.force) continue;
      const std::string installed_signer = verified_signer(installed.folder, trust_for_installed(home, installed));
      if (other.publisher != manifest.publisher || installed_signer != signer)
        refuse("bundle '" + manifest.name + "' is already installed from publisher '" + other.publisher + "' (" +
               signer_identity(installed_signer) + "), and this one is from '" + manifest.publisher + "' (" +
               signer_identity(signer) + "). Nothing was changed; to replace it, pass --force, or remove it first "
               "with `memplan bundle remove " + manifest.name + "`");
      continue;
    }
    for (const LibraryEntry& library : manifest.libraries)
      for (const std::string& plugin : library.plugins)
        for (const LibraryEntry& theirs : other.libraries)
          for (const std::string& their_plugin : theirs.plugins)
            if (plugin == their_plugin)
              refuse("bundle '" + manifest.name + "' offers plugin '" + plugin + "', which installed bundle '" +
                     other.name + "' already offers (rule: plugin names are unique). Nothing was changed; remove "
                     "the other bundle first (`memplan bundle remove " + other.name + "`), or ask the publisher to "
                     "rename the plugin");
  }

  remove_stale_temporary_folders(bundles);
  // Declared in this order so the folder is removed before a deferred signal
  // is raised again (destructors run in reverse).
  const DeferredSignals signals;
  const TemporaryFolder temporary(bundles / temporary_folder_name("install-" + manifest.name));
  const fs::path& folder = temporary.path();
  fs::remove_all(folder, error);
  fs::create_directory(folder, error);
  if (error) refuse("cannot create " + display(folder) + ": " + error.message());
  // The manifest bytes that were verified, not a second read of the file.
  write_new_file(folder / kManifestFile, source.manifest_bytes, 0644);
  auto copy_and_check = [&](const std::string& file) {
    copy_into(request.source / file, folder / file);
    signals.check("the install of bundle '" + manifest.name + "'");
  };
  if (source.is_signed) copy_and_check(kSignatureFile);
  for (const LibraryEntry& library : manifest.libraries) copy_and_check(library.file);
  for (const DataEntry& data : manifest.data) copy_and_check(data.file);
  maybe_interrupt("after-copy");
  signals.check("the install of bundle '" + manifest.name + "'");

  std::string refusal;
  auto copy = try_verify_bundle(folder, trust, policy, refusal);
  if (!copy) refuse("the copy of bundle '" + manifest.name + "' in the store failed verification, so nothing was "
                    "installed (was the source changed while it was copied?): " + refusal);
  if (copy->manifest_bytes != source.manifest_bytes)
    refuse("the copy of bundle '" + manifest.name + "' in the store differs from the verified manifest, so nothing "
           "was installed; run the install again");
  Origin origin = install.origin;
  origin.installed_at = utc_now();
  origin.key_id = copy->trusted ? manifest.key_id : "";
  origin.publisher = manifest.publisher;
  write_new_file(folder / kOriginFile, write_origin(origin), 0644);
  signals.check("the install of bundle '" + manifest.name + "'");
  // After this the temporary path holds nothing, or the older version it was
  // exchanged with, which the guard removes too.
  move_into_place(folder, target);
  return "installed bundle " + manifest.name + " " + manifest.version + " from " + manifest.publisher + " (" +
         signer_text(source) + ") into " + display(target);
}

void remove_interrupted_leftovers(const fs::path& home) {
  remove_interrupted_downloads(home);
  const fs::path bundles = bundles_folder(home);
  std::error_code error;
  if (!fs::is_directory(fs::symlink_status(bundles, error))) return;  // no store: nothing to do, nothing created
  // Never waits: a command that holds the lock cleans up after itself.
  if (const auto lock = StoreLock::try_acquire(home)) remove_stale_temporary_folders(bundles);
}

std::string remove_bundle(const fs::path& home, std::string_view name) {
  const std::string bundle_name(name);
  if (!valid_bundle_name(bundle_name))
    refuse("'" + bundle_name + "' is not a bundle name (lower-case letters, digits and dashes); `memplan bundle "
           "list` shows the installed bundles");
  const fs::path bundles = bundles_folder(home);
  const fs::path target = bundles / bundle_name;
  std::error_code error;
  if (!fs::is_directory(fs::symlink_status(target, error)))
    refuse("no bundle named '" + bundle_name + "' is installed; `memplan bundle list` shows the installed bundles");
  const StoreLock lock = StoreLock::acquire(home);
  if (!fs::is_directory(fs::symlink_status(target, error)))  // removed while this command waited for the lock
    refuse("no bundle named '" + bundle_name + "' is installed; `memplan bundle list` shows the installed bundles");
  remove_stale_temporary_folders(bundles);
  // Renamed away first, so the bundle disappears at once and a crash
  // leaves only a temporary folder that the next command removes.
  const fs::path doomed = bundles / temporary_folder_name("remove-" + bundle_name);
  fs::rename(target, doomed, error);
  if (error) refuse("cannot remove " + display(target) + ": " + error.message());
  fs::remove_all(doomed, error);
  return "removed bundle " + bundle_name + " (" + display(target) + ")";
}

namespace {

// Checks 1 to 3 and 5 of an installed bundle, as load time runs them (each file is checked where it is used:
// a library right before it is opened, a catalog file on the bytes read), and that its folder is its
// manifest's name. nullopt, with `refusal` set, when it is refused.
std::optional<VerifiedBundle> verify_installed(const fs::path& home, const InstalledBundle& installed,
                                               const VerifyPolicy& policy, std::string& refusal) {
  VerifyPolicy bundle_policy = policy;
  bundle_policy.check_files = false;
  auto verified = try_verify_bundle(installed.folder, trust_for_installed(home, installed), bundle_policy, refusal);
  if (verified && verified->manifest.name != installed.folder.filename().string()) {
    refusal = "its folder " + display(installed.folder) + " does not match the manifest's name '" +
              verified->manifest.name + "'; reinstall it with `memplan bundle install`";
    verified.reset();
  }
  return verified;
}

// What a refused file of an installed bundle adds to check_file's refusal: how to repair the store.
std::string reinstall_hint(const std::string& name) {
  return ", then install it again (`memplan bundle install DIR`), or remove it (`memplan bundle remove " + name + "`)";
}

// Which catalog list a bundle's data file belongs to (docs/bundles.md, "Catalog files"): data/gpus.toml,
// data/models/NAME.toml and data/frameworks/NAME.toml, as in the built-in data folder; nullptr for any other
// data file (a scenario, a README), which the catalog never reads.
enum class CatalogKind { none, gpus, models, frameworks };
CatalogKind catalog_kind(const std::string& file) {
  if (file == "data/gpus.toml") return CatalogKind::gpus;
  const fs::path path(file);
  if (path.extension() != ".toml" || path.stem().empty() || path.stem().string()[0] == '.') return CatalogKind::none;
  if (path.parent_path() == "data/models") return CatalogKind::models;
  if (path.parent_path() == "data/frameworks") return CatalogKind::frameworks;
  return CatalogKind::none;
}

}  // namespace

std::vector<BundleLoad> load_installed_bundles(PluginRegistry& registry, const fs::path& home,
                                               const VerifyPolicy& policy) {
  std::vector<BundleLoad> loads;
  for (const InstalledBundle& installed : installed_bundles(home)) {
    BundleLoad load;
    load.folder = installed.folder;
    load.name = installed.folder.filename().string();
    // Library files are checked one by one below, right before each is opened.
    auto verified = verify_installed(home, installed, policy, load.refusal);
    if (!verified) {
      registry.add_diagnostic("installed bundle '" + load.name + "' was not loaded: " + load.refusal);
      loads.push_back(std::move(load));
      continue;
    }
    load.version = verified->manifest.version;
    load.loaded = true;
    for (const LibraryEntry& library : verified->manifest.libraries) {
      const fs::path folder = installed.folder;
      const std::string name = load.name;
      const auto check_hash = [&](const std::string&) {
        std::string refusal = check_file(folder, library.file, library.size, library.sha256);
        if (refusal.empty()) return refusal;
        return refusal + reinstall_hint(name);
      };
      const auto check_plugin = [&](const LoadedPlugin& plugin) { return check_declared_plugins(name, library, plugin); };
      const bool ok = registry.load_library((folder / library.file).string(), check_hash, check_plugin);
      if (!ok && load.loaded) {
        load.loaded = false;
        load.refusal = registry.diagnostics().back();
      }
    }
    loads.push_back(std::move(load));
  }
  return loads;
}

InstalledCatalog installed_catalog_files(bool allow_unsigned, const fs::path& home) {
  InstalledCatalog result;
  fs::path store = home;
  if (store.empty()) {
    try {
      store = memplan_home();
    } catch (const Error&) {
      return result;  // no store can be found: no bundles are installed
    }
  }
  VerifyPolicy policy;
  policy.allow_unsigned = allow_unsigned;
  for (const InstalledBundle& installed : installed_bundles(store)) {
    // Only bundles that list catalog files are read here (and warned about); the plugin loader reports the rest.
    if (!installed.manifest) continue;
    const auto lists_catalog_file = [](const DataEntry& data) { return catalog_kind(data.file) != CatalogKind::none; };
    if (std::none_of(installed.manifest->data.begin(), installed.manifest->data.end(), lists_catalog_file)) continue;
    const std::string name = installed.folder.filename().string();
    const std::string refused = "installed bundle '" + name + "' adds no GPUs, model presets or framework profiles: ";
    std::string refusal;
    const auto verified = verify_installed(store, installed, policy, refusal);
    if (!verified) {
      result.refusals.push_back(refused + refusal);
      continue;
    }
    CatalogSource source;
    source.origin = "bundle " + name + " " + verified->manifest.version;
    source.remedy = "remove the bundle (`memplan bundle remove " + name + "`)";
    std::vector<DataEntry> files = verified->manifest.data;
    std::sort(files.begin(), files.end(), [](const auto& a, const auto& b) { return a.file < b.file; });
    for (const DataEntry& data : files) {
      const CatalogKind kind = catalog_kind(data.file);
      if (kind == CatalogKind::none) continue;
      // The manifest's checks (check 4) on the file, then the same sha256 on the bytes read, so the bytes
      // checked are the bytes the catalog parses even if the file changes in between.
      refusal = check_file(installed.folder, data.file, data.size, data.sha256);
      std::string why;
      std::optional<std::string> text;
      if (refusal.empty()) {
        text = read_regular_file(installed.folder / data.file, data.size + 1, why);
        if (!text) refusal = "bundle " + display(installed.folder) + ": " + data.file + " " + why;
        else if (crypto::sha256_hex(*text) != data.sha256)
          refusal = "bundle " + display(installed.folder) + ": " + data.file + " changed while it was read";
      }
      if (!refusal.empty()) break;
      CatalogFile file{display(installed.folder / data.file), std::move(*text)};
      if (kind == CatalogKind::gpus) source.gpus = std::move(file);
      else (kind == CatalogKind::models ? source.models : source.frameworks).push_back(std::move(file));
    }
    if (!refusal.empty()) {
      result.refusals.push_back(refused + refusal + reinstall_hint(name));
      continue;
    }
    result.sources.push_back(std::move(source));
  }
  return result;
}

Catalog load_catalog_with_bundles(const fs::path& data_dir, bool allow_unsigned, std::vector<std::string>& warnings) {
  const InstalledCatalog installed = installed_catalog_files(allow_unsigned);
  for (const std::string& refusal : installed.refusals) warnings.push_back("memplan: warning: " + refusal);
  return Catalog::load(data_dir, installed.sources);
}

InstalledPackageSource installed_bundles_source(bool allow_unsigned, const fs::path& home) {
  return [allow_unsigned, home](PluginRegistry& registry) {
    fs::path store = home;
    if (store.empty()) {
      try {
        store = memplan_home();
      } catch (const Error&) {
        return std::vector<InstalledPackage>{};  // no store can be found: no bundles are installed
      }
    }
    VerifyPolicy policy;
    policy.allow_unsigned = allow_unsigned;
    std::vector<InstalledPackage> packages;
    for (BundleLoad& load : load_installed_bundles(registry, store, policy))
      packages.push_back(InstalledPackage{std::move(load.name), std::move(load.version), load.loaded,
                                          std::move(load.refusal)});
    return packages;
  };
}

}  // namespace memplan::bundle
