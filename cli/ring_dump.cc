// Rendering of ring files for `collwatch dump`. Threading: single-threaded.
#include "cli/ring_dump.h"

#include <sys/stat.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <limits>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "analyzer/finding.h"
#include "analyzer/process_ranks.h"
#include "ring/ring_names.h"

namespace collwatch {
namespace {

using ring::ApiFn;
using ring::RecordKind;

const char* WriterStateName(ring::WriterState state) {
  switch (state) {
    case ring::WriterState::kRunning: return "running";
    case ring::WriterState::kExited: return "exited";
    case ring::WriterState::kDisabled: return "disabled";
  }
  return "unknown";
}

struct RingContents {
  std::unique_ptr<RingReader> reader;
  ReadBatch batch;
  bool writer_gone = false;
  std::vector<int32_t> ranks;  // job ranks the process holds
};

// The job ranks of a ring's process as far as the ring itself tells: its largest
// communicator stands for the world (analyze, with every ring, decides job-wide).
std::vector<int32_t> RanksOfRing(const RingIdentity& id, const ReadBatch& batch) {
  std::vector<CommMembership> memberships;
  for (const IndexedRecord& item : batch.records) {
    const std::optional<CommMembership> membership = MembershipOf(item.record);
    if (membership && std::find(memberships.begin(), memberships.end(), *membership) == memberships.end()) {
      memberships.push_back(*membership);
    }
  }
  return JobRanksOf(id.rank, memberships, WorldCommId(memberships));
}

RingContents ReadWholeRing(std::unique_ptr<RingReader> reader) {
  RingContents contents;
  contents.writer_gone =
      reader->writer_state() != ring::WriterState::kRunning || !reader->WriterProcessAlive();
  contents.batch = reader->ReadAll(contents.writer_gone);
  contents.ranks = RanksOfRing(reader->identity(), contents.batch);
  contents.reader = std::move(reader);
  return contents;
}

nlohmann::json RingToJson(const RingContents& contents) {
  const RingIdentity& id = contents.reader->identity();
  return {{"type", "ring"},
          {"path", id.path},
          {"host", id.host},
          {"job", id.job},
          {"pid", id.pid},
          {"rank", id.rank},
          {"ranks", contents.ranks},
          {"local_rank", id.local_rank},
          {"world_size", id.world_size},
          {"lanes", id.lane_count},
          {"lane_capacity", id.lane_capacity},
          {"start_realtime_ns", id.start_realtime_ns},
          {"start_monotonic_ns", id.start_monotonic_ns},
          {"records_written", contents.reader->records_written()},
          {"heartbeat_ns", contents.reader->heartbeat_ns()},
          {"writer_state", WriterStateName(contents.reader->writer_state())},
          {"exit_code", contents.reader->exit_code() ? nlohmann::json(*contents.reader->exit_code())
                                                     : nlohmann::json(nullptr)},
          {"writer_gone", contents.writer_gone},
          {"records", contents.batch.records.size()},
          {"lost", contents.batch.lost},
          {"torn", contents.batch.torn},
          {"dropped", contents.reader->dropped()}};
}

void PrintRingText(const RingContents& contents, std::ostream& out) {
  const RingIdentity& id = contents.reader->identity();
  out << absl::StrFormat(
      "ring %s\n  host=%s job=%s pid=%d rank=%d ranks=%s local_rank=%d world_size=%d state=%s%s%s\n"
      "  records=%d lost=%d torn=%d dropped=%d lanes=%d x %d records\n",
      id.path, id.host, id.job, id.pid, id.rank,
      contents.ranks.empty() ? std::string("-") : RankListText(contents.ranks), id.local_rank, id.world_size,
      WriterStateName(contents.reader->writer_state()),
      contents.reader->exit_code() ? absl::StrCat(" exit_code=", *contents.reader->exit_code()) : "",
      contents.writer_gone ? " (writer gone)" : "", contents.batch.records.size(),
      contents.batch.lost, contents.batch.torn, contents.reader->dropped(), id.lane_count,
      id.lane_capacity);
  out << absl::StrFormat("  %10s %12s %-8s %-18s %-16s %7s %6s %10s %-9s %-6s %5s %5s %-28s %s\n",
                         "lane:index", "t_ms", "kind", "fn", "comm", "rank", "seq", "count", "dtype",
                         "op", "peer", "group", "region", "result/flags");
  for (const IndexedRecord& item : contents.batch.records) {
    const ring::Record& r = item.record;
    const double t_ms = static_cast<double>(r.t_ns - id.start_monotonic_ns) / 1e6;
    std::string rank = r.rank == ring::kUnset ? "-" : absl::StrCat(r.rank, "/", r.nranks);
    std::string extra = absl::StrCat("r=", r.result);
    if (r.kind != static_cast<uint16_t>(RecordKind::kEnter)) {
      absl::StrAppend(&extra, " ref=", r.ref_lane, ":", r.ref_index);
    }
    if (r.flags != 0) absl::StrAppend(&extra, " ", FlagNames(r.flags));
    out << absl::StrFormat(
        "  %10s %12.3f %-8s %-18s %016x %7s %6d %10d %-9s %-6s %5s %5d %-28s %s\n",
        absl::StrCat(item.lane, ":", item.index),
        t_ms, RecordKindName(static_cast<RecordKind>(r.kind)),
        ApiFnName(static_cast<ApiFn>(r.fn)), r.comm_id, rank, r.seq, r.count,
        DtypeName(r.dtype), RedOpName(r.redop),
        r.root_or_peer == ring::kUnset ? std::string("-") : absl::StrCat(r.root_or_peer),
        r.group_id, contents.reader->RegionName(r.region_id).substr(0, 28), extra);
  }
}

}  // namespace

nlohmann::json RecordToJson(const RingReader& reader, const IndexedRecord& item) {
  const ring::Record& r = item.record;
  nlohmann::json json = {
      {"type", "record"},
      {"ring_pid", reader.identity().pid},
      {"lane", item.lane},
      {"index", item.index},
      {"kind", RecordKindName(static_cast<RecordKind>(r.kind))},
      {"fn", ApiFnName(static_cast<ApiFn>(r.fn))},
      {"comm", absl::StrFormat("%016x", r.comm_id)},
      {"rank", r.rank},
      {"nranks", r.nranks},
      {"seq", r.seq},
      {"count", r.count},
      {"dtype", DtypeName(r.dtype)},
      {"redop", RedOpName(r.redop)},
      {"root_or_peer", r.root_or_peer},
      {"stream", r.stream},
      {"group", r.group_id},
      {"t_ns", r.t_ns},
      {"ref_lane", r.ref_lane},
      {"ref", r.ref_index},
      {"region", reader.RegionName(r.region_id)},
      {"tid", r.tid},
      {"result", r.result},
      {"flags", FlagNames(r.flags)},
      {"aux", {r.aux0, r.aux1, r.aux2}},
  };
  return json;
}

absl::Status DumpRings(const std::string& path, DumpFormat format, std::ostream& out,
                       std::ostream& err) {
  struct stat info {};
  if (stat(path.c_str(), &info) != 0) {
    return absl::NotFoundError(absl::StrCat(path, ": no such file or folder"));
  }
  std::vector<std::string> paths;
  if (S_ISDIR(info.st_mode)) {
    auto listed = ListRingFiles(path);
    if (!listed.ok()) return listed.status();
    if (listed->empty()) return absl::NotFoundError(absl::StrCat(path, ": no *.ring files"));
    paths = *std::move(listed);
  } else {
    paths.push_back(path);
  }
  int readable = 0;
  for (const std::string& ring_path : paths) {
    auto reader = RingReader::Open(ring_path);
    if (!reader.ok()) {
      err << "collwatch dump: " << reader.status().message() << "\n";
      continue;
    }
    ++readable;
    RingContents contents = ReadWholeRing(*std::move(reader));
    if (format == DumpFormat::kText) {
      PrintRingText(contents, out);
      continue;
    }
    // Ring strings (host, job, region names) may be any bytes: shown as U+FFFD where not
    // UTF-8, which JSON requires.
    constexpr auto kReplace = nlohmann::json::error_handler_t::replace;
    out << RingToJson(contents).dump(-1, ' ', false, kReplace) << "\n";
    for (const IndexedRecord& item : contents.batch.records) {
      out << RecordToJson(*contents.reader, item).dump(-1, ' ', false, kReplace) << "\n";
    }
  }
  if (readable == 0) return absl::InvalidArgumentError("no readable ring");
  return absl::OkStatus();
}

}  // namespace collwatch
