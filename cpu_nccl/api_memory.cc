// The exported NCCL 2.28 API for buffers: registrations and windows (handles only: host
// memory needs no registration) and ncclMemAlloc/ncclMemFree (page-aligned host memory).
// Threading: any thread; each handle belongs to its caller. Built without exceptions.
#include <cstdint>
#include <cstdlib>

#include "cpu_nccl/api_internal.h"
#include "cpu_nccl/comm.h"

// Dummy window handle (nccl.h only declares the type).
struct ncclWindow_vidmem {
  uint64_t magic;
  void* buff;
  size_t size;
};

namespace collwatch::cpu_nccl {
namespace {

constexpr uint64_t kRegMagic = 0x6765722d6c636363ull;
constexpr uint64_t kWindowMagic = 0x6e69772d6c636363ull;

}  // namespace
}  // namespace collwatch::cpu_nccl

namespace cn = collwatch::cpu_nccl;

ncclResult_t ncclCommRegister(const ncclComm_t comm, void* buff, size_t size, void** handle) {
  if (!cn::CommValid(comm)) return cn::Fail(ncclInvalidArgument, "invalid communicator");
  if (handle == nullptr) return cn::Fail(ncclInvalidArgument, "NULL handle");
  auto* token = static_cast<ncclWindow_vidmem*>(std::malloc(sizeof(ncclWindow_vidmem)));
  if (token == nullptr) return cn::Fail(ncclSystemError, "out of memory");
  *token = ncclWindow_vidmem{cn::kRegMagic, buff, size};
  *handle = token;
  return ncclSuccess;
}

ncclResult_t ncclCommDeregister(const ncclComm_t comm, void* handle) {
  if (!cn::CommValid(comm)) return cn::Fail(ncclInvalidArgument, "invalid communicator");
  auto* token = static_cast<ncclWindow_vidmem*>(handle);
  if (token == nullptr || token->magic != cn::kRegMagic) {
    return cn::Fail(ncclInvalidArgument, "invalid registration handle");
  }
  token->magic = 0;
  std::free(token);
  return ncclSuccess;
}

ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win,
                                    int /*winFlags*/) {
  if (!cn::CommValid(comm)) return cn::Fail(ncclInvalidArgument, "invalid communicator");
  if (win == nullptr) return cn::Fail(ncclInvalidArgument, "NULL window");
  auto* window = static_cast<ncclWindow_vidmem*>(std::malloc(sizeof(ncclWindow_vidmem)));
  if (window == nullptr) return cn::Fail(ncclSystemError, "out of memory");
  *window = ncclWindow_vidmem{cn::kWindowMagic, buff, size};
  *win = window;
  return ncclSuccess;
}

ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win) {
  if (!cn::CommValid(comm)) return cn::Fail(ncclInvalidArgument, "invalid communicator");
  if (win == nullptr || win->magic != cn::kWindowMagic) {
    return cn::Fail(ncclInvalidArgument, "invalid window");
  }
  win->magic = 0;
  std::free(win);
  return ncclSuccess;
}

ncclResult_t ncclMemAlloc(void** ptr, size_t size) {
  if (ptr == nullptr) return cn::Fail(ncclInvalidArgument, "NULL pointer");
  void* memory = nullptr;
  if (posix_memalign(&memory, 4096, size == 0 ? 1 : size) != 0) {
    return cn::Fail(ncclSystemError, "out of memory");
  }
  *ptr = memory;
  return ncclSuccess;
}

ncclResult_t ncclMemFree(void* ptr) {
  std::free(ptr);
  return ncclSuccess;
}

COLLWATCH_PNCCL_ALIAS(ncclCommRegister);
COLLWATCH_PNCCL_ALIAS(ncclCommDeregister);
COLLWATCH_PNCCL_ALIAS(ncclCommWindowRegister);
COLLWATCH_PNCCL_ALIAS(ncclCommWindowDeregister);
COLLWATCH_PNCCL_ALIAS(ncclMemAlloc);
COLLWATCH_PNCCL_ALIAS(ncclMemFree);
