// Inputs that are not what they seem, loaded (issue #38 items 3 and 4): a run.json cut
// short, a FIFO or a link to /dev/zero (the job's failure was lost and a failed run read
// as healthy); a rank trace folder copied beside itself (a fifth process); two jobs under
// one job id (two rank 0s); job ids that share their first 63 bytes (one job).
// Threading: single-threaded.
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "cli/analyze_command.h"
#include "cli/trace_loader.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "interposer/ring_writer.h"
#include "ring/settings.h"
#include "store/event_codec.h"
#include "store/trace_store.h"

namespace collwatch::trace_loader_inputs_test {
namespace {

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr uint64_t kComm = 0x51c0ffee00000001ull;
constexpr int32_t kRanks = 2;
constexpr uint64_t kStartRealtimeNs = 1'700'000'000'000'000'000;
constexpr uint64_t kMs = 1'000'000;

// A healthy rank: its communicator made, three all-reduces each complete at return,
// exited 0.
v1::StreamEventsRequest HealthyRank(int32_t rank) {
  std::vector<IndexedRecord> records;
  uint64_t t_ns = kStartRealtimeNs + 10 * kMs;
  const auto call = [&](ring::ApiFn fn, uint64_t seq) {
    ring::Record enter{};
    enter.kind = static_cast<uint16_t>(ring::RecordKind::kEnter);
    enter.fn = static_cast<uint16_t>(fn);
    enter.comm_id = kComm;
    enter.rank = rank;
    enter.nranks = kRanks;
    enter.seq = seq;
    enter.count = fn == ring::ApiFn::kAllReduce ? 1024 : 0;
    enter.dtype = fn == ring::ApiFn::kAllReduce ? 7 : ring::kNoDtype;
    enter.redop = fn == ring::ApiFn::kAllReduce ? 0 : ring::kUnset;
    enter.root_or_peer = ring::kUnset;
    enter.aux0 = fn == ring::ApiFn::kAllReduce ? 0 : kComm;
    enter.t_ns = t_ns;
    const uint64_t enter_index = records.size();
    records.push_back({0, enter_index, enter});
    ring::Record back = enter;
    back.kind = static_cast<uint16_t>(ring::RecordKind::kReturn);
    back.ref_index = enter_index;
    back.t_ns = t_ns + kMs;
    back.flags = ring::kFlagCompletesAtReturn;
    records.push_back({0, records.size(), back});
    t_ns += 2 * kMs;
  };
  call(ring::ApiFn::kCommInitRank, 0);
  for (uint64_t seq = 1; seq <= 3; ++seq) call(ring::ApiFn::kAllReduce, seq);
  v1::StreamEventsRequest batch;
  for (const IndexedRecord& item : records) EventFromRecord(item, batch.add_events());
  batch.set_writer_status(v1::WRITER_STATUS_EXITED);
  batch.set_exit_recorded(true);
  batch.set_exit_code(0);
  return batch;
}

v1::RankIdentity Identity(int32_t rank, const std::string& job, int32_t pid) {
  v1::RankIdentity identity;
  identity.set_job(job);
  identity.set_host("node" + std::to_string(rank));
  identity.set_pid(pid);
  identity.set_rank(rank);
  identity.set_world_size(kRanks);
  identity.set_lane_count(1);
  identity.set_start_realtime_ns(kStartRealtimeNs);
  identity.set_start_monotonic_ns(kStartRealtimeNs);
  return identity;
}

class TraceLoaderInputsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/collwatch-loader-inputs-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    root_ = pattern;
  }
  void TearDown() override { fs::remove_all(root_); }

  // A healthy two-rank job's traces under `out_dir`, its processes' pids from `first_pid`.
  void WriteJob(const std::string& out_dir, const std::string& job, int32_t first_pid = 4000) {
    TraceStore store(out_dir, StoreOptions{});
    for (int32_t rank = 0; rank < kRanks; ++rank) {
      absl::StatusOr<std::shared_ptr<RankTraceWriter>> writer = store.Writer(Identity(rank, job, first_pid + rank));
      ASSERT_TRUE(writer.ok()) << writer.status();
      ASSERT_TRUE((*writer)->Append(HealthyRank(rank)).ok());
    }
  }

  // `collwatch analyze DIR`: its exit status; its report and stderr in `text`.
  int Analyze(const std::string& dir, std::string* text) {
    AnalyzeOptions options;
    options.path = dir;
    std::ostringstream out, err;
    const int status = RunAnalyzeCommand(options, out, err);
    *text = out.str() + "\n--- stderr ---\n" + err.str();
    return status;
  }

  std::string root_;
};

// The job's command exited 3; its run.json was then cut short, replaced by a FIFO or by a
// link to /dev/zero. analyze said "No findings" and exited 0: the failure was lost without
// a word. The record lost is named, and the verdict is that the data is incomplete.
TEST_F(TraceLoaderInputsTest, ARunJsonThatCannotBeReadIsNamedAndTheVerdictIncomplete) {
  const std::string run = root_ + "/run";
  ASSERT_NO_FATAL_FAILURE(WriteJob(run, "job1"));
  const std::string record = R"({"job": "job1", "exit_status": 3, "command": ["python", "train.py"]})";
  std::string text;
  std::ofstream(run + "/run.json") << R"({"job": "job1", "exit_status": 0})";
  ASSERT_EQ(Analyze(run, &text), 0) << "the job itself is healthy: " << text;
  std::ofstream(run + "/run.json") << record;
  ASSERT_EQ(Analyze(run, &text), 1) << "its command failed: " << text;

  struct Spoilt {
    std::string how;
    std::function<void(const std::string&)> make;
    std::string words;
  };
  const std::vector<Spoilt> cases = {
      {"cut short", [&](const std::string& path) { std::ofstream(path) << record.substr(0, 30); }, "not JSON"},
      {"a FIFO", [](const std::string& path) { ASSERT_EQ(mkfifo(path.c_str(), 0600), 0); }, "is a FIFO"},
      {"a link to /dev/zero", [](const std::string& path) { fs::create_symlink("/dev/zero", path); },
       "character device"},
      {"a dangling link", [](const std::string& path) { fs::create_symlink("/nowhere/run.json", path); }, ""},
      {"no job", [](const std::string& path) { std::ofstream(path) << R"({"exit_status": 3})"; }, "names no job"},
  };
  for (const Spoilt& spoilt : cases) {
    SCOPED_TRACE(spoilt.how);
    fs::remove(run + "/run.json");
    spoilt.make(run + "/run.json");
    EXPECT_EQ(Analyze(run, &text), 1) << text;
    EXPECT_THAT(text, AllOf(HasSubstr(run + "/run.json"), HasSubstr(spoilt.words),
                            HasSubstr("the run's record could not be read"), HasSubstr("data is incomplete")))
        << text;
    EXPECT_THAT(text, Not(HasSubstr("No findings"))) << text;
  }
  // No run.json at all (a standalone collector's folder) is no loss.
  fs::remove(run + "/run.json");
  EXPECT_EQ(Analyze(run, &text), 0) << text;
}

// A rank's trace folder copied beside itself (rank-1...copy): it was read as a third
// process of a two-rank job. The same process (host, pid, start time) is read once, and
// the report says which folder was a copy.
TEST_F(TraceLoaderInputsTest, ACopiedRankTraceFolderIsReadOnceAndSaidSo) {
  ASSERT_NO_FATAL_FAILURE(WriteJob(root_ + "/out", "job1"));
  const std::vector<std::string> traces = ListRankTraces(root_ + "/out", "job1");
  ASSERT_EQ(traces.size(), 2u);
  fs::copy(traces[1], traces[1] + ".copy", fs::copy_options::recursive);
  analyzer::JobModel model;
  LoadSummary summary;
  const absl::Status status = LoadTraces(root_ + "/out/job1", &model, &summary);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(model.process_count(), 2u);
  EXPECT_EQ(summary.inputs.size(), 2u);
  EXPECT_THAT(summary.notes, Contains(AllOf(HasSubstr(traces[1] + ".copy: a copy of " + traces[1]),
                                            HasSubstr("read once"))));
  std::string text;
  EXPECT_EQ(Analyze(root_ + "/out/job1", &text), 0) << text;
  EXPECT_THAT(text, HasSubstr("2 processes")) << text;
}

// Two jobs under one job id (the preload's default "local", or a reused launcher id) in
// one folder: read as one job with two rank 0s and two rank 1s. Refused, naming both.
TEST_F(TraceLoaderInputsTest, TwoProcessesOfOneRankOfOneJobAreRefusedNamingBoth) {
  ASSERT_NO_FATAL_FAILURE(WriteJob(root_ + "/out", "local", 4000));
  ASSERT_NO_FATAL_FAILURE(WriteJob(root_ + "/out", "local", 5000));
  analyzer::JobModel model;
  LoadSummary summary;
  const absl::Status status = LoadTraces(root_ + "/out", &model, &summary);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(status.message(), AllOf(HasSubstr("two processes are rank 0 of job local"), HasSubstr("pid 4000"),
                                      HasSubstr("pid 5000"), HasSubstr("never read as one")));
  std::string text;
  EXPECT_EQ(Analyze(root_ + "/out", &text), 2) << text;

  // The same in a ring folder: two jobs' rings, both "local", both rank 0.
  const std::string rings = root_ + "/rings";
  fs::create_directories(rings);
  fs::permissions(rings, fs::perms::owner_all);  // a ring folder is private to its user
  for (int attempt = 0; attempt < 2; ++attempt) {
    Config config;
    config.ring_records = 64;
    std::snprintf(config.ring_dir, sizeof config.ring_dir, "%s", rings.c_str());
    std::snprintf(config.job, sizeof config.job, "local");
    ASSERT_EQ(setenv("RANK", "0", 1), 0);
    std::unique_ptr<RingWriter> writer = RingWriter::Create(config);
    unsetenv("RANK");
    ASSERT_NE(writer, nullptr);
    writer->SetState(ring::WriterState::kExited);
    const std::string path = writer->path();
    writer.reset();
    fs::rename(path, rings + "/job" + std::to_string(attempt) + ".ring");
    usleep(2000);  // another start time: another process for the reader
  }
  analyzer::JobModel ring_model;
  LoadSummary ring_summary;
  const absl::Status ring_status = LoadTraces(rings, &ring_model, &ring_summary);
  EXPECT_EQ(ring_status.code(), absl::StatusCode::kInvalidArgument) << ring_status;
  EXPECT_THAT(ring_status.message(), AllOf(HasSubstr("two processes are rank 0 of job local"),
                                           HasSubstr("job0.ring"), HasSubstr("job1.ring")));
}

// Two job ids equal in their first 63 bytes: the ring header and the store's folder cut
// both to the same 63 (or 64) bytes, and the two jobs were one. A cut id keeps a hash of
// the whole: they stay two, and a folder of both asks which one.
TEST_F(TraceLoaderInputsTest, JobIdsThatShareTheirFirst63BytesStayTwoJobs) {
  const std::string first = std::string(70, 'j') + "-a";
  const std::string second = std::string(70, 'j') + "-b";
  char first_cut[ring::kJobBytes], second_cut[ring::kJobBytes];
  SafeJobName(first.c_str(), first_cut, sizeof first_cut);
  SafeJobName(second.c_str(), second_cut, sizeof second_cut);
  EXPECT_STRNE(first_cut, second_cut);
  EXPECT_EQ(std::string(first_cut).size(), ring::kJobBytes - 1);
  EXPECT_NE(JobTracesDir(root_, first), JobTracesDir(root_, second));

  ASSERT_NO_FATAL_FAILURE(WriteJob(root_ + "/out", first, 4000));
  ASSERT_NO_FATAL_FAILURE(WriteJob(root_ + "/out", second, 5000));
  analyzer::JobModel model;
  LoadSummary summary;
  const absl::Status status = LoadTraces(root_ + "/out", &model, &summary);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(status.message(), HasSubstr("holds several jobs"));
  analyzer::JobModel one;
  LoadSummary one_summary;
  ASSERT_TRUE(LoadTraces(JobTracesDir(root_ + "/out", second), &one, &one_summary).ok());
  EXPECT_EQ(one.process_count(), 2u);
  EXPECT_EQ(one_summary.job, second);
}

}  // namespace
}  // namespace collwatch::trace_loader_inputs_test
