// run.json as nlohmann::json (keys sorted on output); a rank's state is written by its
// name (ProcessStateName), which trace_loader.cc parses back. Threading: see run_record.h.
#include "cli/run_record.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <type_traits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "files/json_contract.h"
#include "files/safe_files.h"
#include "files/safe_text.h"
#include "files/version.h"
#include "process/process_info.h"
#include "process/process_sample.h"

namespace collwatch {
namespace {

nlohmann::json RankProcessesJson(const std::map<pid_t, RankProcess>& ranks) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& [pid, rank] : ranks) {
    list.push_back({{"pid", rank.info.pid},
                    {"host", rank.info.host},
                    {"global_rank", rank.info.global_rank},
                    {"world_size", rank.info.world_size},
                    {"state", ProcessStateName(rank.sample.state)},
                    {"wait_channel", rank.sample.wait_channel},
                    {"cpu_ns", rank.sample.cpu_ns},
                    {"cpu_advancing", rank.sample.cpu_advancing},
                    {"sampled_ns", rank.sample.sampled_ns}});
  }
  return list;
}

nlohmann::json FlightRecorderDumpsJson(const std::vector<FlightRecorderDump>& dumps) {
  nlohmann::json list = nlohmann::json::array();
  for (const FlightRecorderDump& dump : dumps) {
    list.push_back({{"rank", dump.rank},
                    {"pid", dump.pid},
                    {"pipe", dump.pipe},
                    {"files", dump.files},
                    {"asked", dump.asked()},
                    {"not_asked", dump.not_asked},
                    {"written", dump.written()},
                    {"file", dump.file},
                    {"still_growing", dump.still_growing}});
  }
  return list;
}

}  // namespace

nlohmann::json RunRecordJson(const RunRecord& record) {
  return {{kSchemaVersionKey, kRunSchemaVersion},
          {"collwatch_version", std::string(CollwatchVersionText())},
          {"state", record.running ? "running" : "ended"},
          {"job", record.job},
          {"command", record.command},
          {"exit_status", record.exit_status},
          {"collector", record.collector},
          {"token_file", record.token_file},
          {"tls_ca_file", record.tls_ca_file},
          {"collwatch_pid", record.collwatch_pid},
          {"collwatch_host", record.collwatch_host},
          {"traces", record.traces},
          {"rings", record.rings},
          {"events", record.events},
          {"lost", record.lost},
          {"drained", record.drained},
          {"stall_after_s", record.stall_after_s},
          {"kill_on_hang", record.kill_on_hang},
          {"one_gpu", record.one_gpu},
          {"stopped_hung_job", record.stopped_hung_job},
          {"stopped_at_ns", record.stopped_at_ns},
          {"rank_processes", RankProcessesJson(record.rank_processes)},
          {"flight_recorder_dumps", FlightRecorderDumpsJson(record.flight_recorder_dumps)}};
}

namespace {

template <typename Value>
void Take(const nlohmann::json& json, const char* key, Value* out) {
  if (!json.contains(key)) return;
  const nlohmann::json& value = json[key];
  if constexpr (std::is_same_v<Value, bool>) {
    if (value.is_boolean()) *out = value.get<bool>();
  } else if constexpr (std::is_same_v<Value, std::string>) {
    if (value.is_string()) *out = value.get<std::string>();
  } else if constexpr (std::is_floating_point_v<Value>) {
    if (value.is_number()) *out = value.get<Value>();
  } else {
    if (value.is_number_integer()) *out = value.get<Value>();
  }
}

std::map<pid_t, RankProcess> RankProcessesFromJson(const nlohmann::json& list) {
  std::map<pid_t, RankProcess> ranks;
  if (!list.is_array()) return ranks;
  for (const nlohmann::json& item : list) {
    if (!item.is_object() || !item.contains("host") || !item["host"].is_string()) continue;
    RankProcess rank;
    Take(item, "host", &rank.info.host);
    Take(item, "pid", &rank.info.pid);
    Take(item, "global_rank", &rank.info.global_rank);
    Take(item, "world_size", &rank.info.world_size);
    std::string state;
    Take(item, "state", &state);
    rank.sample.state = ParseProcessState(state).value_or(rank.sample.state);
    Take(item, "wait_channel", &rank.sample.wait_channel);
    int64_t cpu_ns = 0;
    Take(item, "cpu_ns", &cpu_ns);
    rank.sample.cpu_ns = static_cast<uint64_t>(std::max<int64_t>(cpu_ns, 0));
    Take(item, "cpu_advancing", &rank.sample.cpu_advancing);
    Take(item, "sampled_ns", &rank.sample.sampled_ns);
    rank.sample.sampled_ns = std::clamp<int64_t>(rank.sample.sampled_ns, 0, kMaxTimeNs);
    if (rank.info.pid > 0) ranks[rank.info.pid] = std::move(rank);
  }
  return ranks;
}

std::vector<FlightRecorderDump> FlightRecorderDumpsFromJson(const nlohmann::json& list) {
  std::vector<FlightRecorderDump> dumps;
  if (!list.is_array()) return dumps;
  for (const nlohmann::json& item : list) {
    if (!item.is_object()) continue;
    FlightRecorderDump dump;
    Take(item, "rank", &dump.rank);
    Take(item, "pid", &dump.pid);
    Take(item, "pipe", &dump.pipe);
    if (item.contains("files") && item["files"].is_array()) {
      for (const nlohmann::json& file : item["files"]) {
        if (file.is_string()) dump.files.push_back(file.get<std::string>());
      }
    }
    Take(item, "not_asked", &dump.not_asked);
    Take(item, "file", &dump.file);
    Take(item, "still_growing", &dump.still_growing);
    dumps.push_back(std::move(dump));
  }
  return dumps;
}

}  // namespace

RunRecord RunRecordFromJson(const nlohmann::json& json) {
  RunRecord record;
  if (!json.is_object()) return record;
  std::string state;
  Take(json, "state", &state);
  record.running = state == "running";
  Take(json, "job", &record.job);
  if (json.contains("command") && json["command"].is_array()) {
    for (const nlohmann::json& word : json["command"]) {
      if (word.is_string()) record.command.push_back(word.get<std::string>());
    }
  }
  Take(json, "exit_status", &record.exit_status);
  Take(json, "collector", &record.collector);
  Take(json, "token_file", &record.token_file);
  Take(json, "tls_ca_file", &record.tls_ca_file);
  Take(json, "collwatch_pid", &record.collwatch_pid);
  Take(json, "collwatch_host", &record.collwatch_host);
  Take(json, "traces", &record.traces);
  Take(json, "rings", &record.rings);
  Take(json, "events", &record.events);
  Take(json, "lost", &record.lost);
  Take(json, "drained", &record.drained);
  Take(json, "stall_after_s", &record.stall_after_s);
  Take(json, "kill_on_hang", &record.kill_on_hang);
  Take(json, "one_gpu", &record.one_gpu);
  Take(json, "stopped_hung_job", &record.stopped_hung_job);
  Take(json, "stopped_at_ns", &record.stopped_at_ns);
  if (json.contains("rank_processes")) record.rank_processes = RankProcessesFromJson(json["rank_processes"]);
  if (json.contains("flight_recorder_dumps")) {
    record.flight_recorder_dumps = FlightRecorderDumpsFromJson(json["flight_recorder_dumps"]);
  }
  return record;
}

absl::StatusOr<RunRecord> ReadRunRecordOrWhy(const std::string& out_dir) {
  constexpr uint64_t kMaxRunRecordBytes = 64 << 20;  // a run of a million ranks' processes
  const std::string path = absl::StrCat(out_dir, "/run.json");
  // lstat, not the read's open: a dangling link is a record lost, not no record.
  struct stat info {};
  if (lstat(path.c_str(), &info) != 0 && errno == ENOENT) return absl::NotFoundError(path + ": not there");
  absl::StatusOr<std::string> text = ReadRegularFile(path, kMaxRunRecordBytes);
  // Its name is there: whatever stops the read (a link to nothing too) is a record lost.
  if (!text.ok()) return absl::DataLossError(text.status().message());
  const nlohmann::json json = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) return absl::DataLossError(path + ": not JSON (cut short or damaged)");
  if (!json.is_object() || !json.contains("job") || !json["job"].is_string()) {
    return absl::DataLossError(path + ": names no job");
  }
  return RunRecordFromJson(json);
}

std::optional<RunRecord> ReadRunRecord(const std::string& out_dir) {
  absl::StatusOr<RunRecord> record = ReadRunRecordOrWhy(out_dir);
  if (!record.ok()) return std::nullopt;
  return *std::move(record);
}

absl::Status WriteRunRecord(const std::string& out_dir, const RunRecord& record) {
  return WriteFileReplacing(absl::StrCat(out_dir, "/run.json"), SafeJsonText(RunRecordJson(record), 2) + "\n");
}

}  // namespace collwatch
