// Point-to-point matching: sends and receives paired by (communicator, sender, receiver,
// per-peer sequence); a size or type difference is a SIGNATURE_MISMATCH, a side whose
// peer never posted its match past the threshold is NOT_JOINED.
#include "absl/strings/str_format.h"
#include "analyzer/analyzer.h"
#include "analyzer/finding_words.h"

namespace collwatch::analyzer {

using ring::ApiFn;

void Analyzer::CheckP2p(const Comm& comm, CommProgress& progress, int64_t now_ns, bool final_pass,
                        std::vector<Finding>* out) {
  if (progress.p2p_cursor.size() < comm.ranks.size()) progress.p2p_cursor.resize(comm.ranks.size(), 0);
  for (int32_t rank = 0; rank < static_cast<int32_t>(comm.ranks.size()); ++rank) {
    const CommRank& entry = comm.ranks[static_cast<size_t>(rank)];
    size_t& cursor = progress.p2p_cursor[static_cast<size_t>(rank)];
    for (; cursor < entry.p2p.size(); ++cursor) {
      const Call& call = model_.call(entry.process, entry.p2p[cursor]);
      const bool send = call.fn == ApiFn::kSend;
      const P2pKey key{comm.id, send ? rank : call.root_or_peer, send ? call.root_or_peer : rank, call.seq};
      auto other = unpaired_p2p_.find(key);
      if (other == unpaired_p2p_.end()) {
        unpaired_p2p_[key] = P2pSide{entry.process, entry.p2p[cursor]};
        continue;
      }
      const Call& peer_call = model_.call(other->second.process, other->second.call);
      unpaired_p2p_.erase(other);
      if (peer_call.fn == call.fn) continue;  // two sends claiming one slot: not ours to judge
      if (peer_call.count == call.count && peer_call.dtype == call.dtype) continue;
      if (progress.diverged) continue;
      progress.diverged = true;
      const Call& sender = send ? call : peer_call;
      const Call& receiver = send ? peer_call : call;
      Finding finding;
      finding.kind = FindingKind::kSignatureMismatch;
      finding.comm_id = comm.id;
      finding.seq = call.seq;
      finding.rank_classes = {RankClass{{key.sender}, "send"}, RankClass{{key.receiver}, "recv"}};
      finding.regions = RegionsOf(model_, std::vector<const Call*>{&sender, &receiver});
      finding.first_bad_ns = std::min(sender.enter_ns, receiver.enter_ns);
      finding.found_ns = final_pass ? std::max(sender.enter_ns, receiver.enter_ns) : now_ns;
      const double ratio = CallBytes(receiver) > 0 ? CallBytes(sender) / CallBytes(receiver) : 0;
      finding.headline = absl::StrFormat("SIGNATURE_MISMATCH: send %d->%d #%d carries %s, the matching recv expects %s",
                                         key.sender, key.receiver, call.seq, DescribeCall(model_, sender),
                                         DescribeCall(model_, receiver));
      finding.summary = absl::StrFormat(
          "Rank %d's send #%d to rank %d on %s is %s, but rank %d's receive #%d from rank %d is %s (byte "
          "ratio %.2f). NCCL matches point-to-point operations by order only: a size or type mismatch "
          "corrupts the receive buffer or hangs. Both sides must post sends and receives of the same "
          "shape in the same order (pipeline stages: the same micro-batch shapes and dtypes on both "
          "stages).",
          key.sender, call.seq, key.receiver, CommText(comm.id), DescribeCall(model_, sender), key.receiver,
          call.seq, key.sender, DescribeCall(model_, receiver), ratio);
      finding.context = {ClassContext{{key.sender}, {ContextLine(model_, '>', sender)}},
                         ClassContext{{key.receiver}, {ContextLine(model_, '>', receiver)}}};
      Emit(std::move(finding), out);
    }
  }
  // A send or receive waiting far past the threshold whose peer never posted its side.
  if (progress.diverged) return;
  for (auto& [key, side] : unpaired_p2p_) {
    if (key.comm_id != comm.id) continue;
    const Call& call = model_.call(side.process, side.call);
    if (call.completed() || key.seq <= progress.stall_reported_seq) continue;
    if (Seconds(now_ns - call.enter_ns) < StallThresholdS(comm, CallBytes(call))) continue;
    const int32_t waiting = call.fn == ApiFn::kSend ? key.sender : key.receiver;
    const int32_t peer = call.fn == ApiFn::kSend ? key.receiver : key.sender;
    if (peer >= 0 && static_cast<size_t>(peer) < comm.ranks.size() && comm.ranks[static_cast<size_t>(peer)].present &&
        BlockedInDivergedComm(comm.ranks[static_cast<size_t>(peer)].process)) {
      continue;
    }
    progress.stall_reported_seq = std::max(progress.stall_reported_seq, key.seq);
    Finding finding;
    finding.kind = FindingKind::kNotJoined;
    finding.comm_id = comm.id;
    finding.seq = key.seq;
    finding.lagging_ranks = {peer};
    finding.rank_classes = {RankClass{{waiting}, OpName(call.fn) == "send" ? "sending" : "receiving"}};
    finding.regions = RegionsOf(model_, std::vector<const Call*>{&call});
    finding.first_bad_ns = call.enter_ns;
    finding.found_ns = final_pass ? call.enter_ns + static_cast<int64_t>(options_.stall_after_s * kNsPerS) : now_ns;
    finding.headline = absl::StrFormat("NOT_JOINED: rank %d has not posted the %s matching rank %d's %s #%d on %s",
                                       peer, call.fn == ApiFn::kSend ? "recv" : "send", waiting, OpName(call.fn),
                                       key.seq, CommText(comm.id));
    finding.summary = absl::StrFormat(
        "Rank %d posted %s #%d (%s) %.1f s ago and rank %d has not posted its matching %s. Point-to-point "
        "operations pair by order per peer: rank %d is late, skipped this transfer, or posts it in a "
        "different order (a pipeline schedule that differs between stages). Compare the two ranks' p2p "
        "order with `collwatch diff` or `collwatch export --chrome`.",
        waiting, OpName(call.fn), key.seq, DescribeCall(model_, call), Seconds(now_ns - call.enter_ns), peer,
        call.fn == ApiFn::kSend ? "recv" : "send", peer);
    Emit(std::move(finding), out);
    return;
  }
}

}  // namespace collwatch::analyzer
