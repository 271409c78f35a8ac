// Stalls that resolve (stragglers.cc): a late rank that arrives turns its NOT_JOINED into a
// resolved straggler, in place, out of the verdict; post-mortem says the same of the same
// trace; a transport stall that completes resolves too; and whether late ranks are at work.
#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include "analyzer/analyzer_test_job.h"
#include "analyzer/report.h"

namespace collwatch::analyzer::stragglers_test {
namespace {

using ::testing::HasSubstr;

// A report of a job that recorded calls and ended well: the findings decide.
ReportInfo Ended() {
  ReportInfo info;
  info.calls = 10;
  info.command_exit_status = 0;
  return info;
}

// Rank 0 enters all-gather "b" and waits; rank 1 enters it `late_s` later. Returns the
// time rank 1 arrived. `analyse_at`: seconds after rank 0 entered at which the analyzer
// looks before rank 1 arrives (none: post-mortem only).
struct LateJob {
  JobBuilder job{2};
  int64_t waits_from = 0;
  uint64_t waiting_call = 0;
  void Wait() {
    job.IssueAll({Gather("a")});
    waits_from = job.Now(0.01);
    waiting_call = job.job().Collective(job.process(0), kComm, 0, 2, 2, Gather("b"), waits_from, 0);
  }
  int64_t Arrive(double late_s) {
    const int64_t arrives = waits_from + static_cast<int64_t>(late_s * kSecond);
    job.job().Collective(job.process(1), kComm, 1, 2, 2, Gather("b"), arrives, arrives + kMs);
    job.job().Complete(job.process(0), waiting_call, arrives + kMs);
    return arrives;
  }
};

TEST(StragglersTest, ALateRankThatArrivesIsAResolvedStragglerInPlace) {
  LateJob late;
  late.Wait();
  Analyzer& analyzer = late.job.analyzer();
  const int64_t found_at = late.waits_from + 11 * kSecond;
  const std::vector<Finding> found = analyzer.Analyze(found_at);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].kind, FindingKind::kNotJoined);
  EXPECT_FALSE(found[0].resolution);
  EXPECT_FALSE(Healthy(analyzer.findings(), Ended())) << "while it waits, it is a hang";
  EXPECT_TRUE(analyzer.TakeResolved().empty());

  const int64_t arrived = late.Arrive(13);
  EXPECT_TRUE(analyzer.Analyze(arrived + kSecond).empty()) << "no new finding: the old one changes";
  EXPECT_EQ(analyzer.TakeResolved(), (std::vector<size_t>{0}));
  ASSERT_EQ(analyzer.findings().size(), 1u);
  const Finding& straggler = analyzer.findings()[0];
  EXPECT_EQ(straggler.kind, FindingKind::kNotJoined);
  EXPECT_EQ(straggler.seq, 2u);
  EXPECT_EQ(straggler.lagging_ranks, (std::vector<int32_t>{1}));
  ASSERT_TRUE(straggler.resolution);
  EXPECT_NEAR(straggler.resolution->resolved_after_s, 2.0, 0.01) << "found at 11 s, arrived at 13 s";
  EXPECT_NEAR(straggler.resolution->lag_s, 13.0, 0.01);
  EXPECT_THAT(straggler.headline, HasSubstr("NOT_JOINED: straggler: rank 1 arrived 13.0 s late at comm"));
  EXPECT_THAT(straggler.headline, HasSubstr("seq 2"));
  EXPECT_THAT(straggler.headline, HasSubstr("the job went on"));
  EXPECT_THAT(straggler.summary, HasSubstr("not a hang"));
  EXPECT_EQ(straggler.rank_classes[1].label, "arrived 13.0 s late");
  EXPECT_TRUE(Healthy(analyzer.findings(), Ended())) << "a straggler is out of the verdict";
  const nlohmann::json json = FindingJson(straggler);
  EXPECT_EQ(json["resolved"], true);
  EXPECT_NEAR(json["resolved_after_s"].get<double>(), 2.0, 0.01);
  EXPECT_NEAR(json["lag_s"].get<double>(), 13.0, 0.01);
  EXPECT_TRUE(FindingJson(found[0])["resolved_after_s"].is_null());
  EXPECT_THAT(ReportText(analyzer.findings(), Ended()), HasSubstr("all stragglers"));
  EXPECT_TRUE(analyzer.Analyze(arrived + 60 * kSecond, /*final_pass=*/true).empty()) << "reported once";
}

TEST(StragglersTest, PostMortemReportsTheSameStragglerFromTheWholeTrace) {
  LateJob late;
  late.Wait();
  const int64_t arrived = late.Arrive(13);
  const std::vector<Finding> found = late.job.analyzer().Analyze(arrived + 5 * kSecond, /*final_pass=*/true);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].kind, FindingKind::kNotJoined);
  EXPECT_EQ(found[0].seq, 2u);
  EXPECT_EQ(found[0].lagging_ranks, (std::vector<int32_t>{1}));
  ASSERT_TRUE(found[0].resolution);
  EXPECT_NEAR(found[0].resolution->lag_s, 13.0, 0.01);
  EXPECT_NEAR(found[0].resolution->resolved_after_s, 3.0, 0.01) << "told at the 10 s threshold";
  EXPECT_THAT(found[0].headline, HasSubstr("straggler: rank 1 arrived 13.0 s late"));
  EXPECT_TRUE(Healthy(found, Ended()));
}

TEST(StragglersTest, ARankOnTimeIsNoStraggler) {
  LateJob late;
  late.Wait();
  const int64_t arrived = late.Arrive(4);
  EXPECT_TRUE(late.job.analyzer().Analyze(arrived + 5 * kSecond, /*final_pass=*/true).empty()) << "below the 10 s floor";
}

TEST(StragglersTest, ATransportStallThatCompletesResolves) {
  JobBuilder job(2);
  job.IssueAll({Gather("a")});
  const int64_t entered = job.Now(0.01);
  const uint64_t call0 = job.job().Collective(job.process(0), kComm, 0, 2, 2, Gather("b"), entered, 0);
  const uint64_t call1 = job.job().Collective(job.process(1), kComm, 1, 2, 2, Gather("b"), entered, 0);
  Analyzer& analyzer = job.analyzer();
  ASSERT_EQ(analyzer.Analyze(entered + 11 * kSecond).size(), 1u);
  EXPECT_EQ(analyzer.findings()[0].kind, FindingKind::kTransportStall);
  const int64_t done = entered + 20 * kSecond;
  job.job().Complete(job.process(0), call0, done);
  job.job().Complete(job.process(1), call1, done);
  EXPECT_TRUE(analyzer.Analyze(done + kSecond).empty());
  ASSERT_TRUE(analyzer.findings()[0].resolution);
  EXPECT_NEAR(analyzer.findings()[0].resolution->lag_s, 20.0, 0.01);
  EXPECT_THAT(analyzer.findings()[0].headline, HasSubstr("TRANSPORT_STALL: straggler:"));
  EXPECT_TRUE(Healthy(analyzer.findings(), Ended()));
}

// A look from the node at a process doing something (or not).
ProcessSample Look(int64_t at_ns, ProcessState state, bool cpu_advancing) {
  ProcessSample sample;
  sample.state = state;
  sample.cpu_advancing = cpu_advancing;
  sample.sampled_ns = at_ns;
  return sample;
}

TEST(StragglersTest, LateRanksAtWorkRunOutsideNcclWithTheirCpuAdvancing) {
  LateJob late;
  late.Wait();
  Analyzer& analyzer = late.job.analyzer();
  const int64_t now = late.waits_from + 11 * kSecond;
  analyzer.model().SetSample(late.job.process(1), Look(now, ProcessState::kRunning, true));
  ASSERT_EQ(analyzer.Analyze(now).size(), 1u);
  const Finding& finding = analyzer.findings()[0];
  EXPECT_TRUE(analyzer.LateRanksAtWork(finding, now)) << "a checkpoint on rank 1";
  EXPECT_FALSE(analyzer.LateRanksAtWork(finding, now + 5 * kSecond)) << "a look that old says nothing";
  analyzer.model().SetSample(late.job.process(1), Look(now, ProcessState::kSleeping, false));
  EXPECT_FALSE(analyzer.LateRanksAtWork(finding, now)) << "idle: nothing says it works";
  analyzer.model().SetSample(late.job.process(1), Look(now, ProcessState::kStopped, false));
  EXPECT_FALSE(analyzer.LateRanksAtWork(finding, now));
  // Busy inside another NCCL call (a GPU rank's host spins in a synchronisation there).
  analyzer.model().SetSample(late.job.process(1), Look(now, ProcessState::kRunning, true));
  late.job.job().Init(late.job.process(1), kComm + 1, 0, 2, now - kSecond, /*returned=*/false);
  EXPECT_FALSE(analyzer.LateRanksAtWork(finding, now));
}

}  // namespace
}  // namespace collwatch::analyzer::stragglers_test
