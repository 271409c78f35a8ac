// Loading the chained NVTX tool with dlopen (never a second copy of libcollwatch.so),
// and an open-addressing table from its string handles to our ids, filled at
// registration and read at each push by handle. Threading: see nvtx_chain.h.
#include "interposer/nvtx_chain.h"

#include <dlfcn.h>
#include <unistd.h>

#include <atomic>
#include <cstring>

#include "ring/settings.h"

namespace collwatch {
namespace {

void Say(const char* text) noexcept { (void)!write(STDERR_FILENO, text, std::strlen(text)); }

NvtxInitializer Load(NvtxInitializer own) noexcept {
  const char* path = SettingIfSet(Setting::kNvtxChain);
  if (path == nullptr) return nullptr;
  void* library = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  const char* why = library == nullptr ? dlerror() : nullptr;
  auto* initializer =
      library != nullptr ? reinterpret_cast<NvtxInitializer>(dlsym(library, "InitializeInjectionNvtx2")) : nullptr;
  if (library != nullptr && initializer == nullptr) why = "it has no InitializeInjectionNvtx2";
  if (initializer == own) return nullptr;  // ourselves again: the ranges reach us once
  if (initializer == nullptr) {
    // Once per process; the job goes on, its ranges reach collwatch alone.
    Say("collwatch: cannot hand NVTX on to COLLWATCH_NVTX_CHAIN=");
    Say(path);
    Say(": ");
    Say(why != nullptr ? why : "unknown error");
    Say("; its ranges are seen by collwatch alone\n");
  }
  return initializer;
}

// A power of two; a job registers a few hundred strings at most.
constexpr uint32_t kStringSlots = 4096;

struct StringSlot {
  std::atomic<uintptr_t> handle;
  std::atomic<uint32_t> id;
};

StringSlot g_strings[kStringSlots];

uint32_t FirstSlot(uintptr_t handle) noexcept {
  return static_cast<uint32_t>((handle * 0x9e3779b97f4a7c15ull) >> 52) & (kStringSlots - 1);
}

}  // namespace

NvtxInitializer ChainedNvtxInitializer(NvtxInitializer own) noexcept {
  static const NvtxInitializer chained = Load(own);
  return chained;
}

void NoteChainedString(nvtxStringHandle_t handle, uint32_t id) noexcept {
  const auto key = reinterpret_cast<uintptr_t>(handle);
  if (key == 0) return;
  for (uint32_t probe = 0, slot = FirstSlot(key); probe < kStringSlots; ++probe, slot = (slot + 1) & (kStringSlots - 1)) {
    uintptr_t expected = 0;
    if (g_strings[slot].handle.compare_exchange_strong(expected, key, std::memory_order_acq_rel) ||
        expected == key) {
      g_strings[slot].id.store(id, std::memory_order_release);
      return;
    }
  }
}

uint32_t ChainedStringId(nvtxStringHandle_t handle) noexcept {
  const auto key = reinterpret_cast<uintptr_t>(handle);
  if (key == 0) return 0;
  for (uint32_t probe = 0, slot = FirstSlot(key); probe < kStringSlots; ++probe, slot = (slot + 1) & (kStringSlots - 1)) {
    const uintptr_t held = g_strings[slot].handle.load(std::memory_order_acquire);
    if (held == key) return g_strings[slot].id.load(std::memory_order_acquire);
    if (held == 0) return 0;
  }
  return 0;
}

}  // namespace collwatch
