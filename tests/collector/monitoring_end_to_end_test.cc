// Monitoring end to end (#42 item 3), through real processes on the CPU NCCL backend: a
// real Prometheus server scrapes a standalone collector's --metrics while the collector
// ingests a job whose rank 1 skips an all-reduce (tests/programs/nccl_ranks.cc "skip");
// `collwatch run`'s embedded collector runs --on-finding with the finding's JSON and
// writes --event-log on the same job; --quiet keeps findings and errors; a normal end of
// 4 ranks is one stamped summary line, not a line per rank; an --on-finding command that
// hangs is killed at its limit without holding the run up.
// Threading: single-threaded test code over real collector, run, job and Prometheus.
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cli/exit_codes.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/collector/prometheus_server.h"
#include "tests/support/json_schema.h"
#include "tests/support/read_files.h"
#include "tests/support/run_env.h"
#include "tests/support/subprocess.h"
#include "tests/support/test_time.h"

namespace collwatch::monitoring_end_to_end_test {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing::ReadFile;
using testing::ReadJson;
using testing::Subprocess;
using testing::TempDir;

// docs/schema/NAME.schema.json.
nlohmann::json SchemaNamed(const std::string& name) {
  return ReadJson(std::string(COLLWATCH_SCHEMA_DIR) + "/" + name + ".schema.json");
}

// `collwatch run ARGS -- nccl_ranks NPROC PLAN DIR`, its stderr in DIR/run.err; the exit code.
int RunRanks(const TempDir& dir, std::vector<std::string> args, int nproc, const std::string& plan) {
  std::vector<std::string> argv = {COLLWATCH_CLI_PATH, "run", "--out", dir.path() + "/out", "--no-dashboard"};
  argv.insert(argv.end(), args.begin(), args.end());
  for (const std::string& word : {std::string("--"), std::string(COLLWATCH_NCCL_RANKS_PATH), std::to_string(nproc), plan,
                                  dir.path()}) {
    argv.push_back(word);
  }
  Subprocess run(argv, testing::CollwatchRunEnv({{"COLLWATCH_CPU_NCCL_SHM_DIR", dir.path()}}),
                 dir.path() + "/run.out", dir.path() + "/run.err");
  return run.Wait(120);
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// Every line of `log` starts with "2025-01-31T12:00:00.123Z HOST collwatch".
void ExpectEveryLineStamped(const std::string& log) {
  const std::regex stamped("^\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d\\.\\d{3}Z \\S+ collwatch.*");
  for (const std::string& line : Lines(log)) EXPECT_TRUE(std::regex_match(line, stamped)) << "unstamped: " << line;
}

TEST(MonitoringEndToEndTest, PrometheusScrapesTheCollectorWhileItIngestsAJob) {
  if (!std::filesystem::exists(testing::kPrometheusPath)) {
    GTEST_SKIP() << testing::kPrometheusPath << " is not installed (Debian package prometheus; scripts/install_deps.sh)";
  }
  TempDir dir;
  const std::string address = "127.0.0.1:" + std::to_string(testing::FreeLoopbackPort());
  const std::string metrics = "127.0.0.1:" + std::to_string(testing::FreeLoopbackPort());
  const std::string collector_err = dir.path() + "/collector.err";
  Subprocess collector({COLLWATCH_CLI_PATH, "collector", "--listen", address, "--out", dir.path() + "/store",
                        "--stall-after", "3", "--metrics", metrics},
                       testing::CollwatchRunEnv({}), dir.path() + "/collector.out", collector_err);
  ASSERT_TRUE(testing::HttpGet("http://" + metrics + "/metrics", 1) || [&] {
    for (int i = 0; i < testing::Scaled(100) && collector.Running(); ++i) {
      if (testing::HttpGet("http://" + metrics + "/metrics", 1)) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  }()) << ReadFile(collector_err);
  EXPECT_THAT(ReadFile(collector_err), HasSubstr("metrics at http://" + metrics + "/metrics"));
  testing::PrometheusServer prometheus;
  ASSERT_TRUE(prometheus.Start(dir.path(), metrics)) << prometheus.log();
  EXPECT_EQ(prometheus.WaitFor("up{job=\"collwatch\"}", [](double up) { return up == 1; }, 30), 1)
      << "Prometheus never scraped the collector: " << prometheus.log();

  // Rank 1 skips the second all-reduce: rank 0 waits in it until --kill-on-hang stops the job.
  const int exit_code = RunRanks(dir, {"--collector", address, "--kill-on-hang"}, 2, "skip");
  EXPECT_EQ(exit_code, kExitStoppedHungJob) << ReadFile(dir.path() + "/run.err");

  EXPECT_EQ(prometheus.WaitFor("collwatch_findings_total{kind=\"NOT_JOINED\"}", [](double n) { return n >= 1; }, 30), 1)
      << ReadFile(collector_err);
  EXPECT_EQ(prometheus.WaitFor("collwatch_ranks_known", [](double n) { return n == 2; }, 30), 2);
  const std::optional<double> stored =
      prometheus.WaitFor("collwatch_records_stored_total", [](double n) { return n >= 10; }, 30);
  EXPECT_GE(stored.value_or(0), 10) << "each rank's init and all-reduces are records";
  // Rank 0's second all-reduce waited about 3 s before the finding: scraped while in flight.
  EXPECT_GE(prometheus.WaitFor("max_over_time(collwatch_oldest_inflight_collective_seconds[10m])",
                               [](double age) { return age >= 1; }, 30)
                .value_or(0),
            1);
  EXPECT_GT(prometheus.WaitFor("collwatch_store_bytes", [](double bytes) { return bytes > 0; }, 30).value_or(0), 0);
  // The other families are exposed with their labels, at 0 here.
  EXPECT_EQ(prometheus.WaitFor("collwatch_streams_refused_total{reason=\"unauthenticated\"}",
                               [](double n) { return n == 0; }, 30),
            0);
  EXPECT_EQ(prometheus.WaitFor("collwatch_records_lost_total{reason=\"ring_overwritten\"}",
                               [](double n) { return n == 0; }, 30),
            0);
  EXPECT_EQ(prometheus.WaitFor("collwatch_findings_total{kind=\"PATH_DIVERGENCE\"}", [](double n) { return n == 0; }, 30),
            0);
  collector.KillGroup();
}

TEST(MonitoringEndToEndTest, OnFindingAndTheEventLogSeeTheDivergenceAndQuietKeepsFindingsAndErrors) {
  TempDir dir;
  const std::string finding_file = dir.path() + "/finding.json";
  const std::string event_log = dir.path() + "/events.jsonl";
  const int exit_code =
      RunRanks(dir,
               {"--kill-on-hang", "--stall-after", "3", "--quiet", "--event-log", event_log, "--on-finding",
                "cat > " + finding_file + "; echo \"$COLLWATCH_FINDING_KIND $COLLWATCH_JOB $COLLWATCH_SCHEMA_VERSION\" > " +
                    dir.path() + "/env"},
               2, "skip");
  const std::string log = ReadFile(dir.path() + "/run.err");
  EXPECT_EQ(exit_code, kExitStoppedHungJob) << log;
  const nlohmann::json report = ReadJson(dir.path() + "/out/report.json");
  ASSERT_TRUE(report.is_object() && !report["findings"].empty()) << log;
  const nlohmann::json& reported = report["findings"][0];

  // The command got the finding's JSON on stdin, as report.json has it, and its kind and job.
  const nlohmann::json given = ReadJson(finding_file);
  ASSERT_TRUE(given.is_object()) << ReadFile(finding_file) << "\n" << log;
  EXPECT_EQ(given["kind"], "NOT_JOINED");
  EXPECT_EQ(given["kind"], reported["kind"]);
  EXPECT_EQ(given["headline"], reported["headline"]);
  EXPECT_EQ(ReadFile(dir.path() + "/env"), "NOT_JOINED " + report["job"].get<std::string>() + " 1\n")
      << "the kind, the job and the version of report.json's schema the finding follows";

  // The event log: the finding, and each process's stream and writer state, each line as
  // docs/schema/event-log.schema.json says, its finding as report.json's.
  const nlohmann::json line_schema = SchemaNamed("event-log");
  const nlohmann::json report_schema = SchemaNamed("report");
  const nlohmann::json finding_schema = {{"$defs", report_schema["$defs"]},
                                         {"type", "object"},
                                         {"required", {"finding"}},
                                         {"properties", {{"finding", {{"$ref", "#/$defs/finding"}}}}}};
  std::vector<nlohmann::json> events;
  for (const std::string& line : Lines(ReadFile(event_log))) {
    events.push_back(nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false));
    ASSERT_TRUE(events.back().is_object()) << line;
    EXPECT_THAT(testing::SchemaProblems(line_schema, events.back()), ::testing::IsEmpty()) << line;
    if (events.back()["event"] == "finding") {
      EXPECT_THAT(testing::SchemaProblems(finding_schema, events.back()), ::testing::IsEmpty()) << line;
    }
  }
  int findings = 0;
  std::map<int, std::vector<std::string>> states;  // by rank
  for (const nlohmann::json& event : events) {
    if (event["event"] == "finding") {
      ++findings;
      EXPECT_EQ(event["finding"]["kind"], "NOT_JOINED");
      EXPECT_EQ(event["job"], report["job"]);
    } else if (event["event"] == "process") {
      states[event["process"]["rank"].get<int>()].push_back(event["state"]);
    }
  }
  EXPECT_EQ(findings, 1) << ReadFile(event_log);
  for (int rank : {0, 1}) {
    EXPECT_THAT(states[rank], ::testing::IsSupersetOf({"connected", "running"})) << "rank " << rank << "\n"
                                                                                  << ReadFile(event_log);
  }

  // --quiet: the finding and the not-healthy verdict, none of the informational lines.
  ExpectEveryLineStamped(log);
  EXPECT_THAT(log, HasSubstr("collwatch: NOT_JOINED"));
  EXPECT_THAT(log, HasSubstr("not healthy"));
  EXPECT_THAT(log, Not(HasSubstr("live dashboard")));
  EXPECT_THAT(log, Not(HasSubstr("command ended with exit status 0")));  // the hook's success is informational
  EXPECT_THAT(log, Not(HasSubstr("traces in")));
}

TEST(MonitoringEndToEndTest, ANormalEndIsOneStampedSummaryLineNotALinePerRank) {
  TempDir dir;
  const int exit_code = RunRanks(dir, {}, 4, "all");
  const std::string log = ReadFile(dir.path() + "/run.err");
  ASSERT_EQ(exit_code, 0) << log;
  ExpectEveryLineStamped(log);
  EXPECT_THAT(log, HasSubstr("collwatch agent: 4 processes exited (ranks 0-3)"));
  EXPECT_THAT(log, Not(HasSubstr(" exited (ring"))) << "a line per rank";
  EXPECT_THAT(log, HasSubstr("collwatch run: healthy, no findings"));
}

TEST(MonitoringEndToEndTest, AnOnFindingCommandThatHangsIsKilledAtItsLimitAndHoldsNothingUp) {
  TempDir dir;
  const auto start = std::chrono::steady_clock::now();
  const int exit_code = RunRanks(dir, {"--kill-on-hang", "--stall-after", "3", "--on-finding", "sleep 300",
                                       "--on-finding-timeout", "2"},
                                 2, "skip");
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const std::string log = ReadFile(dir.path() + "/run.err");
  EXPECT_EQ(exit_code, kExitStoppedHungJob) << log;
  EXPECT_THAT(log, HasSubstr("--on-finding: the command ran past its time limit (2 s) and was killed"));
  // The stall (3 s), the stop and the hook's 2 s, not the hook's 300 s: a safety net.
  EXPECT_LT(seconds, testing::Scaled(90)) << log;
}

}  // namespace
}  // namespace collwatch::monitoring_end_to_end_test
