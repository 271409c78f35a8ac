// A ring's contents as a ProcessUpdate. Threading: pure functions.
#include "process/process_update.h"

#include <set>
#include <utility>

namespace collwatch {

ProcessInfo ProcessInfoOfRing(const RingIdentity& identity) {
  ProcessInfo info;
  info.host = identity.host;
  info.pid = identity.pid;
  info.global_rank = identity.rank;
  info.world_size = identity.world_size;
  info.realtime_offset_ns = RealtimeOffsetNs(identity.start_realtime_ns, identity.start_monotonic_ns);
  return info;
}

ProcessUpdate ProcessUpdateFromRing(const RingReader& reader, ReadBatch batch, uint64_t now_monotonic_ns) {
  ProcessUpdate update;
  std::set<uint32_t> named;
  std::set<uint32_t> paths;
  for (const IndexedRecord& item : batch.records) {
    const uint32_t region = item.record.region_id;
    // A name the ring cannot give (damaged, never written) is left out: the model then
    // knows the region as unknown, never as "no region" (JobModel::AddEnter).
    if (region != 0 && named.insert(region).second) {
      if (std::optional<std::string> name = reader.ReadName(region)) update.regions.emplace_back(region, *name);
    }
    const uint32_t path_id = item.record.call_path_id;
    if (path_id != 0 && paths.insert(path_id).second) {
      if (std::optional<CallPath> path = reader.ReadCallPath(path_id)) update.call_paths.emplace_back(path_id, *path);
    }
  }
  update.records = std::move(batch.records);
  update.status = StatusOfRing(reader.writer_state(), reader.WriterProcessAlive(), reader.heartbeat_ns(),
                               now_monotonic_ns);
  update.heartbeat_ns = reader.heartbeat_ns();
  update.lost_records = batch.lost + batch.torn + batch.damaged + reader.dropped();
  update.exit_code = reader.exit_code();
  return update;
}

ProcessUpdate NamesPieceOf(ProcessUpdate& whole) {
  ProcessUpdate names;
  names.regions = std::move(whole.regions);
  names.call_paths = std::move(whole.call_paths);
  return names;
}

ProcessUpdate StatusPieceOf(const ProcessUpdate& whole) {
  ProcessUpdate status;
  status.status = whole.status;
  status.heartbeat_ns = whole.heartbeat_ns;
  status.lost_records = whole.lost_records;
  status.sample = whole.sample;
  status.exit_code = whole.exit_code;
  return status;
}

}  // namespace collwatch
