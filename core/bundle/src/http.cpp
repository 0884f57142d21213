#include "http.hpp"

#include <curl/curl.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <string>
#include <type_traits>

namespace memplan::bundle::http {
namespace {

constexpr size_t kMaxUrl = 2048;

// libcurl, opened the first time a repository is contacted, not linked: only
// the repository commands need it, and linking it would make every `memplan
// run` load libcurl and the two dozen libraries it depends on (TLS, LDAP,
// SSH, ...), most of a cold start's time. The header still gives the types
// and constants; libcurl.so.4 is Debian's libcurl4 (the .deb depends on it).
struct Curl {
  decltype(&curl_global_init) global_init = nullptr;
  decltype(&curl_easy_init) easy_init = nullptr;
  decltype(&curl_easy_cleanup) easy_cleanup = nullptr;
  decltype(&curl_easy_setopt) easy_setopt = nullptr;
  decltype(&curl_easy_perform) easy_perform = nullptr;
  decltype(&curl_easy_getinfo) easy_getinfo = nullptr;
  decltype(&curl_easy_strerror) easy_strerror = nullptr;
  std::string error;  // why it could not be opened; empty when it was
};

const Curl& curl_library() {
  static const Curl loaded = [] {
    Curl curl;
    void* library = ::dlopen("libcurl.so.4", RTLD_NOW | RTLD_LOCAL);  // never closed: it serves the whole run
    if (library == nullptr) {
      const char* why = ::dlerror();
      curl.error = "memplan needs libcurl to reach bundle repositories, and it could not be loaded (" +
                   std::string(why != nullptr ? why : "libcurl.so.4") +
                   "); install it (Debian: apt-get install libcurl4)";
      return curl;
    }
    auto symbol = [&](auto& function, const char* name) {
      function = reinterpret_cast<std::remove_reference_t<decltype(function)>>(::dlsym(library, name));
      if (function == nullptr && curl.error.empty())
        curl.error = std::string("the libcurl.so.4 found has no ") + name + "; install Debian's libcurl4";
    };
    symbol(curl.global_init, "curl_global_init");
    symbol(curl.easy_init, "curl_easy_init");
    symbol(curl.easy_cleanup, "curl_easy_cleanup");
    symbol(curl.easy_setopt, "curl_easy_setopt");
    symbol(curl.easy_perform, "curl_easy_perform");
    symbol(curl.easy_getinfo, "curl_easy_getinfo");
    symbol(curl.easy_strerror, "curl_easy_strerror");
    if (curl.error.empty()) curl.global_init(CURL_GLOBAL_DEFAULT);
    return curl;
  }();
  return loaded;
}

struct EasyFree {
  void operator()(CURL* handle) const { curl_library().easy_cleanup(handle); }
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

std::string transfer(const std::string& url, const Limits& limits, Sink& sink) {
  if (!valid_url(url)) return "it is not an http:// or https:// URL";
  const Curl& lib = curl_library();
  if (!lib.error.empty()) return lib.error;
  std::unique_ptr<CURL, EasyFree> handle(lib.easy_init());
  if (!handle) return "libcurl could not start a transfer";
  CURL* curl = handle.get();
  char error_text[CURL_ERROR_SIZE] = "";
  sink.max_bytes = limits.max_bytes;
  sink.cancelled = &limits.cancelled;
  lib.easy_setopt(curl, CURLOPT_URL, url.c_str());
  lib.easy_setopt(curl, CURLOPT_ERRORBUFFER, error_text);
  // Only web servers, on the first request and after every redirect.
  lib.easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
  lib.easy_setopt(curl, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
  lib.easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 1L);
  lib.easy_setopt(curl, CURLOPT_MAXREDIRS, 5L);
  lib.easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  lib.easy_setopt(curl, CURLOPT_CONNECTTIMEOUT, limits.connect_timeout_seconds);
  lib.easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT, 1L);
  lib.easy_setopt(curl, CURLOPT_LOW_SPEED_TIME, limits.stall_seconds);
  if (limits.total_timeout_seconds > 0) lib.easy_setopt(curl, CURLOPT_TIMEOUT, limits.total_timeout_seconds);
  // A declared length above the cap is refused before any byte is read.
  lib.easy_setopt(curl, CURLOPT_MAXFILESIZE_LARGE, static_cast<curl_off_t>(limits.max_bytes));
  lib.easy_setopt(curl, CURLOPT_WRITEFUNCTION, write_chunk);
  lib.easy_setopt(curl, CURLOPT_WRITEDATA, &sink);
  lib.easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, progress);
  lib.easy_setopt(curl, CURLOPT_XFERINFODATA, &sink);
  lib.easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
  lib.easy_setopt(curl, CURLOPT_USERAGENT, "memplan");
  // Error statuses are read below, so their bodies must not count as content.
  lib.easy_setopt(curl, CURLOPT_FAILONERROR, 1L);
  const CURLcode code = lib.easy_perform(curl);
  long status = 0;
  lib.easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
  if (code == CURLE_OK) return "";
  if (!sink.stop_reason.empty()) return sink.stop_reason;
  if (code == CURLE_HTTP_RETURNED_ERROR) return "the server answered HTTP " + std::to_string(status);
  if (code == CURLE_FILESIZE_EXCEEDED) return "it is larger than " + std::to_string(limits.max_bytes) + " bytes";
  if (code == CURLE_UNSUPPORTED_PROTOCOL)
    return std::string("it leads to a scheme other than http or https (") +
           (error_text[0] != '\0' ? error_text : lib.easy_strerror(code)) + "), which memplan never follows";
  if (code == CURLE_PARTIAL_FILE) return "the server closed the connection before sending the whole file";
  if (code == CURLE_OPERATION_TIMEDOUT) return "the transfer timed out (" + std::string(error_text) + ")";
  return error_text[0] != '\0' ? std::string(error_text) : std::string(lib.easy_strerror(code));
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
