// Files of the per-user store (trust store, installed bundles, origin
// records) and the small file helpers the bundle code shares: bounded reads,
// and writes that land whole or not at all (temporary file, then rename).
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "memplan/core/bundle.hpp"
#include "input_file.hpp"  // read_regular_file: the store reads only regular files, never through links

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

// Temporary folders inside the store are ".tmp-<pid>-<name>": a folder whose
// process is gone is a leftover of an interrupted install or removal.
std::string temporary_folder_name(const std::string& purpose);
void remove_stale_temporary_folders(const std::filesystem::path& bundles);

}  // namespace memplan::bundle
