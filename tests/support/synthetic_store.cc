// SyntheticJob into a trace store (see synthetic_store.h).
#include "tests/support/synthetic_store.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "store/event_codec.h"

namespace collwatch::testing {
namespace {

// Events per appended batch: about what an agent ships at a time.
constexpr int kBatchEvents = 4096;
// Where the synthetic clocks start (SyntheticJob and TestJob use CLOCK_REALTIME values).
constexpr uint64_t kStartNs = 1'700'000'000'000'000'000;

}  // namespace

analyzer::ProcessId SyntheticStore::AddProcess(const ProcessInfo& info) {
  v1::RankIdentity identity;
  identity.set_job(job_);
  identity.set_host(info.host);
  identity.set_pid(info.pid);
  identity.set_rank(info.global_rank);
  identity.set_local_rank(-1);
  identity.set_world_size(info.world_size > 0 ? info.world_size : -1);
  identity.set_start_realtime_ns(kStartNs);
  identity.set_start_monotonic_ns(kStartNs);
  identity.set_lane_count(2);
  const std::string dir = absl::StrCat(JobTracesDir(out_dir_, job_), "/", RankTraceDirName(identity));
  Rank rank;
  absl::StatusOr<std::unique_ptr<RankTraceWriter>> writer = RankTraceWriter::Open(dir, identity);
  if (writer.ok()) {
    rank.writer = *std::move(writer);
  } else if (error_.ok()) {
    error_ = writer.status();
  }
  rank.batch.set_writer_status(v1::WRITER_STATUS_RUNNING);
  ranks_.push_back(std::move(rank));
  return static_cast<analyzer::ProcessId>(ranks_.size() - 1);
}

void SyntheticStore::AddRegionName(analyzer::ProcessId process, uint32_t writer_id, std::string_view name) {
  v1::RegionName* region = ranks_[process].batch.add_regions();
  region->set_id(writer_id);
  region->set_name(std::string(name));
}

void SyntheticStore::AddCallPath(analyzer::ProcessId process, uint32_t writer_id, const CallPath& path) {
  *ranks_[process].batch.add_call_paths() = CallPathToWire(writer_id, path);
}

void SyntheticStore::AddRecord(analyzer::ProcessId process, uint32_t lane, uint64_t index,
                               const ring::Record& record) {
  Rank& rank = ranks_[process];
  EventFromRecord(IndexedRecord{lane, index, record}, rank.batch.add_events());
  if (rank.batch.events_size() >= kBatchEvents) Flush(rank);
}

void SyntheticStore::Flush(Rank& rank) {
  if (rank.writer != nullptr) {
    absl::StatusOr<AppendResult> appended = rank.writer->Append(rank.batch);
    if (appended.ok()) {
      events_written_ += appended->stored;
    } else if (error_.ok()) {
      error_ = appended.status();
    }
  }
  const v1::WriterStatus status = rank.batch.writer_status();
  rank.batch.Clear();
  rank.batch.set_writer_status(status);
}

absl::Status SyntheticStore::Finish(v1::WriterStatus status) {
  for (Rank& rank : ranks_) {
    rank.batch.set_writer_status(status);
    Flush(rank);
    rank.writer.reset();
  }
  return error_;
}

}  // namespace collwatch::testing
