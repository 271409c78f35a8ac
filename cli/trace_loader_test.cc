// The post-mortem loader (trace_loader.h) on trace folders written by the store's own
// writer (several ranks, a resent batch, a torn tail, run.json), on rings written by the
// interposer's own writer, and on input it cannot read; where each form of path finds its
// traces (FindTraces, shared with `dump`). Threading: single-threaded.
#include "cli/trace_loader.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "interposer/ring_writer.h"
#include "ring/ring_reader.h"
#include "store/event_codec.h"
#include "store/trace_store.h"
#include "store/trace_store_format.h"
#include "tests/support/test_time.h"

namespace collwatch::trace_loader_test {
namespace {

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;

constexpr char kJob[] = "job1";
constexpr uint64_t kComm = 0x3f2a9c0100000001ull;
constexpr int32_t kRanks = 2;
constexpr uint64_t kCollectives = 5;
constexpr uint64_t kRecordsPerRank = 2 + 2 * kCollectives;
constexpr uint32_t kStepRegion = 1;  // the writers' id of "fwd/step"
constexpr uint64_t kStartMonotonicNs = 1'000'000'000'000;
constexpr uint64_t kStartRealtimeNs = 1'700'000'000'000'000'000;
constexpr uint64_t kMs = 1'000'000;

// The calls of one rank as its ring holds them, all on the shared lane: the creation of
// the job's communicator, then kCollectives all-reduces in `region_id`, each returning
// with no device work (complete at return): kRecordsPerRank records.
std::vector<IndexedRecord> RankCalls(int32_t rank, uint32_t region_id) {
  std::vector<IndexedRecord> records;
  uint64_t t_ns = kStartMonotonicNs + 10 * kMs;
  const auto call = [&](ring::ApiFn fn, uint64_t seq) {
    ring::Record enter{};
    enter.kind = static_cast<uint16_t>(ring::RecordKind::kEnter);
    enter.fn = static_cast<uint16_t>(fn);
    enter.comm_id = kComm;
    enter.rank = rank;
    enter.nranks = kRanks;
    enter.seq = seq;
    enter.dtype = ring::kNoDtype;
    enter.redop = ring::kUnset;
    enter.root_or_peer = ring::kUnset;
    enter.t_ns = t_ns;
    if (fn == ring::ApiFn::kAllReduce) {
      enter.count = 1024;
      enter.dtype = 7;  // float32
      enter.redop = 0;  // sum
      enter.region_id = region_id;
    } else {
      enter.aux0 = kComm;  // the unique id's hash
    }
    const uint64_t enter_index = records.size();
    records.push_back({0, enter_index, enter});
    ring::Record back = enter;
    back.kind = static_cast<uint16_t>(ring::RecordKind::kReturn);
    back.ref_lane = 0;
    back.ref_index = enter_index;
    back.t_ns = t_ns + kMs;
    back.flags = ring::kFlagCompletesAtReturn;
    records.push_back({0, records.size(), back});
    t_ns += 2 * kMs;
  };
  call(ring::ApiFn::kCommInitRank, 0);
  for (uint64_t seq = 1; seq <= kCollectives; ++seq) call(ring::ApiFn::kAllReduce, seq);
  return records;
}

v1::RankIdentity Identity(int32_t rank, const std::string& job = kJob) {
  v1::RankIdentity identity;
  identity.set_job(job);
  identity.set_host("node" + std::to_string(rank));
  identity.set_pid(4000 + rank);
  identity.set_rank(rank);
  identity.set_world_size(kRanks);
  identity.set_lane_count(4);
  identity.set_start_realtime_ns(kStartRealtimeNs);
  identity.set_start_monotonic_ns(kStartMonotonicNs);
  return identity;
}

// What an agent sends of `records`: the events, the region name, and the writer's status
// (exited with `exit_code` when set, else running).
v1::StreamEventsRequest Batch(const std::vector<IndexedRecord>& records, std::optional<int32_t> exit_code) {
  v1::StreamEventsRequest batch;
  for (const IndexedRecord& item : records) EventFromRecord(item, batch.add_events());
  v1::RegionName* region = batch.add_regions();
  region->set_id(kStepRegion);
  region->set_name("fwd/step");
  batch.set_writer_status(exit_code ? v1::WRITER_STATUS_EXITED : v1::WRITER_STATUS_RUNNING);
  if (exit_code) {
    batch.set_exit_recorded(true);
    batch.set_exit_code(*exit_code);
  }
  return batch;
}

// The two-rank job as every complete load must give it: both ranks on one communicator,
// every collective matched and completed, each rank exited with its rank as the status,
// and the region of its calls (`region`, "" for none).
void ExpectTheTwoRankJob(const analyzer::JobModel& model, const std::string& region) {
  EXPECT_EQ(model.unmatched_records(), 0u);
  const analyzer::Comm* comm = model.FindComm(kComm);
  ASSERT_NE(comm, nullptr);
  EXPECT_EQ(comm->nranks, kRanks);
  EXPECT_EQ(comm->ranks_present, kRanks);
  for (int32_t rank = 0; rank < kRanks; ++rank) {
    SCOPED_TRACE(::testing::Message() << "rank " << rank);
    const analyzer::CommRank& entry = comm->ranks[static_cast<size_t>(rank)];
    EXPECT_EQ(entry.progress.completed(), kCollectives);
    const analyzer::Process& process = model.process(entry.process);
    EXPECT_EQ(process.info.global_rank, rank);
    EXPECT_EQ(process.calls.size(), 1 + kCollectives) << "one call per enter, its return matched to it";
    EXPECT_EQ(process.status, ProcessStatus::kExited);
    EXPECT_TRUE(process.exit_recorded);
    EXPECT_EQ(process.exit_code, rank);
    const analyzer::Call* first = model.Collective(*comm, rank, 1);
    ASSERT_NE(first, nullptr);
    EXPECT_EQ(model.RegionName(first->region), region);
  }
}

class TraceLoaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/collwatch-loader-test-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    root_ = pattern;
  }
  void TearDown() override { fs::remove_all(root_); }

  // Both ranks' traces under `out_dir`/job1/ as the collector stores them. Rank 1's
  // batch arrives twice, as an agent resends what was not acknowledged before a
  // reconnect: the store keeps it once.
  void WriteTraces(const std::string& out_dir, const std::string& job = kJob) {
    TraceStore store(out_dir, StoreOptions{});
    for (int32_t rank = 0; rank < kRanks; ++rank) {
      absl::StatusOr<std::shared_ptr<RankTraceWriter>> writer = store.Writer(Identity(rank, job));
      ASSERT_TRUE(writer.ok()) << writer.status();
      const v1::StreamEventsRequest batch = Batch(RankCalls(rank, kStepRegion), /*exit_code=*/rank);
      ASSERT_TRUE((*writer)->Append(batch).ok());
      if (rank == 1) {
        absl::StatusOr<AppendResult> resent = (*writer)->Append(batch);
        ASSERT_TRUE(resent.ok()) << resent.status();
        ASSERT_EQ(resent->duplicates, kRecordsPerRank);
      }
    }
  }

  // Each rank's ring in `dir`, written by the interposer's writer with RANK set, exited
  // with its rank as the status. The writer names a ring by its process: each is renamed
  // to rank<N>.ring before the next one is made.
  void WriteRings(const std::string& dir) {
    for (int32_t rank = 0; rank < kRanks; ++rank) {
      Config config;
      config.ring_records = 64;
      std::snprintf(config.ring_dir, sizeof config.ring_dir, "%s", dir.c_str());
      std::snprintf(config.job, sizeof config.job, "%s", kJob);
      ASSERT_EQ(setenv("RANK", std::to_string(rank).c_str(), 1), 0);
      std::unique_ptr<RingWriter> writer = RingWriter::Create(config);
      unsetenv("RANK");
      ASSERT_NE(writer, nullptr);
      for (const IndexedRecord& item : RankCalls(rank, /*region_id=*/0)) {
        ASSERT_EQ(writer->Append(RingWriter::kSharedLane, item.record), item.index);
      }
      writer->RecordExitCode(rank);
      writer->SetState(ring::WriterState::kExited);
      const std::string path = writer->path();
      writer.reset();
      fs::rename(path, dir + "/rank" + std::to_string(rank) + ".ring");
    }
  }

  std::string root_;
};

TEST_F(TraceLoaderTest, JobFolderOfSeveralRanksLoadsEachRecordOnce) {
  WriteTraces(root_ + "/out");
  analyzer::JobModel model;
  LoadSummary summary;
  const absl::Status status = LoadTraces(root_ + "/out/" + kJob, &model, &summary);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(summary.source, "trace store");
  EXPECT_EQ(summary.job, kJob);
  EXPECT_THAT(summary.inputs, ElementsAre(HasSubstr("/rank-0."), HasSubstr("/rank-1.")));
  EXPECT_EQ(summary.records, kRanks * kRecordsPerRank) << "the resent batch counts once";
  EXPECT_THAT(summary.warnings, IsEmpty());
  EXPECT_EQ(model.process_count(), 2u);
  ExpectTheTwoRankJob(model, "fwd/step");
}

// The same job named by the output folder (a standalone collector's, one job in it) and
// one rank by its own folder.
TEST_F(TraceLoaderTest, OutputFolderAndOneRankFolderLoadToo) {
  WriteTraces(root_ + "/out");
  analyzer::JobModel job;
  LoadSummary summary;
  ASSERT_TRUE(LoadTraces(root_ + "/out", &job, &summary).ok());
  EXPECT_EQ(summary.inputs.size(), 2u);
  ExpectTheTwoRankJob(job, "fwd/step");

  analyzer::JobModel one;
  LoadSummary one_summary;
  const std::string rank_dir = root_ + "/out/" + kJob + "/" + RankTraceDirName(Identity(1));
  ASSERT_TRUE(LoadTraces(rank_dir, &one, &one_summary).ok());
  EXPECT_EQ(one_summary.source, "trace store");
  EXPECT_THAT(one_summary.inputs, ElementsAre(rank_dir));
  EXPECT_EQ(one_summary.records, kRecordsPerRank);
  ASSERT_EQ(one.process_count(), 1u);
  EXPECT_EQ(one.process(0).info.global_rank, 1);
}

// `collwatch run --out`: run.json names the job, how its command ended, when collwatch
// stopped it, and the ranks seen in its process tree (one never made a ring).
TEST_F(TraceLoaderTest, RunFolderTakesWhatRunJsonSays) {
  WriteTraces(root_ + "/run");
  std::ofstream(root_ + "/run/run.json") << R"({"job": "job1", "stall_after_s": 12.5, "stopped_at_ns": 1700000000500000000,
    "exit_status": 3, "rank_processes": [{"host": "node2", "pid": 4002, "global_rank": 2, "world_size": 3,
    "state": "stopped", "sampled_ns": 1700000000400000000}]})";
  analyzer::JobModel model;
  LoadSummary summary;
  const absl::Status status = LoadTraces(root_ + "/run", &model, &summary);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(summary.job, kJob);
  EXPECT_DOUBLE_EQ(summary.stall_after_s, 12.5);
  EXPECT_EQ(summary.stopped_at_ns, 1'700'000'000'500'000'000);
  EXPECT_EQ(summary.command_exit_status, 3);
  ExpectTheTwoRankJob(model, "fwd/step");
  ASSERT_EQ(model.process_count(), 3u);
  const std::optional<analyzer::ProcessId> observed = model.FindProcess("node2", 4002);
  ASSERT_TRUE(observed.has_value());
  EXPECT_TRUE(model.process(*observed).observed_only);
  EXPECT_EQ(model.process(*observed).info.global_rank, 2);
  EXPECT_EQ(model.process(*observed).sample.state, ProcessState::kStopped);
}

// Rank 1 ends a communicator its own trace never made (its creation lost, say): the worker
// that streamed the trace into a model of its own, keeping none of it, cannot hand that
// model over (JobModel::Adopt), so the trace is read again and applied: nothing lost.
TEST_F(TraceLoaderTest, ATraceItsWorkerCannotHandOverIsReadAgainWhole) {
  constexpr uint64_t kUnknownComm = 0x77;
  for (int32_t rank = 0; rank < kRanks; ++rank) {
    std::vector<IndexedRecord> records = RankCalls(rank, kStepRegion);
    if (rank == 1) {
      ring::Record destroy{};
      destroy.kind = static_cast<uint16_t>(ring::RecordKind::kEnter);
      destroy.fn = static_cast<uint16_t>(ring::ApiFn::kCommDestroy);
      destroy.comm_id = kUnknownComm;
      destroy.rank = ring::kUnset;
      destroy.nranks = ring::kUnset;
      destroy.t_ns = kStartMonotonicNs + 100 * kMs;
      records.push_back({0, records.size(), destroy});
    }
    const std::string dir = root_ + "/out/" + kJob + "/" + RankTraceDirName(Identity(rank));
    absl::StatusOr<std::unique_ptr<RankTraceWriter>> writer = RankTraceWriter::Open(dir, Identity(rank));
    ASSERT_TRUE(writer.ok()) << writer.status();
    ASSERT_TRUE((*writer)->Append(Batch(records, /*exit_code=*/rank)).ok());
  }
  ASSERT_EQ(setenv("COLLWATCH_BUILD_APART", "on", 1), 0);
  analyzer::JobModel model;
  LoadSummary summary;
  const absl::Status status = LoadTraces(root_ + "/out/" + kJob, &model, &summary);
  unsetenv("COLLWATCH_BUILD_APART");
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(summary.records, kRanks * kRecordsPerRank + 1);
  ASSERT_EQ(model.process_count(), 2u);
  const analyzer::Process& second = model.process(1);
  ASSERT_EQ(second.calls.size(), 2 + kCollectives) << "its creation, its collectives and the destroy";
  EXPECT_EQ(second.calls[1 + kCollectives].fn, ring::ApiFn::kCommDestroy);
  EXPECT_EQ(second.exit_code, 1);
}

// The collector died mid-write: the frames before the torn one load, with a warning.
TEST_F(TraceLoaderTest, TornTailIsAWarningAndTheFramesBeforeItLoad) {
  const std::string dir = root_ + "/rank0";
  const std::vector<IndexedRecord> records = RankCalls(0, kStepRegion);
  const std::vector<IndexedRecord> first(records.begin(), records.begin() + 6);  // creation, 2 collectives
  const std::vector<IndexedRecord> rest(records.begin() + 6, records.end());
  uint64_t good_bytes = 0;
  {
    absl::StatusOr<std::unique_ptr<RankTraceWriter>> writer = RankTraceWriter::Open(dir, Identity(0));
    ASSERT_TRUE(writer.ok()) << writer.status();
    ASSERT_TRUE((*writer)->Append(Batch(first, std::nullopt)).ok());
    good_bytes = fs::file_size(dir + "/" + store::kLogFileName);
    ASSERT_TRUE((*writer)->Append(Batch(rest, /*exit_code=*/0)).ok());
  }
  fs::resize_file(dir + "/" + store::kLogFileName, good_bytes + 30);

  analyzer::JobModel model;
  LoadSummary summary;
  const absl::Status status = LoadTraces(dir, &model, &summary);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(summary.records, first.size());
  EXPECT_THAT(summary.warnings, ElementsAre(AllOf(HasSubstr(dir), HasSubstr("torn tail of 30 bytes ignored"))));
  const analyzer::Comm* comm = model.FindComm(kComm);
  ASSERT_NE(comm, nullptr);
  EXPECT_EQ(comm->ranks[0].progress.completed(), 2u);
  EXPECT_EQ(model.process(0).status, ProcessStatus::kRunning) << "its exit was in the torn frame";

  std::ostringstream err;
  analyzer::JobModel again;
  LoadSummary again_summary;
  EXPECT_TRUE(LoadTracesForCommand("analyze", dir, &again, &again_summary, err));
  EXPECT_THAT(err.str(), HasSubstr("collwatch analyze: warning: " + dir + ": torn tail of 30 bytes ignored"));
}

TEST_F(TraceLoaderTest, RingsWrittenByTheInterposerLoadAsTheJob) {
  const std::string dir = root_ + "/rings";
  ASSERT_NO_FATAL_FAILURE(WriteRings(dir));
  analyzer::JobModel model;
  LoadSummary summary;
  const absl::Status status = LoadTraces(dir, &model, &summary);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(summary.source, "rings");
  EXPECT_EQ(summary.job, kJob);
  EXPECT_THAT(summary.inputs, ElementsAre(dir + "/rank0.ring", dir + "/rank1.ring"));
  EXPECT_EQ(summary.records, kRanks * kRecordsPerRank);
  EXPECT_THAT(summary.warnings, IsEmpty());
  EXPECT_EQ(model.process_count(), 2u);
  ExpectTheTwoRankJob(model, "");

  analyzer::JobModel one;
  LoadSummary one_summary;
  ASSERT_TRUE(LoadTraces(dir + "/rank1.ring", &one, &one_summary).ok());
  EXPECT_EQ(one_summary.source, "rings");
  ASSERT_EQ(one.process_count(), 1u);
  EXPECT_EQ(one.process(0).info.global_rank, 1);
}

// A damaged input is skipped with a warning naming it; the others still load.
TEST_F(TraceLoaderTest, AGarbageRingBesideGoodOnesIsSkipped) {
  const std::string dir = root_ + "/rings";
  ASSERT_NO_FATAL_FAILURE(WriteRings(dir));
  std::ofstream(dir + "/garbage.ring") << "not a ring";
  analyzer::JobModel model;
  LoadSummary summary;
  ASSERT_TRUE(LoadTraces(dir, &model, &summary).ok());
  EXPECT_EQ(summary.inputs.size(), 2u);
  EXPECT_THAT(summary.warnings, ElementsAre(AllOf(HasSubstr(dir + "/garbage.ring: skipped: "),
                                                  HasSubstr("not a readable collwatch ring"))));
  ExpectTheTwoRankJob(model, "");
}

// Garbage over one record of a ring: a gap in what the ring kept, said as such (it read as
// records "overwritten by later ones", the ring's design, and the verdict stayed healthy).
TEST_F(TraceLoaderTest, AGarbageRecordInARingIsAGapNotAnOverwrite) {
  const std::string dir = root_ + "/rings";
  ASSERT_NO_FATAL_FAILURE(WriteRings(dir));
  const std::string ring = dir + "/rank1.ring";
  {
    const int fd = open(ring.c_str(), O_RDWR);
    ASSERT_GE(fd, 0);
    ring::Header header{};
    ASSERT_EQ(pread(fd, &header, sizeof header, 0), static_cast<ssize_t>(sizeof header));
    const uint64_t garbage = 0x5a5a5a5a5a5a5a5aull;
    const off_t slot = static_cast<off_t>(header.lanes_offset + RingWriter::kSharedLane * header.lane_bytes +
                                          ring::kLaneHeaderBytes + 2 * ring::kRecordBytes);
    ASSERT_EQ(pwrite(fd, &garbage, sizeof garbage, slot), static_cast<ssize_t>(sizeof garbage));
    close(fd);
  }
  analyzer::JobModel model;
  LoadSummary summary;
  ASSERT_TRUE(LoadTraces(dir, &model, &summary).ok());
  EXPECT_EQ(summary.records, kRanks * kRecordsPerRank - 1);
  EXPECT_THAT(summary.notes, IsEmpty());
  EXPECT_THAT(summary.warnings, ElementsAre(ring + ": 1 record damaged (its slot holds what no write of the ring left)"));
}

TEST_F(TraceLoaderTest, InputItCannotReadIsAClearError) {
  const auto load = [](const std::string& path, LoadSummary* summary) {
    analyzer::JobModel model;
    return LoadTraces(path, &model, summary);
  };
  LoadSummary summary;
  absl::Status status = load(root_ + "/missing", &summary);
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(status.message(), root_ + "/missing: no such file or folder");

  fs::create_directories(root_ + "/empty");
  status = load(root_ + "/empty", &summary);
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(status.message(), HasSubstr("no collwatch traces here"));

  fs::create_directories(root_ + "/garbage");
  std::ofstream(root_ + "/garbage/x.ring") << "not a ring";
  LoadSummary garbage;
  status = load(root_ + "/garbage/x.ring", &garbage);
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(status.message(), "none of the 1 inputs could be read");
  EXPECT_THAT(garbage.warnings, ElementsAre(HasSubstr("x.ring: skipped: ")));

  fs::create_directories(root_ + "/badtrace");
  std::ofstream(root_ + "/badtrace/" + store::kLogFileName) << "this is not a trace file at all";
  LoadSummary bad_trace;
  status = load(root_ + "/badtrace", &bad_trace);
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(bad_trace.warnings, ElementsAre(HasSubstr(root_ + "/badtrace: skipped: ")));
}

// A FIFO or a device where a trace, its index, a ring or run.json should be: skipped
// with a warning at once, never waited on or read without end (they hung analyze).
TEST_F(TraceLoaderTest, AFifoOrADeviceInAnInputsPlaceIsSkippedAtOnce) {
  const auto start = std::chrono::steady_clock::now();
  WriteTraces(root_ + "/out");
  const std::vector<std::string> traces = ListRankTraces(root_ + "/out", kJob);
  ASSERT_EQ(traces.size(), 2u);
  fs::remove(traces[1] + "/" + store::kLogFileName);
  ASSERT_EQ(mkfifo((traces[1] + "/" + store::kLogFileName).c_str(), 0600), 0);
  ASSERT_EQ(mkfifo((root_ + "/out/run.json").c_str(), 0600), 0);
  analyzer::JobModel model;
  LoadSummary summary;
  ASSERT_TRUE(LoadTraces(root_ + "/out/" + kJob, &model, &summary).ok());
  EXPECT_EQ(model.process_count(), 1u);
  EXPECT_THAT(summary.warnings, ElementsAre(HasSubstr("is a FIFO, not a regular file")));
  analyzer::JobModel from_out;
  LoadSummary out_summary;
  EXPECT_TRUE(LoadTraces(root_ + "/out", &from_out, &out_summary).ok());

  const std::string rings = root_ + "/rings";
  ASSERT_NO_FATAL_FAILURE(WriteRings(rings));
  ASSERT_EQ(mkfifo((rings + "/fifo.ring").c_str(), 0600), 0);
  fs::create_symlink("/dev/zero", rings + "/zero.ring");
  analyzer::JobModel ring_model;
  LoadSummary ring_summary;
  ASSERT_TRUE(LoadTraces(rings, &ring_model, &ring_summary).ok());
  EXPECT_THAT(ring_summary.warnings,
              UnorderedElementsAre(AllOf(HasSubstr("fifo.ring: skipped: "), HasSubstr("is a FIFO")),
                                   AllOf(HasSubstr("zero.ring: skipped: "), HasSubstr("is a character device"))));
  ExpectTheTwoRankJob(ring_model, "");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::duration<double>(testing::Scaled(20)));
}

TEST_F(TraceLoaderTest, AFolderOfSeveralJobsAsksForOne) {
  WriteTraces(root_ + "/out", "jobA");
  WriteTraces(root_ + "/out", "jobB");
  analyzer::JobModel model;
  LoadSummary summary;
  const absl::Status status = LoadTraces(root_ + "/out", &model, &summary);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), AllOf(HasSubstr(" holds several jobs ("), HasSubstr("jobA"), HasSubstr("jobB"),
                                      HasSubstr("): pick one with --job, or name its folder")));
}

// FindTraces, which `analyze` and `dump` share: each form of path gives its traces, sorted.
TEST_F(TraceLoaderTest, FindTracesSaysWhereEachFormsTracesAre) {
  WriteTraces(root_ + "/out");
  const std::string job_dir = root_ + "/out/" + kJob;
  const std::vector<std::string> rank_dirs = {job_dir + "/" + RankTraceDirName(Identity(0)),
                                              job_dir + "/" + RankTraceDirName(Identity(1))};
  for (const std::string& path : {job_dir, root_ + "/out"}) {
    SCOPED_TRACE(path);
    absl::StatusOr<TraceSources> sources = FindTraces(path);
    ASSERT_TRUE(sources.ok()) << sources.status();
    EXPECT_EQ(sources->kind, TraceSources::Kind::kTraceStore);
    EXPECT_EQ(sources->paths, rank_dirs);
    EXPECT_FALSE(sources->run.has_value());
    EXPECT_FALSE(sources->paths_from_run);
  }
  absl::StatusOr<TraceSources> one = FindTraces(rank_dirs[1]);
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(one->kind, TraceSources::Kind::kTraceStore);
  EXPECT_THAT(one->paths, ElementsAre(rank_dirs[1]));

  const std::string rings = root_ + "/rings";
  ASSERT_NO_FATAL_FAILURE(WriteRings(rings));
  absl::StatusOr<TraceSources> ring_dir = FindTraces(rings);
  ASSERT_TRUE(ring_dir.ok()) << ring_dir.status();
  EXPECT_EQ(ring_dir->kind, TraceSources::Kind::kRings);
  EXPECT_THAT(ring_dir->paths, ElementsAre(rings + "/rank0.ring", rings + "/rank1.ring"));
  absl::StatusOr<TraceSources> ring_file = FindTraces(rings + "/rank1.ring");
  ASSERT_TRUE(ring_file.ok()) << ring_file.status();
  EXPECT_EQ(ring_file->kind, TraceSources::Kind::kRings);
  EXPECT_THAT(ring_file->paths, ElementsAre(rings + "/rank1.ring"));

  EXPECT_EQ(FindTraces(root_ + "/missing").status().code(), absl::StatusCode::kNotFound);
}

// A `collwatch run` folder: run.json names the job whose traces are read, even beside
// another job's (which, without run.json, would be a folder of several jobs).
TEST_F(TraceLoaderTest, FindTracesTakesTheJobRunJsonNames) {
  WriteTraces(root_ + "/run");
  WriteTraces(root_ + "/run", "jobB");
  std::ofstream(root_ + "/run/run.json") << R"({"job": "job1", "exit_status": 0})";
  absl::StatusOr<TraceSources> sources = FindTraces(root_ + "/run");
  ASSERT_TRUE(sources.ok()) << sources.status();
  EXPECT_EQ(sources->kind, TraceSources::Kind::kTraceStore);
  EXPECT_TRUE(sources->paths_from_run);
  ASSERT_TRUE(sources->run.has_value());
  EXPECT_EQ(sources->run->job, "job1");
  EXPECT_EQ(sources->run->exit_status, 0);
  EXPECT_THAT(sources->paths, ElementsAre(HasSubstr("/run/job1/"), HasSubstr("/run/job1/")));
}

TEST_F(TraceLoaderTest, CommandsSayWhatWentWrongInOneLine) {
  std::ostringstream err;
  analyzer::JobModel model;
  LoadSummary summary;
  EXPECT_FALSE(LoadTracesForCommand("analyze", root_ + "/missing", &model, &summary, err));
  EXPECT_EQ(err.str(), "collwatch analyze: " + root_ + "/missing: no such file or folder\n");
}

}  // namespace
}  // namespace collwatch::trace_loader_test
