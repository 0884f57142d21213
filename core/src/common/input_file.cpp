#include "common/input_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "memplan/core/error.hpp"

namespace memplan {
namespace {

// Closes the descriptor on every path out.
struct FileDescriptor {
  int fd;
  ~FileDescriptor() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

std::optional<std::string> read_regular_file(const std::filesystem::path& file, uint64_t limit, std::string& why,
                                             Links links) {
  // O_NONBLOCK: opening a FIFO without a writer must not wait; it changes
  // nothing for regular files.
  const int flags = O_RDONLY | O_NONBLOCK | O_CLOEXEC | (links == Links::refuse ? O_NOFOLLOW : 0);
  FileDescriptor in{::open(file.c_str(), flags)};
  if (in.fd < 0) {
    const int error = errno;
    if (error == ENOENT)
      why = "does not exist";
    else if (error == ELOOP && links == Links::refuse)
      why = "is a symbolic link, which is not accepted here";
    else
      why = std::string("cannot be opened (") + std::strerror(error) + ")";
    return std::nullopt;
  }
  struct stat info {};
  if (::fstat(in.fd, &info) != 0) {
    why = std::string("cannot be read (") + std::strerror(errno) + ")";
    return std::nullopt;
  }
  if (S_ISDIR(info.st_mode)) {
    why = "is a folder, not a file";
    return std::nullopt;
  }
  if (!S_ISREG(info.st_mode)) {
    why = "is a device, pipe or socket, not a regular file";
    return std::nullopt;
  }
  if (static_cast<uint64_t>(info.st_size) > limit) {
    why = "is larger than " + std::to_string(limit) + " bytes, far beyond any file of its kind";
    return std::nullopt;
  }
  std::string bytes;
  bytes.reserve(static_cast<size_t>(info.st_size));
  char buffer[1 << 16];
  for (;;) {
    const ssize_t count = ::read(in.fd, buffer, sizeof buffer);
    if (count < 0) {
      if (errno == EINTR) continue;
      why = std::string("cannot be read (") + std::strerror(errno) + ")";
      return std::nullopt;
    }
    if (count == 0) break;
    // A file that grows while it is read is held to the same limit.
    if (bytes.size() + static_cast<size_t>(count) > limit) {
      why = "is larger than " + std::to_string(limit) + " bytes, far beyond any file of its kind";
      return std::nullopt;
    }
    bytes.append(buffer, static_cast<size_t>(count));
  }
  return bytes;
}

std::string read_input_file(const std::filesystem::path& file, std::string_view what, uint64_t limit) {
  std::string why;
  auto text = read_regular_file(file, limit, why, Links::follow);
  if (!text) throw Error(file.string() + ": error: cannot read the " + std::string(what) + ": it " + why);
  return std::move(*text);
}

std::string read_standard_input(std::string_view what, uint64_t limit) {
  std::string bytes;
  char buffer[1 << 16];
  for (;;) {
    const ssize_t count = ::read(STDIN_FILENO, buffer, sizeof buffer);
    if (count < 0) {
      if (errno == EINTR) continue;
      throw Error("<stdin>: error: cannot read the " + std::string(what) + ": " + std::strerror(errno));
    }
    if (count == 0) return bytes;
    if (bytes.size() + static_cast<size_t>(count) > limit)
      throw Error("<stdin>: error: cannot read the " + std::string(what) + ": it is larger than " +
                  std::to_string(limit) + " bytes, far beyond any file of its kind");
    bytes.append(buffer, static_cast<size_t>(count));
  }
}

}  // namespace memplan
