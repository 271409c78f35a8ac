// One simulated rank of the soak (bench/soak.cc): a real NCCL program against the no-op
// NCCL, run under the preload, so its records go through the interposer into a real
// ring. Each step is an all-reduce and a grouped send/receive with the neighbour rank,
// paced on the wall clock from a start time all ranks share, so ranks stay in step
// however the box schedules them. Threading: one thread.
// Usage: collwatch_soak_rank RANK NRANKS SECONDS STEPS_PER_SECOND START_REALTIME_NS
#include <nccl.h>
#include <time.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace {

void SleepUntil(int64_t realtime_ns) {
  const timespec until{static_cast<time_t>(realtime_ns / 1'000'000'000), static_cast<long>(realtime_ns % 1'000'000'000)};
  while (clock_nanosleep(CLOCK_REALTIME, TIMER_ABSTIME, &until, nullptr) != 0) {
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 6) {
    std::fprintf(stderr, "usage: %s RANK NRANKS SECONDS STEPS_PER_SECOND START_REALTIME_NS\n", argv[0]);
    return 2;
  }
  const int rank = std::atoi(argv[1]);
  const int nranks = std::atoi(argv[2]);
  const double seconds = std::atof(argv[3]);
  const double steps_per_second = std::atof(argv[4]);
  const int64_t start_ns = std::strtoll(argv[5], nullptr, 10);
  if (nranks < 2 || rank < 0 || rank >= nranks || steps_per_second <= 0) return 2;

  ncclUniqueId id;
  ncclComm_t comm = nullptr;
  if (ncclGetUniqueId(&id) != ncclSuccess || ncclCommInitRank(&comm, nranks, id, rank) != ncclSuccess) return 1;
  const int peer = (rank ^ 1) < nranks ? (rank ^ 1) : rank;  // an odd last rank talks to itself
  const auto steps = static_cast<int64_t>(seconds * steps_per_second);
  const auto period_ns = static_cast<int64_t>(1e9 / steps_per_second);
  float buffer[256] = {};
  int failures = 0;
  for (int64_t step = 0; step < steps; ++step) {
    SleepUntil(start_ns + step * period_ns);
    failures += ncclAllReduce(buffer, buffer, 256, ncclFloat32, ncclSum, comm, nullptr) != ncclSuccess;
    failures += ncclGroupStart() != ncclSuccess;
    failures += ncclSend(buffer, 64, ncclFloat32, peer, comm, nullptr) != ncclSuccess;
    failures += ncclRecv(buffer, 64, ncclFloat32, peer, comm, nullptr) != ncclSuccess;
    failures += ncclGroupEnd() != ncclSuccess;
  }
  ncclCommDestroy(comm);
  return failures == 0 ? 0 : 1;
}
