// Test-only: builds JobModels from ring records the way the ring reader yields them
// (kEnter, then kReturn or kComplete naming it by lane and index), for the schedule and
// export unit tests. Header-only; single-threaded.
#ifndef COLLWATCH_ANALYZER_TEST_JOB_H_
#define COLLWATCH_ANALYZER_TEST_JOB_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "analyzer/job_model.h"

namespace collwatch::analyzer::testing {

inline constexpr uint8_t kFloat32 = 7;
inline constexpr uint8_t kBfloat16 = 9;
inline constexpr int32_t kSum = 0;
inline constexpr int32_t kAvg = 4;

// One collective as a test writes it.
struct Op {
  ring::ApiFn fn = ring::ApiFn::kAllGather;
  uint64_t count = 1024;
  uint8_t dtype = kFloat32;
  std::string region;
  int32_t redop = ring::kUnset;
  int32_t root = ring::kUnset;
};

inline Op Gather(std::string region, uint64_t count = 1024) {
  return Op{ring::ApiFn::kAllGather, count, kFloat32, std::move(region)};
}
inline Op ReduceScatter(std::string region, uint64_t count = 256) {
  return Op{ring::ApiFn::kReduceScatter, count, kFloat32, std::move(region), kAvg};
}

class TestJob {
 public:
  explicit TestJob(JobModel* model) : model_(model) {}

  ProcessId AddRank(int32_t global_rank, std::string host = "node0") {
    ProcessInfo info;
    info.host = std::move(host);
    info.pid = 4000 + global_rank;
    info.global_rank = global_rank;
    const ProcessId id = model_->AddProcess(info);
    processes_[id];
    return id;
  }

  // Communicator creation (split children name their parent).
  void Init(ProcessId p, uint64_t comm, int32_t rank, int32_t nranks, uint64_t parent = 0) {
    ring::Record record = Base(p, ring::ApiFn::kCommInitRank);
    if (parent != 0) record.fn = static_cast<uint16_t>(ring::ApiFn::kCommSplit);
    record.comm_id = comm;
    record.rank = rank;
    record.nranks = nranks;
    record.aux0 = parent != 0 ? parent : comm;
    const uint64_t index = Enter(p, record);
    Return(p, index, record, ring::kFlagCompletesAtReturn);
  }

  // A blocking collective (CPU backend): returns and completes together, unless
  // `returns` is false (it hangs inside the call).
  void Collective(ProcessId p, uint64_t comm, int32_t rank, int32_t nranks, const Op& op, bool returns = true) {
    ring::Record record = CollectiveRecord(p, comm, rank, nranks, op);
    const uint64_t index = Enter(p, record);
    if (returns) Return(p, index, record, ring::kFlagCompletesAtReturn);
  }

  // A GPU-style collective: returns at once; completes `complete_after_ns` later (0: never).
  // Returns the enter's index so that a test can complete it later.
  uint64_t AsyncCollective(ProcessId p, uint64_t comm, int32_t rank, int32_t nranks, const Op& op) {
    ring::Record record = CollectiveRecord(p, comm, rank, nranks, op);
    const uint64_t index = Enter(p, record);
    Return(p, index, record, 0);
    return index;
  }
  void Complete(ProcessId p, uint64_t enter_index) {
    ring::Record record = Base(p, ring::ApiFn::kNone);
    record.kind = static_cast<uint16_t>(ring::RecordKind::kComplete);
    record.ref_lane = 1;
    record.ref_index = enter_index;
    model_->AddRecord(p, 0, processes_[p].next_index++, record);
  }

  void Send(ProcessId p, uint64_t comm, int32_t rank, int32_t nranks, int32_t peer, uint64_t count) {
    ring::Record record = Base(p, ring::ApiFn::kSend);
    record.comm_id = comm;
    record.rank = rank;
    record.nranks = nranks;
    record.seq = ++processes_[p].p2p_seq[{comm, peer}];
    record.count = count;
    record.dtype = kFloat32;
    record.root_or_peer = peer;
    const uint64_t index = Enter(p, record);
    Return(p, index, record, ring::kFlagCompletesAtReturn);
  }

  // Moves the process's clock on (every record advances it by 1 us already).
  void Wait(ProcessId p, int64_t ns) { processes_[p].now_ns += ns; }

 private:
  struct State {
    uint64_t next_index = 0;
    int64_t now_ns = 1'700'000'000'000'000'000;
    std::map<uint64_t, uint64_t> seq;  // per communicator
    std::map<std::pair<uint64_t, int32_t>, uint64_t> p2p_seq;
    std::map<std::string, uint32_t> regions;
  };

  ring::Record Base(ProcessId p, ring::ApiFn fn) {
    State& state = processes_[p];
    state.now_ns += 1000;
    ring::Record record{};
    record.kind = static_cast<uint16_t>(ring::RecordKind::kEnter);
    record.fn = static_cast<uint16_t>(fn);
    record.dtype = ring::kNoDtype;
    record.redop = ring::kUnset;
    record.root_or_peer = ring::kUnset;
    record.rank = ring::kUnset;
    record.nranks = ring::kUnset;
    record.t_ns = static_cast<uint64_t>(state.now_ns);
    return record;
  }

  ring::Record CollectiveRecord(ProcessId p, uint64_t comm, int32_t rank, int32_t nranks, const Op& op) {
    ring::Record record = Base(p, op.fn);
    record.comm_id = comm;
    record.rank = rank;
    record.nranks = nranks;
    record.seq = ++processes_[p].seq[comm];
    record.count = op.count;
    record.dtype = op.dtype;
    record.redop = op.redop;
    record.root_or_peer = op.root;
    record.region_id = Region(p, op.region);
    return record;
  }

  uint32_t Region(ProcessId p, const std::string& name) {
    if (name.empty()) return 0;
    std::map<std::string, uint32_t>& regions = processes_[p].regions;
    auto [it, inserted] = regions.try_emplace(name, static_cast<uint32_t>(regions.size() + 1));
    if (inserted) model_->AddRegionName(p, it->second, name);
    return it->second;
  }

  uint64_t Enter(ProcessId p, const ring::Record& record) {
    const uint64_t index = processes_[p].next_index++;
    model_->AddRecord(p, 1, index, record);
    return index;
  }

  void Return(ProcessId p, uint64_t enter_index, ring::Record record, uint8_t flags) {
    record.kind = static_cast<uint16_t>(ring::RecordKind::kReturn);
    record.ref_lane = 1;
    record.ref_index = enter_index;
    record.flags = flags;
    record.t_ns = static_cast<uint64_t>(processes_[p].now_ns += 500);
    model_->AddRecord(p, 1, processes_[p].next_index++, record);
  }

  JobModel* model_;
  std::map<ProcessId, State> processes_;
};

}  // namespace collwatch::analyzer::testing

#endif  // COLLWATCH_ANALYZER_TEST_JOB_H_
