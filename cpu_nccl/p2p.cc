// Send and Recv over the per-pair byte rings of the segment (protocol: shm_layout.h).
// Threading: a ring has one sending and one receiving thread; each advances only its own
// counter (head or tail) and reads the other's with seq_cst loads.
#include <cstring>

#include "cpu_nccl/task.h"

namespace collwatch::cpu_nccl {
namespace {

constexpr uint64_t kHeaderBytes = sizeof(MessageHeader);

uint64_t PaddedBytes(uint64_t bytes) noexcept { return AlignUp(bytes, kHeaderBytes); }

}  // namespace

Status ProgressSend(ncclComm* comm, P2pState& s, int32_t* blocked_on, bool* moved) noexcept {
  const Segment& seg = comm->seg;
  ChannelControl* ch = seg.Channel(comm->rank, s.peer);
  uint8_t* ring = seg.Ring(comm->rank, s.peer);
  const uint64_t capacity = seg.geo.channel_bytes;
  uint64_t head = ch->head.load(std::memory_order_relaxed);  // only this thread writes it
  uint64_t tail = ch->tail.load();
  if (s.stage == kP2pHeader) {
    if (capacity - (head - tail) < kHeaderBytes) {
      *blocked_on = s.peer;
      return Status::kBlocked;
    }
    const MessageHeader header{s.bytes, kMessageTag};
    std::memcpy(ring + head % capacity, &header, sizeof header);
    head += kHeaderBytes;
    ch->head.store(head);
    WakeRankIfWaiting(seg, s.peer, comm->rank);
    s.stage = kP2pPayload;
    s.done_bytes = 0;
    *moved = true;
  }
  const uint64_t total = PaddedBytes(s.bytes);
  const auto* src = static_cast<const uint8_t*>(s.send);
  while (s.done_bytes < total) {
    uint64_t space = capacity - (head - tail);
    if (space == 0) {
      tail = ch->tail.load();
      space = capacity - (head - tail);
      if (space == 0) {
        *blocked_on = s.peer;
        return Status::kBlocked;
      }
    }
    const uint64_t pos = head % capacity;
    uint64_t len = total - s.done_bytes;
    if (len > space) len = space;
    if (len > capacity - pos) len = capacity - pos;
    if (s.done_bytes < s.bytes) {
      const uint64_t payload = s.bytes - s.done_bytes;
      std::memcpy(ring + pos, src + s.done_bytes, payload < len ? payload : len);
    }
    head += len;
    s.done_bytes += len;
    ch->head.store(head);
    WakeRankIfWaiting(seg, s.peer, comm->rank);
    *moved = true;
  }
  return Status::kDone;
}

Status ProgressRecv(ncclComm* comm, P2pState& s, int32_t* blocked_on, bool* moved) noexcept {
  const Segment& seg = comm->seg;
  ChannelControl* ch = seg.Channel(s.peer, comm->rank);
  const uint8_t* ring = seg.Ring(s.peer, comm->rank);
  const uint64_t capacity = seg.geo.channel_bytes;
  uint64_t tail = ch->tail.load(std::memory_order_relaxed);  // only this thread writes it
  uint64_t head = ch->head.load();
  if (s.stage == kP2pHung) {
    *blocked_on = kWaitAbortOnly;
    return Status::kBlocked;
  }
  if (s.stage == kP2pHeader) {
    if (head - tail < kHeaderBytes) {
      *blocked_on = s.peer;
      return Status::kBlocked;
    }
    MessageHeader header;
    std::memcpy(&header, ring + tail % capacity, sizeof header);
    *moved = true;
    if (header.bytes != s.bytes || header.tag != kMessageTag) {
      // A send of another size: NCCL has no check for this and never completes.
      s.stage = kP2pHung;
      *blocked_on = kWaitAbortOnly;
      return Status::kBlocked;
    }
    tail += kHeaderBytes;
    ch->tail.store(tail);
    WakeRankIfWaiting(seg, s.peer, comm->rank);
    s.stage = kP2pPayload;
    s.done_bytes = 0;
  }
  const uint64_t total = PaddedBytes(s.bytes);
  auto* dst = static_cast<uint8_t*>(s.recv);
  while (s.done_bytes < total) {
    uint64_t avail = head - tail;
    if (avail == 0) {
      head = ch->head.load();
      avail = head - tail;
      if (avail == 0) {
        *blocked_on = s.peer;
        return Status::kBlocked;
      }
    }
    const uint64_t pos = tail % capacity;
    uint64_t len = total - s.done_bytes;
    if (len > avail) len = avail;
    if (len > capacity - pos) len = capacity - pos;
    if (s.done_bytes < s.bytes) {
      const uint64_t payload = s.bytes - s.done_bytes;
      std::memcpy(dst + s.done_bytes, ring + pos, payload < len ? payload : len);
    }
    tail += len;
    s.done_bytes += len;
    ch->tail.store(tail);
    WakeRankIfWaiting(seg, s.peer, comm->rank);
    *moved = true;
  }
  return Status::kDone;
}

}  // namespace collwatch::cpu_nccl
