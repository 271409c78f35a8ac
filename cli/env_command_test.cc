// The settings table: docs/environment.md carries it exactly as `collwatch env --markdown`
// prints it (COLLWATCH_UPDATE_GOLDEN=1 rewrites the docs' table), and `collwatch env`
// shows the values in force.
#include "cli/env_command.h"

#include <stdlib.h>
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <sstream>
#include <string>

#include "gtest/gtest.h"
#include "ring/settings.h"

namespace collwatch::env_command_test {
namespace {

constexpr char kBegin[] = "<!-- settings table: collwatch env --markdown -->\n";
constexpr char kEnd[] = "<!-- end of settings table -->\n";

TEST(EnvCommand, EnvironmentDocCarriesTheTable) {
  std::ifstream in(COLLWATCH_ENVIRONMENT_DOC);
  ASSERT_TRUE(in.good()) << COLLWATCH_ENVIRONMENT_DOC;
  std::stringstream buffer;
  buffer << in.rdbuf();
  std::string doc = buffer.str();
  const size_t begin = doc.find(kBegin);
  const size_t end = doc.find(kEnd);
  ASSERT_NE(begin, std::string::npos) << "docs/environment.md lacks the line " << kBegin;
  ASSERT_NE(end, std::string::npos) << "docs/environment.md lacks the line " << kEnd;
  ASSERT_LT(begin, end);
  const size_t table_begin = begin + std::string(kBegin).size();
  const std::string table = SettingsMarkdownTable();
  if (SettingIfSet(Setting::kUpdateGolden) != nullptr) {
    doc.replace(table_begin, end - table_begin, table);
    std::ofstream(COLLWATCH_ENVIRONMENT_DOC) << doc;
    GTEST_SKIP() << "rewrote the table of " << COLLWATCH_ENVIRONMENT_DOC;
  }
  EXPECT_EQ(doc.substr(table_begin, end - table_begin), table)
      << "docs/environment.md's table differs from ring/settings.h: run this test with COLLWATCH_UPDATE_GOLDEN=1";
}

TEST(EnvCommand, TableHasARowPerVariableAndNoCellBreaks) {
  const std::string table = SettingsMarkdownTable();
  size_t rows = 0;
  std::istringstream lines(table);
  for (std::string line; std::getline(lines, line);) {
    ++rows;
    size_t cells = 0;
    for (size_t i = 0; i < line.size(); ++i) cells += line[i] == '|' && (i == 0 || line[i - 1] != '\\');
    EXPECT_EQ(cells, 5u) << line;
  }
  EXPECT_EQ(rows, std::size(kSettings) + 2);
  EXPECT_NE(table.find("| `COLLWATCH_RING_DIR` | `/dev/shm/collwatch-<uid>` |"), std::string::npos) << table;
}

TEST(EnvCommand, ShowsTheValueInForceOrTheDefault) {
  setenv("COLLWATCH_RING_RECORDS", "4096", 1);
  unsetenv("COLLWATCH_RING_LANES");
  std::ostringstream out;
  PrintSettings(out);
  unsetenv("COLLWATCH_RING_RECORDS");
  EXPECT_NE(out.str().find("COLLWATCH_RING_RECORDS=4096  [libcollwatch.so]\n"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("COLLWATCH_RING_LANES unset (default 4)  [libcollwatch.so]\n"), std::string::npos)
      << out.str();
}

// A value the readers do not take was shown as the value in force (#38 item 11).
TEST(EnvCommand, AnInvalidValueIsSaidInvalidWithTheValueUsed) {
  setenv("COLLWATCH_RING_RECORDS", "abc", 1);
  setenv("COLLWATCH_RING_LANES", "999", 1);
  setenv("COLLWATCH_CLOCK", "bogus", 1);
  setenv("COLLWATCH_NVTX", "off", 1);
  std::ostringstream out;
  PrintSettings(out);
  for (const char* name : {"COLLWATCH_RING_RECORDS", "COLLWATCH_RING_LANES", "COLLWATCH_CLOCK", "COLLWATCH_NVTX"}) {
    unsetenv(name);
  }
  EXPECT_NE(out.str().find("COLLWATCH_RING_RECORDS=abc is invalid (not a whole number from 64 to 1048576): used as "
                           "unset (default 32768)  [libcollwatch.so]\n"),
            std::string::npos)
      << out.str();
  EXPECT_NE(out.str().find("COLLWATCH_RING_LANES=999 is invalid (not a whole number from 2 to 64): used as unset "
                           "(default 4)  [libcollwatch.so]\n"),
            std::string::npos)
      << out.str();
  EXPECT_NE(out.str().find("COLLWATCH_CLOCK=bogus is invalid (not one of auto, monotonic): used as unset (default "
                           "auto)  [libcollwatch.so]\n"),
            std::string::npos)
      << out.str();
  EXPECT_NE(out.str().find("COLLWATCH_NVTX=off  [libcollwatch.so]\n"), std::string::npos) << out.str();
}

// The one rule (ring/settings.h) that the preload, `collwatch env` and `collwatch run` read.
TEST(EnvCommand, SettingValidIsTheRuleOfNumbersAndWords) {
  unsigned long long number = 0;
  EXPECT_TRUE(SettingValid(Setting::kRingRecords, "4096", &number));
  EXPECT_EQ(number, 4096u);
  for (const char* bad : {"abc", "63", "1048577", "12x", "-64", " 64"}) {
    EXPECT_FALSE(SettingValid(Setting::kRingRecords, bad)) << bad;
  }
  EXPECT_FALSE(SettingValid(Setting::kRingLanes, "999"));
  EXPECT_TRUE(SettingValid(Setting::kClock, "monotonic"));
  EXPECT_TRUE(SettingValid(Setting::kClock, "auto"));
  for (const char* bad : {"bogus", "auto|monotonic", "mono", "autox", "AUTO"}) {
    EXPECT_FALSE(SettingValid(Setting::kClock, bad)) << bad;
  }
  EXPECT_TRUE(SettingValid(Setting::kPythonFrames, "pretend-unsupported"));
  EXPECT_TRUE(SettingValid(Setting::kRingDir, "anything"));  // no rule: taken as it is
  setenv("COLLWATCH_CLOCK", "bogus", 1);
  EXPECT_STREQ(SettingInForce(Setting::kClock), "auto");
  setenv("COLLWATCH_CLOCK", "monotonic", 1);
  EXPECT_STREQ(SettingInForce(Setting::kClock), "monotonic");
  unsetenv("COLLWATCH_CLOCK");
  char words[128];
  SettingRuleWords(*SettingRuleOf(Setting::kPythonFrames), words, sizeof words);
  EXPECT_STREQ(words, "one of on, off, pretend-unsupported");
  SettingRuleWords(*SettingRuleOf(Setting::kPythonFrames), words, 12);  // cut, never past the buffer
  EXPECT_LT(std::string(words).size(), 12u);
  EXPECT_EQ(std::string(words).rfind("one of on", 0), 0u) << words;
}

TEST(EnvCommand, RingFolderAndJobNameComeFromTheTable) {
  char dir[256];
  setenv("COLLWATCH_RING_DIR", "/tmp/rings-here", 1);
  RingDirSetting(dir, sizeof dir);
  EXPECT_STREQ(dir, "/tmp/rings-here");
  setenv("COLLWATCH_RING_DIR", "", 1);  // empty: as unset
  RingDirSetting(dir, sizeof dir);
  EXPECT_EQ(std::string(dir), "/dev/shm/collwatch-" + std::to_string(getuid()));
  unsetenv("COLLWATCH_RING_DIR");

  unsetenv("COLLWATCH_JOB_ID");
  unsetenv("TORCHELASTIC_RUN_ID");
  unsetenv("SLURM_STEP_ID");
  char job[64];
  setenv("SLURM_JOB_ID", "slurm-7", 1);
  EXPECT_STREQ(JobIdSetting(job, sizeof job), "SLURM_JOB_ID");
  EXPECT_STREQ(job, "slurm-7");
  setenv("SLURM_STEP_ID", "2", 1);
  JobIdSetting(job, sizeof job);
  EXPECT_STREQ(job, "slurm-7_2") << "each srun step is a job of its own";
  setenv("TORCHELASTIC_RUN_ID", "none", 1);
  JobIdSetting(job, sizeof job);
  EXPECT_STREQ(job, "slurm-7_2") << "torchrun's default run id names no job";
  setenv("TORCHELASTIC_RUN_ID", "elastic-3", 1);
  JobIdSetting(job, sizeof job);
  EXPECT_STREQ(job, "elastic-3");
  setenv("COLLWATCH_JOB_ID", "mine", 1);
  JobIdSetting(job, sizeof job);
  EXPECT_STREQ(job, "mine");
  unsetenv("COLLWATCH_JOB_ID");
  unsetenv("TORCHELASTIC_RUN_ID");
  unsetenv("SLURM_JOB_ID");
  unsetenv("SLURM_STEP_ID");
  EXPECT_EQ(JobIdSetting(job, sizeof job), nullptr);
  EXPECT_STREQ(job, "local");
}

}  // namespace
}  // namespace collwatch::env_command_test
