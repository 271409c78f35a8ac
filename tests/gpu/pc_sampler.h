// Test-only, for the GPU cost programs: where one thread's time goes. A timer on the
// monotonic clock sends that thread SIGPROF every period (a CPU-time timer fires only at the
// scheduler's tick, a few hundred times a second: too few samples); the handler keeps the
// interrupted instruction's address with the phase the program was in. A system call the
// signal interrupts may return early (EINTR) or be restarted: a profiled run's figures are
// for its profile, not for comparing costs. The timing threads measured here run 99 % of
// the time (they spin rather than sleep), so little is interrupted. After the measurement, Print resolves the
// addresses (dladdr) and prints per phase the share of samples per shared object and the
// hottest places. Header-only; one sampler per process.
#ifndef COLLWATCH_TESTS_GPU_PC_SAMPLER_H_
#define COLLWATCH_TESTS_GPU_PC_SAMPLER_H_

#include <dlfcn.h>
#include <signal.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace collwatch::gpu {

class PcSampler {
 public:
  static constexpr int kPhases = 8;

  // Starts sampling the calling thread every `period_ns` of wall time.
  explicit PcSampler(long period_ns) {
    struct sigaction action {};
    action.sa_sigaction = &OnSignal;
    action.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&action.sa_mask);
    sigaction(SIGPROF, &action, nullptr);
    sigevent event{};
    event.sigev_notify = SIGEV_THREAD_ID;
    event.sigev_signo = SIGPROF;
    event._sigev_un._tid = static_cast<pid_t>(syscall(SYS_gettid));
    if (timer_create(CLOCK_MONOTONIC, &event, &timer_) != 0) return;
    const itimerspec every{{0, period_ns}, {0, period_ns}};
    timer_settime(timer_, 0, &every, nullptr);
    running_ = true;
  }
  ~PcSampler() { Stop(); }
  PcSampler(const PcSampler&) = delete;
  PcSampler& operator=(const PcSampler&) = delete;

  // Samples from now on count for `phase` (0: not measured).
  static void SetPhase(int phase) { phase_.store(phase, std::memory_order_relaxed); }

  void Stop() {
    if (!running_) return;
    timer_delete(timer_);
    running_ = false;
  }

  // For each named phase: "profile PHASE samples N", then "profile_object PHASE PCT OBJECT"
  // for objects with at least 1 % of its samples and "profile_place PHASE PCT OBJECT+OFFSET
  // SYMBOL" for its `places` hottest places (a symbol's start where dladdr names one, else the
  // 256-byte block; SYMBOL is "-" where none covers the address), and every place of the
  // object named `in_full` (nullptr: none).
  void Print(const char* const names[kPhases], int places, const char* in_full) {
    Stop();
    const uint64_t count = std::min<uint64_t>(count_.load(), kMaxSamples);
    for (int phase = 1; phase < kPhases; ++phase) {
      if (names[phase] == nullptr) continue;
      std::map<std::string, uint64_t> objects;
      std::map<std::string, uint64_t> where;
      uint64_t total = 0;
      for (uint64_t i = 0; i < count; ++i) {
        if (samples_[i].phase != phase) continue;
        ++total;
        const auto [object, place] = Place(samples_[i].pc);
        ++objects[object];
        ++where[place];
      }
      std::printf("profile %s samples %llu\n", names[phase], static_cast<unsigned long long>(total));
      if (total == 0) continue;
      for (const auto& [object, n] : objects) {
        if (100 * n >= total) std::printf("profile_object %s %.1f %s\n", names[phase], 100.0 * n / total, object.c_str());
      }
      std::vector<std::pair<uint64_t, std::string>> hottest;
      for (const auto& [place, n] : where) hottest.emplace_back(n, place);
      std::sort(hottest.rbegin(), hottest.rend());
      for (int i = 0; i < static_cast<int>(hottest.size()); ++i) {
        const bool named = in_full != nullptr && hottest[i].second.rfind(std::string(in_full) + "+", 0) == 0;
        if (i >= places && !named) continue;
        std::printf("profile_place %s %.1f %s\n", names[phase], 100.0 * hottest[i].first / total,
                    hottest[i].second.c_str());
      }
    }
  }

 private:
  struct Sample {
    uintptr_t pc;
    int phase;
  };
  static constexpr uint64_t kMaxSamples = 1 << 21;

  static void OnSignal(int, siginfo_t*, void* context) {
    const int phase = phase_.load(std::memory_order_relaxed);
    if (phase == 0) return;
    const uint64_t i = count_.fetch_add(1, std::memory_order_relaxed);
    if (i >= kMaxSamples) return;
    samples_[i] = {static_cast<uintptr_t>(static_cast<ucontext_t*>(context)->uc_mcontext.gregs[REG_RIP]), phase};
  }

  // The object's file name and the place: "OBJECT+0xOFFSET SYMBOL".
  static std::pair<std::string, std::string> Place(uintptr_t pc) {
    Dl_info info{};
    if (dladdr(reinterpret_cast<void*>(pc), &info) == 0 || info.dli_fname == nullptr) {
      return {"unknown", "unknown"};
    }
    std::string object = info.dli_fname;
    object = object.substr(object.rfind('/') + 1);
    const auto base = reinterpret_cast<uintptr_t>(info.dli_fbase);
    uintptr_t start = pc & ~uintptr_t{255};
    std::string symbol = "-";
    if (info.dli_sname != nullptr && info.dli_saddr != nullptr) {
      start = reinterpret_cast<uintptr_t>(info.dli_saddr);
      symbol = info.dli_sname;
    }
    char place[512];
    std::snprintf(place, sizeof place, "%s+0x%lx %s", object.c_str(), static_cast<unsigned long>(start - base),
                  symbol.c_str());
    return {object, place};
  }

  timer_t timer_{};
  bool running_ = false;
  static inline std::atomic<int> phase_{0};
  static inline std::atomic<uint64_t> count_{0};
  static inline Sample samples_[kMaxSamples];
};

}  // namespace collwatch::gpu

#endif  // COLLWATCH_TESTS_GPU_PC_SAMPLER_H_
