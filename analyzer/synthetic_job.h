// Builds synthetic jobs record by record, as rings would yield them: for the analyzer's
// unit tests, the export's and the benchmarks, into a JobModel or any other sink. Test
// support: in collwatch::analyzer_testing, never in the analyzer library a program links.
// Threading: single-threaded.
#ifndef COLLWATCH_ANALYZER_SYNTHETIC_JOB_H_
#define COLLWATCH_ANALYZER_SYNTHETIC_JOB_H_

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "analyzer/job_model.h"
#include "process/process_update.h"

namespace collwatch::analyzer {

inline constexpr int64_t kMs = 1'000'000;
inline constexpr int64_t kSecond = 1'000'000'000;

// One collective to issue: what every rank of a class issues at one position.
struct SyntheticOp {
  ring::ApiFn fn = ring::ApiFn::kAllGather;
  uint64_t count = 1024;
  uint8_t dtype = 7;  // ncclFloat32
  std::string region;
  int32_t redop = ring::kUnset;
  int32_t root_or_peer = ring::kUnset;
  CallPath call_path;  // the Python call path it was issued from (none when empty)
  uint8_t flags = 0;   // its kEnter's (ring::kFlagReplay: a CUDA graph's replay)
};

// Where a SyntheticJob's processes, names and records go, in the order a reader of their
// rings would give them.
class SyntheticSink {
 public:
  virtual ~SyntheticSink() = default;
  virtual ProcessId AddProcess(const ProcessInfo& info) = 0;
  virtual void AddRegionName(ProcessId process, uint32_t writer_id, std::string_view name) = 0;
  virtual void AddCallPath(ProcessId process, uint32_t writer_id, const CallPath& path) = 0;
  virtual void AddRecord(ProcessId process, uint32_t lane, uint64_t index, const ring::Record& record) = 0;
};

// Each process's records kept as one ProcessUpdate (its names first), for code that reads
// processes one at a time (the Chrome trace export).
class RecordedJob final : public SyntheticSink {
 public:
  struct RecordedProcess {
    ProcessInfo info;
    ProcessUpdate update;
  };
  ProcessId AddProcess(const ProcessInfo& info) override;
  void AddRegionName(ProcessId process, uint32_t writer_id, std::string_view name) override;
  void AddCallPath(ProcessId process, uint32_t writer_id, const CallPath& path) override;
  void AddRecord(ProcessId process, uint32_t lane, uint64_t index, const ring::Record& record) override;
  const std::vector<RecordedProcess>& processes() const { return processes_; }
  std::vector<RecordedProcess>& processes() { return processes_; }

 private:
  std::vector<RecordedProcess> processes_;
};

// One FSDP-like training step of 12 units (the benchmarks' job): the forward all-gathers,
// then per unit, last first, its backward all-gather and its gradient's reduce-scatter
// with `scatter_redop`.
std::vector<SyntheticOp> FsdpLikeStep(int32_t scatter_redop);

class SyntheticJob {
 public:
  explicit SyntheticJob(JobModel* model);
  // Into `model`'s one process, added already (a worker's model, BuildProcessApartStreamed).
  SyntheticJob(JobModel* model, ProcessId process);
  explicit SyntheticJob(SyntheticSink* sink) : sink_(sink) {}

  // A process whose writer clock equals CLOCK_REALTIME (offset 0), RankProcessInfo's.
  ProcessId AddProcess(int32_t global_rank);
  static ProcessInfo RankProcessInfo(int32_t global_rank);  // on node<rank / 8>, pid 1000 + rank
  ProcessId AddProcess(const ProcessInfo& info);
  // Communicator creation: enter now; returned unless `returned` is false. A split
  // child names its `parent`.
  void Init(ProcessId process, uint64_t comm_id, int32_t rank, int32_t nranks, int64_t t_ns, bool returned = true,
            uint64_t parent = 0);
  // A call on a communicator that starts nothing on it (a destroy, finalize or abort, as
  // the preload records it: a communicator id and no rank), returning 1 ms later.
  void Lifecycle(ProcessId process, ring::ApiFn fn, uint64_t comm_id, int64_t t_ns);
  // A collective entered at t_ns. complete_ns: 0 never completes; >0 completes then
  // (returns at enter + 1 us, or at complete_ns when `blocking`). Returns the enter's
  // record index (for Complete).
  uint64_t Collective(ProcessId process, uint64_t comm_id, int32_t rank, int32_t nranks, uint64_t seq,
                      const SyntheticOp& op, int64_t t_ns, int64_t complete_ns, bool blocking = true);
  // The device completion of an asynchronous call entered as record `enter_index`.
  void Complete(ProcessId process, uint64_t enter_index, int64_t t_ns);
  // Point-to-point: `peer` is the other rank, seq per (peer, direction).
  void P2p(ProcessId process, uint64_t comm_id, int32_t rank, int32_t nranks, ring::ApiFn fn, int32_t peer,
           uint64_t seq, uint64_t count, uint8_t dtype, int64_t t_ns, int64_t complete_ns);
  // Grouped ops on a GPU: each op returns at once; one completion for the group's GroupEnd.
  // `end_completes_at_return`: no device to wait for (the GroupEnd's return says so).
  void Group(ProcessId process, uint64_t comm_id, int32_t rank, int32_t nranks, uint64_t first_seq,
             const std::vector<SyntheticOp>& ops, int64_t t_ns, int64_t complete_ns,
             bool end_completes_at_return = false);
  // One collective of a group that may span communicators (GroupAcross).
  struct GroupedCall {
    uint64_t comm_id = 0;
    int32_t rank = 0;
    int32_t nranks = 0;
    uint64_t seq = 0;
    SyntheticOp op;
  };
  // As Group, its calls on any communicators, in the order given.
  void GroupAcross(ProcessId process, const std::vector<GroupedCall>& calls, int64_t t_ns, int64_t complete_ns,
                   bool end_completes_at_return = false);

 private:
  ring::Record Base(ProcessId process, ring::RecordKind kind, ring::ApiFn fn, int64_t t_ns);
  uint64_t Enter(ProcessId process, const ring::Record& record);
  void Return(ProcessId process, uint64_t enter_index, ring::Record record, int64_t t_ns, uint8_t flags);
  void CompleteRecord(ProcessId process, uint64_t enter_index, ring::Record record, int64_t t_ns);
  uint32_t Region(ProcessId process, const std::string& name);
  uint32_t CallPathId(ProcessId process, const CallPath& path);

  std::unique_ptr<SyntheticSink> model_sink_;  // set when built on a JobModel
  SyntheticSink* sink_;
  std::vector<uint64_t> next_index_;
  std::vector<absl::flat_hash_map<std::string, uint32_t>> regions_;  // per process: name -> writer id
  // Region ids last handed out, by where their name lay (Region).
  struct RecentRegion {
    ProcessId process = UINT32_MAX;
    std::string name;
    uint32_t id = 0;
  };
  std::array<RecentRegion, 64> recent_regions_;
  std::vector<uint32_t> call_paths_;                                // per process: writer ids handed out
  uint64_t next_group_ = 1;
};

}  // namespace collwatch::analyzer

#endif  // COLLWATCH_ANALYZER_SYNTHETIC_JOB_H_
