// A small multi-process NCCL program: the launcher starts N rank processes (fork+exec of
// itself with RANK/WORLD_SIZE/LOCAL_RANK set); rank 0 creates the unique id and hands it
// over through a file. Each rank runs a plan of NCCL calls and checks every result, so
// a preload that altered an argument fails the run. Used by the interposition tests and
// the README's demo, on the CPU NCCL backend or real NCCL.
#include <dlfcn.h>
#include <fcntl.h>
#include <nccl.h>
#include <nvtx3/nvToolsExt.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <thread>
#include <vector>

#include "tests/programs/rank_launch.h"
#include "ring/settings.h"

static bool g_forked_worker = false;

// LeakSanitizer's check at exit locks every region of ASan's allocator; in a child forked
// from this threaded process one may still be held by a thread that no longer exists
// (GCC 12's ASan takes no lock around fork), which hangs the child for good. The forked
// worker of RunFailPlan turns the check off; without a sanitizer this is never called.
extern "C" int __lsan_is_turned_off();
extern "C" int __lsan_is_turned_off() { return g_forked_worker ? 1 : 0; }

namespace {

#define CHECK_NCCL(call)                                                            \
  do {                                                                              \
    ncclResult_t result_ = (call);                                                  \
    if (result_ != ncclSuccess) {                                                   \
      std::fprintf(stderr, "rank %d: %s failed: %d\n", g_rank, #call, result_);     \
      std::exit(10);                                                                \
    }                                                                               \
  } while (0)

int g_rank = -1;
int g_world = 0;

void Expect(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "rank %d: wrong result: %s\n", g_rank, what);
    std::exit(11);
  }
}

int EnvInt(collwatch::Setting setting, int fallback) {
  const char* value = collwatch::SettingIfSet(setting);
  return value != nullptr ? std::atoi(value) : fallback;
}

// Every collective once, p2p in a group, a coalesced group, a split, teardown.
void RunAllPlan(ncclComm_t comm) {
  const int n = g_world;
  const int r = g_rank;
  std::vector<float> send(8 * n), recv(8 * n);
  cudaStream_t stream = nullptr;

  nvtxRangePushA("collectives");
  for (int i = 0; i < 8; ++i) send[i] = static_cast<float>(r + i);
  CHECK_NCCL(ncclAllReduce(send.data(), recv.data(), 8, ncclFloat32, ncclSum, comm, stream));
  for (int i = 0; i < 8; ++i) Expect(recv[i] == static_cast<float>(n * i + n * (n - 1) / 2), "allreduce");

  for (int i = 0; i < 8; ++i) send[i] = r == 1 % n ? 100.0f + i : -1.0f;
  CHECK_NCCL(ncclBroadcast(send.data(), recv.data(), 8, ncclFloat32, 1 % n, comm, stream));
  Expect(recv[3] == 103.0f, "broadcast");

  std::vector<int32_t> ints(4, r == 0 ? 7 : 0);
  CHECK_NCCL(ncclBcast(ints.data(), 4, ncclInt32, 0, comm, stream));
  Expect(ints[2] == 7, "bcast");

  for (int i = 0; i < 8; ++i) send[i] = 1.0f;
  CHECK_NCCL(ncclReduce(send.data(), recv.data(), 8, ncclFloat32, ncclSum, 0, comm, stream));
  if (r == 0) Expect(recv[0] == static_cast<float>(n), "reduce");

  for (int i = 0; i < 4; ++i) send[i] = static_cast<float>(r * 10 + i);
  CHECK_NCCL(ncclAllGather(send.data(), recv.data(), 4, ncclFloat32, comm, stream));
  for (int k = 0; k < n; ++k) Expect(recv[4 * k + 1] == static_cast<float>(k * 10 + 1), "allgather");

  for (int i = 0; i < 2 * n; ++i) send[i] = static_cast<float>(i);
  CHECK_NCCL(ncclReduceScatter(send.data(), recv.data(), 2, ncclFloat32, ncclSum, comm, stream));
  Expect(recv[0] == static_cast<float>(n * 2 * r), "reducescatter");

  for (int i = 0; i < n; ++i) send[i] = static_cast<float>(r * 100 + i);
  CHECK_NCCL(ncclAlltoAll(send.data(), recv.data(), 1, ncclFloat32, comm, stream));
  for (int k = 0; k < n; ++k) Expect(recv[k] == static_cast<float>(k * 100 + r), "alltoall");

  send[0] = static_cast<float>(r);
  CHECK_NCCL(ncclGather(send.data(), recv.data(), 1, ncclFloat32, 0, comm, stream));
  if (r == 0) Expect(recv[n - 1] == static_cast<float>(n - 1), "gather");

  for (int i = 0; i < n; ++i) send[i] = static_cast<float>(i * 3);
  CHECK_NCCL(ncclScatter(send.data(), recv.data(), 1, ncclFloat32, 0, comm, stream));
  Expect(recv[0] == static_cast<float>(r * 3), "scatter");

  nvtxRangePop();

  // Ring exchange in a group: every rank sends right and receives from the left.
  nvtxRangePushA("p2p");
  float out = static_cast<float>(r);
  float in = -1.0f;
  CHECK_NCCL(ncclGroupStart());
  CHECK_NCCL(ncclSend(&out, 1, ncclFloat32, (r + 1) % n, comm, stream));
  CHECK_NCCL(ncclRecv(&in, 1, ncclFloat32, (r + n - 1) % n, comm, stream));
  CHECK_NCCL(ncclGroupEnd());
  Expect(in == static_cast<float>((r + n - 1) % n), "send/recv ring");
  nvtxRangePop();

  // Two all-reduces coalesced in one (nested) group.
  float a = 1.0f, b = 2.0f, a_sum = 0.0f, b_sum = 0.0f;
  CHECK_NCCL(ncclGroupStart());
  CHECK_NCCL(ncclGroupStart());
  CHECK_NCCL(ncclAllReduce(&a, &a_sum, 1, ncclFloat32, ncclSum, comm, stream));
  CHECK_NCCL(ncclGroupEnd());
  CHECK_NCCL(ncclAllReduce(&b, &b_sum, 1, ncclFloat32, ncclSum, comm, stream));
  CHECK_NCCL(ncclGroupEnd());
  Expect(a_sum == static_cast<float>(n) && b_sum == static_cast<float>(2 * n), "grouped allreduce");

  // Split by parity; one all-reduce on each half.
  nvtxRangePushA("split");
  ncclComm_t half = nullptr;
  CHECK_NCCL(ncclCommSplit(comm, r % 2, r, &half, nullptr));
  float one = 1.0f, members = 0.0f;
  CHECK_NCCL(ncclAllReduce(&one, &members, 1, ncclFloat32, ncclSum, half, stream));
  Expect(members == static_cast<float>((n + 1 - r % 2) / 2), "split allreduce");
  nvtxRangePop();

  ncclResult_t async_error = ncclSuccess;
  CHECK_NCCL(ncclCommGetAsyncError(comm, &async_error));
  Expect(async_error == ncclSuccess, "async error");

  CHECK_NCCL(ncclCommDestroy(half));
  CHECK_NCCL(ncclCommFinalize(comm));
  CHECK_NCCL(ncclCommDestroy(comm));
}

// Rank 1 skips the second all-reduce: the others block in it forever (a real hang).
void RunSkipPlan(ncclComm_t comm) {
  float value = 1.0f, sum = 0.0f;
  CHECK_NCCL(ncclAllReduce(&value, &sum, 1, ncclFloat32, ncclSum, comm, nullptr));
  std::printf("rank %d: first all-reduce done\n", g_rank);
  std::fflush(stdout);
  if (g_rank != 1) {
    CHECK_NCCL(ncclAllReduce(&value, &sum, 1, ncclFloat32, ncclSum, comm, nullptr));
  }
  pause();  // rank 1 waits here to be killed
}

// PyTorch's desync case: rank 0's first collective is an all-gather, rank 1's a
// reduce-scatter of the same buffer, and nothing follows (the ranks stay inside them).
void RunFirstOpDiffersPlan(ncclComm_t comm) {
  std::vector<float> send(static_cast<size_t>(g_world) * 4, 1.0f), recv(static_cast<size_t>(g_world) * 4, 0.0f);
  if (g_rank == 0) {
    CHECK_NCCL(ncclAllGather(send.data(), recv.data(), 4, ncclFloat32, comm, nullptr));
  } else {
    CHECK_NCCL(ncclReduceScatter(send.data(), recv.data(), 4, ncclFloat32, ncclSum, comm, nullptr));
  }
  pause();  // if the backend returned at all, wait here to be killed
}

// Two communicators called in opposite orders: rank 0 all-reduces on the world and then on
// a second communicator split from it (as a tensor-parallel and a data-parallel group),
// the other ranks the other way round, after three steps in one order. Each communicator
// agrees on its own; a blocking backend deadlocks (a wait-for cycle).
void RunCommOrderInversionPlan(ncclComm_t comm) {
  ncclComm_t second = nullptr;
  CHECK_NCCL(ncclCommSplit(comm, 0, g_rank, &second, nullptr));
  float value = 1.0f, sum = 0.0f;
  for (int step = 0; step < 3; ++step) {
    CHECK_NCCL(ncclAllReduce(&value, &sum, 1, ncclFloat32, ncclSum, comm, nullptr));
    CHECK_NCCL(ncclAllReduce(&value, &sum, 1, ncclFloat32, ncclSum, second, nullptr));
  }
  nvtxRangePushA(g_rank == 0 ? "world-then-split" : "split-then-world");
  ncclComm_t first = g_rank == 0 ? comm : second;
  ncclComm_t then = g_rank == 0 ? second : comm;
  CHECK_NCCL(ncclAllReduce(&value, &sum, 1, ncclFloat32, ncclSum, first, nullptr));
  CHECK_NCCL(ncclAllReduce(&value, &sum, 1, ncclFloat32, ncclSum, then, nullptr));
  nvtxRangePop();
}

// Every rank sends 4 MiB to the next before receiving from the previous, outside a group,
// after one exchange in a group: a send larger than the pair's buffer waits for its
// receive (as NCCL's rendezvous), so the sends wait for each other in a cycle.
void RunSendCyclePlan(ncclComm_t comm) {
  constexpr size_t kCount = 1 << 20;
  std::vector<float> out(kCount, static_cast<float>(g_rank)), in(kCount, 0.0f);
  const int next = (g_rank + 1) % g_world;
  const int previous = (g_rank + g_world - 1) % g_world;
  CHECK_NCCL(ncclGroupStart());
  CHECK_NCCL(ncclSend(out.data(), kCount, ncclFloat32, next, comm, nullptr));
  CHECK_NCCL(ncclRecv(in.data(), kCount, ncclFloat32, previous, comm, nullptr));
  CHECK_NCCL(ncclGroupEnd());
  Expect(in[7] == static_cast<float>(previous), "grouped exchange");
  nvtxRangePushA("send-first");
  CHECK_NCCL(ncclSend(out.data(), kCount, ncclFloat32, next, comm, nullptr));
  CHECK_NCCL(ncclRecv(in.data(), kCount, ncclFloat32, previous, comm, nullptr));
  nvtxRangePop();
}

// Rank 1 exits with 3 after two all-reduces; the others wait in the third until their
// launcher's teardown reaches them 1.5 s later (a SIGTERM, as torchrun sends the rest of a
// job one of whose ranks failed).
void RunFirstFailsPlan(ncclComm_t comm) {
  float value = 1.0f, sum = 0.0f;
  for (int i = 0; i < 2; ++i) CHECK_NCCL(ncclAllReduce(&value, &sum, 1, ncclFloat32, ncclSum, comm, nullptr));
  if (g_rank == 1) std::exit(3);
  std::thread([] {
    usleep(1500000);
    raise(SIGTERM);
  }).detach();
  CHECK_NCCL(ncclAllReduce(&value, &sum, 1, ncclFloat32, ncclSum, comm, nullptr));
}

// DistributedDataParallel with a parameter unused on rank 1 from the third step: each step
// all-reduces three gradient buckets (1, 4 and 2 MiB); in step 3 rank 1's last bucket is
// never ready, so it issues the first two only, and its next forward fails as DDP's does.
// The others wait in the third until a launcher stops them (SIGTERM after 1.5 s).
void RunUnusedBucketPlan(ncclComm_t comm) {
  const std::vector<size_t> bucket_floats = {256 << 10, 1 << 20, 512 << 10};
  std::vector<float> send(1 << 20, 1.0f), receive(1 << 20);
  for (int step = 1; step <= 3; ++step) {
    for (size_t bucket = 0; bucket < bucket_floats.size(); ++bucket) {
      if (step == 3 && g_rank == 1 && bucket == 2) {
        std::fprintf(stderr, "rank 1: RuntimeError: Expected to have finished reduction in the prior iteration "
                             "before starting a new one.\n");
        std::exit(1);
      }
      if (step == 3 && bucket == 2) {
        std::thread([] {
          usleep(1500000);
          raise(SIGTERM);
        }).detach();
      }
      CHECK_NCCL(ncclAllReduce(send.data(), receive.data(), bucket_floats[bucket], ncclFloat32, ncclSum, comm,
                               nullptr));
    }
  }
}

// Return times: 200 quick all-reduces, then one that rank 0 enters 300 ms before rank 1
// joins it, so rank 0 blocks in it.
void RunLatePlan(ncclComm_t comm) {
  float value = 1.0f, sum = 0.0f;
  for (int i = 0; i < 200; ++i) {
    CHECK_NCCL(ncclAllReduce(&value, &sum, 1, ncclFloat32, ncclSum, comm, nullptr));
  }
  if (g_rank == 1) usleep(300000);
  CHECK_NCCL(ncclAllReduce(&value, &sum, 1, ncclFloat32, ncclSum, comm, nullptr));
  Expect(sum == static_cast<float>(g_world), "late all-reduce");
}

// One rank reaches the second all-reduce 8 s after the others, as a checkpoint on it
// would: sleeping ("straggler": rank 1) or computing ("busy-pause": rank 0, its CPU
// advancing outside NCCL). The job then finishes well.
void RunPausePlan(ncclComm_t comm, int late_rank, bool busy) {
  constexpr double kPauseS = 8;
  float value = 1.0f, sum = 0.0f;
  CHECK_NCCL(ncclAllReduce(&value, &sum, 1, ncclFloat32, ncclSum, comm, nullptr));
  if (g_rank == late_rank) {
    timespec start{}, now{};
    clock_gettime(CLOCK_MONOTONIC, &start);
    volatile double work = 0;
    do {
      if (busy) {
        for (int i = 0; i < 100000; ++i) work = work + 1e-9 * i;
      } else {
        usleep(100000);
      }
      clock_gettime(CLOCK_MONOTONIC, &now);
    } while ((now.tv_sec - start.tv_sec) + (now.tv_nsec - start.tv_nsec) / 1e9 < kPauseS);
  }
  CHECK_NCCL(ncclAllReduce(&value, &sum, 1, ncclFloat32, ncclSum, comm, nullptr));
  Expect(sum == static_cast<float>(g_world), "all-reduce after the pause");
  CHECK_NCCL(ncclCommDestroy(comm));
}

// Waits at a step of the loop plan until the test's gate file allows more steps than
// `step`, and returns how many it allows. Once, as it starts waiting, it writes `step` to
// GATE.<rank> (through a rename, so that the test never reads half a number).
int AwaitGate(const std::string& gate, int step) {
  const std::string reached = gate + "." + std::to_string(g_rank);
  const std::string partial = reached + ".partial";
  if (FILE* file = std::fopen(partial.c_str(), "w")) {
    std::fprintf(file, "%d\n", step);
    std::fclose(file);
    std::rename(partial.c_str(), reached.c_str());
  }
  while (true) {
    int allowed = 0;
    if (FILE* file = std::fopen(gate.c_str(), "r")) {
      if (std::fscanf(file, "%d", &allowed) != 1) allowed = 0;
      std::fclose(file);
    }
    if (allowed > step) return allowed;
    usleep(10000);
  }
}

// COLLWATCH_TEST_LOOP_STEPS all-reduces (default 3000), 1 ms apart: a job that runs long
// enough for the fault tests to kill things under it. Its length is a count, never a
// time, so a slower machine or a sanitizer build records the same calls. With
// COLLWATCH_TEST_LOOP_GATE=FILE a rank runs only as many steps as FILE allows (a number
// the test writes; none while FILE is missing) and says where it waits in FILE.<rank>:
// the test stops the job where its fault must fall, and lets it go on.
void RunLoopPlan(ncclComm_t comm) {
  const int steps = EnvInt(collwatch::Setting::kTestLoopSteps, 3000);
  const char* gate = collwatch::SettingIfSet(collwatch::Setting::kTestLoopGate);
  int allowed = gate == nullptr ? steps : 0;
  float value = 1.0f, sum = 0.0f;
  for (int step = 0; step < steps; ++step) {
    if (step >= allowed) allowed = AwaitGate(gate, step);
    CHECK_NCCL(ncclAllReduce(&value, &sum, 1, ncclFloat32, ncclSum, comm, nullptr));
    Expect(sum == static_cast<float>(g_world), "all-reduce of the loop");
    usleep(1000);
  }
  CHECK_NCCL(ncclCommDestroy(comm));
}

// A forked worker (as a data loader would be) calls NCCL: the preload must stay silent
// there and must not write into its parent's ring.
void RunForkPlan(ncclComm_t comm) {
  const pid_t child = fork();
  if (child == 0) {
    for (int i = 0; i < 100; ++i) ncclGetErrorString(ncclInvalidArgument);
    _exit(0);
  }
  int status = 0;
  waitpid(child, &status, 0);
  Expect(WIFEXITED(status) && WEXITSTATUS(status) == 0, "forked worker");
  CHECK_NCCL(ncclCommDestroy(comm));
}

// Communicator lifecycle corners, 2 ranks: a split where rank 1 opts out
// (NCCL_SPLIT_NOCOLOR), a shrink that drops rank 1, an abort whose asynchronous error is
// polled repeatedly, and ncclCommInitAll of two communicators in one process driven by
// one group.
void RunLifecyclePlan(ncclComm_t comm) {
  ncclComm_t child = nullptr;
  CHECK_NCCL(ncclCommSplit(comm, g_rank == 1 ? NCCL_SPLIT_NOCOLOR : 0, g_rank, &child, nullptr));
  Expect((child == nullptr) == (g_rank == 1), "split with NCCL_SPLIT_NOCOLOR");
  if (g_rank == 0) {
    int excluded = 1;
    ncclComm_t alone = nullptr;
    CHECK_NCCL(ncclCommShrink(comm, &excluded, 1, &alone, nullptr, NCCL_SHRINK_DEFAULT));
    int count = 0;
    CHECK_NCCL(ncclCommCount(alone, &count));
    Expect(count == 1, "shrink");
    CHECK_NCCL(ncclCommDestroy(alone));
    CHECK_NCCL(ncclCommDestroy(child));

    ncclComm_t pair[2] = {nullptr, nullptr};
    CHECK_NCCL(ncclCommInitAll(pair, 2, nullptr));
    float in[2] = {1.0f, 2.0f};
    float out[2] = {0.0f, 0.0f};
    CHECK_NCCL(ncclGroupStart());
    for (int i = 0; i < 2; ++i) {
      CHECK_NCCL(ncclAllReduce(&in[i], &out[i], 1, ncclFloat32, ncclSum, pair[i], nullptr));
    }
    CHECK_NCCL(ncclGroupEnd());
    Expect(out[0] == 3.0f && out[1] == 3.0f, "InitAll group all-reduce");
    for (ncclComm_t c : pair) CHECK_NCCL(ncclCommDestroy(c));
  }
  CHECK_NCCL(ncclCommAbort(comm));
}

// Some all-reduces, then every rank fails: is SIGKILLed, or exits with 3 and leaves a
// forked worker behind that exits with 7 after it (its status must not become the
// rank's); the worker marks DIR/worker_exiting.RANK just before it exits.
void RunFailPlan(ncclComm_t comm, bool killed, const std::string& dir) {
  float value = 1.0f, sum = 0.0f;
  for (int i = 0; i < 2; ++i) CHECK_NCCL(ncclAllReduce(&value, &sum, 1, ncclFloat32, ncclSum, comm, nullptr));
  std::printf("rank %d: failing now\n", g_rank);
  std::fflush(stdout);
  if (killed) kill(getpid(), SIGKILL);
  const pid_t rank_pid = getpid();
  const std::string marker = dir + "/worker_exiting." + std::to_string(g_rank);
  if (fork() == 0) {
    // Nothing that allocates before exit (see g_forked_worker), and exit() itself: its
    // handlers are what must not write the rank's status.
    g_forked_worker = true;
    for (int i = 0; i < 5000 && getppid() == rank_pid; ++i) usleep(1000);
    const int fd = open(marker.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd >= 0) close(fd);
    std::exit(7);
  }
  std::exit(3);
}

// Some all-reduces, then rank 1 stops itself between two of them (a debugger, SIGSTOP, a
// stuck node): the others wait for it in the next one.
void RunStoppedPlan(ncclComm_t comm) {
  float value = 1.0f, sum = 0.0f;
  for (int i = 0; i < 20; ++i) CHECK_NCCL(ncclAllReduce(&value, &sum, 1, ncclFloat32, ncclSum, comm, nullptr));
  if (g_rank == 1) raise(SIGSTOP);
  CHECK_NCCL(ncclAllReduce(&value, &sum, 1, ncclFloat32, ncclSum, comm, nullptr));
}

// An all-reduce captured into a (CPU NCCL backend's emulated) CUDA graph and replayed 3
// times, each result checked, then a barrier; with `skip` the last rank replays it twice
// only, waits 1 s (its host going on to other work) and enters the barrier, while the
// others' third replay waits for it forever. Needs the backend's graph hooks.
int RunGraphPlan(ncclComm_t comm, bool skip) {
  using Begin = void (*)();
  using End = void* (*)();
  using Replay = ncclResult_t (*)(void*);
  using Destroy = void (*)(void*);
  const auto begin = reinterpret_cast<Begin>(dlsym(RTLD_DEFAULT, "collwatchCpuNcclCaptureBegin"));
  const auto end = reinterpret_cast<End>(dlsym(RTLD_DEFAULT, "collwatchCpuNcclCaptureEnd"));
  const auto replay = reinterpret_cast<Replay>(dlsym(RTLD_DEFAULT, "collwatchCpuNcclGraphReplay"));
  const auto destroy = reinterpret_cast<Destroy>(dlsym(RTLD_DEFAULT, "collwatchCpuNcclGraphDestroy"));
  if (begin == nullptr || end == nullptr || replay == nullptr || destroy == nullptr) {
    std::fprintf(stderr, "plan graph needs the CPU NCCL backend's graph emulation\n");
    return 2;
  }
  float values[4] = {0, 0, 0, 0};
  float sums[4] = {0, 0, 0, 0};
  begin();
  CHECK_NCCL(ncclAllReduce(values, sums, 4, ncclFloat32, ncclSum, comm, nullptr));
  void* graph = end();
  Expect(graph != nullptr && sums[0] == 0.0f, "capture runs nothing");
  const int replays = skip && g_rank == g_world - 1 ? 2 : 3;
  for (int i = 0; i < replays; ++i) {
    for (float& value : values) value = static_cast<float>(i + g_rank);
    CHECK_NCCL(replay(graph));
    const float expected = static_cast<float>(g_world * i + g_world * (g_world - 1) / 2);
    Expect(sums[0] == expected && sums[3] == expected, "replayed all-reduce");
  }
  if (replays < 3) usleep(1000 * 1000);
  float one = 1.0f, world = 0.0f;
  CHECK_NCCL(ncclAllReduce(&one, &world, 1, ncclFloat32, ncclSum, comm, nullptr));
  Expect(world == static_cast<float>(g_world), "barrier");
  destroy(graph);
  CHECK_NCCL(ncclCommDestroy(comm));
  return 0;
}

// A stand-in for PyTorch's Flight Recorder, where TORCH_NCCL_DEBUG_INFO_PIPE_FILE is set:
// as ProcessGroupNCCL does, it makes the FIFO `<prefix><rank>.pipe`, holds it open
// read-only and non-blocking, polls it from a thread of its own, and on any byte writes
// a dump to `<TORCH_NCCL_DEBUG_INFO_TEMP_FILE><rank>`, in place.
void StartFakeFlightRecorder() {
  const char* pipe_prefix = collwatch::SettingIfSet(collwatch::Setting::kTorchNcclPipeFile);
  const char* dump_prefix = collwatch::SettingIfSet(collwatch::Setting::kTorchNcclDumpFile);
  if (pipe_prefix == nullptr || dump_prefix == nullptr) return;
  const std::string pipe = std::string(pipe_prefix) + std::to_string(g_rank) + ".pipe";
  const std::string dump = std::string(dump_prefix) + std::to_string(g_rank);
  unlink(pipe.c_str());
  if (mkfifo(pipe.c_str(), 0600) != 0) {
    std::perror("mkfifo");
    std::exit(12);
  }
  const int fd = open(pipe.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    std::perror("open pipe");
    std::exit(12);
  }
  std::thread([fd, dump, rank = g_rank] {
    while (true) {
      char bytes[128];
      if (read(fd, bytes, sizeof bytes) > 0) {
        const std::string entries = "fake Flight Recorder dump of rank " + std::to_string(rank) + "\n";
        const int out = open(dump.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (out >= 0) {
          if (write(out, entries.data(), entries.size()) < 0) std::perror("write dump");
          close(out);
        }
      }
      usleep(500000);  // PyTorch's monitor thread polls about once a second
    }
  }).detach();
}

int RunRank(const std::string& plan, const std::string& dir) {
  StartFakeFlightRecorder();
  // Rank 1 stops itself before its first NCCL call (as SIGSTOP or a debugger would stop
  // it): it has no ring; the others wait for it in communicator creation.
  if (plan == "stopped-before-init" && g_rank == 1) raise(SIGSTOP);
  ncclUniqueId id = collwatch::programs::ExchangeUniqueId(g_rank, dir);
  ncclComm_t comm = nullptr;
  CHECK_NCCL(ncclCommInitRank(&comm, g_world, id, g_rank));
  if (plan == "all") {
    RunAllPlan(comm);
  } else if (plan == "skip") {
    RunSkipPlan(comm);
  } else if (plan == "first-op-differs") {
    RunFirstOpDiffersPlan(comm);
  } else if (plan == "comm-order-inversion") {
    RunCommOrderInversionPlan(comm);
  } else if (plan == "send-cycle") {
    RunSendCyclePlan(comm);
  } else if (plan == "first-fails") {
    RunFirstFailsPlan(comm);
  } else if (plan == "unused-bucket") {
    RunUnusedBucketPlan(comm);
  } else if (plan == "late") {
    RunLatePlan(comm);
  } else if (plan == "straggler" || plan == "busy-pause") {
    RunPausePlan(comm, plan == "straggler" ? 1 : 0, plan == "busy-pause");
  } else if (plan == "fork") {
    RunForkPlan(comm);
  } else if (plan == "lifecycle") {
    RunLifecyclePlan(comm);
  } else if (plan == "loop") {
    RunLoopPlan(comm);
  } else if (plan == "stopped-before-init") {
    RunLatePlan(comm);
  } else if (plan == "stopped") {
    RunStoppedPlan(comm);
  } else if (plan == "exit3" || plan == "sigkill") {
    RunFailPlan(comm, plan == "sigkill", dir);
  } else if (plan == "graph" || plan == "graph-skip") {
    if (const int failed = RunGraphPlan(comm, plan == "graph-skip"); failed != 0) return failed;
  } else {
    std::fprintf(stderr, "unknown plan %s\n", plan.c_str());
    return 2;
  }
  std::printf("rank %d: plan %s passed\n", g_rank, plan.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s NPROC PLAN(all|skip|first-op-differs|comm-order-inversion|send-cycle|first-fails|late|straggler|busy-pause|fork|lifecycle|loop|exit3|sigkill|stopped|stopped-before-init|graph|graph-skip) RENDEZVOUS_DIR\n", argv[0]);
    return 2;
  }
  const int nproc = std::atoi(argv[1]);
  const std::string plan = argv[2];
  const std::string dir = argv[3];
  // As the preload reads them: RANK, else srun's, Open MPI's or PMI's variables.
  g_world = nproc;
  if (const collwatch::LauncherRankVariables* launcher =
          collwatch::LauncherOf([](const char* variable) { return std::getenv(variable); })) {
    g_rank = EnvInt(launcher->rank, -1);
    g_world = EnvInt(launcher->world_size, nproc);
  }
  if (g_rank < 0) return collwatch::programs::LaunchRanks(nproc, argv);
  return RunRank(plan, dir);
}
