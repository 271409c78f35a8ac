// Test-only, for the GPU cost programs: a check that ends the program, and the host time
// per call of a step, issued back to back or in short bursts. Header-only.
#ifndef COLLWATCH_TESTS_GPU_HOST_TIMING_H_
#define COLLWATCH_TESTS_GPU_HOST_TIMING_H_

#include <dirent.h>
#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#define CHECK(call)                                                    \
  do {                                                                 \
    if (!(call)) {                                                     \
      std::fprintf(stderr, "%s failed at line %d\n", #call, __LINE__); \
      std::exit(10);                                                   \
    }                                                                  \
  } while (0)

namespace collwatch::gpu {

inline double NowNs() {
  return static_cast<double>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

inline double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

// Host time in ns per call of `step`, one figure per run of `calls` calls back to back, over
// `runs` runs; `drain` (untimed) lets the device catch up after each run.
inline std::vector<double> PerCallTimes(int runs, int calls, const std::function<void()>& step,
                                        const std::function<void()>& drain) {
  std::vector<double> per_call;
  for (int r = 0; r < runs; ++r) {
    const double start = NowNs();
    for (int i = 0; i < calls; ++i) step();
    per_call.push_back((NowNs() - start) / calls);
    drain();
  }
  return per_call;
}

// Median over `repetitions` of the host time in ns per call, `calls` calls back to back per
// repetition.
inline double TimePerCall(int calls, int repetitions, const std::function<void()>& step,
                          const std::function<void()>& drain) {
  return Median(PerCallTimes(repetitions, calls, step, drain));
}

struct Spread {
  double p10 = 0, p50 = 0, p90 = 0;
};

// Host time in ns per call over `bursts` bursts of `burst_size` calls, each synchronised
// after (untimed). Bursts short enough that the device never falls a launch queue behind
// measure what a call costs the host; long back-to-back runs (TimePerCall) could instead
// be bound by the device once its queue is full (on 2 x H100 they were not:
// docs/profiler-plugin.md).
inline Spread TimePerCallInBursts(int bursts, int burst_size, const std::function<void()>& step,
                                  const std::function<void()>& drain) {
  std::vector<double> per_call = PerCallTimes(bursts, burst_size, step, drain);
  std::sort(per_call.begin(), per_call.end());
  const auto at = [&](double q) { return per_call[static_cast<size_t>(q * (per_call.size() - 1))]; };
  return {at(0.1), at(0.5), at(0.9)};
}

// Host time in ns of a fixed chain of 1,000,000 dependent multiply-adds (about 4 million
// cycles): how fast the core runs the calling thread right now, to set beside a per-call
// figure measured just before (a core slowed by its clock or by a busy SMT sibling slows
// both alike; a slower call path slows only the call).
inline double CpuChainNs() {
  const double start = NowNs();
  uint64_t x = 1;
  for (int i = 0; i < 1'000'000; ++i) x = x * 6364136223846793005ull + 1442695040888963407ull;
  asm volatile("" : : "r"(x));
  return NowNs() - start;
}

// Pins the calling thread to the `index`-th CPU of COLLWATCH_BENCH_CPUS ("3" or "3,11"), when
// set: the per-call cost has two modes that change from one process to the next (issue 19),
// and pinning tells whether the CPU a thread runs on decides them. Prints where it pinned.
inline void PinFromEnvironment(int index) {
  const char* list = std::getenv("COLLWATCH_BENCH_CPUS");
  if (list == nullptr || *list == '\0') return;
  std::stringstream cpus(list);
  std::string cpu;
  for (int i = 0; std::getline(cpus, cpu, ','); ++i) {
    if (i != index) continue;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(std::atoi(cpu.c_str()), &set);
    CHECK(sched_setaffinity(0, sizeof set, &set) == 0);
    std::printf("pinned %d cpu %s\n", index, cpu.c_str());
    return;
  }
}

// What the process's threads did over a measurement: for each, its CPU, time run and time
// spent runnable but waiting for a CPU (/proc/self/task/TID/schedstat), and the timing
// thread's CPU and involuntary switches. Test-only: read once before and once after.
class ThreadUse {
 public:
  ThreadUse() : begin_cpu_(sched_getcpu()), begin_(Snapshot()) {
    rusage usage{};
    getrusage(RUSAGE_THREAD, &usage);
    begin_involuntary_ = usage.ru_nivcsw;
  }

  // Prints "placement ..." for the timing thread, then "thread ..." for every thread that
  // ran at least 1 % of the measurement.
  void Print() const {
    const double window_ns = NowNs() - begin_ns_;
    rusage usage{};
    getrusage(RUSAGE_THREAD, &usage);
    std::printf("placement main_cpu_begin %d main_cpu_end %d main_involuntary_switches %ld window_ms %.0f\n",
                begin_cpu_, sched_getcpu(), usage.ru_nivcsw - begin_involuntary_, window_ns / 1e6);
    for (const Thread& now : Snapshot()) {
      const auto before = std::find_if(begin_.begin(), begin_.end(), [&](const Thread& t) { return t.tid == now.tid; });
      const double run_ns = now.run_ns - (before == begin_.end() ? 0 : before->run_ns);
      const double wait_ns = now.wait_ns - (before == begin_.end() ? 0 : before->wait_ns);
      if (run_ns < window_ns / 100) continue;
      std::printf("thread %d %s cpu %d run_pct %.1f wait_pct %.2f\n", now.tid, now.name.c_str(), now.cpu,
                  100 * run_ns / window_ns, 100 * wait_ns / window_ns);
    }
  }

 private:
  struct Thread {
    int tid = 0;
    std::string name;
    int cpu = -1;
    double run_ns = 0, wait_ns = 0;
  };

  static std::vector<Thread> Snapshot() {
    std::vector<Thread> threads;
    DIR* tasks = opendir("/proc/self/task");
    if (tasks == nullptr) return threads;
    while (const dirent* entry = readdir(tasks)) {
      if (entry->d_name[0] == '.') continue;
      const std::string dir = std::string("/proc/self/task/") + entry->d_name;
      Thread thread;
      thread.tid = std::atoi(entry->d_name);
      std::ifstream(dir + "/comm") >> thread.name;
      std::ifstream(dir + "/schedstat") >> thread.run_ns >> thread.wait_ns;
      // The CPU last run on is field 39 of stat, the 37th after the name's closing ')'.
      std::string stat;
      std::getline(std::ifstream(dir + "/stat"), stat);
      std::stringstream fields(stat.substr(stat.rfind(')') + 1));
      std::string field;
      for (int i = 0; i < 37 && fields >> field; ++i) {
      }
      thread.cpu = std::atoi(field.c_str());
      threads.push_back(thread);
    }
    closedir(tasks);
    return threads;
  }

  int begin_cpu_;
  long begin_involuntary_ = 0;
  double begin_ns_ = NowNs();
  std::vector<Thread> begin_;
};

}  // namespace collwatch::gpu

#endif  // COLLWATCH_TESTS_GPU_HOST_TIMING_H_
