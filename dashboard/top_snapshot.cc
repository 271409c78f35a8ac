// The snapshot from the same views the screen draws (BuildCommView, TotalsOf), so the
// JSON and the screen never disagree. Threading: see top_snapshot.h.
#include "dashboard/top_snapshot.h"

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "files/json_contract.h"
#include "files/version.h"

namespace collwatch::dashboard {
namespace {

nlohmann::json RanksJson(const google::protobuf::RepeatedField<int32_t>& ranks) {
  return nlohmann::json(std::vector<int32_t>(ranks.begin(), ranks.end()));
}

nlohmann::json CommJson(const v1::ClusterState& state, const v1::CommState& comm) {
  const CommView view = BuildCommView(state, comm, std::nullopt);
  nlohmann::json ranks = nlohmann::json::array();
  for (const RankRow& row : view.rows) {
    ranks.push_back({{"rank", row.ranks.front()},
                     {"entered_seq", row.entered_seq},
                     {"completed_seq", row.completed_seq},
                     {"health", std::string(HealthName(row.health))},
                     {"note", row.note},
                     {"minority", row.minority}});
  }
  nlohmann::json inflight = nullptr;
  if (view.inflight_seq != 0) {
    inflight = {{"seq", view.inflight_seq},
                {"op", view.inflight_op},
                {"age_s", view.inflight_age_s},
                {"expected_s", view.inflight_expected_s},
                {"stall_threshold_s", view.stall_threshold_s},
                {"waiting_for_ranks", view.waiting_for_ranks}};
  }
  return {{"comm", JsonId(view.comm_id)},
          {"parent", comm.parent_id() != 0 ? nlohmann::json(JsonId(comm.parent_id())) : nlohmann::json(nullptr)},
          {"nranks", view.nranks},
          {"reporting", view.reporting},
          {"health", std::string(HealthName(view.health))},
          {"collectives_per_second", view.collectives_per_second},
          {"newest_seq", view.max_entered},
          {"oldest_inflight", inflight},
          {"ranks", ranks}};
}

nlohmann::json FindingJson(const v1::Finding& finding) {
  const int minority = MinorityClass(finding);
  nlohmann::json classes = nlohmann::json::array();
  for (int i = 0; i < finding.rank_classes_size(); ++i) {
    classes.push_back({{"ranks", RanksJson(finding.rank_classes(i).ranks())},
                       {"label", finding.rank_classes(i).label()},
                       {"minority", i == minority}});
  }
  return {{"kind", v1::FindingKind_Name(finding.kind())},
          {"comm", JsonId(finding.comm_id())},
          {"seq", finding.seq()},
          {"headline", finding.headline()},
          {"brief", finding.brief()},
          {"first_bad_ns", finding.first_bad_t_ns()},
          {"detect_latency_s", finding.detect_latency_s()},
          {"resolved", finding.resolved()},
          {"rank_classes", classes},
          {"lagging_ranks", RanksJson(finding.lagging_ranks())}};
}

}  // namespace

nlohmann::json TopSnapshotJson(const v1::ClusterState& state, const ConnectionState& connection, int64_t now_ns) {
  const JobTotals totals = TotalsOf(state);
  nlohmann::json comms = nlohmann::json::array();
  for (const v1::CommState& comm : state.comms()) comms.push_back(CommJson(state, comm));
  nlohmann::json findings = nlohmann::json::array();
  for (const v1::Finding& finding : state.findings()) findings.push_back(FindingJson(finding));
  // The verdict only of what was seen: no state, or no collective yet, is no data.
  const bool seen = connection.ever_connected && state.comms_size() > 0;
  const char* verdict = state.findings_size() > 0 ? "findings" : seen ? "healthy" : "no data";
  const std::string headline = state.findings_size() > 0          ? state.findings().rbegin()->headline()
                               : !connection.ever_connected       ? "no state from the collector yet"
                               : state.comms_size() == 0          ? "no collective reported yet"
                                                                  : "every communicator agrees so far";
  return {{kSchemaVersionKey, kTopSchemaVersion},
          {"collwatch_version", std::string(CollwatchVersionText())},
          {"taken_ns", now_ns},
          {"collector",
           {{"address", connection.address},
            {"connected", connection.connected},
            {"reconnections", std::max(0, connection.connections - 1)},
            {"error", connection.last_error}}},
          {"job", state.job()},
          {"verdict", verdict},
          {"headline", headline},
          {"ranks",
           {{"count", totals.ranks},
            {"processes", totals.processes},
            {"nodes", totals.nodes},
            {"reporting", totals.reporting},
            {"lost", totals.lost}}},
          {"events", totals.events},
          {"collectives_per_second", totals.collectives_per_second},
          {"communicators", comms},
          {"findings", findings}};
}

}  // namespace collwatch::dashboard
