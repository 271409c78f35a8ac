// Ring record <-> proto Event, and the other messages of a rank stream. Threading: pure
// functions.
#include "store/event_codec.h"

#include <algorithm>
#include <cctype>
#include <utility>

#include "files/safe_text.h"

namespace collwatch {
namespace {

bool IsInPlaceEnterHalf(uint16_t kind, uint8_t flags) {
  return kind == static_cast<uint16_t>(ring::RecordKind::kEnter) &&
         (flags & ring::kFlagReturnsInPlace) != 0;
}

}  // namespace

std::string WireText(std::string_view text) { return ValidUtf8(text); }

uint64_t LanePosition(uint32_t /*lane*/, uint64_t index, const ring::Record& record) {
  return 2 * index + (IsInPlaceEnterHalf(record.kind, record.flags) ? 0 : 1);
}

uint64_t LanePosition(const v1::Event& event) {
  return 2 * event.index() +
         (IsInPlaceEnterHalf(static_cast<uint16_t>(event.kind()), static_cast<uint8_t>(event.flags()))
              ? 0
              : 1);
}

LaneCursor CursorAt(uint64_t next_position) {
  // An odd position: the kEnter half of that index is stored, its return is not.
  return LaneCursor{next_position / 2, (next_position & 1) != 0};
}

void EventFromRecord(const IndexedRecord& item, v1::Event* event) {
  const ring::Record& r = item.record;
  event->set_index(item.index);
  event->set_lane(item.lane);
  event->set_kind(static_cast<v1::EventKind>(r.kind));
  event->set_fn(r.fn);
  event->set_comm_id(r.comm_id);
  event->set_rank(r.rank);
  event->set_nranks(r.nranks);
  event->set_seq(r.seq);
  event->set_count(r.count);
  event->set_dtype(r.dtype);
  event->set_redop(r.redop);
  event->set_root_or_peer(r.root_or_peer);
  event->set_stream(r.stream);
  event->set_group_id(r.group_id);
  event->set_t_ns(r.t_ns);
  event->set_ref_index(r.ref_index);  // also return_ns of a kEnter returned in place
  event->set_ref_lane(r.ref_lane);
  event->set_region_id(r.region_id);
  event->set_call_path_id(r.call_path_id);
  event->set_tid(r.tid);
  event->set_result(r.result);
  event->set_flags(r.flags);
  event->set_aux0(r.aux0);
  event->set_aux1(r.aux1);
  event->set_aux2(r.aux2);
}

ring::Record RecordFromEvent(const v1::Event& event) {
  ring::Record r{};
  r.kind = static_cast<uint16_t>(event.kind());
  r.fn = static_cast<uint16_t>(event.fn());
  r.dtype = static_cast<uint8_t>(event.dtype());
  r.flags = static_cast<uint8_t>(event.flags());
  r.ref_lane = static_cast<uint16_t>(event.ref_lane());
  r.redop = event.redop();
  r.root_or_peer = event.root_or_peer();
  r.comm_id = event.comm_id();
  r.rank = event.rank();
  r.nranks = event.nranks();
  r.seq = event.seq();
  r.count = event.count();
  r.stream = event.stream();
  r.group_id = event.group_id();
  r.t_ns = event.t_ns();
  r.ref_index = event.ref_index();
  r.region_id = event.region_id();
  r.call_path_id = event.call_path_id();
  r.tid = event.tid();
  r.result = event.result();
  r.aux0 = event.aux0();
  r.aux1 = event.aux1();
  r.aux2 = event.aux2();
  return r;
}

v1::RankIdentity RankIdentityFromRing(const RingIdentity& ring) {
  v1::RankIdentity identity;
  identity.set_job(WireText(ring.job));
  identity.set_host(WireText(ring.host));
  identity.set_pid(ring.pid);
  identity.set_rank(ring.rank);
  identity.set_local_rank(ring.local_rank);
  identity.set_world_size(ring.world_size);
  identity.set_ring_path(WireText(ring.path));
  identity.set_ring_capacity(ring.lane_capacity);
  identity.set_start_realtime_ns(ring.start_realtime_ns);
  identity.set_start_monotonic_ns(ring.start_monotonic_ns);
  identity.set_lane_count(ring.lane_count);
  return identity;
}

v1::CallPath CallPathToWire(uint32_t id, const CallPath& path) {
  v1::CallPath wire;
  wire.set_id(id);
  wire.set_truncated(path.truncated);
  for (const CallFrame& frame : path.frames) {
    v1::CallFrame* to = wire.add_frames();
    to->set_file(WireText(frame.file));
    to->set_function(WireText(frame.function));
    to->set_line(frame.line);
  }
  return wire;
}

CallPath CallPathFromWire(const v1::CallPath& wire) {
  CallPath path;
  path.truncated = wire.truncated();
  // Bounded like the ring: a forged message must not make the model hold more.
  for (int i = 0; i < wire.frames_size() && i < static_cast<int>(ring::kMaxCallPathFrames); ++i) {
    const v1::CallFrame& frame = wire.frames(i);
    path.frames.push_back({frame.file().substr(0, ring::kMaxStringBytes),
                           frame.function().substr(0, ring::kMaxStringBytes), frame.line()});
  }
  path.truncated = path.truncated || wire.frames_size() > static_cast<int>(ring::kMaxCallPathFrames);
  return path;
}

namespace {

std::string BoundedName(const std::string& text) {
  return WireText(text.size() > kMaxWireNameBytes ? std::string_view(text).substr(0, kMaxWireNameBytes) : text);
}

char StateLetter(const std::string& state) {
  return state.size() == 1 && std::isalpha(static_cast<unsigned char>(state[0])) ? state[0] : '?';
}

}  // namespace

v1::ProcessStacks StacksToWire(const stacks::ProcessStacks& stacks, uint64_t request_id, int64_t taken_ns) {
  v1::ProcessStacks wire;
  wire.set_request_id(request_id);
  wire.set_pid(stacks.pid);
  wire.set_state(std::string(1, stacks.state));
  wire.set_program(WireText(stacks.program));
  wire.set_python_version(stacks.python_version);
  wire.set_longest_pause_ns(stacks.longest_pause_ns);
  wire.set_taken_ns(taken_ns);
  for (const std::string& problem : stacks.problems) wire.add_problems(WireText(problem));
  for (const stacks::ThreadStack& thread : stacks.threads) {
    v1::ThreadStack* to = wire.add_threads();
    to->set_tid(thread.tid);
    to->set_name(WireText(thread.name));
    to->set_state(std::string(1, thread.state));
    to->set_unwound(thread.unwound);
    for (const stacks::NativeFrame& frame : thread.native) {
      v1::NativeFrame* native = to->add_native();
      native->set_pc(frame.pc);
      native->set_function(WireText(frame.function));
      native->set_module(WireText(frame.module));
      native->set_file(WireText(frame.file));
      native->set_line(frame.line);
    }
    *to->mutable_python() = CallPathToWire(0, thread.python);
  }
  return wire;
}

stacks::ProcessStacks StacksFromWire(const v1::ProcessStacks& wire) {
  stacks::ProcessStacks stacks;
  stacks.pid = wire.pid();
  stacks.state = StateLetter(wire.state());
  stacks.program = BoundedName(wire.program());
  stacks.python_version = wire.python_version();
  stacks.longest_pause_ns = wire.longest_pause_ns();
  for (int i = 0; i < wire.problems_size() && i < kMaxWireThreads; ++i) {
    stacks.problems.push_back(BoundedName(wire.problems(i)));
  }
  for (int t = 0; t < wire.threads_size() && t < kMaxWireThreads; ++t) {
    const v1::ThreadStack& from = wire.threads(t);
    stacks::ThreadStack thread;
    thread.tid = from.tid();
    thread.name = BoundedName(from.name());
    thread.state = StateLetter(from.state());
    thread.unwound = from.unwound();
    for (int f = 0; f < from.native_size() && f < kMaxWireFrames; ++f) {
      const v1::NativeFrame& native = from.native(f);
      thread.native.push_back({native.pc(), BoundedName(native.function()), BoundedName(native.module()),
                               BoundedName(native.file()), native.line()});
    }
    thread.python = CallPathFromWire(from.python());
    stacks.threads.push_back(std::move(thread));
  }
  return stacks;
}

v1::RegionName RegionNameFromRing(const RingReader& reader, uint32_t region_id) {
  v1::RegionName region;
  region.set_id(region_id);
  region.set_name(WireText(reader.Name(region_id)));
  return region;
}

ProcessInfo ProcessInfoFromIdentity(const v1::RankIdentity& identity) {
  ProcessInfo info;
  info.host = identity.host();
  info.pid = identity.pid();
  info.global_rank = identity.rank();
  info.world_size = identity.world_size();
  info.realtime_offset_ns = RealtimeOffsetNs(identity.start_realtime_ns(), identity.start_monotonic_ns());
  return info;
}

v1::ProcessSample ProcessSampleToWire(const ProcessSample& sample) {
  v1::ProcessSample wire;
  wire.set_state(static_cast<v1::ProcessState>(static_cast<int>(sample.state)));
  wire.set_wait_channel(WireText(sample.wait_channel));
  wire.set_cpu_ns(sample.cpu_ns);
  wire.set_cpu_advancing(sample.cpu_advancing);
  wire.set_sampled_ns(sample.sampled_ns);
  return wire;
}

ProcessSample ProcessSampleFromWire(const v1::ProcessSample& wire) {
  constexpr size_t kMaxWaitChannelBytes = 64;  // kernel symbol names are shorter
  ProcessSample sample;
  const int state = static_cast<int>(wire.state());
  if (state >= 0 && state <= static_cast<int>(ProcessState::kGone)) {
    sample.state = static_cast<ProcessState>(state);
  }
  sample.wait_channel = WireText(std::string_view(wire.wait_channel()).substr(0, kMaxWaitChannelBytes));
  sample.cpu_ns = wire.cpu_ns();
  sample.cpu_advancing = wire.cpu_advancing();
  sample.sampled_ns = std::clamp<int64_t>(wire.sampled_ns(), 0, kMaxTimeNs);
  return sample;
}

ProcessStatus ProcessStatusFromWire(v1::WriterStatus status) {
  switch (status) {
    case v1::WRITER_STATUS_EXITED: return ProcessStatus::kExited;
    case v1::WRITER_STATUS_DISABLED: return ProcessStatus::kDisabled;
    case v1::WRITER_STATUS_DEAD: return ProcessStatus::kDead;
    case v1::WRITER_STATUS_SILENT: return ProcessStatus::kSilent;
    default: return ProcessStatus::kRunning;
  }
}

v1::WriterStatus ProcessStatusToWire(ProcessStatus status) {
  switch (status) {
    case ProcessStatus::kRunning: return v1::WRITER_STATUS_RUNNING;
    case ProcessStatus::kExited: return v1::WRITER_STATUS_EXITED;
    case ProcessStatus::kDisabled: return v1::WRITER_STATUS_DISABLED;
    case ProcessStatus::kDead: return v1::WRITER_STATUS_DEAD;
    case ProcessStatus::kSilent: return v1::WRITER_STATUS_SILENT;
  }
  return v1::WRITER_STATUS_UNSPECIFIED;
}

bool WireStatusLostWithoutExit(v1::WriterStatus status) {
  return IsLostWithoutExit(LivenessOf(ProcessStatusFromWire(status), {}));
}

ProcessUpdate ProcessUpdateFromBatch(const v1::StreamEventsRequest& batch, const std::vector<int>& stored_events) {
  ProcessUpdate update;
  update.records.reserve(stored_events.size());
  for (const int i : stored_events) {
    const v1::Event& event = batch.events(i);
    update.records.emplace_back(event.lane(), event.index(), RecordFromEvent(event));
  }
  for (const v1::RegionName& region : batch.regions()) update.regions.emplace_back(region.id(), region.name());
  for (const v1::CallPath& path : batch.call_paths()) update.call_paths.emplace_back(path.id(), CallPathFromWire(path));
  if (batch.writer_status() != v1::WRITER_STATUS_UNSPECIFIED) {
    update.status = ProcessStatusFromWire(batch.writer_status());
  }
  update.heartbeat_ns = batch.heartbeat_ns();
  update.lost_records = batch.lost() + batch.torn() + batch.dropped();
  if (batch.has_process()) update.sample = ProcessSampleFromWire(batch.process());
  if (batch.exit_recorded()) update.exit_code = batch.exit_code();
  return update;
}

ProcessUpdate ProcessUpdateFromStore(std::vector<IndexedRecord> records,
                                     const std::map<uint32_t, std::string>& regions,
                                     const std::map<uint32_t, CallPath>& call_paths, const v1::StoredStatus& status) {
  ProcessUpdate update;
  update.records = std::move(records);
  update.regions.assign(regions.begin(), regions.end());
  update.call_paths.assign(call_paths.begin(), call_paths.end());
  update.status = ProcessStatusFromWire(status.writer_status());
  update.heartbeat_ns = status.heartbeat_ns();
  update.lost_records = status.lost() + status.torn() + status.dropped();
  if (status.has_process()) update.sample = ProcessSampleFromWire(status.process());
  if (status.exit_recorded()) update.exit_code = status.exit_code();
  return update;
}

}  // namespace collwatch
