// The collectives as chunked phases over the staging slots (protocol: shm_layout.h).
// Threading: runs on the thread that owns the communicator's operations; peers are other
// processes (or other ranks of this thread) that it only meets through the segment.
//
// Per chunk, what each rank writes into its own slot and then reads (n ranks, rank r):
//   AllReduce, Reduce  phase 0: write the input chunk (pre-multiplied for PreMulSum and
//                      floating Avg); read slice r of every slot, reduce it in rank order
//                      0..n-1 into slice r of the own slot. phase 1: read every slice into
//                      recvbuff (Reduce: root only). Each element is reduced by one rank,
//                      so every rank gets the same bits.
//   Broadcast          root writes the chunk; the others copy it.
//   AllGather, Gather  everyone writes its piece; everyone (Gather: root) copies all n.
//   Scatter            root writes n blocks; rank r copies block r.
//   ReduceScatter      everyone writes n blocks; rank r reduces block r of every slot.
//   AlltoAll           everyone writes n blocks; rank r copies block r of every slot.
#include <cstring>

#include "cpu_nccl/task.h"

namespace collwatch::cpu_nccl {
namespace {

bool IsTwoPhase(OpKind kind) noexcept {
  return kind == OpKind::kAllReduce || kind == OpKind::kReduce;
}

bool IsBlockKind(OpKind kind) noexcept {
  return kind == OpKind::kReduceScatter || kind == OpKind::kAlltoAll || kind == OpKind::kScatter;
}

// Whether rank `rank` writes its slot in phase 0 of a chunk.
bool WritesSlot(const CollState& s, int rank) noexcept {
  if (s.kind == OpKind::kBroadcast || s.kind == OpKind::kScatter) return rank == s.root;
  return true;
}

enum class WaitSet : uint8_t { kAll, kRoot, kNobody };

// Whose step a rank waits for before reading in the current phase. The first phase of a
// collective always waits for everyone: that is where descriptors are compared.
WaitSet WaitSetFor(const CollState& s, int rank) noexcept {
  if (s.chunk == 0 && s.phase == 0) return WaitSet::kAll;
  switch (s.kind) {
    case OpKind::kReduce:
      return s.phase == 0 || rank == s.root ? WaitSet::kAll : WaitSet::kNobody;
    case OpKind::kGather:
      return rank == s.root ? WaitSet::kAll : WaitSet::kNobody;
    case OpKind::kBroadcast:
    case OpKind::kScatter:
      return rank == s.root ? WaitSet::kNobody : WaitSet::kRoot;
    default:
      return WaitSet::kAll;
  }
}

// Slice [*begin, *end) of a chunk of `elems` elements that rank r reduces; slices start
// on 64-byte boundaries where the chunk is long enough.
void Slice(size_t elems, int nranks, int r, size_t elem_size, size_t* begin, size_t* end) noexcept {
  const size_t align = elem_size >= 64 ? 1 : 64 / elem_size;
  size_t per = (elems + static_cast<size_t>(nranks) - 1) / static_cast<size_t>(nranks);
  per = (per + align - 1) / align * align;
  const size_t b = per * static_cast<size_t>(r);
  const size_t e = b + per;
  *begin = b < elems ? b : elems;
  *end = e < elems ? e : elems;
}

// Copies `elems` input elements into staging, pre-multiplied where the reduction asks.
void CopyIn(const CollState& s, void* dst, const void* src, size_t elems, size_t es) noexcept {
  if (s.red.premul) {
    GetScaleFn(s.dtype)(dst, src, elems, s.scalar_bits);
  } else {
    std::memcpy(dst, src, elems * es);
  }
}

void Reduce(const ncclComm* comm, const CollState& s, void* dst, size_t elems) noexcept {
  GetReduceFn(s.dtype, s.red.base)(dst, comm->srcs, comm->nranks, elems,
                                   s.red.postdiv ? static_cast<uint64_t>(comm->nranks) : 0);
}

void WritePhase(const ncclComm* comm, const CollState& s) noexcept {
  if (s.ipc != nullptr) {
    if (s.phase == 0) {
      std::memcpy(comm->seg.Slot(comm->rank, s.global_chunk), IpcOwnDescriptor(s.ipc),
                  kIpcDescriptorBytes);
    }
    return;
  }
  const size_t es = DtypeSize(s.dtype);
  const int n = comm->nranks;
  const size_t off = s.chunk * s.chunk_elems;
  const size_t elems = s.count - off < s.chunk_elems ? s.count - off : s.chunk_elems;
  const size_t block = s.chunk_elems * es;
  const auto* send = static_cast<const uint8_t*>(s.send);
  uint8_t* mine = comm->seg.Slot(comm->rank, s.global_chunk);
  switch (s.kind) {
    case OpKind::kAllReduce:
    case OpKind::kReduce:
      if (s.phase == 0) CopyIn(s, mine, send + off * es, elems, es);
      break;
    case OpKind::kBroadcast:
      if (comm->rank == s.root) {
        std::memcpy(mine, send + off * es, elems * es);
        if (s.recv != s.send) {
          std::memcpy(static_cast<uint8_t*>(s.recv) + off * es, send + off * es, elems * es);
        }
      }
      break;
    case OpKind::kAllGather:
    case OpKind::kGather:
    case OpKind::kSplitGather:
      std::memcpy(mine, send + off * es, elems * es);
      break;
    case OpKind::kScatter:
      if (comm->rank != s.root) break;
      for (int b = 0; b < n; ++b) {
        std::memcpy(mine + b * block, send + (b * s.count + off) * es, elems * es);
      }
      break;
    case OpKind::kReduceScatter:
      for (int b = 0; b < n; ++b) {
        CopyIn(s, mine + b * block, send + (b * s.count + off) * es, elems, es);
      }
      break;
    case OpKind::kAlltoAll:
      for (int b = 0; b < n; ++b) {
        std::memcpy(mine + b * block, send + (b * s.count + off) * es, elems * es);
      }
      break;
  }
}

void ReadPhase(ncclComm* comm, const CollState& s) noexcept {
  if (s.ipc != nullptr) {
    if (s.phase == 0) {
      for (int p = 0; p < comm->nranks; ++p) {
        IpcNotePeerDescriptor(s.ipc, p, comm->seg.Slot(p, s.global_chunk));
      }
    }
    return;
  }
  const size_t es = DtypeSize(s.dtype);
  const int n = comm->nranks;
  const int rank = comm->rank;
  const size_t off = s.chunk * s.chunk_elems;
  const size_t elems = s.count - off < s.chunk_elems ? s.count - off : s.chunk_elems;
  const size_t block = s.chunk_elems * es;
  auto* recv = static_cast<uint8_t*>(s.recv);
  const Segment& seg = comm->seg;
  const uint64_t g = s.global_chunk;
  switch (s.kind) {
    case OpKind::kAllReduce:
    case OpKind::kReduce: {
      if (s.phase == 0) {
        size_t begin, end;
        Slice(elems, n, rank, es, &begin, &end);
        if (end == begin) break;
        for (int p = 0; p < n; ++p) comm->srcs[p] = seg.Slot(p, g) + begin * es;
        Reduce(comm, s, seg.Slot(rank, g) + begin * es, end - begin);
        break;
      }
      if (s.kind == OpKind::kReduce && rank != s.root) break;
      for (int p = 0; p < n; ++p) {
        size_t begin, end;
        Slice(elems, n, p, es, &begin, &end);
        if (end > begin) {
          std::memcpy(recv + (off + begin) * es, seg.Slot(p, g) + begin * es, (end - begin) * es);
        }
      }
      break;
    }
    case OpKind::kBroadcast:
      if (rank != s.root) std::memcpy(recv + off * es, seg.Slot(s.root, g), elems * es);
      break;
    case OpKind::kGather:
      if (rank != s.root) break;
      [[fallthrough]];
    case OpKind::kAllGather:
    case OpKind::kSplitGather:
      for (int p = 0; p < n; ++p) {
        std::memcpy(recv + (p * s.count + off) * es, seg.Slot(p, g), elems * es);
      }
      break;
    case OpKind::kScatter:
      std::memcpy(recv + off * es, seg.Slot(s.root, g) + rank * block, elems * es);
      break;
    case OpKind::kReduceScatter:
      for (int p = 0; p < n; ++p) comm->srcs[p] = seg.Slot(p, g) + rank * block;
      Reduce(comm, s, recv + off * es, elems);
      break;
    case OpKind::kAlltoAll:
      for (int p = 0; p < n; ++p) {
        std::memcpy(recv + (p * s.count + off) * es, seg.Slot(p, g) + rank * block, elems * es);
      }
      break;
  }
}

OpDesc MakeDesc(const CollState& s) noexcept {
  OpDesc d{};
  d.seq = s.seq;
  d.count = s.count;
  d.kind = static_cast<uint32_t>(s.kind) | (s.ipc != nullptr ? kDescMovesByIpc : 0);
  d.dtype = static_cast<uint32_t>(s.dtype);
  d.redop = s.red.desc_op;
  d.root = s.root;
  return d;
}

// Checks ranks from s.cursor on: true once every rank other than this one (or `only`,
// when >= 0) reached `target`; else records the first laggard.
bool StepsReached(const ncclComm* comm, CollState& s, uint64_t target, int only,
                  int32_t* blocked_on, bool* moved) noexcept {
  const int n = comm->nranks;
  for (; s.cursor < n; ++s.cursor) {
    const int p = s.cursor;
    if (p == comm->rank || (only >= 0 && p != only)) continue;
    if (comm->seg.Rank(p)->step.load() < target) {
      *blocked_on = p;
      return false;
    }
    *moved = true;
  }
  return true;
}

}  // namespace

void InitCollState(CollState* s, OpKind kind, const void* send, void* recv, size_t count,
                   int dtype, int root, const Reduction& red) noexcept {
  *s = CollState{};
  s->kind = kind;
  s->send = send;
  s->recv = recv;
  s->count = count;
  s->dtype = dtype;
  s->root = root;
  s->red = red;
  s->stage = kCollStart;
}

Status ProgressColl(ncclComm* comm, CollState& s, int32_t* blocked_on, bool* moved) noexcept {
  const int rank = comm->rank;
  RankControl* me = comm->seg.Rank(rank);
  for (;;) {
    switch (s.stage) {
      case kCollStart: {
        const size_t es = DtypeSize(s.dtype);
        const uint64_t unit = IsBlockKind(s.kind) ? es * static_cast<uint64_t>(comm->nranks) : es;
        s.seq = ++comm->coll_seq;
        s.chunk_elems = comm->seg.geo.slot_bytes / unit;
        s.nchunks = (s.count + s.chunk_elems - 1) / s.chunk_elems;
        if (s.ipc != nullptr) s.nchunks = 1;  // only descriptors pass through the slots
        s.chunk = 0;
        s.phase = 0;
        if (s.red.premul) {
          s.scalar_bits = 0;
          if (s.red.scalar_is_ptr) {  // ncclScalarDevice: the value as it is now
            std::memcpy(&s.scalar_bits, reinterpret_cast<const void*>(s.red.scalar), es);
          } else {
            s.scalar_bits = s.red.scalar;
          }
        }
        me->desc[s.seq % 2] = MakeDesc(s);
        s.cursor = 0;
        s.stage = kCollGuard;
        *moved = true;
        break;
      }
      case kCollGuard: {
        // Chunk g reuses the slot of chunk g-2: every rank must have started chunk g-1.
        const uint64_t g = comm->chunks;
        if (g >= 2 && WritesSlot(s, rank) &&
            !StepsReached(comm, s, comm->chunk_first_step[(g - 1) % 2], -1, blocked_on, moved)) {
          return Status::kBlocked;
        }
        s.global_chunk = comm->chunks++;
        s.stage = kCollWrite;
        *moved = true;
        break;
      }
      case kCollWrite: {
        WritePhase(comm, s);
        comm->step += 1;
        me->step.store(comm->step);
        if (s.phase == 0) comm->chunk_first_step[s.global_chunk % 2] = comm->step;
        WakeWaitersOf(comm->seg, rank);
        s.target = comm->step;
        s.cursor = 0;
        s.stage = kCollWait;
        *moved = true;
        break;
      }
      case kCollWait: {
        const WaitSet ws = WaitSetFor(s, rank);
        if (ws != WaitSet::kNobody &&
            !StepsReached(comm, s, s.target, ws == WaitSet::kRoot ? s.root : -1, blocked_on,
                          moved)) {
          return Status::kBlocked;
        }
        if (s.chunk == 0 && s.phase == 0) {
          // Same position, another op/count/dtype/op/root anywhere. NCCL has no way to
          // notice: on GPUs such a collective hangs or runs to completion on garbage. Every
          // rank sees every descriptor here, so all decide alike: wait forever, or (the
          // mismatch setting) leave after this one step without moving data.
          const OpDesc mine = me->desc[s.seq % 2];
          bool differs = false;
          for (int p = 0; p < comm->nranks && !differs; ++p) {
            const OpDesc theirs = comm->seg.Rank(p)->desc[s.seq % 2];
            differs = std::memcmp(&mine, &theirs, sizeof mine) != 0;
          }
          if (differs) {
            *moved = true;
            if (comm->mismatch_completes) return Status::kDone;
            s.stage = kCollHung;
            break;
          }
        }
        ReadPhase(comm, s);
        *moved = true;
        s.cursor = 0;
        if (s.ipc != nullptr && s.phase == 0) {
          s.stage = kCollMoveData;
          break;
        }
        s.phase += 1;
        if (s.phase == (IsTwoPhase(s.kind) || s.ipc != nullptr ? 2 : 1)) {
          s.phase = 0;
          s.chunk += 1;
          if (s.chunk == s.nchunks) return Status::kDone;
          s.stage = kCollGuard;
        } else {
          s.stage = kCollWrite;
        }
        break;
      }
      case kCollHung:
        *blocked_on = kWaitAbortOnly;
        return Status::kBlocked;
      case kCollMoveData: {
        const Status st = IpcMoveData(s.ipc, comm, moved);
        if (st != Status::kDone) {
          *blocked_on = kPoll;  // the GPU, not a peer, is awaited
          return st;
        }
        *moved = true;
        s.phase = 1;
        s.stage = kCollWrite;
        break;
      }
    }
  }
}

}  // namespace collwatch::cpu_nccl
