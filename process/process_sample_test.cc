// Process states to and from their names (run.json `rank_processes`, reports): every state
// survives the round trip, and no other text is a state. SampleProcess on real processes
// is tested in analyzer/liveness_test.cc. Threading: single-threaded.
#include "process/process_sample.h"

#include <set>
#include <string>

#include "gtest/gtest.h"

namespace collwatch {
namespace {

TEST(ProcessStateNameTest, EveryStateSurvivesTheRoundTripThroughItsName) {
  std::set<std::string> names;
  for (const ProcessState state : {ProcessState::kUnknown, ProcessState::kRunning, ProcessState::kSleeping,
                                   ProcessState::kDiskWait, ProcessState::kStopped, ProcessState::kZombie,
                                   ProcessState::kGone}) {
    const std::string name(ProcessStateName(state));
    EXPECT_TRUE(names.insert(name).second) << "two states share the name " << name;
    EXPECT_EQ(ParseProcessState(name), state) << name;
  }
  EXPECT_EQ(ProcessStateName(ProcessState::kDiskWait), "I/O");
}

TEST(ProcessStateNameTest, OtherTextIsNoState) {
  EXPECT_EQ(ParseProcessState(""), std::nullopt);
  EXPECT_EQ(ParseProcessState("Running"), std::nullopt) << "names are exact";
  EXPECT_EQ(ParseProcessState("disk wait"), std::nullopt);
  EXPECT_EQ(ProcessStateName(static_cast<ProcessState>(99)), "unknown");
}

}  // namespace
}  // namespace collwatch
