// JobModel::Adopt: a process built into a model of its own (JobModel::ForOneProcess) on
// another thread, taken into the job's model. Everything a process's records do to a model
// touches only that process, its communicator ranks and the names it interns, but for three
// things another process may have decided already: its host and pid, the communicator
// ranks it is, and the ends of communicators it never joined. Adopt checks those, then
// renumbers the process's names and communicators.
#include <algorithm>
#include <utility>

#include "analyzer/job_model.h"

namespace collwatch::analyzer {
namespace {

// Whether applying `process` would have set `comm`'s parent: its split or shrink call made a
// rank of it (the parent is written with init_call, JobModel::AddEnter and AddRecord).
bool NamesParent(const Comm& comm, const Process& process) {
  for (const CommRank& rank : comm.ranks) {
    if (!rank.present || rank.init_call == kNoCall) continue;
    if (ring::SplitsFromParent(process.calls[rank.init_call].fn)) return true;
  }
  return false;
}

// Its untainted windows' chains summed from its calls, as the model numbers their regions (a
// link holds the call's region id). A tainted window's is never read; a window folded apart
// (JobModel::FoldApart) holds its class's chain, in the job's numbering.
void SumChains(CommRank& rank, const WindowedLog<Call, 512>& calls) {
  for (uint64_t window = rank.chains.first(); window < rank.chains.size(); ++window) {
    WindowChain& chain = rank.chains[window];
    if (chain.tainted || (window + 1) * kChainWindow <= rank.collectives.first()) continue;
    chain.chain = 0;
    const uint64_t end = std::min((window + 1) * kChainWindow, rank.collectives.size());
    for (uint64_t slot = std::max(window * kChainWindow, rank.collectives.first()); slot < end; ++slot) {
      const uint32_t index = rank.collectives[slot];
      if (index != kNoCall) chain.chain += ChainLink(FingerprintOf(calls[index]), slot + 1);
    }
  }
}

template <typename Id>
bool IsIdentity(const std::vector<Id>& map) {
  for (size_t i = 0; i < map.size(); ++i) {
    if (map[i] != i) return false;
  }
  return true;
}

}  // namespace

JobModel JobModel::ForOneProcess() {
  JobModel model;
  model.one_process_ = true;
  return model;
}

void JobModel::MakeRoomFor(Comm& comm, int32_t rank) {
  if (comm.ranks.empty()) comm.rank_base = rank;
  if (rank < comm.rank_base) {
    comm.ranks.insert(comm.ranks.begin(), static_cast<size_t>(comm.rank_base - rank), CommRank{});
    comm.rank_base = rank;
  }
  if (static_cast<size_t>(rank - comm.rank_base) >= comm.ranks.size()) {
    comm.ranks.resize(static_cast<size_t>(rank - comm.rank_base) + 1);
  }
}

void JobModel::FinishOneProcess(const FoldReferences* references) {
  if (!one_process_ || processes_.size() != 1) return;
  if (references != nullptr) FoldApart(*references);
  const Process& process = *processes_.front();
  for (const auto& [comm, rank] : process.memberships) SumChains(*FindRank(comms_[comm], rank), process.calls);
  one_process_finished_ = true;
}

std::optional<ProcessId> JobModel::Adopt(JobModel&& alone) {
  if (!alone.one_process_ || alone.processes_.size() != 1 || alone.ends_of_unknown_comms_ != 0) return std::nullopt;
  Process& process = *alone.processes_.front();
  if (FindProcess(process.info.host, process.info.pid)) return std::nullopt;  // AddProcess may take one over
  for (const Comm& from : alone.comms_) {
    const Comm* here = FindComm(from.id);
    if (here == nullptr) continue;
    for (size_t i = 0; i < from.ranks.size(); ++i) {
      const size_t rank = static_cast<size_t>(from.rank_base) + i;
      if (from.ranks[i].present && rank < here->ranks.size() && here->ranks[rank].present) return std::nullopt;
    }
  }

  const auto id = static_cast<ProcessId>(processes_.size());
  // Names in the order `alone` interned them: the order applying the trace here interns them.
  std::vector<RegionId> region_of(alone.region_names_.size(), 0);
  for (size_t i = 1; i < alone.region_names_.size(); ++i) region_of[i] = InternRegion(alone.region_names_[i]);
  std::vector<CallPathId> call_path_of(alone.call_paths_.size(), 0);
  for (size_t i = 1; i < alone.call_paths_.size(); ++i) call_path_of[i] = InternCallPath(alone.call_paths_[i]);
  // Communicators in the order it first named them: the order applying it here makes them.
  std::vector<CommIndex> comm_of(alone.comms_.size(), kNoComm);
  for (size_t c = 0; c < alone.comms_.size(); ++c) {
    Comm& from = alone.comms_[c];
    comm_of[c] = CommFor(from.id, from.nranks);
    Comm& into = comms_[comm_of[c]];
    if (NamesParent(from, process)) into.parent_id = from.parent_id;
    for (size_t i = 0; i < from.ranks.size(); ++i) {
      if (!from.ranks[i].present) continue;
      CommRank& rank = into.ranks[static_cast<size_t>(from.rank_base) + i];
      rank = std::move(from.ranks[i]);
      rank.process = id;
      ++into.ranks_present;
    }
  }

  for (auto& [writer_id, region] : process.regions) region = region_of[region];
  for (auto& [writer_id, call_path] : process.call_paths) call_path = call_path_of[call_path];
  for (auto& [unit, call_path] : process.unit_paths) call_path = call_path_of[call_path];
  for (auto& [comm, rank] : process.memberships) comm = comm_of[comm];
  // Most processes name what the first one named, in its order: nothing to remap then.
  const bool regions_renumbered = !IsIdentity(region_of);
  const bool comms_renumbered = !IsIdentity(comm_of);
  if (comms_renumbered && process.listed_order) {
    ListedOrder& listed = *process.listed_order;
    for (OrderedCollective& latest : listed.latest) latest.comm = comm_of[latest.comm];
    for (OrderedCollective& call : listed.collectives) call.comm = comm_of[call.comm];
    for (PairOrder& pair : listed.pairs) {
      pair.comm = comm_of[pair.comm];
      pair.other = comm_of[pair.other];
    }
  }
  if (regions_renumbered || !IsIdentity(call_path_of) || comms_renumbered) {
    auto renumber = [&](size_t /*index*/, Call& call) {
      if (call.comm != kNoComm) call.comm = comm_of[call.comm];
      call.region = region_of[call.region];
      call.call_path = call_path_of[call.call_path];
    };
    for (size_t i = process.calls.first(); i < process.calls.size(); ++i) renumber(i, process.calls[i]);
    process.calls.ForEachKept(renumber);  // a model folded apart keeps some below its window
  }
  // Summed again where the region ids changed, or first where the model was not finished.
  if (regions_renumbered || !alone.one_process_finished_) {
    for (const auto& [comm, rank] : process.memberships) {
      SumChains(comms_[comm].ranks[static_cast<size_t>(rank)], process.calls);
    }
  }
  unmatched_records_ += alone.unmatched_records_;
  by_host_pid_[{process.info.host, process.info.pid}] = id;
  processes_.push_back(std::move(alone.processes_.front()));
  alone.processes_.clear();
  return id;
}

ProcessBuiltApart BuildProcessApart(ProcessInfo info, ProcessUpdate update, const FoldReferences* references) {
  ProcessBuiltApart built{std::move(info), std::move(update), JobModel::ForOneProcess()};
  built.alone.Apply(built.alone.AddProcess(built.info), built.update);
  built.alone.FinishOneProcess(references);
  return built;
}

absl::StatusOr<ProcessBuiltApart> BuildProcessApartStreamed(ProcessInfo info, const TraceReading& read,
                                                            const FoldReferences* references) {
  ProcessBuiltApart built{std::move(info), {}, JobModel::ForOneProcess(), /*trace_kept=*/false};
  if (absl::Status status = read(built.alone, built.alone.AddProcess(built.info)); !status.ok()) return status;
  built.alone.FinishOneProcess(references);
  return built;
}

std::optional<ProcessId> TakeBuiltProcess(JobModel* model, ProcessBuiltApart built) {
  // A trace not built apart (`alone` empty) is not adopted: applied here.
  if (std::optional<ProcessId> adopted = model->Adopt(std::move(built.alone))) return *adopted;
  if (!built.trace_kept) return std::nullopt;
  const ProcessId process = model->AddProcess(built.info);
  model->Apply(process, built.update);
  return process;
}

}  // namespace collwatch::analyzer
