// The analyzer on synthetic jobs: every finding kind, blocking (CPU backend) and
// asynchronous (GPU) completion, p2p, groups, split communicators, many ranks.
#include "analyzer/analyzer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "analyzer/analyzer_test_job.h"
#include "analyzer/report.h"
#include "analyzer/schedule.h"

namespace collwatch::analyzer::analyzer_test {
namespace {

using ring::ApiFn;
using ::testing::HasSubstr;
using ::testing::Not;

TEST(AnalyzerTest, CleanJobHasNoFinding) {
  JobBuilder job(4);
  for (int step = 0; step < 5; ++step) job.IssueAll(Step(true));
  EXPECT_TRUE(job.Run(0.1).empty());
  EXPECT_TRUE(job.Run(60, /*final_pass=*/true).empty()) << "a finished clean job is not stalled";
  const nlohmann::json report = ReportJson(job.analyzer().findings(), DescribeJob(job.analyzer().model()));
  EXPECT_TRUE(report["findings"].empty());
  EXPECT_TRUE(report["healthy"].get<bool>());
}

TEST(AnalyzerTest, AsyncPathDivergenceIsAlignedIntoAnInsertedRun) {
  JobBuilder job(4);
  job.IssueAll(Step(true));
  // GPU style: ranks keep enqueueing; odd ranks drew text-only batches.
  for (int rank = 0; rank < 4; ++rank) {
    std::vector<SyntheticOp> ops = Step(rank % 2 == 0);
    const std::vector<SyntheticOp> next = Step(true);
    ops.insert(ops.end(), next.begin(), next.end());
    job.Issue(rank, ops, /*stuck_last=*/true, /*blocking=*/false);
  }
  const std::vector<Finding> found = job.Run();
  ASSERT_EQ(found.size(), 1u);
  const Finding& finding = found[0];
  EXPECT_EQ(finding.kind, FindingKind::kPathDivergence) << finding.summary;
  EXPECT_EQ(finding.seq, 8u);
  ASSERT_EQ(finding.rank_classes.size(), 2u);
  EXPECT_EQ(finding.rank_classes[0].ranks, (std::vector<int32_t>{0, 2}));
  EXPECT_EQ(finding.rank_classes[1].ranks, (std::vector<int32_t>{1, 3}));
  EXPECT_EQ(finding.regions, (std::vector<std::string>{"fwd/vision.patch", "fwd/vision.block0"}));
  EXPECT_THAT(finding.summary, HasSubstr("dummy image"));
  EXPECT_THAT(finding.headline, HasSubstr("ranks 0,2 ran 2 all-gathers"));
  EXPECT_LT(finding.detect_latency_s, 2.0);
  EXPECT_EQ(finding.context.size(), 2u);
}

TEST(AnalyzerTest, BlockingPathDivergenceReadsTheRunOffTheAgreedSchedule) {
  JobBuilder job(4);
  job.IssueAll(Step(true));
  // CPU backend: every rank blocks inside its first divergent collective.
  for (int rank = 0; rank < 4; ++rank) job.Issue(rank, {Step(rank % 2 == 0).front()}, /*stuck_last=*/true);
  const std::vector<Finding> found = job.Run();
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].kind, FindingKind::kPathDivergence);
  EXPECT_EQ(found[0].regions, (std::vector<std::string>{"fwd/vision.patch", "fwd/vision.block0"}));
  EXPECT_THAT(found[0].summary, HasSubstr("agreed on before"));
  // The stall that follows is the divergence's echo, not another finding.
  EXPECT_TRUE(job.Run(120).empty());
}

TEST(AnalyzerTest, BlockingDivergenceWithoutHistoryNamesBothRegions) {
  JobBuilder job(2);
  job.Issue(0, {Gather("fwd/vision.patch", 4096)}, true);
  job.Issue(1, {Gather("fwd/embed", 2048)}, true);
  const std::vector<Finding> found = job.Run();
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].kind, FindingKind::kPathDivergence);
  EXPECT_EQ(found[0].regions, (std::vector<std::string>{"fwd/vision.patch", "fwd/embed"}));
}

TEST(AnalyzerTest, SkippedReduceScatterBlocking) {
  JobBuilder job(4);
  const std::vector<SyntheticOp> backward = {Gather("bwd/trunk.expert1"), Scatter("bwd/trunk.expert1", 300),
                                             Gather("bwd/trunk.block1"), Scatter("bwd/trunk.block1")};
  job.IssueAll(backward);
  for (int rank = 0; rank < 4; ++rank) {
    if (rank % 2 == 0) {
      job.Issue(rank, {backward[0], backward[1]}, true);
    } else {
      job.Issue(rank, {backward[0], backward[2]}, true);
    }
  }
  const std::vector<Finding> found = job.Run();
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].kind, FindingKind::kSkippedReduceScatter) << found[0].summary;
  EXPECT_EQ(found[0].seq, 6u);
  EXPECT_EQ(found[0].regions, (std::vector<std::string>{"bwd/trunk.expert1"}));
  EXPECT_THAT(found[0].headline, HasSubstr("ranks 1,3 did not reduce-scatter bwd/trunk.expert1"));
  EXPECT_THAT(found[0].summary, HasSubstr("4.7 KiB"));  // the unit: 300 x 4 bytes x 4 ranks
}

TEST(AnalyzerTest, SkippedReduceScatterAsync) {
  JobBuilder job(2);
  job.Issue(0, {Gather("bwd/e1"), Scatter("bwd/e1"), Gather("bwd/b1"), Scatter("bwd/b1"), Gather("bwd/b0")}, true, false);
  job.Issue(1, {Gather("bwd/e1"), Gather("bwd/b1"), Scatter("bwd/b1"), Gather("bwd/b0")}, true, false);
  const std::vector<Finding> found = job.Run();
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].kind, FindingKind::kSkippedReduceScatter);
  EXPECT_EQ(found[0].rank_classes[0].ranks, (std::vector<int32_t>{0}));
}

TEST(AnalyzerTest, DtypeMismatchIsASignatureMismatchWithTheByteRatio) {
  JobBuilder job(4);
  job.IssueAll({Gather("fwd/a")});
  for (int rank = 0; rank < 4; ++rank) job.Issue(rank, {Scatter("bwd/mtp.head0", 1000, rank == 1 ? 9 : 7)}, true);
  const std::vector<Finding> found = job.Run();
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].kind, FindingKind::kSignatureMismatch);
  EXPECT_EQ(found[0].rank_classes[0].ranks, (std::vector<int32_t>{0, 2, 3}));
  EXPECT_EQ(found[0].rank_classes[1].ranks, (std::vector<int32_t>{1}));
  EXPECT_THAT(found[0].summary, HasSubstr("float32 vs bfloat16, byte ratio 2.00"));
}

TEST(AnalyzerTest, DifferentCollectivesAreAnOpMismatch) {
  JobBuilder job(2);
  job.Issue(0, {SyntheticOp{ApiFn::kAllReduce, 10, 7, "", 0}}, true);
  job.Issue(1, {SyntheticOp{ApiFn::kBroadcast, 10, 7, "", ring::kUnset, 0}}, true);
  const std::vector<Finding> found = job.Run();
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].kind, FindingKind::kOpMismatch);
}

TEST(AnalyzerTest, MismatchWaitsBrieflyForRanksNotThereYet) {
  JobBuilder job(3);
  job.Issue(0, {Gather("a")}, true);
  job.Issue(1, {Gather("b")}, true);
  const int64_t seen = job.Now(0.1);
  EXPECT_TRUE(job.analyzer().Analyze(seen).empty());
  const std::vector<Finding> found = job.analyzer().Analyze(seen + kSecond);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].lagging_ranks, (std::vector<int32_t>{2}));
}

TEST(AnalyzerTest, LateRankIsNotJoinedAfterTheThreshold) {
  JobBuilder job(4);
  for (int rank : {0, 2, 3}) job.Issue(rank, {Gather("fwd/vision.patch")}, true);
  EXPECT_TRUE(job.Run(5).empty()) << "before the 10 s floor";
  const std::vector<Finding> found = job.Run(11);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].kind, FindingKind::kNotJoined);
  EXPECT_EQ(found[0].seq, 1u);
  EXPECT_EQ(found[0].lagging_ranks, (std::vector<int32_t>{1}));
  EXPECT_THAT(found[0].summary, HasSubstr("before their first forward"));
  EXPECT_THAT(found[0].summary, HasSubstr("comm-init-rank"));
  EXPECT_GT(found[0].detect_latency_s, 10.0);
  EXPECT_TRUE(job.Run(30).empty()) << "reported once";
}

// Collectives replayed from CUDA graphs (the profiler plugin's kFlagReplay records) are
// aligned among themselves, numbered apart from the host calls: replays that agree leave
// the host order alone; a rank that stops replaying is NOT_JOINED in the replay lane; a
// rank replaying another graph is a SIGNATURE_MISMATCH there.
TEST(AnalyzerTest, CudaGraphReplaysAreAlignedApartFromTheHostCalls) {
  SyntheticOp captured{ApiFn::kAllReduce, 64, 7, "", 0};
  captured.flags = ring::kFlagCaptured;
  const auto replays = [](JobBuilder& job, int rank, const std::vector<uint64_t>& counts, bool last_stuck) {
    for (size_t i = 0; i < counts.size(); ++i) {
      SyntheticOp replay{ApiFn::kAllReduce, counts[i], 7, "", 0};
      replay.flags = ring::kFlagReplay;
      const int64_t t = job.Now() + static_cast<int64_t>(i + 1) * kMs;
      const bool stuck = last_stuck && i + 1 == counts.size();
      job.job().Collective(job.process(rank), kComm, rank, 2, i + 1, replay, t, stuck ? 0 : t + kMs / 2, false);
    }
  };

  JobBuilder agreeing(2);
  agreeing.IssueAll({Gather("fwd/a"), captured});
  for (int rank : {0, 1}) replays(agreeing, rank, {64, 64, 64}, false);
  agreeing.IssueAll({Gather("fwd/b")});
  EXPECT_TRUE(agreeing.Run(11).empty());
  const Comm* lane = agreeing.analyzer().model().FindComm(ReplayLaneOf(kComm));
  ASSERT_NE(lane, nullptr);
  EXPECT_EQ(lane->nranks, 2);
  OpTable table;
  EXPECT_EQ(ExtractSchedule(agreeing.analyzer().model(), &table).comms.size(), 1u)
      << "the replays stay out of the schedule of the host calls";

  // Rank 0's GPU waits in the third replay, which rank 1 never runs; rank 0's host then
  // waits for its GPU, and rank 1 goes on to a barrier rank 0 never reaches. The replay
  // lane's stall began first and comes first.
  JobBuilder stopped(2);
  stopped.IssueAll({Gather("fwd/a"), captured});
  replays(stopped, 0, {64, 64, 64}, true);
  replays(stopped, 1, {64, 64}, false);
  stopped.job().Collective(stopped.process(1), kComm, 1, 2, 3, SyntheticOp{ApiFn::kAllReduce, 1, 7, "", 0},
                           stopped.Now() + 10 * kMs, 0);
  EXPECT_TRUE(stopped.Run(5).empty()) << "before the 10 s floor";
  std::vector<Finding> found = stopped.Run(11);
  ASSERT_EQ(found.size(), 2u);
  EXPECT_EQ(found[1].comm_id, kComm) << "rank 0 did not reach the barrier either";
  EXPECT_EQ(found[0].kind, FindingKind::kNotJoined);
  EXPECT_EQ(found[0].comm_id, ReplayLaneOf(kComm));
  EXPECT_EQ(found[0].seq, 3u);
  EXPECT_EQ(found[0].lagging_ranks, (std::vector<int32_t>{1}));
  EXPECT_THAT(found[0].headline + found[0].summary, HasSubstr("(CUDA graph replays)"));
  EXPECT_THAT(found[0].summary, HasSubstr("have replayed it fewer times"));

  JobBuilder other_graph(2);
  other_graph.IssueAll({Gather("fwd/a"), captured});
  replays(other_graph, 0, {64, 64}, true);
  replays(other_graph, 1, {64, 128}, true);
  EXPECT_TRUE(other_graph.Run(0.2).empty()) << "asynchronous ranks may still enqueue what decides it";
  found = other_graph.Run(2);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].kind, FindingKind::kSignatureMismatch);
  EXPECT_EQ(found[0].comm_id, ReplayLaneOf(kComm));
  EXPECT_EQ(found[0].seq, 2u);
}

// An all-gather completed on the rank that reported it: the other rank joined it, and only
// its records are missing (a collector restarted mid-job that got one rank's resends). It
// read as NOT_JOINED "after 500 s" of a finished job. A broadcast's root can finish alone.
TEST(AnalyzerTest, ACompletedAllGatherWithTheOtherRanksRecordsMissingIsNoStall) {
  JobBuilder gathered(2);
  gathered.IssueAll({Gather("a")});
  gathered.Issue(0, {Gather("b"), Gather("c")});
  EXPECT_TRUE(gathered.Run(500).empty());
  // The job finished: both processes exited, which must not read as a lost rank either.
  for (int rank = 0; rank < 2; ++rank) {
    gathered.analyzer().model().SetStatus(gathered.process(rank), ProcessStatus::kExited,
                                          static_cast<uint64_t>(gathered.Now(0.01)), 0);
  }
  EXPECT_TRUE(gathered.Run(600).empty());
  JobBuilder broadcast(2);
  broadcast.IssueAll({Gather("a")});
  broadcast.Issue(0, {SyntheticOp{ApiFn::kBroadcast, 10, 7, "", ring::kUnset, 0}});
  const std::vector<Finding> found = broadcast.Run(500);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].kind, FindingKind::kNotJoined);
}

TEST(AnalyzerTest, AsyncEnteredFrontierAheadOfCompletedStillFindsTheLateRank) {
  JobBuilder stuck(4);
  stuck.IssueAll({Gather("x"), Gather("y")});
  // GPU style: ranks 0-2 enqueue 6 more that never complete; rank 3 stopped after two.
  for (int rank : {0, 1, 2}) {
    for (int i = 0; i < 6; ++i) stuck.Issue(rank, {Gather("z")}, /*stuck_last=*/true, /*blocking=*/false);
  }
  const std::vector<Finding> found = stuck.Run(11);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].kind, FindingKind::kNotJoined);
  EXPECT_EQ(found[0].seq, 3u) << "the lowest collective not completed everywhere";
  EXPECT_EQ(found[0].lagging_ranks, (std::vector<int32_t>{3}));
}

TEST(AnalyzerTest, TransportStallWhenEveryoneEnteredAndNothingCompletes) {
  JobBuilder job(2);
  job.IssueAll({Gather("a"), Gather("b")});
  for (int rank = 0; rank < 2; ++rank) job.Issue(rank, {Gather("c")}, true);
  EXPECT_TRUE(job.Run(5).empty());
  const std::vector<Finding> found = job.Run(11);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].kind, FindingKind::kTransportStall);
  EXPECT_EQ(found[0].seq, 3u);
}

TEST(AnalyzerTest, FirstGigabyteAllGatherGetsTimeBeforeItIsAStall) {
  JobBuilder job(2);
  for (int rank = 0; rank < 2; ++rank) job.Issue(rank, {Gather("fwd/all", 1ull << 30)}, true);  // 4 GiB per rank
  EXPECT_TRUE(job.Run(30).empty()) << "no completed op yet: the prior bandwidth rules";
  EXPECT_GT(job.analyzer().StallThresholdS(job.analyzer().model().comms()[0], 4.0 * (1ull << 30)), 60.0);
  EXPECT_EQ(job.Run(600).size(), 1u) << "still long before a 10-minute watchdog... at 600 s it is reported";
}

TEST(AnalyzerTest, DeadRankIsLostAtOnce) {
  JobBuilder job(3);
  job.IssueAll({Gather("a")});
  job.Issue(0, {Gather("b")}, true);
  job.Issue(1, {Gather("b")}, true);
  job.analyzer().model().SetStatus(job.process(2), ProcessStatus::kDead, static_cast<uint64_t>(job.Now(0.05)), 0);
  const std::vector<Finding> found = job.Run(0.5);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].kind, FindingKind::kRankLost);
  EXPECT_EQ(found[0].lagging_ranks, (std::vector<int32_t>{2}));
}

// DDP with a parameter unused on rank 1 from step 3: its gradient bucket is never ready
// there, so rank 1 all-reduces the buckets before it and not that one, then fails.
SyntheticOp Bucket(uint64_t count) { return SyntheticOp{ring::ApiFn::kAllReduce, count, 7, "", 0}; }

TEST(AnalyzerTest, ARankThatEndedBeforeACallItMadeEveryStepGivesBothReadingsAndDdpsFix) {
  JobBuilder job(2);
  const std::vector<SyntheticOp> step = {Bucket(1 << 20), Bucket(4 << 20), Bucket(2 << 20)};
  for (int i = 0; i < 2; ++i) job.IssueAll(step);
  job.Issue(0, {step[0], step[1], step[2]}, /*stuck_last=*/true);
  job.Issue(1, {step[0], step[1]});
  job.analyzer().model().SetStatus(job.process(1), ProcessStatus::kDead, static_cast<uint64_t>(job.Now(0.05)), 0);
  const std::vector<Finding> found = job.Run(0.5);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].kind, FindingKind::kRankLost);
  EXPECT_EQ(found[0].seq, 9u);
  EXPECT_THAT(found[0].summary, HasSubstr("Rank 1 completed every collective before seq 9 and never issued it, the "
                                          "all-reduce 8.0 MiB (2097152 x float32) sum that it had issued with the "
                                          "others at seq 3 and 6 (once every 3 collectives, as a training "
                                          "step's calls recur)."));
  EXPECT_THAT(found[0].summary, HasSubstr("failed on the way to it"));
  EXPECT_THAT(found[0].summary, HasSubstr("find_unused_parameters=True"));
}

TEST(AnalyzerTest, ARankThatEndedBeforeACallNoStepHadGetsNoLeftOutReading) {
  JobBuilder job(2);
  const std::vector<SyntheticOp> step = {Bucket(1 << 20), Bucket(4 << 20)};
  for (int i = 0; i < 2; ++i) job.IssueAll(step);
  job.Issue(0, {step[0], step[1], Bucket(2 << 20)}, /*stuck_last=*/true);  // a call no step had before
  job.Issue(1, {step[0], step[1]});
  job.analyzer().model().SetStatus(job.process(1), ProcessStatus::kDead, static_cast<uint64_t>(job.Now(0.05)), 0);
  const std::vector<Finding> found = job.Run(0.5);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].kind, FindingKind::kRankLost);
  EXPECT_THAT(found[0].summary, Not(HasSubstr("never issued it")));
}

TEST(AnalyzerTest, ARankLostBesideOneStillOnItsWayNamesBoth) {
  JobBuilder job(3);
  job.IssueAll({Gather("a")});
  job.Issue(0, {Gather("b")}, true);
  job.analyzer().model().SetStatus(job.process(2), ProcessStatus::kDead, static_cast<uint64_t>(job.Now(0.05)), 0);
  const std::vector<Finding> found = job.Run(0.5);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].kind, FindingKind::kRankLost);
  EXPECT_EQ(found[0].lagging_ranks, (std::vector<int32_t>{2}));
  EXPECT_THAT(found[0].summary, HasSubstr("Rank 1 has not entered it either, and was still running when this was "
                                          "found."));
}

TEST(AnalyzerTest, RankKilledLongAfterItWasLateIsStillNotJoined) {
  JobBuilder job(2);
  job.Issue(0, {Gather("a")}, true);
  job.analyzer().model().SetStatus(job.process(1), ProcessStatus::kDead, static_cast<uint64_t>(job.Now(30)), 0);  // killed by the launcher
  const std::vector<Finding> found = job.Run(30, /*final_pass=*/true);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].kind, FindingKind::kNotJoined);
}

TEST(AnalyzerTest, CommunicatorCreationWaitingForAMissingRank) {
  Analyzer analyzer(TestOptions());
  SyntheticJob job(&analyzer.model());
  for (int rank = 0; rank < 3; ++rank) job.Init(job.AddProcess(rank), kComm, rank, 4, kT0, /*returned=*/false);
  EXPECT_TRUE(analyzer.Analyze(kT0 + 5 * kSecond).empty());
  const std::vector<Finding> found = analyzer.Analyze(kT0 + 11 * kSecond);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].kind, FindingKind::kCommInitStall);
  EXPECT_EQ(found[0].lagging_ranks, (std::vector<int32_t>{3}));
}

// A look from the node saying the process is stopped (SIGSTOP, a debugger).
ProcessSample StoppedSample(int64_t at_ns) {
  ProcessSample sample;
  sample.state = ProcessState::kStopped;
  sample.sampled_ns = at_ns;
  return sample;
}

TEST(AnalyzerTest, StoppedLateRankIsTheCauseOfNotJoined) {
  JobBuilder job(2);
  job.IssueAll({Gather("a")});
  job.Issue(0, {Gather("b")}, true);
  // Rank 1's ring falls silent because its process is stopped, not gone.
  job.analyzer().model().SetStatus(job.process(1), ProcessStatus::kSilent, static_cast<uint64_t>(job.Now(1)), 0);
  job.analyzer().model().SetSample(job.process(1), StoppedSample(job.Now(10)));
  const std::vector<Finding> found = job.Run(11);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].kind, FindingKind::kNotJoined) << "a stopped process is alive: not RANK_LOST";
  EXPECT_EQ(found[0].lagging_ranks, (std::vector<int32_t>{1}));
  EXPECT_THAT(found[0].headline, HasSubstr("; rank 1 stopped"));
  EXPECT_THAT(found[0].summary, HasSubstr("That is the cause: rank 1"));
  EXPECT_THAT(found[0].summary, HasSubstr("kill -CONT"));
  EXPECT_THAT(found[0].summary, ::testing::Not(HasSubstr("before their first forward")));
  ASSERT_EQ(found[0].processes.size(), 1u);
  EXPECT_EQ(found[0].processes[0].rank, 1);
  EXPECT_EQ(found[0].processes[0].state, "stopped");
}

TEST(AnalyzerTest, AStoppedRankInsideTheCollectiveIsRankNotRunningNotATransportStall) {
  JobBuilder job(2);
  job.IssueAll({Gather("a"), Gather("b")});
  for (int rank = 0; rank < 2; ++rank) job.Issue(rank, {Gather("c")}, true);
  job.analyzer().model().SetSample(job.process(0), ProcessSample{ProcessState::kSleeping, "futex_wait_queue", 5, false, job.Now(10)});
  job.analyzer().model().SetSample(job.process(1), StoppedSample(job.Now(10)));
  const std::vector<Finding> found = job.Run(11);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].kind, FindingKind::kRankNotRunning) << "the kind says what the words say";
  EXPECT_EQ(found[0].lagging_ranks, (std::vector<int32_t>{1}));
  EXPECT_THAT(found[0].headline, HasSubstr("RANK_NOT_RUNNING: all 2 ranks entered"));
  EXPECT_THAT(found[0].headline, HasSubstr("rank 1 stopped"));
  EXPECT_THAT(found[0].summary, HasSubstr("The cause is not the network"));
  EXPECT_THAT(found[0].summary, ::testing::Not(HasSubstr("InfiniBand")));
}

TEST(AnalyzerTest, TransportStallOfRunningRanksStillPointsBelowThem) {
  JobBuilder job(2);
  job.IssueAll({Gather("a"), Gather("b")});
  for (int rank = 0; rank < 2; ++rank) {
    job.Issue(rank, {Gather("c")}, true);
    job.analyzer().model().SetSample(job.process(rank), ProcessSample{ProcessState::kRunning, "", 5, true, job.Now(10)});
  }
  const std::vector<Finding> found = job.Run(11);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].kind, FindingKind::kTransportStall);
  EXPECT_THAT(found[0].summary, HasSubstr("the network or NVLink"));
  EXPECT_EQ(found[0].processes.size(), 2u) << "both ranks are described";
}

TEST(AnalyzerTest, CommunicatorCreationWaitingForAStoppedRankSaysItIsAlive) {
  Analyzer analyzer(TestOptions());
  SyntheticJob job(&analyzer.model());
  for (int rank = 0; rank < 3; ++rank) job.Init(job.AddProcess(rank), kComm, rank, 4, kT0, /*returned=*/false);
  // Rank 3's process is seen from outside (the launcher's tree) before any NCCL call.
  ProcessInfo info;
  info.host = "node0";
  info.pid = 1003;
  info.global_rank = 3;
  info.world_size = 4;
  const ProcessId late = job.AddProcess(info);
  analyzer.model().SetSample(late, StoppedSample(kT0 + 10 * kSecond));
  const std::vector<Finding> found = analyzer.Analyze(kT0 + 11 * kSecond);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].kind, FindingKind::kCommInitStall);
  EXPECT_THAT(found[0].headline, HasSubstr("missing rank 3, stopped"));
  EXPECT_THAT(found[0].summary, HasSubstr("rank 3 is alive but its process"));
  EXPECT_THAT(found[0].summary, ::testing::Not(HasSubstr("never called it")));
}

TEST(AnalyzerTest, P2pPairsBySenderReceiverAndSequence) {
  Analyzer analyzer(TestOptions());
  SyntheticJob job(&analyzer.model());
  const ProcessId p0 = job.AddProcess(0), p1 = job.AddProcess(1);
  job.P2p(p0, kComm, 0, 2, ApiFn::kSend, 1, 1, 100, 7, kT0, kT0 + kMs);
  job.P2p(p1, kComm, 1, 2, ApiFn::kRecv, 0, 1, 100, 7, kT0, kT0 + kMs);
  EXPECT_TRUE(analyzer.Analyze(kT0 + kSecond).empty());
  job.P2p(p0, kComm, 0, 2, ApiFn::kSend, 1, 2, 100, 7, kT0 + 2 * kMs, 0);
  job.P2p(p1, kComm, 1, 2, ApiFn::kRecv, 0, 2, 200, 7, kT0 + 2 * kMs, 0);
  const std::vector<Finding> found = analyzer.Analyze(kT0 + kSecond);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].kind, FindingKind::kSignatureMismatch);
  EXPECT_EQ(found[0].seq, 2u);
  EXPECT_THAT(found[0].summary, HasSubstr("byte ratio 0.50"));
}

// A pipeline stage's send meeting a receive of another shape: each side's code is named.
TEST(AnalyzerTest, P2pMismatchNamesEachSidesCallPath) {
  Analyzer analyzer(TestOptions());
  SyntheticJob job(&analyzer.model());
  const ProcessId p0 = job.AddProcess(0), p1 = job.AddProcess(1);
  const CallPath sending{{CallFrame{"/home/me/schedules.py", "_step_microbatches", 610}}};
  const CallPath receiving{{CallFrame{"/home/me/schedules.py", "_step_microbatches", 598}}};
  auto p2p = [&](ProcessId process, int32_t rank, ApiFn fn, uint64_t count, const CallPath& path) {
    SyntheticOp op{fn, count, 7, "", ring::kUnset, 1 - rank, path};
    job.Collective(process, kComm, rank, 2, 1, op, kT0, 0);
  };
  p2p(p0, 0, ApiFn::kSend, 4096, sending);
  p2p(p1, 1, ApiFn::kRecv, 1, receiving);
  const std::vector<Finding> found = analyzer.Analyze(kT0 + kSecond);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].kind, FindingKind::kSignatureMismatch);
  ASSERT_EQ(found[0].call_paths.size(), 2u);
  EXPECT_EQ(found[0].call_paths[0].ranks, (std::vector<int32_t>{0}));
  EXPECT_EQ(found[0].call_paths[0].path.frames[0].line, 610);
  EXPECT_EQ(found[0].call_paths[1].ranks, (std::vector<int32_t>{1}));
  EXPECT_EQ(found[0].call_paths[1].path.frames[0].line, 598);
}

TEST(AnalyzerTest, P2pWithoutItsPeerIsNotJoined) {
  Analyzer analyzer(TestOptions());
  SyntheticJob job(&analyzer.model());
  const ProcessId p0 = job.AddProcess(0);
  job.AddProcess(1);
  job.P2p(p0, kComm, 0, 2, ApiFn::kSend, 1, 1, 100, 7, kT0, 0);
  EXPECT_TRUE(analyzer.Analyze(kT0 + 5 * kSecond).empty());
  const std::vector<Finding> found = analyzer.Analyze(kT0 + 11 * kSecond);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].kind, FindingKind::kNotJoined);
  EXPECT_EQ(found[0].lagging_ranks, (std::vector<int32_t>{1}));
}

TEST(AnalyzerTest, GroupedOpsCompleteWithTheirGroup) {
  Analyzer analyzer(TestOptions());
  SyntheticJob job(&analyzer.model());
  std::vector<ProcessId> processes;
  for (int rank = 0; rank < 2; ++rank) processes.push_back(job.AddProcess(rank));
  for (int rank = 0; rank < 2; ++rank) {
    job.Group(processes[rank], kComm, rank, 2, 1, {Gather("g"), Gather("g")}, kT0, kT0 + 5 * kMs);
    job.Group(processes[rank], kComm, rank, 2, 3, {Gather("h"), Gather("h")}, kT0 + 10 * kMs, 0);
  }
  const Comm& comm = analyzer.model().comms()[0];
  EXPECT_EQ(comm.ranks[0].progress.completed(), 2u);
  EXPECT_EQ(comm.ranks[0].progress.entered(), 4u);
  EXPECT_TRUE(analyzer.Analyze(kT0 + kSecond).empty());
  const std::vector<Finding> found = analyzer.Analyze(kT0 + 20 * kSecond);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].kind, FindingKind::kTransportStall);
  EXPECT_EQ(found[0].seq, 3u);
}

TEST(AnalyzerTest, SplitCommunicatorNamesGlobalRanks) {
  Analyzer analyzer(TestOptions());
  SyntheticJob job(&analyzer.model());
  const uint64_t child = 0x1111222233334444ull;
  std::vector<ProcessId> processes;
  for (int rank = 0; rank < 4; ++rank) processes.push_back(job.AddProcess(rank));
  // Global ranks 2 and 3 form a child communicator (ranks 0 and 1 in it).
  job.Collective(processes[2], child, 0, 2, 1, Gather("x"), kT0, 0);
  job.Collective(processes[3], child, 1, 2, 1, Gather("x", 99), kT0, 0);
  const std::vector<Finding> found = analyzer.Analyze(kT0 + kSecond);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].comm_id, child);
  EXPECT_THAT(found[0].summary, HasSubstr("rank 0 (global rank 2)"));
}

TEST(AnalyzerTest, ThousandsOfRanksInThreeClassesReadAsClasses) {
  constexpr int kRanks = 1024;
  JobBuilder job(kRanks);
  job.IssueAll({Gather("a"), Gather("b")});
  for (int rank = 0; rank < kRanks; ++rank) {
    const SyntheticOp op = rank % 4 == 3 ? Gather("fwd/vision.patch") : rank % 4 == 1 ? Gather("fwd/audio") : Gather("fwd/embed");
    job.Issue(rank, {op}, true);
  }
  const std::vector<Finding> found = job.Run();
  ASSERT_EQ(found.size(), 1u);
  const Finding& finding = found[0];
  EXPECT_EQ(finding.context.size(), 3u);
  EXPECT_EQ(finding.rank_classes[0].ranks.size(), 512u);
  EXPECT_THAT(finding.summary, HasSubstr("3 classes in all"));
  EXPECT_THAT(finding.summary, HasSubstr("ranks 3-1023/4"));
  EXPECT_LT(FindingText(finding).size(), 6000u) << "reads as classes, not one line per rank";
}

}  // namespace
}  // namespace collwatch::analyzer::analyzer_test
