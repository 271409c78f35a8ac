// The ring <-> wire conversion: what the agent sends always decodes at the collector.
#include "store/event_codec.h"

#include "gtest/gtest.h"

namespace collwatch {
namespace {

using namespace std::string_literals;

// The ring fuzzer's first find: an NVTX name (or job id) that is not UTF-8 made the
// agent send a batch the collector could not parse, every time it reconnected.
TEST(WireTextTest, AnyBytesBecomeAStringTheCollectorParses) {
  const std::string names[] = {
      "fwd/\xff\xfe"s,
      "cut mid-sequence \xe2\x82"s,  // a truncated euro sign
      "overlong \xc0\xaf and surrogate \xed\xa0\x80"s,
      "above U+10FFFF \xf4\x90\x80\x80"s,
      "\0 inside"s,
  };
  for (const std::string& name : names) {
    v1::StreamEventsRequest batch;
    v1::RegionName* region = batch.add_regions();
    region->set_id(1);
    region->set_name(WireText(name));
    v1::StreamEventsRequest received;
    EXPECT_TRUE(received.ParseFromString(batch.SerializeAsString())) << name;
  }
}

TEST(WireTextTest, KeepsValidUtf8AndReplacesEachBadByte) {
  EXPECT_EQ(WireText("fwd/vision.block0"), "fwd/vision.block0");
  EXPECT_EQ(WireText("\xe2\x82\xac \xf0\x9f\x98\x80 \xc3\xa9"), "\xe2\x82\xac \xf0\x9f\x98\x80 \xc3\xa9");
  EXPECT_EQ(WireText("a\xff" "b"), "a\xef\xbf\xbd" "b");
  EXPECT_EQ(WireText("\xe2\x82"), "\xef\xbf\xbd\xef\xbf\xbd");
}

}  // namespace
}  // namespace collwatch
