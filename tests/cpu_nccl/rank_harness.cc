// Fork/reap/kill of rank processes and the per-test shared-memory folder.
// Threading: single-threaded test code.
#include "tests/cpu_nccl/rank_harness.h"

#include <dirent.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

namespace collwatch::cpu_nccl_test {

int g_rank = -1;

Ranks::Ranks(int nranks, const std::function<int(int rank)>& body) {
  std::fflush(stdout);
  std::fflush(stderr);
  for (int r = 0; r < nranks; ++r) {
    const pid_t pid = fork();
    if (pid == 0) {
      g_rank = r;
      int code = 2;
      try {
        code = body(r);
      } catch (...) {
        std::fprintf(stderr, "[rank %d] exception\n", r);
      }
      std::fflush(stdout);
      std::fflush(stderr);
      _exit(code);  // no atexit handlers, no gtest teardown in the child
    }
    pids_.push_back(pid);
    codes_.push_back(pid < 0 ? 127 : -1);
  }
}

Ranks::~Ranks() { KillAll(); }

bool Ranks::Running(int r) {
  if (codes_[r] != -1) return false;
  int status = 0;
  const pid_t got = waitpid(pids_[r], &status, WNOHANG);
  if (got == 0) return true;
  codes_[r] = got < 0 ? 127 : (WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
  return false;
}

bool Ranks::WaitAll(double seconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  for (;;) {
    bool any = false;
    for (int r = 0; r < size(); ++r) any |= Running(r);
    if (!any) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

double Ranks::CpuSeconds(int r) const {
  std::ifstream in("/proc/" + std::to_string(pids_[r]) + "/stat");
  std::string line;
  std::getline(in, line);
  const size_t close = line.rfind(')');
  if (close == std::string::npos) return -1;
  std::istringstream fields(line.substr(close + 2));
  std::string field;
  unsigned long long utime = 0, stime = 0;
  for (int i = 3; i <= 15 && fields >> field; ++i) {  // fields 14, 15: utime, stime
    if (i == 14) utime = std::stoull(field);
    if (i == 15) stime = std::stoull(field);
  }
  return static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

void Ranks::KillAll() {
  for (int r = 0; r < size(); ++r) {
    if (codes_[r] == -1 && pids_[r] > 0) {
      kill(pids_[r], SIGKILL);
      int status = 0;
      waitpid(pids_[r], &status, 0);
      codes_[r] = 128 + SIGKILL;
    }
  }
}

void ExpectRanksSucceed(int nranks, double seconds, const std::function<int(int rank)>& body) {
  Ranks ranks(nranks, body);
  EXPECT_TRUE(ranks.WaitAll(seconds)) << "ranks still running after " << seconds << " s";
  ranks.KillAll();
  for (int r = 0; r < nranks; ++r) EXPECT_EQ(ranks.ExitCode(r), 0) << "rank " << r;
}

void ShmDirTest::SetUp() {
  char templ[] = "/dev/shm/collwatch-cpu-nccl-test-XXXXXX";
  ASSERT_NE(mkdtemp(templ), nullptr);
  shm_dir_ = templ;
  setenv("COLLWATCH_CPU_NCCL_SHM_DIR", shm_dir_.c_str(), 1);
}

std::vector<std::string> ShmDirTest::ShmFiles() const {
  std::vector<std::string> names;
  if (DIR* dir = opendir(shm_dir_.c_str())) {
    while (const dirent* entry = readdir(dir)) {
      const std::string name = entry->d_name;
      if (name != "." && name != "..") names.push_back(name);
    }
    closedir(dir);
  }
  return names;
}

void ShmDirTest::TearDown() {
  const std::vector<std::string> left = ShmFiles();
  if (expect_clean_shm_) {
    EXPECT_TRUE(left.empty()) << "segment left behind: " << (left.empty() ? "" : left[0]);
  }
  for (const std::string& name : left) unlink((shm_dir_ + "/" + name).c_str());
  rmdir(shm_dir_.c_str());
  unsetenv("COLLWATCH_CPU_NCCL_SHM_DIR");
}

}  // namespace collwatch::cpu_nccl_test
