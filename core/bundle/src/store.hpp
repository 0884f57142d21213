// Files of the per-user store (trust store, installed bundles, origin
// records) and the small file helpers the bundle code shares: bounded reads,
// and writes that land whole or not at all (temporary file, then rename).
#pragma once

#include <signal.h>

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>

#include "memplan/bundle/bundle.hpp"
#include "common/input_file.hpp"  // read_regular_file: the store reads only regular files, never through links

namespace memplan::bundle {

// An Error whose text is a complete sentence without the "memplan: error: "
// prefix, so the same refusal can be thrown to the command line or kept as
// a load-time warning.
class Refusal : public Error {
 public:
  explicit Refusal(const std::string& text) : Error("memplan: error: " + text), text_(text) {}
  const std::string& text() const { return text_; }

 private:
  std::string text_;
};
[[noreturn]] void refuse(const std::string& text);

// Writes `content` to a temporary file beside `file`, then renames it over `file`.
void write_file_atomically(const std::filesystem::path& file, const std::string& content, unsigned mode = 0644);
// Creates `file` exclusively (never replaces one) with `mode`.
void write_new_file(const std::filesystem::path& file, const std::string& content, unsigned mode);

std::string utc_now();  // "2024-05-01T12:00:00Z"
std::string display(const std::filesystem::path& path);  // absolute, lexically normal

std::optional<Origin> read_origin(const std::filesystem::path& bundle_folder, std::string& why);
std::string write_origin(const Origin& origin);

// The store lock: an exclusive flock(2) on <home>/bundles.lock, held by
// every command that changes bundles/ (install, remove, and the clean-up of
// leftover temporary folders) from its first look at the installed bundles
// to its last rename. It guards the rules that read the whole store before
// changing it -- plugin names unique across bundles, the same-name guard --
// against a second install running between the check and the rename. Loads
// and `bundle list` read without it: every change lands by one rename.
// The kernel drops the lock when its process ends, however it ends.
class StoreLock {
 public:
  // Waits for the lock; throws Refusal when the lock file cannot be opened.
  static StoreLock acquire(const std::filesystem::path& home);
  // nullopt when another process holds it (or it cannot be opened); never waits.
  static std::optional<StoreLock> try_acquire(const std::filesystem::path& home);
  StoreLock(StoreLock&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  StoreLock& operator=(StoreLock&&) = delete;
  StoreLock(const StoreLock&) = delete;
  ~StoreLock();

 private:
  explicit StoreLock(int fd) : fd_(fd) {}
  int fd_;
};
// Beside bundles/, not in it, so bundles/ holds only bundles and temporary folders.
inline constexpr const char* kStoreLockFile = "bundles.lock";

// Removes its folder, and all inside, when it goes out of scope: every way
// out of the code that fills it (a refusal, an exception, a signal turned
// into one) leaves nothing behind. Code that renames the folder into place
// leaves nothing at the path for it to remove.
class TemporaryFolder {
 public:
  explicit TemporaryFolder(std::filesystem::path path) : path_(std::move(path)) {}
  TemporaryFolder(const TemporaryFolder&) = delete;
  TemporaryFolder& operator=(const TemporaryFolder&) = delete;
  ~TemporaryFolder();
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// While an install or a download fills a temporary folder, SIGINT, SIGTERM
// and SIGHUP are recorded instead of ending the process at once, so the
// command can remove the folder (as large as the bundle) first: check() turns
// a recorded signal into a refusal, the folder's guard removes it, and the
// destructor restores the old handling and raises the signal again, so the
// process ends as the signal says. Signals that were ignored stay ignored.
// SIGKILL and crashes cannot be caught; remove_stale_temporary_folders()
// removes what they leave. Declare it before the TemporaryFolder it guards,
// so the folder is removed before the signal is raised again.
class DeferredSignals {
 public:
  DeferredSignals();
  DeferredSignals(const DeferredSignals&) = delete;
  DeferredSignals& operator=(const DeferredSignals&) = delete;
  ~DeferredSignals();
  // Throws Refusal naming `what` ("the install of bundle 'x'") when a signal arrived.
  void check(const std::string& what) const;
  static bool pending();  // a signal arrived (safe to poll from a transfer's progress callback)

 private:
  static constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP};
  struct sigaction previous_[3] {};
  bool installed_[3] = {};
};

// Temporary folders inside the store are ".tmp-<pid>-<name>". One is a
// leftover of an interrupted install or removal, and is removed, when its
// process is gone or when it is older than kStaleTemporaryAge.
inline constexpr std::chrono::hours kStaleTemporaryAge{1};
std::string temporary_folder_name(const std::string& purpose);
// Call with the store lock held.
void remove_stale_temporary_folders(const std::filesystem::path& bundles);

}  // namespace memplan::bundle
