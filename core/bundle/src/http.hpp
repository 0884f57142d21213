// The bundle code's only contact with libcurl: GET over http:// or https://,
// with a cap on the size of the answer and on how long a stalled transfer
// may wait. No other scheme is ever followed, redirects included (file://,
// ftp://, ... are refused), so a repository cannot make memplan read a local
// file or talk to anything but a web server.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>

namespace memplan::bundle::http {

// True for "http://HOST..." and "https://HOST..." (lower-case scheme, no
// spaces or control characters, at most 2048 characters).
bool valid_url(std::string_view url);

struct Limits {
  uint64_t max_bytes = 0;
  long connect_timeout_seconds = 15;
  // A transfer that moves less than 1 byte a second for this long is dropped.
  long stall_seconds = 30;
  long total_timeout_seconds = 0;  // 0: no limit beyond the stall limit
  // Polled during the transfer; true stops it (a deferred signal).
  std::function<bool()> cancelled;
};

// The body of `url`, or nullopt-like empty result: returns "" on success and
// otherwise a phrase that completes "cannot download URL: ..." (an HTTP
// status, a timeout, "it is larger than N bytes", a refused redirect).
std::string get(const std::string& url, const Limits& limits, std::string& body);
// The same into a new file (created exclusively, mode 0644); a failed
// transfer removes the file.
std::string get_to_file(const std::string& url, const Limits& limits, const std::filesystem::path& file);

}  // namespace memplan::bundle::http
