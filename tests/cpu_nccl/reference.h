// Test data and reference results for the CPU NCCL backend tests: deterministic inputs
// for every NCCL data type, and element-wise reference reductions that follow NCCL's
// semantics as the backend documents them: ranks combined in order 0..n-1, wrap-around
// integers, fp16/bf16/fp8 accumulated in float and rounded once with CUDA's own host
// conversions, ncclAvg as a PreMulSum by 1/n (floating) or sum-then-divide (integers).
// Threading: pure functions.
#ifndef COLLWATCH_TESTS_CPU_NCCL_REFERENCE_H_
#define COLLWATCH_TESTS_CPU_NCCL_REFERENCE_H_

#include <nccl.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace collwatch::cpu_nccl_test {

struct DtypeInfo {
  ncclDataType_t type;
  const char* name;
  size_t size;
};

inline constexpr DtypeInfo kAllDtypes[] = {
    {ncclInt8, "int8", 1},         {ncclUint8, "uint8", 1},     {ncclInt32, "int32", 4},
    {ncclUint32, "uint32", 4},     {ncclInt64, "int64", 8},     {ncclUint64, "uint64", 8},
    {ncclFloat16, "float16", 2},   {ncclFloat32, "float32", 4}, {ncclFloat64, "float64", 8},
    {ncclBfloat16, "bfloat16", 2}, {ncclFloat8e4m3, "e4m3", 1}, {ncclFloat8e5m2, "e5m2", 1},
};

inline constexpr ncclRedOp_t kBuiltinOps[] = {ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg};

size_t SizeOf(ncclDataType_t type);
const char* OpName(ncclRedOp_t op);

// Bytes of elements first .. first+count-1 of a rank's input: small values (integers in
// [-2, 2], floats in [-1.5, 2] by quarters) that depend on rank, index and salt.
std::vector<uint8_t> MakeInput(ncclDataType_t type, int rank, int salt, size_t count,
                               size_t first = 0);

// The element type's encoding of `value` (a PreMulSum scalar as the user passes it).
uint64_t EncodeScalar(ncclDataType_t type, double value);

// Reference reduction of inputs[0..n-1] (each `count` elements) with a builtin op, or a
// PreMulSum (op == ncclNumOps) whose per-rank scalars are premul[r] (encoded values).
std::vector<uint8_t> ReferenceReduce(ncclDataType_t type, ncclRedOp_t op,
                                     const std::vector<std::vector<uint8_t>>& inputs,
                                     size_t offset, size_t count,
                                     const std::vector<uint64_t>& premul = {});

// First differing element as text, or "" if `got` equals `want` bytewise.
std::string FirstDifference(ncclDataType_t type, const void* got, const void* want, size_t count);

}  // namespace collwatch::cpu_nccl_test

#endif  // COLLWATCH_TESTS_CPU_NCCL_REFERENCE_H_
