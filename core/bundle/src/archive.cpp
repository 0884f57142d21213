#include "archive.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <iterator>
#include <set>

#include "manifest.hpp"
#include "store.hpp"

namespace memplan::bundle {
namespace fs = std::filesystem;

namespace {

constexpr std::string_view kMagic = "memplan-bundle-archive 1\n";
constexpr uint64_t kMaxEntryBytes = uint64_t{1} << 40;
constexpr size_t kMaxLine = 300;  // "file " + 13 digits + " " + a 255-character path

struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

bool write_all(int fd, const char* data, size_t size) {
  while (size > 0) {
    const ssize_t n = ::write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

// A buffered reader over the archive that counts its offset for messages.
class Reader {
 public:
  explicit Reader(int fd) : fd_(fd) {}
  uint64_t offset() const { return offset_; }
  // Reads up to and including '\n'; nullopt at end of input or past kMaxLine.
  bool line(std::string& out) {
    out.clear();
    while (out.size() <= kMaxLine) {
      char c;
      if (!byte(c)) return false;
      if (c == '\n') return true;
      out.push_back(c);
    }
    return false;
  }
  bool byte(char& c) {
    if (position_ == size_ && !fill()) return false;
    c = buffer_[position_++];
    ++offset_;
    return true;
  }
  // Copies `count` bytes to `out_fd`; false when the archive ends first.
  bool copy(uint64_t count, int out_fd, std::string& why) {
    while (count > 0) {
      if (position_ == size_ && !fill()) {
        why = "it ends in the middle of a file";
        return false;
      }
      const size_t chunk = static_cast<size_t>(std::min<uint64_t>(count, size_ - position_));
      if (!write_all(out_fd, buffer_ + position_, chunk)) {
        why = std::string("writing the unpacked file failed: ") + std::strerror(errno);
        return false;
      }
      position_ += chunk;
      offset_ += chunk;
      count -= chunk;
    }
    return true;
  }

 private:
  bool fill() {
    for (;;) {
      const ssize_t n = ::read(fd_, buffer_, sizeof buffer_);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      position_ = 0;
      size_ = static_cast<size_t>(n);
      return true;
    }
  }
  int fd_;
  char buffer_[1 << 16];
  size_t position_ = 0;
  size_t size_ = 0;
  uint64_t offset_ = 0;
};

// Creates the folders of `relative` inside `folder`, one part at a time, each
// a new real folder or one this unpack made (never a link: nothing else writes here).
void make_parents(const fs::path& folder, const std::string& relative) {
  fs::path parent = folder;
  const fs::path path(relative);
  for (auto part = path.begin(); part != path.end(); ++part) {
    if (std::next(part) == path.end()) break;
    parent /= *part;
    if (::mkdir(parent.c_str(), 0755) != 0 && errno != EEXIST)
      refuse("cannot create " + display(parent) + ": " + std::strerror(errno));
    struct stat info {};
    if (::lstat(parent.c_str(), &info) != 0 || !S_ISDIR(info.st_mode))
      refuse("cannot unpack into " + display(parent) + ": it is not a folder");
  }
}

}  // namespace

void write_archive(const fs::path& folder, const std::vector<std::string>& files, const fs::path& archive) {
  const int out = ::open(archive.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (out < 0) refuse("cannot create " + display(archive) + ": " + std::strerror(errno));
  Fd out_guard{out};
  auto fail = [&](const std::string& why) {
    ::unlink(archive.c_str());
    refuse("cannot write the archive " + display(archive) + ": " + why);
  };
  if (!write_all(out, kMagic.data(), kMagic.size())) fail(std::strerror(errno));
  for (const std::string& file : files) {
    const int in = ::open((folder / file).c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (in < 0) fail("cannot open " + display(folder / file) + ": " + std::strerror(errno));
    Fd in_guard{in};
    struct stat info {};
    if (::fstat(in, &info) != 0 || !S_ISREG(info.st_mode)) fail(display(folder / file) + " is not a regular file");
    const std::string header = "file " + std::to_string(info.st_size) + " " + file + "\n";
    if (!write_all(out, header.data(), header.size())) fail(std::strerror(errno));
    char buffer[1 << 16];
    uint64_t left = static_cast<uint64_t>(info.st_size);
    while (left > 0) {
      const ssize_t n = ::read(in, buffer, static_cast<size_t>(std::min<uint64_t>(left, sizeof buffer)));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) fail(display(folder / file) + " changed while it was packed");
      if (!write_all(out, buffer, static_cast<size_t>(n))) fail(std::strerror(errno));
      left -= static_cast<uint64_t>(n);
    }
    if (!write_all(out, "\n", 1)) fail(std::strerror(errno));
  }
  if (!write_all(out, "end\n", 4)) fail(std::strerror(errno));
  if (::fsync(out) != 0) fail(std::strerror(errno));
}

std::vector<std::string> read_archive(const fs::path& archive, const fs::path& folder,
                                      const std::string& display_name) {
  const int in = ::open(archive.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (in < 0) refuse("cannot open the downloaded archive " + display(archive) + ": " + std::strerror(errno));
  Fd in_guard{in};
  Reader reader(in);
  auto malformed = [&](const std::string& why) {
    refuse("the bundle archive " + display_name + " is not valid at byte " + std::to_string(reader.offset()) + ": " +
           why + ". Nothing was installed; ask the repository's maintainers to publish it again with `memplan "
           "bundle publish`");
  };
  std::string line;
  if (!reader.line(line) || line + "\n" != kMagic)
    malformed("it does not start with \"memplan-bundle-archive 1\" (is it a bundle archive of this format?)");
  std::vector<std::string> written;
  std::set<std::string> seen;
  for (;;) {
    if (!reader.line(line)) malformed("it ends before its \"end\" line, or a header line is too long");
    if (line == "end") break;
    if (!line.starts_with("file ")) malformed("expected a \"file SIZE PATH\" or \"end\" line");
    const size_t space = line.find(' ', 5);
    if (space == std::string::npos) malformed("a \"file\" line needs a size and a path");
    const std::string_view size_text = std::string_view(line).substr(5, space - 5);
    uint64_t size = 0;
    auto [end, error] = std::from_chars(size_text.data(), size_text.data() + size_text.size(), size);
    if (error != std::errc() || end != size_text.data() + size_text.size() || size_text.empty() ||
        (size_text.size() > 1 && size_text.front() == '0') || size > kMaxEntryBytes)
      malformed(std::string(size_text).insert(0, 1, '\'') + "' is not a file size (a decimal number up to 2^40)");
    const std::string path = line.substr(space + 1);
    if (auto why = path_escape_reason(path)) malformed("the file name '" + path + "' " + *why);
    if (!seen.insert(path).second) malformed("the file " + path + " appears twice");
    if (seen.size() > kMaxArchiveEntries)
      malformed("it holds more than " + std::to_string(kMaxArchiveEntries) + " files");
    make_parents(folder, path);
    const fs::path target = folder / path;
    const int out = ::open(target.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (out < 0) malformed("cannot create " + path + " (" + std::strerror(errno) + ")");
    Fd out_guard{out};
    std::string why;
    if (!reader.copy(size, out, why)) malformed(why);
    char newline = 0;
    if (!reader.byte(newline) || newline != '\n') malformed("the file " + path + " is not followed by a newline");
    written.push_back(path);
  }
  char extra = 0;
  if (reader.byte(extra)) malformed("there are bytes after its \"end\" line");
  return written;
}

}  // namespace memplan::bundle
