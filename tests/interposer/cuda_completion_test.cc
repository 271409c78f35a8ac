// CUDA-event completion tracking (interposer/cuda_completion.h) on the fake CUDA driver
// (tests/cpu_nccl/fake_cuda_driver.cc), loaded here under its SONAME libcuda.so.1 as the
// job's own driver would be: the preload's probe finds it with dlopen(RTLD_NOLOAD).
#include "interposer/cuda_completion.h"

#include <cuda.h>
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <set>
#include <vector>
#include <thread>

namespace collwatch {
namespace {

struct FakeDriver {
  decltype(&::cuDevicePrimaryCtxRetain) primary_ctx_retain = nullptr;
  decltype(&::cuCtxSetCurrent) ctx_set_current = nullptr;
  decltype(&::cuStreamCreate) stream_create = nullptr;
  decltype(&::cuStreamSynchronize) stream_synchronize = nullptr;
  decltype(&::cuModuleLoadData) module_load_data = nullptr;
  decltype(&::cuModuleGetFunction) module_get_function = nullptr;
  decltype(&::cuLaunchKernel) launch_kernel = nullptr;
  void (*move_stream)(CUstream, CUcontext) = nullptr;
  int (*event_queries)() = nullptr;
};

std::set<uint64_t> g_completed_seqs;
std::vector<uint64_t> g_completion_order;
int32_t g_worst_status = 0;

void Collect(const CompletionRequest& request, uint64_t, int32_t cuda_status) {
  g_completed_seqs.insert(request.seq);
  g_completion_order.push_back(request.seq);
  if (cuda_status != 0) g_worst_status = cuda_status;
}

template <typename F>
void Find(void* library, const char* name, F* out) {
  *out = reinterpret_cast<F>(dlsym(library, name));
  ASSERT_NE(*out, nullptr) << name;
}

class CudaCompletionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    void* library = dlopen(COLLWATCH_FAKE_LIBCUDA, RTLD_NOW | RTLD_GLOBAL);
    ASSERT_NE(library, nullptr) << dlerror();
    Find(library, "cuDevicePrimaryCtxRetain", &driver_.primary_ctx_retain);
    Find(library, "cuCtxSetCurrent", &driver_.ctx_set_current);
    Find(library, "cuStreamCreate", &driver_.stream_create);
    Find(library, "cuStreamSynchronize", &driver_.stream_synchronize);
    Find(library, "cuModuleLoadData", &driver_.module_load_data);
    Find(library, "cuModuleGetFunction", &driver_.module_get_function);
    Find(library, "cuLaunchKernel", &driver_.launch_kernel);
    Find(library, "FakeCudaMoveStream", &driver_.move_stream);
    Find(library, "FakeCudaEventQueries", &driver_.event_queries);
    ASSERT_EQ(driver_.primary_ctx_retain(&gpu0_, 0), CUDA_SUCCESS);
    ASSERT_EQ(driver_.primary_ctx_retain(&gpu1_, 1), CUDA_SUCCESS);
    ProbeCuda();
    ASSERT_TRUE(CudaPresent()) << "the preload's probe did not find the fake driver as libcuda.so.1";
    g_completed_seqs.clear();
    g_completion_order.clear();
    g_worst_status = 0;
  }

  CUstream StreamOn(CUcontext context) {
    driver_.ctx_set_current(context);
    CUstream stream = nullptr;
    EXPECT_EQ(driver_.stream_create(&stream, 0), CUDA_SUCCESS);
    return stream;
  }

  static Tracking Track(CUstream stream, uint64_t seq) {
    CompletionRequest request;
    request.seq = seq;
    return TrackAfter(stream, request);
  }

  // Polls as the watcher does until `count` completions came in (or 10 s passed).
  static void AwaitCompletions(size_t count) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (g_completed_seqs.size() < count && std::chrono::steady_clock::now() < deadline) {
      PollCompletions(&Collect);
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }

  // Holds `stream` (the fake's stream-hold kernel) until *release reaches 1; *ready is 1
  // once everything enqueued before it ran.
  void Hold(CUstream stream, std::atomic<uint32_t>* ready, std::atomic<uint32_t>* release) {
    CUmodule module = nullptr;
    CUfunction hold = nullptr;
    ASSERT_EQ(driver_.module_load_data(&module, ".entry collwatch_hold_stream"), CUDA_SUCCESS);
    ASSERT_EQ(driver_.module_get_function(&hold, module, "collwatch_hold_stream"), CUDA_SUCCESS);
    uint32_t token = 1;
    void* params[] = {&ready, &release, &token};
    ASSERT_EQ(driver_.launch_kernel(hold, 1, 1, 1, 1, 1, 1, 0, stream, params, nullptr), CUDA_SUCCESS);
  }

  FakeDriver driver_;
  CUcontext gpu0_ = nullptr;
  CUcontext gpu1_ = nullptr;
};

// One process, two GPUs: after an ncclGroupEnd over both communicators the current context
// is one GPU's, and both streams' work must still be tracked, each in its own context.
TEST_F(CudaCompletionTest, EachStreamIsTrackedInItsOwnContextWhicheverIsCurrent) {
  CUstream on_gpu0 = StreamOn(gpu0_);
  CUstream on_gpu1 = StreamOn(gpu1_);
  driver_.ctx_set_current(gpu0_);
  EXPECT_EQ(Track(on_gpu0, 1), Tracking::kTracked);
  EXPECT_EQ(Track(on_gpu1, 2), Tracking::kTracked);
  driver_.ctx_set_current(gpu1_);
  EXPECT_EQ(Track(on_gpu0, 3), Tracking::kTracked);
  EXPECT_EQ(Track(on_gpu1, 4), Tracking::kTracked);
  AwaitCompletions(4);
  EXPECT_EQ(g_completed_seqs, (std::set<uint64_t>{1, 2, 3, 4}));
  EXPECT_EQ(g_worst_status, 0);
}

// A stream handle this thread has seen may come back as a new stream of another context
// (the old one destroyed, its handle reused): the driver refuses the remembered context's
// event, and the op is tracked in the new one.
TEST_F(CudaCompletionTest, AReusedStreamHandleIsFollowedToItsNewContext) {
  CUstream stream = StreamOn(gpu0_);
  EXPECT_EQ(Track(stream, 1), Tracking::kTracked);
  driver_.move_stream(stream, gpu1_);
  EXPECT_EQ(Track(stream, 2), Tracking::kTracked);
  EXPECT_EQ(Track(stream, 3), Tracking::kTracked);
  AwaitCompletions(3);
  EXPECT_EQ(g_completed_seqs, (std::set<uint64_t>{1, 2, 3}));
}

// Events of one stream complete in order: a poll finds where the done ones end with a few
// queries, not one per event in flight.
TEST_F(CudaCompletionTest, APollAsksAFewEventsPerStreamHoweverManyAreInFlight) {
  CUstream stream = StreamOn(gpu0_);
  for (uint64_t seq = 1; seq <= 100; ++seq) ASSERT_EQ(Track(stream, seq), Tracking::kTracked);
  std::atomic<uint32_t> ready{0};
  std::atomic<uint32_t> release{0};
  Hold(stream, &ready, &release);
  for (uint64_t seq = 101; seq <= 200; ++seq) ASSERT_EQ(Track(stream, seq), Tracking::kTracked);
  while (ready.load() != 1) std::this_thread::sleep_for(std::chrono::milliseconds(1));

  int queries_before = driver_.event_queries();
  EXPECT_EQ(PollCompletions(&Collect), 100u);  // still pending
  EXPECT_LE(driver_.event_queries() - queries_before, 10);
  std::vector<uint64_t> first_hundred;
  for (uint64_t seq = 1; seq <= 100; ++seq) first_hundred.push_back(seq);
  EXPECT_EQ(g_completion_order, first_hundred);

  release.store(1);
  ASSERT_EQ(driver_.stream_synchronize(stream), CUDA_SUCCESS);
  queries_before = driver_.event_queries();
  EXPECT_EQ(PollCompletions(&Collect), 0u);
  EXPECT_EQ(driver_.event_queries() - queries_before, 1);  // the newest is done: so are all
  EXPECT_EQ(g_completed_seqs.size(), 200u);
  EXPECT_EQ(g_completion_order.back(), 200u);
  EXPECT_EQ(g_worst_status, 0);
}

// The NULL stream is the current context's: never remembered as one context's.
TEST_F(CudaCompletionTest, TheNullStreamFollowsTheCurrentContext) {
  driver_.ctx_set_current(gpu0_);
  EXPECT_EQ(Track(nullptr, 1), Tracking::kTracked);
  driver_.ctx_set_current(gpu1_);
  EXPECT_EQ(Track(nullptr, 2), Tracking::kTracked);
  AwaitCompletions(2);
  EXPECT_EQ(g_completed_seqs, (std::set<uint64_t>{1, 2}));
}

}  // namespace
}  // namespace collwatch
