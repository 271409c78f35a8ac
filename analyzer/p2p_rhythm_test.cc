// RhythmOf: the repeated exchange of a rank with one peer, where it broke, and what came
// after. Threading: single-threaded.
#include "analyzer/p2p_rhythm.h"

#include <optional>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace collwatch::analyzer::p2p_rhythm_test {
namespace {

// "SSRR": S a send, R a receive.
std::vector<bool> Calls(const std::string& text) {
  std::vector<bool> calls;
  for (char c : text) calls.push_back(c == 'S');
  return calls;
}

// A GPipe stage of 4 microbatches: 4 sends then 4 receives each step; runs of one
// direction are not a rhythm of their own.
TEST(P2pRhythmTest, AStepOfFourMicrobatchesRepeats) {
  const P2pRhythm rhythm = RhythmOf(Calls("SSSSRRRR" "SSSSRRRR" "SSSSRRR"));
  EXPECT_EQ(rhythm.period_calls, 8u);
  EXPECT_EQ(RunsText(rhythm.period), "4 sends, 4 receives");
  EXPECT_EQ(rhythm.repetitions, 2u);
  EXPECT_FALSE(rhythm.broke);
  EXPECT_EQ(RunsText(rhythm.after), "4 sends, 3 receives");
}

// The last stage ran 3 microbatches in its third step: the rhythm broke at its 4th
// receive of that step.
TEST(P2pRhythmTest, AShorterStepBreaksTheRhythm) {
  const P2pRhythm rhythm = RhythmOf(Calls("RRRRSSSS" "RRRRSSSS" "RRRSSS" "RR"));
  EXPECT_EQ(RunsText(rhythm.period), "4 receives, 4 sends");
  EXPECT_EQ(rhythm.repetitions, 2u);
  EXPECT_TRUE(rhythm.broke);
  EXPECT_EQ(rhythm.broke_at, 19u);
  EXPECT_EQ(RunsText(rhythm.after), "3 receives, 3 sends, 2 receives");
}

// 1F1B's steady state alternates: a period of one send and one receive.
TEST(P2pRhythmTest, AlternatingCallsHaveAShortRhythm) {
  const P2pRhythm rhythm = RhythmOf(Calls("SRSRSRS"));
  EXPECT_EQ(rhythm.period_calls, 2u);
  EXPECT_EQ(RunsText(rhythm.period), "1 send, 1 receive");
  EXPECT_EQ(rhythm.repetitions, 3u);
  EXPECT_EQ(RunsText(rhythm.after), "1 send");
}

// Nothing repeated twice, or one direction only: no rhythm to read.
TEST(P2pRhythmTest, NoRhythmWithoutTwoRepetitionsOfBothDirections) {
  EXPECT_TRUE(RhythmOf(Calls("SSSSRRRRSSS")).period.empty());
  EXPECT_TRUE(RhythmOf(Calls("SSSSSSSS")).period.empty());
  EXPECT_TRUE(RhythmOf({}).period.empty());
}

// A schedule's first step sets its stage up (a handshake, the shapes) before the rhythm:
// the rhythm starts after it, and a call's place counts from there.
TEST(P2pRhythmTest, ARhythmStartsAfterASetUp) {
  const P2pRhythm rhythm = RhythmOf(Calls("SRSS" "SSSSRRRR" "SSSSRRRR" "S"));
  EXPECT_EQ(rhythm.offset, 4u);
  EXPECT_EQ(RunsText(rhythm.period), "4 sends, 4 receives");
  EXPECT_EQ(rhythm.repetitions, 2u);
  const std::optional<RhythmPlace> last = PlaceInRhythm(rhythm, 20);
  ASSERT_TRUE(last.has_value());
  EXPECT_EQ(last->repetition, 2u);
  EXPECT_EQ(last->nth, 1u);
  EXPECT_EQ(last->of, 4u);
  const std::optional<RhythmPlace> receive = PlaceInRhythm(rhythm, 14);
  ASSERT_TRUE(receive.has_value());
  EXPECT_EQ(receive->repetition, 1u);
  EXPECT_EQ(receive->nth, 3u) << "the third receive of the second repetition";
  EXPECT_FALSE(PlaceInRhythm(rhythm, 2).has_value()) << "in the set-up";
}

// Rank 0 of a real ScheduleInterleaved1F1B job on 2 x H200 (two stages a rank, 4
// microbatches; tests/data/gpu): 12 calls of stage set-up, then 12 sends and 12 receives a
// step. Shorter patterns repeat twice near the start (the set-up's "RRSS" after "SRRSS" ...),
// but only the step holds to the end: the rhythm is the step, and send #44 (call 84) opens
// the fourth.
TEST(P2pRhythmTest, TheRhythmThatHoldsLongestIsTheStepNotAnEarlyEcho) {
  const std::string step = "SRSRSSRSSRSRSRSRRSRSRSRR";
  const P2pRhythm rhythm = RhythmOf(Calls("SRRSSRSSRRSS" + step + step + step + step));
  EXPECT_EQ(rhythm.offset, 12u);
  EXPECT_EQ(rhythm.period_calls, 24u);
  EXPECT_EQ(rhythm.repetitions, 4u);
  EXPECT_FALSE(rhythm.broke);
  const std::optional<RhythmPlace> send = PlaceInRhythm(rhythm, 84);
  ASSERT_TRUE(send.has_value());
  EXPECT_EQ(send->repetition, 3u);
  EXPECT_EQ(send->nth, 1u);
  EXPECT_EQ(send->of, 12u);
}

// A long history of a two-call rhythm: every multiple of the period holds to the end, and
// the search stays bounded (a budget of comparisons) while finding the rhythm and its break.
TEST(P2pRhythmTest, ALongHistoryIsSearchedWithinItsBudget) {
  std::string calls;
  for (int i = 0; i < 300000; ++i) calls += "SR";
  calls += "RR";
  const P2pRhythm rhythm = RhythmOf(Calls(calls));
  EXPECT_EQ(rhythm.offset, 0u);
  EXPECT_EQ(rhythm.period_calls, 2u);
  EXPECT_EQ(rhythm.repetitions, 300000u);
  EXPECT_TRUE(rhythm.broke);
  EXPECT_EQ(rhythm.broke_at, 600000u);
}

// 1F1B's repetition interleaves the directions: a call's number counts its direction only.
TEST(P2pRhythmTest, APlaceCountsItsDirectionAcrossRuns) {
  const P2pRhythm rhythm = RhythmOf(Calls("SSRSRSRR" "SSRSRSRR"));
  EXPECT_EQ(RunsText(rhythm.period), "2 sends, 1 receive, 1 send, 1 receive, 1 send, 2 receives");
  const std::optional<RhythmPlace> place = PlaceInRhythm(rhythm, 8 + 5);
  ASSERT_TRUE(place.has_value());
  EXPECT_EQ(place->nth, 4u);
  EXPECT_EQ(place->of, 4u);
  const P2pRhythm broken = RhythmOf(Calls("SSRR" "SSRR" "SRR"));
  EXPECT_TRUE(broken.broke);
  EXPECT_FALSE(PlaceInRhythm(broken, 9).has_value()) << "past the break";
}

}  // namespace
}  // namespace collwatch::analyzer::p2p_rhythm_test
