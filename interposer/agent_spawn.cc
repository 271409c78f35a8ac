// Detached start of `collwatch agent` from the preload. Threading: see agent_spawn.h.
#include "interposer/agent_spawn.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "ring/collector_address.h"

extern char** environ;

namespace collwatch {
namespace {

constexpr int kAgentLockFd = 3;

bool Executable(const char* path) noexcept { return path[0] != '\0' && access(path, X_OK) == 0; }

// The collwatch binary: COLLWATCH_AGENT, else near this library.
bool FindAgent(const Config& config, char* out, size_t size) noexcept {
  if (config.agent_path[0] != '\0') {
    std::snprintf(out, size, "%s", config.agent_path);
    return Executable(out);
  }
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&MaybeSpawnAgent), &info) == 0 || info.dli_fname == nullptr) return false;
  char dir[512];
  std::snprintf(dir, sizeof dir, "%s", info.dli_fname);
  char* slash = std::strrchr(dir, '/');
  if (slash == nullptr) return false;
  *slash = '\0';
  static const char* const kRelative[] = {"/collwatch", "/../cli/collwatch", "/../bin/collwatch"};
  for (const char* relative : kRelative) {
    std::snprintf(out, size, "%s%s", dir, relative);
    if (Executable(out)) return true;
  }
  return false;
}

// Yama's ptrace_scope (0 without Yama).
int PtraceScope() noexcept {
  const int fd = open("/proc/sys/kernel/yama/ptrace_scope", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char text[8] = {};
  const ssize_t got = read(fd, text, sizeof text - 1);
  close(fd);
  return got > 0 ? text[0] - '0' : 0;
}

}  // namespace

int32_t SpawnedAgentPid(const Config& config) noexcept {
  char lock_path[512];
  std::snprintf(lock_path, sizeof lock_path, "%s/agent.%s.lock", config.ring_dir, config.job);
  const int fd = open(lock_path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return 0;
  char text[24] = {};
  const ssize_t got = pread(fd, text, sizeof text - 1, 0);
  close(fd);
  int64_t pid = 0;
  ssize_t digits = 0;
  for (; digits < got && text[digits] >= '0' && text[digits] <= '9' && pid < INT32_MAX; ++digits) {
    pid = pid * 10 + (text[digits] - '0');
  }
  const bool whole = digits > 0 && (digits == got || text[digits] == '\n');
  return whole && pid > 1 && pid <= INT32_MAX ? static_cast<int32_t>(pid) : 0;
}

bool AllowAgentToTrace(const Config& config) noexcept {
  if (config.collector[0] == '\0' || config.disabled || PtraceScope() != 1) return true;
  const int32_t pid = SpawnedAgentPid(config);
  if (pid == 0) return false;
  prctl(PR_SET_PTRACER, static_cast<unsigned long>(pid), 0, 0, 0);
  return true;
}

void MaybeSpawnAgent(const Config& config) noexcept {
  if (config.collector[0] == '\0' || config.disabled) return;
  // An agent given a bad address would dial somewhere else (gRPC takes port 99999 as
  // 34463) or nowhere; the rings stay for an agent started by hand. Said once: this runs
  // once per process.
  char why[384];
  if (!CheckCollectorAddress(config.collector, /*min_port=*/1, why, sizeof why)) {
    std::fprintf(stderr, "collwatch: COLLWATCH_COLLECTOR %s; no agent started (the ring stays in %s)\n", why,
                 config.ring_dir);
    return;
  }
  char lock_path[512];
  std::snprintf(lock_path, sizeof lock_path, "%s/agent.%s.lock", config.ring_dir, config.job);
  // The ring folder was checked private when the ring was made; still, never through a link.
  const int lock_fd = open(lock_path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (lock_fd < 0) return;
  if (flock(lock_fd, LOCK_EX | LOCK_NB) != 0) {  // an agent of this node and job runs
    close(lock_fd);
    return;
  }
  char agent[512];
  if (!FindAgent(config, agent, sizeof agent)) {
    if (config.verbose) std::fprintf(stderr, "collwatch: COLLWATCH_COLLECTOR is set but no collwatch binary was found; set COLLWATCH_AGENT\n");
    close(lock_fd);
    return;
  }
  char log_path[512];
  std::snprintf(log_path, sizeof log_path, "%s/agent.%s.log", config.ring_dir, config.job);
  const int log_fd = open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600);
  const int null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);

  // Everything the child needs is built now: after fork only async-signal-safe calls.
  char ring_dir[256], job[64], collector[256], token_file[512], tls_ca[512];
  std::snprintf(ring_dir, sizeof ring_dir, "%s", config.ring_dir);
  std::snprintf(job, sizeof job, "%s", config.job);
  std::snprintf(collector, sizeof collector, "%s", config.collector);
  std::snprintf(token_file, sizeof token_file, "%s", config.token_file);
  std::snprintf(tls_ca, sizeof tls_ca, "%s", config.tls_ca);
  char subcommand[] = "agent", collector_flag[] = "--collector", ring_flag[] = "--ring-dir", job_flag[] = "--job",
       idle_flag[] = "--idle-exit", idle_seconds[] = "30", give_up_flag[] = "--give-up-after",
       give_up_seconds[] = "600", token_flag[] = "--token-file", ca_flag[] = "--tls-ca";
  // An agent whose collector never comes back leaves 10 minutes after the job's last rank.
  char* argv[20] = {agent, subcommand, collector_flag, collector, ring_flag, ring_dir, job_flag, job,
                    idle_flag, idle_seconds, give_up_flag, give_up_seconds};
  int argc = 12;
  // The secrets stay in files: only their paths are on the agent's command line.
  if (token_file[0] != '\0') {
    argv[argc++] = token_flag;
    argv[argc++] = token_file;
  }
  if (tls_ca[0] != '\0') {
    argv[argc++] = ca_flag;
    argv[argc++] = tls_ca;
  }
  argv[argc] = nullptr;
  // The agent runs without the preload (it calls no NCCL; no reason to load us into it).
  static char* envp[4096];
  size_t count = 0;
  for (char** entry = environ; entry != nullptr && *entry != nullptr && count + 1 < 4096; ++entry) {
    if (std::strncmp(*entry, "LD_PRELOAD=", 11) == 0 || std::strncmp(*entry, "NVTX_INJECTION64_PATH=", 22) == 0) continue;
    envp[count++] = *entry;
  }
  envp[count] = nullptr;

  sigset_t all, previous;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &previous);
  const pid_t child = fork();
  if (child == 0) {
    setsid();
    const pid_t agent_pid = fork();
    if (agent_pid != 0) {
      if (agent_pid > 0) {
        char text[24];
        int length = 0;
        char digits[24];
        for (pid_t value = agent_pid; value > 0; value /= 10) digits[length++] = static_cast<char>('0' + value % 10);
        for (int i = 0; i < length; ++i) text[i] = digits[length - 1 - i];
        text[length++] = '\n';
        if (ftruncate(lock_fd, 0) == 0) (void)!pwrite(lock_fd, text, static_cast<size_t>(length), 0);
      }
      _exit(0);
    }
    // Out of the way of descriptors 0-3 while they are rewired (the job may have closed
    // its stdin, so the lock may sit at 0).
    const int lock_copy = fcntl(lock_fd, F_DUPFD, 10);
    if (null_fd >= 0) dup2(null_fd, STDIN_FILENO);
    // Never the job's own stdout or stderr: a launcher reading them to their end would
    // wait for the agent too.
    const int out_fd = log_fd >= 0 ? log_fd : null_fd;
    if (out_fd >= 0) {
      dup2(out_fd, STDOUT_FILENO);
      dup2(out_fd, STDERR_FILENO);
    }
    // The agent keeps the lock (as descriptor 3) for its lifetime, and nothing else of
    // the job's: an inherited socket or pipe would outlive the job in it.
    if (lock_copy >= 0) dup2(lock_copy, kAgentLockFd);  // dup2 clears close-on-exec
#ifdef SYS_close_range
    syscall(SYS_close_range, kAgentLockFd + 1, ~0u, 0);  // ENOSYS before Linux 5.9: they stay
#endif
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    execve(agent, argv, envp);
    _exit(127);
  }
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  if (child > 0) {
    // The intermediate child exits at once; reap it so no zombie is left to the job.
    while (waitpid(child, nullptr, 0) < 0 && errno == EINTR) {
    }
  }
  close(lock_fd);
  if (log_fd >= 0) close(log_fd);
  if (null_fd >= 0) close(null_fd);
}

}  // namespace collwatch
