// The NVTX injection library collwatch hands NVTX on to (COLLWATCH_NVTX_CHAIN: Nsight
// Systems' or another tool's, moved there from NVTX_INJECTION64_PATH by `collwatch run`):
// loading it once, and mapping the string handles it registers to collwatch's ids.
// Threading: loading runs once (a function-local static); the handle map is lock-free.
#ifndef COLLWATCH_INTERPOSER_NVTX_CHAIN_H_
#define COLLWATCH_INTERPOSER_NVTX_CHAIN_H_

#define NVTX_NO_IMPL
#include <nvtx3/nvToolsExt.h>

#include <cstdint>

namespace collwatch {

using NvtxInitializer = int (*)(NvtxGetExportTableFunc_t);

// The chained library's InitializeInjectionNvtx2, or nullptr: none named, it is this
// library itself (`own`), or it cannot be loaded (said once on stderr; collwatch goes on
// alone).
NvtxInitializer ChainedNvtxInitializer(NvtxInitializer own) noexcept;

// The chained library's handle for a string collwatch interned as `id`. A full map drops
// the pair: pushes by that handle then carry no region (id 0).
void NoteChainedString(nvtxStringHandle_t handle, uint32_t id) noexcept;
// collwatch's id for a handle the chained library registered; 0 when unknown.
uint32_t ChainedStringId(nvtxStringHandle_t handle) noexcept;

}  // namespace collwatch

#endif  // COLLWATCH_INTERPOSER_NVTX_CHAIN_H_
