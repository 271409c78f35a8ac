// report.json and report.txt: a finding's `processes`, and the verdict (`healthy`,
// `ranks`) of jobs whose ranks exited non-zero, were killed, were stopped by collwatch,
// whose command failed, or that made no ring; report.json of names that are not UTF-8.
#include "analyzer/report.h"

#include "absl/strings/str_cat.h"
#include "analyzer/synthetic_job.h"
#include "gtest/gtest.h"
#include "ring/ring_leftovers.h"

namespace collwatch::analyzer::report_test {
namespace {

constexpr uint64_t kComm = 0x3f2a9c0100000001ull;
constexpr int64_t kStart = 1'700'000'000'000'000'000;

// `ranks` ranks that each created the communicator and ran `collectives` all-reduces;
// only the first `traced` of them (all by default) left a trace.
class EndedJob {
 public:
  EndedJob(int ranks, int collectives, int traced = -1) : job_(&model_) {
    for (int rank = 0; rank < (traced < 0 ? ranks : traced); ++rank) {
      const ProcessId process = job_.AddProcess(rank);
      job_.Init(process, kComm, rank, ranks, kStart);
      for (int seq = 1; seq <= collectives; ++seq) {
        const int64_t t = kStart + seq * kMs;
        job_.Collective(process, kComm, rank, ranks, static_cast<uint64_t>(seq),
                        SyntheticOp{ring::ApiFn::kAllReduce, 1, 7, "", 0}, t, t + kMs / 2);
      }
    }
  }
  void Exit(ProcessId process, int32_t code) {
    model_.SetStatus(process, ProcessStatus::kExited, static_cast<uint64_t>(kStart + kSecond), 0);
    model_.SetExitCode(process, code);
  }
  void Kill(ProcessId process) {
    model_.SetStatus(process, ProcessStatus::kDead, static_cast<uint64_t>(kStart + kSecond), 0);
  }
  JobModel& model() { return model_; }
  SyntheticJob& job() { return job_; }

 private:
  JobModel model_;
  SyntheticJob job_;
};

TEST(ReportVerdictTest, CleanExitsAreHealthyAndSayHowEachRankEnded) {
  EndedJob job(2, 3);
  job.Exit(0, 0);
  job.Exit(1, 0);
  ReportInfo info = DescribeJob(job.model());
  info.command_exit_status = 0;
  const nlohmann::json report = ReportJson({}, info);
  EXPECT_TRUE(report["healthy"].get<bool>());
  ASSERT_EQ(report["ranks"].size(), 2u);
  const nlohmann::json& rank = report["ranks"][1];
  EXPECT_EQ(rank["global_rank"], 1);
  EXPECT_EQ(rank["pid"], 1001);
  EXPECT_EQ(rank["host"], "node0");
  EXPECT_EQ(rank["ended"], "exited");
  EXPECT_EQ(rank["exit_code"], 0);
  EXPECT_EQ(rank["last_call"], "all-reduce 4 B (1 x float32) sum, seq 3 of comm 3f2a9c01");
  const std::string text = ReportText({}, info);
  EXPECT_NE(text.find("No findings"), std::string::npos) << text;
  EXPECT_EQ(text.find("Not healthy"), std::string::npos) << text;
}

TEST(ReportVerdictTest, RanksThatExitedNonZeroAreNotHealthy) {
  EndedJob job(4, 2);
  for (ProcessId process = 0; process < 4; ++process) job.Exit(process, 3);
  ReportInfo info = DescribeJob(job.model());
  info.command_exit_status = 3;
  const nlohmann::json report = ReportJson({}, info);
  EXPECT_FALSE(report["healthy"].get<bool>());
  EXPECT_TRUE(report["findings"].empty());
  EXPECT_EQ(report["command_exit_status"], 3);
  for (const nlohmann::json& rank : report["ranks"]) {
    EXPECT_EQ(rank["ended"], "exited");
    EXPECT_EQ(rank["exit_code"], 3);
    EXPECT_NE(rank["last_call"].get<std::string>().find("seq 2 of comm 3f2a9c01"), std::string::npos);
  }
  const std::string text = ReportText({}, info);
  EXPECT_EQ(text.find("No findings"), std::string::npos) << "a failed job is not 'nothing stalled':\n" << text;
  EXPECT_NE(text.find("Not healthy: 4 ranks exited with a status other than 0; every rank ended within 0.00 s: the records "
                      "cannot tell which was first; the command exited with status 3."),
            std::string::npos)
      << text;
  // The four ranks ended alike: one line for them all.
  EXPECT_NE(text.find("ranks 0-3        exited with 3; last NCCL call: all-reduce 4 B (1 x float32) sum, seq 2 "
                      "of comm 3f2a9c01"),
            std::string::npos)
      << text;
}

TEST(ReportVerdictTest, KilledRanksAreNotHealthyAndHaveNoExitCode) {
  EndedJob job(2, 1);
  job.Kill(0);
  job.Exit(1, 0);
  const ReportInfo info = DescribeJob(job.model());
  const nlohmann::json report = ReportJson({}, info);
  EXPECT_FALSE(report["healthy"].get<bool>());
  EXPECT_EQ(report["ranks"][0]["ended"], "killed or crashed");
  EXPECT_TRUE(report["ranks"][0]["exit_code"].is_null());
  EXPECT_EQ(report["ranks"][1]["ended"], "exited");
  EXPECT_TRUE(report["command_exit_status"].is_null()) << "not known post-mortem without run.json";
  const std::string text = ReportText({}, info);
  EXPECT_NE(text.find("Not healthy: 1 rank was killed or crashed."), std::string::npos) << text;
  EXPECT_NE(text.find("rank 0 (pid 1000) killed or crashed (no exit recorded); last NCCL call: all-reduce"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("rank 1 (pid 1001) exited with 0"), std::string::npos) << text;
}

// A last collective whose record names an impossible size (damage) sits on no
// communicator: its words name none, and it does not count as that rank's place in the
// first communicator (before, an unplaced call read as comm index 0).
TEST(ReportVerdictTest, ALastCollectiveOnNoCommunicatorNamesNone) {
  EndedJob job(2, 2);
  const int64_t late = kStart + 10 * kMs;
  job.job().Collective(1, kComm + 1, 1, 1 << 30, 3, SyntheticOp{ring::ApiFn::kAllReduce, 1, 7, "", 0}, late,
                       late + kMs);
  ASSERT_EQ(job.model().comms().size(), 1u);
  const Call& unplaced = job.model().process(1).calls[job.model().process(1).calls.size() - 1];
  EXPECT_EQ(unplaced.comm, kNoComm);
  const ReportInfo info = DescribeJob(job.model());
  ASSERT_TRUE(info.ranks[1].last_call.has_value());
  EXPECT_EQ(*info.ranks[1].last_call, "all-reduce 4 B (1 x float32) sum");
  EXPECT_EQ(info.ranks[1].last_collective_comm, 0u);
  EXPECT_EQ(info.ranks[0].last_collective_comm, kComm);
}

// A destroy is in no communicator's order but is of one: the words name that one, not the
// job's first (before, every such call read as comm index 0).
TEST(ReportVerdictTest, ALastDestroyNamesTheCommunicatorItDestroyed) {
  EndedJob job(2, 1);
  constexpr uint64_t kSecond = 0x7e11aa0200000005ull;
  const int64_t late = kStart + 10 * kMs;
  for (ProcessId process = 0; process < 2; ++process) {
    job.job().Init(process, kSecond, static_cast<int32_t>(process), 2, late);
    job.job().Lifecycle(process, ring::ApiFn::kCommDestroy, kSecond, late + 2 * kMs);
  }
  const ReportInfo info = DescribeJob(job.model());
  ASSERT_EQ(info.ranks.size(), 2u);
  for (const RankEnding& rank : info.ranks) {
    ASSERT_TRUE(rank.last_call.has_value());
    EXPECT_EQ(*rank.last_call, "comm-destroy of comm 7e11aa02");
  }
}

TEST(ReportVerdictTest, ACommandThatFailedIsNotHealthyEvenIfEveryRankExitedCleanly) {
  EndedJob job(2, 1);
  job.Exit(0, 0);
  job.Exit(1, 0);
  ReportInfo info = DescribeJob(job.model());
  info.command_exit_status = 1;
  EXPECT_FALSE(ReportJson({}, info)["healthy"].get<bool>());
  EXPECT_NE(ReportText({}, info).find("Not healthy: the command exited with status 1."), std::string::npos);
}

// Data that is not the whole job's never gets "healthy": a rank of the world size without
// a trace, or a gap the loader reported (a damaged trace skipped, a torn tail).
TEST(ReportVerdictTest, IncompleteDataIsNeverHealthy) {
  EndedJob job(4, 3, /*traced=*/3);
  for (ProcessId process = 0; process < 3; ++process) job.Exit(process, 0);
  ReportInfo info = DescribeJob(job.model());
  info.command_exit_status = 0;
  EXPECT_EQ(info.missing_ranks, std::vector<int32_t>{3});
  EXPECT_EQ(info.world_size, 4);
  nlohmann::json report = ReportJson({}, info);
  EXPECT_FALSE(report["healthy"].get<bool>());
  EXPECT_FALSE(report["complete"].get<bool>());
  EXPECT_EQ(report["missing_ranks"], nlohmann::json::array({3}));
  std::string text = ReportText({}, info);
  EXPECT_EQ(text.find("No findings"), std::string::npos) << text;
  EXPECT_NE(text.find("Not healthy: the data is incomplete, and the missing part may hold the problem: rank 3 of "
                      "world size 4 left no trace.\n"),
            std::string::npos)
      << text;

  EndedJob whole(2, 3);
  whole.Exit(0, 0);
  whole.Exit(1, 0);
  ReportInfo gaps = DescribeJob(whole.model());
  EXPECT_TRUE(gaps.missing_ranks.empty());
  EXPECT_TRUE(Healthy({}, gaps));
  gaps.data_gaps = {"out/job/node0-pid1001: skipped: checksum mismatch in frame 3"};
  report = ReportJson({}, gaps);
  EXPECT_FALSE(report["healthy"].get<bool>());
  EXPECT_EQ(report["data_gaps"], nlohmann::json::array({"out/job/node0-pid1001: skipped: checksum mismatch in frame 3"}));
  text = ReportText({}, gaps);
  EXPECT_NE(text.find("the data is incomplete, and the missing part may hold the problem: out/job/node0-pid1001: "
                      "skipped: checksum mismatch in frame 3"),
            std::string::npos)
      << text;
}

// A rank the preload made no ring for (its .noring note): its reason, never "gone without
// ever calling NCCL", whether the note is read post-mortem (no look at the process) or by
// `collwatch run`, which also saw the process gone through /proc.
TEST(ReportVerdictTest, RanksWithoutRingsAreNotRecordedForTheirNotesReason) {
  const std::string why = "no ring: /dev/shm/collwatch-0 has 0.2 MiB free, a ring needs at least 0.9 MiB; raise the "
                          "container's shm size";
  for (const bool seen_gone : {false, true}) {
    SCOPED_TRACE(seen_gone ? "collwatch run: seen gone through /proc" : "post-mortem: the note alone");
    EndedJob job(4, 2, /*traced=*/3);
    for (ProcessId process = 0; process < 3; ++process) job.Exit(process, 0);
    NoRingNoteRead note;
    note.host = "node0";
    note.pid = 1003;
    note.rank = 3;
    note.world_size = 4;
    note.why = why;
    if (seen_gone) {
      ProcessSample gone;
      gone.state = ProcessState::kGone;
      gone.sampled_ns = kStart + 2 * kSecond;
      job.model().ObserveProcess(ProcessInfo{.host = "node0", .pid = 1003, .global_rank = 3, .world_size = 4}, gone);
    }
    const ProcessId process = job.model().NoteNoRing(note);
    EXPECT_EQ(job.model().process_count(), 4u) << "the walk's process and the note's are one";
    EXPECT_EQ(job.model().process(process).info.global_rank, 3);
    ReportInfo info = DescribeJob(job.model());
    info.command_exit_status = 0;
    EXPECT_EQ(info.missing_ranks, std::vector<int32_t>{3}) << "it left no trace: that stays a gap";
    ASSERT_EQ(info.ranks.size(), 4u);
    EXPECT_EQ(info.ranks[3].not_recorded, why);
    EXPECT_TRUE(info.ranks[2].not_recorded.empty());
    const nlohmann::json report = ReportJson({}, info);
    EXPECT_FALSE(report["healthy"].get<bool>()) << "rank 3's calls were never checked";
    EXPECT_FALSE(report["complete"].get<bool>());
    EXPECT_EQ(report["ranks"][3]["not_recorded"], why);
    EXPECT_TRUE(report["ranks"][2]["not_recorded"].is_null());
    EXPECT_EQ(WhyNotHealthy({}, info), absl::StrCat("the data is incomplete, and the missing part may hold the "
                                                    "problem: rank 3 (pid 1003) was not recorded (", why, ")"))
        << "the reason, said once: not 'gone without ever calling NCCL', nor 'left no trace'";
    EXPECT_EQ(DataGapText(info), absl::StrCat("the data is incomplete, and the missing part may hold the problem: "
                                              "rank 3 (pid 1003) was not recorded (", why, ")"))
        << "check and diff read it as incomplete data";
    const std::string text = ReportText({}, info);
    EXPECT_EQ(text.find("without ever calling NCCL"), std::string::npos) << text;
    EXPECT_EQ(text.find("left no trace"), std::string::npos) << text;
    EXPECT_NE(text.find(absl::StrCat("warning: rank 3 (pid 1003) was not recorded (", why, ")\n")), std::string::npos)
        << text;
    EXPECT_NE(text.find(absl::StrCat("rank 3 (pid 1003) not recorded: ", why, "; last NCCL call: none recorded")),
              std::string::npos)
        << text;
  }
}

TEST(ReportVerdictTest, RanksStoppedByCollwatchAreNotFailures) {
  EndedJob job(2, 1);
  job.Kill(1);
  job.model().ForgetDeathsAfter(kStart + kSecond);  // post-mortem: run.json's stopped_at_ns
  ReportInfo info = DescribeJob(job.model());
  NoteStoppedByCollwatch(&info);  // online: the model was frozen with rank 0 running
  info.command_exit_status = 143;
  const nlohmann::json report = ReportJson({}, info);
  EXPECT_EQ(report["ranks"][0]["ended"], "stopped by collwatch");
  EXPECT_EQ(report["ranks"][1]["ended"], "stopped by collwatch");
  EXPECT_TRUE(report["stopped_by_collwatch"].get<bool>());
  EXPECT_TRUE(report["healthy"].get<bool>()) << "what collwatch did is not the job's failure";
  Finding finding;
  finding.kind = FindingKind::kTransportStall;
  EXPECT_FALSE(ReportJson({finding}, info)["healthy"].get<bool>()) << "the hang it stopped is";
}

TEST(ReportVerdictTest, ProcessesWithoutRankAreListedByPid) {
  JobModel model;
  ProcessInfo launcher_less;
  launcher_less.host = "node7";
  launcher_less.pid = 77;
  const ProcessId process = model.AddProcess(launcher_less);
  model.SetStatus(process, ProcessStatus::kDead, 0, 0);
  const ReportInfo info = DescribeJob(model);
  EXPECT_TRUE(ReportJson({}, info)["ranks"][0]["last_call"].is_null());
  EXPECT_NE(ReportText({}, info).find("pid 77 on node7  killed or crashed (no exit recorded); last NCCL call: none "
                                      "recorded"),
            std::string::npos)
      << ReportText({}, info);
}

Finding StallNamingTwoRanks() {
  Finding finding;
  finding.kind = FindingKind::kTransportStall;
  finding.headline = "TRANSPORT_STALL at comm 3f2a9c01 seq 7";
  ProcessReport stopped;
  stopped.rank = 1;
  stopped.global_rank = 5;
  stopped.pid = 4242;
  stopped.host = "node0";
  stopped.state = "stopped";
  stopped.heartbeat_age_s = 12.25;
  ProcessReport waiting;
  waiting.rank = 0;
  waiting.global_rank = 0;
  waiting.pid = 4241;
  waiting.host = "node0";
  waiting.state = "sleeping in futex_wait_queue";
  waiting.cpu_advancing = true;
  waiting.heartbeat_age_s = 0.5;
  waiting.heartbeat_fresh = true;
  ProcessReport dead;
  dead.rank = 2;
  dead.global_rank = 2;
  dead.pid = 4243;
  dead.host = "node1";
  dead.state = "gone";
  dead.ended = "exited with 1";
  finding.processes = {stopped, waiting, dead};
  return finding;
}

TEST(ReportProcessesTest, JsonHasEveryFieldOfEachProcess) {
  const nlohmann::json finding = FindingJson(StallNamingTwoRanks());
  ASSERT_EQ(finding["processes"].size(), 3u);
  const nlohmann::json& stopped = finding["processes"][0];
  EXPECT_EQ(stopped["rank"], 1);
  EXPECT_EQ(stopped["global_rank"], 5);
  EXPECT_EQ(stopped["pid"], 4242);
  EXPECT_EQ(stopped["host"], "node0");
  EXPECT_EQ(stopped["state"], "stopped");
  EXPECT_EQ(stopped["cpu_advancing"], false);
  EXPECT_DOUBLE_EQ(stopped["heartbeat_age_s"].get<double>(), 12.25);
  EXPECT_EQ(stopped["heartbeat_fresh"], false);
  EXPECT_EQ(stopped["ended"], "");
  EXPECT_EQ(finding["processes"][2]["ended"], "exited with 1");
  EXPECT_DOUBLE_EQ(finding["processes"][2]["heartbeat_age_s"].get<double>(), -1) << "no heartbeat";
  EXPECT_TRUE(FindingJson(Finding{})["processes"].empty());
}

TEST(ReportProcessesTest, TextHasOneLinePerProcess) {
  const std::string text = FindingText(StallNamingTwoRanks());
  EXPECT_NE(text.find("  rank 1 (RANK 5)  pid 4242 on node0: stopped, CPU idle, heartbeat 12.2 s ago (stale)\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("  rank 0           pid 4241 on node0: sleeping in futex_wait_queue, CPU busy, heartbeat "
                      "0.5 s ago\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("  rank 2           pid 4243 on node1: gone, no heartbeat (no ring), exited with 1\n"),
            std::string::npos)
      << text;
}

// The ring fuzzer's find: `collwatch analyze --json` on a ring whose NVTX names or job
// id are not UTF-8 threw from the JSON writer and aborted.
TEST(ReportTest, JsonOfNamesThatAreNotUtf8IsStillJson) {
  Finding finding;
  finding.regions = {"fwd/\xff"};
  finding.headline = "PATH_DIVERGENCE in fwd/\xff";
  ReportInfo info;
  info.job = "job\xfe";
  const nlohmann::json report = nlohmann::json::parse(ReportJsonText({finding}, info));
  EXPECT_EQ(report["job"], "job\xef\xbf\xbd");
  EXPECT_EQ(report["findings"][0]["regions"][0], "fwd/\xef\xbf\xbd");
}

// Control characters of damaged names (a NUL, a bell, an escape) never reach a terminal
// or report.txt raw: they are shown as \xNN.
TEST(ReportTest, TextOfNamesWithControlCharactersIsPrintable) {
  Finding finding;
  finding.headline = std::string("PATH_DIVERGENCE in fwd/\0\a\x1b[2J", 29);
  const std::string text = ReportText({finding}, ReportInfo{});
  EXPECT_NE(text.find("fwd/\\x00\\x07\\x1b[2J"), std::string::npos) << text;
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    EXPECT_TRUE(byte >= 0x20 || c == '\n' || c == '\t') << "raw byte " << static_cast<int>(byte);
  }
}

// A post-mortem reading is no detection: its time is the trace's, never "detected 0.00 s".
TEST(ReportTest, PostMortemFindingsClaimNoDetectionTime) {
  Finding finding;
  finding.headline = "NOT_JOINED: rank 1 not at comm 3f2a9c01 seq 2";
  finding.first_bad_ns = 1'700'000'000'000'000'000;
  ReportInfo info;
  info.online = false;
  std::string text = ReportText({finding}, info);
  EXPECT_EQ(text.find("detected"), std::string::npos) << text;
  EXPECT_NE(text.find("first bad record at 2023-11-14T22:13:20.000Z (found post-mortem)"), std::string::npos) << text;
  finding.detect_latency_s = 0.35;
  text = ReportText({finding}, info);
  EXPECT_NE(text.find("the evidence was whole 0.35 s later (read post-mortem)"), std::string::npos) << text;
  info.online = true;
  text = ReportText({finding}, info);
  EXPECT_NE(text.find("detected 0.35 s after the first bad record"), std::string::npos) << text;
}

// Every rank dead: the first by time when the ends are apart, else by NCCL's progress,
// else said to be unknown.
TEST(ReportTest, WhenEveryRankDiedTheFirstIsNamedOrSaidUnknown) {
  auto rank = [](int32_t number, const std::string& ended, int64_t ended_ms, uint64_t seq) {
    RankEnding ending;
    ending.global_rank = number;
    ending.failed = true;
    ending.ended_text = ended;
    ending.ended_ns = 1'700'000'000'000'000'000 + ended_ms * 1'000'000;
    ending.last_collective_comm = 0xc231b3c400000001ull;
    ending.last_collective_seq = seq;
    return ending;
  };
  ReportInfo apart;
  apart.ranks = {rank(0, "killed or crashed (no exit recorded)", 900, 3), rank(1, "exited with 3", 0, 2),
                 rank(2, "killed or crashed (no exit recorded)", 1300, 3)};
  EXPECT_EQ(WhoEndedFirstText(apart, {}),
            "every rank ended: rank 1 first (exited with 3), the other 2 followed 0.90 to 1.30 s later, as a launcher "
            "(torchrun) stops the rest when one fails: look at rank 1");
  ReportInfo close = apart;
  close.ranks[0].ended_ns = close.ranks[1].ended_ns + 100'000'000;
  close.ranks[2].ended_ns = close.ranks[1].ended_ns + 200'000'000;
  EXPECT_EQ(WhoEndedFirstText(close, {}),
            "every rank ended within 0.20 s, too close for the records to order, but rank 1 stopped first in NCCL: "
            "the others were in seq 3 of comm c231b3c4, which rank 1 never entered (last collective: seq 2); the rest "
            "followed, as a launcher (torchrun) stops the rest when one fails: look at rank 1");
  Finding divergence;
  divergence.kind = FindingKind::kSkippedReduceScatter;
  EXPECT_EQ(WhoEndedFirstText(close, {divergence}), "every rank ended within 0.20 s: the records cannot tell which was first")
      << "after a divergence the sequence numbers say nothing of who stopped first";
  close.ranks[1].last_collective_seq = 3;
  EXPECT_EQ(WhoEndedFirstText(close, {}), "every rank ended within 0.20 s: the records cannot tell which was first");
  close.ranks[2].failed = false;
  EXPECT_EQ(WhoEndedFirstText(close, {}), "") << "a rank that did not fail: not every rank died";
}

}  // namespace
}  // namespace collwatch::analyzer::report_test
