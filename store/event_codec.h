// Conversion between ring records (ring/ring_format.h) and wire/store events
// (proto Event), and the position that orders and deduplicates records within a lane.
// Threading: pure functions.
#ifndef COLLWATCH_STORE_EVENT_CODEC_H_
#define COLLWATCH_STORE_EVENT_CODEC_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "process/process_info.h"
#include "process/process_sample.h"
#include "process/process_update.h"
#include "proto/collwatch.pb.h"
#include "ring/ring_reader.h"
#include "stacks/process_stacks.h"

namespace collwatch {

// A record's place in its lane. An in-place call occupies one ring slot but is read as
// two records (its kEnter, then its kReturn naming the same lane and index), so each
// index has two positions: 2 * index for that kEnter half, 2 * index + 1 for everything
// else (the return half, and every record that is whole by itself). Positions increase
// along a lane; (lane, position) is a record's identity within its rank.
uint64_t LanePosition(uint32_t lane, uint64_t index, const ring::Record& record);
uint64_t LanePosition(const v1::Event& event);

// Where to go on reading a lane when everything below `next_position` is stored.
LaneCursor CursorAt(uint64_t next_position);

void EventFromRecord(const IndexedRecord& item, v1::Event* event);
// Inverse of EventFromRecord for the payload: the commit word is left 0.
ring::Record RecordFromEvent(const v1::Event& event);

// `text` as valid UTF-8: each byte that does not start a well-formed sequence becomes
// U+FFFD. Proto3 strings must be UTF-8 or the collector cannot parse the message (the
// whole batch, again after every reconnect); ring strings come from the job's
// environment and NVTX names, which may be any bytes.
std::string WireText(std::string_view text);

// What the agent sends for a ring: the hello's identity of the ring's process, and an
// NVTX region name of it (empty name: not written yet).
v1::RankIdentity RankIdentityFromRing(const RingIdentity& ring);
v1::RegionName RegionNameFromRing(const RingReader& reader, uint32_t region_id);
// A call path between the ring's form and the wire's; from the wire, bounded as the ring
// bounds it (frames, name lengths).
v1::CallPath CallPathToWire(uint32_t id, const CallPath& path);
CallPath CallPathFromWire(const v1::CallPath& wire);

// A process's stacks between stacks/' form and the wire's (the answer to request
// `request_id`, taken at CLOCK_REALTIME `taken_ns`). From the wire, bounded: at most
// kMaxWireThreads threads of kMaxWireFrames frames, names of kMaxWireNameBytes.
v1::ProcessStacks StacksToWire(const stacks::ProcessStacks& stacks, uint64_t request_id, int64_t taken_ns);
stacks::ProcessStacks StacksFromWire(const v1::ProcessStacks& wire);
inline constexpr int kMaxWireThreads = 1024;
inline constexpr int kMaxWireFrames = 256;
inline constexpr size_t kMaxWireNameBytes = 1024;

// A rank stream's identity and liveness as the analyzer's model takes them (process/).
ProcessInfo ProcessInfoFromIdentity(const v1::RankIdentity& identity);
ProcessStatus ProcessStatusFromWire(v1::WriterStatus status);
v1::WriterStatus ProcessStatusToWire(ProcessStatus status);
// A stream whose status alone (no look at the process) says lost without exiting, by
// the one rule (process/process_info.h: LivenessOf, IsLostWithoutExit).
bool WireStatusLostWithoutExit(v1::WriterStatus status);
// A look at a process, between the model's form and the wire's. From the wire, what an
// agent claims is bounded: an unknown state is kUnknown, the wait channel at most 64
// bytes of valid UTF-8, times within the model's range.
v1::ProcessSample ProcessSampleToWire(const ProcessSample& sample);
ProcessSample ProcessSampleFromWire(const v1::ProcessSample& sample);


// What an agent's batch says, with only the events at `stored_events` (indexes into
// batch.events(): those the trace store took as new, AppendResult::stored_events; the
// others were resends). Resends are told apart once, by the store.
ProcessUpdate ProcessUpdateFromBatch(const v1::StreamEventsRequest& batch, const std::vector<int>& stored_events);
// What a stored rank trace says: its records (RankTraceReader::ReadAllRecords), region
// names, call paths and latest status.
ProcessUpdate ProcessUpdateFromStore(std::vector<IndexedRecord> records,
                                     const std::map<uint32_t, std::string>& regions,
                                     const std::map<uint32_t, CallPath>& call_paths, const v1::StoredStatus& status);

}  // namespace collwatch

#endif  // COLLWATCH_STORE_EVENT_CODEC_H_