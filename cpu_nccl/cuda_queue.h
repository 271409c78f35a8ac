// The CUDA mode's stream side: operations whose buffers are CUDA memory are enqueued on
// their streams (input copy to pinned staging, the stream-holding kernel, output copy) and
// returned from at once; one progress thread per process runs them with the host engine
// when their streams reach them and then releases the streams.
// Threading: EnqueueDeviceTasks runs on the calling thread (it needs its CUDA context);
// the progress thread starts at the first such call, so fork before it stays safe.
#ifndef COLLWATCH_CPU_NCCL_CUDA_QUEUE_H_
#define COLLWATCH_CPU_NCCL_CUDA_QUEUE_H_

#include "cpu_nccl/cuda_driver.h"
#include "cpu_nccl/task.h"

namespace collwatch::cpu_nccl {

// Enqueues `tasks` (collectives, sends and receives of one call or one group, in issue
// order; at least one with dev.active) as one unit: they start together once every stream
// they use has reached them and every earlier unit sharing a communicator has finished.
// Takes its own communicator references; the caller keeps ownership of `tasks`.
// On failure nothing is left on any stream and *message says why.
ncclResult_t EnqueueDeviceTasks(const CudaDriver* driver, const Task* tasks, int count,
                                const char** message) noexcept;

}  // namespace collwatch::cpu_nccl

#endif  // COLLWATCH_CPU_NCCL_CUDA_QUEUE_H_
