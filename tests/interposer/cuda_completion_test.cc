// CUDA-event completion tracking (interposer/cuda_completion.h) on the fake CUDA driver
// (tests/cpu_nccl/fake_cuda_driver.cc), loaded here under its SONAME libcuda.so.1 as the
// job's own driver would be: the preload's probe finds it with dlopen(RTLD_NOLOAD).
#include "interposer/cuda_completion.h"

#include <cuda.h>
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <chrono>
#include <set>
#include <thread>

namespace collwatch {
namespace {

struct FakeDriver {
  decltype(&::cuDevicePrimaryCtxRetain) primary_ctx_retain = nullptr;
  decltype(&::cuCtxSetCurrent) ctx_set_current = nullptr;
  decltype(&::cuStreamCreate) stream_create = nullptr;
  void (*move_stream)(CUstream, CUcontext) = nullptr;
};

std::set<uint64_t> g_completed_seqs;
int32_t g_worst_status = 0;

void Collect(const CompletionRequest& request, uint64_t, int32_t cuda_status) {
  g_completed_seqs.insert(request.seq);
  if (cuda_status != 0) g_worst_status = cuda_status;
}

class CudaCompletionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    void* library = dlopen(COLLWATCH_FAKE_LIBCUDA, RTLD_NOW | RTLD_GLOBAL);
    ASSERT_NE(library, nullptr) << dlerror();
    driver_.primary_ctx_retain =
        reinterpret_cast<decltype(driver_.primary_ctx_retain)>(dlsym(library, "cuDevicePrimaryCtxRetain"));
    driver_.ctx_set_current = reinterpret_cast<decltype(driver_.ctx_set_current)>(dlsym(library, "cuCtxSetCurrent"));
    driver_.stream_create = reinterpret_cast<decltype(driver_.stream_create)>(dlsym(library, "cuStreamCreate"));
    driver_.move_stream = reinterpret_cast<decltype(driver_.move_stream)>(dlsym(library, "FakeCudaMoveStream"));
    ASSERT_TRUE(driver_.primary_ctx_retain && driver_.ctx_set_current && driver_.stream_create && driver_.move_stream);
    ASSERT_EQ(driver_.primary_ctx_retain(&gpu0_, 0), CUDA_SUCCESS);
    ASSERT_EQ(driver_.primary_ctx_retain(&gpu1_, 1), CUDA_SUCCESS);
    ProbeCuda();
    ASSERT_TRUE(CudaPresent()) << "the preload's probe did not find the fake driver as libcuda.so.1";
    g_completed_seqs.clear();
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
