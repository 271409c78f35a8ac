// The overview at the sizes people's terminals have (80x24, 60x20): drawn as a text grid,
// every line fits, and the finding's headline and each rank's state keep every word in
// order; the minority class of a divergence stands out; NO_COLOR turns colour off; before
// any state the screen claims no agreement; the JSON snapshot says what the screen says.
#include <stdlib.h>

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "dashboard/dashboard_model.h"
#include "dashboard/screen_text.h"
#include "dashboard/top_snapshot.h"
#include "files/json_contract.h"

namespace collwatch::dashboard {
namespace {

constexpr int64_t kLayoutNow = 1'700'000'000'000'000'000;
constexpr uint64_t kExpertComm = 0x5e11a2b300000000ULL;
constexpr char kMajorityLabel[] = "issued reduce-scatter 64.0 MiB (16777216 x bfloat16) sum in bwd/experts.3";
constexpr char kMinorityLabel[] = "skipped it: went on to all-gather 128.0 MiB (33554432 x bfloat16) in fwd/experts.4";
constexpr char kBrief[] =
    "at comm 5e11a2b3 seq 11: rank 7 skipped the reduce-scatter of bwd/experts.3 that ranks 0-6 issued, and "
    "went on to an all-gather of fwd/experts.4";

// Eight ranks, all at seq 11 of an expert communicator, where rank 7 alone skipped.
v1::ClusterState ExpertJob() {
  v1::ClusterState state;
  state.set_job("moe-1");
  v1::CommState* comm = state.add_comms();
  comm->set_comm_id(kExpertComm);
  comm->set_nranks(8);
  comm->set_oldest_inflight_seq(11);
  comm->set_oldest_inflight_op("reduce-scatter 64.0 MiB (16777216 x bfloat16) sum in bwd/experts.3");
  comm->set_oldest_inflight_age_s(4.2);
  comm->set_stall_threshold_s(30);
  for (int rank = 0; rank < 8; ++rank) {
    v1::RankIdentity* identity = state.add_ranks();
    identity->set_host("node-a");
    identity->set_rank(rank);
    v1::RankStatus* status = state.add_rank_status();
    status->set_process("p" + std::to_string(rank));
    status->set_connected(true);
    status->set_writer_status(v1::WRITER_STATUS_RUNNING);
    v1::RankProgress* progress = comm->add_ranks();
    progress->set_rank(rank);
    progress->set_entered_seq(11);
    progress->set_completed_seq(10);
    progress->set_status(v1::WRITER_STATUS_RUNNING);
  }
  v1::Finding* finding = state.add_findings();
  finding->set_kind(v1::SKIPPED_REDUCE_SCATTER);
  finding->set_comm_id(kExpertComm);
  finding->set_seq(11);
  v1::RankClass* majority = finding->add_rank_classes();
  for (int rank = 0; rank < 7; ++rank) majority->add_ranks(rank);
  majority->set_label(kMajorityLabel);
  v1::RankClass* minority = finding->add_rank_classes();
  minority->add_ranks(7);
  minority->set_label(kMinorityLabel);
  finding->set_brief(kBrief);
  finding->set_headline(std::string("SKIPPED_REDUCE_SCATTER ") + kBrief);
  finding->set_summary("Rank 7 had no tokens for expert 3. Run every expert's reduce-scatter on every rank.");
  finding->set_first_bad_t_ns(static_cast<uint64_t>(kLayoutNow - 4'200'000'000));
  finding->set_detect_latency_s(0.2);
  return state;
}

ConnectionState Live() {
  ConnectionState connection;
  connection.address = "127.0.0.1:41234";
  connection.connected = connection.ever_connected = true;
  connection.connections = 1;
  return connection;
}

// The screen's lines as text, and the whole of it with its runs of spaces and line ends
// made one space: a word cut across two lines would read as two there.
struct Grid {
  std::vector<std::string> rows;
  std::string squeezed;
};

Grid Draw(const DashboardModel& model, int width, int height) {
  Grid grid;
  std::string joined;
  for (const Line& line : model.Render(width, height)) {
    grid.rows.push_back(LineText(line));
    joined += grid.rows.back() + " ";
  }
  for (char c : joined) {
    if (c != ' ' || grid.squeezed.empty() || grid.squeezed.back() != ' ') grid.squeezed += c;
  }
  return grid;
}

bool Has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

class OverviewLayoutTest : public ::testing::TestWithParam<std::pair<int, int>> {};

TEST_P(OverviewLayoutTest, TheHeadlineAndEveryRanksStateKeepTheirWords) {
  const auto [width, height] = GetParam();
  for (bool ascii : {false, true}) {
    DashboardModel model(DashboardModel::Options{.ascii = ascii});
    model.Update(ExpertJob(), Live(), kLayoutNow);
    const Grid grid = Draw(model, width, height);
    std::string screen;
    for (const std::string& row : grid.rows) screen += row + "\n";
    EXPECT_LE(grid.rows.size(), static_cast<size_t>(height)) << screen;
    for (const std::string& row : grid.rows) EXPECT_LE(Columns(row), static_cast<size_t>(width)) << row;
    // The headline whole, in order, after its kind; then each class's state, and the keys.
    EXPECT_TRUE(Has(grid.squeezed, std::string("SKIPPED_REDUCE_SCATTER 4.20 s ago, found in 0.20 s: ") + kBrief))
        << screen;
    EXPECT_TRUE(Has(grid.squeezed, std::string("diverged: class 2/2 (minority) at seq 11: ") + kMinorityLabel))
        << screen;
    // On a small screen the seven alike ranks may give way to the one that differs.
    EXPECT_TRUE(Has(grid.squeezed, std::string("diverged: class 1/2 at seq 11: ") + kMajorityLabel) ||
                (height < 24 && Has(grid.squeezed, "(1 more group)")))
        << screen;
    EXPECT_TRUE(Has(grid.squeezed, "oldest in flight: seq 11 reduce-scatter 64.0 MiB (16777216 x bfloat16) sum in "
                                   "bwd/experts.3, 4.20 s, stall at 30.0 s"))
        << screen;
    EXPECT_TRUE(Has(grid.squeezed, "p pause q quit")) << screen;
    EXPECT_TRUE(Has(grid.rows.back(), "q quit")) << "the keys stay at the foot\n" << screen;
  }
}

INSTANTIATE_TEST_SUITE_P(Terminals, OverviewLayoutTest,
                         ::testing::Values(std::make_pair(80, 24), std::make_pair(60, 20), std::make_pair(150, 45)));

// The one rank of eight that went its own way is drawn apart: first among the grouped
// ranks, its label and state in the minority style (reverse video), in the list and in
// the opened finding.
TEST(OverviewMinorityTest, TheMinorityClassIsHighlighted) {
  DashboardModel model;
  model.Update(ExpertJob(), Live(), kLayoutNow);
  bool minority_row = false, majority_row = false;
  for (const Line& line : model.Render(80, 24)) {
    const std::string text = LineText(line);
    if (Has(text, "class 2/2 (minority)")) {
      minority_row = true;
      EXPECT_EQ(line.back().style, Style::kMinority) << text;
      EXPECT_EQ(line[1].style, Style::kMinority) << "its rank label too: " << text;
    }
    if (Has(text, "class 1/2 at")) {
      majority_row = true;
      EXPECT_EQ(line.back().style, Style::kDiverged) << text;
    }
  }
  EXPECT_TRUE(minority_row && majority_row);

  ASSERT_TRUE(model.HandleKey(kKeyEnter));
  bool minority_line = false;
  for (const Line& line : model.Render(100, 40)) {
    const std::string text = LineText(line);
    if (Has(text, "rank  7") && Has(text, "skipped it")) {
      minority_line = true;
      EXPECT_EQ(line.back().style, Style::kMinority) << text;
    }
    if (Has(text, "ranks 0-6")) {
      EXPECT_NE(line.back().style, Style::kMinority) << text;
    }
  }
  EXPECT_TRUE(minority_line);

  // Two against two: no class is the minority.
  v1::Finding even = ExpertJob().findings(0);
  even.mutable_rank_classes(0)->mutable_ranks()->Truncate(2);
  even.mutable_rank_classes(1)->add_ranks(6);
  EXPECT_EQ(MinorityClass(even), -1);
  EXPECT_EQ(MinorityClass(ExpertJob().findings(0)), 1);
}

TEST(OverviewNoDataTest, WithoutAStateItClaimsNoAgreement) {
  DashboardModel model;
  ConnectionState never;
  never.address = "127.0.0.1:41234";
  never.failed_attempts = 2;
  never.last_error = "Connection refused";
  model.Update(v1::ClusterState(), never, kLayoutNow);
  Grid grid = Draw(model, 80, 24);
  EXPECT_FALSE(Has(grid.squeezed, "agrees")) << grid.squeezed;
  EXPECT_TRUE(Has(grid.squeezed, "none yet: no state from the collector")) << grid.squeezed;
  model.Update(v1::ClusterState(), Live(), kLayoutNow);
  grid = Draw(model, 80, 24);
  EXPECT_FALSE(Has(grid.squeezed, "agrees")) << grid.squeezed;
  EXPECT_TRUE(Has(grid.squeezed, "none yet: no collective reported")) << grid.squeezed;
  v1::ClusterState healthy = ExpertJob();
  healthy.clear_findings();
  model.Update(healthy, Live(), kLayoutNow);
  EXPECT_TRUE(Has(Draw(model, 80, 24).squeezed, "none: every communicator agrees so far"));
}

// no-color.org: any value but empty turns colour off; --plain does too.
TEST(OverviewColourTest, NoColorTurnsColourOff) {
  unsetenv("NO_COLOR");
  EXPECT_TRUE(ColourWanted(/*plain=*/false));
  EXPECT_FALSE(ColourWanted(/*plain=*/true));
  setenv("NO_COLOR", "1", 1);
  EXPECT_FALSE(ColourWanted(false));
  setenv("NO_COLOR", "no", 1);
  EXPECT_FALSE(ColourWanted(false)) << "any value";
  setenv("NO_COLOR", "", 1);
  EXPECT_TRUE(ColourWanted(false)) << "empty is unset";
  unsetenv("NO_COLOR");
}

TEST(TopSnapshotTest, SaysWhatTheScreenSays) {
  const nlohmann::json snapshot = TopSnapshotJson(ExpertJob(), Live(), kLayoutNow);
  EXPECT_EQ(snapshot[kSchemaVersionKey], kTopSchemaVersion);
  EXPECT_EQ(snapshot["verdict"], "findings");
  EXPECT_EQ(snapshot["headline"], std::string("SKIPPED_REDUCE_SCATTER ") + kBrief);
  EXPECT_EQ(snapshot["ranks"]["count"], 8);
  ASSERT_EQ(snapshot["communicators"].size(), 1u);
  const nlohmann::json& comm = snapshot["communicators"][0];
  EXPECT_EQ(comm["comm"], "5e11a2b300000000");
  EXPECT_EQ(comm["health"], "diverged");
  EXPECT_EQ(comm["oldest_inflight"]["seq"], 11);
  ASSERT_EQ(comm["ranks"].size(), 8u);
  EXPECT_EQ(comm["ranks"][7]["minority"], true);
  EXPECT_EQ(comm["ranks"][7]["note"], std::string("class 2/2 (minority) at seq 11: ") + kMinorityLabel);
  EXPECT_EQ(comm["ranks"][0]["minority"], false);
  const nlohmann::json& finding = snapshot["findings"][0];
  EXPECT_EQ(finding["kind"], "SKIPPED_REDUCE_SCATTER");
  EXPECT_EQ(finding["rank_classes"][1]["ranks"], nlohmann::json::array({7}));
  EXPECT_EQ(finding["rank_classes"][1]["minority"], true);

  ConnectionState never;
  never.address = "127.0.0.1:41234";
  const nlohmann::json empty = TopSnapshotJson(v1::ClusterState(), never, kLayoutNow);
  EXPECT_EQ(empty["verdict"], "no data");
  EXPECT_EQ(empty["findings"], nlohmann::json::array());
}

}  // namespace
}  // namespace collwatch::dashboard
