// The plugin index: which plugin each library of a folder registers, kept
// between runs so that a run opens only the libraries its scenario uses
// (issue 10: opening all 34 built-ins was half of a `memplan run`'s CPU).
//
// One index file per folder, in the index folder (PluginLoadOptions::index_dir,
// by default ~/.cache/memplan/plugin-index). It records, for every *.so of
// the folder, the file's name, size, modification time and inode, and either
// the plugin it registered (name and kind) or "open it every time" (a library
// that was rejected, so that its warning is printed on every run, as without
// an index). It is trusted only while the folder holds exactly those files
// with exactly those sizes, times and inodes, and only by a host of the same
// plugin ABI: adding, removing, replacing or touching a library makes the
// next run open every library of that folder and write the index again.
// An index that cannot be read (missing, truncated, edited) is the same as
// none; one that cannot be written is skipped, since it only saves time.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace memplan::plugin_index {

// One *.so file as the folder shows it now.
struct LibraryFile {
  std::string file_name;  // no folder part
  uint64_t size = 0;
  int64_t modified_ns = 0;
  uint64_t inode = 0;
  friend bool operator==(const LibraryFile&, const LibraryFile&) = default;
};

// The *.so regular files of `folder`, sorted by file name (the order the
// registry loads them in).
std::vector<LibraryFile> list_libraries(const std::filesystem::path& folder);

struct Entry {
  LibraryFile file;
  bool open_always = false;  // rejected or registered nothing when last opened
  std::string plugin;        // the plugin it registered, when !open_always
  int32_t kind = 0;
};

struct FolderIndex {
  std::string folder;  // canonical path
  std::vector<Entry> entries;  // in list_libraries order
};

// The index file for a folder (canonical path) inside `index_dir`.
std::filesystem::path index_file(const std::filesystem::path& index_dir, const std::string& canonical_folder);

// The index of `canonical_folder`, if its file parses completely, was written
// by a host of this plugin ABI and lists exactly `files`; otherwise nothing.
std::optional<FolderIndex> read_valid(const std::filesystem::path& index_dir, const std::string& canonical_folder,
                                      const std::vector<LibraryFile>& files);

// Parses index text; nothing when any line is malformed. Exposed for the
// tests and the fuzz target: the file is user-writable input.
std::optional<FolderIndex> parse(std::string_view text);
std::string format(const FolderIndex& index);

// Writes the index atomically (a temporary file renamed into place), so that
// runs in parallel never read half an index. Returns false, writing nothing,
// when the folder cannot be created or written.
bool write(const std::filesystem::path& index_dir, const FolderIndex& index);

}  // namespace memplan::plugin_index
