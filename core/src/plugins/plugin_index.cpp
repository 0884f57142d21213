#include "plugins/plugin_index.hpp"

#include <memplan/plugin_abi.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <fstream>
#include <random>
#include <sstream>
#include <string_view>

namespace memplan::plugin_index {
namespace {

// Line 1 names the format and the host's plugin ABI: which libraries pass the
// loader's checks depends on the ABI the host implements.
std::string header_line() {
  return "memplan plugin index 1 abi " + std::to_string(MEMPLAN_ABI_MAJOR) + "." + std::to_string(MEMPLAN_ABI_MINOR);
}

bool has_line_break(std::string_view text) { return text.find_first_of("\n\r") != std::string_view::npos; }

// FNV-1a, 64 bits: a stable file name per folder (not a security boundary;
// the folder's path is inside the file and compared on read).
std::string folder_key(std::string_view folder) {
  uint64_t hash = 14695981039346656037ull;
  for (const char c : folder) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 1099511628211ull;
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string key(16, '0');
  for (int i = 15; i >= 0; --i, hash >>= 4) key[static_cast<size_t>(i)] = kHex[hash & 0xf];
  return key;
}

// Splits off the next space-separated field of `rest`.
std::optional<std::string_view> next_field(std::string_view& rest) {
  const size_t space = rest.find(' ');
  if (space == 0 || space == std::string_view::npos) return std::nullopt;
  const std::string_view field = rest.substr(0, space);
  rest.remove_prefix(space + 1);
  return field;
}

template <typename Number>
bool read_number(std::string_view& rest, Number& value) {
  const auto field = next_field(rest);
  if (!field) return false;
  const auto [end, error] = std::from_chars(field->data(), field->data() + field->size(), value);
  return error == std::errc{} && end == field->data() + field->size();
}

// "<size> <modified_ns> <inode> " then, for a plugin, "<kind> <name> ", then
// the file name (the rest of the line: file names may hold spaces).
std::optional<Entry> parse_entry(std::string_view line) {
  Entry entry;
  std::string_view rest;
  if (line.starts_with("plugin ")) {
    rest = line.substr(7);
  } else if (line.starts_with("open ")) {
    rest = line.substr(5);
    entry.open_always = true;
  } else {
    return std::nullopt;
  }
  if (!read_number(rest, entry.file.size) || !read_number(rest, entry.file.modified_ns) ||
      !read_number(rest, entry.file.inode))
    return std::nullopt;
  if (!entry.open_always) {
    if (!read_number(rest, entry.kind)) return std::nullopt;
    const auto name = next_field(rest);
    if (!name) return std::nullopt;
    entry.plugin = std::string(*name);
  }
  if (rest.empty() || rest.find('/') != std::string_view::npos) return std::nullopt;
  entry.file.file_name = std::string(rest);
  return entry;
}

}  // namespace

std::vector<LibraryFile> list_libraries(const std::filesystem::path& folder) {
  std::vector<LibraryFile> files;
  std::error_code error;
  for (const auto& item : std::filesystem::directory_iterator(folder, error)) {
    if (item.path().extension() != ".so") continue;
    struct stat status {};
    // stat follows links, as the loader does: a link to a library is that library.
    if (::stat(item.path().c_str(), &status) != 0 || !S_ISREG(status.st_mode)) continue;
    LibraryFile file;
    file.file_name = item.path().filename().string();
    file.size = static_cast<uint64_t>(status.st_size);
    file.modified_ns = static_cast<int64_t>(status.st_mtim.tv_sec) * 1'000'000'000 + status.st_mtim.tv_nsec;
    file.inode = static_cast<uint64_t>(status.st_ino);
    files.push_back(std::move(file));
  }
  std::sort(files.begin(), files.end(),
            [](const LibraryFile& a, const LibraryFile& b) { return a.file_name < b.file_name; });
  return files;
}

std::filesystem::path index_file(const std::filesystem::path& index_dir, const std::string& canonical_folder) {
  return index_dir / (folder_key(canonical_folder) + ".index");
}

std::optional<FolderIndex> parse(std::string_view text) {
  FolderIndex index;
  size_t line_number = 0;
  bool saw_end = false;
  while (!text.empty()) {
    const size_t end = text.find('\n');
    if (end == std::string_view::npos) return std::nullopt;  // every line ends with '\n': a cut file is no index
    const std::string_view line = text.substr(0, end);
    text.remove_prefix(end + 1);
    ++line_number;
    if (saw_end) return std::nullopt;
    if (line_number == 1) {
      if (line != header_line()) return std::nullopt;
    } else if (line_number == 2) {
      if (!line.starts_with("folder ") || line.size() == 7) return std::nullopt;
      index.folder = std::string(line.substr(7));
    } else if (line == "end") {
      saw_end = true;
    } else {
      auto entry = parse_entry(line);
      if (!entry) return std::nullopt;
      index.entries.push_back(std::move(*entry));
    }
  }
  if (!saw_end) return std::nullopt;
  return index;
}

std::string format(const FolderIndex& index) {
  std::string text = header_line() + "\nfolder " + index.folder + "\n";
  for (const Entry& entry : index.entries) {
    const LibraryFile& file = entry.file;
    text += entry.open_always ? "open " : "plugin ";
    text += std::to_string(file.size) + " " + std::to_string(file.modified_ns) + " " + std::to_string(file.inode) + " ";
    if (!entry.open_always) text += std::to_string(entry.kind) + " " + entry.plugin + " ";
    text += file.file_name + "\n";
  }
  return text + "end\n";
}

std::optional<FolderIndex> read_valid(const std::filesystem::path& index_dir, const std::string& canonical_folder,
                                      const std::vector<LibraryFile>& files) {
  std::ifstream in(index_file(index_dir, canonical_folder), std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  auto index = parse(text.str());
  if (!index || index->folder != canonical_folder || index->entries.size() != files.size()) return std::nullopt;
  for (size_t i = 0; i < files.size(); ++i)
    if (!(index->entries[i].file == files[i])) return std::nullopt;
  return index;
}

bool write(const std::filesystem::path& index_dir, const FolderIndex& index) {
  if (has_line_break(index.folder)) return false;
  for (const Entry& entry : index.entries)
    if (has_line_break(entry.file.file_name)) return false;
  std::error_code error;
  std::filesystem::create_directories(index_dir, error);
  if (error) return false;
  const std::filesystem::path target = index_file(index_dir, index.folder);
  // A name of its own per writer: two runs writing the same index at once
  // each rename a complete file into place.
  std::random_device random;
  const std::filesystem::path temporary =
      target.string() + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(random());
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    if (!out) return false;
    out << format(index);
    out.close();
    if (!out) {
      std::filesystem::remove(temporary, error);
      return false;
    }
  }
  std::filesystem::rename(temporary, target, error);
  if (error) {
    std::filesystem::remove(temporary, error);
    return false;
  }
  return true;
}

}  // namespace memplan::plugin_index
