// The words of WAIT_CYCLE and ORDER_INVERSION findings (finding_words.h), from their arcs.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "analyzer/call_sites.h"
#include "analyzer/finding_words.h"

namespace collwatch::analyzer {
namespace {

// " at VisionTower.forward (model.py:40)": the user's line the call was made from.
std::string AtCode(const CallFacts& call) {
  const CallFrame* frame = InnermostUserFrame(call.call_path);
  return frame == nullptr ? "" : absl::StrCat(" at ", FrameText(*frame));
}

// "all-reduce #3 on comm 3f2a9c01" (a send: "send to rank 1 #3 on comm ..."; p2p
// sequence numbers count per peer).
std::string CallName(const CallFacts& call, uint64_t comm_id) {
  if (ring::IsP2p(call.fn)) {
    return absl::StrFormat("%s %s rank %d #%d on %s", OpName(call.fn), call.fn == ring::ApiFn::kSend ? "to" : "from",
                           call.root_or_peer, call.seq, CommText(comm_id));
  }
  return absl::StrFormat("%s #%d on %s", OpName(call.fn), call.seq, CommText(comm_id));
}

// Rank numbers in the cycle are job ranks; where a communicator numbers them otherwise,
// both.
std::string RankName(int32_t job_rank, int32_t comm_rank) {
  return job_rank == comm_rank || comm_rank < 0 ? absl::StrCat("rank ", job_rank)
                                                : absl::StrFormat("rank %d (rank %d there)", job_rank, comm_rank);
}

// What holds the arc's peer: not in the call yet, or in it behind an older call.
std::string PeerHeldText(const WaitArc& arc) {
  const std::string held = arc.peer_call ? absl::StrCat(CallName(*arc.peer_call, arc.peer_comm_id), AtCode(*arc.peer_call))
                                         : std::string("another call");
  if (ring::IsP2p(arc.call.fn)) {
    return arc.peer_entered
               ? absl::StrCat("has posted the matching ", arc.call.fn == ring::ApiFn::kSend ? "receive" : "send",
                              " behind ", held, ", which its queue runs first")
               : absl::StrCat("has not posted the matching ", arc.call.fn == ring::ApiFn::kSend ? "receive" : "send",
                              ": it is held in ", held);
  }
  return arc.peer_entered ? absl::StrCat("entered it behind ", held, ", which its queue runs first")
                          : absl::StrCat("has not entered it: it is held in ", held);
}

// "rank 1's calls with rank 0 repeated every 8 (4 receives, 4 sends) 2 times, then it left
// that rhythm: 3 receives, 3 sends, 2 receives, the last one waiting" (empty: no rhythm).
std::string RhythmText(const WaitArc& arc) {
  const P2pRhythm& r = arc.rhythm;
  if (r.period.empty()) return "";
  std::string text = absl::StrFormat("rank %d's calls with rank %d repeated every %d (%s) %d times%s", arc.rank,
                                     arc.peer, r.period_calls, RunsText(r.period), r.repetitions,
                                     r.offset == 0 ? "" : absl::StrFormat(" after %d calls of set-up", r.offset));
  if (r.after.empty()) return absl::StrCat(text, ", the last call waiting");
  return absl::StrCat(text, r.broke ? ", then it left that rhythm: " : ", then ", RunsText(r.after),
                      ", the last one waiting");
}

// Both ranks wait to receive: the sends they wait for were never posted. Either each
// receives before it sends, or their programs disagree on how many messages go each way;
// the rhythm of their exchange tells which fits when one side left it and the other kept it.
std::string ReceiveCycleText(const CycleFacts& c) {
  std::vector<std::string> counts, rhythms;
  const WaitArc* left = nullptr;
  const WaitArc* kept = nullptr;
  for (const WaitArc& arc : c.arcs) {
    counts.push_back(absl::StrFormat("rank %d waits for message #%d from rank %d, which has sent %d", arc.rank,
                                     arc.call.seq, arc.peer, arc.peer_posted));
    if (const std::string rhythm = RhythmText(arc); !rhythm.empty()) rhythms.push_back(rhythm);
    if (!arc.rhythm.period.empty()) (arc.rhythm.broke ? left : kept) = &arc;
  }
  std::string text = absl::StrFormat(
      "Neither side sends, so neither receive can complete (%s). Two readings fit: each rank receives before it "
      "sends (fix: post the send with its receive in one group, torch.distributed.batch_isend_irecv or "
      "ncclGroupStart/ncclGroupEnd, or order them by rank parity), or the ranks' programs disagree on how many "
      "messages go each way (fix: make both sides post as many sends as the other posts receives).",
      absl::StrJoin(counts, "; "));
  if (rhythms.empty()) return text;
  absl::StrAppend(&text, " Their exchange had a rhythm: ", absl::StrJoin(rhythms, "; "), ".");
  if (left != nullptr && kept != nullptr && left->rhythm.period_calls == kept->rhythm.period_calls) {
    // "3 where rank 0's stage exchanged 4": the first run after the break, against the same
    // run of the rhythm.
    const P2pRun& was = left->rhythm.period.front();
    const P2pRun& now = left->rhythm.after.front();
    const std::string how_many =
        now.sends == was.sends && now.calls != was.calls
            ? absl::StrFormat("%d microbatches in that step where rank %d's stage exchanged %d", now.calls, kept->rank,
                              was.calls)
            : absl::StrFormat("another number of microbatches in that step than rank %d's stage", kept->rank);
    absl::StrAppend(
        &text,
        absl::StrFormat(
            " Rank %d left the rhythm both ranks kept, and rank %d did not: the second reading fits. In a "
            "pipeline schedule (GPipe, 1F1B) one repetition is one step and each send carries one microbatch's "
            "activations or gradients, so rank %d's stage exchanged %s: it ran another number of "
            "microbatches (a shorter batch, or another microbatch count, on one stage), or skipped a transfer "
            "(for example of an empty microbatch). Fix: run and exchange the same number of microbatches on "
            "every stage in every step (the same batch size and n_microbatches everywhere; drop or pad a short "
            "last batch on all stages alike, and send even an empty microbatch).",
            left->rank, kept->rank, left->rank, how_many));
  }
  return text;
}

}  // namespace

FindingWords WaitCycleWords(const Finding& f, const CycleFacts& c) {
  FindingWords w;
  std::vector<std::string> brief_arcs, arcs;
  bool every_call_returned = true;
  for (size_t i = 0; i < c.arcs.size(); ++i) {
    const WaitArc& arc = c.arcs[i];
    every_call_returned = every_call_returned && arc.call_returned;
    brief_arcs.push_back(absl::StrFormat("%s%s waits in %s for rank %d", i == 0 ? "" : i + 1 == c.arcs.size() ? "and " : "",
                                         RankName(arc.rank, arc.comm_rank), CallName(arc.call, arc.comm_id), arc.peer));
    arcs.push_back(absl::StrFormat("%s is in %s (%s%s) and waits for rank %d, which %s", RankName(arc.rank, arc.comm_rank),
                                   CallName(arc.call, arc.comm_id), DescribeCall(arc.call), AtCode(arc.call), arc.peer,
                                   PeerHeldText(arc)));
  }
  w.brief = absl::StrJoin(brief_arcs, ", ");
  // A peer not in the call it is waited for in: held elsewhere, or never coming.
  std::string undecided;
  if (!f.decided) {
    std::vector<std::string> absent;
    for (const WaitArc& arc : c.arcs) {
      if (!arc.peer_entered) absent.push_back(absl::StrCat("rank ", arc.peer));
    }
    w.brief = absl::StrCat("(undecided: or ", KindsText(f.other_readings), ") ", w.brief);
    undecided = absl::StrFormat(
        " Two readings fit, and the records cannot tell which: %s %s not entered the call %s waited for in. If "
        "the program issues it after the call it is held in, this is the cycle, and the fix below; if it never "
        "does (it took another path), it is a NOT_JOINED of that call, and the fix is to make every rank issue "
        "it. The call paths above show which code each rank was in.",
        absl::StrJoin(absent, " and "), absent.size() == 1 ? "has" : "have", absent.size() == 1 ? "it is" : "they are");
  }
  const std::string queue =
      every_call_returned
          ? "Every call was enqueued and none completed: each GPU ran the kernels in issue order (one hardware "
            "queue, as with CUDA_DEVICE_MAX_CONNECTIONS=1, or kernels that cannot run side by side)."
          : "The ranks' threads are blocked inside these calls.";
  if (c.point_to_point && c.receives_only) {
    w.summary = absl::StrFormat("The ranks wait for each other in a cycle of receives, so none can go on: %s. %s %s Waited %.1f s.",
                                absl::StrJoin(arcs, "; "), ReceiveCycleText(c), queue, c.waited_s);
    return w;
  }
  if (c.point_to_point) {
    w.summary = absl::StrFormat(
        "The ranks wait for each other in a cycle of point-to-point calls, so none can go on: %s. A send waits "
        "for its receive (NCCL's rendezvous, always for large messages), so when every rank of a ring or pair "
        "sends first, no receive is ever posted. %s Waited %.1f s. Fix: post each send with its receive in one "
        "group (torch.distributed.batch_isend_irecv, or ncclGroupStart/ncclGroupEnd around both), or order them "
        "by rank parity: even ranks send first, odd ranks receive first.%s",
        absl::StrJoin(arcs, "; "), queue, c.waited_s, undecided);
    return w;
  }
  w.summary = absl::StrFormat(
      "The ranks wait for each other in a cycle across communicators, so none can go on: %s. Each communicator "
      "on its own agrees: the ranks issued their collectives on these communicators in different orders, and "
      "a rank can go on with one only once the collective ahead of it completes. %s Waited %.1f s. Fix: issue "
      "the process groups' collectives in one global order on every rank (for example the tensor-parallel "
      "all-reduce before the data-parallel one, everywhere)%s.%s",
      absl::StrJoin(arcs, "; "), queue, c.waited_s,
      f.regions.empty() ? "" : absl::StrCat("; the calls are in ", RegionListText(f.regions)), undecided);
  return w;
}

FindingWords OrderInversionWords(const Finding& f, const CycleFacts& c) {
  FindingWords w;
  if (c.arcs.size() != 2) return w;
  const WaitArc& a = c.arcs[0];
  const WaitArc& b = c.arcs[1];
  const std::string x = CallName(a.call, a.comm_id);
  const std::string y = CallName(b.call, b.comm_id);
  w.brief = absl::StrFormat("rank %d issued %s before %s, rank %d the other way round", a.rank, x, y, b.rank);
  auto then_text = [](const WaitArc& arc) {
    return arc.then_call
               ? absl::StrCat(", then ", CallName(*arc.then_call, arc.peer_comm_id), AtCode(*arc.then_call))
               : absl::StrCat(", and had not issued ", arc.peer_call ? CallName(*arc.peer_call, arc.peer_comm_id) : "the other",
                              " yet");
  };
  w.summary = absl::StrFormat(
      "%s issued %s%s first%s; %s issued %s%s first%s. Each communicator on its own agrees, and the ranks %s. "
      "With one hardware queue per GPU "
      "(CUDA_DEVICE_MAX_CONNECTIONS=1, as Megatron-LM sets) or kernels that cannot run at the same time, rank "
      "%d would wait in %s for rank %d while rank %d waits in %s for rank %d: a deadlock. A latent one, like a "
      "lock-order inversion: it hangs the day the timing or the settings change. Fix: issue the process "
      "groups' collectives in one global order on every rank%s.",
      RankName(a.rank, a.comm_rank), x, AtCode(a.call), then_text(a), RankName(b.rank, b.comm_rank), y,
      AtCode(b.call), then_text(b),
      c.completed ? "completed all four calls: the GPUs ran the two communicators' kernels side by side"
                  : "had not completed them when the trace ended",
      a.rank, x, b.rank, b.rank, y,
      a.rank, f.regions.empty() ? "" : absl::StrCat(" (the calls are in ", RegionListText(f.regions), ")"));
  return w;
}

}  // namespace collwatch::analyzer
