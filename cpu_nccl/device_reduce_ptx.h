// PTX of the CUDA mode's GPU reductions (COLLWATCH_CPU_NCCL_IPC reduce-scatter): one kernel
// per type, out[i] = in0[i] + in1[i] + ... in rank order, summed in float and rounded once
// (bf16: round to nearest even), as the host engine sums. Written out at run time from a
// template (the 8 unrolled source steps differ only in a register number).
// Threading: BuildDeviceReducePtx writes into the caller's buffer; reentrant.
#ifndef COLLWATCH_CPU_NCCL_DEVICE_REDUCE_PTX_H_
#define COLLWATCH_CPU_NCCL_DEVICE_REDUCE_PTX_H_

#include <cstddef>

namespace collwatch::cpu_nccl {

inline constexpr int kMaxDeviceReduceSources = 8;
inline constexpr char kSumFloat32KernelName[] = "collwatch_sum_f32";
inline constexpr char kSumBfloat16KernelName[] = "collwatch_sum_bf16";

// Kernel parameters: u64 out, u64 source[8], u32 nsources, u64 count (elements).
// Writes the module's PTX (both kernels); false if `capacity` is too small.
bool BuildDeviceReducePtx(char* out, size_t capacity) noexcept;

}  // namespace collwatch::cpu_nccl

#endif  // COLLWATCH_CPU_NCCL_DEVICE_REDUCE_PTX_H_
