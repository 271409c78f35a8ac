// The analyzer's picture of a job: every process that called NCCL, each call with its
// enter, return and completion times merged from the ring records (interposer/
// ring_format.h), and per communicator the calls of each rank by sequence number.
// Fed record by record, online (the collector, as batches arrive) or post-mortem (the
// CLI, from trace folders or rings). Threading: single-threaded; callers serialise (but for
// the readers CollectiveLike names).
#ifndef COLLWATCH_ANALYZER_JOB_MODEL_H_
#define COLLWATCH_ANALYZER_JOB_MODEL_H_

#include <array>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "analyzer/pending_calls.h"
#include "analyzer/progress_frontier.h"
#include "analyzer/window_chain.h"
#include "analyzer/windowed_log.h"
#include "process/process_info.h"
#include "process/process_sample.h"
#include "process/process_update.h"
#include "ring/ring_format.h"
#include "ring/ring_names.h"  // the words of a Call's op, dtype and reduce op
#include "stacks/process_stacks.h"

namespace collwatch {
struct NoRingNoteRead;  // ring/ring_leftovers.h
}  // namespace collwatch

namespace collwatch::analyzer {

class FoldReferences;  // fold_references.h

using ProcessId = uint32_t;
using CommIndex = uint32_t;
using RegionId = uint32_t;  // job-wide interned NVTX region (0: none)
using CallPathId = uint32_t;  // job-wide interned Python call path (0: none)

inline constexpr uint32_t kNoCall = UINT32_MAX;
// The communicator of a call the model could not place in one (no communicator identity,
// a damaged rank or size, a creation not yet returned): never an index into comms().
inline constexpr CommIndex kNoComm = UINT32_MAX;
inline constexpr uint64_t kMaxSeqJump = 1 << 20;    // so is a sequence number this far ahead
// A rank whose first collective comes later than this keeps no slots below it, but this
// many before it (JobModel::AddEnter).
inline constexpr uint64_t kLateHistoryMargin = 1 << 16;
inline constexpr size_t kMaxUnitPaths = 1 << 14;      // units whose call path a process keeps
// How a region whose name (or naming call path) is damaged reads wherever a region is named.
inline constexpr std::string_view kDamagedRegionText = "an unknown region (its name is damaged)";

// One NCCL call of one process (the process whose calls hold it). Times are
// CLOCK_REALTIME ns; 0 means "not yet".
struct Call {
  int64_t enter_ns = 0;
  int64_t return_ns = 0;
  int64_t complete_ns = 0;
  uint64_t count = 0;
  uint64_t seq = 0;
  uint64_t group_id = 0;
  CommIndex comm = kNoComm;  // kNoComm: placed in none
  RegionId region = 0;
  CallPathId call_path = 0;
  int32_t rank = ring::kUnset;
  int32_t root_or_peer = ring::kUnset;
  int32_t redop = ring::kUnset;
  int32_t result = 0;
  ring::ApiFn fn = ring::ApiFn::kNone;
  uint8_t dtype = ring::kNoDtype;
  uint8_t flags = 0;
  bool call_path_inferred = false;  // its unit's forward all-gather's (no user frame of its own)
  // No user frame of its own, and its unit's forward all-gather lies before the rank's
  // kept history (a cut Flight Recorder dump): its code region is not known, not "none".
  bool region_unknown = false;
  // Its NVTX region's name, or (without a range) the call path that names its code, could
  // not be read: a name or call path damaged or lost (a store frame failing its checksum,
  // a ring slot no writer left so). Unknown, never "no region"; region_unknown is set too.
  bool region_damaged = false;

  bool completed() const { return complete_ns != 0; }
  bool returned() const { return return_ns != 0; }
};

// What must match across ranks at one collective sequence number: DESIGN's fingerprint.
struct Fingerprint {
  ring::ApiFn fn = ring::ApiFn::kNone;
  uint8_t dtype = ring::kNoDtype;
  int32_t redop = ring::kUnset;
  int32_t root = ring::kUnset;
  uint64_t count = 0;
  RegionId region = 0;
  bool operator==(const Fingerprint&) const = default;
  // Equal except for the region: the same collective issued from other code.
  bool SameSignature(const Fingerprint& other) const {
    return fn == other.fn && dtype == other.dtype && redop == other.redop && root == other.root &&
           count == other.count;
  }
};
Fingerprint FingerprintOf(const Call& call);
uint64_t HashOf(const Fingerprint& fingerprint);
// What tells two call paths apart: their frames as text (JobModel::InternCallPath).
std::string CallPathKey(const CallPath& path);

// A collective folded into its class post-mortem (JobModel::FoldAgreeingWindows): equal in
// all but its rank, its times and its flags to the call its window's reference rank made
// at that seq, its times kept as offsets from that call's (its flags beside them: what a
// return says of its timing, ring::kReturnFlags, differs from rank to rank).
struct FoldedTimes {
  int32_t enter = 0;
  int32_t returned = 0;
  int32_t completed = 0;
};

// A collective's times, read without making the call (JobModel::CollectiveLike).
struct CallTimes {
  int64_t enter_ns = 0;
  int64_t return_ns = 0;
  int64_t complete_ns = 0;
};

// What CollectiveLike gives for one collective: the call it is like (nullptr: none) and its
// times (only where `like` is set).
struct CollectiveTimes {
  const Call* like = nullptr;
  CallTimes times;
};

// One rank of one communicator.
struct CommRank {
  ProcessId process = 0;
  bool present = false;
  // By seq - 1: index into the process's calls (kNoCall: gap). Online, the front is
  // dropped once no check can need it (Analyzer: AnalyzerOptions::bounded_history).
  // Chunks of 256 bytes: a folded rank keeps only its last partial window here.
  WindowedLog<uint32_t, 256> collectives;
  WindowedLog<uint32_t> p2p;          // sends and receives, in enter order
  uint32_t init_call = kNoCall;       // its communicator creation call
  uint64_t first_seq = 0;             // its first collective reported (0: none yet)
  ProgressFrontier progress;          // newest collective entered, completion frontier
  int64_t last_enter_ns = 0;
  // By ChainWindowOf(seq): the chained fingerprint of its collectives in each window,
  // folded in as they are placed (the agreement check compares these first).
  WindowedLog<WindowChain, 256> chains;  // a few dozen windows a rank: small chunks
  // Post-mortem, its oldest windows folded into their class (JobModel::FoldAgreeingWindows):
  // by seq - 1, up to collectives.first(), its times; by seq - 1, the flags of those whose
  // flags are not their reference's (what a return says of its timing is mostly alike from
  // rank to rank); by window from folded.first(), the reference rank whose calls it matched
  // there (a few dozen windows a rank: a vector, where a log's first chunk holds hundreds).
  WindowedLog<FoldedTimes> folded;
  absl::flat_hash_map<uint64_t, uint8_t> folded_flags_unlike;
  std::vector<int32_t> folded_like;
  // The lowest sequence number it still answers for, folded or held.
  uint64_t FirstHeldSeq() const { return (folded.size() > folded.first() ? folded.first() : collectives.first()) + 1; }
};

struct Comm {
  uint64_t id = 0;
  int32_t nranks = 0;
  uint64_t parent_id = 0;   // split/shrink children
  // By rank in the communicator. In a model built for one process (JobModel::ForOneProcess)
  // only the stretch of ranks it is, from rank_base: a rank of 16,384 holds one, not all.
  std::vector<CommRank> ranks;
  int32_t rank_base = 0;
  int ranks_present = 0;
  // Post-mortem, by window: each chain seen there and the first rank that had it, whose
  // calls stay for the later ranks with that chain to fold into (the window's classes).
  // Keyed, not indexed: a history may start millions of windows in (a cut dump, damage).
  absl::flat_hash_map<uint64_t, std::vector<std::pair<uint64_t, int32_t>>> window_classes;
};

// A collective as the order check reads it (CommOrderTracker): listed in call order by a
// worker that folds a process apart, whose calls may be gone when the check runs.
struct OrderedCollective {
  CommIndex comm = kNoComm;
  uint64_t seq = 0;
  uint64_t group_id = 0;
};

// One communicator `comm` of a process against another, `other`, as the order check
// compares them: for each of comm's collectives from `first_seq` on, in seq order, the
// newest seq of other's the process had issued before it; kNotCompared where there is
// nothing to compare (no such collective, or one launched in one group with other's last).
struct PairOrder {
  static constexpr uint64_t kNotCompared = UINT64_MAX;
  CommIndex comm = kNoComm;
  CommIndex other = kNoComm;
  uint64_t first_seq = 0;
  std::vector<uint64_t> other_seqs;
};

// A process's collectives as the order check reads them, listed by the worker that folds
// it apart (JobModel::ListOrder), whose calls may be gone when the check runs.
struct ListedOrder {
  // Per communicator, in the order first called: its furthest seq and its last call's
  // group, all the check keeps of the process's own progress (CommOrderTracker::NoteLatest).
  std::vector<OrderedCollective> latest;
  // Every ordered pair of its communicators, where `by_pairs`: the whole comparison, read a
  // pair at a time. Without it (a communicator whose seqs do not rise), and where a pair
  // disagrees with another process, the check reads `collectives` one by one.
  bool by_pairs = false;
  std::vector<PairOrder> pairs;
  // In call order; left empty where no pair is compared (one communicator, or several
  // ranks of one: no single order).
  std::vector<OrderedCollective> collectives;
};

// Whether `call` of `process` counts in that process's order of collectives (the order check
// reads only these): a collective the model placed on that process's own rank `placed_on`
// (nullptr: a rank the communicator does not have), but a CUDA graph's captures and replays,
// which run apart from the host's order. A damaged sequence number far past the rank's counts
// in no order either.
inline bool CountsInOrder(const Call& call, const CommRank* placed_on, ProcessId process) {
  return ring::IsCollective(call.fn) && call.seq != 0 &&
         (call.flags & (ring::kFlagReplay | ring::kFlagCaptured)) == 0 && placed_on != nullptr &&
         placed_on->present && placed_on->process == process && call.seq <= placed_on->collectives.size();
}

struct Process {
  ProcessInfo info;
  ProcessStatus status = ProcessStatus::kRunning;
  int64_t heartbeat_ns = 0;   // latest heartbeat, realtime
  int64_t last_record_ns = 0; // latest record time, realtime
  uint64_t lost_records = 0;  // overwritten in the ring, torn, or dropped
  // Calls whose region id or call path id names nothing this process's names and call
  // paths hold (damaged or lost), and the first such collective (0: none was one).
  uint64_t damaged_labels = 0;
  uint64_t first_damaged_comm = 0;
  uint64_t first_damaged_seq = 0;
  ProcessSample sample;         // the latest look at it from its node (sampled_ns 0: none)
  bool exit_recorded = false;   // its ring recorded the status it passed to exit()
  int32_t exit_code = 0;        // that status, 0-255 (when exit_recorded)
  // Seen only from outside so far (`collwatch run`'s process tree): no ring, no calls.
  bool observed_only = false;
  // The preload could make no ring for it, and why (its note, ring/ring_notes.h): the
  // reason the report gives for a rank without records.
  std::string no_ring_why;
  // It ended when collwatch stopped the hung job (ForgetDeathsAfter): not the job's doing.
  bool stopped_by_collwatch = false;
  // In arrival order (enter order per thread); a call's index never changes. Online,
  // the front nothing refers to any more is dropped (JobModel::ForgetCallsBefore).
  WindowedLog<Call, 512> calls;
  // The communicator ranks this process is (comm, rank): what may refer to its calls.
  std::vector<std::pair<CommIndex, int32_t>> memberships;
  // Folded apart (JobModel::FoldApart): its collectives as the order check reads them, in
  // place of its calls, until it takes them (TakeListedOrder), which gives the memory back.
  std::optional<ListedOrder> listed_order;
  // Looked up for every call: flat tables rather than trees.
  absl::flat_hash_map<uint32_t, RegionId> regions;       // writer's region id -> job-wide id
  absl::flat_hash_map<uint32_t, CallPathId> call_paths;  // writer's call path id -> job-wide id
  // Per (communicator, element count): the call path of its latest all-gather made from
  // the user's code, for the calls of the same unit made where no user frame exists
  // (FSDP's backward on autograd's threads). Bounded by kMaxUnitPaths.
  absl::flat_hash_map<uint64_t, CallPathId> unit_paths;
  // Its stacks as last taken (at a stall: stacks/), and when (CLOCK_REALTIME; 0: never).
  stacks::ProcessStacks stacks;
  int64_t stacks_taken_ns = 0;
  // Calls waiting for their return or completion, by their enter record's (lane, index).
  PendingCalls pending;
  // Grouped calls (call indexes) waiting for the completion of their group.
  GroupedCollectives<uint32_t> pending_groups;
  // Returns and completions that arrived before their enter (lanes are shipped
  // independently), by the enter's (lane, index); replayed when it comes.
  absl::flat_hash_map<uint64_t, std::vector<ring::Record>> early;
};

// Whether `process` holds a single rank on each of its communicators: a process of several
// ranks of one communicator (a thread each) has no one order to compare (CommOrderTracker).
inline bool OneRankPerComm(const Process& process) {
  for (size_t i = 0; i < process.memberships.size(); ++i) {
    for (size_t j = i + 1; j < process.memberships.size(); ++j) {
      if (process.memberships[i].first == process.memberships[j].first) return false;
    }
  }
  return true;
}

class JobModel {
 public:
  JobModel() = default;
  // A model for one process's whole trace, built on a worker thread for a job's model to
  // Adopt: its communicators hold only the ranks the process is (Comm::rank_base). Nothing
  // but Adopt reads it.
  static JobModel ForOneProcess();

  // A process that writes a ring. One ObserveProcess added first (same host and pid, no
  // ring yet) is taken over: its entry gets `info` and keeps its sample.
  ProcessId AddProcess(const ProcessInfo& info);
  // A process seen from outside (`collwatch run` walks its command's process tree), e.g.
  // before its first NCCL call: added with no calls when the model has no process of
  // that host and pid, else only its sample is updated. Returns its id either way.
  ProcessId ObserveProcess(const ProcessInfo& info, const ProcessSample& sample);
  // Its stacks, taken at `taken_ns` (CLOCK_REALTIME); a later taking replaces them.
  void AddStacks(ProcessId process, stacks::ProcessStacks stacks, int64_t taken_ns);
  // The latest process added with this host and pid.
  std::optional<ProcessId> FindProcess(const std::string& host, int32_t pid) const;
  // A region name of `process` (the writer's id as its records carry it).
  void AddRegionName(ProcessId process, uint32_t writer_id, std::string_view name);
  // A call path of `process` (the writer's id as its records carry it).
  void AddCallPath(ProcessId process, uint32_t writer_id, const CallPath& path);
  // One ring record, lanes in their order (as the ring reader or the trace store yield
  // them). Returns and completions find their call by (ref_lane, ref_index).
  void AddRecord(ProcessId process, uint32_t lane, uint64_t index, const ring::Record& record);
  // `heartbeat_writer_ns`: the writer's latest heartbeat on its own CLOCK_MONOTONIC (0:
  // none), as rings and agents report it.
  void SetStatus(ProcessId process, ProcessStatus status, uint64_t heartbeat_writer_ns,
                 uint64_t lost_records);
  // The latest look at `process` from its node; one older than the sample held is ignored
  // (the agent and `collwatch run` may both report a process).
  void SetSample(ProcessId process, const ProcessSample& sample);
  // The status `process` passed to exit() (0-255), as its ring recorded it.
  void SetExitCode(ProcessId process, int32_t exit_code);
  // The preload made no ring for the process `note` names (ring/ring_notes.h): that
  // process, as ObserveProcess would see it, with the note's reason (Process::no_ring_why).
  // Post-mortem (ring folders) and online (`collwatch run`) alike come through here.
  ProcessId NoteNoRing(const NoRingNoteRead& note);
  // Everything `update` says of `process`, in the order the calls above need: region
  // names, records, status, sample, exit status. Every source (agent batches, stored
  // traces, rings) is fed through this one door.
  void Apply(ProcessId process, const ProcessUpdate& update);

  // Processes that ended at or after `realtime_ns` were stopped by collwatch (a hung
  // job, --kill-on-hang): they are marked so, and those that died count as running, so
  // that the analysis sees the job as it was when it was stopped.
  void ForgetDeathsAfter(int64_t realtime_ns);

  size_t process_count() const { return processes_.size(); }
  const Process& process(ProcessId id) const { return ProcessAt(id); }
  const std::vector<Comm>& comms() const { return comms_; }
  const Comm* FindComm(uint64_t comm_id) const;
  // The communicator `call` was placed on (nullptr: none, kNoComm): what every reader of a
  // call's communicator asks, never comms()[call.comm] unchecked.
  const Comm* CommOf(const Call& call) const { return call.comm < comms_.size() ? &comms_[call.comm] : nullptr; }
  const Call& call(ProcessId process, uint32_t index) const { return ProcessAt(process).calls[index]; }
  // The call of `rank` at collective `seq` of `comm` (nullptr: not reported). A folded one
  // is made again, once, from its reference's call and its own times.
  const Call* Collective(const Comm& comm, int32_t rank, uint64_t seq) const;
  // For readers of what a call is and when, never of its rank or flags: that call, or for
  // a folded one its reference's, so that reading every rank's makes no call again;
  // `times` (when given) gets the call's own times, folded or not. Writing nothing, it and
  // CollectivesLike may run on several threads at once while nothing else runs on the model
  // (the final pass's readers, rank_ranges.h); Collective may not.
  const Call* CollectiveLike(const Comm& comm, int32_t rank, uint64_t seq, CallTimes* times = nullptr) const;
  // CollectiveLike for each of `rank`'s collectives from `from_seq` up to `to_seq` (not
  // included), into `out` by seq - from_seq: a folded window's reference looked up once, not
  // per call (what reading every rank's every collective costs at the end of a large job).
  void CollectivesLike(const Comm& comm, int32_t rank, uint64_t from_seq, uint64_t to_seq,
                       std::vector<CollectiveTimes>* out) const;
  std::string_view RegionName(RegionId id) const { return region_names_[id]; }
  const std::vector<std::string>& region_names() const { return region_names_; }
  RegionId InternRegion(std::string_view name);
  const CallPath& call_path(CallPathId id) const { return call_paths_[id]; }
  // The region a call path gives a call that has no NVTX range (0: none, no user frame).
  RegionId CallPathRegion(CallPathId id) const { return call_path_regions_[id]; }
  CallPathId InternCallPath(const CallPath& path);
  size_t call_path_count() const { return call_paths_.size(); }

  // Bounded history (online): drops the collectives of `rank` of `comm` below `seq`.
  // Callers must not ask for them again: Collective() answers nullptr below the window.
  void ForgetCollectivesBefore(CommIndex comm, int32_t rank, uint64_t seq);
  // Drops the sends and receives of `rank` of `comm` before `position` in its p2p list.
  void ForgetP2pBefore(CommIndex comm, int32_t rank, size_t position);
  // Drops the calls of `process` below `index` that nothing refers to any more. Kept, each
  // by itself: every call a communicator rank of it still lists, its creation calls,
  // calls waiting for a return or completion, and `also_keep` (e.g. a p2p call waiting
  // for its peer). Drops nothing, and returns false, where more than `most_kept` calls
  // below the span dropped would be kept by themselves (WindowedLog::DropBefore).
  bool ForgetCallsBefore(ProcessId process, uint32_t index, const std::vector<size_t>& also_keep,
                         size_t most_kept = SIZE_MAX);

  // Where `process` was last in NCCL: the index of its latest-entered collective, send or
  // receive, or communicator call among its last calls (kNoCall: none). Queries and group
  // brackets say nothing of where it was (frameworks poll ncclCommGetAsyncError all the
  // time). Calls dropped from that stretch are passed over; FoldAgreeingWindows keeps it.
  static uint32_t LastTellingCall(const Process& process);

  // Post-mortem, once every record of `process` is in (its trace read to the end): of each
  // communicator rank it is, the oldest windows whose calls equal, but for rank, times and
  // flags, those of the first rank seen with the same chain there are folded into that
  // rank's, keeping only their times and flags; then its calls nothing lists are dropped
  // (but its LastTellingCall), unless over a quarter of them would stay listed between the
  // ones dropped (window_folding.cc, kMostKeptShare). The windows folded are a prefix, each
  // full, untainted and completed. Everything reads as before (Collective makes a folded
  // call again): what bounds a large job's memory by its classes, not its ranks (issue 39).
  // Callers that read a process's calls in order (Analyzer: the order check) read them first.
  void FoldAgreeingWindows(ProcessId process);

  // Post-mortem, on many cores: `alone` is a model made ForOneProcess and built from one
  // process's whole trace (AddProcess, Apply) on any thread. That process is moved in, its
  // names and communicators taken into this model's, as AddProcess and Apply with the same
  // trace would leave it: adopting processes in their order gives the model applying them
  // in that order gives. nullopt, and this model unchanged, where the two could differ: its
  // host and pid known here, a communicator rank of it taken here already, the end of a
  // communicator `alone` did not know (job_model_adopt.cc).
  std::optional<ProcessId> Adopt(JobModel&& alone);

  // Post-mortem, folding on many cores: from now on each fold publishes the classes it
  // registers, and the names interned, for workers folding apart (FoldApart). The pointer
  // lives as long as this model.
  const FoldReferences* ShareFoldReferences();
  const FoldReferences* fold_references() const { return fold_references_.get(); }
  // On a worker, in a model made ForOneProcess once its trace is in: its window chains
  // summed; with `references`, folded apart first (FoldApart).
  void FinishOneProcess(const FoldReferences* references);
  // Its collectives as FoldApart listed them, taken out (nullopt: not listed; read its calls).
  std::optional<ListedOrder> TakeListedOrder(ProcessId process);

  // Latest record or heartbeat time over all processes (the "now" of a finished trace).
  int64_t LatestTimeNs() const;
  // Records that could not be placed (no communicator, unknown enter): counted, not fatal.
  uint64_t unmatched_records() const { return unmatched_records_; }

 private:
  CommIndex CommFor(uint64_t comm_id, int32_t nranks);
  // The call path of `call` (a collective of `record`), its own or its unit's.
  // `damaged`: set when its call path id names none of the process's call paths.
  void AttributeCallPath(Process& process, const ring::Record& record, Call& call, bool* damaged);
  void AddEnter(ProcessId process, uint32_t lane, uint64_t index, const ring::Record& record);
  // Holds a return or completion whose enter has not arrived; false when over the cap.
  bool HoldEarly(Process& process, const ring::Record& record);
  void MarkCompleted(Process& process, uint32_t call_index, int64_t when_ns);
  // Adds `call` (just placed at its seq on `rank`) to its window's chain; a slot placed
  // before taints the window (the sum would hold both calls).
  void FoldIntoChain(CommRank& rank, const Call& call, bool placed_before);
  // Marks `rank` of `comm` as reported by `process` (first record of it).
  void Join(CommIndex comm, int32_t rank, ProcessId process);
  // `rank` of `comm` (0 <= rank < comm.nranks), made room for in a model of one process.
  CommRank& RankIn(Comm& comm, int32_t rank) {
    if (one_process_ && FindRank(comm, rank) == nullptr) MakeRoomFor(comm, rank);
    return comm.ranks[static_cast<size_t>(rank - comm.rank_base)];
  }
  // A model of one process: its stretch of `comm`'s ranks grown to hold `rank`.
  static void MakeRoomFor(Comm& comm, int32_t rank);
  // `rank` of `comm` where the model holds it (nullptr: out of its ranks).
  static CommRank* FindRank(Comm& comm, int32_t rank) {
    const int64_t at = static_cast<int64_t>(rank) - comm.rank_base;
    return at >= 0 && static_cast<size_t>(at) < comm.ranks.size() ? &comm.ranks[static_cast<size_t>(at)] : nullptr;
  }
  int64_t ToRealtime(const Process& process, uint64_t monotonic_ns) const;
  // How many windows of `rank` of `comm`, from its oldest held one, fold (window_folding.cc),
  // with their calls' times appended to `times`, (slot, flags) of those whose flags are not
  // their reference's to `unlike_flags`, and their reference ranks to `like`.
  size_t FoldableWindows(Comm& comm, int32_t rank, std::vector<FoldedTimes>* times,
                         std::vector<std::pair<uint64_t, uint8_t>>* unlike_flags, std::vector<int32_t>* like);
  // Folds `windows` windows of `entry` from its oldest held one: their times, unlike flags and
  // reference ranks kept, their call indexes dropped.
  static void KeepFolded(CommRank& entry, size_t windows, const std::vector<FoldedTimes>& times,
                         const std::vector<std::pair<uint64_t, uint8_t>>& unlike_flags,
                         const std::vector<int32_t>& like);
  // Once windows of `process` folded: its calls nothing lists dropped, but its LastTellingCall.
  void ForgetFoldedCalls(ProcessId process);
  // In a model made ForOneProcess once its trace is in: the oldest windows of each
  // communicator rank of its process that equal a class `references` holds are folded into
  // that class as FoldAgreeingWindows would fold them in the job's model (the same reference
  // rank, times and flags), and its calls nothing lists are dropped. Its collectives are
  // listed first for the order check. Windows whose class is not published yet are left to
  // the job's model's fold (window_folding.cc).
  void FoldApart(const FoldReferences& references);
  // FoldApart: `process`'s placed collectives listed for the order check (listed_order.cc).
  void ListOrder(Process& process);
  // The folded call of `rank` of `comm` at `seq`, made again (Collective).
  const Call* RemadeCollective(const Comm& comm, int32_t rank, uint64_t seq) const;

  Process& ProcessAt(ProcessId id) { return *processes_[id]; }
  const Process& ProcessAt(ProcessId id) const { return *processes_[id]; }

  // Each by itself: a Process is large and must not move as the job grows (a vector of
  // them copied every process and its calls each time it grew; a deque's indexing cost
  // showed in every record's).
  std::vector<std::unique_ptr<Process>> processes_;
  std::map<std::pair<std::string, int32_t>, ProcessId> by_host_pid_;  // the latest of each
  std::vector<Comm> comms_;
  absl::flat_hash_map<uint64_t, CommIndex> comm_index_;
  // The communicators last looked up, by the low bits of their id: nearly every record names
  // one of its process's few communicators, found here without hashing (CommFor).
  struct RecentComm {
    uint64_t id = 0;
    CommIndex index = kNoComm;  // kNoComm: none
  };
  std::array<RecentComm, 8> recent_comms_{};
  std::vector<std::string> region_names_ = {""};
  std::unordered_map<std::string, RegionId> region_ids_;
  std::vector<CallPath> call_paths_ = {CallPath{}};
  // Per call path, worked out once when it is interned: the region its code stands for
  // (0: no user frame).
  std::vector<RegionId> call_path_regions_ = {0};
  std::unordered_map<std::string, CallPathId> call_path_ids_;  // by the path's frames as text
  uint64_t unmatched_records_ = 0;
  // Ends of communicators (destroy, finalize, abort) this model did not know when they
  // came: another process's model may, so Adopt takes no process with any.
  uint64_t ends_of_unknown_comms_ = 0;
  bool one_process_ = false;  // ForOneProcess
  bool one_process_finished_ = false;  // FinishOneProcess: its chains are summed
  // ShareFoldReferences: what folds publish, and the classes registered since the last
  // publication, as (communicator, window, reference rank, chain).
  std::shared_ptr<FoldReferences> fold_references_;
  struct NewClass {
    CommIndex comm;
    uint64_t window;
    int32_t rank;
    uint64_t chain;
  };
  std::vector<NewClass> unpublished_classes_;
  // The classes registered since the last call, and the names interned, into fold_references_.
  void PublishFoldReferences();
  // Folded calls made again (Collective), by (communicator, rank, seq): kept, so that the
  // pointers handed out stay valid; only the few calls the checks read one by one.
  mutable std::deque<Call> remade_;
  mutable absl::flat_hash_map<std::tuple<CommIndex, int32_t, uint64_t>, uint32_t> remade_index_;
};

// Whether building each process's model on the worker that read its trace, for the job's
// model to adopt, is faster than applying every trace on the model's thread. Measured
// (docs/performance.md, "eighth stage"): with the workers folding too, faster from 2 cores
// up; on one, the same work and a little more.
inline bool BuildingApartPays(unsigned cores) { return cores >= 2; }

// A process's whole trace as a worker thread readies it for the job's model: its model built
// apart there (BuildProcessApart), the trace kept beside it for where adoption cannot be
// exact; or, `alone` left empty, the trace to apply on the model's thread. A trace streamed
// into `alone` (BuildProcessApartStreamed) is not kept: `trace_kept` is false.
struct ProcessBuiltApart {
  ProcessInfo info;
  ProcessUpdate update;
  JobModel alone;
  bool trace_kept = true;
};
// With `references` (the job's model's, ShareFoldReferences), the model is folded apart too.
ProcessBuiltApart BuildProcessApart(ProcessInfo info, ProcessUpdate update,
                                    const FoldReferences* references = nullptr);
// The same from a trace streamed in: `read` gives `alone` the trace as it reads it (names
// first, then each record as it is decoded, AddRecord or Apply on `process`), so that a
// worker never holds the whole (written out and read back, a trace's records cost more than
// a tenth of building from them). Its error is returned, nothing built.
using TraceReading = std::function<absl::Status(JobModel& alone, ProcessId process)>;
absl::StatusOr<ProcessBuiltApart> BuildProcessApartStreamed(ProcessInfo info, const TraceReading& read,
                                                            const FoldReferences* references = nullptr);
// Into `model`, on its thread: `built.alone` adopted, or else its kept trace applied there.
// nullopt, the model unchanged, for a trace not kept that cannot be adopted: the caller
// reads it again and takes that (BuildProcessApart's, or a ProcessBuiltApart of its update).
std::optional<ProcessId> TakeBuiltProcess(JobModel* model, ProcessBuiltApart built);

// "1.5 MiB"
std::string HumanBytes(double bytes);

}  // namespace collwatch::analyzer

#endif  // COLLWATCH_ANALYZER_JOB_MODEL_H_
