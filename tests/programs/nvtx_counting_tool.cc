// A stand-in for another NVTX tool (Nsight Systems) in the chaining tests: an NVTX
// injection library that appends one line per range push and pop it sees to the file
// named by COLLWATCH_TEST_NVTX_LOG. Handles it gives out are its own (not collwatch's),
// as a real tool's are. Threading: callbacks on any thread; each line is one write.
#define NVTX_NO_IMPL
#include <fcntl.h>
#include <nvtx3/nvToolsExt.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <string>

#include "ring/settings.h"

namespace {

void Log(const std::string& line) {
  const char* path = collwatch::SettingIfSet(collwatch::Setting::kTestNvtxLog);
  if (path == nullptr) return;
  const int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return;
  const std::string text = line + "\n";
  (void)!write(fd, text.data(), text.size());
  close(fd);
}

// Domain and string handles: odd small numbers of our own, never collwatch's pointers.
std::atomic<uintptr_t> g_next_handle{0x1001};
constexpr int kMaxStrings = 256;
std::string g_strings[kMaxStrings];  // by (handle - 0x1001) / 2, registration order
std::atomic<int> g_string_count{0};

std::string MessageOf(const nvtxEventAttributes_t* attributes) {
  if (attributes == nullptr) return "?";
  if (attributes->messageType == NVTX_MESSAGE_TYPE_ASCII) return attributes->message.ascii;
  if (attributes->messageType == NVTX_MESSAGE_TYPE_REGISTERED) {
    const auto index = static_cast<int>(reinterpret_cast<uintptr_t>(attributes->message.registered) >> 16);
    return index >= 1 && index <= kMaxStrings ? g_strings[index - 1] : "?registered";
  }
  return "?";
}

int PushA(const char* message) { Log(std::string("push ") + message); return 0; }
int PushEx(const nvtxEventAttributes_t* attributes) { Log("push " + MessageOf(attributes)); return 0; }
int Pop() { Log("pop"); return 0; }
int DomainPushEx(nvtxDomainHandle_t, const nvtxEventAttributes_t* attributes) {
  Log("domain push " + MessageOf(attributes));
  return 0;
}
int DomainPop(nvtxDomainHandle_t) { Log("domain pop"); return 0; }
nvtxDomainHandle_t DomainCreateA(const char*) {
  return reinterpret_cast<nvtxDomainHandle_t>(g_next_handle.fetch_add(2));
}
nvtxStringHandle_t RegisterStringA(nvtxDomainHandle_t, const char* text) {
  const int index = g_string_count.fetch_add(1);
  if (index >= kMaxStrings) return nullptr;
  g_strings[index] = text;
  return reinterpret_cast<nvtxStringHandle_t>(static_cast<uintptr_t>(index + 1) << 16);
}

void Set(NvtxFunctionTable table, unsigned int size, unsigned int id, NvtxFunctionPointer function) {
  if (table != nullptr && id < size && table[id] != nullptr) *table[id] = function;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get) {
  const auto* callbacks = static_cast<const NvtxExportTableCallbacks*>(get(NVTX_ETID_CALLBACKS));
  if (callbacks == nullptr) return 0;
  NvtxFunctionTable core = nullptr, core2 = nullptr;
  unsigned int core_size = 0, core2_size = 0;
  callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &core, &core_size);
  callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &core2, &core2_size);
  Set(core, core_size, NVTX_CBID_CORE_RangePushA, reinterpret_cast<NvtxFunctionPointer>(&PushA));
  Set(core, core_size, NVTX_CBID_CORE_RangePushEx, reinterpret_cast<NvtxFunctionPointer>(&PushEx));
  Set(core, core_size, NVTX_CBID_CORE_RangePop, reinterpret_cast<NvtxFunctionPointer>(&Pop));
  Set(core2, core2_size, NVTX_CBID_CORE2_DomainRangePushEx, reinterpret_cast<NvtxFunctionPointer>(&DomainPushEx));
  Set(core2, core2_size, NVTX_CBID_CORE2_DomainRangePop, reinterpret_cast<NvtxFunctionPointer>(&DomainPop));
  Set(core2, core2_size, NVTX_CBID_CORE2_DomainCreateA, reinterpret_cast<NvtxFunctionPointer>(&DomainCreateA));
  Set(core2, core2_size, NVTX_CBID_CORE2_DomainRegisterStringA,
      reinterpret_cast<NvtxFunctionPointer>(&RegisterStringA));
  Log("initialized");
  return 1;
}
