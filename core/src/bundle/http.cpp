#include "bundle/http.hpp"

#include <curl/curl.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <mutex>

namespace memplan::bundle::http {
namespace {

constexpr size_t kMaxUrl = 2048;

struct EasyFree {
  void operator()(CURL* handle) const { curl_easy_cleanup(handle); }
};

// Where a transfer's bytes go, and why it stopped early when it did.
struct Sink {
  std::string* body = nullptr;
  int fd = -1;
  uint64_t received = 0;
  uint64_t max_bytes = 0;
  std::string stop_reason;
  const std::function<bool()>* cancelled = nullptr;
};

extern "C" size_t write_chunk(char* data, size_t size, size_t count, void* user) {
  Sink& sink = *static_cast<Sink*>(user);
  const size_t bytes = size * count;
  if (sink.received + bytes > sink.max_bytes) {
    sink.stop_reason = "it is larger than " + std::to_string(sink.max_bytes) + " bytes";
    return 0;  // anything but `bytes` stops the transfer
  }
  sink.received += bytes;
  if (sink.body != nullptr) {
    sink.body->append(data, bytes);
    return bytes;
  }
  size_t written = 0;
  while (written < bytes) {
    const ssize_t n = ::write(sink.fd, data + written, bytes - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      sink.stop_reason = std::string("writing it to disk failed: ") + std::strerror(errno);
      return 0;
    }
    written += static_cast<size_t>(n);
  }
  return bytes;
}

extern "C" int progress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  Sink& sink = *static_cast<Sink*>(user);
  if (sink.cancelled != nullptr && *sink.cancelled && (*sink.cancelled)()) {
    sink.stop_reason = "it was interrupted by a signal";
    return 1;
  }
  return 0;
}

void global_init() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

std::string transfer(const std::string& url, const Limits& limits, Sink& sink) {
  if (!valid_url(url)) return "it is not an http:// or https:// URL";
  global_init();
  std::unique_ptr<CURL, EasyFree> handle(curl_easy_init());
  if (!handle) return "libcurl could not start a transfer";
  CURL* curl = handle.get();
  char error_text[CURL_ERROR_SIZE] = "";
  sink.max_bytes = limits.max_bytes;
  sink.cancelled = &limits.cancelled;
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, error_text);
  // Only web servers, on the first request and after every redirect.
  curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(curl, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 1L);
  curl_easy_setopt(curl, CURLOPT_MAXREDIRS, 5L);
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT, limits.connect_timeout_seconds);
  curl_easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(curl, CURLOPT_LOW_SPEED_TIME, limits.stall_seconds);
  if (limits.total_timeout_seconds > 0) curl_easy_setopt(curl, CURLOPT_TIMEOUT, limits.total_timeout_seconds);
  // A declared length above the cap is refused before any byte is read.
  curl_easy_setopt(curl, CURLOPT_MAXFILESIZE_LARGE, static_cast<curl_off_t>(limits.max_bytes));
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, write_chunk);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &sink);
  curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, progress);
  curl_easy_setopt(curl, CURLOPT_XFERINFODATA, &sink);
  curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(curl, CURLOPT_USERAGENT, "memplan");
  // Error statuses are read below, so their bodies must not count as content.
  curl_easy_setopt(curl, CURLOPT_FAILONERROR, 1L);
  const CURLcode code = curl_easy_perform(curl);
  long status = 0;
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
  if (code == CURLE_OK) return "";
  if (!sink.stop_reason.empty()) return sink.stop_reason;
  if (code == CURLE_HTTP_RETURNED_ERROR) return "the server answered HTTP " + std::to_string(status);
  if (code == CURLE_FILESIZE_EXCEEDED) return "it is larger than " + std::to_string(limits.max_bytes) + " bytes";
  if (code == CURLE_UNSUPPORTED_PROTOCOL)
    return std::string("it leads to a scheme other than http or https (") +
           (error_text[0] != '\0' ? error_text : curl_easy_strerror(code)) + "), which memplan never follows";
  if (code == CURLE_PARTIAL_FILE) return "the server closed the connection before sending the whole file";
  if (code == CURLE_OPERATION_TIMEDOUT) return "the transfer timed out (" + std::string(error_text) + ")";
  return error_text[0] != '\0' ? std::string(error_text) : std::string(curl_easy_strerror(code));
}

}  // namespace

bool valid_url(std::string_view url) {
  if (url.size() > kMaxUrl) return false;
  std::string_view rest;
  if (url.starts_with("http://")) rest = url.substr(7);
  else if (url.starts_with("https://")) rest = url.substr(8);
  else return false;
  if (rest.empty() || rest.front() == '/') return false;  // a host is needed
  for (unsigned char c : url)
    if (c <= 0x20 || c == 0x7f || c == '"' || c == '\\') return false;
  return true;
}

std::string get(const std::string& url, const Limits& limits, std::string& body) {
  body.clear();
  Sink sink;
  sink.body = &body;
  std::string why = transfer(url, limits, sink);
  if (!why.empty()) body.clear();
  return why;
}

std::string get_to_file(const std::string& url, const Limits& limits, const std::filesystem::path& file) {
  const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) return "cannot create " + file.string() + ": " + std::strerror(errno);
  Sink sink;
  sink.fd = fd;
  std::string why = transfer(url, limits, sink);
  if (::close(fd) != 0 && why.empty()) why = "writing " + file.string() + " failed: " + std::strerror(errno);
  if (!why.empty()) ::unlink(file.c_str());
  return why;
}

}  // namespace memplan::bundle::http
