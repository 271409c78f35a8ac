// Chrome trace-event JSON of a job's calls (see chrome_export.h).
// Threading: reads the model only.
#include "analyzer/chrome_export.h"

#include <algorithm>
#include <unordered_map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "analyzer/call_sites.h"
#include "analyzer/finding.h"
#include "analyzer/process_ranks.h"
#include "analyzer/schedule.h"
#include "files/json_contract.h"
#include "files/safe_text.h"
#include "files/version.h"
#include "nlohmann/json.hpp"

namespace collwatch::analyzer {
namespace {

using nlohmann::json;

constexpr size_t kMaxLanes = 8;         // tracks per communicator and process
constexpr int64_t kTidsPerComm = 16;    // tid = comm index * 16 + lane
constexpr uint32_t kNotPlaced = UINT32_MAX;

class EventWriter {
 public:
  explicit EventWriter(std::ostream& out) : out_(out) {}
  void Write(const json& event) {
    out_ << (first_ ? "\n" : ",\n") << SafeJsonText(event);
    first_ = false;
  }

 private:
  std::ostream& out_;
  bool first_ = true;
};

std::string_view Category(ring::ApiFn fn) {
  if (ring::IsCollective(fn)) return "collective";
  if (ring::IsP2p(fn)) return "p2p";
  return "communicator";
}

}  // namespace

ChromeExportStats WriteChromeTrace(const JobModel& model, std::ostream& out) {
  ChromeExportStats stats;
  const std::vector<Comm>& comms = model.comms();
  const std::vector<CommIndex> order = CommsInCreationOrder(model);
  std::vector<int> index_of(comms.size(), 0);
  for (size_t i = 0; i < order.size(); ++i) index_of[order[i]] = static_cast<int>(i) + 1;
  std::unordered_map<CallPathId, json> call_path_args;  // each path's args, made once

  // The communicator of each call, as the model placed it (creation, collectives, p2p).
  std::vector<std::vector<uint32_t>> placed(model.process_count());
  for (ProcessId p = 0; p < model.process_count(); ++p) placed[p].assign(model.process(p).calls.size(), kNotPlaced);
  for (CommIndex c = 0; c < comms.size(); ++c) {
    for (const CommRank& rank : comms[c].ranks) {
      if (!rank.present || rank.process >= placed.size()) continue;
      std::vector<uint32_t>& of_process = placed[rank.process];
      auto place = [&](uint32_t index) {
        if (index < of_process.size()) of_process[index] = c;
      };
      for (const uint32_t index : rank.collectives) place(index);
      for (const uint32_t index : rank.p2p) place(index);
      place(rank.init_call);
    }
  }
  int64_t origin = 0;
  for (ProcessId p = 0; p < model.process_count(); ++p) {
    const WindowedLog<Call>& calls = model.process(p).calls;
    for (size_t i = calls.first(); i < calls.size(); ++i) {
      if (placed[p][i] != kNotPlaced && calls[i].enter_ns > 0 && (origin == 0 || calls[i].enter_ns < origin)) {
        origin = calls[i].enter_ns;
      }
    }
  }
  const int64_t trace_end = std::max(model.LatestTimeNs(), origin);
  auto micros = [origin](int64_t ns) { return static_cast<double>(ns - origin) / 1000.0; };

  out << "{\"displayTimeUnit\":\"ms\",\"otherData\":"
      << SafeJsonText({{kSchemaVersionKey, kChromeTraceSchemaVersion},
                       {"producer", "collwatch export --chrome"},
                       {"collwatch_version", std::string(CollwatchVersionText())},
                       {"time_origin_realtime_ns", origin},
                       {"trace_end_realtime_ns", trace_end}})
      << ",\"traceEvents\":[";
  EventWriter writer(out);

  const std::vector<std::vector<int32_t>> ranks_of = RanksOfProcesses(model);
  for (ProcessId p = 0; p < model.process_count(); ++p) {
    const Process& process = model.process(p);
    const std::vector<int32_t>& ranks = ranks_of[p];
    const int64_t pid = static_cast<int64_t>(p) + 1;
    ++stats.processes;
    stats.ranks += static_cast<uint64_t>(HeldRankCount(ranks));
    writer.Write({{"ph", "M"}, {"name", "process_name"}, {"pid", pid}, {"tid", 0},
                  {"args", {{"name", ProcessLabel(ranks, process.info.host, process.info.pid)}}}});
    // By lowest rank; processes of unknown ranks last.
    writer.Write({{"ph", "M"}, {"name", "process_sort_index"}, {"pid", pid}, {"tid", 0},
                  {"args", {{"sort_index", ranks.empty() ? 1'000'000 + static_cast<int64_t>(p) : ranks.front()}}}});
    writer.Write({{"ph", "M"}, {"name", "process_labels"}, {"pid", pid}, {"tid", 0},
                  {"args", {{"labels", std::string(ProcessStatusName(process.status))}}}});

    // Calls in enter order; each to the first track of its communicator it fits on.
    std::vector<uint32_t> by_enter;
    for (uint32_t i = 0; i < process.calls.size(); ++i) {
      if (placed[p][i] != kNotPlaced && process.calls[i].enter_ns > 0) by_enter.push_back(i);
    }
    std::stable_sort(by_enter.begin(), by_enter.end(), [&](uint32_t a, uint32_t b) {
      return process.calls[a].enter_ns < process.calls[b].enter_ns;
    });
    std::vector<std::vector<int64_t>> lane_ends(comms.size());  // per communicator: end of each track
    for (const uint32_t i : by_enter) {
      const Call& call = process.calls[i];
      const CommIndex c = placed[p][i];
      const Comm& comm = comms[c];
      const bool finished = ring::IsCollective(call.fn) || ring::IsP2p(call.fn) ? call.completed() : call.returned();
      int64_t end = call.completed() ? call.complete_ns : call.returned() ? call.return_ns : 0;
      if (!finished) end = std::max(trace_end, call.enter_ns);
      end = std::max(end, call.enter_ns);

      std::vector<int64_t>& lanes = lane_ends[c];
      size_t lane = 0;
      while (lane < lanes.size() && lanes[lane] > call.enter_ns) ++lane;
      if (lane == lanes.size() && lanes.size() < kMaxLanes) lanes.push_back(0);
      if (lane == lanes.size()) lane = lanes.size() - 1;  // past the cap: overlap on the last track
      const bool new_track = lanes[lane] == 0;
      lanes[lane] = std::max(lanes[lane], end);
      const int64_t tid = index_of[c] * kTidsPerComm + static_cast<int64_t>(lane);
      if (new_track) {
        std::string name = absl::StrFormat("comm %d (size %d) %016x", index_of[c], comm.nranks, comm.id);
        if (IsReplayLane(comm.id)) absl::StrAppend(&name, " CUDA graph replays");
        if (lane > 0) absl::StrAppend(&name, " overlap ", lane);
        writer.Write({{"ph", "M"}, {"name", "thread_name"}, {"pid", pid}, {"tid", tid}, {"args", {{"name", name}}}});
        writer.Write({{"ph", "M"}, {"name", "thread_sort_index"}, {"pid", pid}, {"tid", tid},
                      {"args", {{"sort_index", tid}}}});
      }

      const std::string_view region = model.RegionName(call.region);
      const std::string_view op = OpName(call.fn);
      json args = {{"op", op},
                   {"comm", JsonId(comm.id)},
                   {"comm_index", index_of[c]},
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
        auto [cached, first_seen] = call_path_args.try_emplace(call.call_path);
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
      args["state"] = !call.returned() ? "never returned" : !finished ? "returned, never completed" : "completed";
      std::string name(op);
      if (!region.empty()) absl::StrAppend(&name, " ", std::string(region));
      if (!finished) absl::StrAppend(&name, call.returned() ? " (never completed)" : " (never returned)");
      writer.Write({{"ph", "X"}, {"name", name}, {"cat", Category(call.fn)}, {"pid", pid}, {"tid", tid},
                    {"ts", micros(call.enter_ns)}, {"dur", micros(end) - micros(call.enter_ns)}, {"args", args}});
      ++stats.slices;
      if (!finished) {
        ++stats.unfinished;
        const std::string what =
            ring::IsCollective(call.fn) ? absl::StrCat(std::string(op), " #", call.seq) : std::string(op);
        writer.Write({{"ph", "i"}, {"s", "t"},
                      {"name", absl::StrCat(call.returned() ? "never completed: " : "never returned: ", what)},
                      {"cat", "hang"}, {"pid", pid}, {"tid", tid}, {"ts", micros(call.enter_ns)}, {"args", args}});
      }
    }
  }
  out << "\n]}\n";
  return stats;
}

}  // namespace collwatch::analyzer
