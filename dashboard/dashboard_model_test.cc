// What the dashboard shows for given cluster states, and what its keys do.
#include "dashboard/dashboard_model.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "analyzer/report.h"
#include "collector/finding_codec.h"

namespace collwatch::dashboard {
namespace {

constexpr int64_t kNow = 1'700'000'000'000'000'000;
constexpr uint64_t kComm = 0x3f2a9c0100000000ULL;

// A job of `nranks` processes on one communicator, each at `entered`/`completed`.
v1::ClusterState Job(int nranks, uint64_t entered, uint64_t completed) {
  v1::ClusterState state;
  state.set_job("job-1");
  v1::CommState* comm = state.add_comms();
  comm->set_comm_id(kComm);
  comm->set_nranks(nranks);
  comm->set_collectives_per_second(12.5);
  for (int rank = 0; rank < nranks; ++rank) {
    v1::RankIdentity* identity = state.add_ranks();
    identity->set_host(rank < nranks / 2 ? "node-a" : "node-b");
    identity->set_rank(rank);
    v1::RankStatus* status = state.add_rank_status();
    status->set_process("p" + std::to_string(rank));
    status->set_connected(true);
    status->set_writer_status(v1::WRITER_STATUS_RUNNING);
    status->set_events(100);
    v1::RankProgress* progress = comm->add_ranks();
    progress->set_rank(rank);
    progress->set_entered_seq(entered);
    progress->set_completed_seq(completed);
    progress->set_status(v1::WRITER_STATUS_RUNNING);
  }
  return state;
}

ConnectionState Connected() {
  ConnectionState connection;
  connection.address = "127.0.0.1:7777";
  connection.connected = connection.ever_connected = true;
  connection.connections = 1;
  return connection;
}

std::string Screen(const DashboardModel& model, int width = 140, int height = 40) {
  std::string text;
  for (const Line& line : model.Render(width, height)) text += LineText(line) + "\n";
  return text;
}

// The screen line that contains `needle` ("" when none).
std::string LineWith(const std::string& screen, const std::string& needle) {
  size_t at = screen.find(needle);
  if (at == std::string::npos) return "";
  const size_t begin = screen.rfind('\n', at) == std::string::npos ? 0 : screen.rfind('\n', at) + 1;
  return screen.substr(begin, screen.find('\n', at) - begin);
}

// The rank view's line of `ranks` (a rank number, or a group's label).
std::string RankLine(const std::string& screen, const std::string& ranks) {
  const std::string prefix = " " + ranks + " ";
  const size_t at = screen.rfind("\n" + prefix);
  if (at == std::string::npos) return "";
  return screen.substr(at + 1, screen.find('\n', at + 1) - at - 1);
}

v1::Finding Divergence() {
  v1::Finding finding;
  finding.set_kind(v1::PATH_DIVERGENCE);
  finding.set_comm_id(kComm);
  finding.set_seq(41);
  v1::RankClass* images = finding.add_rank_classes();
  images->add_ranks(0);
  images->add_ranks(2);
  images->set_label("ran 5 extra collectives in fwd/vision.*");
  v1::RankClass* text = finding.add_rank_classes();
  text->add_ranks(1);
  text->add_ranks(3);
  text->set_label("went on to bwd/trunk");
  finding.add_regions("fwd/vision.patch");
  finding.set_headline("PATH_DIVERGENCE: comm 3f2a9c01 seq 41: ranks 0,2 all-gather in fwd/vision.patch; ranks 1,3 not");
  finding.set_brief("comm 3f2a9c01 seq 41: ranks 0,2 all-gather in fwd/vision.patch; ranks 1,3 not");
  finding.set_summary("Ranks 0,2 issued all-gathers of the vision tower that ranks 1,3 did not. Give every rank a dummy image.");
  finding.set_detect_latency_s(0.16);
  finding.set_first_bad_t_ns(static_cast<uint64_t>(kNow - 3'000'000'000));
  v1::FindingContext* context = finding.add_context();
  context->add_ranks(0);
  context->add_ranks(2);
  context->add_lines("= seq 40     all-gather 4.2 MB bf16 in fwd/embed");
  context->add_lines("> seq 41     all-gather 8.0 MB bf16 in fwd/vision.patch");
  return finding;
}

TEST(DashboardModelTest, HealthyJobShowsEveryRankRunningAndNoFinding) {
  DashboardModel model;
  model.Update(Job(4, 120, 120), Connected(), kNow);
  const std::string screen = Screen(model);
  EXPECT_NE(screen.find("job job-1"), std::string::npos) << screen;
  EXPECT_NE(screen.find("4 ranks on 2 nodes (4 reporting, 0 lost)  1 communicator  12.5 coll/s  400 events"),
            std::string::npos) << screen;
  EXPECT_NE(screen.find("collector 127.0.0.1:7777 connected"), std::string::npos) << screen;
  EXPECT_NE(screen.find("comm 3f2a9c01: 4 ranks (4 heard from)"), std::string::npos) << screen;
  EXPECT_NE(screen.find("nothing in flight"), std::string::npos) << screen;
  EXPECT_NE(screen.find("none: every communicator agrees so far"), std::string::npos) << screen;
  for (int rank = 0; rank < 4; ++rank) {
    const std::string line = RankLine(screen, std::to_string(rank));
    EXPECT_NE(line.find("120       120"), std::string::npos) << screen;
    EXPECT_NE(line.find("healthy: running"), std::string::npos) << screen;
  }
}

// Two processes holding two ranks each (no RANK; the collector derived their ranks).
TEST(DashboardModelTest, ProcessesOfSeveralRanksCountAsTheirRanks) {
  v1::ClusterState state = Job(4, 120, 120);
  state.mutable_ranks()->DeleteSubrange(2, 2);
  state.mutable_rank_status()->DeleteSubrange(2, 2);
  for (int p = 0; p < 2; ++p) {
    state.mutable_ranks(p)->set_rank(-1);
    state.mutable_rank_status(p)->add_ranks(2 * p);
    state.mutable_rank_status(p)->add_ranks(2 * p + 1);
  }
  state.mutable_rank_status(1)->set_connected(false);
  state.mutable_rank_status(1)->set_writer_status(v1::WRITER_STATUS_DEAD);
  DashboardModel model;
  model.Update(state, Connected(), kNow);
  const std::string screen = Screen(model);
  EXPECT_NE(screen.find("4 ranks in 2 processes on 1 node (2 reporting, 2 lost)"), std::string::npos) << screen;
}

TEST(DashboardModelTest, LateRankIsSlowThenStuckAgainstTheThreshold) {
  v1::ClusterState state = Job(4, 5, 4);
  v1::CommState* comm = state.mutable_comms(0);
  comm->mutable_ranks(1)->set_entered_seq(4);
  comm->set_oldest_inflight_seq(5);
  comm->set_oldest_inflight_op("all-gather 4.2 MB bf16 in fwd/embed");
  comm->set_oldest_inflight_age_s(12);
  comm->set_oldest_inflight_expected_s(0.1);
  comm->set_stall_threshold_s(30);
  comm->set_waiting_for_ranks(true);
  DashboardModel model;
  model.Update(state, Connected(), kNow);
  std::string screen = Screen(model);
  EXPECT_NE(screen.find("oldest in flight: seq 5 all-gather 4.2 MB bf16 in fwd/embed, 12.0 s (expected 0.10 s), "
                        "stall at 30.0 s; waiting for ranks"),
            std::string::npos) << screen;
  EXPECT_NE(RankLine(screen, "1").find("slow: not at seq 5 for 12.0 s"), std::string::npos) << screen;
  EXPECT_NE(RankLine(screen, "0").find("healthy: waiting at seq 5"), std::string::npos) << screen;

  comm->set_oldest_inflight_age_s(31);
  model.Update(state, Connected(), kNow);
  screen = Screen(model);
  EXPECT_NE(RankLine(screen, "1").find("stuck: not at seq 5 for 31.0 s"), std::string::npos) << screen;
}

TEST(DashboardModelTest, DivergenceNamesEachRanksClassAndTheFindingOpens) {
  v1::ClusterState state = Job(4, 41, 40);
  *state.add_findings() = Divergence();
  DashboardModel model;
  model.Update(state, Connected(), kNow);
  const std::string screen = Screen(model);
  EXPECT_NE(RankLine(screen, "0").find("diverged: class 1/2 at seq 41: ran 5 extra collectives in fwd/vision.*"),
            std::string::npos) << screen;
  EXPECT_NE(RankLine(screen, "3").find("diverged: class 2/2 at seq 41: went on to bwd/trunk"), std::string::npos)
      << screen;
  const std::string finding = LineWith(screen, "PATH_DIVERGENCE ");
  EXPECT_NE(finding.find("3.00 s ago, found in 0.16 s: comm 3f2a9c01 seq 41: ranks 0,2"), std::string::npos) << screen;

  ASSERT_TRUE(model.HandleKey(kKeyEnter));
  ASSERT_TRUE(model.finding_open());
  const std::string detail = Screen(model);
  EXPECT_NE(detail.find("finding 1 of 1"), std::string::npos) << detail;
  // report.txt's words for the finding, line for line (the screen is wide enough), its
  // prose on one line rather than folded at report.txt's 96 columns.
  const std::string report = analyzer::FindingText(FindingFromProto(Divergence()), /*prose_width=*/0);
  EXPECT_NE(report.find("PATH_DIVERGENCE: comm 3f2a9c01 seq 41: ranks 0,2 all-gather in fwd/vision.patch"),
            std::string::npos) << report;
  for (const std::string& line : std::vector<std::string>(absl::StrSplit(report, '\n', absl::SkipWhitespace()))) {
    EXPECT_NE(detail.find(line), std::string::npos) << "missing: " << line << "\n" << detail;
  }
  ASSERT_TRUE(model.HandleKey(kKeyEscape));
  EXPECT_FALSE(model.finding_open());
}

// On a narrow screen a long line of the finding continues, indented as it began: no word
// of it is lost.
TEST(DashboardModelTest, AFindingOnANarrowScreenWrapsWithoutLosingWords) {
  v1::ClusterState state = Job(4, 41, 40);
  *state.add_findings() = Divergence();
  DashboardModel model(DashboardModel::Options{.ascii = true});
  model.Update(state, Connected(), kNow);
  ASSERT_TRUE(model.HandleKey(kKeyEnter));
  std::string detail;
  for (const Line& line : model.Render(40, 60)) {
    const std::string text = LineText(line);
    EXPECT_LE(text.size(), 40u) << text;
    detail += text + " ";
  }
  for (const char* words : {"Give every rank a dummy image.", "ran 5 extra collectives in fwd/vision.*",
                            "all-gather 8.0 MB bf16 in fwd/vision.patch"}) {
    std::string squeezed;  // the detail with runs of spaces made one
    for (char c : detail) {
      if (c != ' ' || squeezed.empty() || squeezed.back() != ' ') squeezed += c;
    }
    EXPECT_NE(squeezed.find(words), std::string::npos) << words << "\n" << detail;
  }
}

// The finding view shows where in the code the ranks parted, as report.txt does.
TEST(DashboardModelTest, AFindingShowsItsBranchPoint) {
  v1::ClusterState state = Job(4, 41, 40);
  v1::Finding finding = Divergence();
  v1::BranchPoint* point = finding.mutable_branch_point();
  point->set_function("LlavaModel.forward");
  point->set_file("/venv/transformers/models/llava/modeling_llava.py");
  v1::BranchArm* image = point->add_arms();
  image->add_ranks(0);
  image->add_ranks(2);
  image->set_line(237);
  image->set_callee("LlavaModel.get_image_features");
  v1::BranchArm* text = point->add_arms();
  text->add_ranks(1);
  text->add_ranks(3);
  text->set_line(250);
  text->set_callee("LlamaModel.forward");
  *state.add_findings() = finding;
  DashboardModel model;
  model.Update(state, Connected(), kNow);
  ASSERT_TRUE(model.HandleKey(kKeyEnter));
  const std::string detail = Screen(model, 200, 40);
  EXPECT_NE(detail.find("branch point     `LlavaModel.forward` (modeling_llava.py): ranks 0,2 at line 237 \u2192 "
                        "LlavaModel.get_image_features, ranks 1,3 at line 250 \u2192 LlamaModel.forward"),
            std::string::npos)
      << detail;
}

TEST(DashboardModelTest, TheStacksKeyAsksOnceAndShowsEveryProcesssStacks) {
  v1::ClusterState state = Job(4, 41, 40);
  DashboardModel model;
  model.Update(state, Connected(), kNow);
  EXPECT_FALSE(model.TakeStacksRequest());
  ASSERT_TRUE(model.HandleKey('s'));
  EXPECT_TRUE(model.stacks_open());
  EXPECT_TRUE(model.TakeStacksRequest());
  EXPECT_FALSE(model.TakeStacksRequest()) << "once per key";
  model.SetStacksStatus("asked 4 processes for their stacks");
  std::string screen = Screen(model, 200, 20);
  EXPECT_NE(screen.find("asked 4 processes for their stacks"), std::string::npos) << screen;
  EXPECT_NE(screen.find("no stacks taken yet"), std::string::npos) << screen;

  v1::FindingStacks* stacks = state.mutable_stacks();
  stacks->set_taken_ns(1'700'000'000'000'000'000);
  v1::StackClass* waiting = stacks->add_classes();
  for (int32_t rank : {0, 1, 2}) waiting->add_ranks(rank);
  waiting->set_thread("python3 (main thread)");
  waiting->set_where("sleeping in poll (libc.so.6) \u2190 ncclAllGather (libnccl.so.2) \u2190 train (train.py:88)");
  v1::StackClass* late = stacks->add_classes();
  late->add_ranks(3);
  late->set_thread("python3 (main thread)");
  late->set_where("sleeping in clock_nanosleep (libc.so.6) \u2190 late_start (train.py:20)");
  model.Update(state, Connected(), kNow);
  screen = Screen(model, 200, 20);
  EXPECT_NE(screen.find("taken 2023-11-14T22:13:20.000Z"), std::string::npos) << screen;
  EXPECT_NE(screen.find("ranks 0-2   python3 (main thread) sleeping in poll (libc.so.6) \u2190 ncclAllGather"),
            std::string::npos)
      << screen;
  EXPECT_NE(screen.find("rank 3      python3 (main thread) sleeping in clock_nanosleep"), std::string::npos) << screen;
  ASSERT_TRUE(model.HandleKey('s'));
  EXPECT_TRUE(model.TakeStacksRequest()) << "s again in the view asks again";
  ASSERT_TRUE(model.HandleKey(kKeyEscape));
  EXPECT_FALSE(model.stacks_open());
}

TEST(DashboardModelTest, FindingsAreListedNewestFirst) {
  v1::ClusterState state = Job(4, 41, 40);
  *state.add_findings() = Divergence();
  v1::Finding stall;
  stall.set_kind(v1::NOT_JOINED);
  stall.set_comm_id(kComm);
  stall.set_seq(42);
  stall.add_lagging_ranks(1);
  stall.set_headline("NOT_JOINED: rank 1 not at comm 3f2a9c01 seq 42");
  stall.set_brief("rank 1 not at comm 3f2a9c01 seq 42");
  stall.set_first_bad_t_ns(static_cast<uint64_t>(kNow - 1'000'000'000));
  *state.add_findings() = stall;
  DashboardModel model;
  model.Update(state, Connected(), kNow);
  const std::string screen = Screen(model);
  ASSERT_NE(screen.find("NOT_JOINED"), std::string::npos) << screen;
  EXPECT_LT(screen.find(">NOT_JOINED"), screen.find(" PATH_DIVERGENCE")) << screen;
  EXPECT_NE(screen.find("findings: 2, newest first"), std::string::npos);
  // The latest finding of the communicator explains its ranks.
  EXPECT_NE(RankLine(screen, "1").find("stuck: not at seq 42"), std::string::npos) << screen;
  EXPECT_NE(RankLine(screen, "2").find("slow: waiting at seq 42"), std::string::npos) << screen;
  ASSERT_TRUE(model.HandleKey(kKeyDown));
  ASSERT_TRUE(model.HandleKey(kKeyEnter));
  EXPECT_NE(Screen(model).find("finding 2 of 2"), std::string::npos);
  EXPECT_NE(Screen(model).find("PATH_DIVERGENCE"), std::string::npos);
}

// The list reads the finding's brief; the headline is never taken apart. A collector that
// sends no brief gets its headline shown whole.
TEST(DashboardModelTest, FindingsAreListedByTheirBrief) {
  v1::ClusterState state = Job(4, 41, 40);
  v1::Finding finding = Divergence();
  finding.set_brief("the brief");
  *state.add_findings() = finding;
  DashboardModel model;
  model.Update(state, Connected(), kNow);
  EXPECT_NE(LineWith(Screen(model), "PATH_DIVERGENCE ").find("found in 0.16 s: the brief"), std::string::npos)
      << Screen(model);
  state.mutable_findings(0)->clear_brief();
  model.Update(state, Connected(), kNow);
  EXPECT_NE(LineWith(Screen(model), "PATH_DIVERGENCE ").find("found in 0.16 s: PATH_DIVERGENCE: comm 3f2a9c01"),
            std::string::npos) << Screen(model);
}

TEST(DashboardModelTest, ThousandRanksAggregateIntoClassesAndAHeatMap) {
  v1::ClusterState state = Job(1024, 300, 299);
  v1::CommState* comm = state.mutable_comms(0);
  comm->mutable_ranks(512)->set_entered_seq(299);
  comm->mutable_ranks(700)->set_status(v1::WRITER_STATUS_DEAD);
  comm->set_oldest_inflight_seq(300);
  comm->set_oldest_inflight_age_s(5);
  comm->set_stall_threshold_s(30);
  comm->set_waiting_for_ranks(true);
  DashboardModel model;
  model.Update(state, Connected(), kNow);
  const std::string screen = Screen(model, 140, 30);
  // docs/dashboard.md shows this screen.
  if (const char* dir = std::getenv("COLLWATCH_SCREENSHOT_DIR"); dir != nullptr && dir[0] != '\0') {
    std::ofstream(std::string(dir) + "/top-1024-ranks.txt") << screen;
  }
  EXPECT_LE(std::count(screen.begin(), screen.end(), '\n'), 30);
  EXPECT_NE(screen.find("ranks (alike)"), std::string::npos) << screen;
  EXPECT_NE(screen.find(" map  "), std::string::npos) << screen;
  EXPECT_NE(RankLine(screen, "700 (1)").find("stuck: process died"), std::string::npos) << screen;
  EXPECT_NE(RankLine(screen, "512 (1)").find("slow: not at seq 300 for 5.00 s"), std::string::npos) << screen;
  EXPECT_NE(RankLine(screen, "0-511,513-699,701-1023 (1022)").find("healthy: waiting at seq 300"), std::string::npos) << screen;
  // Worst first.
  EXPECT_LT(screen.find("700 (1)"), screen.find("512 (1)"));
  EXPECT_LT(screen.find("512 (1)"), screen.find("all but"));
}

TEST(DashboardModelTest, RankFilterShowsOnlyThoseRanksAndRejectsNonsense) {
  DashboardModel model;
  model.Update(Job(8, 10, 10), Connected(), kNow);
  for (int key : std::vector<int>{'/', '2', '-', '3', kKeyEnter}) ASSERT_TRUE(model.HandleKey(key));
  ASSERT_TRUE(model.rank_filter().has_value());
  std::string screen = Screen(model);
  EXPECT_NE(screen.find("filter: ranks 2-3"), std::string::npos) << screen;
  EXPECT_EQ(RankLine(screen, "0"), "") << screen;
  EXPECT_NE(RankLine(screen, "3"), "") << screen;
  for (int key : std::vector<int>{'/', 'x', kKeyEnter}) ASSERT_TRUE(model.HandleKey(key));
  EXPECT_NE(Screen(model).find("not a rank list: 'x'"), std::string::npos);
  ASSERT_TRUE(model.HandleKey(kKeyEscape));
  EXPECT_FALSE(model.rank_filter().has_value());
  EXPECT_NE(RankLine(Screen(model), "0"), "");
}

TEST(DashboardModelTest, KeysMoveBetweenCommunicatorsPauseAndQuit) {
  v1::ClusterState state = Job(2, 10, 10);
  v1::CommState* second = state.add_comms();
  second->set_comm_id(0x77aa000000000000ULL);
  second->set_nranks(2);
  second->set_parent_id(kComm);
  DashboardModel model;
  model.Update(state, Connected(), kNow);
  EXPECT_NE(Screen(model).find("communicator 1/2"), std::string::npos);
  ASSERT_TRUE(model.HandleKey(kKeyRight));
  std::string screen = Screen(model);
  EXPECT_NE(screen.find("communicator 2/2"), std::string::npos) << screen;
  EXPECT_NE(screen.find("comm 77aa0000: 2 ranks (0 heard from), split from comm 3f2a9c01"), std::string::npos) << screen;
  ASSERT_TRUE(model.HandleKey(kKeyLeft));
  EXPECT_EQ(model.selected_comm(), 0u);

  ASSERT_TRUE(model.HandleKey('p'));
  EXPECT_NE(Screen(model).find("PAUSED"), std::string::npos);
  model.Update(Job(2, 99, 99), Connected(), kNow);
  EXPECT_EQ(Screen(model).find(" 99 "), std::string::npos) << "a paused screen keeps its state";
  ASSERT_TRUE(model.HandleKey('p'));
  EXPECT_NE(Screen(model).find("        99        99"), std::string::npos) << Screen(model);
  EXPECT_FALSE(model.HandleKey('q'));
}

TEST(DashboardModelTest, SaysWhenTheCollectorIsLostAndWhenItIsBack) {
  DashboardModel model;
  ConnectionState lost = Connected();
  lost.connected = false;
  lost.failed_attempts = 2;
  lost.last_error = "failed to connect to all addresses";
  model.Update(Job(2, 10, 10), lost, kNow);
  EXPECT_NE(Screen(model).find("collector 127.0.0.1:7777 lost: reconnecting (attempt 2); showing the last state - failed "
                               "to connect to all addresses"),
            std::string::npos) << Screen(model);
  ConnectionState back = Connected();
  back.connections = 2;
  model.Update(Job(2, 10, 10), back, kNow);
  EXPECT_NE(Screen(model).find("collector 127.0.0.1:7777 connected (reconnected 1 time)"), std::string::npos);
  ConnectionState never;
  never.address = "10.0.0.1:7777";
  model.Update(v1::ClusterState(), never, kNow);
  EXPECT_NE(Screen(model).find("collector 10.0.0.1:7777: connecting (attempt 1)"), std::string::npos);
  EXPECT_NE(Screen(model).find("none yet: no collective has been reported"), std::string::npos);
}

TEST(DashboardModelTest, PlainModeIsAsciiAndLinesFitTheWidth) {
  v1::ClusterState state = Job(4, 41, 40);
  *state.add_findings() = Divergence();
  DashboardModel plain(DashboardModel::Options{.ascii = true});
  plain.Update(state, Connected(), kNow);
  for (int width : {40, 80, 200}) {
    for (const Line& line : plain.Render(width, 30)) {
      const std::string text = LineText(line);
      EXPECT_LE(text.size(), static_cast<size_t>(width)) << text;
      for (char c : text) EXPECT_TRUE(static_cast<unsigned char>(c) < 0x80) << text;
    }
  }
  DashboardModel fancy;
  fancy.Update(state, Connected(), kNow);
  EXPECT_NE(Screen(fancy).find("█"), std::string::npos);
}

}  // namespace
}  // namespace collwatch::dashboard
