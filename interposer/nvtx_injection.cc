// NVTX v3 injection entry points: NVTX calls InitializeInjectionNvtx2 once per NVTX
// instance in the process (each library embeds its own copy of NVTX), and we point
// that instance's push/pop slots at callbacks that feed the region stack (regions.h).
// Threading: callbacks run on the application's threads; they share only the
// lock-free intern table and the domain pool below.
//
// Protocol (nvtxDetail/nvtxInit.h, nvtxImpl.h, nvtxTypes.h): the instance loads the
// library named by NVTX_INJECTION64_PATH (dlopen of an already preloaded library returns
// it, so pointing the variable at libcollwatch.so works preloaded or not), looks up
// InitializeInjectionNvtx2 and calls it with its nvtxGetExportTable. The export table
// NVTX_ETID_CALLBACKS hands out, per module, an array of pointers to the instance's
// function-pointer slots, indexed by callback id; a slot we leave alone becomes a no-op
// when init returns. Returning 0 makes the instance turn every call into a no-op.
//
// InitializeInjectionNvtx2Preinject is the name NVTX looks up in the process-wide
// symbol table (dlsym(RTLD_DEFAULT)) when no path is set. NVTX 3 compiles that step out
// by default (NVTX_SUPPORT_ALREADY_INJECTED_LIBRARY = 0, load sequence version 2), so
// today it only serves programs built with that macro set to 1; the environment
// variable stays the way to attach.
//
// Domains. NVTX keeps one range stack per domain; we keep one per thread for all
// domains, because the region of an NCCL call is "the innermost range open on this
// thread", whatever library opened it. Ranges of a named domain are interned as
// "<domain>:<message>" so that libraries reusing a message ("forward") stay
// distinguishable; the default domain (NULL handle) is not prefixed. NCCL pushes
// ranges in its own "NCCL" domain inside its calls, and pops some of them on another
// thread (its asynchronous communicator init): those ranges are ignored outright, or
// the calling thread's stack would keep a stale "NCCL:ncclCommInitRank" (seen on real
// NCCL 2.28). They are never user code anyway. Interleaved pops of
// different domains (push A:x, push y, pop A, pop) pop our merged stack in LIFO order:
// the region is briefly "x" instead of "y" until the stack unwinds.
//
// Chaining. Another tool's injection library (Nsight Systems') named by
// COLLWATCH_NVTX_CHAIN is initialised first for each instance, with the same export
// table; it fills the slots it wants. For the slots we take too we keep what it put
// there and our callbacks call it on. The handles the application then holds are the
// tool's (we return what its DomainCreate and RegisterString return), so calls we do not
// take reach it with its own handles; we find our domain records and string ids from its
// handles. A tool that takes pushes but not DomainCreate would get our domain handles.
#define NVTX_NO_IMPL  // only the types: no NVTX instance of our own in this library
#include <nvtx3/nvToolsExt.h>

#include <atomic>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <cwchar>
#include <initializer_list>

#include "interposer/config.h"
#include "interposer/nvtx_chain.h"
#include "interposer/regions.h"
#include "ring/hash.h"
#include "ring/ring_format.h"

namespace collwatch {
namespace {

// ---- Domains ------------------------------------------------------------------
// A fixed pool; a domain handle is a pointer to its record. Records are never freed
// (registered strings and other threads may still refer to them), so
// nvtxDomainDestroy is left a no-op. A full pool makes nvtxDomainCreate return NULL:
// that domain's ranges then count as default-domain ones (no prefix).

constexpr uint32_t kMaxDomains = 64;
constexpr size_t kDomainPrefixBytes = 48;  // "<name>:", name truncated to fit

struct DomainRecord {
  std::atomic<uint32_t> ready;  // 1 once the fields below are written (release)
  uint32_t prefix_length;
  uint64_t seed;                // Hash64 of the full domain name
  bool ignored;                 // NCCL's own domain: its ranges are not regions
  nvtxDomainHandle_t chained;   // the chained tool's handle for it (chaining only)
  char prefix[kDomainPrefixBytes];
};

constexpr char kNcclDomain[] = "NCCL";

DomainRecord g_domains[kMaxDomains];
std::atomic<uint32_t> g_domain_count{0};

// What the chained tool put in the slots we also take (nullptr: nothing), by callback id.
// Set by each instance's initialisation (a tool installs the same functions in all),
// before that instance's calls can reach our callbacks.
std::atomic<NvtxFunctionPointer> g_next_core[NVTX_CBID_CORE_SIZE];
std::atomic<NvtxFunctionPointer> g_next_core2[NVTX_CBID_CORE2_SIZE];

template <typename Function>
Function Next(const std::atomic<NvtxFunctionPointer>* table, unsigned int id) noexcept {
  return reinterpret_cast<Function>(table[id].load(std::memory_order_acquire));
}

// The application holds the tool's domain and string handles.
bool ToolDomains() noexcept {
  return g_next_core2[NVTX_CBID_CORE2_DomainCreateA].load(std::memory_order_acquire) != nullptr ||
         g_next_core2[NVTX_CBID_CORE2_DomainCreateW].load(std::memory_order_acquire) != nullptr;
}
bool ToolStrings() noexcept {
  return g_next_core2[NVTX_CBID_CORE2_DomainRegisterStringA].load(std::memory_order_acquire) != nullptr ||
         g_next_core2[NVTX_CBID_CORE2_DomainRegisterStringW].load(std::memory_order_acquire) != nullptr;
}

// Maps a handle back to its record; NULL, foreign or unfinished handles mean the
// default domain.
const DomainRecord* FindDomain(nvtxDomainHandle_t handle) noexcept {
  if (handle != nullptr && ToolDomains()) {
    const uint32_t count = g_domain_count.load(std::memory_order_acquire);
    for (uint32_t i = 0; i < count && i < kMaxDomains; ++i) {
      const DomainRecord& domain = g_domains[i];
      if (domain.ready.load(std::memory_order_acquire) != 0 && domain.chained == handle) return &domain;
    }
    return nullptr;
  }
  const auto address = reinterpret_cast<uintptr_t>(handle);
  const auto first = reinterpret_cast<uintptr_t>(&g_domains[0]);
  if (address < first || address >= first + sizeof(g_domains) ||
      (address - first) % sizeof(DomainRecord) != 0) {
    return nullptr;
  }
  const auto* domain = reinterpret_cast<const DomainRecord*>(handle);
  return domain->ready.load(std::memory_order_acquire) != 0 ? domain : nullptr;
}

// `chained`: the tool's handle for the name (chaining only); one record per handle.
nvtxDomainHandle_t CreateDomain(const char* name, size_t length, uint64_t seed,
                                nvtxDomainHandle_t chained) noexcept {
  if (length == 0) return nullptr;
  // Same name again (another NVTX instance, or a second create): same record. Two
  // racing creates of one name may both add a record; both intern identical names.
  const uint32_t count = g_domain_count.load(std::memory_order_acquire);
  for (uint32_t i = 0; i < count && i < kMaxDomains; ++i) {
    DomainRecord& domain = g_domains[i];
    if (domain.ready.load(std::memory_order_acquire) != 0 && domain.seed == seed && domain.chained == chained) {
      return reinterpret_cast<nvtxDomainHandle_t>(&domain);
    }
  }
  const uint32_t index = g_domain_count.fetch_add(1, std::memory_order_acq_rel);
  if (index >= kMaxDomains) return nullptr;
  DomainRecord& domain = g_domains[index];
  size_t kept = length;
  if (kept > kDomainPrefixBytes - 1) {  // cut, but not inside a UTF-8 sequence
    kept = kDomainPrefixBytes - 1;
    for (int i = 0; i < 3 && (static_cast<unsigned char>(name[kept]) & 0xc0) == 0x80; ++i) --kept;
  }
  std::memcpy(domain.prefix, name, kept);
  domain.prefix[kept] = ':';
  domain.prefix_length = static_cast<uint32_t>(kept + 1);
  domain.seed = seed;
  domain.ignored = length == sizeof kNcclDomain - 1 && std::memcmp(name, kNcclDomain, length) == 0;
  domain.chained = chained;
  domain.ready.store(1, std::memory_order_release);
  return reinterpret_cast<nvtxDomainHandle_t>(&domain);
}

// ---- Names ----------------------------------------------------------------------

// Interns `text` (hash `hash` over the full name) in `domain`: "<domain>:<text>" with
// the hash combined with the domain's, so no unbounded concatenation is needed.
uint32_t InternIn(const DomainRecord* domain, const char* text, size_t length,
                  uint64_t hash) noexcept {
  if (domain == nullptr) return InternRegionHashed(text, length, hash);
  // One byte over the stored maximum tells the table the name was cut (it then trims
  // back to a UTF-8 boundary).
  char buffer[ring::kMaxStringBytes + 1];
  size_t used = domain->prefix_length;
  std::memcpy(buffer, domain->prefix, used);
  const size_t room = sizeof(buffer) - used;
  const size_t copied = length < room ? length : room;
  if (copied != 0) std::memcpy(buffer + used, text, copied);
  used += copied;
  return InternRegionHashed(buffer, used, HashCombine(domain->seed, hash));
}

uint32_t InternAscii(const DomainRecord* domain, const char* message) noexcept {
  if (message == nullptr) return 0;  // an unnamed range: still pushed, id 0
  const size_t length = std::strlen(message);
  return InternIn(domain, message, length, Hash64(message, length));
}

// Wide names (wchar_t is UTF-32 on Linux) are converted to UTF-8; invalid code points
// become '?'. A name whose UTF-8 fits the buffer hashes exactly like the same name
// pushed through the char API (one id for both); a longer one is hashed over its wide
// characters with another seed, which keeps long names distinct (it may then get an id
// of its own apart from the char API's).
constexpr size_t kWideBufferBytes = 512;
constexpr uint64_t kWideSeed = 0x5749444543484152ull;  // "WIDECHAR"

size_t EncodeUtf8(uint32_t c, char* out) noexcept {
  if (c < 0x80) {
    out[0] = static_cast<char>(c);
    return 1;
  }
  if (c < 0x800) {
    out[0] = static_cast<char>(0xc0 | (c >> 6));
    out[1] = static_cast<char>(0x80 | (c & 0x3f));
    return 2;
  }
  if ((c >= 0xd800 && c <= 0xdfff) || c > 0x10ffff) {
    out[0] = '?';
    return 1;
  }
  if (c < 0x10000) {
    out[0] = static_cast<char>(0xe0 | (c >> 12));
    out[1] = static_cast<char>(0x80 | ((c >> 6) & 0x3f));
    out[2] = static_cast<char>(0x80 | (c & 0x3f));
    return 3;
  }
  out[0] = static_cast<char>(0xf0 | (c >> 18));
  out[1] = static_cast<char>(0x80 | ((c >> 12) & 0x3f));
  out[2] = static_cast<char>(0x80 | ((c >> 6) & 0x3f));
  out[3] = static_cast<char>(0x80 | (c & 0x3f));
  return 4;
}

struct Utf8Name {
  char text[kWideBufferBytes];
  size_t length;
  uint64_t hash;
};

void ToUtf8(const wchar_t* wide, Utf8Name* name) noexcept {
  size_t wide_length = 0;
  bool complete = true;
  name->length = 0;
  for (; wide[wide_length] != L'\0'; ++wide_length) {
    if (!complete) continue;  // only counting now, for the hash
    char encoded[4];
    const size_t n = EncodeUtf8(static_cast<uint32_t>(wide[wide_length]), encoded);
    if (name->length + n > sizeof(name->text)) {
      complete = false;
      continue;
    }
    std::memcpy(name->text + name->length, encoded, n);
    name->length += n;
  }
  name->hash = complete ? Hash64(name->text, name->length)
                        : Hash64(wide, wide_length * sizeof(wchar_t), kWideSeed);
}

uint32_t InternWide(const DomainRecord* domain, const wchar_t* message) noexcept {
  if (message == nullptr) return 0;
  Utf8Name name;
  ToUtf8(message, &name);
  return InternIn(domain, name.text, name.length, name.hash);
}

// Registered strings: the handle is the id itself (never dereferenced), so a push by
// handle costs no hashing. Registration in a full table yields a NULL handle (id 0).
nvtxStringHandle_t HandleOf(uint32_t id) noexcept {
  return reinterpret_cast<nvtxStringHandle_t>(static_cast<uintptr_t>(id));
}

uint32_t IdOf(nvtxStringHandle_t handle) noexcept {
  if (ToolStrings()) return ChainedStringId(handle);
  const auto value = reinterpret_cast<uintptr_t>(handle);
  return value <= ring::kDefaultStringCapacity ? static_cast<uint32_t>(value) : 0;
}

uint32_t InternAttributes(const DomainRecord* domain,
                          const nvtxEventAttributes_t* attributes) noexcept {
  constexpr size_t kNeeded = offsetof(nvtxEventAttributes_t, message) + sizeof(nvtxMessageValue_t);
  if (attributes == nullptr || attributes->size < kNeeded) return 0;
  switch (attributes->messageType) {
    case NVTX_MESSAGE_TYPE_ASCII:
      return InternAscii(domain, attributes->message.ascii);
    case NVTX_MESSAGE_TYPE_UNICODE:
      return InternWide(domain, attributes->message.unicode);
    case NVTX_MESSAGE_TYPE_REGISTERED:
      return IdOf(attributes->message.registered);
    default:
      return 0;  // no message (NVTX_MESSAGE_UNKNOWN) or a type we do not know
  }
}

// ---- Callbacks --------------------------------------------------------------------
// Push returns the 0-based level of the new range, pop the level of the range it ended
// (-1 when none was open), as NVTX specifies.

int Level(uint32_t depth) noexcept {
  return depth > static_cast<uint32_t>(INT_MAX) ? INT_MAX : static_cast<int>(depth) - 1;
}

int Push(uint32_t id) noexcept {
  PushRegion(id);
  return Level(RegionDepth());
}

int Pop() noexcept {
  const uint32_t depth = RegionDepth();
  if (depth == 0) return -1;
  PopRegion();
  return Level(depth);
}

// The chained tool's callback of slot `id`, when it took that slot; our value is returned.
#define COLLWATCH_CALL_NEXT(table, id, type, ...) \
  if (const auto next = Next<type>(table, id)) next(__VA_ARGS__)

int RangePushA(const char* message) noexcept {
  COLLWATCH_CALL_NEXT(g_next_core, NVTX_CBID_CORE_RangePushA, nvtxRangePushA_impl_fntype, message);
  return Push(InternAscii(nullptr, message));
}
int RangePushW(const wchar_t* message) noexcept {
  COLLWATCH_CALL_NEXT(g_next_core, NVTX_CBID_CORE_RangePushW, nvtxRangePushW_impl_fntype, message);
  return Push(InternWide(nullptr, message));
}
int RangePushEx(const nvtxEventAttributes_t* attributes) noexcept {
  COLLWATCH_CALL_NEXT(g_next_core, NVTX_CBID_CORE_RangePushEx, nvtxRangePushEx_impl_fntype, attributes);
  return Push(InternAttributes(nullptr, attributes));
}
int RangePop() noexcept {
  COLLWATCH_CALL_NEXT(g_next_core, NVTX_CBID_CORE_RangePop, nvtxRangePop_impl_fntype);
  return Pop();
}

int DomainRangePushEx(nvtxDomainHandle_t handle,
                      const nvtxEventAttributes_t* attributes) noexcept {
  // NCCL's own ranges too: they are no regions of ours, but the tool wants them.
  COLLWATCH_CALL_NEXT(g_next_core2, NVTX_CBID_CORE2_DomainRangePushEx, nvtxDomainRangePushEx_impl_fntype, handle,
                      attributes);
  const DomainRecord* domain = FindDomain(handle);
  if (domain != nullptr && domain->ignored) return Level(RegionDepth() + 1);
  return Push(InternAttributes(domain, attributes));
}
int DomainRangePop(nvtxDomainHandle_t handle) noexcept {
  COLLWATCH_CALL_NEXT(g_next_core2, NVTX_CBID_CORE2_DomainRangePop, nvtxDomainRangePop_impl_fntype, handle);
  const DomainRecord* domain = FindDomain(handle);
  if (domain != nullptr && domain->ignored) return Level(RegionDepth());
  return Pop();
}

// With a tool that registers strings, the application gets the tool's handle and we map
// it to our id (a tool that takes RegisterStringA takes W too in practice; one that did
// not would get our handle for W).
nvtxStringHandle_t ChainString(nvtxStringHandle_t tool_handle, bool tool_took, uint32_t id) noexcept {
  if (tool_took) {
    NoteChainedString(tool_handle, id);
    return tool_handle;
  }
  if (ToolStrings()) NoteChainedString(HandleOf(id), id);
  return HandleOf(id);
}

nvtxStringHandle_t DomainRegisterStringA(nvtxDomainHandle_t domain, const char* text) noexcept {
  const uint32_t id = InternAscii(FindDomain(domain), text);
  const auto next = Next<nvtxDomainRegisterStringA_impl_fntype>(g_next_core2, NVTX_CBID_CORE2_DomainRegisterStringA);
  return ChainString(next != nullptr ? next(domain, text) : nullptr, next != nullptr, id);
}
nvtxStringHandle_t DomainRegisterStringW(nvtxDomainHandle_t domain,
                                         const wchar_t* text) noexcept {
  const uint32_t id = InternWide(FindDomain(domain), text);
  const auto next = Next<nvtxDomainRegisterStringW_impl_fntype>(g_next_core2, NVTX_CBID_CORE2_DomainRegisterStringW);
  return ChainString(next != nullptr ? next(domain, text) : nullptr, next != nullptr, id);
}

// With a tool that creates domains, the application gets the tool's handle; our record
// remembers it.
nvtxDomainHandle_t DomainCreateA(const char* name) noexcept {
  if (name == nullptr) return nullptr;
  const auto next = Next<nvtxDomainCreateA_impl_fntype>(g_next_core2, NVTX_CBID_CORE2_DomainCreateA);
  const nvtxDomainHandle_t tool_handle = next != nullptr ? next(name) : nullptr;
  const size_t length = std::strlen(name);
  const nvtxDomainHandle_t ours = CreateDomain(name, length, Hash64(name, length), tool_handle);
  return ToolDomains() ? tool_handle : ours;
}
nvtxDomainHandle_t DomainCreateW(const wchar_t* name) noexcept {
  if (name == nullptr) return nullptr;
  const auto next = Next<nvtxDomainCreateW_impl_fntype>(g_next_core2, NVTX_CBID_CORE2_DomainCreateW);
  const nvtxDomainHandle_t tool_handle = next != nullptr ? next(name) : nullptr;
  Utf8Name utf8;
  ToUtf8(name, &utf8);
  const nvtxDomainHandle_t ours = CreateDomain(utf8.text, utf8.length, utf8.hash, tool_handle);
  return ToolDomains() ? tool_handle : ours;
}

// Points slot `id` of an instance's module table at `function`, if the instance has it.
template <typename Function>
void Attach(NvtxFunctionTable table, unsigned int size, unsigned int id,
            Function function) noexcept {
  if (table != nullptr && id < size && table[id] != nullptr) {
    *table[id] = reinterpret_cast<NvtxFunctionPointer>(function);
  }
}

struct ModuleTables {
  NvtxFunctionTable core = nullptr;
  unsigned int core_size = 0;
  NvtxFunctionTable core2 = nullptr;
  unsigned int core2_size = 0;
};

bool FindModuleTables(NvtxGetExportTableFunc_t get_export_table, ModuleTables* tables) noexcept {
  const auto* callbacks =
      static_cast<const NvtxExportTableCallbacks*>(get_export_table(NVTX_ETID_CALLBACKS));
  if (callbacks == nullptr || callbacks->struct_size < sizeof(NvtxExportTableCallbacks) ||
      callbacks->GetModuleFunctionTable == nullptr) {
    return false;
  }
  if (callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &tables->core, &tables->core_size) == 0 ||
      tables->core == nullptr) {
    return false;  // nothing we could attach to
  }
  if (callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &tables->core2, &tables->core2_size) == 0) {
    tables->core2 = nullptr;
  }
  return true;
}

// Slot values of one module table, to see what the chained tool changed.
template <unsigned int kSize>
struct Slots {
  NvtxFunctionPointer value[kSize] = {};

  void Read(NvtxFunctionTable table, unsigned int size) noexcept {
    for (unsigned int id = 0; id < kSize && table != nullptr && id < size; ++id) {
      if (table[id] != nullptr) value[id] = *table[id];
    }
  }
  // Keeps, for each of `ids`, what the tool put in its slot in g_next (when it did).
  void KeepChanged(NvtxFunctionTable table, unsigned int size, std::initializer_list<unsigned int> ids,
                   std::atomic<NvtxFunctionPointer>* next) const noexcept {
    for (const unsigned int id : ids) {
      if (table == nullptr || id >= size || id >= kSize || table[id] == nullptr) continue;
      if (*table[id] != value[id]) next[id].store(*table[id], std::memory_order_release);
    }
  }
  void Restore(NvtxFunctionTable table, unsigned int size) const noexcept {
    for (unsigned int id = 0; id < kSize && table != nullptr && id < size; ++id) {
      if (table[id] != nullptr) *table[id] = value[id];
    }
  }
};

// Initialises the chained tool for this instance and keeps its callbacks of the slots
// we take too. A tool that declines gets its slots back as they were.
void InitializeChained(NvtxInitializer chained, NvtxGetExportTableFunc_t get_export_table,
                       const ModuleTables& tables) noexcept {
  Slots<NVTX_CBID_CORE_SIZE> core;
  Slots<NVTX_CBID_CORE2_SIZE> core2;
  core.Read(tables.core, tables.core_size);
  core2.Read(tables.core2, tables.core2_size);
  if (chained(get_export_table) == 0) {
    core.Restore(tables.core, tables.core_size);
    core2.Restore(tables.core2, tables.core2_size);
    return;
  }
  core.KeepChanged(tables.core, tables.core_size,
                   {NVTX_CBID_CORE_RangePushA, NVTX_CBID_CORE_RangePushW, NVTX_CBID_CORE_RangePushEx,
                    NVTX_CBID_CORE_RangePop},
                   g_next_core);
  core2.KeepChanged(tables.core2, tables.core2_size,
                    {NVTX_CBID_CORE2_DomainRangePushEx, NVTX_CBID_CORE2_DomainRangePop,
                     NVTX_CBID_CORE2_DomainRegisterStringA, NVTX_CBID_CORE2_DomainRegisterStringW,
                     NVTX_CBID_CORE2_DomainCreateA, NVTX_CBID_CORE2_DomainCreateW},
                    g_next_core2);
}

// `own`: our exported initializer, so that a chain naming libcollwatch.so is not followed.
int Initialize(NvtxGetExportTableFunc_t get_export_table, NvtxInitializer own) noexcept {
  if (get_export_table == nullptr) return 0;
  const NvtxInitializer chained = ChainedNvtxInitializer(own);
  ModuleTables tables;
  if (!NvtxRegionsWanted() || !FindModuleTables(get_export_table, &tables)) {
    // Declined (NVTX calls become no-ops), unless the chained tool wants them.
    return chained != nullptr ? chained(get_export_table) : 0;
  }
  if (chained != nullptr) InitializeChained(chained, get_export_table, tables);
  const NvtxFunctionTable core = tables.core;
  const unsigned int core_size = tables.core_size;
  Attach(core, core_size, NVTX_CBID_CORE_RangePushA, &RangePushA);
  Attach(core, core_size, NVTX_CBID_CORE_RangePushW, &RangePushW);
  Attach(core, core_size, NVTX_CBID_CORE_RangePushEx, &RangePushEx);
  Attach(core, core_size, NVTX_CBID_CORE_RangePop, &RangePop);

  const NvtxFunctionTable core2 = tables.core2;
  const unsigned int core2_size = tables.core2_size;
  if (core2 != nullptr) {
    Attach(core2, core2_size, NVTX_CBID_CORE2_DomainRangePushEx, &DomainRangePushEx);
    Attach(core2, core2_size, NVTX_CBID_CORE2_DomainRangePop, &DomainRangePop);
    Attach(core2, core2_size, NVTX_CBID_CORE2_DomainRegisterStringA, &DomainRegisterStringA);
    Attach(core2, core2_size, NVTX_CBID_CORE2_DomainRegisterStringW, &DomainRegisterStringW);
    Attach(core2, core2_size, NVTX_CBID_CORE2_DomainCreateA, &DomainCreateA);
    Attach(core2, core2_size, NVTX_CBID_CORE2_DomainCreateW, &DomainCreateW);
  }

  // Tools are asked to announce the NVTX version they were built against.
  const auto* version =
      static_cast<const NvtxExportTableVersionInfo*>(get_export_table(NVTX_ETID_VERSIONINFO));
  if (version != nullptr && version->struct_size >= sizeof(NvtxExportTableVersionInfo) &&
      version->SetInjectionNvtxVersion != nullptr) {
    version->SetInjectionNvtxVersion(NVTX_VERSION);
  }
  return 1;
}

}  // namespace
}  // namespace collwatch

extern "C" __attribute__((visibility("default"))) int InitializeInjectionNvtx2(
    NvtxGetExportTableFunc_t get_export_table) noexcept {
  return collwatch::Initialize(get_export_table, &InitializeInjectionNvtx2);
}

extern "C" __attribute__((visibility("default"))) int InitializeInjectionNvtx2Preinject(
    NvtxGetExportTableFunc_t get_export_table) noexcept {
  return collwatch::Initialize(get_export_table, &InitializeInjectionNvtx2);
}
