// The preload's settings: ring sizes within their bounds, and a bad value kept at its
// default with one line on stderr saying so (the job runs either way).
#include "interposer/config.h"

#include <stdlib.h>

#include <string>

#include "gtest/gtest.h"

namespace collwatch {
namespace {

TEST(LoadConfig, RingSizesWithinTheirBoundsAreTaken) {
  setenv("COLLWATCH_RING_RECORDS", "100", 1);
  setenv("COLLWATCH_RING_LANES", "8", 1);
  const Config config = LoadConfig();
  unsetenv("COLLWATCH_RING_RECORDS");
  unsetenv("COLLWATCH_RING_LANES");
  EXPECT_EQ(config.ring_records, 128u) << "rounded up to a power of two";
  EXPECT_EQ(config.ring_lanes, 8u);
}

TEST(LoadConfig, ABadRingSizeKeepsTheDefaultAndSaysSo) {
  const Config defaults;
  for (const char* records : {"abc", "-64", "63", "2097152", "12x"}) {
    setenv("COLLWATCH_RING_RECORDS", records, 1);
    setenv("COLLWATCH_RING_LANES", "1", 1);
    ::testing::internal::CaptureStderr();
    const Config config = LoadConfig();
    const std::string said = ::testing::internal::GetCapturedStderr();
    EXPECT_EQ(config.ring_records, defaults.ring_records) << records;
    EXPECT_EQ(config.ring_lanes, defaults.ring_lanes);
    EXPECT_NE(said.find(std::string("collwatch: COLLWATCH_RING_RECORDS=") + records +
                        " is not a whole number from 64 to 1048576; using 32768\n"),
              std::string::npos)
        << said;
    EXPECT_NE(said.find("collwatch: COLLWATCH_RING_LANES=1 is not a whole number from 2 to 64; using 4\n"),
              std::string::npos)
        << said;
  }
  unsetenv("COLLWATCH_RING_RECORDS");
  unsetenv("COLLWATCH_RING_LANES");
}

// COLLWATCH_CLOCK=bogus ran on the TSC unsaid; `collwatch env` showed it as in force.
TEST(LoadConfig, AWordNoReaderTakesKeepsTheDefaultAndSaysSo) {
  setenv("COLLWATCH_CLOCK", "bogus", 1);
  setenv("COLLWATCH_COMPLETION", "never", 1);
  ::testing::internal::CaptureStderr();
  const Config config = LoadConfig();
  const std::string said = ::testing::internal::GetCapturedStderr();
  unsetenv("COLLWATCH_CLOCK");
  unsetenv("COLLWATCH_COMPLETION");
  EXPECT_TRUE(config.tsc_clock);
  EXPECT_TRUE(config.completion);
  EXPECT_NE(said.find("collwatch: COLLWATCH_CLOCK=bogus is not one of auto, monotonic; using auto\n"), std::string::npos)
      << said;
  EXPECT_NE(said.find("collwatch: COLLWATCH_COMPLETION=never is not one of auto, off; using auto\n"),
            std::string::npos)
      << said;
  setenv("COLLWATCH_CLOCK", "monotonic", 1);
  EXPECT_FALSE(LoadConfig().tsc_clock);
  unsetenv("COLLWATCH_CLOCK");
}

}  // namespace
}  // namespace collwatch
