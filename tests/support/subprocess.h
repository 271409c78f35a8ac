// Runs a command as a child process (in its own process group) for multi-process
// tests: with extra environment, a time limit, or left running to be killed.
// Threading: single-threaded test code.
#ifndef COLLWATCH_TESTS_SUPPORT_SUBPROCESS_H_
#define COLLWATCH_TESTS_SUPPORT_SUBPROCESS_H_

#include <sys/types.h>

#include <map>
#include <string>
#include <vector>

namespace collwatch::testing {

class Subprocess {
 public:
  // Starts `argv` with the current environment plus `env` (which overrides); stdout
  // and stderr go to the named files when given.
  Subprocess(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
             const std::string& stdout_path = "", const std::string& stderr_path = "");
  ~Subprocess();  // kills the whole group if still running
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;

  pid_t pid() const { return pid_; }
  // Waits up to `seconds` of the default build, scaled for this one (test_time.h: a
  // sanitizer build runs slower; the limit is a safety net against a hang). Returns the
  // exit code (128 + signal when killed), or -1 if it is still running at the deadline.
  int Wait(double seconds);
  bool Running();
  // SIGKILLs the process group and reaps the leader.
  void KillGroup();

 private:
  pid_t pid_ = -1;
  int exit_code_ = -1;
};

// A fresh temporary folder, removed with its contents on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// A loopback TCP port nobody listens on right now, below the kernel's ephemeral range
// (ring/loopback_port.h says why); aborts the test when none can be bound.
int FreeLoopbackPort();

// A loopback TCP port that nobody listens on for this object's life: the port is bound
// and never listened on, so a connection is refused and no other test's collector can
// take it (a port that is merely free now may be some other test's a moment later).
class DeadLoopbackPort {
 public:
  DeadLoopbackPort();
  ~DeadLoopbackPort();
  DeadLoopbackPort(const DeadLoopbackPort&) = delete;
  DeadLoopbackPort& operator=(const DeadLoopbackPort&) = delete;
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

 private:
  int fd_ = -1;
  int port_ = 0;
};

}  // namespace collwatch::testing

#endif  // COLLWATCH_TESTS_SUPPORT_SUBPROCESS_H_
