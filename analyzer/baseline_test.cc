// The baseline file: one file for any number of steps, format/parse round trip, malformed
// and hostile input.
#include "analyzer/baseline.h"

#include <random>

#include "analyzer/schedule_test_job.h"
#include "analyzer/test_job.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace collwatch::analyzer::baseline_test {
namespace {

using testing::BaselineText;
using testing::Gather;
using testing::kWorld;
using testing::Op;
using testing::Repeat;
using testing::Step;
using testing::TestJob;
using ::testing::HasSubstr;
using ::testing::Not;

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
  EXPECT_FALSE(parsed->code_lines);
  EXPECT_THAT(text, Not(HasSubstr("code-lines")));

  // A baseline made with --code-lines says so, and reads back saying so.
  baseline->code_lines = true;
  const std::string with_lines = FormatBaseline(*baseline, table);
  EXPECT_THAT(with_lines, HasSubstr("\ncollwatch-baseline 1\n# Regions taken from Python call paths name their "
                                    "lines (collwatch baseline --code-lines).\ncode-lines\n"));
  OpTable lines_table;
  absl::StatusOr<Baseline> parsed_with_lines = ParseBaseline(with_lines, &lines_table);
  ASSERT_TRUE(parsed_with_lines.ok()) << parsed_with_lines.status();
  EXPECT_TRUE(parsed_with_lines->code_lines);
  EXPECT_EQ(FormatBaseline(*parsed_with_lines, lines_table), with_lines);
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
      {head + comm + "code-lines\n", "line 4: 'code-lines' belongs before the first 'comm'"},
      {head + "code-lines yes\n", "line 2: 'code-lines' takes nothing after it"},
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

}  // namespace
}  // namespace collwatch::analyzer::baseline_test
