// GPU check of the CPU NCCL backend's CUDA mode: N rank processes (fork+exec of itself)
// share ONE GPU through collwatch's libnccl.so.2. Checks every collective and reduce op
// on device buffers against host-computed expectations (integers bit-equal, floats within
// a tolerance), that calls return before their peers join (stream semantics), that two
// communicators on two streams progress independently, that ncclCommRevoke/Abort release
// a blocked stream, and measures all-gather / reduce-scatter bus bandwidth.
// Usage: collwatch_cpu_nccl_cuda_mode NRANKS RENDEZVOUS_DIR [FIGURES_FILE]
// With CUDA_MODE_CHECK_REAL_NCCL=1 (and NVIDIA's libnccl.so.2 in LD_PRELOAD, which then
// stands in for collwatch's: same soname) rank r runs on GPU r and only the results checks
// run: real NCCL against the same expectations, so both agree with each other.
// The checks: cpu_nccl_cuda_mode_{results,streams,bandwidth}.cc.
// Single-threaded per rank; built only with COLLWATCH_BUILD_GPU_PROGRAMS.
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <nccl.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "tests/gpu/cpu_nccl_cuda_mode.h"
#include "tests/programs/rank_launch.h"

namespace collwatch::cuda_mode_check {
namespace {

// Which libnccl.so.2 answers ncclAllReduce in this process.
const char* NcclLibrary() {
  Dl_info info{};
  return dladdr(reinterpret_cast<void*>(&ncclAllReduce), &info) != 0 && info.dli_fname != nullptr
             ? info.dli_fname
             : "?";
}

int Run(const std::string& dir, const char* figures_path) {
  const char* real = std::getenv("CUDA_MODE_CHECK_REAL_NCCL");
  const bool real_nccl = real != nullptr && std::strcmp(real, "1") == 0;
  CUDA(cudaSetDevice(real_nccl ? g_rank : 0));  // one GPU per rank, or every rank on one
  if (g_rank == 0) {
    int version = 0;
    ncclGetVersion(&version);
    std::printf("rank 0: NCCL %d from %s, %s\n", version, NcclLibrary(),
                real_nccl ? "a GPU per rank" : "every rank on GPU 0");
  }
  const ncclUniqueId id = collwatch::programs::ExchangeUniqueId(g_rank, dir);
  ncclComm_t comm = nullptr;
  NCCL(ncclCommInitRank(&comm, g_world, id, g_rank));
  cudaStream_t stream;
  CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

  if (real_nccl) {
    CheckCollectives<int32_t>(comm, stream, ncclInt32, "int32", true);
    CheckCollectives<int64_t>(comm, stream, ncclInt64, "int64", true);
    CheckCollectives<float>(comm, stream, ncclFloat32, "float32", false);
    CheckCollectives<double>(comm, stream, ncclFloat64, "float64", false);
    CheckBfloat16(comm, stream);
    NCCL(ncclCommFinalize(comm));
    NCCL(ncclCommDestroy(comm));
    std::printf("rank %d: %s (%d failures)\n", g_rank, g_failures == 0 ? "all ok" : "FAILED",
                g_failures);
    return g_failures == 0 ? 0 : 1;
  }
  CheckCollectives<int32_t>(comm, stream, ncclInt32, "int32", true);
  CheckStreamSemantics(comm, stream);  // after the first device call has set the mode up
  CheckCollectives<int64_t>(comm, stream, ncclInt64, "int64", true);
  CheckCollectives<float>(comm, stream, ncclFloat32, "float32", false);
  CheckCollectives<double>(comm, stream, ncclFloat64, "float64", false);
  CheckBfloat16(comm, stream);
  CheckManagedAndPinned(comm, stream);
  CheckHostBuffers(comm, stream);
  ncclComm_t second = nullptr;
  NCCL(ncclCommSplit(comm, 0, g_rank, &second, nullptr));
  CheckIndependentStreams(comm, second);
  CheckAbortReleasesStream(comm, true);
  CheckAbortReleasesStream(comm, false);
  FILE* figures = nullptr;
  if (figures_path != nullptr && g_rank == 0) figures = std::fopen(figures_path, "a");
  MeasureBandwidth(comm, stream, figures);
  if (figures != nullptr) std::fclose(figures);
  NCCL(ncclCommFinalize(second));
  NCCL(ncclCommDestroy(second));
  NCCL(ncclCommFinalize(comm));
  NCCL(ncclCommDestroy(comm));
  std::printf("rank %d: %s (%d failures)\n", g_rank, g_failures == 0 ? "all ok" : "FAILED",
              g_failures);
  return g_failures == 0 ? 0 : 1;
}

}  // namespace
}  // namespace collwatch::cuda_mode_check

int main(int argc, char** argv) {
  namespace check = collwatch::cuda_mode_check;
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s NRANKS RENDEZVOUS_DIR [FIGURES_FILE]\n", argv[0]);
    return 2;
  }
  check::g_world = std::atoi(argv[1]);
  const char* rank = std::getenv("RANK");
  if (rank != nullptr) {
    check::g_rank = std::atoi(rank);
    return check::Run(argv[2], argc > 3 ? argv[3] : nullptr);
  }
  return collwatch::programs::LaunchRanks(check::g_world, argv);
}
