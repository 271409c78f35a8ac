// Finding kinds to and from their names (report.json, baselines, the command line) and
// the short communicator text every finding's words use. Threading: single-threaded.
#include "analyzer/finding.h"

#include <set>
#include <string>

#include "gtest/gtest.h"

namespace collwatch::analyzer::finding_test {
namespace {

constexpr FindingKind kEveryKind[] = {
    FindingKind::kPathDivergence, FindingKind::kSkippedReduceScatter, FindingKind::kSignatureMismatch,
    FindingKind::kOpMismatch,     FindingKind::kNotJoined,            FindingKind::kTransportStall,
    FindingKind::kCommInitStall,  FindingKind::kRankLost,             FindingKind::kRankNotRunning,
};

TEST(FindingKindNameTest, EveryKindSurvivesTheRoundTripThroughItsName) {
  std::set<std::string> names;
  for (const FindingKind kind : kEveryKind) {
    const std::string name(FindingKindName(kind));
    EXPECT_NE(name, "UNKNOWN") << static_cast<int>(kind);
    EXPECT_TRUE(names.insert(name).second) << "two kinds share the name " << name;
    EXPECT_EQ(ParseFindingKind(name), kind) << name;
  }
  EXPECT_EQ(FindingKindName(FindingKind::kPathDivergence), "PATH_DIVERGENCE");
  EXPECT_EQ(FindingKindName(FindingKind::kRankLost), "RANK_LOST");
}

TEST(FindingKindNameTest, OtherNamesAndValuesAreNoKind) {
  EXPECT_EQ(ParseFindingKind(""), std::nullopt);
  EXPECT_EQ(ParseFindingKind("UNKNOWN"), std::nullopt);
  EXPECT_EQ(ParseFindingKind("path_divergence"), std::nullopt) << "names are exact";
  EXPECT_EQ(ParseFindingKind("PATH_DIVERGENCE "), std::nullopt);
  EXPECT_EQ(FindingKindName(static_cast<FindingKind>(0)), "UNKNOWN");
  EXPECT_EQ(FindingKindName(static_cast<FindingKind>(99)), "UNKNOWN");
}

TEST(CommTextTest, NamesACommunicatorByItsFirstEightHexDigits) {
  EXPECT_EQ(CommText(0x3f2a9c0100000001ull), "comm 3f2a9c01");
  EXPECT_EQ(CommText(0x00000abcffffffffull), "comm 00000abc");
  EXPECT_EQ(CommText(0), "comm 00000000");
}

}  // namespace
}  // namespace collwatch::analyzer::finding_test
