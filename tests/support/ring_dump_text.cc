// Reading `collwatch dump` text: each column as cli/ring_dump.cc prints it, names mapped
// back through ring/ring_names.h, the one table that prints them.
#include "tests/support/ring_dump_text.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "ring/ring_names.h"

namespace collwatch::testing {
namespace {

using ring::ApiFn;
using ring::RecordKind;

template <typename Value>
using NameTable = std::map<std::string, Value>;

// The inverse of a ring_names.h function over the values [0, limit), without the name it
// gives values it does not know.
template <typename Value, typename NameOf>
NameTable<Value> InverseOf(NameOf name_of, int limit, absl::string_view unknown) {
  NameTable<Value> values;
  for (int value = 0; value < limit; ++value) {
    std::string name = name_of(static_cast<Value>(value));
    if (name != unknown) values.emplace(std::move(name), static_cast<Value>(value));
  }
  return values;
}

const NameTable<RecordKind>& RecordKinds() {
  static const auto* kinds = new NameTable<RecordKind>(
      InverseOf<RecordKind>([](RecordKind kind) { return RecordKindName(kind); }, 1 << 16, "unknown"));
  return *kinds;
}

// Single flag bits by name; bits FlagNames leaves unnamed are absent.
const NameTable<uint8_t>& FlagBits() {
  static const auto* bits = [] {
    auto* table = new NameTable<uint8_t>;
    for (int bit = 0; bit < 8; ++bit) {
      const auto flag = static_cast<uint8_t>(1u << bit);
      if (std::string name = FlagNames(flag); !name.empty()) table->emplace(std::move(name), flag);
    }
    return table;
  }();
  return *bits;
}

// Strict decimal integers and numbers: no sign where the type has none, no spaces, no '+'.
template <typename Int>
bool ParseInt(absl::string_view text, Int* out) {
  const char* end = text.data() + text.size();
  const auto [ptr, error] = std::from_chars(text.data(), end, *out);
  return !text.empty() && error == std::errc() && ptr == end;
}

bool ParseHex64(absl::string_view text, uint64_t* out) {
  const char* end = text.data() + text.size();
  const auto [ptr, error] = std::from_chars(text.data(), end, *out, 16);
  return text.size() == 16 && error == std::errc() && ptr == end;
}

bool ParseDouble(absl::string_view text, double* out) {
  const char* end = text.data() + text.size();
  const auto [ptr, error] = std::from_chars(text.data(), end, *out);
  return !text.empty() && error == std::errc() && ptr == end && std::isfinite(*out);
}

// "key=value" with the expected key.
bool ValueOf(absl::string_view token, absl::string_view key, absl::string_view* value) {
  if (!absl::ConsumePrefix(&token, key) || !absl::ConsumePrefix(&token, "=")) return false;
  *value = token;
  return true;
}

absl::Status LineError(int number, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("line ", number, ": ", what));
}

// One record line's columns, as printf wrote them: fields one space apart, each at least
// its width. The first failure is kept; later reads return empty fields.
class ColumnReader {
 public:
  ColumnReader(absl::string_view line, int number) : line_(line), number_(number) {
    if (!absl::StartsWith(line_, "  ")) Fail("a record line starts with two spaces");
    position_ = 2;
  }

  // Right-aligned (numbers, "-", "lane:index"): never empty, no spaces inside.
  absl::string_view Right(absl::string_view name, size_t width) {
    if (!Separator(name)) return {};
    const size_t token = line_.find_first_not_of(' ', position_);
    if (token == absl::string_view::npos) return Fail(absl::StrCat(name, ": missing"));
    const size_t end = std::min(line_.find(' ', token), line_.size());
    if (end - position_ < width) return Fail(absl::StrCat(name, ": column misaligned"));
    position_ = end;
    return line_.substr(token, end - token);
  }

  // Left-aligned, padded to `width` with spaces: may be empty, no spaces inside.
  absl::string_view Left(absl::string_view name, size_t width) {
    if (!Separator(name)) return {};
    const size_t end = std::min(line_.find(' ', position_), line_.size());
    const absl::string_view text = line_.substr(position_, end - position_);
    const size_t field_end = position_ + std::max(width, text.size());
    if (field_end > line_.size() || line_.substr(end, field_end - end).find_first_not_of(' ') != absl::string_view::npos) {
      return Fail(absl::StrCat(name, ": column misaligned"));
    }
    position_ = field_end;
    return text;
  }

  // Exactly `width` characters, trailing padding removed (the region: may hold spaces).
  absl::string_view Fixed(absl::string_view name, size_t width) {
    if (!Separator(name)) return {};
    if (position_ + width > line_.size()) return Fail(absl::StrCat(name, ": line too short"));
    const absl::string_view text = absl::StripTrailingAsciiWhitespace(line_.substr(position_, width));
    position_ += width;
    return text;
  }

  // Everything after the last separator.
  absl::string_view Rest(absl::string_view name) {
    if (!Separator(name)) return {};
    const absl::string_view text = line_.substr(position_);
    position_ = line_.size();
    return text;
  }

  absl::string_view Fail(absl::string_view what) {
    if (status_.ok()) status_ = LineError(number_, what);
    position_ = line_.size();
    return {};
  }
  bool ok() const { return status_.ok(); }
  const absl::Status& status() const { return status_; }

 private:
  bool Separator(absl::string_view name) {
    if (!status_.ok()) return false;
    if (!first_) {
      if (position_ >= line_.size() || line_[position_] != ' ') {
        Fail(absl::StrCat(name, ": missing"));
        return false;
      }
      ++position_;
    }
    first_ = false;
    return true;
  }

  absl::string_view line_;
  int number_;
  size_t position_ = 0;
  bool first_ = true;
  absl::Status status_;
};

// A ring while its lines are read.
struct RingInProgress {
  DumpedRing ring;
  uint64_t records_announced = 0;
  uint32_t lanes = 0;
  std::map<std::string, uint32_t> region_ids;  // name -> writer id
  std::map<std::pair<uint32_t, uint64_t>, size_t> positions;  // (lane, index) -> record
};
constexpr size_t kReturnedInPlace = SIZE_MAX;  // a position whose enter and return are both read

// "  host=vm job=local pid=1762 rank=0 ranks=0-1 local_rank=0 world_size=2 state=exited exit_code=1 (writer gone)"
// ranks= (every rank the process's records name) is derived again from the
// records, and dumps made before it was printed lack it; exit_code= is there
// only when the ring recorded one.
absl::Status ParseIdentity(absl::string_view line, int number, DumpedRing* ring) {
  absl::string_view rest = line;
  if (!absl::ConsumePrefix(&rest, "  host=")) return LineError(number, "expected '  host=' after a ring line");
  const size_t job = rest.find(" job=");
  const size_t pid = rest.find(" pid=", job == absl::string_view::npos ? 0 : job);
  if (job == absl::string_view::npos || pid == absl::string_view::npos) return LineError(number, "expected job= and pid=");
  ring->info.host = std::string(rest.substr(0, job));
  ring->job = std::string(rest.substr(job + 5, pid - job - 5));
  rest.remove_prefix(pid + 1);
  bool writer_gone = false;
  if (absl::ConsumeSuffix(&rest, " (writer gone)")) writer_gone = true;
  std::vector<absl::string_view> tokens = absl::StrSplit(rest, ' ');
  absl::string_view pid_text, rank_text, ranks_text, local_rank_text, world_size_text, state, exit_code_text;
  if (tokens.size() > 2 && ValueOf(tokens[2], "ranks", &ranks_text)) tokens.erase(tokens.begin() + 2);
  if (tokens.size() == 6 && ValueOf(tokens[5], "exit_code", &exit_code_text)) tokens.pop_back();
  if (tokens.size() != 5 || !ValueOf(tokens[0], "pid", &pid_text) || !ValueOf(tokens[1], "rank", &rank_text) ||
      !ValueOf(tokens[2], "local_rank", &local_rank_text) || !ValueOf(tokens[3], "world_size", &world_size_text) ||
      !ValueOf(tokens[4], "state", &state)) {
    return LineError(number, "expected pid= rank= [ranks=] local_rank= world_size= state= [exit_code=]");
  }
  if (!ParseInt(pid_text, &ring->info.pid) || !ParseInt(rank_text, &ring->info.global_rank) ||
      !ParseInt(local_rank_text, &ring->local_rank) || !ParseInt(world_size_text, &ring->info.world_size)) {
    return LineError(number, "pid, rank, local_rank and world_size must be integers");
  }
  if (!exit_code_text.empty()) {
    int32_t exit_code = 0;
    if (!ParseInt(exit_code_text, &exit_code)) return LineError(number, "exit_code must be an integer");
    ring->exit_code = exit_code;
  }
  // As `collwatch analyze` reads a ring (cli/trace_loader.cc); the names are
  // cli/ring_dump.cc's WriterStateName.
  if (state == "running") {
    ring->status = writer_gone ? ProcessStatus::kDead : ProcessStatus::kRunning;
  } else if (state == "exited") {
    ring->status = ProcessStatus::kExited;
  } else if (state == "disabled") {
    ring->status = ProcessStatus::kDisabled;
  } else {
    return LineError(number, absl::StrCat("unknown writer state '", state, "'"));
  }
  return absl::OkStatus();
}

// "  records=6 lost=0 torn=0 dropped=0 lanes=4 x 32768 records"
absl::Status ParseCounts(absl::string_view line, int number, RingInProgress* progress) {
  const std::vector<absl::string_view> tokens = absl::StrSplit(line, ' ', absl::SkipEmpty());
  absl::string_view records, lost, torn, dropped, lanes;
  uint64_t lost_count = 0, torn_count = 0, dropped_count = 0, lane_capacity = 0;
  if (!absl::StartsWith(line, "  ") || tokens.size() != 8 || !ValueOf(tokens[0], "records", &records) ||
      !ValueOf(tokens[1], "lost", &lost) || !ValueOf(tokens[2], "torn", &torn) ||
      !ValueOf(tokens[3], "dropped", &dropped) || !ValueOf(tokens[4], "lanes", &lanes) || tokens[5] != "x" ||
      tokens[7] != "records") {
    return LineError(number, "expected records= lost= torn= dropped= lanes=N x N records");
  }
  if (!ParseInt(records, &progress->records_announced) || !ParseInt(lost, &lost_count) ||
      !ParseInt(torn, &torn_count) || !ParseInt(dropped, &dropped_count) || !ParseInt(lanes, &progress->lanes) ||
      !ParseInt(tokens[6], &lane_capacity)) {
    return LineError(number, "the counts must be unsigned integers");
  }
  progress->ring.lost_records = lost_count + torn_count + dropped_count;
  progress->ring.lanes = progress->lanes;
  return absl::OkStatus();
}

absl::Status ParseColumnNames(absl::string_view line, int number) {
  static constexpr absl::string_view kColumns[] = {"lane:index", "t_ms", "kind",  "fn",    "comm",
                                                  "rank",       "seq",  "count", "dtype", "op",
                                                  "peer",       "group", "region", "result/flags"};
  const std::vector<absl::string_view> names = absl::StrSplit(line, ' ', absl::SkipEmpty());
  if (!std::equal(names.begin(), names.end(), std::begin(kColumns), std::end(kColumns))) {
    return LineError(number, "expected the column names line");
  }
  return absl::OkStatus();
}

// "r=0", "r=0 ref=1:4", then the flags where any are set ("" when none has a name).
struct ResultColumn {
  int32_t result = 0;
  bool has_ref = false;
  uint32_t ref_lane = 0;
  uint64_t ref_index = 0;
  uint32_t call_path_id = 0;
  bool has_flags = false;
  uint8_t flags = 0;
};

absl::Status ParseResultColumn(absl::string_view text, bool expect_ref, int number, ResultColumn* out) {
  absl::string_view rest = text;
  const size_t space = rest.find(' ');
  absl::string_view result;
  if (!ValueOf(rest.substr(0, space), "r", &result) || !ParseInt(result, &out->result)) {
    return LineError(number, "result: expected r=N");
  }
  rest = space == absl::string_view::npos ? absl::string_view() : rest.substr(space);
  if (expect_ref) {
    const size_t end = rest.find(' ', 1);
    const std::vector<absl::string_view> parts =
        absl::StrSplit(absl::StripPrefix(rest.substr(0, end), " ref="), absl::MaxSplits(':', 1));
    if (!absl::StartsWith(rest, " ref=") || parts.size() != 2 || !ParseInt(parts[0], &out->ref_lane) ||
        !ParseInt(parts[1], &out->ref_index) || out->ref_lane > UINT16_MAX) {
      return LineError(number, "expected ref=LANE:INDEX after the result");
    }
    out->has_ref = true;
    rest = end == absl::string_view::npos ? absl::string_view() : rest.substr(end);
  }
  if (absl::StartsWith(rest, " path=")) {
    const size_t end = rest.find(' ', 1);
    if (!ParseInt(rest.substr(6, end == absl::string_view::npos ? absl::string_view::npos : end - 6), &out->call_path_id)) {
      return LineError(number, "expected path=ID");
    }
    rest = end == absl::string_view::npos ? absl::string_view() : rest.substr(end);
  }
  if (rest.empty()) return absl::OkStatus();
  out->has_flags = true;  // " " then FlagNames, which may name none of the bits set
  rest.remove_prefix(1);
  if (rest.empty()) return absl::OkStatus();
  for (absl::string_view name : absl::StrSplit(rest, '|')) {
    const auto bit = FlagBits().find(std::string(name));
    if (bit == FlagBits().end()) return LineError(number, absl::StrCat("unknown flag '", name, "'"));
    out->flags |= bit->second;
  }
  return absl::OkStatus();
}

template <typename Value>
bool Lookup(const NameTable<Value>& table, absl::string_view name, Value* out) {
  const auto it = table.find(std::string(name));
  if (it == table.end()) return false;
  *out = it->second;
  return true;
}

// One record line (cli/ring_dump.cc, PrintRingText):
//   "  %10s %12.3f %-8s %-23s %016x %7s %6d %10d %-10s %-8s %5s %5d %-28s %s"
absl::Status ParseRecord(absl::string_view line, int number, DumpRegions regions, RingInProgress* progress) {
  ColumnReader columns(line, number);
  const absl::string_view position = columns.Right("lane:index", 10);
  const absl::string_view t_ms = columns.Right("t_ms", 12);
  const absl::string_view kind = columns.Left("kind", 8);
  const absl::string_view fn = columns.Left("fn", 23);
  const absl::string_view comm = columns.Right("comm", 16);
  const absl::string_view rank = columns.Right("rank", 7);
  const absl::string_view seq = columns.Right("seq", 6);
  const absl::string_view count = columns.Right("count", 10);
  const absl::string_view dtype = columns.Left("dtype", 10);
  const absl::string_view op = columns.Left("op", 8);
  const absl::string_view peer = columns.Right("peer", 5);
  const absl::string_view group = columns.Right("group", 5);
  const absl::string_view region = columns.Fixed("region", 28);
  const absl::string_view result = columns.Rest("result/flags");
  if (!columns.ok()) return columns.status();

  DumpedRecord item;
  item.line = number;
  ring::Record& record = item.record;
  const std::vector<absl::string_view> lane_index = absl::StrSplit(position, absl::MaxSplits(':', 1));
  if (lane_index.size() != 2 || !ParseInt(lane_index[0], &item.lane) || !ParseInt(lane_index[1], &item.index)) {
    return LineError(number, "lane:index: expected two unsigned integers");
  }
  if (item.lane >= progress->lanes) return LineError(number, absl::StrCat("lane ", item.lane, ": the ring has ", progress->lanes));
  double t = 0;
  // Past the analyzer's clock range (a wrapped difference of a damaged ring) is damage too.
  if (!ParseDouble(t_ms, &t) || t < 0 || t * 1e6 > static_cast<double>(kMaxTimeNs - kDumpMonotonicOriginNs)) {
    return LineError(number, "t_ms: expected a time in ms, from 0 to the analyzer's clock range");
  }
  record.t_ns = kDumpMonotonicOriginNs + static_cast<uint64_t>(std::llround(t * 1e6));
  RecordKind record_kind{};
  if (!Lookup(RecordKinds(), kind, &record_kind)) return LineError(number, absl::StrCat("unknown kind '", kind, "'"));
  record.kind = static_cast<uint16_t>(record_kind);
  const std::optional<ApiFn> api_fn = OpByName(std::string_view(fn.data(), fn.size()));
  if (!api_fn) return LineError(number, absl::StrCat("unknown fn '", fn, "'"));
  record.fn = static_cast<uint16_t>(*api_fn);
  if (!ParseHex64(comm, &record.comm_id)) return LineError(number, "comm: expected 16 hex digits");
  if (rank == "-") {
    record.rank = ring::kUnset;
    record.nranks = ring::kUnset;
  } else {
    const std::vector<absl::string_view> parts = absl::StrSplit(rank, absl::MaxSplits('/', 1));
    if (parts.size() != 2 || !ParseInt(parts[0], &record.rank) || !ParseInt(parts[1], &record.nranks)) {
      return LineError(number, "rank: expected RANK/NRANKS or -");
    }
  }
  if (!ParseInt(seq, &record.seq)) return LineError(number, "seq: expected an unsigned integer");
  if (!ParseInt(count, &record.count)) return LineError(number, "count: expected an unsigned integer");
  const std::optional<uint8_t> dtype_value = DtypeByName(std::string_view(dtype.data(), dtype.size()));
  if (!dtype_value) return LineError(number, absl::StrCat("unknown dtype '", dtype, "'"));
  record.dtype = *dtype_value;
  const std::optional<int32_t> redop = RedOpByName(std::string_view(op.data(), op.size()));
  if (!redop) return LineError(number, absl::StrCat("unknown reduce op '", op, "'"));
  record.redop = *redop;
  if (peer == "-") {
    record.root_or_peer = ring::kUnset;
  } else if (!ParseInt(peer, &record.root_or_peer)) {
    return LineError(number, "peer: expected an integer or -");
  }
  if (!ParseInt(group, &record.group_id)) return LineError(number, "group: expected an unsigned integer");
  if (!region.empty() && regions == DumpRegions::kKeep) {
    auto [it, added] = progress->region_ids.emplace(std::string(region), progress->region_ids.size() + 1);
    if (added) progress->ring.region_names.emplace(it->second, it->first);
    record.region_id = it->second;
  }

  const bool enter = record_kind == RecordKind::kEnter;
  ResultColumn parsed;
  if (absl::Status status = ParseResultColumn(result, !enter, number, &parsed); !status.ok()) return status;
  record.result = parsed.result;
  record.flags = parsed.flags;
  record.ref_lane = static_cast<uint16_t>(parsed.ref_lane);
  record.ref_index = parsed.ref_index;
  record.call_path_id = parsed.call_path_id;
  // A flags field naming nothing holds the one flag FlagNames does not name.
  if (parsed.has_flags && parsed.flags == 0) record.flags |= ring::kFlagReturnsInPlace;

  // Each (lane, index) once, but for a return written in place: the ring reader shows it
  // at its enter's position, referring to itself, right after that enter.
  const std::pair<uint32_t, uint64_t> key{item.lane, item.index};
  const auto seen = progress->positions.find(key);
  const bool in_place_return = record_kind == RecordKind::kReturn && parsed.ref_lane == item.lane &&
                               parsed.ref_index == item.index;
  if (in_place_return) {
    if (seen == progress->positions.end() || seen->second == kReturnedInPlace ||
        progress->ring.records[seen->second].record.kind != static_cast<uint16_t>(RecordKind::kEnter)) {
      return LineError(number, "a return in place without its enter before it");
    }
    progress->ring.records[seen->second].record.flags |= ring::kFlagReturnsInPlace;
    record.flags |= ring::kFlagReturnsInPlace;
    seen->second = kReturnedInPlace;
  } else if (seen != progress->positions.end()) {
    return LineError(number, absl::StrCat("position ", item.lane, ":", item.index, " appears twice"));
  } else {
    progress->positions.emplace(key, progress->ring.records.size());
  }
  progress->ring.records.push_back(item);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<DumpedJob> ParseRingDumpText(std::string_view std_text, DumpRegions regions) {
  const absl::string_view text(std_text.data(), std_text.size());
  enum class Expect { kRing, kIdentity, kCounts, kColumns, kRecords };
  Expect expect = Expect::kRing;
  DumpedJob job;
  RingInProgress progress;
  auto finish_ring = [&]() -> absl::Status {
    if (progress.ring.records.size() != progress.records_announced) {
      return LineError(progress.ring.line, absl::StrCat("the ring announces ", progress.records_announced,
                                                        " records; ", progress.ring.records.size(), " follow"));
    }
    job.rings.push_back(std::move(progress.ring));
    progress = RingInProgress();
    return absl::OkStatus();
  };
  std::vector<absl::string_view> lines = absl::StrSplit(text, '\n');
  if (!lines.empty() && lines.back().empty()) lines.pop_back();  // the last line's newline
  for (size_t i = 0; i < lines.size(); ++i) {
    const absl::string_view line = lines[i];
    const int number = static_cast<int>(i) + 1;
    absl::Status status;
    if (absl::StartsWith(line, "ring ")) {
      if (expect != Expect::kRing && expect != Expect::kRecords) {
        return LineError(number, "a ring line before the previous ring's header ended");
      }
      if (expect == Expect::kRecords) status = finish_ring();
      progress.ring.path = std::string(line.substr(5));
      progress.ring.line = number;
      if (progress.ring.path.empty()) return LineError(number, "a ring line without a path");
      expect = Expect::kIdentity;
    } else if (expect == Expect::kRing) {
      return LineError(number, "expected a 'ring PATH' line");
    } else if (expect == Expect::kIdentity) {
      status = ParseIdentity(line, number, &progress.ring);
      progress.ring.info.realtime_offset_ns = RealtimeOffsetNs(kDumpRealtimeOriginNs, kDumpMonotonicOriginNs);
      expect = Expect::kCounts;
    } else if (expect == Expect::kCounts) {
      status = ParseCounts(line, number, &progress);
      expect = Expect::kColumns;
    } else if (expect == Expect::kColumns) {
      status = ParseColumnNames(line, number);
      expect = Expect::kRecords;
    } else if (absl::StartsWith(line, "  call path ")) {
      continue;  // the frames behind path=ID: not read back
    } else {
      status = ParseRecord(line, number, regions, &progress);
    }
    if (!status.ok()) return status;
  }
  if (expect == Expect::kRing) return absl::InvalidArgumentError("no 'ring' line: not a collwatch dump");
  if (expect != Expect::kRecords) return LineError(progress.ring.line, "the ring's header is cut short");
  if (absl::Status status = finish_ring(); !status.ok()) return status;
  return job;
}

absl::StatusOr<DumpedJob> ReadRingDumpText(const std::string& path, DumpRegions regions) {
  std::ifstream file(path);
  if (!file) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  std::stringstream text;
  text << file.rdbuf();
  absl::StatusOr<DumpedJob> job = ParseRingDumpText(text.str(), regions);
  if (!job.ok()) return absl::Status(job.status().code(), absl::StrCat(path, ": ", job.status().message()));
  return job;
}

int64_t RecordRealtimeNs(const DumpedRing& ring, const DumpedRecord& record) {
  return static_cast<int64_t>(record.record.t_ns) + ring.info.realtime_offset_ns;
}

int64_t FirstRecordNs(const DumpedJob& job) {
  int64_t first = 0;
  for (const DumpedRing& ring : job.rings) {
    for (const DumpedRecord& record : ring.records) {
      const int64_t t = RecordRealtimeNs(ring, record);
      if (first == 0 || t < first) first = t;
    }
  }
  return first;
}

int64_t LastRecordNs(const DumpedJob& job) {
  int64_t last = 0;
  for (const DumpedRing& ring : job.rings) {
    for (const DumpedRecord& record : ring.records) last = std::max(last, RecordRealtimeNs(ring, record));
  }
  return last;
}

DumpedJobFeeder::DumpedJobFeeder(const DumpedJob& job, analyzer::JobModel* model)
    : job_(job), model_(model), next_(job.rings.size(), 0) {
  for (const DumpedRing& ring : job_.rings) {
    const analyzer::ProcessId process = model_->AddProcess(ring.info);
    for (const auto& [id, name] : ring.region_names) model_->AddRegionName(process, id, name);
    processes_.push_back(process);
  }
}

void DumpedJobFeeder::FeedUntil(int64_t realtime_ns) {
  for (size_t r = 0; r < job_.rings.size(); ++r) {
    const DumpedRing& ring = job_.rings[r];
    for (size_t& next = next_[r]; next < ring.records.size(); ++next) {
      const DumpedRecord& item = ring.records[next];
      if (RecordRealtimeNs(ring, item) > realtime_ns) break;
      model_->AddRecord(processes_[r], item.lane, item.index, item.record);
    }
  }
}

void DumpedJobFeeder::FeedRest() {
  FeedUntil(INT64_MAX);
  for (size_t r = 0; r < job_.rings.size(); ++r) {
    model_->SetStatus(processes_[r], job_.rings[r].status, /*heartbeat_writer_ns=*/0, job_.rings[r].lost_records);
    if (job_.rings[r].exit_code) model_->SetExitCode(processes_[r], *job_.rings[r].exit_code);
  }
}

}  // namespace collwatch::testing
