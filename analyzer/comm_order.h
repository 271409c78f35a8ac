// The order in which each process issues its collectives across communicators, compared
// between processes that share two communicators: one that issued communicator X's
// collective before communicator C's while another issued C's first is an order
// inversion, a deadlock once the two wait on one queue (DESIGN: wait-for cycles). Only
// program order counts, never time: the number of X collectives a process had issued when
// it issued C's collective `s` is the same on every rank of a program that keeps one order.
// Threading: single-threaded, as the analyzer.
#ifndef COLLWATCH_ANALYZER_COMM_ORDER_H_
#define COLLWATCH_ANALYZER_COMM_ORDER_H_

#include <cstdint>
#include <optional>
#include <set>
#include <unordered_map>
#include <utility>
#include <vector>

#include "analyzer/job_model.h"
#include "analyzer/windowed_log.h"

namespace collwatch::analyzer {

// Two processes that issued collective `seq_x` of `comm_x` and `seq_c` of `comm_c` in
// opposite orders: `first` issued the X collective before the C one, `second` the C one
// before the X one.
struct OrderInversion {
  ProcessId first = 0;
  ProcessId second = 0;
  CommIndex comm_x = 0;
  uint64_t seq_x = 0;
  CommIndex comm_c = 0;
  uint64_t seq_c = 0;
};

class CommOrderTracker {
 public:
  // Reads the collectives `model` added since the last call. Returns the inversions first
  // seen now: one per pair of communicators for the job's life. `forget_behind`: drop the
  // references far behind each communicator's newest collective; post-mortem, while the
  // traces are read one after another, they are kept for the processes still to come.
  // `only`: the one process with calls not read yet (post-mortem: each is read once it is
  // in); else every process is looked at. `listed`: with `only`, that process's collectives
  // as JobModel::FoldApart listed them, read in place of its calls (some may be gone).
  std::vector<OrderInversion> Observe(const JobModel& model, bool forget_behind = true,
                                      std::optional<ProcessId> only = std::nullopt,
                                      const ListedOrder* listed = nullptr);

 private:
  // A process's latest collective on one of its communicators.
  struct Latest {
    CommIndex comm = 0;
    uint64_t seq = 0;
    uint64_t group_id = 0;
  };
  // The first process seen issuing collective `seq` of a communicator C, and how many of
  // another communicator X's collectives (their newest seq) it had issued before it.
  static constexpr ProcessId kNoProcess = UINT32_MAX;
  struct Reference {
    ProcessId process = kNoProcess;  // none seen yet
    uint64_t other_seq = 0;
  };
  // The references of one (C, X) pair, by C's sequence number: a window, as the checks
  // need only the recent ones, and indexing it costs far less than a tree of every
  // (C, seq, X) did (a fifth of the analyzer's time with 16 communicators beside the world).
  using PairReferences = WindowedLog<Reference>;
  struct ProcessOrder {
    size_t next_call = 0;
    std::vector<Latest> latest;
    // (C << 32 | X) -> index into pairs_, for the pairs of its communicators.
    std::vector<std::pair<uint64_t, size_t>> pairs;
  };

  // How far `call` takes its communicator and its process there (ObserveCollective's end).
  void NoteLatest(const OrderedCollective& call, ProcessOrder& order, std::vector<CommIndex>* advanced);
  // One placed collective `call` of process `p`, in its call order.
  void ObserveCollective(ProcessId p, const Process& process, bool comparable, const OrderedCollective& call,
                         ProcessOrder& order, std::vector<OrderInversion>* found, std::vector<CommIndex>* advanced);
  // `listed` read a pair at a time, where that says what reading its collectives one by one
  // would (ListedOrder::by_pairs; with pairs to compare, nothing seen of process `p` yet) and
  // no pair disagrees with another process's: returns false, having changed nothing, where not.
  bool ObservePairs(ProcessId p, const ListedOrder& listed, ProcessOrder& order, std::vector<CommIndex>* advanced);
  // The references of (comm, other) for `order`'s process, made on first use.
  PairReferences& PairOf(ProcessOrder& order, CommIndex comm, CommIndex other);
  void Forget(CommIndex comm);

  // References further behind a communicator's newest collective than this are dropped:
  // ranks of one program stay much closer than this on every communicator (a rank further
  // behind is compared with no one there).
  static constexpr uint64_t kReferenceWindow = 1024;
  // A pair's window starts this far below the first collective seen on it: histories cut
  // at slightly different points (Flight Recorder dumps) still compare where they overlap.
  static constexpr uint64_t kLateStartMargin = 64;

  std::vector<ProcessOrder> processes_;
  std::vector<PairReferences> pairs_;
  std::unordered_map<uint64_t, size_t> pair_index_;  // (C << 32 | X) -> index into pairs_
  std::vector<std::vector<size_t>> pairs_of_comm_;   // by C: indexes into pairs_
  std::vector<uint64_t> newest_seq_;  // by communicator
  std::set<std::pair<CommIndex, CommIndex>> reported_;  // (lower, higher) index
};

}  // namespace collwatch::analyzer

#endif  // COLLWATCH_ANALYZER_COMM_ORDER_H_
