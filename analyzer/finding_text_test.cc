// A finding's words come from its fields and evidence alone, with no model behind them:
// the headline is the kind and the brief, capitals stand where sentences open, labels
// follow the rank classes, context lines follow the calls.
#include "analyzer/finding_text.h"

#include <string>
#include <utility>

#include "gtest/gtest.h"

namespace collwatch::analyzer::finding_text_test {
namespace {

using ring::ApiFn;

constexpr uint64_t kComm = 0x3f2a9c0100000000ULL;
constexpr uint8_t kFloat32 = 7;  // ncclFloat32
constexpr int32_t kSum = 0;      // ncclSum

CallFacts AllReduce(uint64_t seq, std::string region = "") {
  return CallFacts{seq, ApiFn::kAllReduce, 1, kFloat32, kSum, ring::kUnset, std::move(region)};
}

CallFacts AllGather(uint64_t seq, uint64_t count, std::string region) {
  return CallFacts{seq, ApiFn::kAllGather, count, kFloat32, ring::kUnset, ring::kUnset, std::move(region)};
}

ProcessReport Process(int32_t rank, int32_t pid, std::string state, std::string ended = "") {
  ProcessReport report;
  report.rank = rank;
  report.pid = pid;
  report.host = "node1";
  report.state = std::move(state);
  report.ended = std::move(ended);
  return report;
}

TEST(FindingTextTest, NotJoinedOpensItsSentencesWithCapitals) {
  Finding finding;
  finding.kind = FindingKind::kNotJoined;
  finding.comm_id = kComm;
  finding.comm_size = 4;
  finding.seq = 7;
  finding.lagging_ranks = {1};
  finding.rank_classes = {RankClass{{0, 2, 3}, ""}, RankClass{{1}, ""}};
  StallFacts stall;
  stall.call = AllReduce(7);
  stall.entered = {0, 2, 3};
  stall.waited_s = 12.34;
  stall.threshold_s = 4;
  StalledRank late;
  late.rank = 1;
  late.reported = true;
  late.entered_seq = 6;
  late.trouble = ProcessTrouble::kStopped;
  late.process = Process(1, 4242, "stopped");
  stall.ranks = {late};
  finding.evidence = stall;
  WriteWords(&finding);

  EXPECT_EQ(finding.brief,
            "rank 1 not at comm 3f2a9c01 seq 7 (all-reduce 4 B (1 x float32) sum) after 12.3 s; ranks 0,2-3 waiting; "
            "rank 1 stopped");
  EXPECT_EQ(finding.headline, "NOT_JOINED: " + finding.brief);
  EXPECT_EQ(finding.summary.rfind("Ranks 0,2-3 entered comm 3f2a9c01 seq 7", 0), 0u) << finding.summary;
  EXPECT_NE(finding.summary.find("Rank 1 is at seq 6; no NCCL call (process stopped)"), std::string::npos)
      << finding.summary;
  EXPECT_NE(finding.summary.find("That is the cause: rank 1: its process (pid 4242 on node1) is stopped"),
            std::string::npos) << finding.summary;
  EXPECT_EQ(finding.rank_classes[0].label, "entered the collective");
  EXPECT_EQ(finding.rank_classes[1].label, "not arrived");
}

TEST(FindingTextTest, RankLostNamesHowEachRankEnded) {
  Finding finding;
  finding.kind = FindingKind::kRankLost;
  finding.comm_id = kComm;
  finding.comm_size = 4;
  finding.seq = 2;
  finding.lagging_ranks = {1};
  StallFacts stall;
  stall.call = AllReduce(2);
  stall.entered = {0, 2, 3};
  StalledRank lost;
  lost.rank = 1;
  lost.lost = true;
  lost.trouble = ProcessTrouble::kEnded;
  lost.process = Process(1, 7, "gone", "killed or crashed (no exit recorded)");
  stall.ranks = {lost};
  stall.lost_place.global = {5};
  finding.evidence = stall;
  WriteWords(&finding);

  EXPECT_EQ(finding.headline,
            "RANK_LOST: rank 1 (global rank 5) gone; ranks 0,2-3 waiting at comm 3f2a9c01 seq 2 (all-reduce 4 B (1 x "
            "float32) sum)");
  EXPECT_EQ(finding.summary.rfind("Rank 1 (node1 pid 7) killed or crashed (no exit recorded). The other ranks", 0), 0u)
      << finding.summary;
}

// One-sided run issued by the smaller class: the labels follow the rank classes (the
// larger first), not the run.
TEST(FindingTextTest, PathDivergenceLabelsFollowTheRankClasses) {
  Finding finding;
  finding.kind = FindingKind::kPathDivergence;
  finding.comm_id = kComm;
  finding.comm_size = 4;
  finding.seq = 41;
  finding.rank_classes = {RankClass{{1, 3}, ""}, RankClass{{0, 2}, ""}};
  finding.regions = {"fwd/vision.patch"};
  DivergenceFacts divergence;
  divergence.classes = {DivergingClass{{1, 3}, {}, AllGather(41, 256, "fwd/embed")},
                        DivergingClass{{0, 2}, {}, AllGather(41, 512, "fwd/vision.patch")}};
  divergence.basis = DivergenceBasis::kAlignment;
  divergence.major_inserted = false;
  divergence.run = {AllGather(41, 512, "fwd/vision.patch")};
  finding.evidence = divergence;
  finding.context = {ClassContext{{1, 3}, {}, {{true, AllReduce(40)}, {false, AllGather(41, 256, "fwd/embed")}}, 3}};
  WriteWords(&finding);

  EXPECT_EQ(finding.headline,
            "PATH_DIVERGENCE at comm 3f2a9c01 seq 41: ranks 0,2 ran 1 all-gather of 2.0 KiB in fwd/vision.patch that "
            "ranks 1,3 skipped");
  EXPECT_EQ(finding.brief.rfind("at comm 3f2a9c01 seq 41: ", 0), 0u) << finding.brief;
  EXPECT_EQ(finding.rank_classes[0].label,
            "skipped them; went on with all-gather 1.0 KiB (256 x float32) in fwd/embed");
  EXPECT_EQ(finding.rank_classes[1].label, "ran 1 extra collective (fwd/vision.patch)");
  EXPECT_NE(finding.summary.find("the ranks in the vision regions had image batches"), std::string::npos)
      << finding.summary;
  ASSERT_EQ(finding.context[0].lines.size(), 3u);
  EXPECT_EQ(finding.context[0].lines[0], "= seq 40     all-reduce 4 B (1 x float32) sum");
  EXPECT_EQ(finding.context[0].lines[1], "> seq 41     all-gather 1.0 KiB (256 x float32) in fwd/embed");
  EXPECT_EQ(finding.context[0].lines[2], "  ... 3 more reported");
}

TEST(FindingTextTest, P2pNotJoinedNamesTheMissingSide) {
  Finding finding;
  finding.kind = FindingKind::kNotJoined;
  finding.comm_id = kComm;
  finding.comm_size = 2;
  finding.seq = 3;
  finding.lagging_ranks = {1};
  finding.rank_classes = {RankClass{{0}, ""}};
  P2pFacts p2p;
  p2p.sender = 0;
  p2p.receiver = 1;
  p2p.send = CallFacts{3, ApiFn::kSend, 4, kFloat32, ring::kUnset, 1, ""};
  p2p.waited_s = 31;
  finding.evidence = p2p;
  WriteWords(&finding);

  EXPECT_EQ(finding.headline, "NOT_JOINED: rank 1 has not posted the recv matching rank 0's send #3 on comm 3f2a9c01");
  EXPECT_EQ(finding.rank_classes[0].label, "sending");
  EXPECT_EQ(finding.summary.rfind("Rank 0 posted send #3 (send 16 B (4 x float32) peer 1) 31.0 s ago", 0), 0u)
      << finding.summary;
}

// A mismatched send in a schedule of several stages a rank: a later send of the step is
// counted, never called a microbatch (each microbatch crosses the pair of ranks more than
// once a step); a one-stage schedule's send is.
TEST(FindingTextTest, ASendOfAMultiStageScheduleIsNotCalledAMicrobatch) {
  auto mismatch = [](const std::string& schedule_function) {
    Finding finding;
    finding.kind = FindingKind::kSignatureMismatch;
    finding.comm_id = kComm;
    finding.comm_size = 2;
    finding.seq = 48;
    finding.rank_classes = {RankClass{{0}, ""}, RankClass{{1}, ""}};
    finding.call_paths = {ClassCallPath{{0}, CallPath{{CallFrame{"schedules.py", schedule_function, 1634}}}, false}};
    P2pFacts p2p;
    p2p.sender = 0;
    p2p.receiver = 1;
    p2p.send = CallFacts{48, ApiFn::kSend, 4096, kFloat32, ring::kUnset, 1, ""};
    p2p.recv = CallFacts{48, ApiFn::kRecv, 1, kFloat32, ring::kUnset, 0, ""};
    p2p.sender_rhythm.offset = 12;
    p2p.sender_rhythm.period = {P2pRun{true, 12}, P2pRun{false, 12}};
    p2p.sender_rhythm.period_calls = 24;
    p2p.sender_rhythm.repetitions = 4;
    p2p.send_place = RhythmPlace{3, 5, 12};
    p2p.rhythm_whole = true;
    finding.evidence = p2p;
    WriteWords(&finding);
    return finding.summary;
  };
  const std::string multi = mismatch("PipelineScheduleMulti.step");
  EXPECT_NE(multi.find("this send is send 5 of 12 in repetition 4. With several stages a rank"), std::string::npos)
      << multi;
  EXPECT_NE(multi.find("which microbatch this send carries follows the schedule's order of actions"),
            std::string::npos)
      << multi;
  EXPECT_EQ(multi.find("microbatch 5"), std::string::npos) << multi;
  const std::string single = mismatch("PipelineScheduleSingle.step");
  EXPECT_NE(single.find("(in a pipeline schedule: microbatch 5 of 12 in its stage's step 4)"), std::string::npos)
      << single;
}

// Findings read back from the wire carry words but no evidence: they keep their words.
TEST(FindingTextTest, AFindingWithoutEvidenceKeepsItsWords) {
  Finding finding;
  finding.kind = FindingKind::kTransportStall;
  finding.headline = "TRANSPORT_STALL: as sent";
  finding.summary = "as sent";
  finding.context = {ClassContext{{0}, {"> seq 1 as sent"}, {}, 0}};
  WriteWords(&finding);
  EXPECT_EQ(finding.headline, "TRANSPORT_STALL: as sent");
  EXPECT_EQ(finding.summary, "as sent");
  EXPECT_EQ(finding.context[0].lines[0], "> seq 1 as sent");
}

}  // namespace
}  // namespace collwatch::analyzer::finding_text_test
