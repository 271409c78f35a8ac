// Wait-for cycles across communicators and point-to-point pairs (WAIT_CYCLE), and order
// inversions that have not hung (ORDER_INVERSION).
//
// The model (as MUST's deadlock detection for MPI): each process is held at its oldest
// call not completed, whether its host thread blocks there (the CPU backend, a blocking
// wait) or its GPU runs kernels in issue order (one hardware queue, or NCCL kernels that
// cannot run side by side). There it waits for every rank of that collective that is
// elsewhere (all-of arcs: not yet in it, or in it with an older call ahead of it on its
// own queue), or for the peer of its send or receive (one arc). A cycle of such arcs
// resolves only if the queues are not one: a deadlock, or on GPUs that run the two
// communicators' kernels side by side, a wait that should not last past the threshold.
#include <algorithm>
#include <map>
#include <unordered_map>

#include "analyzer/analyzer.h"
#include "analyzer/finding_evidence.h"
#include "analyzer/liveness.h"

namespace collwatch::analyzer {
namespace {

// The oldest call of `process` not completed: a collective or a send or receive outside
// CUDA graphs (captured calls run only when replayed). kNoCall: none.
uint32_t OldestOpenCall(const Process& process) {
  uint32_t oldest = kNoCall;
  auto consider = [&](uint32_t index) {
    if (index >= oldest || !process.calls.Holds(index)) return;
    const Call& call = process.calls[index];
    // A CUDA graph's replays share their host calls' communicator: in NCCL they are one
    // queue with them, apart only in the analysis (job_model.h), so a replay held up is a
    // divergence on that one communicator, never a cycle between two.
    if (call.completed() || (call.flags & (ring::kFlagCaptured | ring::kFlagReplay)) != 0) return;
    if (!ring::IsCollective(call.fn) && !ring::IsP2p(call.fn)) return;
    oldest = index;
  };
  process.pending.ForEach(consider);
  process.pending_groups.ForEachMember(consider);
  return oldest;
}

// The job rank (RANK) of the process behind `comm_rank`, or that rank where none is known.
int32_t JobRankOf(const JobModel& model, ProcessId process, int32_t comm_rank) {
  const int32_t global = model.process(process).info.global_rank;
  return global >= 0 ? global : comm_rank;
}

// The rank `process` is on communicator `comm` (-1: not a member).
int32_t RankOn(const Process& process, CommIndex comm) {
  for (const auto& [member_of, rank] : process.memberships) {
    if (member_of == comm) return rank;
  }
  return -1;
}

// The peer's side of a send or receive: its call with the opposite direction, this rank
// as its peer and the same per-peer sequence number (kNoCall: not posted yet). Only its
// latest calls are searched: the side a stuck call waits for is among them.
uint32_t MatchingP2pCall(const Process& peer_process, const CommRank& peer, const Call& call) {
  constexpr size_t kSearched = 512;
  const ring::ApiFn wanted = call.fn == ring::ApiFn::kSend ? ring::ApiFn::kRecv : ring::ApiFn::kSend;
  const size_t end = peer.p2p.size();
  const size_t begin = std::max(peer.p2p.first(), end > kSearched ? end - kSearched : 0);
  for (size_t i = end; i-- > begin;) {
    const uint32_t index = peer.p2p[i];
    if (!peer_process.calls.Holds(index)) continue;
    const Call& other = peer_process.calls[index];
    if (other.fn == wanted && other.root_or_peer == call.rank && other.seq == call.seq) return index;
  }
  return kNoCall;
}

}  // namespace

uint32_t Analyzer::HeldAt(ProcessId process, WaitSearch& search) const {
  auto [it, inserted] = search.held.try_emplace(process, kNoCall);
  if (inserted) it->second = OldestOpenCall(model_.process(process));
  return it->second;
}

std::vector<Analyzer::WaitEdge> Analyzer::WaitsOf(ProcessId process, uint32_t held_at, WaitSearch& search) const {
  const Call& call = model_.process(process).calls[held_at];
  if (!ring::IsCollective(call.fn)) return PeersElsewhere(call, process, search);
  // Every process held at one collective waits for the same ranks: found once per
  // collective, so that a stall of thousands of ranks costs one pass over them.
  const auto key = std::make_pair(call.comm, call.seq);
  auto cached = search.collective_waits.find(key);
  if (cached == search.collective_waits.end()) {
    cached = search.collective_waits.emplace(key, PeersElsewhere(call, process, search)).first;
  }
  std::vector<WaitEdge> edges;
  for (const WaitEdge& edge : cached->second) {
    if (edge.peer != process) edges.push_back(edge);
  }
  return edges;
}

std::vector<Analyzer::WaitEdge> Analyzer::PeersElsewhere(const Call& call, ProcessId process,
                                                         WaitSearch& search) const {
  std::vector<WaitEdge> edges;
  const Comm* on = model_.CommOf(call);
  if (on == nullptr || progress_[call.comm].diverged) return edges;
  const Comm& comm = *on;
  if (call.rank < 0 || static_cast<size_t>(call.rank) >= comm.ranks.size()) return edges;
  auto wait_for = [&](int32_t rank, uint32_t peer_call) {
    const CommRank& peer = comm.ranks[static_cast<size_t>(rank)];
    if (!peer.present) return;
    const Process& peer_process = model_.process(peer.process);
    if (peer_call != kNoCall && peer_process.calls.Holds(peer_call) && peer_process.calls[peer_call].completed()) return;
    const uint32_t peer_held = HeldAt(peer.process, search);
    if (peer_held == kNoCall || peer_held == peer_call) return;  // running, or in this very call
    edges.push_back(WaitEdge{peer.process, rank, peer_call != kNoCall, peer_held});
  };
  if (ring::IsP2p(call.fn)) {
    const int32_t peer = call.root_or_peer;
    if (peer < 0 || static_cast<size_t>(peer) >= comm.ranks.size() || !comm.ranks[static_cast<size_t>(peer)].present) {
      return edges;
    }
    const CommRank& entry = comm.ranks[static_cast<size_t>(peer)];
    if (entry.process != process) wait_for(peer, MatchingP2pCall(model_.process(entry.process), entry, call));
    return edges;
  }
  for (int32_t rank = 0; rank < static_cast<int32_t>(comm.ranks.size()); ++rank) {
    if (rank == call.rank) continue;
    const CommRank& entry = comm.ranks[static_cast<size_t>(rank)];
    if (!entry.present) continue;
    const bool entered = entry.progress.entered() >= call.seq;
    uint32_t peer_call = kNoCall;
    if (entered) {
      if (call.seq - 1 < entry.collectives.first() || call.seq - 1 >= entry.collectives.size()) continue;
      peer_call = entry.collectives[call.seq - 1];
      if (peer_call == kNoCall) continue;
    }
    wait_for(rank, peer_call);
  }
  return edges;
}

void Analyzer::CheckWaitCycles(const std::vector<std::optional<Frontier>>& frontiers, int64_t now_ns, bool final_pass,
                               std::vector<Finding>* out) {
  // Where to start: the waiting ranks of every stall past its threshold, and the posted
  // side of every send or receive whose peer has not posted past it.
  std::vector<ProcessId> starts;
  const std::vector<Comm>& comms = model_.comms();
  for (size_t i = 0; i < comms.size() && i < frontiers.size(); ++i) {
    const std::optional<Frontier>& frontier = frontiers[i];
    if (!frontier || progress_[i].diverged || frontier->seq <= progress_[i].stall_reported_seq) continue;
    const int64_t since = frontier->lagging.empty() ? frontier->last_enter_ns : frontier->first_enter_ns;
    if (frontier->lagging.empty() && frontier->sample->completed()) continue;
    if (Seconds(now_ns - since) < frontier->threshold_s) continue;
    for (int32_t rank : frontier->entered) starts.push_back(comms[i].ranks[static_cast<size_t>(rank)].process);
  }
  auto start_at_p2p = [&](ProcessId process, uint32_t index) {
    const Call& call = model_.call(process, index);
    if (call.completed() || Seconds(now_ns - call.enter_ns) < StallThresholdS(comms[call.comm], CallBytes(call))) return;
    if (!progress_[call.comm].diverged) starts.push_back(process);
  };
  for (const auto& [key, side] : unpaired_p2p_) start_at_p2p(side.process, side.call);
  // Sends and receives paired but not completed (on GPUs both sides are enqueued at once).
  std::erase_if(open_p2p_, [&](const P2pSide& side) {
    const Process& process = model_.process(side.process);
    return !process.calls.Holds(side.call) || process.calls[side.call].completed();
  });
  for (const P2pSide& side : open_p2p_) start_at_p2p(side.process, side.call);
  if (starts.empty()) return;

  // Depth-first search from each start for a cycle, each process expanded once.
  constexpr size_t kMaxVisited = 1 << 14;
  WaitSearch search;
  std::unordered_map<ProcessId, int> state;  // 1: on the path, 2: done
  struct Step {
    ProcessId process;
    uint32_t held_at;
    std::vector<WaitEdge> edges;
    size_t next = 0;
  };
  for (ProcessId start : starts) {
    if (state.count(start) != 0) continue;
    std::vector<Step> path;
    auto push = [&](ProcessId process) {
      const uint32_t held_at = HeldAt(process, search);
      state[process] = 1;
      path.push_back(Step{process, held_at, {}, 0});
      if (held_at != kNoCall) path.back().edges = WaitsOf(process, held_at, search);
    };
    push(start);
    while (!path.empty() && state.size() < kMaxVisited) {
      Step& top = path.back();
      if (top.next == top.edges.size()) {
        state[top.process] = 2;
        path.pop_back();
        continue;
      }
      const WaitEdge edge = top.edges[top.next++];
      const auto seen = state.find(edge.peer);
      if (seen == state.end()) {
        push(edge.peer);
        continue;
      }
      if (seen->second != 1) continue;
      // A cycle: the path from the peer back to here, each step with the edge it took.
      std::vector<CycleStep> cycle;
      size_t from = path.size();
      while (from > 0 && path[from - 1].process != edge.peer) --from;
      for (size_t i = from - 1; i + 1 < path.size(); ++i) {
        cycle.push_back(CycleStep{path[i].process, path[i].held_at, path[i].edges[path[i].next - 1]});
      }
      cycle.push_back(CycleStep{path.back().process, path.back().held_at, edge});
      if (ReportWaitCycle(cycle, now_ns, final_pass, out)) return;
    }
  }
}

bool Analyzer::ReportWaitCycle(std::vector<CycleStep> cycle, int64_t now_ns, bool final_pass,
                               std::vector<Finding>* out) {
  // Only a cycle one of whose waits passed its threshold: in a healthy job two queues may
  // wait on each other for a moment (kernels of two communicators in flight at once).
  double longest_s = 0;
  bool past_threshold = false;
  bool point_to_point = true;
  bool receives_only = true;
  int64_t closed_ns = 0;
  for (const CycleStep& step : cycle) {
    const Call& call = model_.call(step.process, step.held_at);
    const double waited = Seconds(now_ns - call.enter_ns);
    longest_s = std::max(longest_s, waited);
    past_threshold = past_threshold || waited >= StallThresholdS(model_.comms()[call.comm], CallBytes(call));
    point_to_point = point_to_point && ring::IsP2p(call.fn);
    receives_only = receives_only && call.fn == ring::ApiFn::kRecv;
    closed_ns = std::max(closed_ns, call.enter_ns);
  }
  if (!past_threshold) return false;
  // Told from the lowest job rank on, so that the same cycle reads the same every time.
  auto job_rank = [&](const CycleStep& step) {
    return JobRankOf(model_, step.process, model_.call(step.process, step.held_at).rank);
  };
  std::rotate(cycle.begin(),
              std::min_element(cycle.begin(), cycle.end(),
                               [&](const CycleStep& a, const CycleStep& b) { return job_rank(a) < job_rank(b); }),
              cycle.end());

  CycleFacts facts;
  facts.waited_s = longest_s;
  facts.point_to_point = point_to_point;
  facts.receives_only = receives_only;
  Finding finding;
  finding.kind = FindingKind::kWaitCycle;
  // A peer not yet in the call it is waited for in may be held elsewhere, or may never
  // issue it (it took another path): the records cannot tell, so both readings are given.
  for (const CycleStep& step : cycle) {
    if (!step.edge.peer_entered) finding.decided = false;
  }
  if (!finding.decided) finding.other_readings = {FindingKind::kNotJoined};
  std::vector<const Call*> calls;
  for (const CycleStep& step : cycle) {
    const Call& call = model_.call(step.process, step.held_at);
    const Call& peer_call = model_.call(step.edge.peer, step.edge.peer_held_at);
    calls.push_back(&call);
    WaitArc arc;
    arc.rank = JobRankOf(model_, step.process, call.rank);
    arc.comm_rank = call.rank;
    arc.comm_id = model_.comms()[call.comm].id;
    arc.call = FactsOf(model_, call);
    arc.call_returned = call.returned();
    arc.peer = JobRankOf(model_, step.edge.peer, step.edge.peer_comm_rank);
    arc.peer_comm_rank = step.edge.peer_comm_rank;
    arc.peer_entered = step.edge.peer_entered;
    arc.peer_comm_id = model_.comms()[peer_call.comm].id;
    arc.peer_call = FactsOf(model_, peer_call);
    arc.process = DescribeProcess(model_, step.process, call.rank, now_ns);
    if (ring::IsP2p(call.fn)) {
      const ring::ApiFn toward = call.fn == ring::ApiFn::kSend ? ring::ApiFn::kRecv : ring::ApiFn::kSend;
      const P2pChannel channel = P2pChannelOf(model_, model_.comms()[call.comm], call.rank, call.root_or_peer, toward);
      arc.peer_posted = channel.peer_posted;
      arc.rhythm = RhythmOf(channel.is_send);
    }
    finding.call_paths.push_back({{arc.rank}, arc.call.call_path, arc.call.call_path_inferred});
    if (arc.process) finding.processes.push_back(*arc.process);
    facts.arcs.push_back(std::move(arc));
  }
  const Call& first = *calls.front();
  finding.comm_id = model_.comms()[first.comm].id;
  finding.comm_size = model_.comms()[first.comm].nranks;
  finding.seq = first.seq;
  finding.regions = RegionsOf(model_, calls);
  finding.first_bad_ns = closed_ns;
  finding.found_ns =
      final_pass ? closed_ns + static_cast<int64_t>(options_.stall_after_s * kNsPerS) : now_ns;
  finding.evidence = std::move(facts);
  // Every communicator of the cycle is explained: its stalls are this finding's echo.
  for (const Call* call : calls) {
    progress_[call->comm].diverged = true;
    progress_[call->comm].stall_reported_seq = std::max(progress_[call->comm].stall_reported_seq, call->seq);
  }
  Emit(std::move(finding), out);
  return true;
}

void Analyzer::ObserveOrder(bool forget_behind, std::optional<ProcessId> only,
                            const ListedOrder* listed) {
  for (const OrderInversion& seen : comm_order_.Observe(model_, forget_behind, only, listed)) {
    OpenInversion open{seen};
    // Read now: bounded history may drop the calls once they complete and agree.
    open.first_x = CallOf(seen.first, seen.comm_x, seen.seq_x);
    open.first_c = CallOf(seen.first, seen.comm_c, seen.seq_c);
    open.second_c = CallOf(seen.second, seen.comm_c, seen.seq_c);
    open_inversions_.push_back(std::move(open));
  }
}

void Analyzer::CheckOrderInversions(int64_t now_ns, bool final_pass, std::vector<Finding>* out) {
  ObserveOrder(/*forget_behind=*/true);
  auto done = [&](ProcessId process, CommIndex comm, uint64_t seq) {
    const int32_t rank = RankOn(model_.process(process), comm);
    return rank >= 0 && model_.comms()[comm].ranks[static_cast<size_t>(rank)].progress.completed() >= seq;
  };
  for (auto it = open_inversions_.begin(); it != open_inversions_.end();) {
    const OrderInversion& which = it->which;
    if (!it->second_x) it->second_x = CallOf(which.second, which.comm_x, which.seq_x);
    // A cycle or a divergence on either communicator tells what happened there.
    if (progress_[which.comm_x].diverged || progress_[which.comm_c].diverged) {
      it = open_inversions_.erase(it);
      continue;
    }
    const bool got_through = done(which.first, which.comm_x, which.seq_x) && done(which.first, which.comm_c, which.seq_c) &&
                             done(which.second, which.comm_x, which.seq_x) &&
                             done(which.second, which.comm_c, which.seq_c);
    if (!got_through && !final_pass) {
      ++it;
      continue;
    }
    ReportOrderInversion(*it, got_through, now_ns, final_pass, out);
    it = open_inversions_.erase(it);
  }
}

std::optional<CallFacts> Analyzer::CallOf(ProcessId process, CommIndex comm, uint64_t seq) const {
  const int32_t rank = RankOn(model_.process(process), comm);
  if (rank < 0) return std::nullopt;
  const Call* call = model_.Collective(model_.comms()[comm], rank, seq);
  if (call == nullptr) return std::nullopt;
  return FactsOf(model_, *call);
}

void Analyzer::ReportOrderInversion(const OpenInversion& open, bool got_through, int64_t now_ns, bool final_pass,
                                    std::vector<Finding>* out) {
  const OrderInversion& which = open.which;
  const Comm& comm_x = model_.comms()[which.comm_x];
  const Comm& comm_c = model_.comms()[which.comm_c];
  const int32_t first_on_x = RankOn(model_.process(which.first), which.comm_x);
  const int32_t first_on_c = RankOn(model_.process(which.first), which.comm_c);
  const int32_t second_on_x = RankOn(model_.process(which.second), which.comm_x);
  const int32_t second_on_c = RankOn(model_.process(which.second), which.comm_c);
  // Each rank "would wait" in the collective it issued first for the other, which issued
  // the other one first: the cycle one queue per GPU would close.
  WaitArc first;
  first.rank = JobRankOf(model_, which.first, first_on_x);
  first.comm_rank = first_on_x;
  first.comm_id = comm_x.id;
  if (open.first_x) first.call = *open.first_x;
  first.then_call = open.first_c;
  first.peer = JobRankOf(model_, which.second, second_on_x);
  first.peer_comm_rank = second_on_x;
  first.peer_comm_id = comm_c.id;
  first.peer_call = open.second_c;
  first.process = DescribeProcess(model_, which.first, first_on_x, now_ns);
  WaitArc second;
  second.rank = first.peer;
  second.comm_rank = second_on_c;
  second.comm_id = comm_c.id;
  if (open.second_c) second.call = *open.second_c;
  second.then_call = open.second_x;
  second.peer = first.rank;
  second.peer_comm_rank = first_on_c;
  second.peer_comm_id = comm_x.id;
  second.peer_call = open.first_x;
  second.process = DescribeProcess(model_, which.second, second_on_c, now_ns);

  Finding finding;
  finding.kind = FindingKind::kOrderInversion;
  finding.comm_id = comm_x.id;
  finding.comm_size = comm_x.nranks;
  finding.seq = which.seq_x;
  std::vector<CallFacts> calls;
  for (const std::optional<CallFacts>& call : {open.first_x, open.first_c, open.second_c, open.second_x}) {
    if (call) calls.push_back(*call);
  }
  finding.regions = RegionsOf(calls);
  for (const WaitArc* arc : {&first, &second}) {
    finding.call_paths.push_back({{arc->rank}, arc->call.call_path, arc->call.call_path_inferred});
    if (arc->process) finding.processes.push_back(*arc->process);
  }
  // The first bad record: the second rank's call that showed the other order.
  const Call* shown = model_.Collective(comm_c, second_on_c, which.seq_c);
  finding.first_bad_ns = shown != nullptr ? shown->enter_ns : now_ns;
  finding.found_ns = final_pass ? finding.first_bad_ns : now_ns;
  CycleFacts facts;
  facts.arcs = {std::move(first), std::move(second)};
  facts.completed = got_through;
  finding.evidence = std::move(facts);
  Emit(std::move(finding), out);
}

}  // namespace collwatch::analyzer
