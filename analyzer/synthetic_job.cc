// Synthetic records: every call on lane 1, returns as separate kReturn records.
#include "analyzer/synthetic_job.h"

#include <algorithm>
#include <optional>

namespace collwatch::analyzer {

using ring::ApiFn;
using ring::RecordKind;

namespace {

// The analyzer's model as the sink: each record applied as it is made. With `process`, the
// model's one process, added already: every process made is that one.
class ModelSink final : public SyntheticSink {
 public:
  explicit ModelSink(JobModel* model, std::optional<ProcessId> process = std::nullopt)
      : model_(model), process_(process) {}
  ProcessId AddProcess(const ProcessInfo& info) override { return process_ ? *process_ : model_->AddProcess(info); }
  void AddRegionName(ProcessId process, uint32_t writer_id, std::string_view name) override {
    model_->AddRegionName(process, writer_id, name);
  }
  void AddCallPath(ProcessId process, uint32_t writer_id, const CallPath& path) override {
    model_->AddCallPath(process, writer_id, path);
  }
  void AddRecord(ProcessId process, uint32_t lane, uint64_t index, const ring::Record& record) override {
    model_->AddRecord(process, lane, index, record);
  }

 private:
  JobModel* model_;
  std::optional<ProcessId> process_;
};

}  // namespace

ProcessId RecordedJob::AddProcess(const ProcessInfo& info) {
  processes_.push_back(RecordedProcess{info, {}});
  return static_cast<ProcessId>(processes_.size() - 1);
}

void RecordedJob::AddRegionName(ProcessId process, uint32_t writer_id, std::string_view name) {
  processes_[process].update.regions.emplace_back(writer_id, std::string(name));
}

void RecordedJob::AddCallPath(ProcessId process, uint32_t writer_id, const CallPath& path) {
  processes_[process].update.call_paths.emplace_back(writer_id, path);
}

void RecordedJob::AddRecord(ProcessId process, uint32_t lane, uint64_t index, const ring::Record& record) {
  processes_[process].update.records.emplace_back(lane, index, record);
}

SyntheticJob::SyntheticJob(JobModel* model)
    : model_sink_(std::make_unique<ModelSink>(model)), sink_(model_sink_.get()) {}

SyntheticJob::SyntheticJob(JobModel* model, ProcessId process)
    : model_sink_(std::make_unique<ModelSink>(model, process)), sink_(model_sink_.get()) {}

ProcessInfo SyntheticJob::RankProcessInfo(int32_t global_rank) {
  ProcessInfo info;
  info.host = "node" + std::to_string(global_rank / 8);
  info.pid = 1000 + global_rank;
  info.global_rank = global_rank;
  return info;
}

ProcessId SyntheticJob::AddProcess(int32_t global_rank) { return AddProcess(RankProcessInfo(global_rank)); }

ProcessId SyntheticJob::AddProcess(const ProcessInfo& info) {
  const ProcessId id = sink_->AddProcess(info);
  next_index_.resize(id + 1, 0);
  regions_.resize(id + 1);
  call_paths_.resize(id + 1, 0);
  return id;
}

uint32_t SyntheticJob::CallPathId(ProcessId process, const CallPath& path) {
  if (path.frames.empty()) return 0;
  const uint32_t id = ++call_paths_[process];  // the model interns equal paths job-wide
  sink_->AddCallPath(process, id, path);
  return id;
}

uint32_t SyntheticJob::Region(ProcessId process, const std::string& name) {
  if (name.empty()) return 0;
  // The benchmarks name a region with every call, from a few dozen names: the last id of
  // each is remembered by where the name lies, and used where the text is the same.
  RecentRegion& recent = recent_regions_[(reinterpret_cast<uintptr_t>(name.data()) >> 4) % recent_regions_.size()];
  if (recent.process == process && recent.name == name) return recent.id;
  absl::flat_hash_map<std::string, uint32_t>& ids = regions_[process];
  auto [it, inserted] = ids.try_emplace(name, static_cast<uint32_t>(ids.size()) + 1);
  if (inserted) sink_->AddRegionName(process, it->second, name);
  recent = RecentRegion{process, name, it->second};
  return it->second;
}

ring::Record SyntheticJob::Base(ProcessId /*process*/, RecordKind kind, ApiFn fn, int64_t t_ns) {
  ring::Record record{};
  record.kind = static_cast<uint16_t>(kind);
  record.fn = static_cast<uint16_t>(fn);
  record.dtype = ring::kNoDtype;
  record.redop = ring::kUnset;
  record.root_or_peer = ring::kUnset;
  record.rank = ring::kUnset;
  record.nranks = ring::kUnset;
  record.t_ns = static_cast<uint64_t>(t_ns);
  return record;
}

uint64_t SyntheticJob::Enter(ProcessId process, const ring::Record& record) {
  const uint64_t index = next_index_[process]++;
  sink_->AddRecord(process, 1, index, record);
  return index;
}

void SyntheticJob::Return(ProcessId process, uint64_t enter_index, ring::Record record, int64_t t_ns, uint8_t flags) {
  record.kind = static_cast<uint16_t>(RecordKind::kReturn);
  record.ref_lane = 1;
  record.ref_index = enter_index;
  record.t_ns = static_cast<uint64_t>(t_ns);
  record.flags = flags;
  record.result = 0;
  sink_->AddRecord(process, 1, next_index_[process]++, record);
}

void SyntheticJob::Complete(ProcessId process, uint64_t enter_index, int64_t t_ns) {
  CompleteRecord(process, enter_index, Base(process, RecordKind::kComplete, ApiFn::kNone, t_ns), t_ns);
}

void SyntheticJob::CompleteRecord(ProcessId process, uint64_t enter_index, ring::Record record, int64_t t_ns) {
  record.kind = static_cast<uint16_t>(RecordKind::kComplete);
  record.ref_lane = 1;
  record.ref_index = enter_index;
  record.t_ns = static_cast<uint64_t>(t_ns);
  sink_->AddRecord(process, 0, next_index_[process]++, record);
}

void SyntheticJob::Init(ProcessId process, uint64_t comm_id, int32_t rank, int32_t nranks, int64_t t_ns,
                        bool returned, uint64_t parent) {
  ring::Record record =
      Base(process, RecordKind::kEnter, parent != 0 ? ApiFn::kCommSplit : ApiFn::kCommInitRank, t_ns);
  record.comm_id = comm_id;
  record.aux0 = parent != 0 ? parent : comm_id;
  record.rank = rank;
  record.nranks = nranks;
  const uint64_t index = Enter(process, record);
  if (returned) Return(process, index, record, t_ns + kMs, 0);
}

void SyntheticJob::Lifecycle(ProcessId process, ApiFn fn, uint64_t comm_id, int64_t t_ns) {
  ring::Record record = Base(process, RecordKind::kEnter, fn, t_ns);
  record.comm_id = comm_id;
  const uint64_t index = Enter(process, record);
  Return(process, index, record, t_ns + kMs, ring::kFlagCompletesAtReturn);
}

uint64_t SyntheticJob::Collective(ProcessId process, uint64_t comm_id, int32_t rank, int32_t nranks, uint64_t seq,
                                  const SyntheticOp& op, int64_t t_ns, int64_t complete_ns, bool blocking) {
  ring::Record record = Base(process, RecordKind::kEnter, op.fn, t_ns);
  record.comm_id = comm_id;
  record.rank = rank;
  record.nranks = nranks;
  record.seq = seq;
  record.count = op.count;
  record.dtype = op.dtype;
  record.redop = op.redop;
  record.root_or_peer = op.root_or_peer;
  record.region_id = Region(process, op.region);
  record.call_path_id = CallPathId(process, op.call_path);
  record.flags = op.flags;
  const uint64_t index = Enter(process, record);
  if (blocking) {
    // CPU backend: the call returns when the collective is done.
    if (complete_ns > 0) Return(process, index, record, complete_ns, ring::kFlagCompletesAtReturn);
    return index;
  }
  Return(process, index, record, t_ns + 1000, 0);
  if (complete_ns > 0) CompleteRecord(process, index, record, complete_ns);
  return index;
}

void SyntheticJob::P2p(ProcessId process, uint64_t comm_id, int32_t rank, int32_t nranks, ApiFn fn, int32_t peer,
                       uint64_t seq, uint64_t count, uint8_t dtype, int64_t t_ns, int64_t complete_ns) {
  ring::Record record = Base(process, RecordKind::kEnter, fn, t_ns);
  record.comm_id = comm_id;
  record.rank = rank;
  record.nranks = nranks;
  record.seq = seq;
  record.count = count;
  record.dtype = dtype;
  record.root_or_peer = peer;
  const uint64_t index = Enter(process, record);
  if (complete_ns > 0) Return(process, index, record, complete_ns, ring::kFlagCompletesAtReturn);
}

void SyntheticJob::Group(ProcessId process, uint64_t comm_id, int32_t rank, int32_t nranks, uint64_t first_seq,
                         const std::vector<SyntheticOp>& ops, int64_t t_ns, int64_t complete_ns,
                         bool end_completes_at_return) {
  std::vector<GroupedCall> calls;
  for (size_t i = 0; i < ops.size(); ++i) calls.push_back(GroupedCall{comm_id, rank, nranks, first_seq + i, ops[i]});
  GroupAcross(process, calls, t_ns, complete_ns, end_completes_at_return);
}

void SyntheticJob::GroupAcross(ProcessId process, const std::vector<GroupedCall>& calls, int64_t t_ns,
                               int64_t complete_ns, bool end_completes_at_return) {
  const uint64_t group = next_group_++;
  ring::Record start = Base(process, RecordKind::kEnter, ApiFn::kGroupStart, t_ns);
  start.group_id = group;
  Return(process, Enter(process, start), start, t_ns, ring::kFlagCompletesAtReturn);
  for (const GroupedCall& call : calls) {
    ring::Record record = Base(process, RecordKind::kEnter, call.op.fn, t_ns + 1000);
    record.comm_id = call.comm_id;
    record.rank = call.rank;
    record.nranks = call.nranks;
    record.seq = call.seq;
    record.count = call.op.count;
    record.dtype = call.op.dtype;
    record.group_id = group;
    record.stream = 77;
    record.region_id = Region(process, call.op.region);
    const uint64_t index = Enter(process, record);
    Return(process, index, record, t_ns + 2000, 0);
  }
  ring::Record end = Base(process, RecordKind::kEnter, ApiFn::kGroupEnd, t_ns + 3000);
  end.group_id = group;
  end.stream = 77;
  const uint64_t end_index = Enter(process, end);
  Return(process, end_index, end, t_ns + 4000, end_completes_at_return ? ring::kFlagCompletesAtReturn : 0);
  if (complete_ns > 0) CompleteRecord(process, end_index, end, complete_ns);
}

std::vector<SyntheticOp> FsdpLikeStep(int32_t scatter_redop) {
  std::vector<SyntheticOp> ops;
  for (int unit = 0; unit < 12; ++unit) {
    ops.push_back({ring::ApiFn::kAllGather, 1u << 16, 7, "fwd/unit" + std::to_string(unit)});
  }
  for (int unit = 11; unit >= 0; --unit) {
    ops.push_back({ring::ApiFn::kAllGather, 1u << 16, 7, "bwd/unit" + std::to_string(unit)});
    ops.push_back({ring::ApiFn::kReduceScatter, 1u << 14, 7, "bwd/unit" + std::to_string(unit), scatter_redop});
  }
  return ops;
}

}  // namespace collwatch::analyzer
