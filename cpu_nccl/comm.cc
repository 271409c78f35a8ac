// Communicator objects and the init protocol (attach, claim, wait for all, unlink).
// Threading: see comm.h. Allocation only at creation; the init protocol never blocks
// itself, it reports what it waits for and the engine sleeps.
#include "cpu_nccl/comm.h"

#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <new>

#include "cpu_nccl/config.h"
#include "cpu_nccl/profiler.h"
#include "ring/hash.h"

namespace collwatch::cpu_nccl {
namespace {

constexpr uint64_t kSplitTag = 0x74696c7073ull;    // "split"
constexpr uint64_t kShrinkTag = 0x6b6e69726873ull;  // "shrink"

void FreeComm(ncclComm* comm) noexcept {
  profiler::CommFreed(comm);
  UnmapSegment(&comm->seg);
  std::free(comm->srcs);
  std::free(comm->redops);
  comm->magic = 0;
  comm->~ncclComm();
  std::free(comm);
}

bool HeaderMatches(const SegmentHeader* h, const Geometry& g, uint64_t key) noexcept {
  return h->version == kSegmentVersion && h->nranks == g.nranks && h->key == key &&
         h->slot_bytes == g.slot_bytes && h->channel_bytes == g.channel_bytes &&
         h->total_bytes == g.total_bytes;
}

}  // namespace

ncclComm* NewComm(int rank, int nranks, uint64_t key) noexcept {
  void* memory = std::calloc(1, sizeof(ncclComm));
  if (memory == nullptr) return nullptr;
  ncclComm* comm = new (memory) ncclComm();
  comm->magic = kCommMagic;
  comm->rank = rank;
  comm->nranks = nranks;
  comm->key = key;
  comm->blocking = true;
  const Settings settings = LoadSettings();
  comm->spin = settings.spin;
  comm->mismatch_completes = settings.mismatch_completes;
  comm->srcs = static_cast<const void**>(std::calloc(static_cast<size_t>(nranks), sizeof(void*)));
  comm->refs.store(1);
  if (comm->srcs == nullptr ||
      !SegmentPath(settings.shm_dir, key, comm->path, sizeof comm->path)) {
    FreeComm(comm);
    return nullptr;
  }
  return comm;
}

void RetainComm(ncclComm* comm) noexcept { comm->refs.fetch_add(1); }

void ReleaseComm(ncclComm* comm) noexcept {
  if (comm->refs.fetch_sub(1) == 1) FreeComm(comm);
}

void ReleaseHandle(ncclComm* comm) noexcept {
  if (comm->handle_gone.exchange(true)) return;
  comm->magic = 0;
  ReleaseComm(comm);
}

void InterruptComm(ncclComm* comm, uint32_t new_state) noexcept {
  comm->state.store(new_state);
  const timespec pause{0, 200 * 1000};
  for (;;) {
    // Ring on every round: a thread may be between its check and its sleep.
    if (comm->slot_claimed.load()) RingDoorbell(comm->seg.Rank(comm->rank));
    if (comm->running.load() == 0) break;
    nanosleep(&pause, nullptr);
  }
}

Status ProgressInit(ncclComm* comm, int32_t* blocked_on, bool* moved,
                    ncclResult_t* error) noexcept {
  const Geometry geo = ComputeGeometry(static_cast<uint32_t>(comm->nranks));
  for (;;) {
    switch (comm->init_stage) {
      case kInitOpen: {
        if (MapSegment(comm->path, geo, &comm->seg) != 0) {
          *error = ncclSystemError;
          return Status::kFailed;
        }
        SegmentHeader* h = comm->seg.Header();
        uint32_t expected = 0;
        if (h->creator.compare_exchange_strong(expected, 1)) {
          h->version = kSegmentVersion;
          h->nranks = geo.nranks;
          h->key = comm->key;
          h->slot_bytes = geo.slot_bytes;
          h->channel_bytes = geo.channel_bytes;
          h->total_bytes = geo.total_bytes;
          h->magic.store(kSegmentMagic, std::memory_order_release);
        }
        comm->init_stage = kInitWaitMagic;
        *moved = true;
        break;
      }
      case kInitWaitMagic: {
        const SegmentHeader* h = comm->seg.Header();
        if (h->magic.load(std::memory_order_acquire) != kSegmentMagic) {
          *blocked_on = kPoll;  // the creator is between its CAS and its magic store
          return Status::kBlocked;
        }
        // Another geometry or key under this name: real NCCL would hang in bootstrap.
        comm->init_stage = HeaderMatches(h, geo, comm->key) ? kInitClaim : kInitHung;
        *moved = true;
        break;
      }
      case kInitClaim: {
        RankControl* me = comm->seg.Rank(comm->rank);
        uint32_t expected = 0;
        if (!me->claimed.compare_exchange_strong(expected, 1)) {
          comm->init_stage = kInitHung;  // two processes for one rank: never completes
          *moved = true;
          break;
        }
        me->wait_on.store(kNotWaiting);
        me->pid = static_cast<uint32_t>(getpid());
        comm->slot_claimed.store(true);
        comm->seg.Header()->attached.fetch_add(1);
        WakeWaitersOf(comm->seg, comm->rank);
        comm->init_stage = kInitWaitAll;
        *moved = true;
        break;
      }
      case kInitWaitAll: {
        SegmentHeader* h = comm->seg.Header();
        if (h->attached.load() < static_cast<uint32_t>(comm->nranks)) {
          *blocked_on = kWaitAny;
          return Status::kBlocked;
        }
        if (comm->rank == 0) {
          unlink(comm->path);  // every rank has it mapped; nothing may find it any more
          h->unlinked.store(1);
          WakeWaitersOf(comm->seg, 0);
          comm->init_stage = kInitDone;
        } else {
          comm->init_stage = kInitWaitUnlink;
        }
        *moved = true;
        break;
      }
      case kInitWaitUnlink:
        if (comm->seg.Header()->unlinked.load() == 0) {
          *blocked_on = 0;
          return Status::kBlocked;
        }
        comm->init_stage = kInitDone;
        *moved = true;
        break;
      case kInitDone:
        profiler::CommReady(comm);
        comm->ready.store(true);
        return Status::kDone;
      case kInitHung:
        *blocked_on = comm->slot_claimed.load() ? kWaitAbortOnly : kPoll;
        return Status::kBlocked;
    }
  }
}

uint64_t SplitChildKey(uint64_t parent_key, uint64_t serial, int color) noexcept {
  uint64_t h = HashCombine(parent_key, kSplitTag);
  h = HashCombine(h, serial);
  return HashCombine(h, static_cast<uint64_t>(static_cast<uint32_t>(color)));
}

uint64_t ShrinkChildKey(uint64_t parent_key, uint64_t serial, const int* excluded,
                        int nexcluded) noexcept {
  uint64_t h = HashCombine(parent_key, kShrinkTag);
  h = HashCombine(h, serial);
  for (int i = 0; i < nexcluded; ++i) {
    h = HashCombine(h, static_cast<uint64_t>(static_cast<uint32_t>(excluded[i])));
  }
  return h;
}

}  // namespace collwatch::cpu_nccl
