#include "store.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <iterator>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>

#include "crypto.hpp"
#include "manifest.hpp"
#include "common/toml_guard.hpp"
#include "common/toml_reader.hpp"

namespace memplan::bundle {
namespace fs = std::filesystem;

namespace {

constexpr size_t kMaxKeyFile = 64 * 1024;
constexpr size_t kMaxLabel = 128;

bool is_key_id(std::string_view text) {
  if (text.size() != 16) return false;
  for (char c : text)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

std::string trim(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ')) text.pop_back();
  return text;
}

}  // namespace

void refuse(const std::string& text) { throw Refusal(text); }

void write_new_file(const fs::path& file, const std::string& content, unsigned mode) {
  const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  if (fd < 0)
    refuse("cannot create " + display(file) + ": " + std::strerror(errno) +
           (errno == EEXIST ? "; choose another file name or remove the old file" : ""));
  size_t written = 0;
  while (written < content.size()) {
    const ssize_t n = ::write(fd, content.data() + written, content.size() - written);
    if (n <= 0) {
      const int saved = errno;
      ::close(fd);
      ::unlink(file.c_str());
      refuse("cannot write " + display(file) + ": " + std::strerror(saved));
    }
    written += static_cast<size_t>(n);
  }
  ::fchmod(fd, mode);  // the umask may have narrowed it; never widen beyond `mode`
  ::close(fd);
}

void write_file_atomically(const fs::path& file, const std::string& content, unsigned mode) {
  const fs::path temporary = file.parent_path() / (".tmp-" + std::to_string(::getpid()) + "-" +
                                                   file.filename().string());
  std::error_code ignored;
  fs::remove(temporary, ignored);
  write_new_file(temporary, content, mode);
  std::error_code error;
  fs::rename(temporary, file, error);
  if (error) {
    fs::remove(temporary, ignored);
    refuse("cannot replace " + display(file) + ": " + error.message());
  }
}

std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  std::tm parts{};
  gmtime_r(&now, &parts);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &parts);
  return text;
}

std::string display(const fs::path& path) {
  std::error_code error;
  const fs::path absolute = fs::absolute(path, error);
  return (error ? path : absolute).lexically_normal().string();
}

fs::path memplan_home() {
  if (const char* home = std::getenv("MEMPLAN_HOME"); home != nullptr && home[0] != '\0') return home;
  if (const char* data = std::getenv("XDG_DATA_HOME"); data != nullptr && data[0] == '/')
    return fs::path(data) / "memplan";
  if (const char* home = std::getenv("HOME"); home != nullptr && home[0] != '\0')
    return fs::path(home) / ".local" / "share" / "memplan";
  refuse("cannot find a folder for memplan's trust store and bundles: set MEMPLAN_HOME (or HOME)");
}

fs::path bundles_folder(const fs::path& home) { return home / "bundles"; }

// ---------------------------------------------------------------------------
// Trust store: trust/keys/<key id>.pem and .label, trust/revoked/<key id>.

TrustStore::TrustStore(fs::path home) : folder_(std::move(home) / "trust") {}

TrustStore TrustStore::for_repository(fs::path home, const std::string& name, std::optional<TrustedKey> key) {
  TrustStore view(std::move(home));
  view.repository_ = name;
  view.repository_key_ = std::move(key);
  return view;
}

std::optional<TrustedKey> TrustStore::find(std::string_view key_id) const {
  if (!is_key_id(key_id) || revoked(key_id)) return std::nullopt;
  // A repository's view trusts its own key and no other, the trust store's included.
  if (!repository_.empty()) {
    if (repository_key_ && repository_key_->key_id == key_id) return repository_key_;
    return std::nullopt;
  }
  std::string why;
  const fs::path pem_file = folder_ / "keys" / (std::string(key_id) + ".pem");
  auto pem = read_regular_file(pem_file, kMaxKeyFile, why);
  if (!pem) return std::nullopt;
  auto raw = crypto::public_key_from_pem(*pem, why);
  // A key file whose content is not the key its name says is not trusted.
  if (!raw || crypto::key_id(*raw) != key_id) return std::nullopt;
  auto label = read_regular_file(folder_ / "keys" / (std::string(key_id) + ".label"), kMaxLabel + 2, why);
  return TrustedKey{std::string(key_id), label ? trim(*label) : "", *raw};
}

std::vector<TrustedKey> TrustStore::trusted() const {
  std::vector<TrustedKey> keys;
  if (!repository_.empty()) {
    if (repository_key_ && find(repository_key_->key_id)) keys.push_back(*repository_key_);
    return keys;
  }
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(folder_ / "keys", error)) {
    const fs::path file = entry.path();
    if (file.extension() != ".pem") continue;
    if (auto key = find(file.stem().string())) keys.push_back(*key);
  }
  std::sort(keys.begin(), keys.end(), [](const auto& a, const auto& b) { return a.key_id < b.key_id; });
  return keys;
}

bool TrustStore::revoked(std::string_view key_id) const {
  if (!is_key_id(key_id)) return false;  // never a path
  std::error_code error;
  return fs::exists(folder_ / "revoked" / std::string(key_id), error);
}

std::vector<std::string> TrustStore::revoked_ids() const {
  std::vector<std::string> ids;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(folder_ / "revoked", error))
    if (is_key_id(entry.path().filename().string())) ids.push_back(entry.path().filename().string());
  std::sort(ids.begin(), ids.end());
  return ids;
}

std::string TrustStore::add(const fs::path& public_key_pem, const std::string& given_label, bool reinstate) {
  std::string why;
  auto pem = read_regular_file(public_key_pem, kMaxKeyFile, why);
  if (!pem) refuse("cannot read the public key " + display(public_key_pem) + ": it " + why);
  auto raw = crypto::public_key_from_pem(*pem, why);
  if (!raw) refuse(display(public_key_pem) + " is not an Ed25519 public key: " + why);
  const std::string id = crypto::key_id(*raw);
  const std::string label = given_label.empty() ? public_key_pem.stem().string() : given_label;
  if (label.size() > kMaxLabel || label.find_first_of("\n\r\t") != std::string::npos)
    refuse("the label '" + label + "' is not valid (rule: at most 128 characters on one line); pick another --name");
  if (revoked(id)) {
    if (!reinstate)
      refuse("key " + id + " was revoked (memplan trust remove), so it is not added back silently; if you trust it "
             "again, run `memplan trust add " + public_key_pem.string() + " --reinstate`");
  }
  if (auto existing = find(id)) return "key " + id + " (" + existing->label + ") is already trusted";
  std::error_code error;
  fs::create_directories(folder_ / "keys", error);
  if (error) refuse("cannot create the trust store " + display(folder_) + ": " + error.message());
  write_file_atomically(folder_ / "keys" / (id + ".label"), label + "\n");
  write_file_atomically(folder_ / "keys" / (id + ".pem"), *pem);
  // The key is trusted before its revocation mark goes, so a crash in
  // between leaves it revoked (the safe side), never half-reinstated.
  if (reinstate) fs::remove(folder_ / "revoked" / id, error);
  return "trusted key " + id + " (" + label + ")" + (reinstate ? ", reinstated" : "");
}

std::string TrustStore::remove(std::string_view key_id) {
  const std::string id(key_id);
  if (!is_key_id(id)) refuse("'" + id + "' is not a key id (16 hexadecimal digits); `memplan trust list` shows them");
  if (revoked(id)) refuse("key " + id + " is already revoked");
  const auto key = find(id);
  if (!key) refuse("no trusted key has id " + id + "; `memplan trust list` shows them");
  std::error_code error;
  fs::create_directories(folder_ / "revoked", error);
  if (error) refuse("cannot create " + display(folder_ / "revoked") + ": " + error.message());
  // Revoked first: once the mark exists the key is refused, whatever happens next.
  write_file_atomically(folder_ / "revoked" / id, "revoked " + utc_now() + "\n");
  fs::remove(folder_ / "keys" / (id + ".pem"), error);
  fs::remove(folder_ / "keys" / (id + ".label"), error);
  return "revoked key " + id + " (" + key->label + "): bundles signed by it are refused from now on; "
         "`memplan trust add PUBKEY.pem --reinstate` trusts it again";
}

// ---------------------------------------------------------------------------
// Origin records and installed bundles.

std::string write_origin(const Origin& origin) {
  return "# Where this bundle came from; written by memplan bundle install (not signed).\n"
         "source = " + toml_quote(origin.source) + "\n"
         "installed_at = " + toml_quote(origin.installed_at) + "\n"
         "key_id = " + toml_quote(origin.key_id) + "\n"
         "publisher = " + toml_quote(origin.publisher) + "\n" +
         (origin.repository.empty() ? "" : "repository = " + toml_quote(origin.repository) + "\n") +
         (origin.pinned.empty() ? "" : "pinned = " + toml_quote(origin.pinned) + "\n");
}

std::optional<Origin> read_origin(const fs::path& bundle_folder, std::string& why) {
  auto text = read_regular_file(bundle_folder / kOriginFile, 64 * 1024, why);
  if (!text) {
    why = std::string(kOriginFile) + " " + why;
    return std::nullopt;
  }
  try {
    const toml::table root = parse_toml(*text, (bundle_folder / kOriginFile).string());
    TomlReader reader(root, (bundle_folder / kOriginFile).string(), "the origin record");
    return Origin{reader.string("source").value_or(""),     reader.string("installed_at").value_or(""),
                  reader.string("key_id").value_or(""),     reader.string("publisher").value_or(""),
                  reader.string("repository").value_or(""), reader.string("pinned").value_or("")};
  } catch (const toml::parse_error& error) {
    why = std::string(kOriginFile) + " is not valid TOML";
  } catch (const Error& error) {
    why = error.what();
  }
  return std::nullopt;
}

std::vector<InstalledBundle> installed_bundles(const fs::path& home) {
  std::vector<InstalledBundle> bundles;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(bundles_folder(home), error)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || name[0] == '.' || !entry.is_directory()) continue;  // temporary folders stay invisible
    InstalledBundle bundle;
    bundle.folder = entry.path();
    std::string why;
    if (auto text = read_regular_file(entry.path() / kManifestFile, kMaxManifestBytes, why)) {
      try {
        bundle.manifest = parse_manifest(*text, (entry.path() / kManifestFile).string());
      } catch (const Error& parse_error) {
        bundle.problem = parse_error.what();
      }
    } else {
      bundle.problem = display(entry.path() / kManifestFile) + " " + why;
    }
    bundle.has_signature = fs::exists(fs::symlink_status(entry.path() / kSignatureFile, error));
    bundle.origin = read_origin(entry.path(), why);
    if (!bundle.origin && bundle.problem.empty()) bundle.problem = why;
    bundles.push_back(std::move(bundle));
  }
  std::sort(bundles.begin(), bundles.end(), [](const auto& a, const auto& b) { return a.folder < b.folder; });
  return bundles;
}

TrustStore trust_for_installed(const fs::path& home, const InstalledBundle& installed) {
  if (!installed.origin || installed.origin->repository.empty()) return TrustStore(home);
  const std::string& name = installed.origin->repository;
  std::optional<TrustedKey> key;
  if (auto repository = find_repository(home, name))
    key = TrustedKey{repository->key_id, "repository '" + name + "'", repository->raw_public_key};
  return TrustStore::for_repository(home, name, key);
}

namespace {

// O_NOFOLLOW: a link planted as the lock file is never followed out of the store.
int open_lock_file(const fs::path& home) {
  return ::open((home / kStoreLockFile).c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
}

}  // namespace

StoreLock StoreLock::acquire(const fs::path& home) {
  const int fd = open_lock_file(home);
  if (fd < 0)
    refuse("cannot lock the bundle store: cannot open " + display(home / kStoreLockFile) + ": " +
           std::strerror(errno) + "; the store must be a folder you own and can write (docs/bundles.md, \"The store\")");
  while (::flock(fd, LOCK_EX) != 0) {
    if (errno == EINTR) continue;
    const int saved = errno;
    ::close(fd);
    refuse("cannot lock the bundle store " + display(home / kStoreLockFile) + ": " + std::strerror(saved));
  }
  return StoreLock(fd);
}

std::optional<StoreLock> StoreLock::try_acquire(const fs::path& home) {
  const int fd = open_lock_file(home);
  if (fd < 0) return std::nullopt;
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    ::close(fd);
    return std::nullopt;
  }
  return StoreLock(fd);
}

StoreLock::~StoreLock() {
  if (fd_ >= 0) ::close(fd_);  // closing the last descriptor releases the lock
}

namespace {

volatile std::sig_atomic_t deferred_signal = 0;
extern "C" void defer_signal(int signal) { deferred_signal = signal; }

}  // namespace

DeferredSignals::DeferredSignals() {
  deferred_signal = 0;
  for (size_t i = 0; i < std::size(kSignals); ++i) {
    ::sigaction(kSignals[i], nullptr, &previous_[i]);
    installed_[i] = previous_[i].sa_handler != SIG_IGN;
    if (!installed_[i]) continue;
    struct sigaction action {};
    action.sa_handler = defer_signal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = 0;  // no SA_RESTART: a long copy stops with EINTR
    ::sigaction(kSignals[i], &action, nullptr);
  }
}

DeferredSignals::~DeferredSignals() {
  for (size_t i = 0; i < std::size(kSignals); ++i)
    if (installed_[i]) ::sigaction(kSignals[i], &previous_[i], nullptr);
  if (const int signal = deferred_signal; signal != 0) {
    deferred_signal = 0;
    std::raise(signal);
  }
}

void DeferredSignals::check(const std::string& what) const {
  if (const int signal = deferred_signal; signal != 0)
    refuse(what + " was interrupted by signal " + std::to_string(signal) + " (" + ::strsignal(signal) +
           "); nothing was installed and its temporary folder was removed");
}

bool DeferredSignals::pending() { return deferred_signal != 0; }

TemporaryFolder::~TemporaryFolder() {
  std::error_code ignored;
  fs::remove_all(path_, ignored);
}

std::string temporary_folder_name(const std::string& purpose) {
  return ".tmp-" + std::to_string(::getpid()) + "-" + purpose;
}

namespace {

// The pid in a ".tmp-<pid>-..." name; 0 when there is none.
pid_t temporary_folder_pid(const std::string& name) {
  const std::string pid_text = name.substr(5, name.find('-', 5) - 5);
  char* end = nullptr;
  const long pid = std::strtol(pid_text.c_str(), &end, 10);
  return end != pid_text.c_str() && *end == '\0' && pid > 0 && pid <= 0x7fffffff ? static_cast<pid_t>(pid) : 0;
}

bool process_alive(pid_t pid) { return pid > 0 && (::kill(pid, 0) == 0 || errno == EPERM); }

}  // namespace

void remove_stale_temporary_folders(const fs::path& bundles) {
  std::error_code error;
  std::vector<fs::path> stale;
  const auto now = fs::file_time_type::clock::now();
  for (const auto& entry : fs::directory_iterator(bundles, error)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(".tmp-", 0) != 0) continue;
    const pid_t pid = temporary_folder_pid(name);
    // A live pid alone does not keep a folder: pids are reused, so after a
    // crash another process may hold it and the folder would be kept
    // forever, and in a store shared between machines the pid is another
    // host's. An hour is far beyond any install (a bundle copies in seconds
    // to minutes), and the store lock already keeps this host's installs from
    // running beside this one; the age only spares an install of another host.
    std::error_code time_error;
    const auto written = fs::last_write_time(entry.path(), time_error);
    const bool old = !time_error && now - written > kStaleTemporaryAge;
    if (!process_alive(pid) || pid == ::getpid() || old) stale.push_back(entry.path());
  }
  for (const fs::path& folder : stale) fs::remove_all(folder, error);
}

}  // namespace memplan::bundle
