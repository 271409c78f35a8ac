// Test-only: a SyntheticJob (analyzer/synthetic_job.h) that keeps each process's clock
// and sequence numbers, for the schedule and export unit tests. Header-only;
// single-threaded.
#ifndef COLLWATCH_ANALYZER_TEST_JOB_H_
#define COLLWATCH_ANALYZER_TEST_JOB_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "analyzer/job_model.h"
#include "analyzer/synthetic_job.h"

namespace collwatch::analyzer::testing {

inline constexpr uint8_t kFloat32 = 7;
inline constexpr uint8_t kBfloat16 = 9;
inline constexpr int32_t kSum = 0;
inline constexpr int32_t kAvg = 4;

// One collective as a test writes it.
using Op = SyntheticOp;

inline Op Gather(std::string region, uint64_t count = 1024) {
  return Op{ring::ApiFn::kAllGather, count, kFloat32, std::move(region)};
}
inline Op ReduceScatter(std::string region, uint64_t count = 256) {
  return Op{ring::ApiFn::kReduceScatter, count, kFloat32, std::move(region), kAvg};
}

// A SyntheticJob that keeps each process's clock and sequence numbers, so tests write
// only what ranks issue.
class TestJob {
 public:
  explicit TestJob(JobModel* model) : job_(model) {}
  explicit TestJob(SyntheticSink* sink) : job_(sink) {}

  ProcessId AddRank(int32_t global_rank, std::string host = "node0") {
    ProcessInfo info;
    info.host = std::move(host);
    info.pid = 4000 + global_rank;
    info.global_rank = global_rank;
    const ProcessId id = job_.AddProcess(info);
    processes_[id];
    return id;
  }

  // Communicator creation (split children name their parent).
  void Init(ProcessId p, uint64_t comm, int32_t rank, int32_t nranks, uint64_t parent = 0) {
    job_.Init(p, comm, rank, nranks, Tick(p), /*returned=*/true, parent);
    processes_[p].now_ns += kMs;  // SyntheticJob::Init returns 1 ms after it entered
  }

  // A blocking collective (CPU backend): returns and completes together, unless
  // `returns` is false (it hangs inside the call).
  void Collective(ProcessId p, uint64_t comm, int32_t rank, int32_t nranks, const Op& op, bool returns = true) {
    const int64_t t = Tick(p);
    job_.Collective(p, comm, rank, nranks, ++processes_[p].seq[comm], op, t, returns ? Tick(p) : 0);
  }

  // A GPU-style collective: returns at once, completes when a test calls Complete with
  // the index this returns.
  uint64_t AsyncCollective(ProcessId p, uint64_t comm, int32_t rank, int32_t nranks, const Op& op) {
    return job_.Collective(p, comm, rank, nranks, ++processes_[p].seq[comm], op, Tick(p), 0, /*blocking=*/false);
  }
  void Complete(ProcessId p, uint64_t enter_index) { job_.Complete(p, enter_index, Tick(p)); }

  void Send(ProcessId p, uint64_t comm, int32_t rank, int32_t nranks, int32_t peer, uint64_t count) {
    const int64_t t = Tick(p);
    job_.P2p(p, comm, rank, nranks, ring::ApiFn::kSend, peer, ++processes_[p].p2p_seq[{comm, peer}], count, kFloat32,
             t, Tick(p));
  }

  // Moves the process's clock on (every record advances it by 1 us already).
  void Wait(ProcessId p, int64_t ns) { processes_[p].now_ns += ns; }

 private:
  struct State {
    int64_t now_ns = 1'700'000'000'000'000'000;
    std::map<uint64_t, uint64_t> seq;  // per communicator
    std::map<std::pair<uint64_t, int32_t>, uint64_t> p2p_seq;
  };
  int64_t Tick(ProcessId p) { return processes_[p].now_ns += 1000; }

  SyntheticJob job_;
  std::map<ProcessId, State> processes_;
};

}  // namespace collwatch::analyzer::testing

#endif  // COLLWATCH_ANALYZER_TEST_JOB_H_
