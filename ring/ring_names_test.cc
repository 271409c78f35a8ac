// The name table reads back what it writes: every value of every enumeration has one
// spelling, that spelling parses to the value, and foreign words parse to nothing.
#include "ring/ring_names.h"

#include <set>
#include <string>

#include "gtest/gtest.h"

namespace collwatch {
namespace {

using ring::ApiFn;

TEST(RingNames, EveryEntryPointNameReadsBack) {
  std::set<std::string> seen;
  int named = 0;
  for (int value = 0; value < 1 << 16; ++value) {
    const auto fn = static_cast<ApiFn>(value);
    const std::string name(OpName(fn));
    if (name == "unknown") continue;
    ++named;
    EXPECT_TRUE(seen.insert(name).second) << name << " names two entry points";
    ASSERT_TRUE(OpByName(name).has_value()) << name;
    EXPECT_EQ(*OpByName(name), fn) << name;
  }
  EXPECT_EQ(named, 29);  // kNone and the 28 entry points of ring_format.h
  EXPECT_EQ(OpName(ApiFn::kAllReduce), "all-reduce");
  EXPECT_EQ(OpName(ApiFn::kReduceScatter), "reduce-scatter");
  EXPECT_EQ(OpName(ApiFn::kCommInitRankScalable), "comm-init-rank-scalable");
  EXPECT_FALSE(OpByName("AllReduce").has_value());
  EXPECT_FALSE(OpByName("unknown").has_value());
  EXPECT_FALSE(OpByName("").has_value());
}

TEST(RingNames, EveryDtypeHasOneSpellingThatReadsBack) {
  std::set<std::string> seen;
  for (int value = 0; value < 256; ++value) {
    const auto dtype = static_cast<uint8_t>(value);
    const std::string name = DtypeName(dtype);
    EXPECT_TRUE(seen.insert(name).second) << name;
    ASSERT_TRUE(DtypeByName(name).has_value()) << name;
    EXPECT_EQ(*DtypeByName(name), dtype) << name;
  }
  EXPECT_EQ(DtypeName(7), "float32");
  EXPECT_EQ(DtypeName(9), "bfloat16");
  EXPECT_EQ(DtypeName(ring::kNoDtype), "none");
  EXPECT_EQ(DtypeName(12), "dtype=12");
  EXPECT_EQ(DtypeBytes(9), 2);
  EXPECT_EQ(DtypeBytes(12), 0);
  EXPECT_EQ(DtypeBytes(ring::kNoDtype), 0);
  // A value with a name of its own has no second spelling; nothing else parses.
  EXPECT_FALSE(DtypeByName("dtype=7").has_value());
  EXPECT_FALSE(DtypeByName("dtype=255").has_value());
  EXPECT_FALSE(DtypeByName("dtype=-1").has_value());
  EXPECT_FALSE(DtypeByName("dtype=").has_value());
  EXPECT_FALSE(DtypeByName("dtype=12x").has_value());
  EXPECT_FALSE(DtypeByName("float31").has_value());
}

TEST(RingNames, EveryReduceOpHasOneSpellingThatReadsBack) {
  for (const int32_t redop : {ring::kUnset, 0, 1, 2, 3, 4, 5, 7, 1000, -5, INT32_MAX, INT32_MIN}) {
    const std::string name = RedOpName(redop);
    ASSERT_TRUE(RedOpByName(name).has_value()) << name;
    EXPECT_EQ(*RedOpByName(name), redop) << name;
  }
  EXPECT_EQ(RedOpName(0), "sum");
  EXPECT_EQ(RedOpName(4), "avg");
  EXPECT_EQ(RedOpName(ring::kUnset), "none");
  EXPECT_EQ(RedOpName(5), "redop=5");  // made by ncclRedOpCreatePreMulSum
  EXPECT_FALSE(RedOpByName("redop=0").has_value());
  EXPECT_FALSE(RedOpByName("redop=-1").has_value());
  EXPECT_FALSE(RedOpByName("redop=99999999999").has_value());
  EXPECT_FALSE(RedOpByName("custom").has_value());
  EXPECT_FALSE(RedOpByName("premulsum#5").has_value());
}

TEST(RingNames, FlagsAreNamedInBitOrder) {
  EXPECT_EQ(FlagNames(0), "");
  EXPECT_EQ(FlagNames(ring::kFlagCaptured | ring::kFlagNoCompletion), "captured|no_completion");
}

}  // namespace
}  // namespace collwatch
