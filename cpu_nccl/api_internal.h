// What the files of the exported NCCL API share (api_comm.cc: communicators and queries;
// api_operations.cc: collectives, send/recv, groups, reduction ops; api_memory.cc:
// registrations, windows, ncclMemAlloc): reading enum arguments, error returns with their
// ncclGetLastError message, and the pnccl* alias. Threading: stateless helpers.
#ifndef COLLWATCH_CPU_NCCL_API_INTERNAL_H_
#define COLLWATCH_CPU_NCCL_API_INTERNAL_H_

#include <cstring>

#include "cpu_nccl/engine.h"
#include "cpu_nccl/nccl_include.h"

namespace collwatch::cpu_nccl {

// The value of an enum argument without an enum load: callers may pass values outside
// the enumeration (NCCL rejects them), which UBSan would flag if read as the enum type.
template <class E>
int EnumValue(const E& e) noexcept {
  static_assert(sizeof(E) == sizeof(int));
  int value;
  std::memcpy(&value, &e, sizeof value);
  return value;
}

inline ncclResult_t Fail(ncclResult_t result, const char* message) noexcept {
  SetLastError(message);
  return result;
}

// For operations NCCL enqueues: an argument error inside a group also fails GroupEnd.
inline ncclResult_t FailEnqueue(ncclResult_t result, const char* message) noexcept {
  NoteGroupError(result);
  return Fail(result, message);
}

inline ncclResult_t Finish(ncclResult_t result) noexcept {
  if (result != ncclSuccess) SetLastError("operation failed: communicator aborted or revoked");
  return result;
}

}  // namespace collwatch::cpu_nccl

// The profiling entry points (pnccl*) are the same functions under a second name; an
// alias must sit in the file that defines its function.
#define COLLWATCH_PNCCL_ALIAS(name) __typeof__(name) p##name __attribute__((alias(#name)))

#endif  // COLLWATCH_CPU_NCCL_API_INTERNAL_H_
