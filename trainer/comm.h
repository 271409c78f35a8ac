// The trainer's only door to NCCL: every collective and send of the trainer goes through one
// Communicator. On CUDA devices collectives run on a dedicated stream ordered against the
// compute stream both ways; on the CPU (CPU NCCL backend) they are plain host calls.
// Threading: one thread per Communicator, as NCCL requires.
#ifndef COLLWATCH_TRAINER_COMM_H_
#define COLLWATCH_TRAINER_COMM_H_

#include <ATen/ATen.h>
#include <nccl.h>

#include <cstdint>
#include <memory>

namespace collwatch::trainer {

// Makes CUDA device `index` current for this thread (NCCL and LibTorch use it); exits
// with a message in a build without CUDA.
void SelectCudaDevice(int index);

class Communicator {
 public:
  // Rank 0 calls this and shares the bytes with the others.
  static ncclUniqueId NewUniqueId();
  // ncclCommInitRank; exits with NCCL's error on failure. `device` is where tensors live.
  Communicator(int rank, int world_size, const ncclUniqueId& id, const at::Device& device);
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const { return rank_; }
  int world_size() const { return world_size_; }

  // `full` (world_size * shard elements, same dtype) receives every rank's shard.
  void AllGather(const at::Tensor& shard, const at::Tensor& full);
  // Average over ranks of `full`, this rank's slice into `shard` (same dtype).
  void ReduceScatterAverage(const at::Tensor& full, const at::Tensor& shard);
  void Broadcast(const at::Tensor& tensor, int root);
  // Point-to-point (pipeline stages): `tensor` to / from `peer`, contiguous; the receiving
  // tensor has the sender's shape and dtype.
  void Send(const at::Tensor& tensor, int peer);
  void Recv(const at::Tensor& tensor, int peer);

  // Bytes received by all-gathers since the last reset (for the run's report lines).
  uint64_t all_gather_bytes() const { return all_gather_bytes_; }
  void ResetCounters() { all_gather_bytes_ = 0; }

 private:
  struct CudaStreams;
  void* BeginCollective();  // returns the cudaStream_t to use (NULL on the CPU)
  void PointToPoint(const at::Tensor& tensor, int peer, bool send);
  void EndCollective();

  int rank_;
  int world_size_;
  ncclComm_t comm_ = nullptr;
  std::unique_ptr<CudaStreams> cuda_;
  uint64_t all_gather_bytes_ = 0;
};

}  // namespace collwatch::trainer

#endif  // COLLWATCH_TRAINER_COMM_H_
