// A diagnosis as detection returns it: what went wrong, where, which ranks, and the
// evidence the words are made from (finding_text.h turns it into headline, summary and
// labels, in one place). The kinds and field names are report.json's contract (its
// findings[], docs/findings.md). Threading: plain values.
#ifndef COLLWATCH_ANALYZER_FINDING_H_
#define COLLWATCH_ANALYZER_FINDING_H_

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "process/process_info.h"
#include "process/rank_membership.h"
#include "analyzer/call_sites.h"
#include "analyzer/p2p_rhythm.h"
#include "analyzer/stack_classes.h"
#include "ring/call_path.h"
#include "ring/ring_format.h"

namespace collwatch::analyzer {

// Values equal proto FindingKind's.
enum class FindingKind : int {
  kPathDivergence = 1,
  kSkippedReduceScatter = 2,
  kSignatureMismatch = 3,
  kOpMismatch = 4,
  kNotJoined = 5,
  kTransportStall = 6,
  kCommInitStall = 7,
  kRankLost = 8,
  // Every rank entered a collective that does not complete, and a rank's process cannot run
  // (stopped, stuck in I/O, gone): the cause is that process, not the transport.
  kRankNotRunning = 9,
  // Ranks wait for each other in a cycle across communicators or point-to-point pairs:
  // each is blocked in a call another rank of the cycle cannot join first (a deadlock).
  kWaitCycle = 10,
  // Two ranks sharing two communicators issued their collectives there in opposite orders
  // and the job got through: a deadlock waiting for one hardware queue (a latent one).
  kOrderInversion = 11,
};
std::string_view FindingKindName(FindingKind kind);  // "PATH_DIVERGENCE"
std::optional<FindingKind> ParseFindingKind(std::string_view name);

// What a finding says about one process it names (report.json finding `processes`).
struct ProcessReport {
  int32_t rank = -1;          // rank in the finding's communicator
  int32_t global_rank = -1;   // RANK of the process, -1 unknown
  int32_t pid = 0;
  std::string host;
  std::string state;          // "running", "sleeping in futex_wait_queue", "I/O (in ...)",
                              // "stopped", "zombie", "gone", "unknown"
  bool cpu_advancing = false;
  double heartbeat_age_s = -1;   // seconds since its ring's heartbeat (-1: none)
  bool heartbeat_fresh = false;  // heartbeat younger than a few watcher periods
  std::string ended;             // "" while running; "exited with 1",
                                 // "killed or crashed (no exit recorded)", ...
};

// Ranks that behaved identically (ranks in the communicator, ascending).
struct RankClass {
  std::vector<int32_t> ranks;
  std::string label;  // words: e.g. "ran 5 extra collectives in fwd/vision.*"
};

// One call as a finding tells it: what DescribeCall prints, with no model behind it.
struct CallFacts {
  uint64_t seq = 0;
  ring::ApiFn fn = ring::ApiFn::kNone;
  uint64_t count = 0;
  uint8_t dtype = ring::kNoDtype;
  int32_t redop = ring::kUnset;
  int32_t root_or_peer = ring::kUnset;
  std::string region;  // its NVTX region, "" outside any (or its code's, call_sites.h)
  CallPath call_path;  // the Python call path it was made from (no frames: unknown)
  bool call_path_inferred = false;  // its unit's forward all-gather's (job_model.h)
};
// Bytes one rank contributes to the call (count as NCCL defines it).
double CallBytes(const CallFacts& call);
// Distinct NVTX regions of `calls`, in order of first appearance (none: empty).
std::vector<std::string> RegionsOf(std::span<const CallFacts> calls);

// One call of a class's context: agreed by every class, or from the divergence on.
struct ContextCall {
  bool agreed = false;
  CallFacts call;
};

// What one rank class did around the divergence.
struct ClassContext {
  std::vector<int32_t> ranks;
  std::vector<std::string> lines;  // words: "= seq 39     all-gather ..." ('=' agreed, '>' after)
  std::vector<ContextCall> calls;  // what the lines tell
  size_t more_reported = 0;        // calls after these that the class reported too
};

// Where communicator ranks sit in the job, so that people find them (JobRanksNote).
struct JobPlace {
  // A process holding several ranks, none of which the records pin down.
  struct SharedProcess {
    std::vector<int32_t> ranks;  // the job ranks it holds
    std::string host;
    int32_t pid = 0;
  };
  std::vector<int32_t> global;        // their job ranks, where these differ from the communicator's
  std::vector<SharedProcess> shared;  // processes of several ranks
};

// What the first differing calls show (classification.h decides it).
enum class DivergenceBasis {
  kAlignment,    // the sequences agree again after the differing stretch
  kHistory,      // the agreed schedule shows one head followed, later, by the other
  kRegions,      // the same call issued from different NVTX regions
  kCallSites,    // the first differing calls issued from different lines of one function
  kSignature,    // same op and element count, other dtype / reduce op / root
  kStructure,    // no realignment, but the stretch each class reported differs (or agrees) in shape
  kHeadsOnly,    // nothing beyond the first differing call on some class
};

// One class of ranks at a collective divergence and the call it issued there.
struct DivergingClass {
  std::vector<int32_t> ranks;
  JobPlace place;
  CallFacts head;
};

// Evidence of a collective divergence (PATH_DIVERGENCE, SKIPPED_REDUCE_SCATTER,
// SIGNATURE_MISMATCH, OP_MISMATCH).
struct DivergenceFacts {
  // Every class, largest first (rank_classes holds the first two). Empty: the ranks
  // disagree, but the records around it were lost in the ring.
  std::vector<DivergingClass> classes;
  DivergenceBasis basis = DivergenceBasis::kHeadsOnly;
  // Runs one class issued and the other did not: one-sided (`run`, issued by the first
  // class when `major_inserted`), or two-sided (`major_run`, `minor_run`; `open_ended`: no
  // point where they agree again was seen).
  bool major_inserted = false;
  std::vector<CallFacts> run;
  bool two_sided = false;
  bool open_ended = false;
  std::vector<CallFacts> major_run;
  std::vector<CallFacts> minor_run;
};

// Why a rank's process cannot take part in a collective, as its node sees it.
enum class ProcessTrouble : uint8_t {
  kNone,
  kStopped,   // a SIGSTOP, a debugger or job control holds it
  kDiskWait,  // uninterruptible I/O
  kEnded,     // it ended or stopped reporting
};

// The latest NCCL call of a rank's process.
struct RecentCall {
  CallFacts call;
  int32_t rank = -1;     // whose call (a process may hold several ranks)
  uint64_t comm_id = 0;  // on which communicator
  double ago_s = 0;      // entered this long before the finding
  bool returned = false;
  bool completed = false;
};

// A rank a stall names, and what its process is doing.
struct StalledRank {
  int32_t rank = -1;
  JobPlace place;
  ProcessTrouble trouble = ProcessTrouble::kNone;
  bool lost = false;                      // ended or stopped reporting (process/ IsLost)
  ProcessStatus status = ProcessStatus::kRunning;  // its ring's last word
  std::string wait_channel;               // kDiskWait: the kernel function it waits in
  std::optional<ProcessReport> process;   // its process (none: no process known)
  // NOT_JOINED: how far it got on the communicator.
  bool reported = false;                  // it reported on this communicator
  uint64_t entered_seq = 0;               // its latest collective there (0: none)
  bool shares_process = false;            // its process holds other ranks too
  std::optional<RecentCall> last_call;    // its process's latest NCCL call
};

// Evidence of a stall (NOT_JOINED, TRANSPORT_STALL, RANK_NOT_RUNNING, COMM_INIT_STALL,
// RANK_LOST).
struct StallFacts {
  CallFacts call;                 // the collective waited on (one entered rank's call)
  std::vector<int32_t> entered;   // ranks inside it (communicator creation: waiting in it)
  double waited_s = 0;            // since the first arrival (all in: the last arrival)
  double threshold_s = 0;         // the stall threshold
  double expected_s = 0;          // the time the job's earlier collectives predict
  int32_t ranks_present = 0;      // COMM_INIT_STALL: ranks that reported on the communicator
  JobPlace lost_place;            // RANK_LOST: where the lost ranks sit in the job
  // RANK_LOST, where every lost rank completed each collective before this one: the latest
  // earlier collectives of the communicator (ascending, at most 3) with this one's
  // signature that every rank issued, lost ranks included. A call the lost ranks made at
  // every such point and not this time: left out, or next when they failed.
  std::vector<uint64_t> same_call_before;
  // RANK_LOST: ranks that have not entered the collective either, alive when it was found.
  std::vector<int32_t> also_missing;
  // NOT_JOINED: every lagging rank. TRANSPORT_STALL: entered ranks whose process cannot
  // run. RANK_LOST: the lost ranks. COMM_INIT_STALL: the missing ranks whose process is alive.
  std::vector<StalledRank> ranks;
};

// Evidence of a point-to-point pair gone wrong: a size or type mismatch (both sides), or
// a side whose peer never posted its match (NOT_JOINED: one side).
struct P2pFacts {
  int32_t sender = -1;
  int32_t receiver = -1;
  std::optional<CallFacts> send;
  std::optional<CallFacts> recv;
  double waited_s = 0;  // NOT_JOINED: since the posted side entered
  // SIGNATURE_MISMATCH: the rhythm of the sender's exchange with the receiver, where the
  // send sits in it, and whether the rhythm was read from the sender's first call on.
  P2pRhythm sender_rhythm;
  std::optional<RhythmPlace> send_place;
  bool rhythm_whole = false;
};

// Stalls: the named processes' stacks, merged (stack_classes.h), as taken after the
// finding (the agent takes them when the collector asks).
struct FindingStacks {
  int64_t taken_ns = 0;  // CLOCK_REALTIME of the latest one taken
  std::vector<StackClass> classes;
  bool complete = false;  // every process it names that streams a ring answered
  bool operator==(const FindingStacks&) const = default;
};

// A rank's stream the collector refused because it came as another job (a collector
// serves one job).
struct RefusedStream {
  std::string job;  // the job id the stream gave
  std::string host;
  int32_t pid = 0;
  int32_t rank = -1;  // its RANK, -1 unknown
  bool operator==(const RefusedStream&) const = default;
};

// One arc of a wait-for cycle: `rank` waits in `call` (on communicator `comm_id`, where it
// is `comm_rank`) for `peer`, which is elsewhere: not yet in that call, or in it but with
// `peer_call`, an earlier call, ahead of it on its queue. Ranks are job ranks (RANK; the
// communicator rank where none is known). For ORDER_INVERSION: `call` is the collective
// `rank` issued first of the two, `peer_call` the one `peer` issued first.
struct WaitArc {
  int32_t rank = -1;
  int32_t comm_rank = -1;
  uint64_t comm_id = 0;
  CallFacts call;
  bool call_returned = true;  // its host thread left the call (GPU: enqueued)
  int32_t peer = -1;
  int32_t peer_comm_rank = -1;  // the peer's rank in `comm_id`
  bool peer_entered = false;    // the peer entered `call`'s collective (or posted its p2p side)
  uint64_t peer_comm_id = 0;    // where the peer is held
  std::optional<CallFacts> peer_call;
  // ORDER_INVERSION: `rank`'s own collective on the peer's communicator, issued after `call`.
  std::optional<CallFacts> then_call;
  std::optional<ProcessReport> process;  // how `rank`'s process is doing
  // A send or receive: how many of the other side's calls toward `rank` the peer had
  // posted (its highest per-peer sequence number; 0: none), and the rhythm of `rank`'s
  // sends and receives with the peer on `comm_id` (p2p_rhythm.h).
  uint64_t peer_posted = 0;
  P2pRhythm rhythm;
};

// Evidence of a wait-for cycle (WAIT_CYCLE) or an order inversion (ORDER_INVERSION): the
// arcs in cycle order (the last arc's peer is the first arc's rank).
struct CycleFacts {
  std::vector<WaitArc> arcs;
  double waited_s = 0;   // WAIT_CYCLE: the longest wait of the cycle
  bool point_to_point = false;  // every arc is a send or receive
  bool receives_only = false;   // every arc is a receive
  bool completed = false;  // ORDER_INVERSION: both ranks completed all four calls
};

// What a finding's words are made from, by kind. None: a finding read back from the
// wire, which carries its words.
using Evidence = std::variant<std::monostate, DivergenceFacts, StallFacts, P2pFacts, CycleFacts>;

// A stall that later resolved: the late ranks arrived (NOT_JOINED), the collective
// completed (TRANSPORT_STALL), creation returned (COMM_INIT_STALL). A straggler, not a
// hang: kept in the report, out of the verdict. Divergences and RANK_LOST never resolve.
struct StallResolution {
  int64_t resolved_ns = 0;      // CLOCK_REALTIME of the record that ended the wait
  double resolved_after_s = 0;  // detection -> resolution (report.json `resolved_after_s`)
  double lag_s = 0;             // the whole wait: first bad record -> resolution
  bool operator==(const StallResolution&) const = default;
};

struct Finding {
  FindingKind kind = FindingKind::kPathDivergence;
  // False when the evidence fits other kinds too: `kind` is the literal reading (what the
  // differing calls show), `other_readings` the rest; the summary gives each with its fix.
  bool decided = true;
  std::vector<FindingKind> other_readings;
  uint64_t comm_id = 0;
  int32_t comm_size = 0;               // ranks of the communicator
  uint64_t seq = 0;                    // the first bad collective (p2p: per-peer seq)
  std::vector<RankClass> rank_classes; // divergences: largest class first
  std::vector<int32_t> lagging_ranks;  // stalls: ranks that have not arrived / are lost
  std::vector<std::string> regions;    // NVTX regions involved
  std::vector<ClassCallPath> call_paths;     // per rank class, its call's Python call path
  std::optional<BranchPoint> branch_point;   // where the classes' code parted
  std::optional<BranchPoint> first_parted;   // their lines' first difference, when above it
  double detect_latency_s = 0;         // first bad record -> finding
  Evidence evidence;                   // what the words are made from, per kind
  // Words (finding_text.h), made from the fields above.
  std::string headline;                // one line: kind, comm, seq, ranks
  std::string brief;                   // the headline without its kind
  std::string summary;                 // one paragraph: what, likely cause, fix
  int64_t first_bad_ns = 0;            // CLOCK_REALTIME of the first bad record
  int64_t found_ns = 0;                // CLOCK_REALTIME when the analyzer could tell
  std::vector<ClassContext> context;   // the aligned sequences around the divergence
  // Stalls: how each rank the finding names is doing (state, CPU, heartbeat, its end).
  std::vector<ProcessReport> processes;
  // Stalls: where the processes it names were, from their stacks taken at the finding.
  std::optional<FindingStacks> stacks;
  // Set once the stall resolved (the analyzer rewords the finding then, in place).
  std::optional<StallResolution> resolution;
  // Ranks it names whose streams the collector refused: it cannot tell what they did.
  std::vector<RefusedStream> refused_streams;
};

// "comm 3f2a9c01" (the first 8 hex digits).
std::string CommText(uint64_t comm_id);

// A communicator's collectives replayed from CUDA graphs (ring::kFlagReplay) are aligned
// apart from its host calls, as a communicator of their own: its id keeps the first eight
// hex digits (CommText names it "comm 3f2a9c01 (CUDA graph replays)") and marks the rest.
uint64_t ReplayLaneOf(uint64_t comm_id);
bool IsReplayLane(uint64_t comm_id);

}  // namespace collwatch::analyzer

#endif  // COLLWATCH_ANALYZER_FINDING_H_
