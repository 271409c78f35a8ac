// COLLWATCH_CPU_NCCL_TRACE=1: one stderr line per batch event of the CUDA mode, and a
// report when a batch waits more than 5 s in one stage; also the stage times it reads.
// Threading: Trace and TraceBatch from any thread (one write(2) per line); SetStage and
// ReportSlow on the thread that owns the batch (the enqueuer, then the progress thread).
#include <time.h>
#include <unistd.h>

#include <cstdarg>
#include <cstdint>
#include <cstdio>

#include "cpu_nccl/cuda_queue_internal.h"

namespace collwatch::cpu_nccl {
namespace {

double MonotonicSeconds() noexcept {
  timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) * 1e-9;
}

}  // namespace

// One line on stderr, "collwatch cpu_nccl[pid] <ms> ...", when tracing is on.
void Trace(const char* format, ...) noexcept {
  if (!g_queue.trace) return;
  char line[512];
  // Milliseconds on CLOCK_MONOTONIC: the same clock in every rank, so stage times compare.
  int n = std::snprintf(line, sizeof line, "collwatch cpu_nccl[%d] %.3f ",
                        static_cast<int>(getpid()), MonotonicSeconds() * 1e3);
  va_list args;
  va_start(args, format);
  n += std::vsnprintf(line + n, sizeof line - static_cast<size_t>(n) - 1, format, args);
  va_end(args);
  if (n > static_cast<int>(sizeof line) - 2) n = static_cast<int>(sizeof line) - 2;
  line[n++] = '\n';
  const ssize_t written = write(STDERR_FILENO, line, static_cast<size_t>(n));
  (void)written;  // a lost trace line is no error
}

// "AllGather count 1024 dtype 7 comm 0x.. rank 0/2 stream 0x.. ipc" of a batch's tasks.
void TraceBatch(const char* what, const DeviceBatch* b) noexcept {
  if (!g_queue.trace) return;
  for (int i = 0; i < b->count; ++i) {
    const Task& t = b->tasks[i];
    const bool coll = t.kind == TaskKind::kColl;
    Trace("%s batch %llu task %d/%d: %s%d count %llu dtype %d comm %p rank %d/%d stream %p%s", what,
          static_cast<unsigned long long>(b->serial), i, b->count,
          coll ? "coll kind " : (t.kind == TaskKind::kSend ? "send peer " : "recv peer "),
          coll ? static_cast<int>(t.coll.kind) : t.p2p.peer,
          static_cast<unsigned long long>(coll ? t.coll.count : t.p2p.bytes),
          coll ? t.coll.dtype : -1, static_cast<void*>(t.comm), t.comm->rank, t.comm->nranks,
          static_cast<void*>(t.dev.stream), coll && t.coll.ipc != nullptr ? " ipc" : "");
  }
}

void SetStage(DeviceBatch* b, BatchStage stage) noexcept {
  b->stage = stage;
  b->reported_slow = false;
  if (g_queue.trace) b->stage_since = MonotonicSeconds();
}

// Says once per stage when a batch has waited more than 5 s (trace on only).
void ReportSlow(DeviceBatch* b) noexcept {
  if (!g_queue.trace || b->reported_slow || MonotonicSeconds() - b->stage_since < 5.0) return;
  b->reported_slow = true;
  const char* why = "waits for its output copies";
  if (b->stage == BatchStage::kWaitReady) {
    why = "waits for its streams to reach it, or for an earlier operation of its communicator";
  } else if (b->stage == BatchStage::kRunning) {
    why = "waits for its peers (or its move kernels)";
  }
  Trace("batch %llu %s for 5 s", static_cast<unsigned long long>(b->serial), why);
  if (b->stage == BatchStage::kRunning) {
    for (int i = 0; i < b->count; ++i) {
      const Task& t = b->tasks[i];
      Trace("  task %d done %d blocked_on %d coll stage %d phase %d", i, t.done ? 1 : 0,
            t.blocked_on, t.kind == TaskKind::kColl ? static_cast<int>(t.coll.stage) : -1,
            t.kind == TaskKind::kColl ? static_cast<int>(t.coll.phase) : -1);
    }
  }
}

}  // namespace collwatch::cpu_nccl
