// Cost of one interposed NCCL call against the direct call into a no-op NCCL, measured
// in one process: the preload is dlopen'ed, so both paths run side by side. Also counts
// heap allocations per call (malloc is interposed by this executable).
#include <dlfcn.h>
#include <nccl.h>
#include <stdlib.h>
#include <unistd.h>

#include <time.h>
#include <x86intrin.h>

#include <dirent.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "ring/settings.h"

extern "C" void* __libc_malloc(size_t size);
extern "C" void* __libc_calloc(size_t count, size_t size);
extern "C" void* __libc_realloc(void* pointer, size_t size);

namespace {
std::atomic<uint64_t> g_allocations{0};
}  // namespace

// Every heap allocation of the process passes here.
extern "C" void* malloc(size_t size) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  return __libc_malloc(size);
}
extern "C" void* calloc(size_t count, size_t size) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  return __libc_calloc(count, size);
}
extern "C" void* realloc(void* pointer, size_t size) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  return __libc_realloc(pointer, size);
}

namespace {

using AllReduceFn = decltype(&ncclAllReduce);
using InitFn = decltype(&ncclCommInitRank);

struct Paths {
  AllReduceFn direct_all_reduce = nullptr;
  AllReduceFn interposed_all_reduce = nullptr;
  ncclComm_t direct_comm = nullptr;
  ncclComm_t interposed_comm = nullptr;
};

// The libraries sit beside the build tree's bench/ folder; a copied tree (e.g. carried
// to a GPU machine) works too, else the paths of the build that made this binary.
std::string BuildRelative(const char* relative, const char* fallback) {
  char self[4096] = {};
  const ssize_t length = readlink("/proc/self/exe", self, sizeof self - 1);
  if (length > 0) {
    std::string dir(self, static_cast<size_t>(length));
    dir = dir.substr(0, dir.rfind('/'));
    const std::string candidate = dir + "/" + relative;
    if (access(candidate.c_str(), R_OK) == 0) return candidate;
  }
  return fallback;
}

Paths& GetPaths() {
  static Paths paths = [] {
    Paths p;
    const std::string noop_path =
        BuildRelative("libcollwatch_noop_nccl.so", COLLWATCH_NOOP_NCCL_PATH);
    const std::string preload_path =
        BuildRelative("../interposer/libcollwatch.so", COLLWATCH_PRELOAD_PATH);
    void* noop = dlopen(noop_path.c_str(), RTLD_NOW | RTLD_GLOBAL);
    void* preload = dlopen(preload_path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (noop == nullptr || preload == nullptr) {
      std::fprintf(stderr, "cannot load: %s\n", dlerror());
      std::abort();
    }
    p.direct_all_reduce = reinterpret_cast<AllReduceFn>(dlsym(noop, "ncclAllReduce"));
    p.interposed_all_reduce = reinterpret_cast<AllReduceFn>(dlsym(preload, "ncclAllReduce"));
    auto direct_init = reinterpret_cast<InitFn>(dlsym(noop, "ncclCommInitRank"));
    auto interposed_init = reinterpret_cast<InitFn>(dlsym(preload, "ncclCommInitRank"));
    ncclUniqueId id{};
    direct_init(&p.direct_comm, 8, id, 0);
    interposed_init(&p.interposed_comm, 8, id, 0);
    return p;
  }();
  return paths;
}

uint64_t MonotonicNowNs() {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<uint64_t>(now.tv_sec) * 1000000000ull + static_cast<uint64_t>(now.tv_nsec);
}

void RunAllReduce(benchmark::State& state, AllReduceFn fn, ncclComm_t comm) {
  float buffer[4];
  const uint64_t allocations_before = g_allocations.load();
  for (auto _ : state) {
    benchmark::DoNotOptimize(fn(buffer, buffer, 4, ncclFloat32, ncclSum, comm, nullptr));
  }
  state.counters["allocs_per_call"] = benchmark::Counter(
      static_cast<double>(g_allocations.load() - allocations_before) /
      static_cast<double>(state.iterations()));
}

void BM_AllReduceDirect(benchmark::State& state) {
  Paths& paths = GetPaths();
  RunAllReduce(state, paths.direct_all_reduce, paths.direct_comm);
}

void BM_AllReduceInterposed(benchmark::State& state) {
  Paths& paths = GetPaths();
  RunAllReduce(state, paths.interposed_all_reduce, paths.interposed_comm);
}

// The primitives a recorded call is made of, for reading the figures above.
void BM_ClockGettime(benchmark::State& state) {
  timespec now{};
  for (auto _ : state) {
    clock_gettime(CLOCK_MONOTONIC, &now);
    benchmark::DoNotOptimize(now);
  }
}
void BM_Rdtsc(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(__rdtsc());
}
void BM_AtomicFetchAdd(benchmark::State& state) {
  std::atomic<uint64_t> counter{0};
  for (auto _ : state) benchmark::DoNotOptimize(counter.fetch_add(1, std::memory_order_relaxed));
}

BENCHMARK(BM_ClockGettime);
BENCHMARK(BM_Rdtsc);
BENCHMARK(BM_AtomicFetchAdd);
BENCHMARK(BM_AllReduceDirect);
BENCHMARK(BM_AllReduceInterposed);
BENCHMARK(BM_AllReduceInterposed)->Threads(2)->UseRealTime();

// CPU seconds used so far by the preload's watcher thread (named "collwatch"), from
// /proc: the cost of its ticks, which no per-call figure shows.
double WatcherCpuSeconds() {
  DIR* tasks = opendir("/proc/self/task");
  if (tasks == nullptr) return -1;
  double seconds = -1;
  while (dirent* entry = readdir(tasks)) {
    const std::string dir = std::string("/proc/self/task/") + entry->d_name;
    std::ifstream comm(dir + "/comm");
    std::string name;
    if (!std::getline(comm, name) || name != "collwatch") continue;
    std::ifstream stat(dir + "/stat");
    std::string line;
    std::getline(stat, line);
    // Fields after the parenthesised name: state is field 3, utime 14, stime 15.
    std::istringstream fields(line.substr(line.rfind(')') + 2));
    std::vector<std::string> values{std::istream_iterator<std::string>(fields), {}};
    if (values.size() > 12) {
      seconds = static_cast<double>(std::stoull(values[11]) + std::stoull(values[12])) /
                static_cast<double>(sysconf(_SC_CLK_TCK));
    }
  }
  closedir(tasks);
  return seconds;
}

}  // namespace

int main(int argc, char** argv) {
  // Rings of this benchmark go to a private temporary folder on tmpfs, where rings live
  // in production: a ring on a disk file system pays write faults after each writeback.
  // COLLWATCH_BENCH_DIR picks another parent folder (to see that cost).
  const char* parent = collwatch::SettingIfSet(collwatch::Setting::kBenchDir);
  std::string pattern = std::string(parent != nullptr ? parent : "/dev/shm") + "/collwatch-bench-XXXXXX";
  std::vector<char> dir(pattern.begin(), pattern.end());
  dir.push_back('\0');
  if (mkdtemp(dir.data()) == nullptr) return 1;
  setenv("COLLWATCH_RING_DIR", (std::string(dir.data()) + "/rings").c_str(), 1);
  benchmark::Initialize(&argc, argv);
  const uint64_t start_ns = MonotonicNowNs();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  const double wall_seconds = static_cast<double>(MonotonicNowNs() - start_ns) / 1e9;
  const double watcher_seconds = WatcherCpuSeconds();
  if (watcher_seconds >= 0) {
    std::printf("watcher thread: %.3f s CPU over %.1f s (%.2f %% of one core)\n", watcher_seconds,
                wall_seconds, 100.0 * watcher_seconds / wall_seconds);
  }
  std::string cleanup = std::string("rm -rf ") + dir.data();
  return std::system(cleanup.c_str()) == 0 ? 0 : 1;
}
