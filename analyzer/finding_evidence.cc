// Evidence read off the model. Threading: see finding_evidence.h.
#include "analyzer/finding_evidence.h"

#include <string>

#include "analyzer/liveness.h"
#include "analyzer/process_ranks.h"

namespace collwatch::analyzer {
namespace {

bool SampledAs(const Process& process, ProcessState state) {
  return process.sample.sampled_ns != 0 && process.sample.state == state;
}

}  // namespace

double CallBytes(const Call& call) { return static_cast<double>(call.count) * DtypeBytes(call.dtype); }

CallFacts FactsOf(const JobModel& model, const Call& call) {
  CallFacts facts;
  facts.seq = call.seq;
  facts.fn = call.fn;
  facts.count = call.count;
  facts.dtype = call.dtype;
  facts.redop = call.redop;
  facts.root_or_peer = call.root_or_peer;
  if (call.region != 0) facts.region = std::string(model.RegionName(call.region));
  if (call.region_damaged) facts.region = std::string(kDamagedRegionText);
  if (call.call_path != 0) facts.call_path = model.call_path(call.call_path);
  facts.call_path_inferred = call.call_path_inferred;
  return facts;
}

void AddCallPath(std::vector<int32_t> ranks, const CallFacts& call, Finding* finding) {
  if (call.call_path.frames.empty()) return;
  finding->call_paths.push_back({std::move(ranks), call.call_path, call.call_path_inferred});
}

std::vector<CallFacts> FactsOf(const JobModel& model, std::span<const Call* const> calls) {
  std::vector<CallFacts> facts;
  facts.reserve(calls.size());
  for (const Call* call : calls) facts.push_back(FactsOf(model, *call));
  return facts;
}

std::vector<std::string> RegionsOf(const JobModel& model, std::span<const Call* const> calls) {
  return RegionsOf(FactsOf(model, calls));
}

StalledRank StalledRankOf(const JobModel& model, const Comm& comm, int32_t rank, std::optional<ProcessId> process_id,
                          int64_t now_ns) {
  StalledRank stalled;
  stalled.rank = rank;
  stalled.place = JobPlaceOf(model, comm, {rank});
  const CommRank& entry = comm.ranks[static_cast<size_t>(rank)];
  stalled.reported = entry.present;
  stalled.entered_seq = entry.present ? entry.progress.entered() : 0;
  if (!process_id) return stalled;
  const Process& process = model.process(*process_id);
  // The process ended, or stopped reporting with nothing to say it is still there
  // (process/process_info.h has the one rule).
  stalled.lost = IsLost(LivenessOf(process.status, process.sample));
  stalled.status = process.status;
  if (SampledAs(process, ProcessState::kStopped)) {
    stalled.trouble = ProcessTrouble::kStopped;
  } else if (SampledAs(process, ProcessState::kDiskWait)) {
    stalled.trouble = ProcessTrouble::kDiskWait;
    stalled.wait_channel = process.sample.wait_channel;
  } else if (stalled.lost) {
    stalled.trouble = ProcessTrouble::kEnded;
  }
  stalled.process = DescribeProcess(model, *process_id, rank, now_ns);
  stalled.shares_process = RanksOfProcess(model, *process_id).size() > 1;
  if (!process.calls.empty()) {
    const Call& call = process.calls.back();
    RecentCall& last = stalled.last_call.emplace();
    last.call = FactsOf(model, call);
    last.rank = call.rank;
    const Comm* on = model.CommOf(call);
    last.comm_id = on != nullptr ? on->id : 0;  // 0: on none
    last.ago_s = Seconds(now_ns - call.enter_ns);
    last.returned = call.returned();
    last.completed = call.completed();
  }
  return stalled;
}

P2pChannel P2pChannelOf(const JobModel& model, const Comm& comm, int32_t rank, int32_t peer,
                        ring::ApiFn toward_rank_fn) {
  P2pChannel channel;
  const CommRank& own = comm.ranks[static_cast<size_t>(rank)];
  channel.whole = own.p2p.first() == 0;
  for (size_t i = own.p2p.first(); i < own.p2p.size(); ++i) {
    const Call& call = model.call(own.process, own.p2p[i]);
    if (call.root_or_peer != peer) continue;
    channel.is_send.push_back(call.fn == ring::ApiFn::kSend);
    channel.calls.push_back(own.p2p[i]);
  }
  if (peer < 0 || static_cast<size_t>(peer) >= comm.ranks.size() || !comm.ranks[static_cast<size_t>(peer)].present) {
    return channel;
  }
  const CommRank& other = comm.ranks[static_cast<size_t>(peer)];
  for (size_t i = other.p2p.size(); i-- > other.p2p.first();) {
    const Call& call = model.call(other.process, other.p2p[i]);
    if (call.fn == toward_rank_fn && call.root_or_peer == rank) {
      channel.peer_posted = call.seq;
      break;
    }
  }
  return channel;
}

}  // namespace collwatch::analyzer
