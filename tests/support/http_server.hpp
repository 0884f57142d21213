// A web server on 127.0.0.1 for tests of bundle repositories: Python's
// http.server (tests/support/repository_server.py) serving a folder on a free
// port. Started in the constructor, which waits at most 10 s for its port;
// ended (SIGTERM, then waited for) in the destructor.
#pragma once

#include <string>
#include <sys/types.h>

namespace memplan::testing {

class LocalHttpServer {
 public:
  explicit LocalHttpServer(const std::string& folder);
  ~LocalHttpServer();
  LocalHttpServer(const LocalHttpServer&) = delete;
  LocalHttpServer& operator=(const LocalHttpServer&) = delete;
  bool started() const { return port_ > 0; }
  // "http://127.0.0.1:PORT" (no trailing slash); "" when it did not start.
  std::string url() const;
  const std::string& problem() const { return problem_; }  // why it did not start

 private:
  pid_t pid_ = -1;
  int port_ = 0;
  std::string problem_;
};

}  // namespace memplan::testing
