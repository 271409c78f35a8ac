// Child processes for tests. Threading: single-threaded test code.
#include "tests/support/subprocess.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "ring/loopback_port.h"
#include "tests/support/test_time.h"

namespace collwatch::testing {

Subprocess::Subprocess(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
                       const std::string& stdout_path, const std::string& stderr_path) {
  pid_ = fork();
  if (pid_ != 0) return;
  setpgid(0, 0);
  // Output to files, without a shell (a sanitizer runtime preloaded into sh crashes it).
  if (!stdout_path.empty()) {
    const int fd = open(stdout_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) dup2(fd, STDOUT_FILENO);
  }
  if (!stderr_path.empty()) {
    const int fd = open(stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) dup2(fd, STDERR_FILENO);
  }
  for (const auto& [name, value] : env) setenv(name.c_str(), value.c_str(), 1);
  std::vector<char*> args;
  for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  execv(args[0], args.data());
  _exit(127);
}

Subprocess::~Subprocess() {
  if (Running()) KillGroup();
}

int Subprocess::Wait(double seconds) {
  if (exit_code_ >= 0) return exit_code_;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(Scaled(seconds));
  do {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      return exit_code_;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  } while (std::chrono::steady_clock::now() < deadline);
  return -1;
}

bool Subprocess::Running() { return Wait(0) < 0; }

void Subprocess::KillGroup() {
  kill(-pid_, SIGKILL);
  kill(pid_, SIGKILL);
  Wait(30);
}

TempDir::TempDir() {
  char pattern[] = "/tmp/collwatch-test-XXXXXX";
  if (mkdtemp(pattern) != nullptr) path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

namespace {

// A loopback TCP socket bound to a port of the kernel's pick; its port through *port.
int BoundLoopbackSocket(int* port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address);
  socklen_t length = sizeof address;
  getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  *port = ntohs(address.sin_port);
  return fd;
}

}  // namespace

int FreeLoopbackPort() {
  const int port = PickLoopbackPort();
  if (port < 0) {
    std::fprintf(stderr, "FreeLoopbackPort: none of %d ports tried in %d-%d could be bound\n", kPickAttempts,
                 kFirstPickedPort, kLastPickedPort);
    std::abort();
  }
  return port;
}

DeadLoopbackPort::DeadLoopbackPort() { fd_ = BoundLoopbackSocket(&port_); }

DeadLoopbackPort::~DeadLoopbackPort() {
  if (fd_ >= 0) close(fd_);
}

}  // namespace collwatch::testing
