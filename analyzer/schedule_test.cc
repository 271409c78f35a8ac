// Schedule lines (format, parse, intern) and a job's schedule (rank classes, absent
// ranks, creation order), on synthetic jobs.
#include "analyzer/schedule.h"

#include "analyzer/baseline.h"
#include "analyzer/schedule_test_job.h"
#include "analyzer/test_job.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace collwatch::analyzer::schedule_test {
namespace {

using testing::Gather;
using testing::kWorld;
using testing::TestJob;
using ::testing::HasSubstr;

// ---- Ops --------------------------------------------------------------------------------

TEST(ScheduleOpTest, FormatsAndParsesBack) {
  const std::vector<ScheduleOp> ops = {
      {ring::ApiFn::kAllGather, 1056, 7, ring::kUnset, ring::kUnset, "fwd/vision.patch"},
      {ring::ApiFn::kReduceScatter, 264, 9, 4, ring::kUnset, "bwd/mtp.head0"},
      {ring::ApiFn::kBroadcast, 1, 2, ring::kUnset, 0, "data/batch_kind"},
      {ring::ApiFn::kAllReduce, 18446744073709551615ull, 7, 0, ring::kUnset, ""},
      {ring::ApiFn::kReduce, 8, 200, 9, 3, "odd \"name\" with \\ and\nnewline\x01 and caf\xc3\xa9 # not a comment"},
      {},  // not reported
  };
  EXPECT_EQ(FormatScheduleOp(ops[0]), "all-gather 1056 float32 \"fwd/vision.patch\"");
  EXPECT_EQ(FormatScheduleOp(ops[1]), "reduce-scatter 264 bfloat16 avg \"bwd/mtp.head0\"");
  EXPECT_EQ(FormatScheduleOp(ops[2]), "broadcast 1 int32 root=0 \"data/batch_kind\"");
  EXPECT_EQ(FormatScheduleOp(ops[3]), "all-reduce 18446744073709551615 float32 sum -");
  EXPECT_EQ(FormatScheduleOp(ops[5]), "?");
  for (const ScheduleOp& op : ops) {
    const std::string line = FormatScheduleOp(op);
    absl::StatusOr<ScheduleOp> parsed = ParseScheduleOp(line);
    ASSERT_TRUE(parsed.ok()) << line << ": " << parsed.status();
    EXPECT_EQ(*parsed, op) << line;
  }
}

TEST(ScheduleOpTest, RejectsMalformedLines) {
  const std::pair<std::string, std::string> cases[] = {
      {"all-gahter 5 float32 -", "unknown collective 'all-gahter'"},
      {"all-gather five float32 -", "count 'five' is not a number"},
      {"all-gather 18446744073709551616 float32 -", "is not a number"},
      {"all-gather -5 float32 -", "is not a number"},
      {"all-gather 5 float33 -", "unknown dtype 'float33'"},
      {"all-gather 5 float32", "needs COUNT DTYPE"},
      {"all-gather 5 float32 fwd/embed", "must end with the region in quotes"},
      {"all-gather 5 float32 \"fwd/embed", "no closing"},
      {"all-gather 5 float32 \"fwd\"x", "text right after a quoted region"},
      {"all-gather 5 float32 \"a\\qb\"", "unknown escape"},
      {"all-gather 5 float32 \"a\\x4\"", "two hex digits"},
      {"all-reduce 5 float32 sum sum -", "two reduce ops"},
      {"broadcast 5 float32 root=1 root=2 -", "two roots"},
      {"broadcast 5 float32 root=-1 -", "bad root"},
      {"broadcast 5 float32 \"r\" sum", "last word"},
      {"all-reduce 5 float32 bogus -", "unexpected 'bogus'"},
      {"? all-gather", "stands alone"},
      {"\"region\" 5", "cannot start with a quoted region"},
  };
  for (const auto& [line, message] : cases) {
    absl::StatusOr<ScheduleOp> parsed = ParseScheduleOp(line);
    ASSERT_FALSE(parsed.ok()) << line;
    EXPECT_THAT(std::string(parsed.status().message()), HasSubstr(message)) << line;
  }
}

TEST(OpTableTest, InternsEqualOpsOnceAndCanIgnoreRegions) {
  OpTable table;
  EXPECT_EQ(table.Intern({ring::ApiFn::kAllGather, 4, 7, -1, -1, "a"}),
            table.Intern({ring::ApiFn::kAllGather, 4, 7, -1, -1, "a"}));
  EXPECT_NE(table.Intern({ring::ApiFn::kAllGather, 4, 7, -1, -1, "a"}),
            table.Intern({ring::ApiFn::kAllGather, 4, 7, -1, -1, "b"}));
  OpTable no_regions(/*ignore_regions=*/true);
  EXPECT_EQ(no_regions.Intern({ring::ApiFn::kAllGather, 4, 7, -1, -1, "a"}),
            no_regions.Intern({ring::ApiFn::kAllGather, 4, 7, -1, -1, "b"}));
  EXPECT_EQ(no_regions.Line(0), "all-gather 4 float32 -");
}

// ---- Schedules of a job -----------------------------------------------------------------

TEST(ExtractScheduleTest, GroupsRanksIntoClassesAndNamesAbsentRanks) {
  JobModel model;
  TestJob job(&model);
  // 4-rank communicator; rank 3's process never reports; ranks 1 and 2 skip the vision tower.
  for (int r = 0; r < 3; ++r) {
    const ProcessId p = job.AddRank(r);
    job.Init(p, kWorld, r, 4);
    if (r == 0) job.Collective(p, kWorld, r, 4, Gather("fwd/vision"));
    job.Collective(p, kWorld, r, 4, Gather("fwd/embed"));
  }
  OpTable table;
  const JobSchedule schedule = ExtractSchedule(model, &table);
  ASSERT_EQ(schedule.comms.size(), 1u);
  const CommSchedule& comm = schedule.comms[0];
  EXPECT_EQ(comm.index, 1);
  EXPECT_EQ(comm.size, 4);
  EXPECT_EQ(comm.id, kWorld);
  ASSERT_EQ(comm.classes.size(), 2u);
  EXPECT_EQ(comm.classes[0].ranks, std::vector<int32_t>({0}));
  EXPECT_EQ(comm.classes[0].ops.size(), 2u);
  EXPECT_EQ(comm.classes[1].ranks, std::vector<int32_t>({1, 2}));
  EXPECT_EQ(table.Line(comm.classes[1].ops[0]), "all-gather 1024 float32 \"fwd/embed\"");
  EXPECT_EQ(comm.absent_ranks, std::vector<int32_t>({3}));
  EXPECT_FALSE(MakeBaseline(schedule).ok());
  EXPECT_THAT(std::string(MakeBaseline(schedule).status().message()), HasSubstr("ranks 3 reported nothing"));
}

TEST(ExtractScheduleTest, CreationOrderIgnoresIdsAndLoadOrder) {
  // World, then a split by color into {0,1} and {2,3}; ids random, processes loaded in
  // different orders: the same indexes and parents every time.
  for (const bool reversed : {false, true}) {
    JobModel model;
    TestJob job(&model);
    const uint64_t world = reversed ? 0x1111 : 0xffff0000;
    const uint64_t low = reversed ? 0x9999 : 0x2222, high = reversed ? 0x3333 : 0x8888;
    for (int i = 0; i < 4; ++i) {
      const int r = reversed ? 3 - i : i;
      const ProcessId p = job.AddRank(r);
      job.Init(p, world, r, 4);
      job.Collective(p, world, r, 4, Gather("world"));
      const uint64_t child = r < 2 ? low : high;
      job.Init(p, child, r % 2, 2, world);
      job.Collective(p, child, r % 2, 2, Gather(r < 2 ? "low" : "high"));
    }
    OpTable table;
    const JobSchedule schedule = ExtractSchedule(model, &table);
    ASSERT_EQ(schedule.comms.size(), 3u);
    EXPECT_EQ(schedule.comms[0].id, world);
    EXPECT_EQ(schedule.comms[0].parent, 0);
    EXPECT_EQ(schedule.comms[1].id, low) << reversed;
    EXPECT_EQ(schedule.comms[1].parent, 1);
    EXPECT_EQ(schedule.comms[2].id, high) << reversed;
    EXPECT_EQ(schedule.comms[2].size, 2);
    EXPECT_EQ(CommLabel(3, 2, 1), "comm 3 (size 2, split from comm 1)");
  }
}

}  // namespace
}  // namespace collwatch::analyzer::schedule_test
