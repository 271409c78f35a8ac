// Merging ring records into calls, and the per-communicator views the analyzer reads.
#include "analyzer/job_model.h"

#include <algorithm>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "analyzer/call_sites.h"
#include "analyzer/finding.h"
#include "ring/hash.h"
#include "ring/ring_leftovers.h"
#include "ring/ring_names.h"

namespace collwatch::analyzer {
namespace {

using ring::ApiFn;
using ring::RecordKind;

uint64_t PendingKey(uint32_t lane, uint64_t index) { return (static_cast<uint64_t>(lane) << 48) | index; }

bool CreatesComm(ApiFn fn) {
  switch (fn) {
    case ApiFn::kCommInitRank:
    case ApiFn::kCommInitRankConfig:
    case ApiFn::kCommInitRankScalable:
    case ApiFn::kCommInitAll:
    case ApiFn::kCommSplit:
    case ApiFn::kCommShrink:
      return true;
    default:
      return false;
  }
}

// A return that is also the call's completion: nothing runs on a device after it.
bool CompletesAtReturn(const Call& call, uint8_t return_flags, int32_t result) {
  return (return_flags & (ring::kFlagCompletesAtReturn | ring::kFlagNoCompletion)) != 0 ||
         (call.flags & ring::kFlagCaptured) != 0 || result != 0 ||
         !(ring::IsCollective(call.fn) || ring::IsP2p(call.fn) || call.fn == ApiFn::kGroupEnd);
}

}  // namespace

Fingerprint FingerprintOf(const Call& call) {
  return Fingerprint{call.fn, call.dtype, call.redop, call.root_or_peer, call.count, call.region};
}

namespace {

// Three mixes over the fields packed into words: computed for every collective placed, where
// a combine per field (seven mixes) was a tenth of the model's time post-mortem. Inlined
// where a call's link is made (JobModel::FoldIntoChain).
[[gnu::always_inline]] inline uint64_t HashOfInline(const Fingerprint& f) {
  const uint64_t shape = static_cast<uint64_t>(f.fn) | static_cast<uint64_t>(f.dtype) << 16 |
                         static_cast<uint64_t>(static_cast<uint32_t>(f.redop)) << 24;
  const uint64_t place = static_cast<uint64_t>(static_cast<uint32_t>(f.root)) | static_cast<uint64_t>(f.region) << 32;
  return Mix64(Mix64(shape ^ Mix64(place)) ^ f.count);
}

[[gnu::always_inline]] inline uint64_t ChainLinkInline(const Fingerprint& fingerprint, uint64_t seq) {
  return Mix64(HashOfInline(fingerprint) ^ (seq * 0x9e3779b97f4a7c15ull));
}

}  // namespace

uint64_t HashOf(const Fingerprint& fingerprint) { return HashOfInline(fingerprint); }

uint64_t ChainLink(const Fingerprint& fingerprint, uint64_t seq) { return ChainLinkInline(fingerprint, seq); }

int64_t JobModel::ToRealtime(const Process& process, uint64_t monotonic_ns) const {
  int64_t realtime;
  if (__builtin_add_overflow(static_cast<int64_t>(std::min<uint64_t>(monotonic_ns, kMaxTimeNs)),
                             process.info.realtime_offset_ns, &realtime)) {
    realtime = process.info.realtime_offset_ns < 0 ? 1 : kMaxTimeNs;
  }
  return std::clamp<int64_t>(realtime, 1, kMaxTimeNs);
}

ProcessId JobModel::AddProcess(const ProcessInfo& info) {
  const std::pair<std::string, int32_t> key(info.host, info.pid);
  if (auto known = by_host_pid_.find(key); known != by_host_pid_.end()) {
    Process& observed = ProcessAt(known->second);
    if (observed.observed_only) {
      observed.info = info;
      observed.observed_only = false;
      return known->second;
    }
  }
  processes_.push_back(std::make_unique<Process>());
  processes_.back()->info = info;
  const auto id = static_cast<ProcessId>(processes_.size() - 1);
  by_host_pid_[key] = id;
  return id;
}

ProcessId JobModel::ObserveProcess(const ProcessInfo& info, const ProcessSample& sample) {
  std::optional<ProcessId> id = FindProcess(info.host, info.pid);
  if (!id) {
    id = AddProcess(info);
    ProcessAt(*id).observed_only = true;
  }
  Process& process = ProcessAt(*id);
  if (process.info.global_rank == ring::kUnset) process.info.global_rank = info.global_rank;
  if (process.info.world_size == ring::kUnset) process.info.world_size = info.world_size;
  SetSample(*id, sample);
  return *id;
}

ProcessId JobModel::NoteNoRing(const NoRingNoteRead& note) {
  ProcessInfo info;
  info.host = note.host;
  info.pid = note.pid;
  info.global_rank = note.rank;
  info.world_size = note.world_size;
  const ProcessId process = ObserveProcess(info, ProcessSample{});
  ProcessAt(process).no_ring_why = note.why;
  return process;
}

void JobModel::AddStacks(ProcessId process, stacks::ProcessStacks stacks, int64_t taken_ns) {
  Process& into = ProcessAt(process);
  if (taken_ns < into.stacks_taken_ns) return;  // an older taking, arriving late
  into.stacks = std::move(stacks);
  into.stacks_taken_ns = taken_ns;
}

std::optional<ProcessId> JobModel::FindProcess(const std::string& host, int32_t pid) const {
  auto known = by_host_pid_.find({host, pid});
  if (known == by_host_pid_.end()) return std::nullopt;
  return known->second;
}

RegionId JobModel::InternRegion(std::string_view name) {
  if (name.empty()) return 0;
  auto [it, inserted] = region_ids_.try_emplace(std::string(name), static_cast<RegionId>(region_names_.size()));
  if (inserted) region_names_.emplace_back(name);
  return it->second;
}

void JobModel::AddRegionName(ProcessId process, uint32_t writer_id, std::string_view name) {
  if (writer_id == 0) return;
  ProcessAt(process).regions[writer_id] = InternRegion(name);
}

std::string CallPathKey(const CallPath& path) {
  std::string key = path.truncated ? "+" : "";
  for (const CallFrame& frame : path.frames) absl::StrAppend(&key, frame.file, "\x1f", frame.function, "\x1f", frame.line, "\x1e");
  return key;
}

CallPathId JobModel::InternCallPath(const CallPath& path) {
  if (path.frames.empty()) return 0;
  auto [it, inserted] = call_path_ids_.try_emplace(CallPathKey(path), static_cast<CallPathId>(call_paths_.size()));
  if (inserted) {
    call_paths_.push_back(path);
    call_path_regions_.push_back(InternRegion(CodeRegionName(path)));
  }
  return it->second;
}

void JobModel::AddCallPath(ProcessId process, uint32_t writer_id, const CallPath& path) {
  if (writer_id == 0) return;
  ProcessAt(process).call_paths[writer_id] = InternCallPath(path);
}

void JobModel::AttributeCallPath(Process& process, const ring::Record& record, Call& call, bool* damaged) {
  bool path_damaged = false;
  if (record.call_path_id != 0) {
    auto path = process.call_paths.find(record.call_path_id);
    path_damaged = path == process.call_paths.end();
    call.call_path = path_damaged ? 0 : path->second;
  }
  if (path_damaged) {
    // Without an NVTX range the call path names the code: not known, so neither is that.
    *damaged = true;
    if (call.region == 0) call.region_damaged = true;
    return;  // nor can it stand for its unit, or borrow its unit's path
  }
  if (ring::IsCollective(call.fn) && record.comm_id != 0) {
    // A unit's all-gather from the user's code names its later calls made where no user
    // frame exists: FSDP's backward all-gather and reduce-scatter of the same unit (the
    // same element count on the same communicator) run in autograd's threads.
    const uint64_t unit = HashCombine(record.comm_id, record.count);
    const bool from_user_code = call_path_regions_[call.call_path] != 0;  // a user frame in it
    if (from_user_code && call.fn == ApiFn::kAllGather) {
      if (process.unit_paths.size() >= kMaxUnitPaths && !process.unit_paths.count(unit)) process.unit_paths.clear();
      process.unit_paths[unit] = call.call_path;
    } else if (!from_user_code && !process.unit_paths.empty() &&
               (call.fn == ApiFn::kAllGather || call.fn == ApiFn::kReduceScatter)) {
      auto forward = process.unit_paths.find(unit);
      if (forward != process.unit_paths.end()) {
        call.call_path = forward->second;
        call.call_path_inferred = true;
      }
    }
  }
  // Without an NVTX range, the code the call came from stands for its region (not for a
  // range whose name is damaged: that region stays unknown).
  if (call.region == 0 && !call.region_damaged) call.region = call_path_regions_[call.call_path];
}

CommIndex JobModel::CommFor(uint64_t comm_id, int32_t nranks) {
  RecentComm& recent = recent_comms_[comm_id % recent_comms_.size()];
  if (recent.index == kNoComm || recent.id != comm_id) {
    auto [it, inserted] = comm_index_.try_emplace(comm_id, static_cast<CommIndex>(comms_.size()));
    if (inserted) {
      comms_.emplace_back();
      comms_.back().id = comm_id;
    }
    recent = RecentComm{comm_id, it->second};
  }
  Comm& comm = comms_[recent.index];
  if (nranks > comm.nranks && nranks <= kMaxRanks) {
    comm.nranks = nranks;
    if (!one_process_) comm.ranks.resize(static_cast<size_t>(nranks));
  }
  return recent.index;
}

const Comm* JobModel::FindComm(uint64_t comm_id) const {
  auto it = comm_index_.find(comm_id);
  return it == comm_index_.end() ? nullptr : &comms_[it->second];
}

const Call* JobModel::Collective(const Comm& comm, int32_t rank, uint64_t seq) const {
  if (rank < 0 || rank >= static_cast<int32_t>(comm.ranks.size()) || seq == 0) return nullptr;
  const CommRank& entry = comm.ranks[static_cast<size_t>(rank)];
  if (!entry.present || seq > entry.collectives.size()) return nullptr;
  if (seq - 1 < entry.collectives.first()) return RemadeCollective(comm, rank, seq);
  const uint32_t index = entry.collectives[seq - 1];
  return index == kNoCall ? nullptr : &ProcessAt(entry.process).calls[index];
}

void JobModel::AddEnter(ProcessId process_id, uint32_t lane, uint64_t index, const ring::Record& record) {
  if ((record.flags & ring::kFlagReplay) != 0 && record.comm_id != 0 && !IsReplayLane(record.comm_id)) {
    // Replays run when the GPU reaches them, numbered apart from the host calls: aligned
    // in their communicator's replay lane, never mixed into its host order.
    ring::Record replay = record;
    replay.comm_id = ReplayLaneOf(record.comm_id);
    AddEnter(process_id, lane, index, replay);
    return;
  }
  Process& process = ProcessAt(process_id);
  Call call;
  call.enter_ns = ToRealtime(process, record.t_ns);
  call.count = record.count;
  call.seq = record.seq;
  call.group_id = record.group_id;
  call.rank = record.rank;
  call.root_or_peer = record.root_or_peer;
  call.redop = record.redop;
  call.fn = static_cast<ApiFn>(record.fn);
  call.dtype = record.dtype;
  call.flags = record.flags;
  // An id that names no region or call path of the process is damage (or a name lost
  // before it was stored): the region is unknown, counted, and matched as anything.
  bool damaged = false;
  if (record.region_id != 0) {
    auto region = process.regions.find(record.region_id);
    damaged = region == process.regions.end();
    call.region = damaged ? 0 : region->second;
    call.region_damaged = damaged;
  }
  AttributeCallPath(process, record, call, &damaged);
  call.region_unknown = call.region_damaged;
  if (damaged) {
    ++process.damaged_labels;
    if (process.first_damaged_seq == 0 && ring::IsCollective(call.fn) && record.seq != 0) {
      process.first_damaged_comm = record.comm_id;
      process.first_damaged_seq = record.seq;
    }
  }
  const auto call_index = static_cast<uint32_t>(process.calls.size());
  const bool placed_in_comm = record.comm_id != 0 && record.rank >= 0 && record.nranks > 0 &&
                              record.rank < record.nranks && record.nranks <= kMaxRanks &&
                              (ring::IsCollective(call.fn) || ring::IsP2p(call.fn) || CreatesComm(call.fn));
  if (placed_in_comm) {
    call.comm = CommFor(record.comm_id, record.nranks);
    Comm& comm = comms_[call.comm];
    if (record.rank < comm.nranks) {
      CommRank& rank = RankIn(comm, record.rank);
      if (!rank.present || rank.process != process_id) Join(call.comm, record.rank, process_id);
      // A rank's first collective far into the communicator's life: its history was
      // cut (a Flight Recorder dump keeps its last entries); the window starts near it,
      // leaving room for records of other lanes that arrive later.
      if (ring::IsCollective(call.fn) && rank.collectives.empty() && record.seq > kLateHistoryMargin) {
        rank.collectives.StartAt(record.seq - kLateHistoryMargin);
      }
      // A sequence number far past the last one is damage, not a gap from lost records
      // (a ring loses at most its capacity): it must not make us allocate gigabytes.
      // Below the window: history already forgotten (online) has nothing to place.
      if (ring::IsCollective(call.fn) && record.seq > rank.collectives.first() &&
          record.seq <= rank.collectives.size() + kMaxSeqJump) {
        if (rank.first_seq == 0 || record.seq < rank.first_seq) rank.first_seq = record.seq;
        // Its unit's forward all-gather is not in this rank's history: the region is
        // unknown, where a full history would have named it (AttributeCallPath).
        call.region_unknown = call.region_damaged ||
                              (call.region == 0 && !call.call_path_inferred && rank.first_seq > 1 &&
                               (call.fn == ApiFn::kAllGather || call.fn == ApiFn::kReduceScatter) &&
                               !process.unit_paths.count(HashCombine(record.comm_id, record.count)));
        bool placed_before = false;
        if (rank.collectives.size() + 1 == record.seq) {  // the usual case: the next one
          rank.collectives.push_back(call_index);
        } else {
          if (rank.collectives.size() < record.seq) rank.collectives.resize(record.seq, kNoCall);
          placed_before = rank.collectives[record.seq - 1] != kNoCall;
          rank.collectives[record.seq - 1] = call_index;
        }
        FoldIntoChain(rank, call, placed_before);
        rank.progress.Entered(record.seq);
        rank.last_enter_ns = call.enter_ns;
      } else if (ring::IsCollective(call.fn)) {
        ++unmatched_records_;
      } else if (ring::IsP2p(call.fn)) {
        rank.p2p.push_back(call_index);
      } else if (CreatesComm(call.fn)) {
        rank.init_call = call_index;
        if (ring::SplitsFromParent(call.fn)) comm.parent_id = record.aux0;
      }
    }
  } else if (ring::IsCollective(call.fn) || ring::IsP2p(call.fn)) {
    ++unmatched_records_;  // no communicator identity: cannot be aligned
  } else if (ring::IsCommLifecycle(call.fn) && record.comm_id != 0) {
    // A destroy, finalize or abort is in no communicator's order but is of one: named by
    // it where the model has it already (its record carries no rank or size to make one).
    if (auto known = comm_index_.find(record.comm_id); known != comm_index_.end()) {
      call.comm = known->second;
    } else {
      ++ends_of_unknown_comms_;
    }
  }
  if ((record.flags & ring::kFlagCaptured) != 0) {
    // Captured into a CUDA graph: nothing runs now; the call is over when it returns.
    call.flags |= ring::kFlagCaptured;
  }
  process.calls.push_back(call);
  process.pending.Set(PendingKey(lane, index), call_index);
  process.last_record_ns = std::max(process.last_record_ns, call.enter_ns);
  if (process.early.empty()) return;  // the usual case: no return or completion came first
  if (auto early = process.early.find(PendingKey(lane, index)); early != process.early.end()) {
    const std::vector<ring::Record> held = std::move(early->second);
    process.early.erase(early);
    for (const ring::Record& later : held) AddRecord(process_id, 0, 0, later);
  }
}

bool JobModel::HoldEarly(Process& process, const ring::Record& record) {
  static constexpr size_t kMaxEarly = 1 << 16;
  if (process.early.size() >= kMaxEarly) return false;
  process.early[PendingKey(record.ref_lane, record.ref_index)].push_back(record);
  return true;
}

void JobModel::AddRecord(ProcessId process_id, uint32_t lane, uint64_t index, const ring::Record& record) {
  if (process_id >= processes_.size()) return;
  Process& process = ProcessAt(process_id);
  switch (static_cast<RecordKind>(record.kind)) {
    case RecordKind::kEnter:
      AddEnter(process_id, lane, index, record);
      return;
    case RecordKind::kReturn: {
      const uint64_t key = PendingKey(record.ref_lane, record.ref_index);
      const uint32_t* waiting = process.pending.Find(key);
      if (waiting == nullptr) {
        if (!HoldEarly(process, record)) ++unmatched_records_;
        return;
      }
      const uint32_t call_index = *waiting;
      Call& call = process.calls[call_index];
      call.return_ns = std::max(ToRealtime(process, record.t_ns), call.enter_ns);
      if (call.return_ns == 0) call.return_ns = 1;
      call.result = record.result;
      call.flags |= record.flags & ring::kReturnFlags;
      // Creation calls learn their communicator at return (split: rank and size).
      if (CreatesComm(call.fn) && record.comm_id != 0 && record.rank >= 0 && record.rank < record.nranks &&
          record.nranks <= kMaxRanks) {
        call.comm = CommFor(record.comm_id, record.nranks);
        call.rank = record.rank;
        Comm& comm = comms_[call.comm];
        Join(call.comm, record.rank, process_id);
        CommRank& rank = RankIn(comm, record.rank);
        rank.init_call = call_index;
        if (ring::SplitsFromParent(call.fn)) comm.parent_id = record.aux0;
      }
      process.last_record_ns = std::max(process.last_record_ns, call.return_ns);
      // ncclCommInitAll returns once per rank it created, in rank order: its enter stays
      // findable until the last rank's return.
      const bool more_returns = call.fn == ApiFn::kCommInitAll && record.result == 0 && record.rank >= 0 &&
                                record.rank + 1 < record.nranks;
      if (CompletesAtReturn(call, record.flags, record.result)) {
        if (!more_returns) process.pending.Erase(key);
        MarkCompleted(process, call_index, call.return_ns);
        // A group end with no device work to wait for: its members are done as well.
        if (call.fn == ApiFn::kGroupEnd) {
          process.pending_groups.Complete(call.group_id, nullptr,
                                          [&](uint32_t member) { MarkCompleted(process, member, call.return_ns); });
        }
      } else if (call.group_id != 0 && call.fn != ApiFn::kGroupEnd) {
        // Its completion comes with the group's (a kComplete naming the GroupEnd).
        process.pending.Erase(key);
        process.pending_groups.Add(call.group_id, record.stream, call_index);
      }
      return;
    }
    case RecordKind::kComplete: {
      const uint64_t key = PendingKey(record.ref_lane, record.ref_index);
      const uint32_t* waiting = process.pending.Find(key);
      if (waiting == nullptr) {
        if (!HoldEarly(process, record)) ++unmatched_records_;
        return;
      }
      const uint32_t call_index = *waiting;
      const int64_t when = ToRealtime(process, record.t_ns);
      process.last_record_ns = std::max(process.last_record_ns, when);
      if (process.calls[call_index].fn == ApiFn::kGroupEnd) {
        process.pending_groups.Complete(record.group_id, &record.stream,
                                        [&](uint32_t member) { MarkCompleted(process, member, when); });
      }
      MarkCompleted(process, call_index, when);
      // Another stream of the same group may still complete through this GroupEnd.
      if (process.calls[call_index].fn != ApiFn::kGroupEnd || !process.pending_groups.Waiting(record.group_id)) {
        process.pending.Erase(key);
      }
      return;
    }
    case RecordKind::kAsyncError:
    case RecordKind::kEmpty:
      return;
  }
}

void JobModel::MarkCompleted(Process& process, uint32_t call_index, int64_t when_ns) {
  Call& call = process.calls[call_index];
  if (call.complete_ns != 0) return;
  call.complete_ns = std::max<int64_t>(when_ns, 1);
  if (call.return_ns == 0) call.return_ns = call.complete_ns;
  if (!ring::IsCollective(call.fn) || call.comm >= comms_.size()) return;
  Comm& comm = comms_[call.comm];
  if (CommRank* rank = FindRank(comm, call.rank)) rank->progress.Completed(call.seq);
}

void JobModel::Join(CommIndex comm_index, int32_t rank_number, ProcessId process) {
  Comm& comm = comms_[comm_index];
  CommRank& rank = RankIn(comm, rank_number);
  if (rank.present) return;
  rank.present = true;
  rank.process = process;
  ++comm.ranks_present;
  ProcessAt(process).memberships.emplace_back(comm_index, rank_number);
}

void JobModel::FoldIntoChain(CommRank& rank, const Call& call, bool placed_before) {
  const uint64_t window = ChainWindowOf(call.seq);
  // History that starts late (a cut dump): no windows below its slots.
  if (rank.chains.empty()) rank.chains.StartAt(ChainWindowOf(rank.collectives.first() + 1));
  if (window < rank.chains.first()) return;
  if (window >= rank.chains.size()) rank.chains.resize(window + 1, WindowChain{});
  WindowChain& chain = rank.chains[window];
  // A model of one process sums its chains once built (FinishOneProcess): most of its windows
  // fold apart there, into their class's chain.
  if (!one_process_) chain.chain += ChainLinkInline(FingerprintOf(call), call.seq);
  ++chain.filled;
  if (placed_before || call.region_unknown) chain.tainted = true;
}

void JobModel::ForgetCollectivesBefore(CommIndex comm, int32_t rank, uint64_t seq) {
  if (comm >= comms_.size() || rank < 0 || static_cast<size_t>(rank) >= comms_[comm].ranks.size() || seq <= 1) return;
  CommRank& entry = comms_[comm].ranks[static_cast<size_t>(rank)];
  if (!entry.present) return;
  entry.collectives.DropBefore(seq - 1);
  entry.chains.DropBefore(ChainWindowOf(seq));  // windows wholly below seq
}

void JobModel::ForgetP2pBefore(CommIndex comm, int32_t rank, size_t position) {
  if (comm >= comms_.size() || rank < 0 || static_cast<size_t>(rank) >= comms_[comm].ranks.size()) return;
  comms_[comm].ranks[static_cast<size_t>(rank)].p2p.DropBefore(position);
}

bool JobModel::ForgetCallsBefore(ProcessId process_id, uint32_t index, const std::vector<size_t>& also_keep,
                                 size_t most_kept) {
  if (process_id >= processes_.size()) return false;
  Process& process = ProcessAt(process_id);
  // Every call still listed is kept by itself, not the span from the oldest one: a
  // communicator used once at the start (or held back) must not pin all that followed.
  std::vector<size_t> keep = also_keep;
  auto keep_if_below = [&](uint32_t call) {
    if (call != kNoCall && call < index) keep.push_back(call);
  };
  for (const auto& [comm_index, rank_number] : process.memberships) {
    const CommRank& rank = *FindRank(comms_[comm_index], rank_number);
    for (const uint32_t call : rank.collectives) keep_if_below(call);
    for (const uint32_t call : rank.p2p) keep_if_below(call);
    keep_if_below(rank.init_call);
  }
  process.pending.ForEach(keep_if_below);
  process.pending_groups.ForEachMember(keep_if_below);
  return process.calls.DropBefore(index, keep, most_kept);
}

void JobModel::SetStatus(ProcessId process_id, ProcessStatus status, uint64_t heartbeat_writer_ns,
                         uint64_t lost_records) {
  if (process_id >= processes_.size()) return;
  Process& process = ProcessAt(process_id);
  process.status = status;
  if (heartbeat_writer_ns != 0) process.heartbeat_ns = std::max(process.heartbeat_ns, ToRealtime(process, heartbeat_writer_ns));
  process.lost_records = lost_records;
}

void JobModel::SetSample(ProcessId process_id, const ProcessSample& sample) {
  if (process_id >= processes_.size() || sample.sampled_ns == 0) return;
  ProcessSample& held = ProcessAt(process_id).sample;
  if (sample.sampled_ns >= held.sampled_ns) held = sample;
}

void JobModel::SetExitCode(ProcessId process_id, int32_t exit_code) {
  if (process_id >= processes_.size()) return;
  ProcessAt(process_id).exit_recorded = true;
  ProcessAt(process_id).exit_code = exit_code;
}

void JobModel::Apply(ProcessId process, const ProcessUpdate& update) {
  for (const auto& [id, name] : update.regions) AddRegionName(process, id, name);
  for (const auto& [id, path] : update.call_paths) AddCallPath(process, id, path);
  for (const IndexedRecord& item : update.records) AddRecord(process, item.lane, item.index, item.record);
  if (update.status) SetStatus(process, *update.status, update.heartbeat_ns, update.lost_records);
  SetSample(process, update.sample);  // an unsampled one changes nothing
  if (update.exit_code) SetExitCode(process, std::clamp(*update.exit_code, 0, 255));
}

void JobModel::ForgetDeathsAfter(int64_t realtime_ns) {
  // The last heartbeat before a kill can be up to a beat (100 ms) older than the kill,
  // and the last one stored up to a second; so can the last sample that saw it alive.
  constexpr int64_t kSlackNs = 1'000'000'000;
  for (const std::unique_ptr<Process>& each : processes_) {
    Process& process = *each;
    const ProcessSample& sample = process.sample;
    const bool seen_ended = sample.state == ProcessState::kGone || sample.state == ProcessState::kZombie;
    const bool died = process.status == ProcessStatus::kDead || process.status == ProcessStatus::kSilent;
    if (!died && process.status != ProcessStatus::kExited && !seen_ended) continue;
    bool ended_after = false;
    if (seen_ended && sample.sampled_ns != 0) {
      // Agents sample a process until they find it gone: that first look dates its end.
      ended_after = sample.sampled_ns >= realtime_ns;
    } else {
      ended_after = process.heartbeat_ns >= realtime_ns - kSlackNs ||
                    (sample.sampled_ns != 0 && sample.sampled_ns >= realtime_ns - kSlackNs);
    }
    if (!ended_after) continue;
    process.stopped_by_collwatch = true;
    if (died) process.status = ProcessStatus::kRunning;
    // A look taken after the stop saw what collwatch did to it, not what it was doing.
    if (seen_ended) process.sample = ProcessSample{};
  }
}

uint32_t JobModel::LastTellingCall(const Process& process) {
  constexpr size_t kLookBack = 256;
  uint32_t last = kNoCall;
  const size_t end = process.calls.size();
  for (size_t index = end; index > (end > kLookBack ? end - kLookBack : 0); --index) {
    if (!process.calls.Holds(index - 1)) continue;
    const Call& call = process.calls[index - 1];
    const bool telling = ring::IsCollective(call.fn) || ring::IsP2p(call.fn) ||
                         (ring::IsCommLifecycle(call.fn) && call.fn != ApiFn::kCommGetAsyncError);
    if (telling && (last == kNoCall || call.enter_ns > process.calls[last].enter_ns)) {
      last = static_cast<uint32_t>(index - 1);
    }
  }
  return last;
}

int64_t JobModel::LatestTimeNs() const {
  int64_t latest = 0;
  for (const std::unique_ptr<Process>& process : processes_) {
    latest = std::max({latest, process->last_record_ns, process->heartbeat_ns});
  }
  return latest;
}

std::string HumanBytes(double bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  size_t unit = 0;
  while (bytes >= 1024 && unit + 1 < std::size(kUnits)) {
    bytes /= 1024;
    ++unit;
  }
  return unit == 0 ? absl::StrFormat("%.0f B", bytes) : absl::StrFormat("%.1f %s", bytes, kUnits[unit]);
}

}  // namespace collwatch::analyzer
