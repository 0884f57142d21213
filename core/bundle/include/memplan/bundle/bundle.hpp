// Bundles: signed, versioned folders of plugin libraries (docs/bundles.md).
//
// A bundle folder holds bundle.toml (the manifest: name, version, publisher,
// key id, and per file its sha256 and size), bundle.sig (an Ed25519 signature
// over the manifest's bytes) and the files the manifest lists. Every check
// runs in a fixed order (docs/bundles.md, "Checks") and each refusal says
// what failed and how to fix it. Nothing here ever relaxes a security
// setting: only the command line can pass `allow_unsigned`.
//
// Functions come in pairs where a caller may want to go on after a refusal:
// try_x() returns the refusal as text, x() throws memplan::Error.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "memplan/core/catalog.hpp"
#include "memplan/core/error.hpp"
#include "memplan/core/install_layout.hpp"
#include "memplan/core/requirement.hpp"

namespace memplan {
class PluginRegistry;
}

namespace memplan::bundle {

// Versions, requirements and the name rule are the core's (a scenario's
// [plugins] bundles entries are read with them): memplan/core/requirement.hpp.
using memplan::compare_versions;
using memplan::parse_requirement;
using memplan::parse_version;
using memplan::Requirement;
using memplan::satisfies;
using memplan::valid_bundle_name;
using memplan::Version;

// ---------------------------------------------------------------------------
// The manifest (bundle.toml).

struct LibraryEntry {
  std::string file;  // relative to the bundle folder, e.g. "lib/memplan-x.so"
  std::vector<std::string> plugins;
  uint32_t abi_major = 0;
  uint32_t abi_minor = 0;
  std::string platform;  // "linux-x86_64"
  std::string sha256;    // lower-case hex
  uint64_t size = 0;
  SourceLocation location;  // of its [[library]] table, when read from a file
};

struct DataEntry {
  std::string file;  // relative to the bundle folder, under "data/"
  std::string sha256;
  uint64_t size = 0;
  SourceLocation location;
};

struct Manifest {
  int64_t format = 1;
  std::string name;
  std::string version;
  std::string publisher;
  std::string key_id;  // "" until signed
  std::vector<LibraryEntry> libraries;
  std::vector<DataEntry> data;
};

// This build's platform, as manifests spell it: "<os>-<cpu>".
std::string host_platform();

// ---------------------------------------------------------------------------
// Where the per-user state lives: $MEMPLAN_HOME, else $XDG_DATA_HOME/memplan,
// else ~/.local/share/memplan. trust/ holds the trust store, bundles/ the
// installed bundles.
std::filesystem::path memplan_home();

struct TrustedKey {
  std::string key_id;
  std::string label;
  std::string raw_public_key;  // 32 bytes
};

// The keys whose bundles are trusted, and the keys that were removed
// (revoked): a revoked key is refused even with --allow-unsigned, and adding
// it again needs `trust add --reinstate`.
//
// A repository's key (`memplan repo add`) is not in this store: it is
// trusted only for bundles installed from that repository, through the view
// for_repository() returns, which trusts that one key (and only while the
// trust store has not revoked it) and nothing else.
class TrustStore {
 public:
  explicit TrustStore(std::filesystem::path home);
  // The view for bundles of repository `name`: its key, or no key at all
  // when `key` is nullopt (a repository that was removed).
  static TrustStore for_repository(std::filesystem::path home, const std::string& name,
                                   std::optional<TrustedKey> key);
  // "" for the trust store itself, else the repository's name.
  const std::string& repository() const { return repository_; }
  const std::filesystem::path& folder() const { return folder_; }
  std::vector<TrustedKey> trusted() const;  // sorted by key id
  std::optional<TrustedKey> find(std::string_view key_id) const;
  bool revoked(std::string_view key_id) const;
  std::vector<std::string> revoked_ids() const;
  // Each returns a line for the user; throws Error with the fix on refusal.
  std::string add(const std::filesystem::path& public_key_pem, const std::string& label, bool reinstate);
  std::string remove(std::string_view key_id);

 private:
  std::filesystem::path folder_;
  std::string repository_;               // non-empty: a repository's view
  std::optional<TrustedKey> repository_key_;
};

// ---------------------------------------------------------------------------
// Verification, in the order docs/bundles.md lists.

struct VerifyPolicy {
  bool allow_unsigned = false;  // only ever set from the command line
  bool check_files = true;      // sizes and sha256 of every listed file
};

struct VerifiedBundle {
  std::filesystem::path folder;
  Manifest manifest;
  std::string manifest_bytes;
  bool is_signed = false;
  bool trusted = false;      // signed by a key in the trust store
  std::string signer_label;  // that key's label
  std::vector<std::string> warnings;
};

VerifiedBundle verify_bundle(const std::filesystem::path& folder, const TrustStore& trust, const VerifyPolicy& policy);
std::optional<VerifiedBundle> try_verify_bundle(const std::filesystem::path& folder, const TrustStore& trust,
                                                const VerifyPolicy& policy, std::string& refusal);

// Who vouches for the bundle in `folder` now: the id of the trusted key whose
// signature over bundle.toml verifies against the current trust store, or ""
// when none does (unsigned, an untrusted or revoked key, a bad signature, a
// bundle that fails verification). Never read from manifest fields alone,
// which anyone can copy into an unsigned bundle.
std::string verified_signer(const std::filesystem::path& folder, const TrustStore& trust);

// ---------------------------------------------------------------------------
// Authoring: keys, bundle folders, signatures.

struct KeygenResult {
  std::filesystem::path private_key;
  std::filesystem::path public_key;
  std::string key_id;
};
// Writes an Ed25519 private key PEM (mode 0600) at `private_key` and the
// public key PEM beside it; refuses to overwrite either.
KeygenResult generate_key(const std::filesystem::path& private_key);
std::filesystem::path public_key_path_for(const std::filesystem::path& private_key);

struct CreateRequest {
  std::filesystem::path folder;
  std::string name;
  std::string version;
  std::string publisher;
  std::vector<std::filesystem::path> libraries;
  std::optional<std::filesystem::path> data;
};
// Builds an unsigned bundle folder; each library is loaded with the plugin
// registry's checks to read its plugin names and ABI.
Manifest create_bundle(const CreateRequest& request);

// Writes the key's id into the manifest, then signs the manifest's bytes.
// Returns the key id.
std::string sign_bundle(const std::filesystem::path& folder, const std::filesystem::path& private_key);

// ---------------------------------------------------------------------------
// The store of installed bundles.

struct Origin {
  std::string source;        // a folder, or the archive's URL
  std::string installed_at;  // UTC, ISO 8601
  std::string key_id;        // the trusted key that verified it at install; "" when none did
  std::string publisher;
  std::string repository;    // the repository it came from (`memplan repo`); "" for a folder
  std::string pinned;        // the version `install NAME@VERSION` pinned; "" when not pinned
};

struct InstalledBundle {
  std::filesystem::path folder;
  std::optional<Manifest> manifest;  // nullopt when its manifest cannot be read
  std::optional<Origin> origin;
  bool has_signature = false;  // a bundle.sig is present (verified_signer() says whether it vouches)
  std::string problem;  // why the manifest or origin could not be read
};

std::filesystem::path bundles_folder(const std::filesystem::path& home);
std::vector<InstalledBundle> installed_bundles(const std::filesystem::path& home);  // sorted by name
// The keys that vouch for an installed bundle: its repository's key when it
// came from a repository (none once that repository is removed), else the
// trust store.
TrustStore trust_for_installed(const std::filesystem::path& home, const InstalledBundle& installed);

struct InstallRequest {
  std::filesystem::path source;
  bool allow_unsigned = false;
  bool force = false;  // replace a bundle of the same name from another publisher or verified signer
};
// Verifies, copies into a temporary folder inside the store, verifies the
// copy, records its origin and renames it into place. Returns a line for the user.
std::string install_bundle(const std::filesystem::path& home, const InstallRequest& request);
std::string remove_bundle(const std::filesystem::path& home, std::string_view name);
// Removes what interrupted installs and removals left in the store (their
// temporary folders; see docs/bundles.md) unless another command holds the
// store lock; never waits. `bundle list` calls it; install and remove clean
// up under their own lock.
void remove_interrupted_leftovers(const std::filesystem::path& home);

// ---------------------------------------------------------------------------
// Repositories (docs/bundles.md, "Repositories"): a folder of bundle archives
// and an index.toml, served over HTTP or HTTPS, whose one key is trusted only
// for the bundles installed from it.

struct Repository {
  std::string name;
  std::string url;  // http:// or https://, without a trailing '/'
  std::string key_id;
  std::string raw_public_key;  // 32 bytes
  std::string added_at;
};

// <home>/repositories/<name>.toml
std::vector<Repository> repositories(const std::filesystem::path& home);  // sorted by name
std::optional<Repository> find_repository(const std::filesystem::path& home, std::string_view name);
// Each returns a line for the user; throws Error with the fix on refusal.
std::string add_repository(const std::filesystem::path& home, const std::string& name, const std::string& url,
                           const std::filesystem::path& public_key_pem);
std::string remove_repository(const std::filesystem::path& home, std::string_view name);

// One archive of a repository's index.toml.
struct IndexEntry {
  std::string name;
  std::string version;
  std::string platform;
  std::string publisher;
  std::string archive;  // relative to the repository's URL or folder
  std::string sha256;
  uint64_t size = 0;
};
struct RepositoryIndex {
  std::string key_id;  // the key that signs every bundle of the repository; "" while it is empty
  std::vector<IndexEntry> entries;  // sorted by name, version, platform
};
// Throws Error at `display_path`:line:column (a URL or a file).
RepositoryIndex parse_index(std::string_view text, const std::string& display_path);
std::string write_index(const RepositoryIndex& index);

struct PublishRequest {
  std::filesystem::path bundle;      // a signed bundle folder
  std::filesystem::path repository;  // the static folder a web server serves
};
// Verifies the bundle, packs it into one archive under <repository>/bundles/
// and adds it to <repository>/index.toml (written whole, then renamed).
std::string publish_bundle(const std::filesystem::path& home, const PublishRequest& request);

struct RepositoryInstallRequest {
  std::string name;
  std::string version;     // "" for the newest; else pinned to exactly this version
  std::string repository;  // "" searches every repository
  bool upgrade = false;    // look for a newer version even when one is installed, and drop a pin
  bool keep_pinned = false;  // `bundle upgrade`: leave a pinned bundle as it is
  bool force = false;
};
// Installs from a repository: with the bundle already installed (and no
// upgrade or other version asked for) nothing is fetched, so this works
// offline. Else fetches the index, downloads the archive into
// <home>/downloads/, checks its size and sha256 against the index, unpacks it,
// checks that the repository's own key signed it, and installs it as
// install_bundle() does. Returns a line for the user.
std::string install_from_repository(const std::filesystem::path& home, const RepositoryInstallRequest& request);

// ---------------------------------------------------------------------------
// Load time.

struct BundleLoad {
  std::string name;
  std::string version;
  std::filesystem::path folder;
  bool loaded = false;  // passed the bundle checks (its libraries then went to the registry)
  std::string refusal;  // why not
};
// Verifies every installed bundle (manifest signature against the trust
// store, platform, ABI) and loads its libraries into `registry`, re-checking
// each library's size and sha256 right before it is opened, and requiring
// that it registers exactly the plugins its manifest lists before any of them
// takes its name. A refused bundle
// or library becomes a registry diagnostic; the others stay usable.
std::vector<BundleLoad> load_installed_bundles(PluginRegistry& registry, const std::filesystem::path& home,
                                               const VerifyPolicy& policy);

// The catalog files of the installed bundles, as Catalog::load takes them (docs/bundles.md, "Catalog files"):
// data/gpus.toml, data/models/*.toml and data/frameworks/*.toml of every bundle that load time accepts (the
// checks and trust rules of load_installed_bundles; `allow_unsigned` only from the command line), each file's
// size and sha256 checked against the manifest on the bytes read. A refused bundle, or one with a file that
// fails its check, adds nothing and has its refusal (a sentence naming the file and the fix) in `refusals`.
// `home` empty: memplan_home(), and no bundles when no store can be found.
struct InstalledCatalog {
  std::vector<CatalogSource> sources;  // one per bundle, in name order
  std::vector<std::string> refusals;
};
InstalledCatalog installed_catalog_files(bool allow_unsigned, const std::filesystem::path& home = {});

// The catalog every command reads: `data_dir`'s files and then the installed bundles'
// (installed_catalog_files). Each refused bundle adds a "memplan: warning: ..." line to `warnings`.
Catalog load_catalog_with_bundles(const std::filesystem::path& data_dir, bool allow_unsigned,
                                  std::vector<std::string>& warnings);

// The installed bundles as the core's plugin loader takes them
// (PluginLoadOptions::installed). `home` empty: memplan_home(), and when no
// store can be found (no MEMPLAN_HOME, no HOME) no bundle is installed.
// `allow_unsigned` only from the command line (--allow-unsigned).
InstalledPackageSource installed_bundles_source(bool allow_unsigned, const std::filesystem::path& home = {});

}  // namespace memplan::bundle
