// The analyzer: aligns the ranks of every communicator and names the first divergence
// (PATH_DIVERGENCE, SKIPPED_REDUCE_SCATTER, SIGNATURE_MISMATCH, OP_MISMATCH) and the
// stalls (NOT_JOINED, TRANSPORT_STALL, RANK_NOT_RUNNING, COMM_INIT_STALL, RANK_LOST), with rank classes,
// regions and the evidence behind them. Its pieces: analyzer.cc (passes, agreement,
// frontier), divergence.cc and classification.h (what a mismatch is), stalls.cc,
// p2p_matching.cc; finding_text.h words each finding as it is emitted. Incremental: feed
// records into model(), call Analyze(now) as often as wanted; each call looks only at
// what is new. The same code serves the collector (online) and `collwatch analyze`
// (post-mortem, now = end of the trace).
// Threading: single-threaded; callers serialise. With AnalyzerOptions::read_threads above 1,
// Analyze reads ranks on threads of its own (rank_ranges.h), joined before it returns.
#ifndef COLLWATCH_ANALYZER_ANALYZER_H_
#define COLLWATCH_ANALYZER_ANALYZER_H_

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "analyzer/call_sites.h"
#include "analyzer/comm_order.h"
#include "analyzer/expected_duration.h"
#include "analyzer/finding.h"
#include "analyzer/job_model.h"

namespace collwatch::analyzer {

struct AnalyzerOptions {
  double stall_after_s = 30;      // floor of the stall threshold (--stall-after)
  double stall_multiple = 8;      // threshold = max(floor, multiple x expected time)
  double class_grace_s = 0.5;     // a mismatch waits this long for the ranks not yet there
  // A divergence whose kind later calls could still change waits this long for them (GPU
  // ranks keep enqueueing after the bad collective), unless every rank is blocked in NCCL.
  double settle_s = 0.3;
  size_t alignment_window = 256;  // calls per rank compared from the first mismatch
  size_t history_window = 4096;   // agreed calls searched for the schedule template
  // Online: forget calls no check can need again, so a long job's model stays bounded
  // (post-mortem keeps everything: schedules and exports read the whole run).
  bool bounded_history = false;
  // Threads that read every rank's times of a large communicator (the expected-time model's
  // input): post-mortem, where the final pass reads them all at once, every core.
  unsigned read_threads = 1;
  // Which files a finding may open for the source lines its call paths name.
  SourceAccess source_access;
};

// The oldest collective of a communicator that not every rank has completed, with how
// long it should take: what a dashboard shows against its age.
struct InflightCollective {
  uint64_t comm_id = 0;
  uint64_t seq = 0;
  std::string description;       // DescribeCall of one rank's call
  bool waiting_for_ranks = false;  // some ranks have not entered it
  int64_t since_ns = 0;          // CLOCK_REALTIME it waits since: the first arrival while
                                 // ranks are missing, else the last arrival
  double expected_s = 0;         // how long that wait should last (0: no timing learned yet)
  double threshold_s = 0;        // past this the analyzer calls it a stall
};

class Analyzer {
 public:
  explicit Analyzer(AnalyzerOptions options = {}) : options_(options) {}

  JobModel& model() { return model_; }
  const JobModel& model() const { return model_; }
  const AnalyzerOptions& options() const { return options_; }
  // Options may change between Analyze calls (e.g. a threshold read from run.json).
  void set_options(const AnalyzerOptions& options) { options_ = options; }

  // Examines what changed up to `now_ns` (CLOCK_REALTIME) and returns the findings that
  // are new. `final_pass`: the trace is complete (post-mortem): a mismatch does not wait
  // for ranks that will never report, and latency counts from when the trace could tell.
  std::vector<Finding> Analyze(int64_t now_ns, bool final_pass = false);
  // Post-mortem, once every record of `process` is in (its trace read to the end): the
  // order check reads its calls, then the model folds its agreeing windows
  // (JobModel::FoldAgreeingWindows). What bounds a large job's memory post-mortem; the
  // findings are the same as without it.
  void FoldLoadedProcess(ProcessId process);
  // Every finding so far, in the order found.
  const std::vector<Finding>& findings() const { return findings_; }

  // Stall findings (NOT_JOINED, TRANSPORT_STALL, RANK_NOT_RUNNING, COMM_INIT_STALL) want the stacks of the
  // processes they name: every process of their communicator, and those their evidence
  // names (a rank that never reported there). Each with its ranks in the communicator.
  static bool WantsStacks(const Finding& finding);
  std::vector<std::pair<ProcessId, std::vector<int32_t>>> ProcessesNamedBy(const Finding& finding) const;
  // Gives each stall finding the merged stacks of the processes it names, as taken since
  // it was found (JobModel::AddStacks); returns the indexes into findings() whose stacks
  // changed.
  std::vector<size_t> AttachStacks();
  // Indexes into findings() of the stalls that resolved (stragglers, reworded in place)
  // since the last call.
  std::vector<size_t> TakeResolved();
  // Whether every rank `finding` (NOT_JOINED, COMM_INIT_STALL) waits for is at work as of
  // its latest look: its process runs, its CPU time advances, and it is inside no NCCL
  // call (a checkpoint or an evaluation on one rank). Evidence of work, not of a hang;
  // false for any other finding, or when a look is missing or older than `now_ns` allows.
  bool LateRanksAtWork(const Finding& finding, int64_t now_ns) const;
  // The stall threshold for a collective of `bytes` (per rank) on `comm`.
  double StallThresholdS(const Comm& comm, double bytes) const;
  // Per communicator with something in flight, its oldest collective.
  std::vector<InflightCollective> Inflight() const;

 private:
  struct CommProgress {
    uint64_t agreed_seq = 0;          // every rank reported seqs up to here, all equal
    bool diverged = false;            // a divergence finding exists: stalls are its echo
    int64_t mismatch_seen_ns = 0;     // a mismatch waiting for the grace period
    uint64_t stall_reported_seq = 0;  // last seq a stall finding named
    uint64_t late_reported_seq = 0;   // last seq a NOT_JOINED named (open or resolved)
    bool init_stall_reported = false;
    std::optional<size_t> open_stall;       // findings_ index of a stall not resolved yet
    std::optional<size_t> open_init_stall;  // the same for COMM_INIT_STALL
    uint64_t timed_seq = 0;           // seqs up to here fed the expected-time model
    std::vector<size_t> p2p_cursor;   // per rank: p2p calls already paired
  };
  struct P2pKey {
    uint64_t comm_id;
    int32_t sender;
    int32_t receiver;
    uint64_t seq;
    auto operator<=>(const P2pKey&) const = default;
  };
  struct P2pSide {
    ProcessId process;
    uint32_t call;
  };

  // The oldest collective of `comm` not completed by every rank, split into the ranks
  // that entered it and those that have not.
  struct Frontier {
    uint64_t seq = 0;
    std::vector<int32_t> entered, lagging;
    int64_t first_enter_ns = INT64_MAX, last_enter_ns = 0;
    const Call* sample = nullptr;  // one entered rank's call
    double expected_s = 0;         // arrival spread (lagging) or transfer time (all in)
    double threshold_s = 0;
  };
  std::optional<Frontier> FrontierOf(const Comm& comm) const;
  std::vector<int32_t> reporting_scratch_;  // CheckAgreement: the ranks that reported
  // LearnTimes: per collective of the block being read, what its ranks' calls say.
  struct SeqTimes {
    int64_t first_enter = INT64_MAX, last_enter = 0, last_complete = 0;
    const Call* sample = nullptr;  // whose size it is counted at
    // `later`'s ranks into these, read after these: its sample, where it has one, wins.
    void Join(const SeqTimes& later) {
      first_enter = std::min(first_enter, later.first_enter);
      last_enter = std::max(last_enter, later.last_enter);
      last_complete = std::max(last_complete, later.last_complete);
      if (later.sample != nullptr) sample = later.sample;
    }
  };
  std::vector<SeqTimes> times_scratch_;
  std::vector<CollectiveTimes> like_scratch_;  // one rank's calls over that block
  // Analyze: each communicator's frontier this pass, and the communicators in the order
  // their stalls began (none: last).
  std::vector<std::optional<Frontier>> stall_frontiers_scratch_;
  std::vector<std::pair<int64_t, size_t>> stall_order_scratch_;

  void CheckAgreement(const Comm& comm, CommProgress& progress, int64_t now_ns, bool final_pass,
                      std::vector<Finding>* out);
  // True when every rank in `reporting` entered all of chain window `window` and their
  // chains for it are usable and equal: each of its collectives is agreed, unread.
  bool WindowAgreed(const Comm& comm, const std::vector<int32_t>& reporting, uint64_t window) const;
  // Feeds completed collectives to the expected-time model; one whose ranks arrived
  // further apart than the join threshold, never reported while it waited (post-mortem,
  // or between two online passes), is a straggler: reported, resolved (stragglers.cc).
  void LearnTimes(const Comm& comm, CommProgress& progress, std::vector<Finding>* out);
  // LearnTimes's reading: ranks [first_rank, end_rank) of `comm` over collectives [from_seq,
  // to_seq) into `times` (one a collective, as the ranks come in order); `like` is scratch.
  // Reads only the model: several run at once, on rank ranges of one block.
  void ReadRankTimes(const Comm& comm, int32_t first_rank, int32_t end_rank, uint64_t from_seq, uint64_t to_seq,
                     std::vector<CollectiveTimes>* like, std::vector<SeqTimes>* times) const;
  void ReportPastStraggler(const Comm& comm, CommProgress& progress, uint64_t seq, double threshold_s,
                           std::vector<Finding>* out);
  // Resolves the communicator's open stalls whose late ranks arrived, collective completed
  // or creation returned (stragglers.cc).
  void CheckResolved(const Comm& comm, CommProgress& progress);
  void Resolve(size_t index, int64_t resolved_ns);
  // `frontier`: FrontierOf(comm), as computed this pass.
  void CheckStall(const Comm& comm, CommProgress& progress, const std::optional<Frontier>& frontier, int64_t now_ns,
                  bool final_pass, std::vector<Finding>* out);
  void CheckInit(const Comm& comm, CommProgress& progress, int64_t now_ns, std::vector<Finding>* out);
  void CheckP2p(const Comm& comm, CommProgress& progress, int64_t now_ns, bool final_pass,
                std::vector<Finding>* out);
  // A send or receive whose peer never posted its side (after the wait-for cycles).
  void CheckP2pStall(const Comm& comm, CommProgress& progress, int64_t now_ns, bool final_pass,
                     std::vector<Finding>* out);
  // Explains the first mismatch of `comm` at `seq` (divergence.cc). `wants_more`: calls
  // reported later could still change the verdict (classification.h).
  Finding ExplainDivergence(const Comm& comm, uint64_t seq, int64_t now_ns, bool final_pass,
                            bool* wants_more) const;
  // True when every rank that reported `seq` of `comm` is inside its latest call (a
  // blocking backend): no rank can issue anything more until the divergence resolves.
  bool EveryReportingRankBlocked(const Comm& comm, uint64_t seq) const;
  // True when `process` is blocked in a collective of a communicator that already has a
  // divergence finding: its lateness elsewhere is an echo of that one.
  bool BlockedInDivergedComm(ProcessId process) const;
  // The process behind `rank` of `comm`: the one that reported it, or, for a communicator
  // that spans the job, the process whose RANK it is (stalls.cc).
  std::optional<ProcessId> ProcessOfRank(const Comm& comm, int32_t rank) const;
  // Adds how each of `ranks`' processes is doing to the finding's `processes` (capped).
  void DescribeRanks(const Comm& comm, const std::vector<int32_t>& ranks, int64_t now_ns, Finding* finding) const;
  // Wait-for cycles and order inversions (wait_cycles.cc). A process waits, in the call it
  // is held at (its oldest call not completed), for `peer`: not yet in that collective or
  // send/receive, or in it behind `peer_held_at`, an older call of its own.
  struct WaitEdge {
    ProcessId peer = 0;
    int32_t peer_comm_rank = -1;
    bool peer_entered = false;
    uint32_t peer_held_at = kNoCall;
  };
  struct CycleStep {
    ProcessId process = 0;
    uint32_t held_at = kNoCall;
    WaitEdge edge;
  };
  // An inversion seen, waiting to be told (its calls complete: latent) or explained (a
  // cycle or a divergence on its communicators); its calls as read when seen.
  struct OpenInversion {
    OrderInversion which;
    std::optional<CallFacts> first_x, first_c, second_c, second_x;
  };
  // What one search learns as it goes: each process's oldest open call, and the ranks
  // each collective waits for.
  struct WaitSearch {
    std::unordered_map<ProcessId, uint32_t> held;
    std::map<std::pair<CommIndex, uint64_t>, std::vector<WaitEdge>> collective_waits;
  };
  uint32_t HeldAt(ProcessId process, WaitSearch& search) const;
  // Whom `process`, held at `held_at`, waits for.
  std::vector<WaitEdge> WaitsOf(ProcessId process, uint32_t held_at, WaitSearch& search) const;
  // The ranks of `call` (made by `process`) that are elsewhere: for a collective, every
  // such rank but the caller's own (WaitsOf leaves out the asking process).
  std::vector<WaitEdge> PeersElsewhere(const Call& call, ProcessId process, WaitSearch& search) const;
  // Looks for a cycle from the waiting ranks of every stall past its threshold.
  void CheckWaitCycles(const std::vector<std::optional<Frontier>>& frontiers, int64_t now_ns, bool final_pass,
                       std::vector<Finding>* out);
  // Reports `cycle` when one of its waits passed its threshold; false otherwise.
  bool ReportWaitCycle(std::vector<CycleStep> cycle, int64_t now_ns, bool final_pass, std::vector<Finding>* out);
  // Reads the collectives added since (comm_order.h), of `only` or of every process, and
  // opens the inversions seen (`listed`: `only`'s collectives as its fold apart listed them).
  void ObserveOrder(bool forget_behind, std::optional<ProcessId> only = std::nullopt,
                    const ListedOrder* listed = nullptr);
  void CheckOrderInversions(int64_t now_ns, bool final_pass, std::vector<Finding>* out);
  void ReportOrderInversion(const OpenInversion& open, bool got_through, int64_t now_ns, bool final_pass,
                            std::vector<Finding>* out);
  std::optional<CallFacts> CallOf(ProcessId process, CommIndex comm, uint64_t seq) const;

  // Words the finding (finding_text.h), times its detection, keeps it and hands it out.
  void Emit(Finding finding, std::vector<Finding>* out);
  // Bounded history: drops what every check has moved past (see analyzer.cc).
  void ForgetSettledHistory();

  // The one rank of `comm` that keeps history_window agreed collectives for a divergence's
  // schedule template (bounded history): its lowest reporting rank. Below the agreed
  // point every rank issued the same fingerprints, so one rank's history stands for all;
  // the others keep only what a check still reads (analyzer.cc, ForgetSettledHistory).
  static int32_t HistoryKeeper(const Comm& comm);

  // Calls per process BlockedInDivergedComm looks back over: never forgotten online.
  static constexpr size_t kRecentCallsKept = 64;
  // History is dropped in chunks of at least this many entries (amortises the scans):
  // the history keeper's and a process's calls, and any other rank's collectives.
  static constexpr size_t kForgetChunk = 1024;
  static constexpr size_t kCallsForgetChunk = 64;
  static constexpr size_t kFollowerForgetChunk = 64;
  // Agreed collectives a divergence finding shows before the first disagreement, from
  // each class's representative (divergence.cc).
  static constexpr uint64_t kContextCalls = 2;

  AnalyzerOptions options_;
  JobModel model_;
  ExpectedDuration expected_;
  std::vector<CommProgress> progress_;  // by CommIndex
  std::map<P2pKey, P2pSide> unpaired_p2p_;
  // Both sides of each pair matched but not yet completed (wait_cycles.cc reads them).
  std::vector<P2pSide> open_p2p_;
  std::vector<Finding> findings_;
  std::vector<size_t> resolved_;  // findings_ indexes resolved, not taken yet
  std::vector<size_t> next_forget_at_;  // by process: stored calls that start the next pass
  CommOrderTracker comm_order_;
  std::vector<OpenInversion> open_inversions_;
};

}  // namespace collwatch::analyzer

#endif  // COLLWATCH_ANALYZER_ANALYZER_H_
