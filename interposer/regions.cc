// NVTX regions (API: regions.h): the process-wide intern table of region names and
// each thread's stack of open ranges. Threading: the table is lock-free (CAS-claimed
// slots, one writer per slot); the stack is thread_local and touched by its owner only.
#include "interposer/regions.h"

#include <sched.h>
#include <sys/mman.h>
#include <time.h>

#include <atomic>
#include <cstdint>
#include <cstring>

#include "interposer/clock.h"
#include "ring/hash.h"

namespace collwatch {
namespace {

// ---- Intern table ---------------------------------------------------------------
//
// kCapacity StringSlots in one anonymous mapping, created on first use. Open
// addressing: a name with hash h probes slots h, h+1, ... (mod kRegionSmallWindow), then
// h, h+1, ... (mod kCapacity, past the small window), at most kMaxProbes of each, so a
// lookup or insert costs a bounded amount of work even when the table is (nearly) full;
// a name that finds no free slot in its windows is dropped. The small window first: a ring sized down for a small
// /dev/shm has only the first slots, and a slot's index is the name's id in the records.
// A slot moves Empty -> Writing (CAS, by the thread that claims it) -> Ready (store,
// same thread) and is never rewritten: a Ready slot is immutable, so readers need no
// further synchronisation after their acquire load of `state`.
//
// Private state kAbandoned: a reader that waited its bound (AwaitSlot) for a Writing
// slot marks it abandoned and moves on, so that later lookups do not wait again (the
// writer was preempted for long, or it was another thread at fork() and never finishes
// in the child). The writer's final Ready store overrides the mark. Only Ready slots
// are ever copied into a ring, so the ring never sees this state. Cost of giving up:
// the waiting name may get a second id; both ids carry the same text.

constexpr uint64_t kCapacity = ring::kDefaultStringCapacity;
constexpr uint64_t kMask = kCapacity - 1;
constexpr uint32_t kMaxProbes = 128;
constexpr uint32_t kWaitSpins = 256;
constexpr uint64_t kWaitNs = 10 * 1000 * 1000;  // 10 ms
constexpr uint32_t kAbandoned = ring::kStringAbandoned;
static_assert((kCapacity & kMask) == 0, "capacity must be a power of two");
static_assert(kCapacity <= UINT32_MAX, "ids are 32-bit");
static_assert(kMaxProbes <= kRegionSmallWindow && kRegionSmallWindow <= kCapacity, "probe windows within the table");
static_assert((kRegionSmallWindow & (kRegionSmallWindow - 1)) == 0, "a power of two");
static_assert(kAbandoned != ring::kStringEmpty && kAbandoned != ring::kStringWriting &&
                  kAbandoned != ring::kStringReady,
              "private state must not collide with the ring's");

// Sentinel for "mapping failed": never retried, so a broken process does not issue a
// system call on every NVTX push.
inline ring::StringSlot* TableFailed() noexcept {
  return reinterpret_cast<ring::StringSlot*>(uintptr_t{1});
}

std::atomic<ring::StringSlot*> g_table{nullptr};
std::atomic<uint64_t> g_dropped{0};

// Where names are mirrored once a ring exists (MirrorRegionsInto). The capacity is
// stored before the pointer (release), so a reader that sees the pointer sees its
// capacity. The seq_cst store/load pairs on the pointer and on slot states make sure
// that a name published concurrently with MirrorRegionsInto is copied by one side or
// the other (store-load ordering); the ring slot's own CAS makes the copy happen once.
std::atomic<ring::StringSlot*> g_ring_slots{nullptr};
std::atomic<uint64_t> g_ring_capacity{0};

inline void CpuRelax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

ring::StringSlot* Table() noexcept {
  ring::StringSlot* table = g_table.load(std::memory_order_acquire);
  if (table != nullptr) [[likely]] {
    return table == TableFailed() ? nullptr : table;
  }
  // First use (once per process, maybe by several threads at once): map, then publish;
  // a thread that loses the race unmaps its own copy. Anonymous memory is zero-filled,
  // so every slot starts kStringEmpty.
  constexpr size_t kBytes = kCapacity * sizeof(ring::StringSlot);
  void* mem = mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ring::StringSlot* mine = mem == MAP_FAILED ? TableFailed() : static_cast<ring::StringSlot*>(mem);
  ring::StringSlot* expected = nullptr;
  if (!g_table.compare_exchange_strong(expected, mine, std::memory_order_acq_rel,
                                       std::memory_order_acquire)) {
    if (mine != TableFailed()) munmap(mem, kBytes);
    mine = expected;
  }
  return mine == TableFailed() ? nullptr : mine;
}

// Copies Ready local slot `index` into ring slot `index`, once: whoever wins the CAS
// on the ring slot writes it; everyone else leaves it alone.
void CopyToRing(const ring::StringSlot& from, uint64_t index, ring::StringSlot* slots,
                uint64_t capacity) noexcept {
  if (index >= capacity) {
    g_dropped.fetch_add(1, std::memory_order_relaxed);  // the ring cannot carry this id
    return;
  }
  ring::StringSlot& to = slots[index];
  uint32_t expected = ring::kStringEmpty;
  if (!to.state.compare_exchange_strong(expected, ring::kStringWriting,
                                        std::memory_order_acquire, std::memory_order_relaxed)) {
    return;
  }
  to.length = from.length;
  to.hash = from.hash;
  std::memcpy(to.text, from.text, sizeof(to.text));
  to.state.store(ring::kStringReady, std::memory_order_release);
}

// Length kept for a name of `length` bytes: at most kMaxStringBytes, never cutting a
// UTF-8 sequence in two (backs off over at most 3 continuation bytes).
size_t StoredLength(const char* text, size_t length) noexcept {
  if (length <= ring::kMaxStringBytes) return length;
  size_t cut = ring::kMaxStringBytes;
  while (cut > ring::kMaxStringBytes - 3 &&
         (static_cast<unsigned char>(text[cut]) & 0xc0) == 0x80) {
    --cut;
  }
  return cut;
}

bool SameName(const ring::StringSlot& slot, uint64_t hash, const char* text,
              size_t stored) noexcept {
  return slot.hash == hash && slot.length == stored &&
         (stored == 0 || std::memcmp(slot.text, text, stored) == 0);
}

// Waits (bounded) for a slot another thread is writing; returns its final state, or
// kAbandoned after marking it so (see above). A write takes a few dozen nanoseconds, so
// the spin almost always suffices; past it the writer was preempted inside that window,
// and we yield the CPU (the one system call of this file on a contended slow path) so
// that it can finish, for at most kWaitNs.
uint32_t AwaitSlot(ring::StringSlot& slot) noexcept {
  uint32_t state = ring::kStringWriting;
  for (uint32_t spin = 0; spin < kWaitSpins; ++spin) {
    CpuRelax();
    state = slot.state.load(std::memory_order_acquire);
    if (state != ring::kStringWriting) return state;
  }
  const uint64_t deadline = MonotonicClockNs() + kWaitNs;
  while (MonotonicClockNs() < deadline) {
    sched_yield();
    state = slot.state.load(std::memory_order_acquire);
    if (state != ring::kStringWriting) return state;
  }
  slot.state.compare_exchange_strong(state, kAbandoned, std::memory_order_acquire,
                                     std::memory_order_acquire);
  return state == ring::kStringWriting ? kAbandoned : state;
}

// ---- Per-thread stack -----------------------------------------------------------
//
// initial-exec TLS: one %fs-relative access, no __tls_get_addr call and no lazy
// allocation. That model draws on the static TLS surplus glibc reserves for libraries
// loaded with dlopen (NVTX dlopens us when we are not preloaded), which is small:
// keep this struct well under 512 bytes. Constant-initialised and trivially
// destructible, so no TLS init or destructor hooks either.
constexpr uint32_t kStackDepth = 64;

struct RegionStack {
  uint32_t depth;  // open ranges, including those beyond kStackDepth (not stored)
  uint32_t ids[kStackDepth];
};
static_assert(sizeof(RegionStack) < 512, "keep the static TLS footprint small");

thread_local RegionStack t_stack __attribute__((tls_model("initial-exec"))) = {};

}  // namespace

uint32_t InternRegionHashed(const char* text, size_t length, uint64_t hash) noexcept {
  if (text == nullptr) length = 0;
  ring::StringSlot* table = Table();
  if (table == nullptr) {
    g_dropped.fetch_add(1, std::memory_order_relaxed);
    return 0;
  }
  const size_t stored = StoredLength(text, length);
  for (uint32_t probe = 0; probe < 2 * kMaxProbes; ++probe) {
    uint64_t index = (hash + probe) & (kRegionSmallWindow - 1);
    if (probe >= kMaxProbes) {
      // Past the small window, which is full around h: never back into it.
      index = (hash + probe - kMaxProbes) & kMask;
      if (index < kRegionSmallWindow) index += kRegionSmallWindow;
    }
    ring::StringSlot& slot = table[index];
    uint32_t state = slot.state.load(std::memory_order_acquire);
    if (state == ring::kStringEmpty) {
      if (slot.state.compare_exchange_strong(state, ring::kStringWriting,
                                             std::memory_order_acquire,
                                             std::memory_order_acquire)) {
        slot.length = static_cast<uint32_t>(stored);
        slot.hash = hash;
        if (stored != 0) std::memcpy(slot.text, text, stored);
        // seq_cst: ordered before the load of g_ring_slots below (see its comment).
        slot.state.store(ring::kStringReady, std::memory_order_seq_cst);
        if (ring::StringSlot* slots = g_ring_slots.load(std::memory_order_seq_cst)) {
          CopyToRing(slot, index, slots, g_ring_capacity.load(std::memory_order_relaxed));
        }
        return static_cast<uint32_t>(index + 1);
      }
      // Lost the race: `state` now holds the winner's state; examine it below.
    }
    if (state == ring::kStringWriting) state = AwaitSlot(slot);
    if (state == ring::kStringReady && SameName(slot, hash, text, stored)) {
      return static_cast<uint32_t>(index + 1);
    }
  }
  g_dropped.fetch_add(1, std::memory_order_relaxed);
  return 0;
}

uint32_t InternRegion(const char* name, size_t length) noexcept {
  if (name == nullptr) length = 0;
  return InternRegionHashed(name, length, Hash64(name == nullptr ? "" : name, length));
}

void PushRegion(uint32_t id) noexcept {
  RegionStack& stack = t_stack;
  const uint32_t depth = stack.depth;
  if (depth < kStackDepth) [[likely]] {
    stack.ids[depth] = id;
  } else {
    g_dropped.fetch_add(1, std::memory_order_relaxed);
    if (depth == UINT32_MAX) return;  // cannot count deeper; pops still unwind
  }
  stack.depth = depth + 1;
}

void PopRegion() noexcept {
  RegionStack& stack = t_stack;
  if (stack.depth != 0) --stack.depth;  // a pop without a push is ignored
}

uint32_t CurrentRegionId() noexcept {
  const RegionStack& stack = t_stack;
  const uint32_t depth = stack.depth < kStackDepth ? stack.depth : kStackDepth;
  return depth == 0 ? 0 : stack.ids[depth - 1];
}

uint32_t RegionDepth() noexcept { return t_stack.depth; }

void MirrorRegionsInto(ring::StringSlot* slots, uint64_t capacity) noexcept {
  if (slots == nullptr) capacity = 0;
  g_ring_capacity.store(capacity, std::memory_order_relaxed);
  g_ring_slots.store(slots, std::memory_order_seq_cst);  // after capacity: seq_cst ⊇ release
  if (slots == nullptr) return;
  ring::StringSlot* table = g_table.load(std::memory_order_acquire);
  if (table == nullptr || table == TableFailed()) return;  // later interns mirror themselves
  for (uint64_t index = 0; index < kCapacity; ++index) {
    if (table[index].state.load(std::memory_order_seq_cst) == ring::kStringReady) {
      CopyToRing(table[index], index, slots, capacity);
    }
  }
}

size_t RegionName(uint32_t id, char* out, size_t out_size) noexcept {
  if (id == 0 || id > kCapacity) return 0;
  ring::StringSlot* table = g_table.load(std::memory_order_acquire);
  if (table == nullptr || table == TableFailed()) return 0;
  const ring::StringSlot& slot = table[id - 1];
  if (slot.state.load(std::memory_order_acquire) != ring::kStringReady) return 0;
  if (out != nullptr && out_size != 0) {
    const size_t n = slot.length < out_size - 1 ? slot.length : out_size - 1;
    std::memcpy(out, slot.text, n);
    out[n] = '\0';
  }
  return slot.length;
}

uint64_t RegionsDropped() noexcept { return g_dropped.load(std::memory_order_relaxed); }

}  // namespace collwatch
