// Trace store folders and ring files into the analyzer's model.
#include "cli/trace_loader.h"

#include <filesystem>
#include <fstream>
#include <set>

#include "absl/strings/str_cat.h"
#include "collector/event_codec.h"
#include "collector/trace_store.h"
#include "collector/trace_store_format.h"
#include "interposer/ring_reader.h"
#include "nlohmann/json.hpp"

namespace collwatch {
namespace {

namespace fs = std::filesystem;
using analyzer::JobModel;
using analyzer::ProcessInfo;
using analyzer::ProcessStatus;

bool IsRankTrace(const fs::path& dir) {
  std::error_code error;
  return fs::exists(dir / store::kLogFileName, error);
}

std::vector<std::string> RankTracesIn(const fs::path& dir) {
  std::vector<std::string> traces;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(dir, error)) {
    if (entry.is_directory(error) && IsRankTrace(entry.path())) traces.push_back(entry.path().string());
  }
  std::sort(traces.begin(), traces.end());
  return traces;
}

absl::Status LoadRankTrace(const std::string& dir, JobModel* model, LoadSummary* summary) {
  absl::StatusOr<std::unique_ptr<RankTraceReader>> reader = RankTraceReader::Open(dir);
  if (!reader.ok()) return reader.status();
  const v1::RankIdentity& identity = (*reader)->identity();
  absl::StatusOr<std::vector<v1::Event>> events = (*reader)->ReadAll();
  if (!events.ok()) return events.status();
  const analyzer::ProcessId process = model->AddProcess(ProcessInfoFromIdentity(identity));
  for (const auto& [id, name] : (*reader)->regions()) model->AddRegionName(process, id, name);
  for (const v1::Event& event : *events) model->AddRecord(process, event.lane(), event.index(), RecordFromEvent(event));
  const v1::StoredStatus& status = (*reader)->status();
  model->SetStatus(process, ProcessStatusFromWire(status.writer_status()), status.heartbeat_ns(),
                   status.lost() + status.torn() + status.dropped());
  if ((*reader)->torn_tail_bytes() > 0) {
    summary->warnings.push_back(absl::StrCat(dir, ": torn tail of ", (*reader)->torn_tail_bytes(),
                                             " bytes ignored (the collector stopped mid-write)"));
  }
  if (status.lost() + status.torn() > 0) {
    summary->warnings.push_back(absl::StrCat(dir, ": ", status.lost() + status.torn(),
                                             " records were lost in the ring before they were shipped"));
  }
  if (summary->job.empty()) summary->job = identity.job();
  summary->records += events->size();
  summary->inputs.push_back(dir);
  return absl::OkStatus();
}

absl::Status LoadRing(const std::string& path, JobModel* model, LoadSummary* summary) {
  absl::StatusOr<std::unique_ptr<RingReader>> reader = RingReader::Open(path);
  if (!reader.ok()) return reader.status();
  const RingIdentity& identity = (*reader)->identity();
  const ring::WriterState state = (*reader)->writer_state();
  const bool alive = state == ring::WriterState::kRunning && (*reader)->WriterProcessAlive();
  const ReadBatch batch = (*reader)->ReadAll(/*writer_gone=*/!alive);
  ProcessInfo info;
  info.host = identity.host;
  info.pid = identity.pid;
  info.global_rank = identity.rank;
  info.world_size = identity.world_size;
  info.realtime_offset_ns = analyzer::RealtimeOffsetNs(identity.start_realtime_ns, identity.start_monotonic_ns);
  const analyzer::ProcessId process = model->AddProcess(info);
  std::set<uint32_t> regions;
  for (const IndexedRecord& item : batch.records) {
    if (item.record.region_id != 0 && regions.insert(item.record.region_id).second) {
      model->AddRegionName(process, item.record.region_id, (*reader)->RegionName(item.record.region_id));
    }
    model->AddRecord(process, item.lane, item.index, item.record);
  }
  ProcessStatus status = ProcessStatus::kRunning;
  if (state == ring::WriterState::kExited) status = ProcessStatus::kExited;
  if (state == ring::WriterState::kDisabled) status = ProcessStatus::kDisabled;
  if (state == ring::WriterState::kRunning && !alive) status = ProcessStatus::kDead;
  model->SetStatus(process, status, (*reader)->heartbeat_ns(), batch.lost + batch.torn + (*reader)->dropped());
  if (batch.lost + batch.torn + (*reader)->dropped() > 0) {
    summary->warnings.push_back(absl::StrCat(path, ": ", batch.lost, " records overwritten, ", batch.torn,
                                             " torn, ", (*reader)->dropped(), " dropped by the writer"));
  }
  if (summary->job.empty()) summary->job = identity.job;
  summary->records += batch.records.size();
  summary->inputs.push_back(path);
  return absl::OkStatus();
}

// Loads each input; a damaged one is a warning, not the end.
template <typename Loader>
absl::Status LoadAll(const std::vector<std::string>& inputs, Loader load, JobModel* model, LoadSummary* summary) {
  for (const std::string& input : inputs) {
    if (absl::Status status = load(input, model, summary); !status.ok()) {
      summary->warnings.push_back(absl::StrCat(input, ": skipped: ", status.message()));
    }
  }
  if (summary->inputs.empty()) {
    return absl::DataLossError(absl::StrCat("none of the ", inputs.size(), " inputs could be read"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status LoadTraces(const std::string& path, JobModel* model, LoadSummary* summary) {
  std::error_code error;
  const fs::path root(path);
  if (!fs::exists(root, error)) return absl::NotFoundError(absl::StrCat(path, ": no such file or folder"));
  if (fs::is_regular_file(root, error)) {
    summary->source = "rings";
    return LoadAll({path}, LoadRing, model, summary);
  }
  if (IsRankTrace(root)) {
    summary->source = "trace store";
    return LoadAll({path}, LoadRankTrace, model, summary);
  }
  // A `collwatch run` output folder names its job.
  if (std::ifstream run_file(root / "run.json"); run_file.good()) {
    const nlohmann::json run = nlohmann::json::parse(run_file, nullptr, /*allow_exceptions=*/false);
    if (run.is_object() && run.contains("job") && run["job"].is_string()) {
      summary->job = run["job"].get<std::string>();
      if (run.contains("stall_after_s") && run["stall_after_s"].is_number()) {
        summary->stall_after_s = run["stall_after_s"].get<double>();
      }
      if (run.contains("stopped_at_ns") && run["stopped_at_ns"].is_number_integer()) {
        summary->stopped_at_ns = run["stopped_at_ns"].get<int64_t>();
      }
      const std::vector<std::string> traces = ListRankTraces(path, summary->job);
      if (!traces.empty()) {
        summary->source = "trace store";
        return LoadAll(traces, LoadRankTrace, model, summary);
      }
    }
  }
  if (std::vector<std::string> traces = RankTracesIn(root); !traces.empty()) {
    summary->source = "trace store";
    return LoadAll(traces, LoadRankTrace, model, summary);
  }
  // An output folder without run.json (a standalone collector's): one job folder in it.
  std::vector<fs::path> job_dirs;
  for (const auto& entry : fs::directory_iterator(root, error)) {
    if (entry.is_directory(error) && !RankTracesIn(entry.path()).empty()) job_dirs.push_back(entry.path());
  }
  if (job_dirs.size() == 1) {
    summary->source = "trace store";
    return LoadAll(RankTracesIn(job_dirs[0]), LoadRankTrace, model, summary);
  }
  if (job_dirs.size() > 1) {
    std::string names;
    for (const fs::path& dir : job_dirs) absl::StrAppend(&names, names.empty() ? "" : ", ", dir.filename().string());
    return absl::InvalidArgumentError(absl::StrCat(path, " holds several jobs (", names, "): name one of their folders"));
  }
  absl::StatusOr<std::vector<std::string>> rings = ListRingFiles(path);
  if (rings.ok() && !rings->empty()) {
    summary->source = "rings";
    return LoadAll(*rings, LoadRing, model, summary);
  }
  return absl::NotFoundError(absl::StrCat(path, ": no collwatch traces here (expected run.json, rank trace "
                                          "folders with ", store::kLogFileName, ", or *.ring files)"));
}

bool LoadTracesForCommand(const std::string& command, const std::string& path, JobModel* model, LoadSummary* summary,
                          std::ostream& err) {
  const absl::Status status = LoadTraces(path, model, summary);
  for (const std::string& warning : summary->warnings) {
    err << "collwatch " << command << ": warning: " << warning << "\n";
  }
  if (!status.ok()) {
    err << "collwatch " << command << ": " << status.message() << "\n";
    return false;
  }
  if (model->unmatched_records() > 0) {
    err << "collwatch " << command << ": warning: " << path << ": " << model->unmatched_records()
        << " records could not be placed (no communicator, or their call was lost)\n";
  }
  return true;
}

}  // namespace collwatch
