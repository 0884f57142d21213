// Bundle archives: one file that carries a bundle folder from a repository to
// an installer (docs/bundles.md, "Archive format"). The format is ours and
// small on purpose, so reading it needs no library and every byte is checked:
//
//   memplan-bundle-archive 1\n
//   file <size> <path>\n<size bytes>\n      one per file, bundle.toml first
//   end\n
//
// <size> is decimal, at most 2^40; <path> is a relative path inside the
// bundle (the manifest's rules: no '..', no absolute path, no empty or '.'
// part, no backslash or control character), each at most once. A reader
// stops at the first thing out of place and says where.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace memplan::bundle {

inline constexpr const char* kArchiveExtension = ".mpbundle";
inline constexpr size_t kMaxArchiveEntries = 4096;

// Writes `files` (paths relative to `folder`) from `folder` into `archive`
// (created exclusively). Throws Refusal.
void write_archive(const std::filesystem::path& folder, const std::vector<std::string>& files,
                   const std::filesystem::path& archive);

// Unpacks `archive` into `folder`, an empty folder. Returns the paths it
// wrote, in archive order; throws Refusal naming `display_name` (the URL) on
// any malformed input. Nothing outside `folder` is ever written.
std::vector<std::string> read_archive(const std::filesystem::path& archive, const std::filesystem::path& folder,
                                      const std::string& display_name);

}  // namespace memplan::bundle
