// Every JSON collwatch writes, held to its published schema (docs/schema/) with the tests'
// validator (tests/support/json_schema.h): report.json and run.json of real runs of the
// bundled trainer, analyze/dump/diff/check --json, the Chrome trace, flight_recorder.json
// of an imported PyTorch hang, stacks --json, the golden GPU reports; and the JUnit file
// of a check whose input was bad. Threading: single-threaded test code.
#include <filesystem>
#include <fstream>
#include <sstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/cli_run.h"
#include "tests/support/json_schema.h"
#include "tests/support/read_files.h"

namespace collwatch::json_contracts_test {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using nlohmann::json;
using testing::CliOutcome;
using testing::ReadFile;
using testing::ReadJson;
using testing::RunCollwatch;
using testing::SchemaProblems;
using testing::TempDir;

json Schema(const std::string& name) {
  const json schema = ReadJson(std::string(COLLWATCH_SCHEMA_DIR) + "/" + name + ".schema.json");
  EXPECT_TRUE(schema.is_object()) << name << " does not parse";
  return schema;
}

// The problems of `text` (one JSON value, or JSON lines) under docs/schema/NAME, each line
// of lines checked on its own; a line that does not parse is one.
std::vector<std::string> Problems(const std::string& name, const std::string& text, bool lines = false) {
  const json schema = Schema(name);
  std::vector<std::string> problems;
  std::istringstream in(text);
  std::string line;
  std::vector<std::string> values;
  if (lines) {
    while (std::getline(in, line)) values.push_back(line);
  } else {
    values.push_back(text);
  }
  for (size_t i = 0; i < values.size(); ++i) {
    const json value = json::parse(values[i], nullptr, /*allow_exceptions=*/false);
    if (value.is_discarded()) {
      problems.push_back("value " + std::to_string(i) + " is not JSON");
      continue;
    }
    for (const std::string& problem : SchemaProblems(schema, value)) {
      problems.push_back("value " + std::to_string(i) + " " + problem);
    }
  }
  if (values.empty()) problems.push_back("no output");
  return problems;
}

// `collwatch ARGS...` with its standard output; fails the test unless it exits `status`.
std::string Output(const TempDir& dir, const std::vector<std::string>& args, int status) {
  const CliOutcome outcome = RunCollwatch(dir, args, {}, 60);
  EXPECT_EQ(outcome.exit_code, status) << args.front() << ": " << outcome.err;
  return outcome.out;
}

TEST(JsonContractsTest, EverySchemaIsWithinTheValidatorsKeywords) {
  // An empty object breaks every schema's `required`, never by an unknown keyword.
  for (const char* name : {"report", "run", "dump", "stacks", "flight-recorder-import", "chrome-trace", "diff",
                           "check", "top", "event-log"}) {
    const std::vector<std::string> problems = SchemaProblems(Schema(name), json::object());
    EXPECT_FALSE(problems.empty()) << name;
    for (const std::string& problem : problems) EXPECT_THAT(problem, Not(HasSubstr("does not know"))) << name;
  }
}

TEST(JsonContractsTest, GoldenGpuReportsMatchTheReportSchema) {
  int reports = 0;
  for (const auto& entry : std::filesystem::directory_iterator(COLLWATCH_GPU_TRACES_DIR)) {
    const std::string path = entry.path().string();
    if (path.size() < 12 || path.substr(path.size() - 12) != ".report.json") continue;
    ++reports;
    EXPECT_THAT(Problems("report", ReadFile(path)), IsEmpty()) << path;
    EXPECT_FALSE(ReadJson(path)["findings"].empty()) << path << ": each golden trace has a finding";
  }
  EXPECT_GE(reports, 3);
}

TEST(JsonContractsTest, AnImportedHangItsDumpAndItsReportMatchTheirSchemas) {
  TempDir dir;
  const std::string out = dir.path() + "/imported";
  Output(dir, {"import", "--flight-recorder", std::string(COLLWATCH_TEST_DATA_DIR) + "/flight_recorder/fsdp-history-cut",
               "--out", out}, 0);
  EXPECT_THAT(Problems("flight-recorder-import", ReadFile(out + "/flight_recorder.json")), IsEmpty());
  const json record = ReadJson(out + "/flight_recorder.json");
  EXPECT_EQ(record["schema_version"], 1);
  ASSERT_FALSE(record["cut_groups"].empty());
  EXPECT_TRUE(record["cut_groups"][0]["comm_id"].is_string());

  const std::string dump = Output(dir, {"dump", "--json", out}, 0);
  EXPECT_THAT(Problems("dump", dump, /*lines=*/true), IsEmpty());
  EXPECT_THAT(dump, HasSubstr("\"type\":\"call_path\""));
  const std::string report = Output(dir, {"analyze", "--json", out}, 1);
  EXPECT_THAT(Problems("report", report), IsEmpty());
  EXPECT_FALSE(json::parse(report)["findings"].empty());
}

TEST(JsonContractsTest, StacksMatchesItsSchema) {
  TempDir dir;
  testing::Subprocess sleeper({"/bin/sleep", "60"}, {});
  const std::string stacks = Output(dir, {"stacks", "--json", std::to_string(sleeper.pid())}, 0);
  EXPECT_THAT(Problems("stacks", stacks), IsEmpty()) << stacks;
  EXPECT_EQ(json::parse(stacks)["processes"].size(), 1u);
}

TEST(JsonContractsTest, ARingDumpMatchesTheDumpSchemaWithIdsAsStrings) {
  TempDir dir;
  const std::string rings = dir.path() + "/rings";
  std::filesystem::create_directory(rings);
  std::filesystem::permissions(rings, std::filesystem::perms::owner_all);
  testing::Subprocess rank({COLLWATCH_NCCL_RANKS_PATH, "1", "all", dir.path()},
                           {{"LD_PRELOAD", COLLWATCH_PRELOAD_LIST}, {"COLLWATCH_RING_DIR", rings},
                            {"COLLWATCH_JOB_ID", "contract"}, {"RANK", "0"}, {"LOCAL_RANK", "0"}, {"WORLD_SIZE", "1"},
                            {"COLLWATCH_CPU_NCCL_SHM_DIR", dir.path()}});
  ASSERT_EQ(rank.Wait(60), 0);
  const std::string dump = Output(dir, {"dump", "--json", rings}, 0);
  EXPECT_THAT(Problems("dump", dump, /*lines=*/true), IsEmpty());
  std::istringstream lines(dump);
  std::string line;
  std::getline(lines, line);
  EXPECT_EQ(json::parse(line)["type"], "ring");
  EXPECT_EQ(json::parse(line)["schema_version"], 1);
  bool unique_id_hash = false;
  while (std::getline(lines, line)) {
    const json record = json::parse(line);
    if (record["type"] != "record") continue;
    ASSERT_TRUE(record["stream"].is_string());
    // get-unique-id's return holds the id's 64-bit hash: the value that passed 2^53.
    if (record["fn"] == "get-unique-id" && record["kind"] == "return") {
      unique_id_hash = record["aux"][0].is_string() && record["aux"][0] != "0000000000000000";
    }
  }
  EXPECT_TRUE(unique_id_hash);
}

TEST(JsonContractsTest, CheckOfBadInputStillWritesJunitWithAnErrorCase) {
  TempDir dir;
  const std::string junit = dir.path() + "/check.xml";
  const CliOutcome outcome = RunCollwatch(
      dir, {"check", "--json", "--baseline", dir.path() + "/none.baseline", dir.path(), "--junit", junit});
  EXPECT_EQ(outcome.exit_code, 2);
  EXPECT_EQ(outcome.out, "");  // no JSON of a check that was not made
  const std::string xml = ReadFile(junit);
  EXPECT_THAT(xml, HasSubstr("tests=\"1\" failures=\"0\" errors=\"1\" skipped=\"0\" time=\""));
  EXPECT_THAT(xml, HasSubstr("<testcase classname=\"collwatch.check\" name=\"input\" time=\"0.000\">\n"
                             "      <error type=\"BadInput\" message=\"collwatch check: baseline "));
  EXPECT_THAT(outcome.err, HasSubstr("none.baseline"));
}

#ifdef COLLWATCH_TRAINER_PATH
// The trainer on 4 ranks with the tests' tiny model under `collwatch run --out DIR/NAME`.
std::string RunTrainer(const TempDir& dir, const std::string& name, const std::string& scenario) {
  const std::string out = dir.path() + "/" + name;
  const std::string shm = dir.path() + "/shm-" + name;
  std::filesystem::create_directories(shm);
  testing::Subprocess run({COLLWATCH_CLI_PATH, "run", "--no-dashboard", "--out", out, "--", COLLWATCH_TRAINER_PATH,
                           "--nproc", "4", "--scenario", scenario, "--steps", "2", "--hidden", "32", "--layers", "2",
                           "--vision-layers", "1", "--seq", "16", "--vocab", "32", "--batch", "2"},
                          testing::CollwatchRunEnv({{"COLLWATCH_CPU_NCCL_SHM_DIR", shm}, {"COLLWATCH_JOB_ID", name}}),
                          dir.path() + "/" + name + ".out", dir.path() + "/" + name + ".err");
  EXPECT_EQ(run.Wait(90), 0) << ReadFile(dir.path() + "/" + name + ".err");
  return out;
}

TEST(JsonContractsTest, ARunsFilesAndTheScheduleToolsMatchTheirSchemas) {
  TempDir dir;
  const std::string clean = RunTrainer(dir, "clean", "clean");
  const std::string mtp = RunTrainer(dir, "mtp", "mtp-sequential-backward");
  for (const std::string& run : {clean, mtp}) {
    EXPECT_THAT(Problems("run", ReadFile(run + "/run.json")), IsEmpty()) << run;
    EXPECT_THAT(Problems("report", ReadFile(run + "/report.json")), IsEmpty()) << run;
    EXPECT_EQ(ReadJson(run + "/report.json")["schema_version"], 1);
    EXPECT_EQ(ReadJson(run + "/run.json")["schema_version"], 1);
  }
  EXPECT_THAT(Problems("report", Output(dir, {"analyze", "--json", clean}, 0)), IsEmpty());
  EXPECT_THAT(Problems("dump", Output(dir, {"dump", "--json", clean}, 0), /*lines=*/true), IsEmpty());
  const std::string trace = dir.path() + "/trace.json";
  Output(dir, {"export", "--chrome", clean, "-o", trace}, 0);
  EXPECT_THAT(Problems("chrome-trace", ReadFile(trace)), IsEmpty());

  // diff: the per-head backward inserts the trunk's backward at collective 12.
  const std::string diff = Output(dir, {"diff", "--json", clean, mtp}, 1);
  EXPECT_THAT(Problems("diff", diff), IsEmpty());
  const json differences = json::parse(diff)["differences"];
  ASSERT_EQ(differences.size(), 1u);
  EXPECT_EQ(differences[0]["kind"], "collectives");
  EXPECT_EQ(differences[0]["collective"], 12);
  EXPECT_EQ(differences[0]["ranks"], json::array({0, 1, 2, 3}));
  const std::string same = Output(dir, {"diff", "--json", clean, clean}, 0);
  EXPECT_THAT(Problems("diff", same), IsEmpty());
  EXPECT_TRUE(json::parse(same)["identical"].get<bool>());

  // check: the baseline of clean holds for clean and fails for the per-head backward.
  const std::string baseline = dir.path() + "/clean.baseline";
  Output(dir, {"baseline", clean, "-o", baseline}, 0);
  const std::string passed = Output(dir, {"check", "--json", "--baseline", baseline, clean}, 0);
  EXPECT_THAT(Problems("check", passed), IsEmpty());
  EXPECT_TRUE(json::parse(passed)["passed"].get<bool>());
  const std::string junit = dir.path() + "/check.xml";
  const std::string failed = Output(dir, {"check", "--json", "--baseline", baseline, mtp, "--junit", junit}, 1);
  EXPECT_THAT(Problems("check", failed), IsEmpty());
  const json check = json::parse(failed);
  EXPECT_FALSE(check["passed"].get<bool>());
  ASSERT_EQ(check["communicators"].size(), 1u);
  EXPECT_EQ(check["communicators"][0]["differences"][0]["collective"], 12);
  // The JUnit message is the difference's one line, the same as the JSON's headline.
  const std::string headline = check["communicators"][0]["differences"][0]["headline"];
  EXPECT_THAT(ReadFile(junit), HasSubstr("message=\"" + headline + "\">@@ " + headline + " @@\n"));
}
#endif  // COLLWATCH_TRAINER_PATH

}  // namespace
}  // namespace collwatch::json_contracts_test
