// Test-only: the synthetic jobs the analyzer and job model unit tests build (JobBuilder:
// ranks on one communicator issuing op lists, blocking or asynchronous), their ops and
// one training step. Header-only; single-threaded.
#ifndef COLLWATCH_ANALYZER_ANALYZER_TEST_JOB_H_
#define COLLWATCH_ANALYZER_ANALYZER_TEST_JOB_H_

#include <algorithm>
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "analyzer/analyzer.h"
#include "analyzer/synthetic_job.h"

namespace collwatch::analyzer {

inline constexpr uint64_t kComm = 0xabcdef0123456789ull;
inline constexpr int64_t kT0 = 1'700'000'000 * kSecond;  // a plausible CLOCK_REALTIME

// The tests' stall floor: 10 s (the default is 30 s).
inline AnalyzerOptions TestOptions() {
  AnalyzerOptions options;
  options.stall_after_s = 10;
  return options;
}

// Every field of a call, to compare two models' calls.
inline auto CallFieldsOf(const Call& call) {
  return std::make_tuple(call.enter_ns, call.return_ns, call.complete_ns, call.count, call.seq, call.group_id,
                         call.comm, call.region, call.call_path, call.rank, call.root_or_peer, call.redop,
                         call.result, call.fn, call.dtype, call.flags, call.call_path_inferred, call.region_unknown,
                         call.region_damaged);
}

inline SyntheticOp Gather(const std::string& region, uint64_t count = 1024) {
  return SyntheticOp{ring::ApiFn::kAllGather, count, 7, region};
}
inline SyntheticOp Scatter(const std::string& region, uint64_t count = 1024, uint8_t dtype = 7) {
  return SyntheticOp{ring::ApiFn::kReduceScatter, count, dtype, region, 0};
}

// A job of `nranks` ranks on one communicator, each issuing its own op list.
class JobBuilder {
 public:
  explicit JobBuilder(int nranks, AnalyzerOptions options = TestOptions()) : analyzer_(options), job_(&analyzer_.model()) {
    for (int rank = 0; rank < nranks; ++rank) {
      processes_.push_back(job_.AddProcess(rank));
      job_.Init(processes_.back(), kComm, rank, nranks, kT0);
    }
    next_seq_.assign(static_cast<size_t>(nranks), 1);
    clock_.assign(static_cast<size_t>(nranks), kT0 + 10 * kMs);
  }
  int nranks() const { return static_cast<int>(processes_.size()); }
  // Rank issues `ops`; each takes 1 ms and completes (blocking) unless `stuck_last`.
  void Issue(int rank, const std::vector<SyntheticOp>& ops, bool stuck_last = false, bool blocking = true) {
    for (size_t i = 0; i < ops.size(); ++i) {
      int64_t& t = clock_[static_cast<size_t>(rank)];
      const bool stuck = stuck_last && i + 1 == ops.size();
      job_.Collective(processes_[static_cast<size_t>(rank)], kComm, rank, nranks(), next_seq_[static_cast<size_t>(rank)]++,
                      ops[i], t, stuck ? 0 : t + kMs, blocking);
      t += 2 * kMs;
    }
  }
  void IssueAll(const std::vector<SyntheticOp>& ops) {
    for (int rank = 0; rank < nranks(); ++rank) Issue(rank, ops);
  }
  int64_t Now(double plus_s = 0) const {
    return *std::max_element(clock_.begin(), clock_.end()) + static_cast<int64_t>(plus_s * kSecond);
  }
  std::vector<Finding> Run(double plus_s = 0.1, bool final_pass = false) { return analyzer_.Analyze(Now(plus_s), final_pass); }
  Analyzer& analyzer() { return analyzer_; }
  SyntheticJob& job() { return job_; }
  ProcessId process(int rank) const { return processes_[static_cast<size_t>(rank)]; }

 private:
  Analyzer analyzer_;
  SyntheticJob job_;
  std::vector<ProcessId> processes_;
  std::vector<uint64_t> next_seq_;
  std::vector<int64_t> clock_;
};

inline std::vector<SyntheticOp> Step(bool vision) {
  std::vector<SyntheticOp> ops;
  if (vision) {
    ops.push_back(Gather("fwd/vision.patch", 4096));
    ops.push_back(Gather("fwd/vision.block0", 8192));
  }
  ops.push_back(Gather("fwd/embed", 2048));
  ops.push_back(Gather("fwd/trunk.block0", 8192));
  ops.push_back(Gather("bwd/trunk.block0", 8192));
  ops.push_back(Scatter("bwd/trunk.block0", 2048));
  ops.push_back(Scatter("bwd/embed", 512));
  return ops;
}

}  // namespace collwatch::analyzer

#endif  // COLLWATCH_ANALYZER_ANALYZER_TEST_JOB_H_
