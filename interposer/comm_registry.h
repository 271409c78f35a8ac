// Communicators the interposer has seen: handle -> id, rank, size, sequence counters.
// Threading: lock-free. Register/Retire run at communicator creation and destruction
// (any thread); Find runs on every call (any thread) and never blocks or allocates.
#ifndef COLLWATCH_INTERPOSER_COMM_REGISTRY_H_
#define COLLWATCH_INTERPOSER_COMM_REGISTRY_H_

#include <atomic>
#include <cstdint>

namespace collwatch {

struct CommState {
  const void* handle = nullptr;      // the ncclComm_t
  uint64_t id = 0;                   // equal on every rank of the communicator
  std::atomic<int32_t> rank{-1};     // rank in the communicator (-1 until known)
  std::atomic<int32_t> nranks{-1};
  std::atomic<bool> alive{true};     // false once destroyed or aborted
  bool known_at_init = true;         // false: first seen in a call, not at creation
  std::atomic<uint64_t> collective_seq{0};
  std::atomic<uint64_t> child_serial{0};  // splits and shrinks of this communicator
  std::atomic<int32_t> last_async_error{0};
  std::atomic<bool> peer_tables_claimed{false};
  std::atomic<int32_t> peer_capacity{0};  // entries of send_seq / recv_seq, set last
  std::atomic<uint64_t>* send_seq = nullptr;
  std::atomic<uint64_t>* recv_seq = nullptr;

  // Next p2p sequence number with `peer` (1-based); 0 when the peer is out of range.
  uint64_t NextSendSeq(int peer) noexcept { return NextPeerSeq(send_seq, peer); }
  uint64_t NextRecvSeq(int peer) noexcept { return NextPeerSeq(recv_seq, peer); }

 private:
  uint64_t NextPeerSeq(std::atomic<uint64_t>* table, int peer) noexcept {
    if (peer < 0 || peer >= peer_capacity.load(std::memory_order_acquire)) return 0;
    return table[peer].fetch_add(1, std::memory_order_relaxed) + 1;
  }
};

// Adds a live communicator. `nranks` sizes the p2p tables (may be -1: filled later by
// SetShape). Returns nullptr when memory or the table is exhausted (never throws).
CommState* RegisterComm(const void* handle, uint64_t id, int32_t rank, int32_t nranks,
                        bool known_at_init) noexcept;

// Fills rank and size learned after creation (split children, unknown comms).
void SetShape(CommState* comm, int32_t rank, int32_t nranks) noexcept;

// The live communicator with this handle, or nullptr.
CommState* FindComm(const void* handle) noexcept;

// Marks the communicator dead: later calls with the same handle no longer find it.
// The state is never freed (a concurrent Find may still hold it); a later Register may
// reuse its table slot.
void RetireComm(CommState* comm) noexcept;

}  // namespace collwatch

#endif  // COLLWATCH_INTERPOSER_COMM_REGISTRY_H_
