// Element kernels of the CPU NCCL backend: reduce n host buffers in rank order, scale a
// buffer by a scalar (PreMulSum, floating ncclAvg), for every data type of nccl.h.
// Threading: pure functions. Types and ops are nccl.h's numeric values (checked by callers).
#ifndef COLLWATCH_CPU_NCCL_REDUCE_KERNELS_H_
#define COLLWATCH_CPU_NCCL_REDUCE_KERNELS_H_

#include <cstddef>
#include <cstdint>

namespace collwatch::cpu_nccl {

// The combining step of a reduction (ncclAvg and PreMulSum combine with kSum).
enum class BaseOp : uint8_t { kSum = 0, kProd = 1, kMax = 2, kMin = 3 };

inline constexpr int kNumDtypes = 12;  // ncclNumTypes

// dst[i] = ((srcs[0][i] op srcs[1][i]) op ...) op srcs[nsrcs-1][i], accumulated in float
// for the 16- and 8-bit floating types and rounded once; then divided by `postdiv` when it
// is non-zero (integer ncclAvg). dst may alias any source (blocks are read before written).
using ReduceFn = void (*)(void* dst, const void* const* srcs, int nsrcs, size_t count,
                          uint64_t postdiv);

// dst[i] = src[i] * scalar, where scalar_bits holds the scalar in the element type (its
// first DtypeSize bytes, as NCCL stores a PreMulSum scalar). dst may equal src.
using ScaleFn = void (*)(void* dst, const void* src, size_t count, uint64_t scalar_bits);

// Bytes per element; 0 for an unknown type.
size_t DtypeSize(int dtype) noexcept;

// True for the floating types (ncclAvg is then a PreMulSum by 1/n, else sum then divide).
bool IsFloatingDtype(int dtype) noexcept;

ReduceFn GetReduceFn(int dtype, BaseOp op) noexcept;
ScaleFn GetScaleFn(int dtype) noexcept;

// 1/n rounded to the floating type `dtype`, as scalar bits for a ScaleFn.
uint64_t ReciprocalBits(int dtype, int n) noexcept;

}  // namespace collwatch::cpu_nccl

#endif  // COLLWATCH_CPU_NCCL_REDUCE_KERNELS_H_
