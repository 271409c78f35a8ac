// Python call paths (API: call_paths.h). Threading: see call_paths.h.
//
// The ring's slots are the table: a path is identified by the hash of its raw frames
// (code object, instruction offset; CapturePythonFrames computes it as it walks), probed from hash mod capacity for at most
// kMaxProbes slots. A hit costs no more than the walk. A miss claims a free slot (CAS
// Empty -> Writing), resolves each frame's file, function and line (the slow path, once
// per path), interns the names in the string table (regions.h) and publishes the slot
// (Ready). A slot being written by another thread is not waited for: that call goes
// without a path rather than wait.
#include "interposer/call_paths.h"

#include <atomic>
#include <cstdio>
#include <cstring>

#include "interposer/python_frames.h"
#include "interposer/regions.h"

namespace collwatch {
namespace {

constexpr uint32_t kMaxProbes = 64;
// Deeper stacks are walked up to here: the outermost frames beyond it are left out.
constexpr size_t kMaxWalkedFrames = ring::kMaxCallPathFrames;

std::atomic<ring::CallPathSlot*> g_slots{nullptr};
std::atomic<uint64_t> g_capacity{0};
std::atomic<bool> g_said_why{false};
std::atomic<uint64_t> g_dropped{0};

// Fills a claimed slot with the resolved frames and publishes it.
void FillSlot(ring::CallPathSlot& slot, uint64_t hash, const RawPythonFrame* frames, size_t count,
              bool truncated) noexcept {
  char file[1024];  // whole, so that its tail is the file's own
  char function[ring::kMaxStringBytes * 2];
  uint16_t stored = 0;
  for (size_t i = 0; i < count; ++i) {
    int32_t line = 0;
    ring::CallPathFrame& to = slot.frames[stored];
    if (!DescribePythonFrame(frames[i], file, sizeof file, function, sizeof function, &line)) continue;
    // The tail of a long path names the file; its head is the same install prefix.
    const size_t file_length = std::strlen(file);
    size_t cut = file_length > ring::kMaxStringBytes ? file_length - ring::kMaxStringBytes : 0;
    while (cut < file_length && (static_cast<unsigned char>(file[cut]) & 0xc0) == 0x80) ++cut;  // whole characters
    to.file_id = InternRegion(file + cut, file_length - cut);
    to.function_id = InternRegion(function, std::strlen(function));
    to.line = line;
    to.reserved = 0;
    ++stored;
  }
  slot.frame_count = stored;
  slot.flags = truncated ? ring::kCallPathTruncated : 0;
  slot.hash = hash;
  slot.state.store(ring::kStringReady, std::memory_order_release);
}

// A Python process whose interpreter cannot be read says so once, on stderr, when the
// answer is final (PythonFramesSettled).
void SayOnceWhyNoCallPaths(const char* why) noexcept {
  if (why == nullptr || PythonVersion() == 0 || !PythonFramesSettled()) return;
  if (g_said_why.exchange(true, std::memory_order_relaxed)) return;
  std::fprintf(stderr, "collwatch: no Python call paths in this process: %s\n", why);
}

}  // namespace

void SetCallPathSlots(ring::CallPathSlot* slots, uint64_t capacity) noexcept {
  g_capacity.store(capacity, std::memory_order_relaxed);
  g_slots.store(slots, std::memory_order_release);
}

uint32_t CurrentCallPathId() noexcept {
  ring::CallPathSlot* slots = g_slots.load(std::memory_order_acquire);
  const uint64_t capacity = g_capacity.load(std::memory_order_relaxed);
  if (slots == nullptr || capacity == 0) return 0;
  const char* why = nullptr;
  if (!PythonFramesReady(&why)) [[unlikely]] {
    SayOnceWhyNoCallPaths(why);
    return 0;
  }
  RawPythonFrame frames[kMaxWalkedFrames + 1];
  uint64_t hash = 0;
  const size_t walked = CapturePythonFrames(frames, kMaxWalkedFrames + 1, &hash);
  if (walked == 0) return 0;
  const bool truncated = walked > kMaxWalkedFrames;
  const size_t count = truncated ? kMaxWalkedFrames : walked;
  const uint64_t mask = capacity - 1;  // a power of two (ring_writer)
  for (uint32_t probe = 0; probe < kMaxProbes && probe < capacity; ++probe) {
    const uint64_t index = (hash + probe) & mask;
    ring::CallPathSlot& slot = slots[index];
    uint32_t state = slot.state.load(std::memory_order_acquire);
    if (state == ring::kStringReady) {
      if (slot.hash == hash) return static_cast<uint32_t>(index + 1);
      continue;
    }
    if (state == ring::kStringEmpty &&
        slot.state.compare_exchange_strong(state, ring::kStringWriting, std::memory_order_acquire,
                                           std::memory_order_acquire)) {
      FillSlot(slot, hash, frames, count, truncated);
      return static_cast<uint32_t>(index + 1);
    }
    if (state == ring::kStringWriting) break;  // maybe ours, being written: never wait
  }
  g_dropped.fetch_add(1, std::memory_order_relaxed);
  return 0;
}

uint64_t CallPathsDropped() noexcept { return g_dropped.load(std::memory_order_relaxed); }

}  // namespace collwatch
