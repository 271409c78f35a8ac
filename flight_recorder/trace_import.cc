// Dumps -> trace store. The rules for turning an entry into a call live in one place
// (CallOfEntry and the merging in ConvertDump); docs/flight-recorder.md states them.
#include "flight_recorder/trace_import.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <tuple>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "files/safe_files.h"
#include "ring/hash.h"
#include "ring/ring_format.h"
#include "store/trace_store.h"

namespace collwatch::flight_recorder {
namespace {

namespace fs = std::filesystem;
using ring::ApiFn;

// Where an operation's NCCL element count comes from.
enum class CountFrom : uint8_t { kInput, kOutput, kOne };

struct OpShape {
  ApiFn fn = ApiFn::kNone;
  CountFrom count = CountFrom::kInput;
  bool group_end = false;  // the entry that closes a coalesced group (its members precede it)
};

// A profiling name's operation ("nccl:_all_gather_base" -> all-gather, count from the input):
// the ProcessGroupNCCL names of PyTorch 2.4 to 2.11 (docs/flight-recorder.md).
OpShape ShapeOf(std::string_view profiling_name) {
  std::string_view op = profiling_name;
  if (const size_t colon = op.find(':'); colon != std::string_view::npos) op = op.substr(colon + 1);
  if (const size_t space = op.find(' '); space != std::string_view::npos) op = op.substr(0, space);
  static const std::map<std::string_view, OpShape, std::less<>> kShapes = {
      {"all_reduce", {ApiFn::kAllReduce}},
      {"allreduce_coalesced", {ApiFn::kAllReduce}},
      {"all_reduce_sparse", {ApiFn::kAllReduce}},
      {"all_reduce_barrier", {ApiFn::kAllReduce, CountFrom::kOne}},
      {"barrier", {ApiFn::kAllReduce, CountFrom::kOne}},
      {"broadcast", {ApiFn::kBroadcast}},
      {"_broadcast_oop", {ApiFn::kBroadcast}},
      {"reduce", {ApiFn::kReduce}},
      {"_reduce_oop", {ApiFn::kReduce}},
      {"all_gather", {ApiFn::kAllGather}},
      {"_all_gather_base", {ApiFn::kAllGather}},
      {"all_gather_into_tensor_coalesced", {ApiFn::kAllGather}},
      {"allgather_into_tensor_coalesced", {ApiFn::kAllGather}},
      {"all_gather_single", {ApiFn::kAllGather}},
      {"all_gather_v", {ApiFn::kAllGather}},
      {"ALLGATHER_coalesced", {ApiFn::kAllGather, CountFrom::kInput, true}},
      {"reduce_scatter", {ApiFn::kReduceScatter, CountFrom::kOutput}},
      {"_reduce_scatter_base", {ApiFn::kReduceScatter, CountFrom::kOutput}},
      {"reduce_scatter_tensor_coalesced", {ApiFn::kReduceScatter, CountFrom::kOutput}},
      {"reduce_scatter_single", {ApiFn::kReduceScatter, CountFrom::kOutput}},
      {"reduce_scatter_v", {ApiFn::kReduceScatter, CountFrom::kOutput}},
      {"REDUCE_SCATTER_coalesced", {ApiFn::kReduceScatter, CountFrom::kOutput, true}},
      {"all_to_all", {ApiFn::kAlltoAll}},
      {"all_to_all_single", {ApiFn::kAlltoAll}},
      {"all_to_all_v_single", {ApiFn::kAlltoAll}},
      {"gather", {ApiFn::kGather}},
      {"scatter", {ApiFn::kScatter, CountFrom::kOutput}},
      {"send", {ApiFn::kSend}},
      {"recv", {ApiFn::kRecv, CountFrom::kOutput}},
      {"coalesced", {ApiFn::kNone, CountFrom::kInput, true}},
  };
  auto it = kShapes.find(op);
  return it == kShapes.end() ? OpShape{} : it->second;
}

// A c10 ScalarType name (format 2.1 on; 2.0 wrote C++ type names) as ncclDataType_t, the
// way ProcessGroupNCCL maps it. kNoDtype: NCCL has no such type.
uint8_t DtypeOf(std::string_view name) {
  static const std::map<std::string_view, uint8_t, std::less<>> kTypes = {
      {"Char", 0},          {"signed char", 0},  {"Byte", 1},          {"unsigned char", 1},
      {"Bool", 1},          {"bool", 1},         {"Int", 2},           {"int", 2},
      {"UInt32", 3},        {"Long", 4},         {"long int", 4},      {"long", 4},
      {"int64_t", 4},       {"UInt64", 5},       {"Half", 6},          {"c10::Half", 6},
      {"Float", 7},         {"float", 7},        {"ComplexFloat", 7},  {"Double", 8},
      {"double", 8},        {"ComplexDouble", 8}, {"BFloat16", 9},     {"c10::BFloat16", 9},
      {"Float8_e4m3fn", 10}, {"Float8_e5m2", 11},
  };
  auto it = kTypes.find(name);
  return it == kTypes.end() ? ring::kNoDtype : it->second;
}

uint64_t Elements(const std::vector<std::vector<int64_t>>& shapes) {
  uint64_t total = 0;
  for (const std::vector<int64_t>& shape : shapes) {
    uint64_t numel = 1;
    for (int64_t dim : shape) {
      if (dim < 0 || __builtin_mul_overflow(numel, static_cast<uint64_t>(dim), &numel)) return UINT64_MAX;
    }
    if (__builtin_add_overflow(total, numel, &total)) return UINT64_MAX;
  }
  return total;
}

std::string GroupText(const DumpGroup& group) {
  return group.desc.empty() || group.desc == "undefined" ? group.name : absl::StrCat(group.name, " (", group.desc, ")");
}

// Equal on every rank of the group: its name and members (split groups may reuse a name).
uint64_t CommIdOf(const DumpGroup& group) {
  const std::string key = absl::StrCat(group.name, "|", absl::StrJoin(group.ranks, ","));
  const uint64_t id = Hash64(key.data(), key.size(), 0x46524c4f47ull);
  return id == 0 ? 1 : id;
}

// One call the import makes: an entry, or the entries of one coalesced group merged.
struct ImportedCall {
  const DumpEntry* first = nullptr;
  const DumpGroup* group = nullptr;
  uint64_t comm_id = 0;    // the group's communicator (CommIdOf)
  int32_t group_rank = 0;  // the dump's rank within the group
  OpShape shape;
  uint64_t count = 0;
  uint8_t dtype = ring::kNoDtype;
  int32_t peer = ring::kUnset;
  uint64_t seq = 0;
  int64_t created_ns = 0;
  int64_t completed_ns = 0;  // 0: not completed
  bool all_completed = true;
};

struct RankContext {
  const RankDump* dump = nullptr;
  bool history_cut = false;
  std::map<std::string, uint64_t> first_seq;  // per group name: its first collective kept
  uint64_t p2p_left_out = 0;
  uint64_t unknown_ops = 0;
  uint64_t unknown_dtypes = 0;
  uint64_t markers_alone = 0;  // coalesced groups whose members were not recorded
  uint64_t outside_group = 0;  // entries of a group the dump's pg_config lacks or without this rank
};

int32_t PeerOf(std::string_view profiling_name, bool send) {
  // "nccl:send 0->1" (to 1), "nccl:recv 1<-0" (from 0): group ranks.
  const std::string_view arrow = send ? "->" : "<-";
  const size_t at = profiling_name.rfind(arrow);
  int32_t peer = ring::kUnset;
  if (at == std::string_view::npos || !absl::SimpleAtoi(std::string(profiling_name.substr(at + 2)), &peer) || peer < 0) {
    return ring::kUnset;
  }
  return peer;
}

// The calls of one dump, coalesced groups merged, in the order they were enqueued.
std::vector<ImportedCall> CallsOf(RankContext& context) {
  const FlightRecorderDump& dump = context.dump->dump;
  std::vector<ImportedCall> calls;
  std::map<std::string, size_t> last_collective;  // per group: index into calls
  std::map<std::tuple<std::string, int32_t, bool>, uint64_t> p2p_seq;
  // Per group name, once: its communicator and the dump's rank in it (-1: not a member).
  std::map<std::string, std::pair<uint64_t, int32_t>> placements;
  for (const DumpEntry& entry : dump.entries) {
    auto group_it = dump.groups.find(entry.group_name);
    if (group_it == dump.groups.end()) {
      ++context.outside_group;
      continue;
    }
    const DumpGroup& group = group_it->second;
    auto [placement, fresh] = placements.try_emplace(group.name);
    if (fresh) {
      const auto member = std::find(group.ranks.begin(), group.ranks.end(), context.dump->rank);
      placement->second = {CommIdOf(group),
                           member == group.ranks.end() ? -1 : static_cast<int32_t>(member - group.ranks.begin())};
    }
    const auto [comm_id, group_rank] = placement->second;
    if (group_rank < 0) {
      ++context.outside_group;
      continue;
    }
    const OpShape shape = ShapeOf(entry.profiling_name);
    if (shape.fn == ApiFn::kNone && !shape.group_end) {
      ++context.unknown_ops;
      continue;
    }
    const uint64_t count = shape.count == CountFrom::kOne      ? 1
                           : shape.count == CountFrom::kOutput ? Elements(entry.output_sizes)
                                                               : Elements(entry.input_sizes);
    const std::vector<std::string>& dtypes = entry.input_dtypes.empty() ? entry.output_dtypes : entry.input_dtypes;
    const uint8_t dtype = dtypes.empty() ? ring::kNoDtype : DtypeOf(dtypes.front());
    if (!dtypes.empty() && dtype == ring::kNoDtype) ++context.unknown_dtypes;
    const int64_t completed = entry.completed() ? std::max(entry.time_completed_ns, entry.time_created_ns) : 0;
    if (entry.is_p2p || ring::IsP2p(shape.fn)) {
      if (shape.group_end) continue;  // a batch of sends and receives: each was recorded
      if (!ring::IsP2p(shape.fn)) {  // a collective's name on a point-to-point entry
        ++context.unknown_ops;
        continue;
      }
      if (context.history_cut) {
        ++context.p2p_left_out;
        continue;
      }
      ImportedCall call;
      call.first = &entry;
      call.group = &group;
      call.comm_id = comm_id;
      call.group_rank = group_rank;
      call.shape = shape;
      call.count = count;
      call.dtype = dtype;
      call.peer = PeerOf(entry.profiling_name, shape.fn == ApiFn::kSend);
      call.seq = ++p2p_seq[{group.name, call.peer, shape.fn == ApiFn::kSend}];
      call.created_ns = entry.time_created_ns;
      call.completed_ns = completed;
      call.all_completed = entry.completed();
      calls.push_back(call);
      continue;
    }
    if (entry.collective_seq_id <= 0) {
      ++context.unknown_ops;
      continue;
    }
    const auto seq = static_cast<uint64_t>(entry.collective_seq_id);
    auto last = last_collective.find(group.name);
    if (last != last_collective.end() && calls[last->second].seq == seq) {
      // Another member of a coalesced group (or its closing entry): one launch, one call.
      ImportedCall& call = calls[last->second];
      if (shape.group_end) {
        if (shape.fn != ApiFn::kNone) call.shape.fn = shape.fn;
      } else {
        call.count = call.count == UINT64_MAX || count == UINT64_MAX ? UINT64_MAX : call.count + count;
        if (call.shape.fn == ApiFn::kNone) call.shape = shape;
        if (call.dtype == ring::kNoDtype) call.dtype = dtype;
      }
      call.all_completed = call.all_completed && entry.completed();
      call.completed_ns = call.all_completed ? std::max(call.completed_ns, completed) : 0;
      continue;
    }
    ImportedCall call;
    call.first = &entry;
    call.group = &group;
    call.comm_id = comm_id;
    call.group_rank = group_rank;
    call.shape = shape;
    call.count = shape.group_end ? 0 : count;
    call.dtype = dtype;
    call.seq = seq;
    call.created_ns = entry.time_created_ns;
    call.completed_ns = completed;
    call.all_completed = entry.completed();
    context.first_seq.emplace(group.name, seq);
    last_collective[group.name] = calls.size();
    calls.push_back(call);
  }
  // A closing entry alone: the members were not recorded (format before 2.7).
  std::erase_if(calls, [&](const ImportedCall& call) {
    const bool alone = call.shape.fn == ApiFn::kNone;
    if (alone) ++context.markers_alone;
    return alone;
  });
  return calls;
}

// The moment the dumps describe: PyTorch dumps when its watchdog times a collective out,
// `timeout_ms` after that collective was enqueued; the oldest unfinished entry of each
// rank is the one it timed out on (or would have).
void FindMoment(const std::vector<RankDump>& dumps, ImportRecord* record) {
  int64_t latest = 0, timed_out_at = 0, shortest_timeout_ms = 0;
  std::string basis;
  for (const RankDump& rank : dumps) {
    const DumpEntry* oldest_open = nullptr;
    for (const DumpEntry& entry : rank.dump.entries) {
      latest = std::max({latest, entry.time_created_ns, entry.time_completed_ns});
      if (!entry.completed() && oldest_open == nullptr) oldest_open = &entry;
    }
    if (oldest_open == nullptr || oldest_open->timeout_ms <= 0) continue;
    const int64_t at = oldest_open->time_created_ns + oldest_open->timeout_ms * 1'000'000;
    if (shortest_timeout_ms == 0 || oldest_open->timeout_ms < shortest_timeout_ms) {
      shortest_timeout_ms = oldest_open->timeout_ms;
    }
    if (at > timed_out_at) {
      timed_out_at = at;
      basis = absl::StrCat("rank ", rank.rank, "'s watchdog timeout (", oldest_open->timeout_ms / 1000.0,
                           " s) on its oldest unfinished collective, ", oldest_open->profiling_name, " #",
                           oldest_open->collective_seq_id, " of group ", oldest_open->group_name);
    }
  }
  if (timed_out_at > latest) {
    record->as_of_ns = timed_out_at;
    record->as_of_basis = basis;
    record->stall_after_s = static_cast<double>(shortest_timeout_ms) / 1000.0;
  } else {
    record->as_of_ns = latest;
    record->as_of_basis = "the latest time in the dumps (no unfinished collective with a timeout)";
  }
}

v1::Event EventOf(v1::EventKind kind, uint64_t index, const ImportedCall& call, uint64_t comm_id, int32_t rank,
                  int32_t nranks, int64_t t_ns) {
  v1::Event event;
  event.set_index(index);
  event.set_kind(kind);
  event.set_fn(static_cast<uint32_t>(call.shape.fn));
  event.set_comm_id(comm_id);
  event.set_rank(rank);
  event.set_nranks(nranks);
  event.set_seq(call.seq);
  event.set_count(call.count);
  event.set_dtype(call.dtype);
  event.set_redop(ring::kUnset);  // the Flight Recorder does not record it
  event.set_root_or_peer(call.peer);
  event.set_t_ns(static_cast<uint64_t>(std::max<int64_t>(t_ns, 1)));
  event.set_lane(0);
  return event;
}

v1::StreamEventsRequest ConvertDump(RankContext& context, const std::string& job, int32_t world_size,
                                    int64_t as_of_ns) {
  const RankDump& rank_dump = *context.dump;
  v1::StreamEventsRequest batch;
  v1::RankIdentity& identity = *batch.mutable_rank();
  identity.set_job(job);
  identity.set_host(fs::path(rank_dump.file).filename().string());  // no host or pid in a dump
  identity.set_pid(0);
  identity.set_rank(rank_dump.rank);
  identity.set_local_rank(ring::kUnset);
  identity.set_world_size(world_size);
  identity.set_ring_path(rank_dump.file);
  identity.set_ring_capacity(rank_dump.dump.entries.size());
  identity.set_lane_count(1);  // CLOCK_REALTIME times: offset 0

  std::map<std::string, uint32_t> path_ids;  // serialised frames -> call path id
  uint64_t index = 0;
  for (const ImportedCall& call : CallsOf(context)) {
    const auto nranks = static_cast<int32_t>(call.group->ranks.size());
    const int32_t rank = call.group_rank;
    const uint64_t comm_id = call.comm_id;
    uint32_t path_id = 0;
    if (!call.first->frames.empty()) {
      std::string key;
      for (const DumpFrame& frame : call.first->frames) absl::StrAppend(&key, frame.file, "\n", frame.function, "\n", frame.line, "\n");
      auto [it, fresh] = path_ids.emplace(key, static_cast<uint32_t>(path_ids.size() + 1));
      path_id = it->second;
      if (fresh) {
        v1::CallPath& path = *batch.add_call_paths();
        path.set_id(path_id);
        for (const DumpFrame& frame : call.first->frames) {
          if (path.frames_size() == static_cast<int>(ring::kMaxCallPathFrames)) {
            path.set_truncated(true);
            break;
          }
          v1::CallFrame& out = *path.add_frames();
          out.set_file(frame.file);
          out.set_function(frame.function);
          out.set_line(frame.line);
        }
      }
    }
    const uint64_t enter_index = index;
    v1::Event enter = EventOf(v1::EVENT_KIND_ENTER, index++, call, comm_id, rank, nranks, call.created_ns);
    enter.set_call_path_id(path_id);
    *batch.add_events() = enter;
    // Enqueued: the call returned to Python when the entry was made.
    v1::Event returned = EventOf(v1::EVENT_KIND_RETURN, index++, call, comm_id, rank, nranks, call.created_ns);
    returned.set_ref_index(enter_index);
    *batch.add_events() = returned;
    if (call.all_completed && call.completed_ns > 0) {
      v1::Event complete = EventOf(v1::EVENT_KIND_COMPLETE, index++, call, comm_id, rank, nranks, call.completed_ns);
      complete.set_ref_index(enter_index);
      *batch.add_events() = complete;
    }
  }
  // It was alive when it wrote the dump.
  batch.set_writer_status(v1::WRITER_STATUS_RUNNING);
  batch.set_heartbeat_ns(static_cast<uint64_t>(std::max<int64_t>(as_of_ns, 1)));
  return batch;
}

}  // namespace

Conversion ConvertDumps(const std::vector<RankDump>& dumps, const std::string& job,
                        const std::vector<SkippedFile>& skipped) {
  Conversion conversion;
  ImportRecord& record = conversion.record;
  record.job = job;
  FindMoment(dumps, &record);
  std::set<int32_t> named, dumped;
  int32_t world_size = 0;
  for (const RankDump& rank : dumps) {
    dumped.insert(rank.rank);
    for (const auto& [name, group] : rank.dump.groups) {
      named.insert(group.ranks.begin(), group.ranks.end());
      if (group.desc == "default_pg" || name == "0") world_size = std::max<int32_t>(world_size, group.ranks.size());
    }
  }
  if (world_size == 0 && !named.empty()) world_size = *named.rbegin() + 1;
  std::set_difference(named.begin(), named.end(), dumped.begin(), dumped.end(),
                      std::back_inserter(record.missing_ranks));
  std::vector<RankContext> contexts(dumps.size());
  for (size_t i = 0; i < dumps.size(); ++i) {
    RankContext& context = contexts[i];
    context.dump = &dumps[i];
    context.history_cut = !dumps[i].dump.entries.empty() && dumps[i].dump.entries.front().record_id > 0;
    conversion.ranks.push_back(ConvertDump(context, job, world_size, record.as_of_ns));
    record.dumps.push_back(ImportedDump{dumps[i].file, dumps[i].rank, dumps[i].dump.version,
                                        dumps[i].dump.entries.size(), context.history_cut});
    const std::string who = absl::StrCat("rank ", dumps[i].rank, " (", fs::path(dumps[i].file).filename().string(), ")");
    if (context.p2p_left_out > 0) {
      record.notes.push_back(absl::StrCat(who, ": ", context.p2p_left_out,
                                          " sends and receives left out: its history was cut, so their order "
                                          "per peer is unknown"));
    }
    if (context.unknown_ops > 0) {
      record.notes.push_back(absl::StrCat(who, ": ", context.unknown_ops, " entries of an unknown operation left out"));
    }
    if (context.unknown_dtypes > 0) {
      record.notes.push_back(absl::StrCat(who, ": ", context.unknown_dtypes, " entries of a data type NCCL has no name "
                                                                               "for (compared as \"none\")"));
    }
    if (context.markers_alone > 0) {
      record.notes.push_back(absl::StrCat(who, ": ", context.markers_alone,
                                          " coalesced groups whose operations the dump does not list (format "
                                          "before 2.7): left out"));
    }
    if (context.outside_group > 0) {
      record.notes.push_back(absl::StrCat(who, ": ", context.outside_group,
                                          " entries of a process group its pg_config lacks or does not list it in"));
    }
  }
  // Where the kept histories of a group's ranks start apart: collectives before the
  // latest start are on some ranks only.
  std::map<std::string, std::pair<const DumpGroup*, uint64_t>> latest_start;
  for (const RankContext& context : contexts) {
    if (!context.history_cut) continue;
    for (const auto& [name, seq] : context.first_seq) {
      auto& [group, start] = latest_start[name];
      group = &context.dump->dump.groups.at(name);
      start = std::max(start, seq);
    }
  }
  for (const auto& [name, start] : latest_start) {
    if (start.second <= 1) continue;
    record.cut_groups.push_back(GroupHistory{GroupText(*start.first), CommIdOf(*start.first), start.second});
    for (const RankContext& context : contexts) {
      auto first = context.first_seq.find(name);
      if (!context.history_cut || first == context.first_seq.end()) continue;
      record.notes.push_back(absl::StrCat("rank ", context.dump->rank, "'s Flight Recorder kept its last ",
                                          context.dump->dump.entries.size(), " entries: its history of group ",
                                          GroupText(*start.first), " starts at collective #", first->second));
    }
  }
  SaySkipped(skipped, &record);  // and what is known of each missing rank
  return conversion;
}

absl::StatusOr<ImportRecord> WriteImport(const std::vector<RankDump>& dumps, const ImportOptions& options,
                                         const std::vector<SkippedFile>& skipped) {
  std::error_code error;
  const fs::path out(options.out_dir);
  if (fs::exists(out, error) && !(fs::is_directory(out, error) && fs::is_empty(out, error))) {
    return absl::AlreadyExistsError(absl::StrCat(options.out_dir, " already exists and is not an empty folder"));
  }
  Conversion conversion = ConvertDumps(dumps, options.job, skipped);
  // Written beside, renamed into place once whole: a failure leaves nothing behind.
  const fs::path partial = out.parent_path() / absl::StrCat(".", out.filename().string(), ".importing-", ::getpid());
  fs::remove_all(partial, error);
  auto fail = [&](const absl::Status& status) {
    fs::remove_all(partial, error);
    return status;
  };
  if (!fs::create_directories(partial, error)) {
    return absl::InternalError(absl::StrCat("cannot create ", partial.string(), ": ", error.message()));
  }
  TraceStore store(partial.string(), StoreOptions{});
  for (const v1::StreamEventsRequest& batch : conversion.ranks) {
    absl::StatusOr<std::shared_ptr<RankTraceWriter>> writer = store.Writer(batch.rank());
    if (!writer.ok()) return fail(writer.status());
    absl::StatusOr<AppendResult> appended = (*writer)->Append(batch);
    if (!appended.ok()) return fail(appended.status());
  }
  if (absl::Status status = WriteImportRecord(partial.string(), conversion.record); !status.ok()) return fail(status);
  fs::remove(out, error);  // an empty folder the user made
  fs::rename(partial, out, error);
  if (error) return fail(absl::InternalError(absl::StrCat("cannot move the import into ", options.out_dir, ": ",
                                                          error.message())));
  return conversion.record;
}

absl::StatusOr<ImportRecord> ImportFlightRecorder(const ImportOptions& options) {
  std::vector<SkippedFile> skipped;
  absl::StatusOr<std::vector<RankDump>> dumps = ReadDumps(options.inputs, &skipped);
  if (!dumps.ok()) return dumps.status();
  return WriteImport(*dumps, options, skipped);
}

}  // namespace collwatch::flight_recorder
