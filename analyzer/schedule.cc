// Schedules and their lines (see schedule.h): ops formatted and parsed, interned, and
// read out of a job model per communicator in creation order.
// Threading: pure functions over their arguments; an OpTable is not synchronised.
#include "analyzer/schedule.h"

#include <algorithm>
#include <iterator>
#include <limits>
#include <map>
#include <optional>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "analyzer/finding.h"
#include "analyzer/process_ranks.h"
#include "analyzer/schedule_words.h"
#include "ring/hash.h"

namespace collwatch::analyzer {
namespace {

using ring::ApiFn;
using schedule_internal::Av;
using schedule_internal::Word;

std::string QuoteRegion(std::string_view region) {
  if (region.empty()) return "-";
  std::string out = "\"";
  for (const char ch : region) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (c < 0x20 || c == 0x7f) {
          absl::StrAppendFormat(&out, "\\x%02x", c);
        } else {
          out += ch;
        }
    }
  }
  out += '"';
  return out;
}

ScheduleOp OpOfCall(const JobModel& model, const Call& call, CodeLines lines) {
  ScheduleOp op;
  op.fn = call.fn;
  op.count = call.count;
  op.dtype = call.dtype;
  op.redop = call.redop;
  op.root = call.root_or_peer;
  const bool region_is_code = call.call_path != 0 && call.region != 0 &&
                              call.region == model.CallPathRegion(call.call_path);
  op.region = lines == CodeLines::kShown && region_is_code
                  ? CodeRegionName(model.call_path(call.call_path), CodeLines::kShown)
                  : std::string(model.RegionName(call.region));
  op.region_damaged = call.region_damaged;
  return op;
}

// Another rank's call at `seq` of `comm` that is the same collective as `call` and whose
// region was read: what `call`'s damaged region most likely was (nullptr: none).
const Call* LabelledPeer(const JobModel& model, const Comm& comm, uint64_t seq, const Call& call) {
  for (int32_t rank = 0; rank < static_cast<int32_t>(comm.ranks.size()); ++rank) {
    const Call* peer = model.Collective(comm, rank, seq);
    if (peer != nullptr && !peer->region_damaged && FingerprintOf(*peer).SameSignature(FingerprintOf(call))) {
      return peer;
    }
  }
  return nullptr;
}

}  // namespace

// ---- Ops ------------------------------------------------------------------------------

std::string FormatScheduleOp(const ScheduleOp& op) {
  if (op.fn == ApiFn::kNone) return "?";
  std::string line = absl::StrCat(Av(OpName(op.fn)), " ", op.count, " ", DtypeName(op.dtype));
  if (op.redop != ring::kUnset) absl::StrAppend(&line, " ", RedOpName(op.redop));
  if (op.root != ring::kUnset) absl::StrAppend(&line, " root=", op.root);
  absl::StrAppend(&line, " ", op.region_damaged ? "(region-damaged)" : QuoteRegion(op.region));
  return line;
}

absl::StatusOr<ScheduleOp> ParseScheduleOp(std::string_view line) {
  absl::StatusOr<std::vector<Word>> words = schedule_internal::SplitWords(line);
  if (!words.ok()) return words.status();
  return schedule_internal::OpFromWords(*words);
}

uint32_t OpTable::Intern(ScheduleOp op) {
  if (ignore_regions_) {
    op.region.clear();
    op.region_damaged = false;
  }
  auto [it, inserted] = ids_.try_emplace(FormatScheduleOp(op), static_cast<uint32_t>(ops_.size()));
  if (inserted) ops_.push_back(std::move(op));
  return it->second;
}

bool OpTable::Matches(uint32_t a, uint32_t b) const {
  if (a == b) return true;
  const ScheduleOp& x = ops_[a];
  const ScheduleOp& y = ops_[b];
  if (!x.region_damaged && !y.region_damaged) return false;
  return x.fn == y.fn && x.count == y.count && x.dtype == y.dtype && x.redop == y.redop && x.root == y.root;
}

// ---- Schedules --------------------------------------------------------------------------

std::vector<CommIndex> CommsInCreationOrder(const JobModel& model) {
  const std::vector<Comm>& comms = model.comms();
  // Per process, the first call it made on each of its communicators.
  std::vector<std::map<CommIndex, uint32_t>> first_call(model.process_count());
  for (CommIndex c = 0; c < comms.size(); ++c) {
    for (const CommRank& rank : comms[c].ranks) {
      if (!rank.present || rank.process >= first_call.size()) continue;
      uint32_t first = rank.init_call;
      for (const uint32_t index : rank.collectives) {
        if (index != kNoCall) {
          first = std::min(first, index);
          break;
        }
      }
      if (!rank.p2p.empty()) first = std::min(first, rank.p2p.front());
      auto [it, inserted] = first_call[rank.process].try_emplace(c, first);
      if (!inserted) it->second = std::min(it->second, first);
    }
  }
  const std::vector<std::vector<int32_t>> ranks_of = RanksOfProcesses(model);
  std::vector<CommFirstUses> processes(model.process_count());
  for (size_t p = 0; p < first_call.size(); ++p) {
    std::vector<std::pair<uint32_t, CommIndex>> order;
    for (const auto& [comm, call] : first_call[p]) order.emplace_back(call, comm);
    std::sort(order.begin(), order.end());
    processes[p].ranks = ranks_of[p];
    for (const auto& [call, comm] : order) processes[p].comms.push_back(comm);
  }
  std::vector<int32_t> sizes;
  sizes.reserve(comms.size());
  for (const Comm& comm : comms) sizes.push_back(comm.nranks);
  std::vector<CommIndex> order;
  for (const size_t c : CreationOrder(processes, sizes)) order.push_back(static_cast<CommIndex>(c));
  return order;
}

std::vector<size_t> CreationOrder(const std::vector<CommFirstUses>& processes, const std::vector<int32_t>& comm_sizes) {
  auto rank_key = [&](size_t process) -> int64_t {
    const std::vector<int32_t>& ranks = processes[process].ranks;
    return ranks.empty() ? (int64_t{1} << 32) + static_cast<int64_t>(process) : ranks.front();
  };
  // Per communicator, the process of the lowest rank that used it, and the ordinal of the
  // communicator among that process's.
  constexpr size_t kNone = SIZE_MAX;
  std::vector<size_t> lowest(comm_sizes.size(), kNone);
  std::vector<uint32_t> ordinal(comm_sizes.size(), UINT32_MAX);
  for (size_t p = 0; p < processes.size(); ++p) {
    for (size_t k = 0; k < processes[p].comms.size(); ++k) {
      const size_t c = processes[p].comms[k];
      if (c >= comm_sizes.size()) continue;
      if (lowest[c] == kNone || rank_key(p) < rank_key(lowest[c])) {
        lowest[c] = p;
        ordinal[c] = static_cast<uint32_t>(k);
      }
    }
  }
  using Key = std::tuple<uint32_t, int64_t, int32_t, size_t>;
  std::vector<Key> keys;
  for (size_t c = 0; c < comm_sizes.size(); ++c) {
    if (lowest[c] == kNone) {
      keys.emplace_back(UINT32_MAX, INT64_MAX, comm_sizes[c], c);
    } else {
      keys.emplace_back(ordinal[c], rank_key(lowest[c]), comm_sizes[c], c);
    }
  }
  std::sort(keys.begin(), keys.end());
  std::vector<size_t> order;
  for (const Key& key : keys) order.push_back(std::get<3>(key));
  return order;
}

JobSchedule ExtractSchedule(const JobModel& model, OpTable* table, CodeLines lines) {
  JobSchedule schedule;
  const std::vector<Comm>& comms = model.comms();
  std::vector<CommIndex> order = CommsInCreationOrder(model);
  // The schedule is the order of the ranks' host calls: CUDA graph replays (seen only with
  // the profiler plugin) run when the GPU reaches them and stay out of it.
  std::erase_if(order, [&](CommIndex c) { return IsReplayLane(comms[c].id); });
  std::vector<int> index_of(comms.size(), 0);
  for (size_t i = 0; i < order.size(); ++i) index_of[order[i]] = static_cast<int>(i) + 1;
  // Ops of this model by fingerprint (and call path, where lines are shown): each
  // distinct call formatted once.
  using OpKey = std::pair<Fingerprint, CallPathId>;
  struct OpKeyHash {
    size_t operator()(const OpKey& key) const { return static_cast<size_t>(HashCombine(HashOf(key.first), key.second)); }
  };
  std::unordered_map<OpKey, uint32_t, OpKeyHash> ids;
  const uint32_t not_reported = table->Intern(ScheduleOp{});

  for (size_t i = 0; i < order.size(); ++i) {
    const Comm& comm = comms[order[i]];
    CommSchedule out;
    out.index = static_cast<int>(i) + 1;
    out.size = comm.nranks;
    out.id = comm.id;
    if (comm.parent_id != 0) {
      if (const Comm* parent = model.FindComm(comm.parent_id)) {
        out.parent = index_of[static_cast<size_t>(parent - comms.data())];
      }
    }
    std::map<std::vector<uint32_t>, size_t> class_of;
    for (size_t r = 0; r < comm.ranks.size(); ++r) {
      const CommRank& rank = comm.ranks[r];
      if (!rank.present) {
        out.absent_ranks.push_back(static_cast<int32_t>(r));
        continue;
      }
      std::vector<uint32_t> ops;
      ops.reserve(rank.collectives.stored());
      uint64_t seq = rank.collectives.first();
      for (const uint32_t index : rank.collectives) {
        ++seq;
        if (index == kNoCall) {
          ops.push_back(not_reported);
          continue;
        }
        const Call* labelled = &model.call(rank.process, index);
        // A region that could not be read is taken from a rank that read it at the same
        // place, so that damage alone forms no rank class of its own; else it stays unknown.
        if (labelled->region_damaged) {
          if (const Call* peer = LabelledPeer(model, comm, seq, *labelled)) labelled = peer;
        }
        const Call& call = *labelled;
        Fingerprint fingerprint = FingerprintOf(call);
        if (call.region_damaged) fingerprint.region = UINT32_MAX;  // no interned region's id
        const OpKey key{fingerprint, lines == CodeLines::kShown ? call.call_path : 0};
        auto it = ids.find(key);
        if (it == ids.end()) it = ids.emplace(key, table->Intern(OpOfCall(model, call, lines))).first;
        ops.push_back(it->second);
      }
      auto [it, inserted] = class_of.try_emplace(std::move(ops), out.classes.size());
      if (inserted) out.classes.push_back(ClassSchedule{{}, it->first});
      out.classes[it->second].ranks.push_back(static_cast<int32_t>(r));
    }
    schedule.comms.push_back(std::move(out));
  }
  return schedule;
}

std::string CommLabel(int index, int32_t size, int parent) {
  return parent > 0 ? absl::StrFormat("comm %d (size %d, split from comm %d)", index, size, parent)
                    : absl::StrFormat("comm %d (size %d)", index, size);
}

// ---- Communicators across runs --------------------------------------------------------

std::vector<std::string> CommMatchKeys(const std::vector<std::pair<int, int32_t>>& parent_and_size) {
  std::vector<std::string> keys(parent_and_size.size());
  std::map<std::string, int> seen;
  for (size_t i = 0; i < parent_and_size.size(); ++i) {
    const auto [parent, size] = parent_and_size[i];
    const std::string parent_key =
        parent > 0 && static_cast<size_t>(parent) <= i ? keys[static_cast<size_t>(parent) - 1] : "";
    const std::string stem = absl::StrCat(parent_key, "/", size);
    keys[i] = absl::StrCat(stem, "#", seen[stem]++);
  }
  return keys;
}

std::vector<int32_t> SharedRanks(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  std::vector<int32_t> out;
  std::set_intersection(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(out));
  return out;
}

std::string ScheduleRanksText(const std::vector<int32_t>& ranks) {
  return RankListText(ranks, std::numeric_limits<size_t>::max());
}

}  // namespace collwatch::analyzer
