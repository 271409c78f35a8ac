// Includes the real nccl.h with default visibility, so that the API functions defined in
// this library are exported although it is built with -fvisibility=hidden (the version
// script then keeps only nccl* and pnccl*). Threading: n/a.
#ifndef COLLWATCH_CPU_NCCL_NCCL_INCLUDE_H_
#define COLLWATCH_CPU_NCCL_NCCL_INCLUDE_H_

#pragma GCC visibility push(default)
#include <nccl.h>
#pragma GCC visibility pop

#endif  // COLLWATCH_CPU_NCCL_NCCL_INCLUDE_H_
