// JSON ids: written as 16 hex digits, read back from that form and from the bare numbers
// of files written before the schemas.
#include "files/json_contract.h"

#include "gtest/gtest.h"

namespace collwatch {
namespace {

TEST(JsonContractTest, IdsAboveTwoToThe53RoundTripAsStrings) {
  const uint64_t id = 0x3f2a9c01deadbeefULL;  // past 2^53: a double would round it
  const nlohmann::json written = JsonId(id);
  ASSERT_TRUE(written.is_string());
  EXPECT_EQ(written, "3f2a9c01deadbeef");
  EXPECT_EQ(JsonIdValue(nlohmann::json::parse(written.dump())), id);
  EXPECT_EQ(JsonId(1), "0000000000000001");
}

TEST(JsonContractTest, OldNumericIdsAreStillRead) {
  EXPECT_EQ(JsonIdValue(nlohmann::json::parse("12345")), 12345u);
  EXPECT_EQ(JsonIdValue(nlohmann::json::parse("18446744073709551615")), UINT64_MAX);
}

TEST(JsonContractTest, AnythingElseIsNoId) {
  EXPECT_EQ(JsonIdValue(nlohmann::json("zz")), std::nullopt);
  EXPECT_EQ(JsonIdValue(nlohmann::json("")), std::nullopt);
  EXPECT_EQ(JsonIdValue(nlohmann::json("10000000000000000")), std::nullopt);  // 17 digits
  EXPECT_EQ(JsonIdValue(nlohmann::json(-1)), std::nullopt);
  EXPECT_EQ(JsonIdValue(nlohmann::json(1.5)), std::nullopt);
  EXPECT_EQ(JsonIdValue(nlohmann::json(nullptr)), std::nullopt);
}

}  // namespace
}  // namespace collwatch
