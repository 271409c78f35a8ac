// run.json as nlohmann::json (keys sorted on output); a rank's state is written by its
// name (ProcessStateName), which trace_loader.cc parses back. Threading: see run_record.h.
#include "cli/run_record.h"

#include <fstream>

#include "absl/strings/str_cat.h"
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

}  // namespace

nlohmann::json RunRecordJson(const RunRecord& record) {
  return {{"job", record.job},
          {"command", record.command},
          {"exit_status", record.exit_status},
          {"collector", record.collector},
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
          {"rank_processes", RankProcessesJson(record.rank_processes)}};
}

absl::Status WriteRunRecord(const std::string& out_dir, const RunRecord& record) {
  const std::string path = absl::StrCat(out_dir, "/run.json");
  std::ofstream file(path);
  file << RunRecordJson(record).dump(2) << "\n";
  file.close();
  if (!file) return absl::UnavailableError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

}  // namespace collwatch
