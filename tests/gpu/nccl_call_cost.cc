// Host cost of one NCCL call on a real GPU, for the overhead table: run it plain and with
// the preload (scripts/gpu_pytorch.sh alternates the two) and compare.
// One process, a one-rank communicator on GPU 0, a small out-of-place all-reduce (NCCL
// copies the buffer on the device). Prints, as medians over repetitions:
//   enqueue_ns: host time per call, calls issued back to back (what the job's thread pays);
//   latency_us: one call then cudaStreamSynchronize (a small collective's round trip).
// With `primitives` it prints instead what the driver calls a recorded call can use cost
// each, issued back to back on the same stream as the all-reduces.
// Usage: collwatch_nccl_call_cost [CALLS_PER_REPETITION] [REPETITIONS] [primitives]
#include <cuda.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <vector>

#include "tests/gpu/host_timing.h"

namespace {

using collwatch::gpu::Median;
using collwatch::gpu::NowNs;

// Median host time in ns of `step`, timed over `calls` back-to-back calls per repetition.
double TimePerCall(int calls, int repetitions, cudaStream_t stream, const std::function<void()>& step) {
  return collwatch::gpu::TimePerCall(calls, repetitions, step,
                                     [&] { CHECK(cudaStreamSynchronize(stream) == cudaSuccess); });
}

}  // namespace

int main(int argc, char** argv) {
  const int calls = argc > 1 ? std::atoi(argv[1]) : 20000;
  const int repetitions = argc > 2 ? std::atoi(argv[2]) : 9;
  CHECK(calls > 0 && repetitions > 0);
  int device = 0;
  CHECK(cudaSetDevice(device) == cudaSuccess);
  ncclComm_t comm = nullptr;
  CHECK(ncclCommInitAll(&comm, 1, &device) == ncclSuccess);
  cudaStream_t stream = nullptr;
  CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess);
  float* send = nullptr;
  float* recv = nullptr;
  CHECK(cudaMalloc(&send, 1024) == cudaSuccess);
  CHECK(cudaMalloc(&recv, 1024) == cudaSuccess);

  auto all_reduce = [&] { CHECK(ncclAllReduce(send, recv, 8, ncclFloat32, ncclSum, comm, stream) == ncclSuccess); };
  for (int i = 0; i < 1000; ++i) all_reduce();  // warm up: NCCL's and the driver's first-call work
  CHECK(cudaStreamSynchronize(stream) == cudaSuccess);

  if (argc > 3 && std::strcmp(argv[3], "primitives") == 0) {
    std::vector<cudaEvent_t> events(256);
    for (auto& event : events) CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming) == cudaSuccess);
    CUdeviceptr flag = 0;
    CHECK(cuMemAlloc(&flag, 64) == CUDA_SUCCESS);
    size_t next = 0;
    cudaStreamCaptureStatus capture{};
    CUcontext context = nullptr;
    std::printf("all_reduce_ns %.1f\n", TimePerCall(calls, repetitions, stream, all_reduce));
    std::printf("all_reduce_plus_event_record_ns %.1f\n", TimePerCall(calls, repetitions, stream, [&] {
      all_reduce();
      CHECK(cudaEventRecord(events[next++ % events.size()], stream) == cudaSuccess);
    }));
    std::printf("event_record_ns %.1f\n", TimePerCall(calls, repetitions, stream, [&] {
      CHECK(cudaEventRecord(events[next++ % events.size()], stream) == cudaSuccess);
    }));
    std::printf("cu_event_record_ns %.1f\n", TimePerCall(calls, repetitions, stream, [&] {
      CHECK(cuEventRecord(reinterpret_cast<CUevent>(events[next++ % events.size()]),
                          reinterpret_cast<CUstream>(stream)) == CUDA_SUCCESS);
    }));
    std::printf("stream_write_value64_ns %.1f\n", TimePerCall(calls, repetitions, stream, [&] {
      CHECK(cuStreamWriteValue64(reinterpret_cast<CUstream>(stream), flag, next++, 0) == CUDA_SUCCESS);
    }));
    std::printf("stream_is_capturing_ns %.1f\n", TimePerCall(calls, repetitions, stream, [&] {
      CHECK(cudaStreamIsCapturing(stream, &capture) == cudaSuccess);
    }));
    std::printf("cu_ctx_get_current_ns %.1f\n", TimePerCall(calls, repetitions, stream, [&] {
      CHECK(cuCtxGetCurrent(&context) == CUDA_SUCCESS);
    }));
    std::printf("event_query_ns %.1f\n", TimePerCall(calls, repetitions, stream, [&] {
      (void)cudaEventQuery(events[next++ % events.size()]);
    }));
    return 0;
  }

  std::vector<double> enqueue_ns;
  std::vector<double> latency_us;
  for (int r = 0; r < repetitions; ++r) {
    enqueue_ns.push_back(TimePerCall(calls, 1, stream, all_reduce));
    std::vector<double> round_trips;
    for (int i = 0; i < 2000; ++i) {
      const double begin = NowNs();
      all_reduce();
      CHECK(cudaStreamSynchronize(stream) == cudaSuccess);
      round_trips.push_back((NowNs() - begin) / 1e3);
    }
    latency_us.push_back(Median(round_trips));
  }
  std::printf("enqueue_ns %.1f latency_us %.3f calls %d repetitions %d\n", Median(enqueue_ns), Median(latency_us),
              calls, repetitions);
  CHECK(ncclCommDestroy(comm) == ncclSuccess);
  return 0;
}
