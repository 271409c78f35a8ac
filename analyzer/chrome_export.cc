// Chrome trace-event JSON of a job's calls, written in two passes (see chrome_export.h).
// Threading: single-threaded.
#include "analyzer/chrome_export.h"

#include <algorithm>
#include <set>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "analyzer/call_sites.h"
#include "analyzer/finding_evidence.h"
#include "analyzer/process_ranks.h"
#include "analyzer/report.h"
#include "analyzer/schedule.h"
#include "files/json_contract.h"
#include "files/safe_text.h"
#include "files/version.h"

namespace collwatch::analyzer {
namespace {

using nlohmann::json;

constexpr size_t kMaxLanes = 8;       // tracks per communicator and process
constexpr int64_t kTidsPerComm = 16;  // tid = comm index * 16 + lane
// Ends of the findings' arrows kept for the end of the trace: one per rank and finding,
// bounded however many findings a report names.
constexpr size_t kMaxAnchors = 1 << 16;

std::string_view Category(ring::ApiFn fn) {
  if (ring::IsCollective(fn)) return "collective";
  if (ring::IsP2p(fn)) return "p2p";
  return "communicator";
}

bool ListsRank(const std::vector<int32_t>& ranks, int32_t rank) {
  return std::find(ranks.begin(), ranks.end(), rank) != ranks.end();
}

// Whether `call` is where `marker`'s arrows begin and end: a call of its sequence number.
bool MarksCall(const TraceMarker& marker, const Call& call) {
  if (marker.point_to_point) {
    return ring::IsP2p(call.fn) && call.seq == marker.seq && ListsRank(marker.ranks, call.rank) &&
           ListsRank(marker.ranks, call.root_or_peer);
  }
  if (marker.seq == 0) return !ring::IsCollective(call.fn) && !ring::IsP2p(call.fn);  // the creation
  return ring::IsCollective(call.fn) && call.seq == marker.seq;
}

// Whether `call`, on communicator `comm_id`, is the call a cycle's arc names.
bool IsCycleCall(const TraceCycleCall& arc, uint64_t comm_id, const Call& call) {
  return arc.comm_id == comm_id && call.seq == arc.seq && call.rank == arc.comm_rank && OpName(call.fn) == arc.op &&
         (arc.peer < 0 || call.root_or_peer == arc.peer);
}

int64_t SecondsToNs(double seconds) { return static_cast<int64_t>(seconds * kNsPerS); }

}  // namespace

TraceMarker MarkerOf(const Finding& finding) {
  TraceMarker marker;
  marker.kind = std::string(FindingKindName(finding.kind));
  marker.headline = finding.headline;
  marker.comm_id = finding.comm_id;
  marker.seq = finding.seq;
  marker.point_to_point = std::holds_alternative<P2pFacts>(finding.evidence);
  for (const RankClass& rank_class : finding.rank_classes) {
    marker.ranks.insert(marker.ranks.end(), rank_class.ranks.begin(), rank_class.ranks.end());
  }
  marker.ranks.insert(marker.ranks.end(), finding.lagging_ranks.begin(), finding.lagging_ranks.end());
  std::sort(marker.ranks.begin(), marker.ranks.end());
  marker.ranks.erase(std::unique(marker.ranks.begin(), marker.ranks.end()), marker.ranks.end());
  marker.first_bad_ns = finding.first_bad_ns;
  if (const auto* cycle = std::get_if<CycleFacts>(&finding.evidence)) {
    for (const WaitArc& arc : cycle->arcs) {
      marker.cycle.push_back(TraceCycleCall{arc.comm_id, arc.call.seq, arc.comm_rank, std::string(OpName(arc.call.fn)),
                                            ring::IsP2p(arc.call.fn) ? arc.call.root_or_peer : -1});
    }
  }
  return marker;
}

std::vector<TraceMarker> MarkersFromReport(const json& report, size_t* unreadable) {
  std::vector<TraceMarker> markers;
  *unreadable = 0;
  const auto field = [](const json& object, const char* key) -> const json* {
    if (!object.is_object()) return nullptr;
    const auto found = object.find(key);
    return found == object.end() ? nullptr : &*found;
  };
  const json* findings = field(report, "findings");
  if (findings == nullptr || !findings->is_array()) return markers;
  for (const json& finding : *findings) {
    const json* kind = field(finding, "kind");
    const json* comm = field(finding, "comm");
    const json* seq = field(finding, "seq");
    const std::optional<uint64_t> comm_id = comm != nullptr ? JsonIdValue(*comm) : std::nullopt;
    if (kind == nullptr || !kind->is_string() || !comm_id || seq == nullptr || !seq->is_number_unsigned()) {
      ++*unreadable;
      continue;
    }
    TraceMarker marker;
    marker.kind = kind->get<std::string>();
    marker.comm_id = *comm_id;
    marker.seq = seq->get<uint64_t>();
    if (const json* headline = field(finding, "headline"); headline != nullptr && headline->is_string()) {
      marker.headline = headline->get<std::string>();
    }
    if (const json* p2p = field(finding, "point_to_point"); p2p != nullptr && p2p->is_boolean()) {
      marker.point_to_point = p2p->get<bool>();
    }
    const auto add_ranks = [&](const json* list) {
      if (list == nullptr || !list->is_array()) return;
      for (const json& rank : *list) {
        if (rank.is_number_integer()) marker.ranks.push_back(rank.get<int32_t>());
      }
    };
    if (const json* classes = field(finding, "rank_classes"); classes != nullptr && classes->is_array()) {
      for (const json& rank_class : *classes) add_ranks(&rank_class);
    }
    add_ranks(field(finding, "lagging_ranks"));
    std::sort(marker.ranks.begin(), marker.ranks.end());
    marker.ranks.erase(std::unique(marker.ranks.begin(), marker.ranks.end()), marker.ranks.end());
    if (const json* time = field(finding, "first_bad_time"); time != nullptr && time->is_string()) {
      marker.first_bad_ns = ParseWallClock(time->get<std::string>()).value_or(0);
    }
    // A cycle's arcs (report.json `wait_cycle`); one that cannot be read leaves them all out.
    const auto in = [&](const json* object, const char* key) { return object == nullptr ? nullptr : field(*object, key); };
    const json* arcs = in(field(finding, "wait_cycle"), "arcs");
    for (const json& arc : arcs != nullptr && arcs->is_array() ? *arcs : json::array()) {
      const json* call = field(arc, "waits_in");
      const json* comm_rank = field(arc, "comm_rank");
      const json* op = in(call, "op");
      const json* arc_seq = in(call, "seq");
      const json* peer = in(call, "peer");
      const json* arc_comm_text = in(call, "comm");
      const std::optional<uint64_t> arc_comm = arc_comm_text != nullptr ? JsonIdValue(*arc_comm_text) : std::nullopt;
      if (!arc_comm || comm_rank == nullptr || !comm_rank->is_number_integer() || op == nullptr || !op->is_string() ||
          arc_seq == nullptr || !arc_seq->is_number_unsigned()) {
        marker.cycle.clear();
        break;
      }
      marker.cycle.push_back(TraceCycleCall{*arc_comm, arc_seq->get<uint64_t>(), comm_rank->get<int32_t>(),
                                            op->get<std::string>(),
                                            peer != nullptr && peer->is_number_integer() ? peer->get<int32_t>() : -1});
    }
    markers.push_back(std::move(marker));
  }
  return markers;
}

ChromeTraceExport::ChromeTraceExport(ChromeExportOptions options) : options_(std::move(options)) {
  for (size_t k = 0; k < options_.markers.size(); ++k) {
    std::set<uint64_t> comms = {options_.markers[k].comm_id};
    for (const TraceCycleCall& arc : options_.markers[k].cycle) comms.insert(arc.comm_id);
    for (uint64_t comm : comms) markers_by_comm_.emplace(comm, k);
  }
}

ChromeTraceExport::~ChromeTraceExport() = default;

bool ChromeTraceExport::BeginProcess(const ProcessInfo& info) {
  stream_ = std::make_unique<CallStream>(info);
  if (!writing_) {
    surveyed_.push_back(Surveyed{info, {}, {}});
    first_use_.clear();
    return true;
  }
  // The same process as the first pass saw at this place; a reader that skips an input in
  // one pass only (a live ring that went away) shifts the places, so it is looked up.
  const auto same = [&](const Surveyed& surveyed) {
    return surveyed.info.host == info.host && surveyed.info.pid == info.pid &&
           surveyed.info.realtime_offset_ns == info.realtime_offset_ns;
  };
  size_t ordinal = ordinal_++;
  if (ordinal >= surveyed_.size() || !same(surveyed_[ordinal])) {
    ordinal = static_cast<size_t>(std::find_if(surveyed_.begin(), surveyed_.end(), same) - surveyed_.begin());
  }
  if (ordinal >= surveyed_.size()) {  // not there in the first pass: nothing to place it by
    stream_.reset();
    return false;
  }
  const std::vector<int32_t>& ranks = ranks_of_[ordinal];
  const auto asked = [&](int32_t rank) { return ListsRank(*options_.ranks, rank); };
  if (options_.ranks && std::none_of(ranks.begin(), ranks.end(), asked)) {
    ++stats_.processes_left_out;
    stream_.reset();
    return false;
  }
  pid_ = static_cast<int64_t>(ordinal) + 1;
  lane_ends_.clear();
  call_path_args_.clear();
  ++stats_.processes;
  stats_.ranks += static_cast<uint64_t>(HeldRankCount(ranks));
  Write({{"ph", "M"}, {"name", "process_name"}, {"pid", pid_}, {"tid", 0},
         {"args", {{"name", ProcessLabel(ranks, info.host, info.pid)}}}});
  // By lowest rank; processes of unknown ranks last.
  Write({{"ph", "M"}, {"name", "process_sort_index"}, {"pid", pid_}, {"tid", 0},
         {"args", {{"sort_index", ranks.empty() ? 1'000'000 + pid_ : ranks.front()}}}});
  return true;
}

void ChromeTraceExport::AddPiece(const ProcessUpdate& piece) {
  if (stream_ == nullptr) return;
  stream_->Add(piece, [this](const JobModel& model, uint32_t index, const Call& call) {
    writing_ ? WriteCall(model, call) : SurveyCall(model, index, call);
  });
}

void ChromeTraceExport::EndProcess() {
  if (stream_ == nullptr) return;
  stream_->Finish([this](const JobModel& model, uint32_t index, const Call& call) {
    writing_ ? WriteCall(model, call) : SurveyCall(model, index, call);
  });
  if (writing_) {
    Write({{"ph", "M"}, {"name", "process_labels"}, {"pid", pid_}, {"tid", 0},
           {"args", {{"labels", std::string(ProcessStatusName(stream_->process().status))}}}});
  } else {
    EndSurvey();
  }
  stream_.reset();
}

void ChromeTraceExport::SurveyCall(const JobModel& model, uint32_t index, const Call& call) {
  if (call.enter_ns > 0 && (first_call_ns_ == 0 || call.enter_ns < first_call_ns_)) first_call_ns_ = call.enter_ns;
  auto [first, inserted] = first_use_.try_emplace(model.comms()[call.comm].id, index);
  if (!inserted) first->second = std::min(first->second, index);
}

void ChromeTraceExport::EndSurvey() {
  const JobModel& model = stream_->model();
  Surveyed& surveyed = surveyed_.back();
  for (const auto& [comm_index, rank] : stream_->process().memberships) {
    const Comm& comm = model.comms()[comm_index];
    surveyed.memberships.push_back(CommMembership{comm.id, comm.nranks, rank});
    int32_t& size = comm_sizes_[comm.id];
    size = std::max(size, comm.nranks);
  }
  std::vector<std::pair<uint32_t, uint64_t>> by_first_call;
  for (const auto& [comm_id, index] : first_use_) by_first_call.emplace_back(index, comm_id);
  std::sort(by_first_call.begin(), by_first_call.end());
  for (const auto& [index, comm_id] : by_first_call) surveyed.comms_by_first_use.push_back(comm_id);
  end_ns_ = std::max(end_ns_, model.LatestTimeNs());
}

void ChromeTraceExport::StartWriting(std::ostream& out) {
  // Each process's job ranks, by the one rule (process/rank_membership.h), over the world
  // communicator of the whole job.
  std::vector<CommMembership> all;
  for (const Surveyed& surveyed : surveyed_) {
    all.insert(all.end(), surveyed.memberships.begin(), surveyed.memberships.end());
  }
  const uint64_t world = WorldCommId(all);
  std::vector<uint64_t> comm_ids;
  std::vector<int32_t> sizes;
  std::map<uint64_t, size_t> position;
  for (const auto& [id, size] : comm_sizes_) {
    position[id] = comm_ids.size();
    comm_ids.push_back(id);
    sizes.push_back(size);
  }
  std::vector<CommFirstUses> uses;
  for (const Surveyed& surveyed : surveyed_) {
    ranks_of_.push_back(JobRanksOf(surveyed.info.global_rank, surveyed.memberships, world));
    CommFirstUses use{ranks_of_.back(), {}};
    for (const uint64_t id : surveyed.comms_by_first_use) use.comms.push_back(position[id]);
    uses.push_back(std::move(use));
  }
  const std::vector<size_t> order = CreationOrder(uses, sizes);
  for (size_t i = 0; i < order.size(); ++i) comm_index_[comm_ids[order[i]]] = static_cast<int>(i) + 1;

  end_ns_ = std::max(end_ns_, first_call_ns_);
  base_ns_ = options_.time_base_ns.value_or(first_call_ns_);
  since_ns_ = options_.since_s > 0 ? first_call_ns_ + SecondsToNs(options_.since_s) : INT64_MIN;
  until_ns_ = options_.until_s ? first_call_ns_ + SecondsToNs(*options_.until_s) : INT64_MAX;
  const json until = options_.until_s ? json(*options_.until_s) : json(nullptr);
  const json window = {{"since_s", options_.since_s}, {"until_s", until}};
  json other = {{kSchemaVersionKey, kChromeTraceSchemaVersion},
                {"producer", "collwatch export --format chrome"},
                {"collwatch_version", std::string(CollwatchVersionText())},
                {"clock", "CLOCK_REALTIME of each rank's host"},
                {"time_origin_realtime_ns", base_ns_},
                {"first_call_realtime_ns", first_call_ns_},
                {"trace_end_realtime_ns", end_ns_},
                {"ranks", options_.ranks ? json(*options_.ranks) : json(nullptr)},
                {"window", window}};
  out_ = &out;
  *out_ << "{\"displayTimeUnit\":\"ms\",\"baseTimeNanoseconds\":" << base_ns_
        << ",\"otherData\":" << SafeJsonText(other) << ",\"traceEvents\":[";
  writing_ = true;
  ordinal_ = 0;
}

double ChromeTraceExport::Micros(int64_t realtime_ns) const {
  // Whole microseconds and the rest apart: a realtime nanosecond count passes 2^53.
  const int64_t ns = realtime_ns - base_ns_;
  return static_cast<double>(ns / 1000) + static_cast<double>(ns % 1000) / 1000.0;
}

void ChromeTraceExport::Write(const json& event) {
  *out_ << (first_event_ ? "\n" : ",\n") << SafeJsonText(event);
  first_event_ = false;
}

json ChromeTraceExport::CallArgs(const JobModel& model, const Call& call, const Comm& comm) {
  const std::string_view region = model.RegionName(call.region);
  json args = {{"op", OpName(call.fn)},
               {"comm", JsonId(comm.id)},
               {"comm_index", comm_index_[comm.id]},
               {"rank", call.rank},
               {"region", region}};
  if (ring::IsCollective(call.fn) || ring::IsP2p(call.fn)) {
    args["seq"] = call.seq;
    args["count"] = call.count;
    args["dtype"] = DtypeName(call.dtype);
    args["bytes"] = call.count * DtypeBytes(call.dtype);
    if (call.redop >= 0) args["redop"] = RedOpName(call.redop);
    if (call.root_or_peer >= 0) args[ring::IsP2p(call.fn) ? "peer" : "root"] = call.root_or_peer;
  }
  if (call.call_path != 0) {
    // The Python call path, in short form: where in the user's code the call came from.
    auto [cached, first_seen] = call_path_args_.try_emplace(call.call_path);
    if (first_seen) {
      const CallPath& path = model.call_path(call.call_path);
      if (const CallFrame* user = InnermostUserFrame(path)) cached->second["code"] = FrameText(*user);
      json frames = json::array();
      for (const CallFrame& frame : path.frames) frames.push_back(FrameText(frame));
      cached->second["call path"] = std::move(frames);
    }
    args.update(cached->second);
    if (call.call_path_inferred) args["call path inferred"] = "from its unit's forward all-gather";
  }
  if (call.group_id != 0) args["group"] = call.group_id;
  if (call.result != 0) args["result"] = call.result;
  const bool finished = CallFinished(call);
  args["state"] = !call.returned() ? "never returned" : !finished ? "returned, never completed" : "completed";
  return args;
}

void ChromeTraceExport::WriteCall(const JobModel& model, const Call& call) {
  if (call.enter_ns <= 0) return;
  const Comm& comm = model.comms()[call.comm];
  const bool finished = CallFinished(call);
  int64_t end = call.completed() ? call.complete_ns : call.returned() ? call.return_ns : 0;
  if (!finished) end = end_ns_;  // still running when the trace ends
  end = std::max(end, call.enter_ns);
  if (call.enter_ns > until_ns_ || end < since_ns_) {
    ++stats_.calls_outside;
    return;
  }
  // To the first track of its communicator it fits on, so that every track's slices nest.
  std::vector<int64_t>& lanes = lane_ends_[comm.id];
  size_t lane = 0;
  while (lane < lanes.size() && lanes[lane] > call.enter_ns) ++lane;
  if (lane == lanes.size() && lanes.size() < kMaxLanes) lanes.push_back(0);
  if (lane == lanes.size()) lane = lanes.size() - 1;  // past the cap: overlap on the last track
  const bool new_track = lanes[lane] == 0;
  lanes[lane] = std::max(lanes[lane], end);
  const int index = comm_index_[comm.id];
  const int64_t tid = index * kTidsPerComm + static_cast<int64_t>(lane);
  if (new_track) {
    std::string name = absl::StrFormat("comm %d (size %d) %016x", index, comm.nranks, comm.id);
    if (IsReplayLane(comm.id)) absl::StrAppend(&name, " CUDA graph replays");
    if (lane > 0) absl::StrAppend(&name, " overlap ", lane);
    Write({{"ph", "M"}, {"name", "thread_name"}, {"pid", pid_}, {"tid", tid}, {"args", {{"name", name}}}});
    Write({{"ph", "M"}, {"name", "thread_sort_index"}, {"pid", pid_}, {"tid", tid}, {"args", {{"sort_index", tid}}}});
  }

  const std::string_view op = OpName(call.fn);
  const std::string_view region = model.RegionName(call.region);
  const json args = CallArgs(model, call, comm);
  std::string name(op);
  if (!region.empty()) absl::StrAppend(&name, " ", std::string(region));
  if (!finished) absl::StrAppend(&name, call.returned() ? " (never completed)" : " (never returned)");
  Write({{"ph", "X"}, {"name", name}, {"cat", Category(call.fn)}, {"pid", pid_}, {"tid", tid},
         {"ts", Micros(call.enter_ns)}, {"dur", static_cast<double>(end - call.enter_ns) / 1000.0}, {"args", args}});
  ++stats_.slices;
  if (!finished) {
    ++stats_.unfinished;
    const std::string what =
        ring::IsCollective(call.fn) ? absl::StrCat(std::string(op), " #", call.seq) : std::string(op);
    const std::string never = absl::StrCat(call.returned() ? "never completed: " : "never returned: ", what);
    Write({{"ph", "i"}, {"s", "t"}, {"name", never}, {"cat", "hang"}, {"pid", pid_}, {"tid", tid}, {"ts", Micros(call.enter_ns)}, {"args", args}});
  }
  const auto [first, last] = markers_by_comm_.equal_range(comm.id);
  for (auto it = first; it != last && anchors_.size() < kMaxAnchors; ++it) {
    const TraceMarker& marker = options_.markers[it->second];
    if (marker.cycle.empty()) {
      if (MarksCall(marker, call)) anchors_.push_back(Anchor{it->second, pid_, tid, call.enter_ns, 0});
      continue;
    }
    for (size_t arc = 0; arc < marker.cycle.size(); ++arc) {
      if (IsCycleCall(marker.cycle[arc], comm.id, call)) anchors_.push_back(Anchor{it->second, pid_, tid, call.enter_ns, arc});
    }
  }
}

ChromeExportStats ChromeTraceExport::Finish() {
  if (out_ == nullptr) return stats_;
  for (size_t k = 0; k < options_.markers.size(); ++k) {
    const TraceMarker& marker = options_.markers[k];
    if (marker.first_bad_ns <= 0 || marker.first_bad_ns < since_ns_ || marker.first_bad_ns > until_ns_) continue;
    // The headline names the kind already ("PATH_DIVERGENCE at comm 3f2a9c01 seq 12: ...").
    const std::string& name = marker.headline.empty() ? marker.kind : marker.headline;
    Write({{"ph", "i"}, {"s", "g"}, {"name", name}, {"cat", "finding"},
           {"pid", 0}, {"tid", 0}, {"ts", Micros(marker.first_bad_ns)},
           {"args", {{"kind", marker.kind}, {"headline", marker.headline}, {"comm", JsonId(marker.comm_id)},
                     {"seq", marker.seq}, {"ranks", marker.ranks}, {"finding", k + 1}}}});
    ++stats_.markers;
  }
  // Per finding, its calls in time order joined one to the next: an arrow from each rank's
  // call to the next one's (flow events bound to the slices they start in). A cycle's go
  // in arc order, round: each waiting rank's call to the call of the rank it waits for.
  std::stable_sort(anchors_.begin(), anchors_.end(), [](const Anchor& a, const Anchor& b) {
    return std::tie(a.marker, a.arc, a.enter_ns) < std::tie(b.marker, b.arc, b.enter_ns);
  });
  std::vector<std::pair<size_t, size_t>> joined;  // anchors_ indexes: from, to
  for (size_t i = 1; i < anchors_.size(); ++i) {
    if (anchors_[i - 1].marker == anchors_[i].marker) joined.emplace_back(i - 1, i);
    const bool last_of_marker = i + 1 == anchors_.size() || anchors_[i + 1].marker != anchors_[i].marker;
    if (!last_of_marker || options_.markers[anchors_[i].marker].cycle.empty()) continue;
    size_t first_of_marker = i;
    while (first_of_marker > 0 && anchors_[first_of_marker - 1].marker == anchors_[i].marker) --first_of_marker;
    if (first_of_marker < i) joined.emplace_back(i, first_of_marker);  // closing the cycle
  }
  for (const auto& [from_index, to_index] : joined) {
    const Anchor& from = anchors_[from_index];
    const Anchor& to = anchors_[to_index];
    const TraceMarker& marker = options_.markers[from.marker];
    const std::string name = absl::StrCat("finding ", from.marker + 1, ": ", marker.kind, " #", marker.seq);
    const uint64_t id = ++stats_.arrows;
    Write({{"ph", "s"}, {"id", id}, {"name", name}, {"cat", "finding"}, {"pid", from.pid}, {"tid", from.tid},
           {"ts", Micros(from.enter_ns)}});
    Write({{"ph", "f"}, {"bp", "e"}, {"id", id}, {"name", name}, {"cat", "finding"}, {"pid", to.pid}, {"tid", to.tid},
           {"ts", Micros(to.enter_ns)}});
  }
  *out_ << "\n]}\n";
  return stats_;
}

}  // namespace collwatch::analyzer
