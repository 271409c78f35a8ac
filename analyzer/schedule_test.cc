// Schedules, step folding, the baseline file (round trip, malformed input), check and
// diff, on synthetic jobs.
#include "analyzer/schedule.h"

#include <random>

#include "analyzer/test_job.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace collwatch::analyzer {
namespace {

using testing::Gather;
using testing::Op;
using testing::ReduceScatter;
using testing::TestJob;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr uint64_t kWorld = 0xa11ce00000000001ull;

std::vector<Op> Step(int layers = 2) {
  std::vector<Op> ops = {Gather("fwd/embed", 512)};
  for (int l = 0; l < layers; ++l) ops.push_back(Gather("fwd/block" + std::to_string(l)));
  for (int l = layers; l-- > 0;) {
    ops.push_back(Gather("bwd/block" + std::to_string(l)));
    ops.push_back(ReduceScatter("bwd/block" + std::to_string(l)));
  }
  ops.push_back(ReduceScatter("bwd/embed", 128));
  return ops;
}

std::vector<Op> Repeat(const std::vector<Op>& warmup, const std::vector<Op>& step, int steps,
                       const std::vector<Op>& tail = {}) {
  std::vector<Op> ops = warmup;
  for (int s = 0; s < steps; ++s) ops.insert(ops.end(), step.begin(), step.end());
  ops.insert(ops.end(), tail.begin(), tail.end());
  return ops;
}

// `world` ranks on one communicator (id `comm`), rank r issuing ops_of(r).
template <typename OpsOf>
void BuildJob(JobModel* model, int world, OpsOf ops_of, uint64_t comm = kWorld) {
  TestJob job(model);
  for (int r = 0; r < world; ++r) {
    const ProcessId p = job.AddRank(r);
    job.Init(p, comm, r, world);
    for (const Op& op : ops_of(r)) job.Collective(p, comm, r, world, op);
  }
}

std::string BaselineText(const std::vector<Op>& ops, OpTable* table, int world = 4) {
  JobModel model;
  BuildJob(&model, world, [&](int) { return ops; });
  absl::StatusOr<Baseline> baseline = MakeBaseline(ExtractSchedule(model, table));
  EXPECT_TRUE(baseline.ok()) << baseline.status();
  return baseline.ok() ? FormatBaseline(*baseline, *table) : "";
}

std::vector<uint32_t> Ids(OpTable* table, const std::vector<Op>& ops) {
  std::vector<uint32_t> ids;
  for (const Op& op : ops) {
    ids.push_back(table->Intern(ScheduleOp{op.fn, op.count, op.dtype, op.redop, op.root_or_peer, op.region}));
  }
  return ids;
}

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

// ---- Folding ----------------------------------------------------------------------------

TEST(FoldScheduleTest, FindsTheStepWhateverTheNumberOfSteps) {
  OpTable table;
  const std::vector<Op> warmup = {Op{ring::ApiFn::kBroadcast, 99, 7, "init/params", ring::kUnset, 0}};
  const std::vector<Op> tail = {Gather("dump/params"), Gather("dump/grads")};
  std::vector<Segment> first;
  for (int steps = 2; steps <= 7; ++steps) {
    const std::vector<Segment> segments = FoldSchedule(Ids(&table, Repeat(warmup, Step(), steps, tail)));
    ASSERT_EQ(segments.size(), 3u) << steps;
    EXPECT_FALSE(segments[0].steps);
    EXPECT_EQ(segments[0].ops, Ids(&table, warmup));
    EXPECT_TRUE(segments[1].steps);
    EXPECT_EQ(segments[1].repeat, static_cast<uint64_t>(steps));
    EXPECT_EQ(segments[1].ops, Ids(&table, Step()));
    EXPECT_EQ(segments[2].ops, Ids(&table, tail));
  }
}

TEST(FoldScheduleTest, StepsOnlyFoldToOneSegment) {
  OpTable table;
  const std::vector<Segment> segments = FoldSchedule(Ids(&table, Repeat({}, Step(3), 4)));
  ASSERT_EQ(segments.size(), 1u);
  EXPECT_TRUE(segments[0].steps);
  EXPECT_EQ(segments[0].repeat, 4u);
  EXPECT_EQ(segments[0].ops.size(), Step(3).size());
}

TEST(FoldScheduleTest, LayersThatRepeatInsideTheStepDoNotHideTheStep) {
  // Identical layers without regions repeat within a step; the step still wins (k >= 2).
  OpTable table;
  std::vector<Op> step = {Gather("", 64)};
  for (int l = 0; l < 6; ++l) step.push_back(Gather("", 1024));
  for (int l = 0; l < 6; ++l) step.push_back(ReduceScatter("", 256));
  for (int steps : {2, 3, 5}) {
    const std::vector<Segment> segments = FoldSchedule(Ids(&table, Repeat({}, step, steps)));
    ASSERT_EQ(segments.size(), 1u) << steps;
    EXPECT_EQ(segments[0].ops, Ids(&table, step)) << steps;
  }
}

TEST(FoldScheduleTest, AWarmupEndingLikeTheStepFoldsTheSameWayForAnyStepCount) {
  // The step's last op also ends the warm-up: the fold starts one op early (a rotation of
  // the step), and does so whatever the number of steps.
  OpTable table;
  const std::vector<Op> step = Step();
  const std::vector<Op> warmup = {Gather("warmup"), step.back()};
  const std::vector<Segment> reference = FoldSchedule(Ids(&table, Repeat(warmup, step, 2)));
  for (int steps = 3; steps <= 6; ++steps) {
    std::vector<Segment> segments = FoldSchedule(Ids(&table, Repeat(warmup, step, steps)));
    ASSERT_EQ(segments.size(), reference.size());
    for (size_t i = 0; i < segments.size(); ++i) EXPECT_EQ(segments[i].ops, reference[i].ops) << steps;
  }
}

TEST(FoldScheduleTest, NoRepeatStaysLiteral) {
  OpTable table;
  const std::vector<Op> ops = Step();
  const std::vector<Segment> segments = FoldSchedule(Ids(&table, ops));
  ASSERT_EQ(segments.size(), 1u);
  EXPECT_FALSE(segments[0].steps);
  EXPECT_EQ(segments[0].ops.size(), ops.size());
  EXPECT_TRUE(FoldSchedule({}).empty());
  // Two equal ops in a row are not worth a step block.
  EXPECT_FALSE(FoldSchedule(Ids(&table, {Gather("a"), Gather("a")}))[0].steps);
}

TEST(FoldScheduleTest, LongSchedulesFindTheirStepThroughLikelyPeriods) {
  // 300-op steps x 20 = 6,000 ops: past the full scan, the period comes from the gaps.
  OpTable table;
  std::vector<Op> step;
  for (int i = 0; i < 300; ++i) step.push_back(Gather("layer" + std::to_string(i % 100), 1000 + i));
  const std::vector<Op> warmup = {Gather("warmup", 7), Gather("warmup", 8)};
  const std::vector<Segment> segments = FoldSchedule(Ids(&table, Repeat(warmup, step, 20)));
  ASSERT_EQ(segments.size(), 2u);
  EXPECT_EQ(segments[0].ops.size(), 2u);
  EXPECT_TRUE(segments[1].steps);
  EXPECT_EQ(segments[1].ops.size(), 300u);
  EXPECT_EQ(segments[1].repeat, 20u);
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

// ---- Baseline ---------------------------------------------------------------------------

TEST(BaselineTest, ThreeAndFiveStepRunsGiveTheSameFile) {
  OpTable table;
  const std::string three = BaselineText(Repeat({Gather("warmup")}, Step(), 3), &table);
  const std::string five = BaselineText(Repeat({Gather("warmup")}, Step(), 5), &table);
  EXPECT_EQ(three, five);
  EXPECT_THAT(three, HasSubstr("collwatch-baseline 1\n"));
  EXPECT_THAT(three, HasSubstr("\ncomm 1 size 4\n  ranks 0-3\n    all-gather 1024 float32 \"warmup\"\n"
                               "    step x N  # 8 collectives\n      all-gather 512 float32 \"fwd/embed\"\n"));
  EXPECT_THAT(three, HasSubstr("      reduce-scatter 128 float32 avg \"bwd/embed\"\n    end\n"));
  // A different step count is a different schedule to `diff`, not to the baseline.
  EXPECT_NE(BaselineText(Repeat({Gather("warmup")}, Step(3), 3), &table), three);
}

TEST(BaselineTest, FormatParseFormatIsTheIdentity) {
  JobModel model;
  TestJob job(&model);
  // Two classes on the world, a child communicator, an op with every field.
  const Op odd{ring::ApiFn::kReduce, 3, 200, "we\"ird\\ name\t", 9, 1};
  for (int r = 0; r < 4; ++r) {
    const ProcessId p = job.AddRank(r);
    job.Init(p, kWorld, r, 4);
    for (const Op& op : Repeat({odd}, Step(1), 3)) job.Collective(p, kWorld, r, 4, op);
    if (r % 2 == 1) job.Collective(p, kWorld, r, 4, Gather("odd ranks only"));
    if (r < 2) {
      job.Init(p, 77, r, 2, kWorld);
      job.Collective(p, 77, r, 2, Op{ring::ApiFn::kBroadcast, 1, 2, "", ring::kUnset, 0});
    }
  }
  job.Init(job.AddRank(4), 555, 0, 1);  // a communicator without collectives
  OpTable table;
  absl::StatusOr<Baseline> baseline = MakeBaseline(ExtractSchedule(model, &table));
  ASSERT_TRUE(baseline.ok()) << baseline.status();
  const std::string text = FormatBaseline(*baseline, table);
  EXPECT_THAT(text, HasSubstr("  ranks 0,2\n"));
  EXPECT_THAT(text, HasSubstr("  ranks 1,3\n"));
  // Rank 4's communicator is its first one: it sorts before the world's child.
  EXPECT_THAT(text, HasSubstr("comm 2 size 1\n  ranks 0\n"));
  EXPECT_THAT(text, HasSubstr("comm 3 size 2 parent 1\n  ranks 0-1\n    broadcast 1 int32 root=0 -\n"));
  OpTable other_table;
  absl::StatusOr<Baseline> parsed = ParseBaseline(text, &other_table);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(FormatBaseline(*parsed, other_table), text);
  ASSERT_EQ(parsed->comms.size(), 3u);
  EXPECT_EQ(parsed->comms[2].parent, 1);
  // The parsed ops remember their lines.
  const Segment& first = parsed->comms[0].sections[0].segments[0];
  ASSERT_FALSE(first.lines.empty());
  EXPECT_EQ(text.substr(0, text.find('\n')).substr(0, 1), "#");
}

struct BadBaseline {
  std::string text;
  std::string message;
};

TEST(BaselineTest, RejectsMalformedFilesNamingTheLine) {
  const std::string head = "collwatch-baseline 1\n";
  const std::string comm = "comm 1 size 2\n  ranks 0-1\n";
  const BadBaseline cases[] = {
      {"", "empty baseline"},
      {"# only a comment\n", "empty baseline"},
      {"hello\n", "baseline line 1: expected 'collwatch-baseline 1' first"},
      {"collwatch-baseline\n", "line 1: 'collwatch-baseline' needs one format version"},
      {"collwatch-baseline 2\n", "line 1: format version 2 is not one this collwatch reads"},
      {head, "line 1: no 'comm' section"},
      {head + "collwatch-baseline 1\n", "line 2: a second 'collwatch-baseline'"},
      {head + "comm 2 size 2\n  ranks 0-1\n", "line 2: communicators are numbered in order: expected comm 1"},
      {head + "comm 1 size 0\n", "line 2: size '0' is not a number"},
      {head + "comm 1 size 99999999\n", "line 2: size '99999999'"},
      {head + "comm 1 size 2 parent 1\n", "line 2: parent '1' must name an earlier communicator"},
      {head + "comm 1 size 2 mother 1\n", "line 2: expected 'comm INDEX size SIZE [parent INDEX]'"},
      {head + "comm 1 size 2\n", "line 2: communicator without a 'ranks' section"},
      {head + "ranks 0-1\n", "line 2: 'ranks' before any 'comm'"},
      {head + "comm 1 size 2\n  ranks 0-2\n", "line 3: rank 2 is not below the size 2"},
      {head + "comm 1 size 2\n  ranks 1-0\n", "line 3: bad rank list part '1-0'"},
      {head + "comm 1 size 4\n  ranks 0-3/0\n", "line 3: bad rank list part"},
      {head + "comm 1 size 2\n  ranks 0,0\n", "line 3: a rank appears twice"},
      {head + "comm 1 size 2\n  ranks 0,\n", "line 3: bad rank list part ''"},
      {head + "comm 1 size 4\n  ranks 0-1\n", "line 2: ranks 2-3 of comm 1 are in no 'ranks' section"},
      {head + "comm 1 size 2\n  ranks 0-1\n  ranks 1\n", "line 2: rank 1 is in two 'ranks' sections"},
      {head + "all-gather 1 float32 -\n", "line 2: a collective outside a 'ranks' section"},
      {head + comm + "    all-gather 1 float32\n", "line 4: all-gather needs COUNT DTYPE"},
      {head + comm + "    allgather 1 float32 -\n", "line 4: unknown collective 'allgather'"},
      {head + comm + "    step x N\n      all-gather 1 float32 -\n",
       "line 5: the file ends inside the step opened on line 4"},
      {head + comm + "    step x N\n    end\n", "line 5: the step opened on line 4 has no collectives"},
      {head + comm + "    end\n", "line 4: 'end' without a 'step x N'"},
      {head + comm + "    step x 0\n", "line 4: step count '0'"},
      {head + comm + "    step x many\n", "line 4: step count 'many'"},
      {head + comm + "    step N\n", "line 4: expected 'step x N'"},
      {head + comm + "    step x N\n    step x N\n", "line 5: a step inside the step opened on line 4"},
      {head + comm + "    step x N\n a 1 float32 -\n    end\n", "line 5: unknown collective 'a'"},
      {head + comm + "    step x N\n      all-gather 1 float32 -\n    end\n    step x 2\n",
       "line 7: a 'ranks' section has one step at most"},
      {head + comm + "    step x N\n      all-gather 1 float32 -\n  ranks 1\n", "line 6: 'ranks' inside the step"},
      {head + comm + "    step x N\n      all-gather 1 float32 -\ncomm 2 size 1\n", "line 6: 'comm' inside the step"},
      {head + "step x N\n", "line 2: 'step' outside a 'ranks' section"},
      {head + comm + "    end extra\n", "line 4: 'end' without"},
      {head + comm + "    all-gather 1 float32 \"unterminated\n", "line 4: a quoted region has no closing"},
      {head + std::string(70000, 'x') + "\n", "line 2: line longer than"},
  };
  for (const BadBaseline& bad : cases) {
    OpTable table;
    absl::StatusOr<Baseline> parsed = ParseBaseline(bad.text, &table);
    ASSERT_FALSE(parsed.ok()) << bad.text;
    EXPECT_THAT(std::string(parsed.status().message()), HasSubstr(bad.message)) << bad.text;
  }
}

TEST(BaselineTest, AcceptsCommentsBlankLinesCrlfAndAByteOrderMark) {
  const std::string text =
      "\xEF\xBB\xBF# a comment\r\n\r\ncollwatch-baseline 1   # version\r\n"
      "comm 1 size 4 # world\r\n  ranks 0-3/1\r\n"  // a stride of 1 is a plain range
      "    step x 3\r\n      all-gather 1 float32 \"a # not a comment\"  # a comment\r\n    end\r\n";
  OpTable table;
  absl::StatusOr<Baseline> parsed = ParseBaseline(text, &table);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  ASSERT_EQ(parsed->comms.size(), 1u);
  const BaselineSection& section = parsed->comms[0].sections[0];
  EXPECT_EQ(section.ranks, std::vector<int32_t>({0, 1, 2, 3}));
  ASSERT_EQ(section.segments.size(), 1u);
  EXPECT_EQ(section.segments[0].repeat, 3u);
  EXPECT_EQ(table.op(section.segments[0].ops[0]).region, "a # not a comment");
  EXPECT_EQ(section.segments[0].lines, std::vector<int>({7}));
}

TEST(BaselineTest, CapsRanksInAll) {
  std::string text = "collwatch-baseline 1\ncomm 1 size 4194304\n  ranks 0-4194303\n";
  OpTable table;
  EXPECT_TRUE(ParseBaseline(text, &table).ok());
  text += "comm 2 size 4194304\n";
  absl::StatusOr<Baseline> parsed = ParseBaseline(text, &table);
  ASSERT_FALSE(parsed.ok());
  EXPECT_THAT(std::string(parsed.status().message()), HasSubstr("line 4: the communicators' sizes add up to more"));
  absl::StatusOr<Baseline> too_large = ParseBaseline(std::string(kMaxBaselineBytes + 1, '#'), &table);
  ASSERT_FALSE(too_large.ok());
  EXPECT_THAT(std::string(too_large.status().message()), HasSubstr("larger than"));
}

// Random edits of a valid baseline: parsing never crashes; it succeeds or names a line.
TEST(BaselineTest, SurvivesRandomEdits) {
  OpTable table;
  const std::string valid = BaselineText(Repeat({Gather("warm \"up\"")}, Step(), 3, {Gather("tail")}), &table);
  std::mt19937 random(12345);
  const std::string alphabet = "\n \t\"\\#-,/x0123456789Nacdeglmnoprstz?=\xff";
  int accepted = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    std::string text = valid;
    const int edits = 1 + static_cast<int>(random() % 4);
    for (int e = 0; e < edits; ++e) {
      const size_t at = random() % (text.size() + 1);
      switch (random() % 4) {
        case 0: text.insert(at, 1, alphabet[random() % alphabet.size()]); break;
        case 1: if (at < text.size()) text.erase(at, 1 + random() % 8); break;
        case 2: if (at < text.size()) text[at] = alphabet[random() % alphabet.size()]; break;
        case 3: {  // repeat a chunk (lines, blocks)
          const size_t length = random() % 64;
          text.insert(at, text.substr(random() % text.size(), length));
          break;
        }
      }
    }
    OpTable trial_table;
    absl::StatusOr<Baseline> parsed = ParseBaseline(text, &trial_table);
    if (parsed.ok()) {
      ++accepted;
      // What parses also formats and parses again to the same file.
      const std::string again = FormatBaseline(*parsed, trial_table);
      OpTable again_table;
      absl::StatusOr<Baseline> reparsed = ParseBaseline(again, &again_table);
      ASSERT_TRUE(reparsed.ok()) << reparsed.status() << "\n" << again;
      EXPECT_EQ(FormatBaseline(*reparsed, again_table), again);
    } else {
      EXPECT_THAT(std::string(parsed.status().message()), HasSubstr("baseline")) << text;
    }
  }
  EXPECT_GT(accepted, 0);
  EXPECT_LT(accepted, 3000);
}

// ---- Check ------------------------------------------------------------------------------

CheckResult CheckRun(const std::string& baseline_text, const std::vector<Op>& ops, OpTable* table,
                     int world = 4) {
  absl::StatusOr<Baseline> baseline = ParseBaseline(baseline_text, table);
  EXPECT_TRUE(baseline.ok()) << baseline.status();
  JobModel model;
  BuildJob(&model, world, [&](int) { return ops; }, /*comm=*/0xbeef);
  return CheckSchedule(*baseline, ExtractSchedule(model, table), *table);
}

TEST(CheckTest, PassesForAnyNumberOfIdenticalSteps) {
  OpTable table;
  const std::string baseline = BaselineText(Repeat({Gather("warmup")}, Step(), 3, {Gather("tail")}), &table);
  for (int steps : {1, 2, 3, 10}) {
    const CheckResult result = CheckRun(baseline, Repeat({Gather("warmup")}, Step(), steps, {Gather("tail")}), &table);
    EXPECT_TRUE(result.passed) << steps << "\n" << CheckReportText(result, "b", "r");
    ASSERT_EQ(result.comms.size(), 1u);
    EXPECT_EQ(result.comms[0].name, "comm 1 (size 4)");
  }
  // No step at all, or half a step, is a change.
  EXPECT_FALSE(CheckRun(baseline, {Gather("warmup"), Gather("tail")}, &table).passed);
  std::vector<Op> half = Repeat({Gather("warmup")}, Step(), 2);
  half.resize(half.size() - 3);
  half.push_back(Gather("tail"));
  EXPECT_FALSE(CheckRun(baseline, half, &table).passed);
}

TEST(CheckTest, ACountChangeInTheSecondStepIsNamedWithContext) {
  OpTable table;
  const std::string baseline = BaselineText(Repeat({}, Step(), 3), &table);
  std::vector<Op> ops = Repeat({}, Step(), 3);
  ops[Step().size() + 2].count = 2048;  // step 2, third collective: fwd/block1 all-gather
  const CheckResult result = CheckRun(baseline, ops, &table);
  ASSERT_FALSE(result.passed);
  const std::string& message = result.comms[0].message;
  EXPECT_THAT(message, HasSubstr("@@ comm 1 (size 4), ranks 0-3: collective 11 differs (step 2, line 3 of 8; "
                                 "baseline line 13) @@\n"
                                 "  the baseline: all-gather 1024 float32 \"fwd/block1\"\n"
                                 "  the run:      all-gather 2048 float32 \"fwd/block1\"\n"
                                 "  all-gather changed: count 1024 -> 2048\n"
                                 "  ('-' the baseline, '+' the run)\n"));
  EXPECT_THAT(message, HasSubstr("  #10     all-gather 1024 float32 \"fwd/block0\"\n"
                                 "- #11     all-gather 1024 float32 \"fwd/block1\"\n"
                                 "+ #11     all-gather 2048 float32 \"fwd/block1\"\n"
                                 "  #12     all-gather 1024 float32 \"bwd/block1\"\n"));
  const std::string text = CheckReportText(result, "clean.baseline", "runs/new");
  EXPECT_THAT(text, HasSubstr("FAIL  comm 1 (size 4)\n"));
  EXPECT_THAT(text, HasSubstr("runs/new changes the collective schedule of clean.baseline in 1 of 1"));
}

TEST(CheckTest, DtypeAndInsertedCollectivesAreChanges) {
  OpTable table;
  const std::string baseline = BaselineText(Repeat({}, Step(), 3), &table);
  std::vector<Op> bf16 = Repeat({}, Step(), 3);
  bf16[4].dtype = testing::kBfloat16;
  const CheckResult dtype = CheckRun(baseline, bf16, &table);
  ASSERT_FALSE(dtype.passed);
  EXPECT_THAT(dtype.comms[0].message, HasSubstr("reduce-scatter changed: dtype float32 -> bfloat16"));

  // Per-head backward: the trunk's backward runs inside the first step's heads.
  std::vector<Op> inserted = Repeat({}, Step(), 3);
  inserted.insert(inserted.begin() + 3, {Gather("bwd/extra.block1"), ReduceScatter("bwd/extra.block1")});
  const CheckResult insert = CheckRun(baseline, inserted, &table);
  ASSERT_FALSE(insert.passed);
  EXPECT_THAT(insert.comms[0].message, HasSubstr("collective 4 differs"));
  EXPECT_THAT(insert.comms[0].message, HasSubstr("the run inserts 2 collectives here"));
  EXPECT_THAT(insert.comms[0].message, HasSubstr("+ #4      all-gather 1024 float32 \"bwd/extra.block1\"\n"
                                                 "+ #5      reduce-scatter 256 float32 avg \"bwd/extra.block1\"\n"
                                                 "  #6      all-gather 1024 float32 \"bwd/block1\"\n"));

  std::vector<Op> dropped = Repeat({}, Step(), 3);
  dropped.erase(dropped.begin() + 12);
  const CheckResult drop = CheckRun(baseline, dropped, &table);
  ASSERT_FALSE(drop.passed);
  EXPECT_THAT(drop.comms[0].message, HasSubstr("the run leaves out 1 collective here"));
}

TEST(CheckTest, RegionsCountUnlessIgnored) {
  OpTable table;
  const std::string baseline = BaselineText(Repeat({}, Step(), 3), &table);
  std::vector<Op> renamed = Repeat({}, Step(), 3);
  for (Op& op : renamed) op.region = "renamed/" + op.region;
  EXPECT_FALSE(CheckRun(baseline, renamed, &table).passed);
  OpTable no_regions(/*ignore_regions=*/true);
  EXPECT_TRUE(CheckRun(baseline, renamed, &no_regions).passed);
}

TEST(CheckTest, AStoppedRunAndExtraCollectivesAreChanges) {
  OpTable table;
  const std::string baseline = BaselineText(Repeat({}, Step(), 3, {Gather("tail")}), &table);
  std::vector<Op> stopped = Repeat({}, Step(), 2);
  stopped.resize(stopped.size() - 2);
  const CheckResult early = CheckRun(baseline, stopped, &table);
  ASSERT_FALSE(early.passed);
  EXPECT_THAT(early.comms[0].message, HasSubstr("(the run ends here)"));
  const CheckResult extra = CheckRun(baseline, Repeat({}, Step(), 3, {Gather("tail"), Gather("more")}), &table);
  ASSERT_FALSE(extra.passed);
  EXPECT_THAT(extra.comms[0].message, HasSubstr("collective 26 differs (past the baseline's end) @@\n"
                                                "  the baseline: (nothing more)\n"
                                                "  the run:      all-gather 1024 float32 \"more\"\n"
                                                "  the run goes on past the end of the baseline\n"));
  EXPECT_THAT(extra.comms[0].message,
              HasSubstr("+ #26     all-gather 1024 float32 \"more\"\n  (the baseline ends here)"));
}

TEST(CheckTest, APinnedStepCountIsKept) {
  OpTable table;
  const std::string text = "collwatch-baseline 1\ncomm 1 size 4\n  ranks 0-3\n    step x 2\n"
                           "      all-gather 1 float32 -\n      all-reduce 1 float32 sum -\n    end\n";
  const std::vector<Op> step = {Op{ring::ApiFn::kAllGather, 1, 7, ""}, Op{ring::ApiFn::kAllReduce, 1, 7, "", 0}};
  EXPECT_TRUE(CheckRun(text, Repeat({}, step, 2), &table).passed);
  EXPECT_FALSE(CheckRun(text, Repeat({}, step, 3), &table).passed);
  // A huge pinned count costs nothing: nothing is expanded up front.
  const std::string huge = "collwatch-baseline 1\ncomm 1 size 4\n  ranks 0-3\n    step x 1000000000000\n"
                           "      all-gather 1 float32 -\n    end\n";
  const CheckResult result = CheckRun(huge, Repeat({}, {step[0]}, 3), &table);
  ASSERT_FALSE(result.passed);
  EXPECT_THAT(result.comms[0].message, HasSubstr("the run stops here"));
}

TEST(CheckTest, RankClassesAreCheckedOneByOne) {
  OpTable table;
  // The baseline's odd ranks run one more collective.
  const std::string text = "collwatch-baseline 1\ncomm 1 size 4\n  ranks 0,2\n    all-gather 1 float32 -\n"
                           "  ranks 1,3\n    all-gather 1 float32 -\n    all-gather 2 float32 -\n";
  absl::StatusOr<Baseline> baseline = ParseBaseline(text, &table);
  ASSERT_TRUE(baseline.ok()) << baseline.status();
  JobModel model;
  BuildJob(&model, 4, [](int r) {
    std::vector<Op> ops = {Op{ring::ApiFn::kAllGather, 1, 7, ""}};
    if (r == 1 || r == 3 || r == 2) ops.push_back(Op{ring::ApiFn::kAllGather, 2, 7, ""});
    return ops;
  });
  const CheckResult result = CheckSchedule(*baseline, ExtractSchedule(model, &table), table);
  ASSERT_FALSE(result.passed);
  EXPECT_THAT(result.comms[0].message, HasSubstr("ranks 2: collective 2 differs"));
  EXPECT_THAT(result.comms[0].message, Not(HasSubstr("ranks 1,3")));
}

TEST(CheckTest, MissingAndExtraCommunicatorsFail) {
  OpTable table;
  const std::string text = "collwatch-baseline 1\ncomm 1 size 4\n  ranks 0-3\n    all-gather 1 float32 -\n"
                           "comm 2 size 2 parent 1\n  ranks 0-1\n";
  absl::StatusOr<Baseline> baseline = ParseBaseline(text, &table);
  ASSERT_TRUE(baseline.ok()) << baseline.status();
  JobModel model;
  TestJob job(&model);
  for (int r = 0; r < 4; ++r) {
    const ProcessId p = job.AddRank(r);
    job.Init(p, kWorld, r, 4);
    job.Collective(p, kWorld, r, 4, Op{ring::ApiFn::kAllGather, 1, 7, ""});
    job.Init(p, 0x5151, r, 4, kWorld);  // a child of size 4, not 2
  }
  const CheckResult result = CheckSchedule(*baseline, ExtractSchedule(model, &table), table);
  ASSERT_FALSE(result.passed);
  ASSERT_EQ(result.comms.size(), 3u);
  EXPECT_TRUE(result.comms[0].passed);
  EXPECT_FALSE(result.comms[1].passed);
  EXPECT_THAT(result.comms[1].message, HasSubstr("comm 2 (size 2, split from comm 1): not in the run"));
  EXPECT_THAT(result.comms[2].message,
              HasSubstr("comm 2 (size 4, split from comm 1): a communicator the baseline does not have"));
}

TEST(CheckTest, JunitHasATestcasePerCommunicatorAndTheDiffAsFailure) {
  OpTable table;
  const std::string baseline = BaselineText(Repeat({}, {Gather("a<&>\"'\x01")}, 3), &table);
  CheckResult result = CheckRun(baseline, Repeat({}, {Gather("a<&>\"'\x01", 8)}, 3), &table);
  ASSERT_FALSE(result.passed);
  CommCheck extra;
  extra.name = "comm 2 (size 2)";
  extra.passed = true;
  result.comms.push_back(extra);
  const std::string xml = CheckJunitXml(result, "collwatch check clean.baseline");
  EXPECT_THAT(xml, HasSubstr("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"));
  EXPECT_THAT(xml, HasSubstr("<testsuite name=\"collwatch check clean.baseline\" tests=\"2\" failures=\"1\""));
  EXPECT_THAT(xml, HasSubstr("<testcase classname=\"collwatch.schedule\" name=\"comm 1 (size 4)\">"));
  EXPECT_THAT(xml, HasSubstr("<failure type=\"ScheduleChanged\" message=\"@@ comm 1 (size 4), ranks 0-3"));
  EXPECT_THAT(xml, HasSubstr("&quot;a&lt;&amp;&gt;\\&quot;&apos;\\x01&quot;"));  // the region as the line quotes it
  EXPECT_THAT(xml, HasSubstr("<testcase classname=\"collwatch.schedule\" name=\"comm 2 (size 2)\"/>"));
  EXPECT_EQ(xml.find('\x01'), std::string::npos);
}

// ---- Diff -------------------------------------------------------------------------------

TEST(DiffTest, IdenticalRunsAndTheFirstDifferenceWithContext) {
  OpTable table;
  JobModel a, b, c;
  BuildJob(&a, 4, [](int) { return Repeat({}, Step(), 3); }, 0x1);
  BuildJob(&b, 4, [](int) { return Repeat({}, Step(), 3); }, 0x2);
  std::vector<Op> changed = Repeat({}, Step(), 3);
  changed.insert(changed.begin() + 11, Gather("bwd/extra"));
  BuildJob(&c, 4, [&](int) { return changed; }, 0x3);
  const JobSchedule sa = ExtractSchedule(a, &table), sb = ExtractSchedule(b, &table), sc = ExtractSchedule(c, &table);
  const ScheduleDiff same = DiffSchedules(sa, sb, table, "runs/a", "runs/b");
  EXPECT_TRUE(same.identical) << same.text;
  EXPECT_THAT(same.text, HasSubstr("identical: 1 communicator, 96 collective calls"));
  const ScheduleDiff diff = DiffSchedules(sa, sc, table, "runs/a", "runs/c");
  EXPECT_FALSE(diff.identical);
  EXPECT_THAT(diff.text, HasSubstr("--- A: runs/a\n+++ B: runs/c\n"));
  EXPECT_THAT(diff.text, HasSubstr("@@ comm 1 (size 4), ranks 0-3: first difference at collective 12 (A: step 2 "
                                   "of 3, line 4 of 8) @@\n"
                                   "  A: all-gather 1024 float32 \"bwd/block1\"\n"
                                   "  B: all-gather 1024 float32 \"bwd/extra\"\n"
                                   "  B inserts 1 collective here\n"
                                   "  ('-' A, '+' B)\n"
                                   "  #9      all-gather 512 float32 \"fwd/embed\"\n"
                                   "  #10     all-gather 1024 float32 \"fwd/block0\"\n"
                                   "  #11     all-gather 1024 float32 \"fwd/block1\"\n"
                                   "+ #12     all-gather 1024 float32 \"bwd/extra\"\n"
                                   "  #13     all-gather 1024 float32 \"bwd/block1\"\n"));
}

TEST(DiffTest, RankClassesAndCommunicatorsOnOneSideOnly) {
  OpTable table;
  JobModel a, b;
  BuildJob(&a, 4, [](int) { return Repeat({}, Step(), 2); });
  // In b the odd ranks skip the last reduce-scatter of step 1, and a child exists.
  TestJob job(&b);
  for (int r = 0; r < 4; ++r) {
    const ProcessId p = job.AddRank(r);
    job.Init(p, kWorld, r, 4);
    std::vector<Op> ops = Repeat({}, Step(), 2);
    if (r % 2 == 1) ops.erase(ops.begin() + 7);
    for (const Op& op : ops) job.Collective(p, kWorld, r, 4, op);
    if (r < 2) job.Init(p, 0x77, r, 2, kWorld);
  }
  const ScheduleDiff diff = DiffSchedules(ExtractSchedule(a, &table), ExtractSchedule(b, &table), table, "A", "B");
  EXPECT_FALSE(diff.identical);
  EXPECT_THAT(diff.text, HasSubstr("# comm 1 (size 4): ranks that issued different schedules within a run: A: 0-3; "
                                   "B: 0,2 | 1,3\n"));
  EXPECT_THAT(diff.text, HasSubstr("@@ comm 1 (size 4), ranks 1,3: first difference at collective 8"));
  EXPECT_THAT(diff.text, HasSubstr("B leaves out 1 collective"));
  EXPECT_THAT(diff.text, Not(HasSubstr("ranks 0,2:")));
  EXPECT_THAT(diff.text, HasSubstr("@@ comm 2 (size 2, split from comm 1): only in B @@"));
}

}  // namespace
}  // namespace collwatch::analyzer
