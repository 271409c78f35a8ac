// Multi-process harness for the CPU NCCL backend tests: forks one process per rank (the
// ncclUniqueId is made before the fork and inherited), reports each rank's exit status,
// reaps with a time limit and kills leftovers; plus a per-test shared-memory folder.
// Threading: single-threaded test code (the children run the rank bodies).
#ifndef COLLWATCH_TESTS_CPU_NCCL_RANK_HARNESS_H_
#define COLLWATCH_TESTS_CPU_NCCL_RANK_HARNESS_H_

#include <gtest/gtest.h>
#include <nccl.h>
#include <sys/types.h>

#include <cstdio>
#include <functional>
#include <string>
#include <vector>

namespace collwatch::cpu_nccl_test {

// The rank of the current child process (-1 in the test process), for messages.
extern int g_rank;

// Sanitizers slow memory access 10-30 times: tests then send fewer large messages to stay
// within their time limits (the small-message matrices stay complete).
// (GCC says so with __SANITIZE_*__, clang with __has_feature.)
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool kSanitized = true;
#elif defined(__has_feature)
inline constexpr bool kSanitized = __has_feature(address_sanitizer) || __has_feature(thread_sanitizer);
#else
inline constexpr bool kSanitized = false;
#endif

// Seconds a group of ranks may take before the test fails and kills them: a bound on a
// hang, not a speed check. 8 TSan-instrumented ranks on 2 busy cores took 10-20 s.
inline constexpr double kRankTimeout = kSanitized ? 60.0 : 15.0;

// In a rank body: return 1 (failure) with a message unless `cond` holds.
#define RANK_EXPECT(cond)                                                                    \
  do {                                                                                       \
    if (!(cond)) {                                                                           \
      std::fprintf(stderr, "[rank %d] %s:%d: expected %s\n", ::collwatch::cpu_nccl_test::g_rank, \
                   __FILE__, __LINE__, #cond);                                               \
      return 1;                                                                              \
    }                                                                                        \
  } while (0)

// In a rank body: return 1 unless the NCCL call succeeds.
#define RANK_NCCL(call)                                                                      \
  do {                                                                                       \
    const ncclResult_t rank_nccl_result_ = (call);                                           \
    if (rank_nccl_result_ != ncclSuccess) {                                                  \
      std::fprintf(stderr, "[rank %d] %s:%d: %s -> %s\n", ::collwatch::cpu_nccl_test::g_rank, \
                   __FILE__, __LINE__, #call, ncclGetErrorString(rank_nccl_result_));        \
      return 1;                                                                              \
    }                                                                                        \
  } while (0)

// Processes running `body(rank)` (exit status = its return value). Killed (SIGKILL) and
// reaped on destruction if still running.
class Ranks {
 public:
  Ranks(int nranks, const std::function<int(int rank)>& body);
  ~Ranks();
  Ranks(const Ranks&) = delete;
  Ranks& operator=(const Ranks&) = delete;

  int size() const { return static_cast<int>(pids_.size()); }
  // Waits until every rank has exited or `seconds` passed; true if all exited.
  bool WaitAll(double seconds);
  // Reaps rank r if it exited (WNOHANG); true while it runs.
  bool Running(int r);
  // Exit code of rank r; -1 while running, 128 + signal if killed.
  int ExitCode(int r) const { return codes_[r]; }
  // User + system CPU seconds used so far by rank r (from /proc, while it runs).
  double CpuSeconds(int r) const;
  void KillAll();

 private:
  std::vector<pid_t> pids_;
  std::vector<int> codes_;
};

// Runs `nranks` ranks and expects every one to exit 0 within `seconds`.
void ExpectRanksSucceed(int nranks, double seconds, const std::function<int(int rank)>& body);

// Gives each test its own COLLWATCH_CPU_NCCL_SHM_DIR and checks, at the end, that no
// segment file was left behind (set expect_clean_shm_ = false where one must stay).
class ShmDirTest : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;
  std::vector<std::string> ShmFiles() const;

  std::string shm_dir_;
  bool expect_clean_shm_ = true;
};

}  // namespace collwatch::cpu_nccl_test

#endif  // COLLWATCH_TESTS_CPU_NCCL_RANK_HARNESS_H_
