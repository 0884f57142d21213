#include "http_server.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>

namespace memplan::testing {

LocalHttpServer::LocalHttpServer(const std::string& folder) {
  int pipe_fds[2];
  if (::pipe(pipe_fds) != 0) {
    problem_ = "pipe() failed";
    return;
  }
  pid_ = ::fork();
  if (pid_ == 0) {
    ::dup2(pipe_fds[1], STDOUT_FILENO);
    ::close(pipe_fds[0]);
    ::close(pipe_fds[1]);
    ::execl(MEMPLAN_TEST_PYTHON, MEMPLAN_TEST_PYTHON, MEMPLAN_TEST_REPOSITORY_SERVER, folder.c_str(),
            static_cast<char*>(nullptr));
    std::_Exit(127);
  }
  ::close(pipe_fds[1]);
  if (pid_ < 0) {
    ::close(pipe_fds[0]);
    problem_ = "fork() failed";
    return;
  }
  // Reads "port N\n", waiting at most 10 s in all.
  std::string line;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (line.find('\n') == std::string::npos) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    pollfd ready{pipe_fds[0], POLLIN, 0};
    if (::poll(&ready, 1, static_cast<int>(left.count())) <= 0) break;
    char buffer[64];
    const ssize_t n = ::read(pipe_fds[0], buffer, sizeof buffer);
    if (n <= 0) break;
    line.append(buffer, static_cast<size_t>(n));
  }
  ::close(pipe_fds[0]);
  if (line.rfind("port ", 0) == 0) port_ = std::atoi(line.c_str() + 5);
  if (port_ <= 0) problem_ = "the server (" MEMPLAN_TEST_PYTHON " " MEMPLAN_TEST_REPOSITORY_SERVER ") printed '" + line +
                             "' instead of its port within 10 s";
}

LocalHttpServer::~LocalHttpServer() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGTERM);
  // The server ends at once on SIGTERM; after 5 s it is killed.
  for (int i = 0; i < 500; ++i) {
    if (::waitpid(pid_, nullptr, WNOHANG) == pid_) return;
    ::usleep(10'000);
  }
  ::kill(pid_, SIGKILL);
  ::waitpid(pid_, nullptr, 0);
}

std::string LocalHttpServer::url() const { return port_ > 0 ? "http://127.0.0.1:" + std::to_string(port_) : ""; }

}  // namespace memplan::testing
