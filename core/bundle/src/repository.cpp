// Bundle repositories (docs/bundles.md, "Repositories"): the records of
// `memplan repo add`, the index a repository serves, `bundle publish` (which
// writes a repository folder) and installs by name.
//
// An install by name runs in this order, and writes nothing to the store
// before the last step:
//   1. the installed copy answers when it satisfies the request (offline);
//   2. each repository's index.toml: at most 4 MiB, parsed strictly, its
//      key_id the key the repository was added with;
//   3. the newest version for this platform, or the pinned one;
//   4. the archive, into <home>/downloads/.tmp-<pid>-<name>/: at most the
//      size the index lists, then its size and sha256 checked against the index;
//   5. unpacked (archive.hpp), its bundle.sig made with the repository's key;
//   6. the bundle checks against that key alone, and the manifest's name,
//      version and platform those of the index entry;
//   7. installed as `bundle install DIR` installs (install.cpp), its origin
//      recording the repository and the pin.
// The download folder goes whatever happens (its guard, and SIGINT, SIGTERM
// and SIGHUP deferred until it is gone); a crash's leftover is removed by the
// next install from a repository or `bundle list`.
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <set>

#include "archive.hpp"
#include "crypto.hpp"
#include "http.hpp"
#include "install.hpp"
#include "manifest.hpp"
#include "store.hpp"
#include "verify.hpp"
#include "common/toml_guard.hpp"
#include "common/toml_reader.hpp"

namespace memplan::bundle {
namespace fs = std::filesystem;

namespace {

constexpr const char* kIndexFile = "index.toml";
constexpr size_t kMaxIndexBytes = 4u << 20;
constexpr size_t kMaxIndexEntries = 10000;
constexpr uint64_t kMaxArchiveBytes = uint64_t{1} << 32;  // 4 GiB: far above any plugin bundle
constexpr size_t kMaxRecordBytes = 64 * 1024;
constexpr size_t kMaxPublisher = 128;
constexpr long kIndexTimeoutSeconds = 60;

fs::path repositories_folder(const fs::path& home) { return home / "repositories"; }
fs::path downloads_folder(const fs::path& home) { return home / "downloads"; }

bool is_hex(std::string_view text, size_t length) {
  if (text.size() != length) return false;
  for (char c : text)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

bool printable(std::string_view text) {
  for (unsigned char c : text)
    if (c < 0x20 || c == 0x7f) return false;
  return true;
}

// Archive paths go into URLs as they are, so they keep to characters that
// need no escaping.
bool url_safe_path(std::string_view path) {
  for (char c : path)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '-' ||
          c == '_' || c == '/'))
      return false;
  return true;
}

std::string strip_trailing_slashes(std::string url) {
  while (url.size() > 1 && url.back() == '/') url.pop_back();
  return url;
}

std::string joined(const std::vector<std::string>& items, const std::string& separator = ", ") {
  std::string text;
  for (const std::string& item : items) text += (text.empty() ? "" : separator) + item;
  return text;
}

std::optional<Repository> read_record(const fs::path& file, std::string& why) {
  auto text = read_regular_file(file, kMaxRecordBytes, why);
  if (!text) return std::nullopt;
  try {
    const toml::table root = parse_toml(*text, file.string());
    TomlReader reader(root, file.string(), "the repository record");
    Repository repository{reader.string("name").value_or(""), reader.string("url").value_or(""),
                          reader.string("key_id").value_or(""), "", reader.string("added_at").value_or("")};
    auto raw = crypto::from_hex(reader.string("public_key").value_or(""));
    if (repository.name != file.stem().string() || !http::valid_url(repository.url) || !raw ||
        raw->size() != crypto::kPublicKeyBytes || crypto::key_id(*raw) != repository.key_id) {
      why = "is not a repository record written by `memplan repo add`";
      return std::nullopt;
    }
    repository.raw_public_key = *raw;
    return repository;
  } catch (const toml::parse_error&) {
    why = "is not valid TOML";
  } catch (const Error& error) {
    why = error.what();
  }
  return std::nullopt;
}

std::string write_record(const Repository& repository) {
  return "# A bundle repository, added by `memplan repo add`. Its key is trusted only for bundles\n"
         "# installed from it (docs/bundles.md, \"Repositories\").\n"
         "name = " + toml_quote(repository.name) + "\n"
         "url = " + toml_quote(repository.url) + "\n"
         "key_id = " + toml_quote(repository.key_id) + "\n"
         "public_key = " + toml_quote(crypto::to_hex(repository.raw_public_key)) + "\n"
         "added_at = " + toml_quote(repository.added_at) + "\n";
}

const toml::node& required(const TomlReader& reader, const toml::table& table, std::string_view key,
                           const std::string& fix) {
  const toml::node* node = table.get(key);
  if (node == nullptr)
    fail_at(reader.table_location(), "in " + reader.section() + ", '" + std::string(key) + "' is missing; " + fix);
  return *node;
}

std::string required_string(const TomlReader& reader, const toml::table& table, std::string_view key,
                            const std::string& fix) {
  required(reader, table, key, fix);
  return *reader.string(key);
}

bool entry_before(const IndexEntry& a, const IndexEntry& b) {
  if (a.name != b.name) return a.name < b.name;
  const int order = compare_versions(*parse_version(a.version), *parse_version(b.version));
  if (order != 0) return order < 0;
  return a.platform < b.platform;
}

bool same_release(const IndexEntry& a, const IndexEntry& b) {
  return a.name == b.name && a.platform == b.platform &&
         compare_versions(*parse_version(a.version), *parse_version(b.version)) == 0;
}

// An exclusive flock(2) on <folder>/.publish.lock for one publish: two
// publishes into one folder would otherwise each write the index without
// the other's entry.
class PublishLock {
 public:
  explicit PublishLock(const fs::path& folder) {
    const fs::path file = folder / ".publish.lock";
    fd_ = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd_ < 0) refuse("cannot lock the repository folder: cannot open " + display(file) + ": " + std::strerror(errno));
    while (::flock(fd_, LOCK_EX) != 0)
      if (errno != EINTR) refuse("cannot lock " + display(file) + ": " + std::strerror(errno));
  }
  PublishLock(const PublishLock&) = delete;
  PublishLock& operator=(const PublishLock&) = delete;
  ~PublishLock() { ::close(fd_); }

 private:
  int fd_ = -1;
};

}  // namespace

// ---------------------------------------------------------------------------
// Repository records.

std::vector<Repository> repositories(const fs::path& home) {
  std::vector<Repository> found;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(repositories_folder(home), error)) {
    if (entry.path().extension() != ".toml" || !valid_bundle_name(entry.path().stem().string())) continue;
    std::string why;
    if (auto repository = read_record(entry.path(), why)) found.push_back(std::move(*repository));
  }
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  return found;
}

std::optional<Repository> find_repository(const fs::path& home, std::string_view name) {
  if (!valid_bundle_name(name)) return std::nullopt;  // never a path
  std::string why;
  return read_record(repositories_folder(home) / (std::string(name) + ".toml"), why);
}

std::string add_repository(const fs::path& home, const std::string& name, const std::string& given_url,
                           const fs::path& public_key_pem) {
  if (!valid_bundle_name(name))
    refuse("'" + name + "' is not a repository name (rule: 1 to 64 lower-case letters, digits and dashes, starting "
           "with a letter); pick another, e.g. `memplan repo add team-plugins URL --key PUBKEY.pem`");
  const std::string url = strip_trailing_slashes(given_url);
  if (!http::valid_url(url))
    refuse("'" + given_url + "' is not an http:// or https:// URL; memplan fetches repositories from web servers "
           "only. Serve the folder `memplan bundle publish` wrote with any web server and add its URL");
  std::string why;
  auto pem = read_regular_file(public_key_pem, kMaxRecordBytes, why);
  if (!pem) refuse("cannot read the public key " + display(public_key_pem) + ": it " + why);
  auto raw = crypto::public_key_from_pem(*pem, why);
  if (!raw) refuse(display(public_key_pem) + " is not an Ed25519 public key: " + why);
  const std::string id = crypto::key_id(*raw);
  const TrustStore trust(home);
  if (trust.revoked(id))
    refuse("key " + id + " was revoked (`memplan trust remove`), so repository '" + name + "' cannot use it. If you "
           "trust the key again, run `memplan trust add " + public_key_pem.string() + " --reinstate` first");
  if (auto existing = find_repository(home, name))
    refuse("repository '" + name + "' is already added (" + existing->url + ", key " + existing->key_id +
           "); to change it, remove it first with `memplan repo remove " + name + "`");
  const fs::path folder = repositories_folder(home);
  std::error_code error;
  fs::create_directories(folder, error);
  if (error) refuse("cannot create " + display(folder) + ": " + error.message());
  const Repository repository{name, url, id, *raw, utc_now()};
  // Written whole beside its place, then linked in: link(2) never replaces a
  // file, so two `repo add` of one name cannot overwrite each other.
  const fs::path file = folder / (name + ".toml");
  const fs::path temporary = folder / (".tmp-" + std::to_string(::getpid()) + "-" + name + ".toml");
  fs::remove(temporary, error);
  write_new_file(temporary, write_record(repository), 0644);
  const int linked = ::link(temporary.c_str(), file.c_str());
  const int saved = errno;
  fs::remove(temporary, error);
  if (linked != 0)
    refuse("cannot add repository '" + name + "' at " + display(file) + ": " + std::strerror(saved) +
           (saved == EEXIST ? "; it was added meanwhile (`memplan repo list`)" : ""));
  return "added repository " + name + " (" + url + "); its key " + id + " is trusted only for bundles installed "
         "from it: `memplan bundle install NAME --repo " + name + "`";
}

std::string remove_repository(const fs::path& home, std::string_view given_name) {
  const std::string name(given_name);
  const auto repository = find_repository(home, name);
  if (!repository)
    refuse("no repository named '" + name + "' is added; `memplan repo list` shows the repositories");
  std::error_code error;
  fs::remove(repositories_folder(home) / (name + ".toml"), error);
  if (error) refuse("cannot remove " + display(repositories_folder(home) / (name + ".toml")) + ": " + error.message());
  std::vector<std::string> stranded;
  for (const InstalledBundle& installed : installed_bundles(home))
    if (installed.origin && installed.origin->repository == name) stranded.push_back(installed.folder.filename());
  std::string text = "removed repository " + name + " (" + repository->url + ")";
  if (!stranded.empty())
    text += "; no key vouches any more for the bundles installed from it (" + joined(stranded) +
            "), so they are refused at load: remove them with `memplan bundle remove NAME`, or add the repository "
            "again";
  return text;
}

// ---------------------------------------------------------------------------
// The index.

RepositoryIndex parse_index(std::string_view text, const std::string& display_path) {
  const std::string fix = "a repository's index.toml is written by `memplan bundle publish`; ask its maintainers to "
                          "publish again";
  toml::table root;
  try {
    root = parse_toml(text, display_path);
  } catch (const toml::parse_error& error) {
    fail_at(location_of(display_path, error.source()), "invalid TOML: " + std::string(error.description()) + "; " + fix);
  }
  TomlReader reader(root, display_path, "the index's top level");
  reader.reject_unknown_keys({"format", "key_id", "bundle"});
  required(reader, root, "format", fix);
  const int64_t format = *reader.integer("format");
  if (format != 1)
    reader.fail_key("format", "is " + std::to_string(format) + ", but this memplan reads index format 1; upgrade memplan");
  RepositoryIndex index;
  index.key_id = reader.string("key_id").value_or("");
  if (!index.key_id.empty() && !is_hex(index.key_id, 16))
    reader.fail_key("key_id", "must be \"\" or 16 lower-case hexadecimal digits");
  const toml::node* node = root.get("bundle");
  if (node == nullptr) return index;
  if (!node->is_array_of_tables()) reader.fail_key("bundle", "must be an array of tables ([[bundle]])");
  if (node->as_array()->size() > kMaxIndexEntries)
    reader.fail_key("bundle", "lists more than " + std::to_string(kMaxIndexEntries) + " archives");
  size_t number = 0;
  for (const toml::node& element : *node->as_array()) {
    const toml::table& table = *element.as_table();
    TomlReader entry_reader(table, display_path, "[[bundle]] #" + std::to_string(++number));
    entry_reader.reject_unknown_keys({"name", "version", "platform", "publisher", "archive", "sha256", "size"});
    IndexEntry entry;
    entry.name = required_string(entry_reader, table, "name", fix);
    if (!valid_bundle_name(entry.name)) entry_reader.fail_key("name", "'" + entry.name + "' is not a bundle name");
    entry.version = required_string(entry_reader, table, "version", fix);
    if (!parse_version(entry.version))
      entry_reader.fail_key("version", "'" + entry.version + "' is not a version (1 to 4 numbers separated by dots)");
    entry.platform = required_string(entry_reader, table, "platform", fix);
    if (entry.platform.empty() || entry.platform.size() > 64 || !printable(entry.platform))
      entry_reader.fail_key("platform", "must be a platform name such as \"" + host_platform() + "\"");
    entry.publisher = required_string(entry_reader, table, "publisher", fix);
    if (entry.publisher.empty() || entry.publisher.size() > kMaxPublisher || !printable(entry.publisher))
      entry_reader.fail_key("publisher", "must be 1 to 128 printable characters");
    entry.archive = required_string(entry_reader, table, "archive", fix);
    if (auto why = path_escape_reason(entry.archive))
      entry_reader.fail_key("archive", "'" + entry.archive + "' " + *why + "; it must be a path inside the repository");
    if (!url_safe_path(entry.archive))
      entry_reader.fail_key("archive", "'" + entry.archive + "' may hold only letters, digits, '.', '-', '_' and '/'");
    entry.sha256 = required_string(entry_reader, table, "sha256", fix);
    if (!is_hex(entry.sha256, 64)) entry_reader.fail_key("sha256", "must be 64 lower-case hexadecimal digits");
    required(entry_reader, table, "size", fix);
    const int64_t size = *entry_reader.integer("size");
    if (size < 1 || static_cast<uint64_t>(size) > kMaxArchiveBytes)
      entry_reader.fail_key("size", "must be between 1 and " + std::to_string(kMaxArchiveBytes) + " bytes");
    entry.size = static_cast<uint64_t>(size);
    for (const IndexEntry& earlier : index.entries)
      if (same_release(earlier, entry))
        fail_at(entry_reader.table_location(), "bundle '" + entry.name + "' version " + entry.version + " for " +
                                                   entry.platform + " is listed twice; " + fix);
    index.entries.push_back(std::move(entry));
  }
  std::sort(index.entries.begin(), index.entries.end(), entry_before);
  return index;
}

std::string write_index(const RepositoryIndex& index) {
  std::string text =
      "# memplan bundle repository index (docs/bundles.md, \"Repositories\"), written by `memplan bundle publish`.\n"
      "# Not signed: each archive's sha256 is checked, and each bundle's own signature with the repository's key.\n"
      "format = 1\n"
      "key_id = " + toml_quote(index.key_id) + "\n";
  for (const IndexEntry& entry : index.entries)
    text += "\n[[bundle]]\n"
            "name = " + toml_quote(entry.name) + "\n"
            "version = " + toml_quote(entry.version) + "\n"
            "platform = " + toml_quote(entry.platform) + "\n"
            "publisher = " + toml_quote(entry.publisher) + "\n"
            "archive = " + toml_quote(entry.archive) + "\n"
            "sha256 = " + toml_quote(entry.sha256) + "\n"
            "size = " + std::to_string(entry.size) + "\n";
  return text;
}

// ---------------------------------------------------------------------------
// Publishing.

std::string publish_bundle(const fs::path& home, const PublishRequest& request) {
  // Every check an install runs that needs no key; the signature itself is
  // checked too when the signing key is in this user's trust store.
  const TrustStore trust(home);
  const VerifiedBundle bundle = verify_bundle(request.bundle, trust, VerifyPolicy{true, true});
  const std::string shown = display(request.bundle);
  if (!bundle.is_signed)
    refuse("bundle " + shown + " is not signed; a repository serves signed bundles only, which installers check "
           "against the repository's key. Sign it first with `memplan bundle sign " + shown + " --key KEYFILE`");
  const Manifest& manifest = bundle.manifest;
  const std::string platform = manifest.libraries.front().platform;
  for (const LibraryEntry& library : manifest.libraries)
    if (library.platform != platform)
      refuse("bundle " + shown + " mixes platforms (" + platform + " and " + library.platform + "); a repository "
             "lists one archive per platform, so make one bundle per platform");

  const fs::path& folder = request.repository;
  std::error_code error;
  fs::create_directories(folder, error);
  if (error) refuse("cannot create the repository folder " + display(folder) + ": " + error.message());
  const PublishLock lock(folder);

  const fs::path index_path = folder / kIndexFile;
  RepositoryIndex index;
  if (fs::exists(fs::symlink_status(index_path, error))) {
    std::string why;
    auto text = read_regular_file(index_path, kMaxIndexBytes, why);
    if (!text) refuse(display(index_path) + " " + why + "; a repository's index is a regular file of at most 4 MiB");
    index = parse_index(*text, display(index_path));
  }
  if (!index.key_id.empty() && index.key_id != manifest.key_id)
    refuse("the repository " + display(folder) + " serves bundles signed by key " + index.key_id + ", and bundle " +
           shown + " is signed by key " + manifest.key_id + ". A repository has one key, the one its users add with "
           "`memplan repo add`; sign the bundle with that key, or publish it to a repository folder of its own");

  IndexEntry entry;
  entry.name = manifest.name;
  entry.version = manifest.version;
  entry.platform = platform;
  entry.publisher = manifest.publisher;
  entry.archive = "bundles/" + manifest.name + "/" + manifest.name + "-" + manifest.version + "-" + platform +
                  kArchiveExtension;
  if (!url_safe_path(entry.archive))
    refuse("bundle " + shown + " is for platform '" + platform + "', which cannot be part of an archive's name (only "
           "letters, digits, '.', '-' and '_'); recreate it with `memplan bundle create` on that platform");

  // The archive: written beside its place, then renamed, so a reader never
  // sees half of one.
  const fs::path archive = folder / entry.archive;
  fs::create_directories(archive.parent_path(), error);
  if (error) refuse("cannot create " + display(archive.parent_path()) + ": " + error.message());
  const fs::path temporary = archive.parent_path() / temporary_folder_name(archive.filename().string());
  fs::remove(temporary, error);
  std::vector<std::string> files{kManifestFile, kSignatureFile};
  for (const LibraryEntry& library : manifest.libraries) files.push_back(library.file);
  for (const DataEntry& data : manifest.data) files.push_back(data.file);
  try {
    write_archive(request.bundle, files, temporary);
    std::string why;
    auto sha = crypto::sha256_file_hex(temporary, why);
    if (!sha) refuse("cannot hash " + display(temporary) + ": " + why);
    entry.sha256 = *sha;
    entry.size = fs::file_size(temporary);
    if (entry.size > kMaxArchiveBytes)
      refuse("bundle " + shown + " packs into " + std::to_string(entry.size) + " bytes, more than the " +
             std::to_string(kMaxArchiveBytes) + " a repository archive may hold");
    for (const IndexEntry& existing : index.entries) {
      if (!same_release(existing, entry)) continue;
      if (existing.sha256 == entry.sha256 && existing.archive == entry.archive && fs::exists(archive)) {
        fs::remove(temporary, error);
        return "bundle " + entry.name + " " + entry.version + " for " + platform + " is already published in " +
               display(folder) + " with the same content; nothing changed";
      }
      refuse("the repository " + display(folder) + " already publishes bundle '" + entry.name + "' version " +
             existing.version + " for " + platform + " with other content (sha256 " + existing.sha256 + "). A "
             "published version never changes, so that installers and their caches agree on it: publish a new "
             "version (`memplan bundle create ... --version NEWER`)");
    }
    fs::rename(temporary, archive, error);
    if (error) refuse("cannot move the archive to " + display(archive) + ": " + error.message());
  } catch (...) {
    fs::remove(temporary, error);
    throw;
  }
  index.key_id = manifest.key_id;
  index.entries.push_back(entry);
  std::sort(index.entries.begin(), index.entries.end(), entry_before);
  write_file_atomically(index_path, write_index(index));
  return "published bundle " + entry.name + " " + entry.version + " for " + platform + " to " + display(folder) +
         " (" + entry.archive + ", sha256 " + entry.sha256 + "); serve the folder with any web server, and users add "
         "it with `memplan repo add NAME URL --key PUBKEY.pem`";
}

// ---------------------------------------------------------------------------
// Installing by name.

namespace {

struct Candidate {
  Repository repository;
  IndexEntry entry;
};

std::string installed_from(const InstalledBundle& installed) {
  if (!installed.origin) return "of unknown origin";
  if (!installed.origin->repository.empty()) return "from repository " + installed.origin->repository;
  return "from " + installed.origin->source;
}

// Who holds `key_id`, for a refusal: another repository, the trust store, or nobody known.
std::string key_owner(const fs::path& home, const std::string& key_id, const std::string& except) {
  for (const Repository& repository : repositories(home))
    if (repository.name != except && repository.key_id == key_id) return "the key of repository '" + repository.name + "'";
  if (auto key = TrustStore(home).find(key_id)) return "a key of your trust store (" + key->label + ")";
  return "a key no repository of yours uses";
}

// Records or drops the pin of an installed bundle: origin.toml is rewritten
// whole (it is a record, not signed), under the store lock.
void record_pin(const fs::path& home, const InstalledBundle& installed, const std::string& pin) {
  const StoreLock lock = StoreLock::acquire(home);
  std::string why;
  auto origin = read_origin(installed.folder, why);
  if (!origin) refuse("cannot update the pin of " + display(installed.folder) + ": " + why);
  origin->pinned = pin;
  write_file_atomically(installed.folder / kOriginFile, write_origin(*origin));
}

}  // namespace

std::string install_from_repository(const fs::path& home, const RepositoryInstallRequest& request) {
  const std::string& name = request.name;
  if (!valid_bundle_name(name))
    refuse("'" + name + "' is not a bundle name (lower-case letters, digits and dashes, starting with a letter); "
           "write NAME or NAME@VERSION, e.g. acme-optimizers@1.2.0");
  std::optional<Version> pinned;
  if (!request.version.empty()) {
    pinned = parse_version(request.version);
    if (!pinned)
      refuse("'" + request.version + "' is not a version (1 to 4 numbers separated by dots); write " + name +
             "@1.2.0, or leave the version out for the newest");
  }
  if (!request.repository.empty() && !find_repository(home, request.repository))
    refuse("no repository named '" + request.repository + "' is added; `memplan repo list` shows the repositories, "
           "`memplan repo add NAME URL --key PUBKEY.pem` adds one");

  // 1. The installed copy is the cache: no network when it answers the request.
  std::optional<InstalledBundle> installed;
  for (InstalledBundle& bundle : installed_bundles(home))
    if (bundle.folder.filename() == name && bundle.manifest) installed = std::move(bundle);
  const Origin* origin = installed && installed->origin ? &*installed->origin : nullptr;
  if (installed) {
    const std::string& version = installed->manifest->version;
    const bool same_repository = request.repository.empty() || (origin && origin->repository == request.repository);
    if (request.keep_pinned && origin && !origin->pinned.empty())
      return "bundle " + name + " is pinned at " + origin->pinned + " (installed as " + name + "@" + origin->pinned +
             "), so it stays; `memplan bundle install " + name + " --upgrade` moves it to the newest version";
    if (!request.upgrade && same_repository &&
        (!pinned || compare_versions(*parse_version(version), *pinned) == 0)) {
      std::string pin_note;
      if (pinned && origin && !origin->repository.empty() && origin->pinned != version) {
        record_pin(home, *installed, version);
        pin_note = ", and is pinned at " + version + " now";
      }
      return "bundle " + name + " " + version + " is already installed (" + installed_from(*installed) + ")" +
             pin_note + "; nothing was downloaded. `memplan bundle install " + name + " --upgrade` looks for a newer "
             "version";
    }
  }

  // 2-3. The indexes, and the archive to install.
  std::vector<Repository> sources;
  if (!request.repository.empty()) sources.push_back(*find_repository(home, request.repository));
  else sources = repositories(home);
  if (sources.empty())
    refuse("no bundle repository is added, so bundle '" + name + "' cannot be found by name; add one with `memplan "
           "repo add NAME URL --key PUBKEY.pem`, or install a bundle folder with `memplan bundle install DIR`");
  std::vector<Candidate> candidates;
  std::vector<std::string> problems;
  std::set<std::string> other_platforms;
  std::set<std::string> other_versions;
  for (const Repository& repository : sources) {
    const std::string index_url = repository.url + "/" + kIndexFile;
    std::string body;
    http::Limits limits;
    limits.max_bytes = kMaxIndexBytes;
    limits.total_timeout_seconds = kIndexTimeoutSeconds;
    if (std::string why = http::get(index_url, limits, body); !why.empty()) {
      problems.push_back("repository '" + repository.name + "': cannot download " + index_url + ": " + why);
      continue;
    }
    RepositoryIndex index;
    try {
      index = parse_index(body, index_url);
    } catch (const Error& error) {
      std::string text = error.what();
      problems.push_back("repository '" + repository.name + "': " + text);
      continue;
    }
    if (!index.key_id.empty() && index.key_id != repository.key_id) {
      problems.push_back("repository '" + repository.name + "': " + index_url + " says its bundles are signed by key " +
                         index.key_id + ", but you added the repository with key " + repository.key_id +
                         " (if its key changed, `memplan repo remove " + repository.name + "` and add it again with "
                         "the new public key)");
      continue;
    }
    for (const IndexEntry& entry : index.entries) {
      if (entry.name != name) continue;
      if (entry.platform != host_platform()) {
        other_platforms.insert(entry.platform);
        continue;
      }
      if (pinned && compare_versions(*parse_version(entry.version), *pinned) != 0) {
        other_versions.insert(entry.version);
        continue;
      }
      candidates.push_back(Candidate{repository, entry});
    }
  }
  if (candidates.empty()) {
    std::string text = "no repository offers bundle '" + name + "'" + (pinned ? " version " + request.version : "") +
                       " for " + host_platform();
    if (!other_versions.empty())
      text += " (versions offered: " + joined({other_versions.begin(), other_versions.end()}) + ")";
    if (!other_platforms.empty())
      text += " (platforms offered: " + joined({other_platforms.begin(), other_platforms.end()}) + ")";
    if (!problems.empty()) text += "; " + joined(problems, "; ");
    refuse(text + ". Nothing was installed; `memplan repo list` shows the repositories searched");
  }
  std::set<std::string> offering;
  for (const Candidate& candidate : candidates) offering.insert("'" + candidate.repository.name + "'");
  if (offering.size() > 1)
    refuse("bundle '" + name + "' is offered by repositories " + joined({offering.begin(), offering.end()}, " and ") +
           "; choose one with --repo NAME (each repository's key vouches only for its own bundles)");
  const Candidate* chosen = &candidates.front();
  for (const Candidate& candidate : candidates)
    if (compare_versions(*parse_version(candidate.entry.version), *parse_version(chosen->entry.version)) > 0)
      chosen = &candidate;
  const Repository& repository = chosen->repository;
  const IndexEntry& entry = chosen->entry;
  if (installed && !pinned && origin && origin->repository == repository.name &&
      compare_versions(*parse_version(installed->manifest->version), *parse_version(entry.version)) >= 0) {
    const bool unpin = !origin->pinned.empty();
    if (unpin) record_pin(home, *installed, "");
    return "bundle " + name + " " + installed->manifest->version + " from repository " + repository.name +
           " is the newest version for " + host_platform() + (unpin ? " (no longer pinned)" : "") +
           "; nothing was downloaded";
  }

  // 4. The archive, into the download area: verified before the store sees it.
  const fs::path downloads = downloads_folder(home);
  std::error_code error;
  fs::create_directories(downloads, error);
  if (error) refuse("cannot create the download folder " + display(downloads) + ": " + error.message());
  remove_stale_temporary_folders(downloads);
  const std::string what = "the download of bundle '" + name + "' " + entry.version;
  const DeferredSignals signals;
  const TemporaryFolder temporary(downloads / temporary_folder_name(name));
  fs::create_directory(temporary.path(), error);
  if (error) refuse("cannot create " + display(temporary.path()) + ": " + error.message());
  const std::string archive_url = repository.url + "/" + entry.archive;
  const fs::path archive = temporary.path() / ("archive" + std::string(kArchiveExtension));
  http::Limits limits;
  limits.max_bytes = entry.size;
  limits.cancelled = [] { return DeferredSignals::pending(); };
  const std::string failed = http::get_to_file(archive_url, limits, archive);
  signals.check(what);
  const std::string nothing = ". Nothing was installed";
  if (!failed.empty())
    refuse("cannot download bundle '" + name + "' " + entry.version + " from repository '" + repository.name + "': " +
           archive_url + ": " + failed + nothing + "; try again, and if it persists tell the repository's maintainers");
  std::string why;
  const uint64_t size = fs::file_size(archive, error);
  auto sha = crypto::sha256_file_hex(archive, why);
  if (error || !sha) refuse("cannot read the downloaded " + display(archive) + ": " + why);
  if (size != entry.size || *sha != entry.sha256)
    refuse("the download of " + archive_url + " is " + std::to_string(size) + " bytes with sha256 " + *sha + ", but " +
           repository.url + "/" + kIndexFile + " lists " + std::to_string(entry.size) + " bytes with sha256 " +
           entry.sha256 + nothing + ": the file changed on the server after it was published, or on the way. Try "
           "again; if it persists, tell the maintainers of repository '" + repository.name + "'");

  // 5. Unpacked, and signed with the repository's own key.
  const fs::path folder = temporary.path() / name;
  fs::create_directory(folder, error);
  if (error) refuse("cannot create " + display(folder) + ": " + error.message());
  const std::vector<std::string> files = read_archive(archive, folder, archive_url);
  signals.check(what);
  const std::string from = "bundle '" + name + "' " + entry.version + " from repository '" + repository.name + "' (" +
                           archive_url + ")";
  auto signature_text = read_regular_file(folder / kSignatureFile, 64 * 1024, why);
  if (!signature_text)
    refuse(from + " is not signed (its bundle.sig " + why + "); a repository's bundles must be signed with its key" +
           nothing);
  const Signature signature = parse_signature(*signature_text, archive_url + "#" + kSignatureFile);
  if (signature.key_id != repository.key_id)
    refuse(from + " is signed by key " + signature.key_id + ", " + key_owner(home, signature.key_id, repository.name) +
           ", not by the key of repository '" + repository.name + "' (" + repository.key_id + "). A repository's key "
           "is trusted only for the bundles it serves" + nothing + "; tell the maintainers of '" + repository.name +
           "', and install the bundle from the repository whose key signed it");

  // 6. The bundle checks against that key alone, and the index's claims.
  const TrustStore trust = TrustStore::for_repository(
      home, repository.name, TrustedKey{repository.key_id, "repository '" + repository.name + "'", repository.raw_public_key});
  const VerifiedBundle verified = verify_bundle(folder, trust, VerifyPolicy{false, true});
  const Manifest& manifest = verified.manifest;
  if (manifest.name != entry.name || compare_versions(*parse_version(manifest.version), *parse_version(entry.version)) != 0)
    refuse(from + " holds bundle '" + manifest.name + "' " + manifest.version + ", not what the index lists" + nothing +
           "; tell the repository's maintainers");
  std::set<std::string> listed{kManifestFile, kSignatureFile};
  for (const LibraryEntry& library : manifest.libraries) listed.insert(library.file);
  for (const DataEntry& data : manifest.data) listed.insert(data.file);
  for (const std::string& file : files)
    if (!listed.contains(file))
      refuse(from + " holds " + file + ", which its bundle.toml does not list" + nothing +
             "; tell the repository's maintainers");

  // 7. Installed as a folder is, with its origin.
  FolderInstall install{folder, trust, VerifyPolicy{false, true}, request.force, Origin{}, true};
  install.origin.source = archive_url;
  install.origin.repository = repository.name;
  install.origin.pinned = pinned ? entry.version : "";
  std::string result = install_folder(home, install);
  if (pinned) result += "; pinned at " + entry.version + " (`memplan bundle upgrade` leaves it)";
  return result;
}

void remove_interrupted_downloads(const fs::path& home) {
  const fs::path downloads = downloads_folder(home);
  std::error_code error;
  if (fs::is_directory(fs::symlink_status(downloads, error))) remove_stale_temporary_folders(downloads);
}

}  // namespace memplan::bundle
