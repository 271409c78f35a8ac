// What the Watch stream sends per frame: the whole state vs the delta, for a running
// job (every rank moves each frame), a job where one rank in 64 moves, and a hung job
// (one collective in flight, nothing moves), at 64 and 1,024 ranks, through the collector's own LiveState.
// Prints bytes per frame and per second at the default 2 frames/s (docs/dashboard.md).
#include <chrono>
#include <cstdio>
#include <thread>
#include <string>

#include "collector/live_state.h"
#include "collector/watch_delta.h"
#include "ring/ring_format.h"

namespace collwatch {
namespace {

constexpr uint64_t kComm = 0x5eed;
constexpr int kFrames = 20;
constexpr double kFramesPerSecond = 2;  // CollectorOptions::watch_interval_s = 0.5

std::string Key(int rank) { return "host-" + std::to_string(rank / 8) + ":" + std::to_string(10000 + rank); }

// One rank's next collective, entered and (unless `hang`) completed.
v1::StreamEventsRequest Step(int rank, int nranks, uint64_t seq, bool hang = false) {
  v1::StreamEventsRequest batch;
  batch.set_writer_status(v1::WRITER_STATUS_RUNNING);
  for (v1::EventKind kind : {v1::EVENT_KIND_ENTER, v1::EVENT_KIND_COMPLETE}) {
    if (hang && kind == v1::EVENT_KIND_COMPLETE) break;
    v1::Event* event = batch.add_events();
    event->set_kind(kind);
    event->set_fn(static_cast<uint32_t>(ring::ApiFn::kAllReduce));
    event->set_comm_id(kComm);
    event->set_rank(rank);
    event->set_nranks(nranks);
    event->set_seq(seq);
  }
  return batch;
}

void Measure(int nranks, const char* name, int movers_every) {
  LiveState live;
  for (int rank = 0; rank < nranks; ++rank) {
    v1::RankIdentity identity;
    identity.set_job("bench");
    identity.set_host("host-" + std::to_string(rank / 8));
    identity.set_pid(10000 + rank);
    identity.set_rank(rank);
    identity.set_world_size(nranks);
    identity.set_ring_path("/dev/shm/collwatch-1000/bench-" + std::to_string(rank) + ".ring");
    live.StreamOpened(Key(rank), identity);
    live.BatchAccepted(Key(rank), Step(rank, nranks, 1), 2);
    // A hung job: everyone entered seq 2 and it never completes (its age still changes).
    if (movers_every == 0) live.BatchAccepted(Key(rank), Step(rank, nranks, 2, /*hang=*/true), 1);
  }
  v1::ClusterState previous = live.Snapshot("bench");
  double full_bytes = 0, delta_bytes = 0;
  for (int frame = 0; frame < kFrames; ++frame) {
    if (movers_every > 0) {
      for (int rank = 0; rank < nranks; rank += movers_every) {
        live.BatchAccepted(Key(rank), Step(rank, nranks, static_cast<uint64_t>(frame) + 2), 2);
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // time passes between frames
    v1::ClusterState current = live.Snapshot("bench");
    v1::WatchResponse full;
    *full.mutable_state() = current;
    full.set_full(true);
    full_bytes += static_cast<double>(full.ByteSizeLong());
    delta_bytes += static_cast<double>(MakeWatchDelta(previous, current).ByteSizeLong());
    previous = std::move(current);
  }
  full_bytes /= kFrames;
  delta_bytes /= kFrames;
  std::printf("%5d ranks  %-26s full %9.0f B/frame (%7.1f KiB/s)  delta %9.0f B/frame (%7.1f KiB/s)  ratio %.3f\n",
              nranks, name, full_bytes, full_bytes * kFramesPerSecond / 1024, delta_bytes,
              delta_bytes * kFramesPerSecond / 1024, delta_bytes / full_bytes);
}

}  // namespace
}  // namespace collwatch

int main() {
  for (int nranks : {64, 1024}) {
    collwatch::Measure(nranks, "running (all ranks move)", 1);
    collwatch::Measure(nranks, "1 rank in 64 moves", 64);
    collwatch::Measure(nranks, "hung (nothing moves)", 0);
  }
  return 0;
}
