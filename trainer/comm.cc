// Communicator (see comm.h): the trainer's NCCL calls, with CUDA stream ordering where the
// LibTorch build has CUDA. Threading: the training thread only.
#include "trainer/comm.h"

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

#if defined(COLLWATCH_TRAINER_CUDA) && __has_include(<c10/cuda/CUDAStream.h>)
#define COLLWATCH_TRAINER_USE_CUDA_STREAMS 1
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace collwatch::trainer {
namespace {

void Check(ncclResult_t result, const char* what) {
  if (result == ncclSuccess) return;
  std::fprintf(stderr, "collwatch-trainer: %s failed: %s\n", what, ncclGetErrorString(result));
  std::exit(3);
}

ncclDataType_t NcclType(const at::Tensor& tensor) {
  switch (tensor.scalar_type()) {
    case at::kFloat: return ncclFloat32;
    case at::kBFloat16: return ncclBfloat16;
    case at::kHalf: return ncclFloat16;
    case at::kInt: return ncclInt32;
    case at::kLong: return ncclInt64;
    default:
      std::fprintf(stderr, "collwatch-trainer: no NCCL type for %s\n",
                   std::string(c10::toString(tensor.scalar_type())).c_str());
      std::exit(3);
  }
}

}  // namespace

#ifdef COLLWATCH_TRAINER_USE_CUDA_STREAMS
// The collective stream and the device it belongs to.
struct Communicator::CudaStreams {
  c10::DeviceIndex device;
  c10::cuda::CUDAStream comm;
};
#else
struct Communicator::CudaStreams {};
#endif

void SelectCudaDevice(int index) {
#ifdef COLLWATCH_TRAINER_USE_CUDA_STREAMS
  c10::cuda::set_device(static_cast<c10::DeviceIndex>(index));
#else
  std::fprintf(stderr, "collwatch-trainer: this build has no CUDA support (LibTorch without CUDA); "
               "cannot use device %d\n", index);
  std::exit(2);
#endif
}

ncclUniqueId Communicator::NewUniqueId() {
  ncclUniqueId id{};
  Check(ncclGetUniqueId(&id), "ncclGetUniqueId");
  return id;
}

Communicator::Communicator(int rank, int world_size, const ncclUniqueId& id,
                           const at::Device& device)
    : rank_(rank), world_size_(world_size) {
  if (device.is_cuda()) {
#ifdef COLLWATCH_TRAINER_USE_CUDA_STREAMS
    cuda_.reset(new CudaStreams{device.index(),
                                c10::cuda::getStreamFromPool(/*isHighPriority=*/false, device.index())});
#else
    std::fprintf(stderr, "collwatch-trainer: this build has no CUDA support (LibTorch without CUDA)\n");
    std::exit(2);
#endif
  }
  Check(ncclCommInitRank(&comm_, world_size, id, rank), "ncclCommInitRank");
}

Communicator::~Communicator() {
  if (comm_ != nullptr) ncclCommDestroy(comm_);
}

void* Communicator::BeginCollective() {
#ifdef COLLWATCH_TRAINER_USE_CUDA_STREAMS
  if (cuda_) {
    // The collective must see everything the compute stream wrote before it.
    at::cuda::CUDAEvent inputs_ready;
    inputs_ready.record(c10::cuda::getCurrentCUDAStream(cuda_->device));
    inputs_ready.block(cuda_->comm);
    return cuda_->comm.stream();
  }
#endif
  return nullptr;
}

void Communicator::EndCollective() {
#ifdef COLLWATCH_TRAINER_USE_CUDA_STREAMS
  if (cuda_) {
    // Compute that reads the result (or frees the buffers) waits for the collective.
    at::cuda::CUDAEvent collective_done;
    collective_done.record(cuda_->comm);
    collective_done.block(c10::cuda::getCurrentCUDAStream(cuda_->device));
  }
#endif
}

void Communicator::AllGather(const at::Tensor& shard, const at::Tensor& full) {
  TORCH_CHECK(shard.is_contiguous() && full.is_contiguous(), "all-gather needs contiguous tensors");
  TORCH_CHECK(full.numel() == shard.numel() * world_size_, "all-gather size mismatch");
  TORCH_CHECK(full.scalar_type() == shard.scalar_type(), "all-gather dtype mismatch");
  void* stream = BeginCollective();
  Check(ncclAllGather(shard.data_ptr(), full.data_ptr(), static_cast<size_t>(shard.numel()),
                      NcclType(shard), comm_, static_cast<cudaStream_t>(stream)),
        "ncclAllGather");
  EndCollective();
  all_gather_bytes_ += static_cast<uint64_t>(full.numel()) * full.element_size();
}

void Communicator::ReduceScatterAverage(const at::Tensor& full, const at::Tensor& shard) {
  TORCH_CHECK(shard.is_contiguous() && full.is_contiguous(), "reduce-scatter needs contiguous tensors");
  TORCH_CHECK(full.numel() == shard.numel() * world_size_, "reduce-scatter size mismatch");
  TORCH_CHECK(full.scalar_type() == shard.scalar_type(), "reduce-scatter dtype mismatch");
  void* stream = BeginCollective();
  Check(ncclReduceScatter(full.data_ptr(), shard.data_ptr(), static_cast<size_t>(shard.numel()),
                          NcclType(full), ncclAvg, comm_, static_cast<cudaStream_t>(stream)),
        "ncclReduceScatter");
  EndCollective();
}

void Communicator::Broadcast(const at::Tensor& tensor, int root) {
  TORCH_CHECK(tensor.is_contiguous(), "broadcast needs a contiguous tensor");
  void* stream = BeginCollective();
  Check(ncclBroadcast(tensor.data_ptr(), tensor.data_ptr(), static_cast<size_t>(tensor.numel()),
                      NcclType(tensor), root, comm_, static_cast<cudaStream_t>(stream)),
        "ncclBroadcast");
  EndCollective();
}

void Communicator::Send(const at::Tensor& tensor, int peer) { PointToPoint(tensor, peer, /*send=*/true); }

void Communicator::Recv(const at::Tensor& tensor, int peer) { PointToPoint(tensor, peer, /*send=*/false); }

void Communicator::PointToPoint(const at::Tensor& tensor, int peer, bool send) {
  TORCH_CHECK(tensor.is_contiguous(), "send and receive need a contiguous tensor");
  auto* stream = static_cast<cudaStream_t>(BeginCollective());
  const auto count = static_cast<size_t>(tensor.numel());
  if (send) {
    Check(ncclSend(tensor.data_ptr(), count, NcclType(tensor), peer, comm_, stream), "ncclSend");
  } else {
    Check(ncclRecv(tensor.data_ptr(), count, NcclType(tensor), peer, comm_, stream), "ncclRecv");
  }
  EndCollective();
}

}  // namespace collwatch::trainer
