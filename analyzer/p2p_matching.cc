// Point-to-point matching: sends and receives paired by (communicator, sender, receiver,
// per-peer sequence); a size or type difference is a SIGNATURE_MISMATCH, a side whose
// peer never posted its match past the threshold is NOT_JOINED.
#include "analyzer/analyzer.h"
#include "analyzer/finding_evidence.h"

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
      const uint32_t peer_index = other->second.call;
      // Bounded for processes whose completions never come (a dead rank's calls).
      constexpr size_t kMaxOpenP2p = 1 << 16;
      if ((!call.completed() || !peer_call.completed()) && open_p2p_.size() < kMaxOpenP2p) {
        open_p2p_.push_back(other->second);
        open_p2p_.push_back(P2pSide{entry.process, entry.p2p[cursor]});
      }
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
      finding.comm_size = comm.nranks;
      finding.seq = call.seq;
      finding.rank_classes = {RankClass{{key.sender}, ""}, RankClass{{key.receiver}, ""}};
      finding.regions = RegionsOf(model_, std::vector<const Call*>{&sender, &receiver});
      finding.first_bad_ns = std::min(sender.enter_ns, receiver.enter_ns);
      finding.found_ns = final_pass ? std::max(sender.enter_ns, receiver.enter_ns) : now_ns;
      const CallFacts send_facts = FactsOf(model_, sender);
      const CallFacts recv_facts = FactsOf(model_, receiver);
      // Where each side's code posted its call (a pipeline schedule's line, say).
      AddCallPath({key.sender}, send_facts, &finding);
      AddCallPath({key.receiver}, recv_facts, &finding);
      P2pFacts facts{key.sender, key.receiver, send_facts, recv_facts, 0};
      // Which microbatch of which step, where the sender's exchange has a rhythm.
      const P2pChannel channel = P2pChannelOf(model_, comm, key.sender, key.receiver, ApiFn::kRecv);
      const uint32_t send_index = send ? entry.p2p[cursor] : peer_index;
      for (size_t i = 0; i < channel.calls.size(); ++i) {
        if (channel.calls[i] != send_index) continue;
        facts.sender_rhythm = RhythmOf(channel.is_send);
        facts.send_place = PlaceInRhythm(facts.sender_rhythm, i);
        facts.rhythm_whole = channel.whole;
      }
      finding.evidence = std::move(facts);
      finding.context = {ClassContext{{key.sender}, {}, {{false, send_facts}}, 0},
                         ClassContext{{key.receiver}, {}, {{false, recv_facts}}, 0}};
      Emit(std::move(finding), out);
    }
  }
}

void Analyzer::CheckP2pStall(const Comm& comm, CommProgress& progress, int64_t now_ns, bool final_pass,
                             std::vector<Finding>* out) {
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
    finding.comm_size = comm.nranks;
    finding.seq = key.seq;
    finding.lagging_ranks = {peer};
    finding.rank_classes = {RankClass{{waiting}, ""}};
    finding.regions = RegionsOf(model_, std::vector<const Call*>{&call});
    finding.first_bad_ns = call.enter_ns;
    finding.found_ns = final_pass ? call.enter_ns + static_cast<int64_t>(options_.stall_after_s * kNsPerS) : now_ns;
    P2pFacts facts{key.sender, key.receiver, std::nullopt, std::nullopt, Seconds(now_ns - call.enter_ns)};
    const CallFacts posted = FactsOf(model_, call);
    AddCallPath({waiting}, posted, &finding);
    (call.fn == ApiFn::kSend ? facts.send : facts.recv) = posted;
    finding.evidence = std::move(facts);
    Emit(std::move(finding), out);
    return;
  }
}

}  // namespace collwatch::analyzer
