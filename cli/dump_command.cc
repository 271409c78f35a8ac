// `collwatch dump` over rings and the trace store: each source's process header, then its
// records in one shared layout. Threading: single-threaded.
#include "cli/dump_command.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "analyzer/report.h"
#include "cli/trace_loader.h"
#include "files/json_contract.h"
#include "files/safe_text.h"
#include "nlohmann/json.hpp"
#include "process/process_info.h"
#include "process/rank_membership.h"
#include "ring/ring_names.h"
#include "ring/ring_reader.h"
#include "store/event_codec.h"
#include "store/trace_store.h"

namespace collwatch {
namespace {

using ring::ApiFn;
using ring::RecordKind;

// One record of either source, with what the layout needs beside it.
struct RecordView {
  uint32_t lane = 0;
  uint64_t index = 0;
  ring::Record record{};
  std::string region;
};

// A call path's frames on one line, innermost first: "Func (file:line) < Caller (...)".
std::string CallPathText(const CallPath& path) {
  std::string text;
  for (const CallFrame& frame : path.frames) {
    absl::StrAppend(&text, text.empty() ? "" : " < ", TerminalText(frame.function), " (", TerminalText(frame.file), ":",
                    frame.line, ")");
  }
  if (path.truncated) absl::StrAppend(&text, " < ...");
  return text;
}

// What a dump says about the process behind a ring or a rank trace.
struct ProcessView {
  std::string type;  // "ring" or "trace"
  std::string path;
  std::string host, job;
  int32_t pid = 0, rank = ring::kUnset, local_rank = ring::kUnset, world_size = ring::kUnset;
  std::vector<int32_t> ranks;  // job ranks the process holds
  std::string state;           // "running", "exited", ...
  bool writer_gone = false;    // rings: read after their writer ended without a word
  std::optional<int32_t> exit_code;
  uint64_t start_monotonic_ns = 0, start_realtime_ns = 0;
  uint64_t lost = 0, torn = 0, dropped = 0;
  uint32_t lanes = 0;
  nlohmann::json extra = nlohmann::json::object();  // source-specific fields
  std::vector<RecordView> records;
  std::map<uint32_t, CallPath> call_paths;  // those the records name, by the writer's id
};

const char* WriterStateName(ring::WriterState state) {
  switch (state) {
    case ring::WriterState::kRunning: return "running";
    case ring::WriterState::kExited: return "exited";
    case ring::WriterState::kDisabled: return "disabled";
  }
  return "unknown";
}

// The job ranks of a process as far as its own records tell: its largest communicator
// stands for the world (analyze, with every process, decides job-wide).
std::vector<int32_t> JobRanksOfRecords(int32_t rank, const std::vector<RecordView>& records) {
  std::vector<CommMembership> memberships;
  for (const RecordView& view : records) {
    const std::optional<CommMembership> membership = MembershipOf(view.record);
    if (membership && std::find(memberships.begin(), memberships.end(), *membership) == memberships.end()) {
      memberships.push_back(*membership);
    }
  }
  return JobRanksOf(rank, memberships, WorldCommId(memberships));
}

ProcessView RingView(RingReader& reader) {
  const RingIdentity& id = reader.identity();
  ProcessView view;
  view.type = "ring";
  view.path = id.path;
  view.host = id.host;
  view.job = id.job;
  view.pid = id.pid;
  view.rank = id.rank;
  view.local_rank = id.local_rank;
  view.world_size = id.world_size;
  view.writer_gone = reader.writer_state() != ring::WriterState::kRunning || !reader.WriterProcessAlive();
  view.state = WriterStateName(reader.writer_state());
  view.exit_code = reader.exit_code();
  view.start_monotonic_ns = id.start_monotonic_ns;
  view.start_realtime_ns = id.start_realtime_ns;
  view.lanes = id.lane_count;
  const ReadBatch batch = reader.ReadAll(view.writer_gone);
  view.lost = batch.lost;
  view.torn = batch.torn + batch.damaged;  // both a gap in what the ring kept
  view.dropped = reader.dropped();
  view.extra = {{"lane_capacity", id.lane_capacity},
                {"records_written", reader.records_written()},
                {"heartbeat_ns", reader.heartbeat_ns()}};
  for (const IndexedRecord& item : batch.records) {
    view.records.push_back({item.lane, item.index, item.record, reader.Name(item.record.region_id)});
    const uint32_t path_id = item.record.call_path_id;
    if (path_id != 0 && !view.call_paths.count(path_id)) {
      if (std::optional<CallPath> path = reader.ReadCallPath(path_id)) view.call_paths.emplace(path_id, *path);
    }
  }
  view.ranks = JobRanksOfRecords(view.rank, view.records);
  return view;
}

absl::StatusOr<ProcessView> RankTraceView(const std::string& dir) {
  absl::StatusOr<std::unique_ptr<RankTraceReader>> reader = RankTraceReader::Open(dir);
  if (!reader.ok()) return reader.status();
  absl::StatusOr<std::vector<v1::Event>> events = (*reader)->ReadAll();
  if (!events.ok()) return events.status();
  const v1::RankIdentity& id = (*reader)->identity();
  const v1::StoredStatus& status = (*reader)->status();
  ProcessView view;
  view.type = "trace";
  view.path = dir;
  view.host = id.host();
  view.job = id.job();
  view.pid = id.pid();
  view.rank = id.rank();
  view.local_rank = id.local_rank();
  view.world_size = id.world_size();
  view.state = std::string(ProcessStatusName(ProcessStatusFromWire(status.writer_status())));
  if (status.exit_recorded()) view.exit_code = status.exit_code();
  view.start_monotonic_ns = id.start_monotonic_ns();
  view.start_realtime_ns = id.start_realtime_ns();
  view.lanes = id.lane_count();
  view.lost = status.lost();
  view.torn = status.torn();
  view.dropped = status.dropped();
  view.extra = {{"ring_path", id.ring_path()}, {"torn_tail_bytes", (*reader)->torn_tail_bytes()}};
  const std::map<uint32_t, std::string>& regions = (*reader)->regions();
  const std::map<uint32_t, CallPath>& call_paths = (*reader)->call_paths();
  for (const v1::Event& event : *events) {
    const auto region = regions.find(event.region_id());
    view.records.push_back({event.lane(), event.index(), RecordFromEvent(event),
                            region == regions.end() ? std::string() : region->second});
    const auto path = call_paths.find(event.call_path_id());
    if (path != call_paths.end()) view.call_paths.insert(*path);
  }
  view.ranks = JobRanksOfRecords(view.rank, view.records);
  return view;
}

nlohmann::json ProcessJson(const ProcessView& view) {
  nlohmann::json json = {{"type", view.type},
                         {kSchemaVersionKey, kDumpSchemaVersion},
                         {"path", view.path},
                         {"host", view.host},
                         {"job", view.job},
                         {"pid", view.pid},
                         {"rank", view.rank},
                         {"ranks", view.ranks},
                         {"local_rank", view.local_rank},
                         {"world_size", view.world_size},
                         {"lanes", view.lanes},
                         {"start_realtime_ns", view.start_realtime_ns},
                         {"start_monotonic_ns", view.start_monotonic_ns},
                         {"writer_state", view.state},
                         {"exit_code", view.exit_code ? nlohmann::json(*view.exit_code) : nlohmann::json(nullptr)},
                         {"writer_gone", view.writer_gone},
                         {"records", view.records.size()},
                         {"lost", view.lost},
                         {"torn", view.torn},
                         {"dropped", view.dropped}};
  json.update(view.extra);
  return json;
}

nlohmann::json RecordJson(const ProcessView& process, const RecordView& view) {
  const ring::Record& r = view.record;
  return {
      {"type", "record"},
      {"ring_pid", process.pid},
      {"lane", view.lane},
      {"index", view.index},
      {"kind", RecordKindName(static_cast<RecordKind>(r.kind))},
      {"fn", OpName(static_cast<ApiFn>(r.fn))},
      {"comm", JsonId(r.comm_id)},
      {"rank", r.rank},
      {"nranks", r.nranks},
      {"seq", r.seq},
      {"count", r.count},
      {"dtype", DtypeName(r.dtype)},
      {"redop", RedOpName(r.redop)},
      {"root_or_peer", r.root_or_peer},
      {"stream", JsonId(r.stream)},  // a handle: may pass 2^53
      {"group", r.group_id},
      {"t_ns", r.t_ns},
      {"ref_lane", r.ref_lane},
      {"ref", r.ref_index},
      {"region", view.region},
      {"call_path", r.call_path_id},
      {"tid", r.tid},
      {"result", r.result},
      {"flags", FlagNames(r.flags)},
      {"aux", {JsonId(r.aux0), JsonId(r.aux1), JsonId(r.aux2)}},  // hashes and comm ids among them
  };
}

constexpr char kColumnsFormat[] = "  %10s %12s %-8s %-23s %-16s %7s %6s %10s %-10s %-8s %5s %5s %-28s %s\n";
constexpr char kRecordFormat[] = "  %10s %12.3f %-8s %-23s %016x %7s %6d %10d %-10s %-8s %5s %5d %-28s %s\n";

void PrintText(const ProcessView& view, std::ostream& out) {
  out << absl::StrFormat("%s %s\n  host=%s job=%s pid=%d rank=%d ranks=%s local_rank=%d world_size=%d state=%s%s%s\n",
                         view.type, TerminalText(view.path), TerminalText(view.host), TerminalText(view.job), view.pid,
                         view.rank, view.ranks.empty() ? std::string("-") : RankListText(view.ranks), view.local_rank,
                         view.world_size, view.state, view.exit_code ? absl::StrCat(" exit_code=", *view.exit_code) : "",
                         view.writer_gone ? " (writer gone)" : "");
  if (view.type == "ring") {
    out << absl::StrFormat("  records=%d lost=%d torn=%d dropped=%d lanes=%d x %d records\n", view.records.size(),
                           view.lost, view.torn, view.dropped, view.lanes, view.extra["lane_capacity"].get<uint64_t>());
  } else {
    out << absl::StrFormat("  records=%d lost=%d torn=%d dropped=%d lanes=%d torn_tail_bytes=%d\n", view.records.size(),
                           view.lost, view.torn, view.dropped, view.lanes,
                           view.extra["torn_tail_bytes"].get<uint64_t>());
  }
  out << absl::StrFormat(kColumnsFormat, "lane:index", "t_ms", "kind", "fn", "comm", "rank", "seq", "count", "dtype",
                         "op", "peer", "group", "region", "result/flags");
  for (const RecordView& item : view.records) {
    const ring::Record& r = item.record;
    const double t_ms = static_cast<double>(r.t_ns - view.start_monotonic_ns) / 1e6;
    const std::string rank = r.rank == ring::kUnset ? "-" : absl::StrCat(r.rank, "/", r.nranks);
    std::string extra = absl::StrCat("r=", r.result);
    if (r.kind != static_cast<uint16_t>(RecordKind::kEnter)) absl::StrAppend(&extra, " ref=", r.ref_lane, ":", r.ref_index);
    if (r.call_path_id != 0) absl::StrAppend(&extra, " path=", r.call_path_id);
    if (r.flags != 0) absl::StrAppend(&extra, " ", FlagNames(r.flags));
    out << absl::StrFormat(kRecordFormat, absl::StrCat(item.lane, ":", item.index), t_ms,
                           RecordKindName(static_cast<RecordKind>(r.kind)), OpName(static_cast<ApiFn>(r.fn)),
                           r.comm_id, rank, r.seq, r.count, DtypeName(r.dtype), RedOpName(r.redop),
                           r.root_or_peer == ring::kUnset ? std::string("-") : absl::StrCat(r.root_or_peer),
                           r.group_id, TerminalText(item.region.substr(0, 28)), extra);
  }
  for (const auto& [id, path] : view.call_paths) out << "  call path " << id << ": " << CallPathText(path) << "\n";
}

void Print(const ProcessView& view, DumpFormat format, std::ostream& out) {
  if (format == DumpFormat::kText) {
    PrintText(view, out);
    return;
  }
  // Ring strings (host, job, region names) may be any bytes: SafeJsonText keeps JSON UTF-8.
  out << SafeJsonText(ProcessJson(view)) << "\n";
  for (const RecordView& item : view.records) out << SafeJsonText(RecordJson(view, item)) << "\n";
  for (const auto& [id, path] : view.call_paths) {
    const nlohmann::json line = {{"type", "call_path"}, {"ring_pid", view.pid}, {"id", id},
                                 {"frames", analyzer::CallFramesJson(path)}, {"truncated", path.truncated}};
    out << SafeJsonText(line) << "\n";
  }
}

}  // namespace

absl::Status DumpTraces(const std::string& path, const std::string& job, DumpFormat format, std::ostream& out,
                        std::ostream& err) {
  absl::StatusOr<TraceSources> sources = FindTraces(path, job);
  if (!sources.ok()) return sources.status();
  int readable = 0;
  for (const std::string& input : sources->paths) {
    absl::StatusOr<ProcessView> view;
    if (sources->kind == TraceSources::Kind::kRings) {
      absl::StatusOr<std::unique_ptr<RingReader>> reader = RingReader::Open(input);
      if (reader.ok()) {
        view = RingView(**reader);
      } else {
        view = reader.status();
      }
    } else {
      view = RankTraceView(input);
    }
    if (!view.ok()) {
      // The message names the input, whose path may hold any bytes.
      err << "collwatch dump: " << TerminalText(std::string(view.status().message())) << "\n";
      continue;
    }
    ++readable;
    Print(*view, format, out);
  }
  for (const NoRingNoteRead& note : sources->no_rings) {
    if (format == DumpFormat::kJsonLines) {
      const nlohmann::json line = {{"type", "no_ring"},
                                   {kSchemaVersionKey, kDumpSchemaVersion},
                                   {"path", note.path},
                                   {"host", note.host},
                                   {"job", note.job},
                                   {"pid", note.pid},
                                   {"rank", note.rank},
                                   {"local_rank", note.local_rank},
                                   {"world_size", note.world_size},
                                   {"needed_bytes", note.needed_bytes},
                                   {"free_bytes", note.free_bytes},
                                   {"why", note.why}};
      out << SafeJsonText(line) << "\n";
    } else {
      out << "== no ring: pid " << note.pid << " rank " << note.rank << " on " << TerminalText(note.host) << " (job "
          << TerminalText(note.job) << "): " << TerminalText(note.why) << "\n";
    }
  }
  if (readable == 0 && sources->no_rings.empty()) {
    return absl::InvalidArgumentError(sources->kind == TraceSources::Kind::kRings ? "no readable ring"
                                                                                  : "no readable rank trace");
  }
  return absl::OkStatus();
}

}  // namespace collwatch
