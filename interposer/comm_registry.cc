// Lock-free open-addressing table of communicators, keyed by handle address.
// Threading: see comm_registry.h.
#include "interposer/comm_registry.h"

#include <cstdlib>
#include <new>

#include "ring/hash.h"

namespace collwatch {
namespace {

constexpr uint64_t kSlots = 1u << 14;  // live + retired communicators before we give up
std::atomic<CommState*> g_comm_slots[kSlots];

uint64_t SlotOf(const void* handle) noexcept {
  return Mix64(reinterpret_cast<uintptr_t>(handle)) & (kSlots - 1);
}

std::atomic<uint64_t>* AllocatePeerTable(int32_t nranks) noexcept {
  if (nranks <= 0) return nullptr;
  // calloc gives zeroed memory, which is a valid all-zero atomic array on this ABI.
  return static_cast<std::atomic<uint64_t>*>(std::calloc(static_cast<size_t>(nranks),
                                                         sizeof(std::atomic<uint64_t>)));
}

}  // namespace

CommState* RegisterComm(const void* handle, uint64_t id, int32_t rank, int32_t nranks,
                        bool known_at_init) noexcept {
  auto* comm = new (std::nothrow) CommState();
  if (comm == nullptr) return nullptr;
  comm->handle = handle;
  comm->id = id;
  comm->known_at_init = known_at_init;
  SetShape(comm, rank, nranks);
  const uint64_t start = SlotOf(handle);
  for (uint64_t probe = 0; probe < kSlots; ++probe) {
    std::atomic<CommState*>& slot = g_comm_slots[(start + probe) & (kSlots - 1)];
    CommState* current = slot.load(std::memory_order_acquire);
    // A retired slot is as good as an empty one: lookups skip non-matching entries.
    if ((current == nullptr || !current->alive.load(std::memory_order_acquire)) &&
        slot.compare_exchange_strong(current, comm, std::memory_order_acq_rel)) {
      return comm;
    }
  }
  return nullptr;  // table full: the caller records the calls as an unknown comm
}

void SetShape(CommState* comm, int32_t rank, int32_t nranks) noexcept {
  bool unclaimed = false;
  if (nranks > 0 && comm->peer_tables_claimed.compare_exchange_strong(unclaimed, true)) {
    comm->send_seq = AllocatePeerTable(nranks);
    comm->recv_seq = AllocatePeerTable(nranks);
    if (comm->send_seq != nullptr && comm->recv_seq != nullptr) {
      comm->peer_capacity.store(nranks, std::memory_order_release);
    }
  }
  comm->rank.store(rank, std::memory_order_relaxed);
  comm->nranks.store(nranks, std::memory_order_relaxed);
}

CommState* FindComm(const void* handle) noexcept {
  const uint64_t start = SlotOf(handle);
  for (uint64_t probe = 0; probe < kSlots; ++probe) {
    CommState* current = g_comm_slots[(start + probe) & (kSlots - 1)].load(std::memory_order_acquire);
    if (current == nullptr) return nullptr;
    if (current->handle == handle && current->alive.load(std::memory_order_relaxed)) return current;
  }
  return nullptr;
}

void RetireComm(CommState* comm) noexcept { comm->alive.store(false, std::memory_order_release); }

}  // namespace collwatch
