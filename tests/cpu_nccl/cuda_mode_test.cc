// The CUDA mode of the CPU NCCL backend without a GPU: mode selection and its errors, the
// refusal of buffers that are not host memory when no driver is loaded, and, through a
// fake driver on host memory (fake_cuda_driver.cc, loaded by COLLWATCH_CPU_NCCL_LIBCUDA),
// the stream protocol: calls return before their peers join, streams are held until the
// collective completed, communicators progress independently, revoke/abort release held
// streams with an asynchronous error, lazy module loading is refused.
// Threading: forked rank processes; the fake driver runs a thread per stream.
#include <cuda.h>
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <nccl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "cpu_nccl/float_convert.h"
#include "tests/cpu_nccl/rank_harness.h"

// NCCL 2.28's device API (nccl_device/core.h needs nvcc); opaque arguments suffice here.
extern "C" ncclResult_t ncclDevCommCreate(ncclComm_t, const void*, void*);
extern "C" ncclResult_t ncclDevCommDestroy(ncclComm_t, const void*);

namespace collwatch::cpu_nccl_test {
namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

bool Contains(const char* text, const char* part) {
  return text != nullptr && std::strstr(text, part) != nullptr;
}

// Sets environment variables for one test and restores them after it.
class ScopedEnv {
 public:
  void Set(const char* name, const char* value) {
    const char* old = std::getenv(name);
    saved_.push_back({name, old != nullptr, old != nullptr ? old : ""});
    setenv(name, value, 1);
  }
  ~ScopedEnv() {
    for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) {
      if (it->existed) {
        setenv(it->name.c_str(), it->value.c_str(), 1);
      } else {
        unsetenv(it->name.c_str());
      }
    }
  }

 private:
  struct Saved {
    std::string name;
    bool existed;
    std::string value;
  };
  std::vector<Saved> saved_;
};

class CudaModeTest : public ShmDirTest {
 protected:
  ScopedEnv env_;
};

// An address no mapping covers, as a device pointer is in a process without a driver.
void* UnmappedAddress() {
  const long page = sysconf(_SC_PAGESIZE);
  void* p = mmap(nullptr, static_cast<size_t>(page), PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  munmap(p, static_cast<size_t>(page));
  return p;
}

TEST_F(CudaModeTest, LoadingTheLibraryAsksForEagerModuleLoading) {
  // The test links libnccl.so.2: its constructor ran before main.
  const char* loading = std::getenv("CUDA_MODULE_LOADING");
  ASSERT_NE(loading, nullptr);
  EXPECT_STREQ(loading, "EAGER");
}

TEST_F(CudaModeTest, UnknownModeIsRefusedAtInit) {
  env_.Set("COLLWATCH_CPU_NCCL_CUDA", "sometimes");
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ExpectRanksSucceed(1, kRankTimeout, [&](int) {
    ncclComm_t comm = nullptr;
    RANK_EXPECT(ncclCommInitRank(&comm, 1, id, 0) == ncclInvalidUsage);
    RANK_EXPECT(comm == nullptr);
    RANK_EXPECT(
        Contains(ncclGetLastError(nullptr), "COLLWATCH_CPU_NCCL_CUDA must be auto, on or off"));
    return 0;
  });
}

TEST_F(CudaModeTest, ModeOnWithoutDriverSaysSoAtInit) {
  env_.Set("COLLWATCH_CPU_NCCL_CUDA", "on");
  env_.Set("COLLWATCH_CPU_NCCL_LIBCUDA", "/nonexistent/libcuda.so.1");
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ExpectRanksSucceed(1, kRankTimeout, [&](int) {
    ncclComm_t comm = nullptr;
    RANK_EXPECT(ncclCommInitRank(&comm, 1, id, 0) == ncclUnhandledCudaError);
    const char* message = ncclGetLastError(nullptr);
    RANK_EXPECT(Contains(message, "COLLWATCH_CPU_NCCL_CUDA=on"));
    RANK_EXPECT(Contains(message, "/nonexistent/libcuda.so.1 cannot be loaded"));
    return 0;
  });
}

TEST_F(CudaModeTest, ModeOnWithStubDriverSaysThereIsNoGpu) {
  const char* stub = "/usr/local/cuda/lib64/stubs/libcuda.so";
  if (access(stub, R_OK) != 0) GTEST_SKIP() << "no CUDA stub library at " << stub;
  env_.Set("COLLWATCH_CPU_NCCL_CUDA", "on");
  env_.Set("COLLWATCH_CPU_NCCL_LIBCUDA", stub);
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ExpectRanksSucceed(1, kRankTimeout, [&](int) {
    ncclComm_t comm = nullptr;
    RANK_EXPECT(ncclCommInitRank(&comm, 1, id, 0) == ncclUnhandledCudaError);
    RANK_EXPECT(Contains(ncclGetLastError(nullptr), "cuInit failed"));
    return 0;
  });
}

TEST_F(CudaModeTest, BufferThatIsNotHostMemoryIsRefusedWithoutDriver) {
  env_.Set("COLLWATCH_CPU_NCCL_CUDA", "auto");
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ExpectRanksSucceed(1, kRankTimeout, [&](int) {
    ncclComm_t comm = nullptr;
    RANK_NCCL(ncclCommInitRank(&comm, 1, id, 0));
    void* device_like = UnmappedAddress();
    std::vector<float> host(16, 1.0f);
    RANK_EXPECT(ncclAllReduce(device_like, host.data(), 16, ncclFloat32, ncclSum, comm, nullptr) ==
                ncclInvalidArgument);
    RANK_EXPECT(Contains(ncclGetLastError(nullptr), "neither host memory nor CUDA memory"));
    RANK_EXPECT(ncclAllGather(host.data(), device_like, 16, ncclFloat32, comm, nullptr) ==
                ncclInvalidArgument);
    RANK_EXPECT(ncclSend(device_like, 16, ncclFloat32, 0, comm, nullptr) == ncclInvalidArgument);
    // Inside a group the error also fails ncclGroupEnd, as NCCL's argument errors do.
    RANK_NCCL(ncclGroupStart());
    RANK_EXPECT(ncclRecv(device_like, 16, ncclFloat32, 0, comm, nullptr) == ncclInvalidArgument);
    RANK_EXPECT(ncclGroupEnd() == ncclInvalidArgument);
    // Host buffers still work, whatever the stream argument says.
    auto* some_stream = reinterpret_cast<cudaStream_t>(uintptr_t{0x1000});
    RANK_NCCL(ncclAllReduce(host.data(), host.data(), 16, ncclFloat32, ncclSum, comm, some_stream));
    RANK_EXPECT(host[0] == 1.0f);
    RANK_NCCL(ncclCommDestroy(comm));
    return 0;
  });
}

TEST_F(CudaModeTest, DeviceCommunicatorApiAnswersInvalidUsage) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ExpectRanksSucceed(1, kRankTimeout, [&](int) {
    ncclComm_t comm = nullptr;
    RANK_NCCL(ncclCommInitRank(&comm, 1, id, 0));
    char dev_comm[64] = {};
    RANK_EXPECT(ncclDevCommCreate(comm, nullptr, dev_comm) == ncclInvalidUsage);
    RANK_EXPECT(Contains(ncclGetLastError(nullptr), "ncclDevCommCreate"));
    RANK_EXPECT(ncclDevCommDestroy(comm, dev_comm) == ncclInvalidUsage);
    RANK_EXPECT(Contains(ncclGetLastError(nullptr), "ncclDevCommDestroy"));
    RANK_EXPECT(ncclDevCommCreate(nullptr, nullptr, dev_comm) == ncclInvalidArgument);
    RANK_NCCL(ncclCommDestroy(comm));
    return 0;
  });
}

// The fake driver's extra entry points a program would have from the CUDA runtime.
struct FakeCuda {
  decltype(&::cuMemAlloc_v2) MemAlloc;
  decltype(&::cuStreamCreate) StreamCreate;
  decltype(&::cuStreamSynchronize) StreamSynchronize;
  decltype(&::cuStreamQuery) StreamQuery;
  int (*HoldLaunches)();

  // Loads the same library the backend loads (one copy per process).
  static bool Load(FakeCuda* out) {
    void* library = dlopen(COLLWATCH_FAKE_LIBCUDA, RTLD_NOW | RTLD_GLOBAL);
    if (library == nullptr) return false;
    out->MemAlloc = reinterpret_cast<decltype(out->MemAlloc)>(dlsym(library, "cuMemAlloc_v2"));
    out->StreamCreate =
        reinterpret_cast<decltype(out->StreamCreate)>(dlsym(library, "cuStreamCreate"));
    out->StreamSynchronize =
        reinterpret_cast<decltype(out->StreamSynchronize)>(dlsym(library, "cuStreamSynchronize"));
    out->StreamQuery =
        reinterpret_cast<decltype(out->StreamQuery)>(dlsym(library, "cuStreamQuery"));
    out->HoldLaunches = reinterpret_cast<int (*)()>(dlsym(library, "FakeCudaHoldLaunches"));
    return out->MemAlloc && out->StreamCreate && out->StreamSynchronize && out->StreamQuery &&
           out->HoldLaunches;
  }

  template <typename T>
  T* Alloc(size_t count) const {
    CUdeviceptr p = 0;
    return MemAlloc(&p, count * sizeof(T)) == CUDA_SUCCESS ? reinterpret_cast<T*>(p) : nullptr;
  }
  cudaStream_t NewStream() const {
    CUstream s = nullptr;
    StreamCreate(&s, 0);
    return reinterpret_cast<cudaStream_t>(s);
  }
  void Sync(cudaStream_t s) const { StreamSynchronize(reinterpret_cast<CUstream>(s)); }
  bool Pending(cudaStream_t s) const {
    return StreamQuery(reinterpret_cast<CUstream>(s)) == CUDA_ERROR_NOT_READY;
  }
};

class FakeDriverTest : public CudaModeTest {
 protected:
  void SetUp() override {
    CudaModeTest::SetUp();
    env_.Set("COLLWATCH_CPU_NCCL_CUDA", "on");
    env_.Set("COLLWATCH_CPU_NCCL_LIBCUDA", COLLWATCH_FAKE_LIBCUDA);
  }

  // `n` ranks of one communicator, each with a fake driver and a stream.
  void RunRanks(int n, const std::function<int(int rank, ncclComm_t comm, const FakeCuda& cuda,
                                               cudaStream_t stream)>& body) {
    ncclUniqueId id;
    ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
    ExpectRanksSucceed(n, kRankTimeout, [&, id](int rank) {
      FakeCuda cuda;
      RANK_EXPECT(FakeCuda::Load(&cuda));
      ncclComm_t comm = nullptr;
      RANK_NCCL(ncclCommInitRank(&comm, n, id, rank));
      return body(rank, comm, cuda, cuda.NewStream());  // the body ends the communicator
    });
  }
};

class EveryCollectiveTest : public FakeDriverTest,
                            public ::testing::WithParamInterface<const char*> {};

// COLLWATCH_CPU_NCCL_IPC 1 (the default: the all-gather moves GPU to GPU through the fake's
// IPC; the int32 max reduce-scatter is staged) and 0 (everything staged).
INSTANTIATE_TEST_SUITE_P(Ipc, EveryCollectiveTest, ::testing::Values("1", "0"));

TEST_P(EveryCollectiveTest, OnDeviceBuffers) {
  env_.Set("COLLWATCH_CPU_NCCL_IPC", GetParam());
  const int n = 3;
  RunRanks(n, [n](int rank, ncclComm_t comm, const FakeCuda& cuda, cudaStream_t stream) {
    const size_t count = (1 << 18) + 5;  // several staging chunks of the engine
    auto* send = cuda.Alloc<int32_t>(count * n);
    auto* recv = cuda.Alloc<int32_t>(count * n);
    RANK_EXPECT(send != nullptr && recv != nullptr);
    for (size_t i = 0; i < count * n; ++i) send[i] = static_cast<int32_t>(i % 1000) * (rank + 1);
    auto value = [](int r, size_t i) { return static_cast<int32_t>(i % 1000) * (r + 1); };

    RANK_NCCL(ncclAllReduce(send, recv, count, ncclInt32, ncclSum, comm, stream));
    cuda.Sync(stream);
    for (size_t i = 0; i < count; i += 997) RANK_EXPECT(recv[i] == value(0, i) * 6);

    RANK_NCCL(ncclAllGather(send, recv, count, ncclInt32, comm, stream));
    cuda.Sync(stream);
    for (int r = 0; r < n; ++r) {
      for (size_t i = 0; i < count; i += 997) RANK_EXPECT(recv[r * count + i] == value(r, i));
    }

    RANK_NCCL(ncclReduceScatter(send, recv, count, ncclInt32, ncclMax, comm, stream));
    cuda.Sync(stream);
    for (size_t i = 0; i < count; i += 997) RANK_EXPECT(recv[i] == value(n - 1, rank * count + i));

    RANK_NCCL(ncclBroadcast(send, recv, count, ncclInt32, 1, comm, stream));
    cuda.Sync(stream);
    for (size_t i = 0; i < count; i += 997) RANK_EXPECT(recv[i] == value(1, i));

    // Reduce writes the root's output only.
    for (size_t i = 0; i < count; ++i) recv[i] = -7;
    RANK_NCCL(ncclReduce(send, recv, count, ncclInt32, ncclMin, 2, comm, stream));
    cuda.Sync(stream);
    for (size_t i = 0; i < count; i += 997) {
      RANK_EXPECT(recv[i] == (rank == 2 ? value(0, i) : -7));
    }

    // All-to-all as a group of sends and receives.
    RANK_NCCL(ncclGroupStart());
    for (int peer = 0; peer < n; ++peer) {
      RANK_NCCL(ncclSend(send + peer * count, count, ncclInt32, peer, comm, stream));
      RANK_NCCL(ncclRecv(recv + peer * count, count, ncclInt32, peer, comm, stream));
    }
    RANK_NCCL(ncclGroupEnd());
    cuda.Sync(stream);
    for (int p = 0; p < n; ++p) {
      for (size_t i = 0; i < count; i += 997) {
        RANK_EXPECT(recv[p * count + i] == value(p, rank * count + i));
      }
    }

    // A PreMulSum whose scalar lives in device memory is read in stream order.
    auto* scalar = cuda.Alloc<int32_t>(1);
    *scalar = 3;
    ncclRedOp_t premul;
    RANK_NCCL(ncclRedOpCreatePreMulSum(&premul, scalar, ncclInt32, ncclScalarDevice, comm));
    RANK_NCCL(ncclAllReduce(send, recv, count, ncclInt32, premul, comm, stream));
    cuda.Sync(stream);
    for (size_t i = 0; i < count; i += 997) RANK_EXPECT(recv[i] == value(0, i) * 6 * 3);
    RANK_NCCL(ncclRedOpDestroy(premul, comm));
    // Each of the 7 calls (the group is one) held its stream once, after the one launch
    // that loads the kernel at the first call; the GPU-to-GPU all-gather three times.
    const bool ipc = std::strcmp(std::getenv("COLLWATCH_CPU_NCCL_IPC"), "1") == 0;
    RANK_EXPECT(cuda.HoldLaunches() == 1 + 7 + (ipc ? 2 : 0));
    RANK_NCCL(ncclCommDestroy(comm));
    return 0;
  });
}

TEST_F(FakeDriverTest, CallReturnsBeforePeersJoinAndTheStreamWaits) {
  RunRanks(2, [](int rank, ncclComm_t comm, const FakeCuda& cuda, cudaStream_t stream) {
    auto* buffer = cuda.Alloc<float>(1024);
    for (int i = 0; i < 1024; ++i) buffer[i] = 1.0f;
    if (rank == 0) std::this_thread::sleep_for(std::chrono::milliseconds(500));
    const double start = Now();
    RANK_NCCL(ncclAllReduce(buffer, buffer, 1024, ncclFloat32, ncclSum, comm, stream));
    const double call_seconds = Now() - start;
    if (rank == 1) {
      RANK_EXPECT(call_seconds < 0.25);
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      RANK_EXPECT(cuda.Pending(stream));  // held: rank 0 has not joined yet
      RANK_EXPECT(buffer[0] == 1.0f);
    }
    cuda.Sync(stream);
    RANK_EXPECT(buffer[0] == 2.0f && buffer[1023] == 2.0f);
    RANK_NCCL(ncclCommDestroy(comm));
    return 0;
  });
}

TEST_F(FakeDriverTest, CommunicatorsOnTwoStreamsProgressIndependently) {
  RunRanks(2, [](int rank, ncclComm_t comm_a, const FakeCuda& cuda, cudaStream_t stream_a) {
    ncclComm_t comm_b = nullptr;
    RANK_NCCL(ncclCommSplit(comm_a, 0, rank, &comm_b, nullptr));
    const cudaStream_t stream_b = cuda.NewStream();
    auto* a = cuda.Alloc<float>(256);
    auto* b = cuda.Alloc<float>(256);
    a[0] = b[0] = 1.0f;
    // Rank 1 issues A first; rank 0 joins A only after B completed: one queue would hang.
    if (rank == 1) RANK_NCCL(ncclAllReduce(a, a, 256, ncclFloat32, ncclSum, comm_a, stream_a));
    RANK_NCCL(ncclAllReduce(b, b, 256, ncclFloat32, ncclSum, comm_b, stream_b));
    cuda.Sync(stream_b);
    RANK_EXPECT(b[0] == 2.0f);
    if (rank == 1) RANK_EXPECT(cuda.Pending(stream_a));
    if (rank == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));  // rank 1 looks meanwhile
      RANK_NCCL(ncclAllReduce(a, a, 256, ncclFloat32, ncclSum, comm_a, stream_a));
    }
    cuda.Sync(stream_a);
    RANK_EXPECT(a[0] == 2.0f);
    RANK_NCCL(ncclCommDestroy(comm_b));
    RANK_NCCL(ncclCommDestroy(comm_a));
    return 0;
  });
}

TEST_F(FakeDriverTest, HostCallAfterStreamCallsRunsInIssueOrder) {
  RunRanks(2, [](int rank, ncclComm_t comm, const FakeCuda& cuda, cudaStream_t stream) {
    auto* device = cuda.Alloc<int32_t>(64);
    device[0] = rank + 1;
    std::vector<int32_t> host(64, 10 * (rank + 1));
    if (rank == 0) std::this_thread::sleep_for(std::chrono::milliseconds(200));
    RANK_NCCL(ncclAllReduce(device, device, 64, ncclInt32, ncclSum, comm, stream));
    // The host call waits for the stream's operation of this communicator to complete.
    RANK_NCCL(ncclAllReduce(host.data(), host.data(), 64, ncclInt32, ncclSum, comm, nullptr));
    RANK_EXPECT(host[0] == 30);
    cuda.Sync(stream);
    RANK_EXPECT(device[0] == 3);
    RANK_NCCL(ncclCommDestroy(comm));
    return 0;
  });
}

// Staged (an all-reduce) and GPU to GPU (an all-gather: its three holds are released
// together, its move kernels with nothing to do, so its output stays as it was).
TEST_F(FakeDriverTest, RevokeAndAbortReleaseAHeldStreamWithAnError) {
  for (const bool all_gather : {false, true}) {
    for (const bool revoke_first : {true, false}) {
      SCOPED_TRACE(std::string(all_gather ? "all-gather, " : "all-reduce, ") +
                   (revoke_first ? "revoke, then abort" : "abort"));
      RunRanks(2, [all_gather, revoke_first](int rank, ncclComm_t comm, const FakeCuda& cuda,
                                             cudaStream_t stream) {
                 if (rank == 0) return 0;  // never joins
                 auto* buffer = cuda.Alloc<float>(256);
                 auto* gathered = cuda.Alloc<float>(512);
                 for (int i = 0; i < 256; ++i) buffer[i] = 1.0f;
                 for (int i = 0; i < 512; ++i) gathered[i] = -1.0f;
                 if (all_gather) {
                   RANK_NCCL(ncclAllGather(buffer, gathered, 256, ncclFloat32, comm, stream));
                 } else {
                   RANK_NCCL(ncclAllReduce(buffer, buffer, 256, ncclFloat32, ncclSum, comm, stream));
                 }
                 std::this_thread::sleep_for(std::chrono::milliseconds(200));
                 ncclResult_t async = ncclInternalError;
                 RANK_NCCL(ncclCommGetAsyncError(comm, &async));
                 RANK_EXPECT(async == ncclSuccess);  // waiting is no error
                 RANK_EXPECT(cuda.Pending(stream));
                 if (revoke_first) {
                   RANK_NCCL(ncclCommRevoke(comm, NCCL_REVOKE_DEFAULT));
                   cuda.Sync(stream);
                   RANK_NCCL(ncclCommGetAsyncError(comm, &async));
                   RANK_EXPECT(async == ncclSystemError);
                 }
                 RANK_NCCL(ncclCommAbort(comm));
                 cuda.Sync(stream);  // returns: the stream goes on after the abort
                 RANK_EXPECT(gathered[0] == -1.0f && gathered[256] == -1.0f && gathered[511] == -1.0f);
                 return 0;
               });
    }
  }
}

// GPU to GPU: every rank's move kernel pulls the peers' blocks (all-gather, also in
// place) or sums its own part of every peer's input (reduce-scatter, float32 and bfloat16,
// in rank order), on the collective's own stream between its three hold kernels.
TEST_F(FakeDriverTest, GpuToGpuCollectivesMoveTheDataOnTheirOwnStream) {
  env_.Set("COLLWATCH_CPU_NCCL_IPC", "1");
  RunRanks(3, [](int rank, ncclComm_t comm, const FakeCuda& cuda, cudaStream_t stream) {
    const size_t count = 4099;  // not a multiple of 16 bytes: the byte-wise copy
    auto* send = cuda.Alloc<float>(count * 3);
    auto* recv = cuda.Alloc<float>(count * 3);
    auto value = [](int r, size_t i) { return static_cast<float>(r + 1) * 0.5f + (i % 7); };
    for (size_t i = 0; i < count * 3; ++i) send[i] = value(rank, i);
    const int holds_before = cuda.HoldLaunches();

    RANK_NCCL(ncclAllGather(send, recv, count, ncclFloat32, comm, stream));
    cuda.Sync(stream);
    for (int r = 0; r < 3; ++r) {
      for (size_t i = 0; i < count; ++i) RANK_EXPECT(recv[r * count + i] == value(r, i));
    }
    // In place: the input is this rank's block of the output.
    float* own_block = recv + rank * 1024;
    for (size_t i = 0; i < 3 * 1024; ++i) recv[i] = -1;
    for (size_t i = 0; i < 1024; ++i) own_block[i] = value(rank, i);
    RANK_NCCL(ncclAllGather(own_block, recv, 1024, ncclFloat32, comm, stream));
    cuda.Sync(stream);
    for (int r = 0; r < 3; ++r) {
      for (size_t i = 0; i < 1024; ++i) RANK_EXPECT(recv[r * 1024 + i] == value(r, i));
    }

    RANK_NCCL(ncclReduceScatter(send, recv, count, ncclFloat32, ncclSum, comm, stream));
    cuda.Sync(stream);
    for (size_t i = 0; i < count; ++i) {
      const size_t at = rank * count + i;
      RANK_EXPECT(recv[i] == (value(0, at) + value(1, at)) + value(2, at));
    }

    auto* send16 = reinterpret_cast<uint16_t*>(send);
    auto* recv16 = reinterpret_cast<uint16_t*>(recv);
    for (size_t i = 0; i < count * 3; ++i) send16[i] = cpu_nccl::FloatToBf16(value(rank, i) / 3);
    RANK_NCCL(ncclReduceScatter(send16, recv16, count, ncclBfloat16, ncclSum, comm, stream));
    cuda.Sync(stream);
    for (size_t i = 0; i < count; ++i) {
      const size_t at = rank * count + i;
      float sum = cpu_nccl::Bf16ToFloat(cpu_nccl::FloatToBf16(value(0, at) / 3));
      sum += cpu_nccl::Bf16ToFloat(cpu_nccl::FloatToBf16(value(1, at) / 3));
      sum += cpu_nccl::Bf16ToFloat(cpu_nccl::FloatToBf16(value(2, at) / 3));
      RANK_EXPECT(recv16[i] == cpu_nccl::FloatToBf16(sum));
    }
    // Three hold kernels per collective, after the launch that loads the kernel.
    RANK_EXPECT(cuda.HoldLaunches() - holds_before == 1 + 4 * 3);
    ncclResult_t async = ncclInternalError;
    RANK_NCCL(ncclCommGetAsyncError(comm, &async));
    RANK_EXPECT(async == ncclSuccess);
    RANK_NCCL(ncclCommDestroy(comm));
    return 0;
  });
}

TEST_F(FakeDriverTest, BuffersThatCannotBeSharedFallBackToStagingOnEveryRank) {
  // The fake driver refuses cuIpcGetMemHandle: the GPU-to-GPU path must fall back together.
  env_.Set("COLLWATCH_CPU_NCCL_IPC", "1");
  env_.Set("FAKE_CUDA_NO_IPC", "1");
  RunRanks(3, [](int rank, ncclComm_t comm, const FakeCuda& cuda, cudaStream_t stream) {
    const size_t count = (1 << 17) + 3;
    auto* send = cuda.Alloc<float>(count * 3);
    auto* recv = cuda.Alloc<float>(count * 3);
    for (size_t i = 0; i < count * 3; ++i) send[i] = static_cast<float>(rank + 1) + (i % 4);
    for (int round = 0; round < 2; ++round) {  // twice: the sequence numbers stay in step
      RANK_NCCL(ncclAllGather(send, recv, count, ncclFloat32, comm, stream));
      cuda.Sync(stream);
      for (int r = 0; r < 3; ++r) {
        for (size_t i = 0; i < count; i += 1009) {
          RANK_EXPECT(recv[r * count + i] == static_cast<float>(r + 1) + (i % 4));
        }
      }
      RANK_NCCL(ncclReduceScatter(send, recv, count, ncclFloat32, ncclSum, comm, stream));
      cuda.Sync(stream);
      for (size_t i = 0; i < count; i += 1009) {
        RANK_EXPECT(recv[i] == 6.0f + 3 * ((rank * count + i) % 4));
      }
    }
    // Other collectives are staged as before, in step with the ones above.
    RANK_NCCL(ncclAllReduce(send, recv, count, ncclFloat32, ncclMax, comm, stream));
    cuda.Sync(stream);
    RANK_EXPECT(recv[1] == 4.0f);
    ncclResult_t async = ncclInternalError;
    RANK_NCCL(ncclCommGetAsyncError(comm, &async));
    RANK_EXPECT(async == ncclSuccess);
    RANK_NCCL(ncclCommDestroy(comm));
    return 0;
  });
}

TEST_F(FakeDriverTest, TraceSaysWhatEachStreamOperationDoes) {
  env_.Set("COLLWATCH_CPU_NCCL_TRACE", "1");
  const std::string log = shm_dir_ + "/trace.txt";
  RunRanks(2, [&log](int rank, ncclComm_t comm, const FakeCuda& cuda, cudaStream_t stream) {
    if (freopen(rank == 0 ? log.c_str() : "/dev/null", "w", stderr) == nullptr) return 1;
    auto* buffer = cuda.Alloc<float>(64);
    RANK_NCCL(ncclAllReduce(buffer, buffer, 64, ncclFloat32, ncclSum, comm, stream));
    cuda.Sync(stream);
    RANK_NCCL(ncclCommDestroy(comm));
    if (rank != 0) return 0;
    std::fflush(stderr);
    FILE* file = std::fopen(log.c_str(), "r");
    RANK_EXPECT(file != nullptr);
    std::string text;
    char chunk[256];
    while (std::fgets(chunk, sizeof chunk, file) != nullptr) text += chunk;
    std::fclose(file);
    RANK_EXPECT(text.find("enqueue batch 0 task 0/1: coll kind 1 count 64 dtype 7") !=
                std::string::npos);
    RANK_EXPECT(text.find("start batch 0") != std::string::npos);
    RANK_EXPECT(text.find("end batch 0: done, releasing its streams") != std::string::npos);
    return 0;
  });
  unlink(log.c_str());
}

TEST_F(FakeDriverTest, GraphCaptureIsRefusedWithAMessage) {
  env_.Set("FAKE_CUDA_CAPTURING", "1");
  RunRanks(1, [](int, ncclComm_t comm, const FakeCuda& cuda, cudaStream_t stream) {
    auto* buffer = cuda.Alloc<float>(16);
    RANK_EXPECT(ncclAllReduce(buffer, buffer, 16, ncclFloat32, ncclSum, comm, stream) ==
                ncclInvalidUsage);
    RANK_EXPECT(Contains(ncclGetLastError(nullptr), "captured into a CUDA graph"));
    RANK_EXPECT(!cuda.Pending(stream));  // nothing was enqueued
    RANK_NCCL(ncclCommDestroy(comm));
    return 0;
  });
}

TEST_F(FakeDriverTest, LazyModuleLoadingIsRefusedWithAMessage) {
  env_.Set("FAKE_CUDA_LAZY", "1");
  RunRanks(1, [](int, ncclComm_t comm, const FakeCuda& cuda, cudaStream_t stream) {
    auto* buffer = cuda.Alloc<float>(16);
    RANK_EXPECT(ncclAllReduce(buffer, buffer, 16, ncclFloat32, ncclSum, comm, stream) ==
                ncclInvalidUsage);
    RANK_EXPECT(Contains(ncclGetLastError(nullptr), "CUDA_MODULE_LOADING=EAGER"));
    RANK_NCCL(ncclCommDestroy(comm));
    return 0;
  });
}

}  // namespace
}  // namespace collwatch::cpu_nccl_test
