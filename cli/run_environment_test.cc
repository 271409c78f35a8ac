// What the command is given: LD_PRELOAD composed in the one order that works (what was
// preloaded already, the preload, the CPU NCCL backend), the NVTX injection, the ring
// folder and job id; the job id in the interposer's alphabet; the preload found through
// COLLWATCH_PRELOAD; a private ring folder made when none is asked for.
#include "cli/run_environment.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <string>

#include "gtest/gtest.h"

namespace collwatch {
namespace {

CommandEnvironmentInputs Inputs() {
  CommandEnvironmentInputs inputs;
  inputs.preload = "/opt/collwatch/lib/libcollwatch.so";
  inputs.ring_dir = "/dev/shm/collwatch-run-abc";
  inputs.job = "job-1";
  return inputs;
}

TEST(CommandEnvironment, PreloadRingFolderJobAndNvtxInjection) {
  const std::map<std::string, std::string> environment = CommandEnvironment(Inputs());
  EXPECT_EQ(environment, (std::map<std::string, std::string>{
                             {"LD_PRELOAD", "/opt/collwatch/lib/libcollwatch.so"},
                             {"NVTX_INJECTION64_PATH", "/opt/collwatch/lib/libcollwatch.so"},
                             {"COLLWATCH_RING_DIR", "/dev/shm/collwatch-run-abc"},
                             {"COLLWATCH_JOB_ID", "job-1"},
                         }));
}

TEST(CommandEnvironment, WhatWasPreloadedAlreadyComesFirst) {
  // A sanitizer runtime must stay first in LD_PRELOAD.
  CommandEnvironmentInputs inputs = Inputs();
  inputs.inherited_ld_preload = "/usr/lib/libasan.so.8:/opt/other.so";
  EXPECT_EQ(CommandEnvironment(inputs).at("LD_PRELOAD"),
            "/usr/lib/libasan.so.8:/opt/other.so:/opt/collwatch/lib/libcollwatch.so");
  EXPECT_EQ(CommandEnvironment(inputs).at("NVTX_INJECTION64_PATH"), "/opt/collwatch/lib/libcollwatch.so");
}

TEST(CommandEnvironment, TheProfilerPluginIsThePreloadWhenAskedFor) {
  CommandEnvironmentInputs inputs = Inputs();
  EXPECT_EQ(CommandEnvironment(inputs).count("NCCL_PROFILER_PLUGIN"), 0u);
  inputs.profiler_plugin = true;
  EXPECT_EQ(CommandEnvironment(inputs).at("NCCL_PROFILER_PLUGIN"), "/opt/collwatch/lib/libcollwatch.so");
}

TEST(CommandEnvironment, OneGpuModePutsTheCpuNcclAfterThePreloadAndAddsItsSwitches) {
  CommandEnvironmentInputs inputs = Inputs();
  inputs.inherited_ld_preload = "/first.so";
  inputs.one_gpu = OneGpuEnvironment{.cpu_nccl_path = "/opt/collwatch/lib/collwatch-cpu-nccl/libnccl.so.2",
                                     .extra = {{"COLLWATCH_CPU_NCCL_CUDA", "1"}, {"COLLWATCH_ONE_GPU", "1"}}};
  const std::map<std::string, std::string> environment = CommandEnvironment(inputs);
  // The interposer finds the backend as "the next" NCCL; the job's own is never loaded.
  EXPECT_EQ(environment.at("LD_PRELOAD"),
            "/first.so:/opt/collwatch/lib/libcollwatch.so:/opt/collwatch/lib/collwatch-cpu-nccl/libnccl.so.2");
  EXPECT_EQ(environment.at("COLLWATCH_CPU_NCCL_CUDA"), "1");
  EXPECT_EQ(environment.at("COLLWATCH_ONE_GPU"), "1");
  EXPECT_EQ(environment.at("COLLWATCH_RING_DIR"), "/dev/shm/collwatch-run-abc");
  EXPECT_EQ(environment.at("COLLWATCH_JOB_ID"), "job-1");
  EXPECT_EQ(environment.size(), 6u);
}

TEST(SanitizedJobId, KeepsTheInterposersAlphabetAndLength) {
  EXPECT_EQ(SanitizedJobId("train-7_a.b"), "train-7_a.b");
  EXPECT_EQ(SanitizedJobId("my job/7:x"), "my_job_7_x");
  EXPECT_EQ(SanitizedJobId("caf\xc3\xa9"), "caf__");
  // Cut to 63 bytes keeping a hash of the whole id: ids that share their first 63 bytes
  // stay apart.
  const std::string cut = SanitizedJobId(std::string(100, 'j'));
  EXPECT_EQ(cut.size(), 63u);
  EXPECT_EQ(cut.substr(0, 46), std::string(46, 'j'));
  EXPECT_EQ(cut[46], '-');
  EXPECT_NE(cut, SanitizedJobId(std::string(99, 'j') + "k"));
  EXPECT_EQ(cut, SanitizedJobId(std::string(100, 'j'))) << "the same id is cut the same way";
  EXPECT_EQ(SanitizedJobId(std::string(63, 'j')), std::string(63, 'j')) << "an id that fits is kept whole";
  EXPECT_EQ(SanitizedJobId(""), "");
  EXPECT_EQ(SanitizedJobId(".."), "_.") << "never a relative or hidden folder";
  EXPECT_EQ(SanitizedJobId(".hidden"), "_hidden");
}

// The launchers' job variables, cleared for each case and put back after.
class ChooseJobIdTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* name : kNames) unsetenv(name);
  }
  void TearDown() override {
    for (const char* name : kNames) unsetenv(name);
  }
  static constexpr const char* kNames[] = {"COLLWATCH_JOB_ID", "TORCHELASTIC_RUN_ID", "SLURM_JOB_ID",
                                           "SLURM_STEP_ID"};
};

TEST_F(ChooseJobIdTest, TheVariableSanitizedElseATimeStampAndThisPid) {
  setenv("COLLWATCH_JOB_ID", "nightly run/3", 1);
  EXPECT_EQ(ChooseJobId({"python"})->id, "nightly_run_3");
  EXPECT_FALSE(ChooseJobId({"python"})->own());
  setenv("COLLWATCH_JOB_ID", "", 1);  // empty: as if unset
  const std::regex stamped("run-[0-9]{8}-[0-9]{6}-" + std::to_string(getpid()));
  EXPECT_TRUE(std::regex_match(ChooseJobId({"python"})->id, stamped));
  unsetenv("COLLWATCH_JOB_ID");
  EXPECT_TRUE(std::regex_match(ChooseJobId({"python"})->id, stamped));
  EXPECT_TRUE(ChooseJobId({"python"})->own());
}

// Every node of a wrapped multi-node run must reach the same id without being told twice.
TEST_F(ChooseJobIdTest, TheLaunchersIdsComeBeforeThisRunsOwn) {
  setenv("SLURM_JOB_ID", "4711", 1);
  setenv("SLURM_STEP_ID", "0", 1);
  EXPECT_EQ(ChooseJobId({"python", "train.py"})->id, "4711_0");
  EXPECT_EQ(ChooseJobId({"python", "train.py"})->source, "SLURM_JOB_ID");
  setenv("TORCHELASTIC_RUN_ID", "elastic-9", 1);
  EXPECT_EQ(ChooseJobId({"python"})->id, "elastic-9");
  setenv("COLLWATCH_JOB_ID", "mine", 1);
  EXPECT_EQ(ChooseJobId({"python"})->id, "mine");
}

TEST_F(ChooseJobIdTest, ATorchrunCommandsRendezvousIdNamesTheJob) {
  EXPECT_EQ(ChooseJobId({"torchrun", "--nnodes=2", "--rdzv-id=exp42", "train.py"})->id, "exp42");
  EXPECT_EQ(ChooseJobId({"torchrun", "--rdzv_id", "exp43", "train.py"})->id, "exp43");
  EXPECT_EQ(ChooseJobId({"python", "-m", "torch.distributed.run", "--rdzv-id", "e/44", "t.py"})->id, "e_44");
  EXPECT_EQ(ChooseJobId({"torchrun", "--rdzv-id", "exp43", "train.py"})->source, "--rdzv-id");
  EXPECT_TRUE(ChooseJobId({"torchrun", "--rdzv-id=none", "train.py"})->own()) << "torchrun's default";
  EXPECT_TRUE(ChooseJobId({"torchrun", "--rdzv-id"})->own()) << "no value";
  setenv("SLURM_JOB_ID", "4711", 1);
  EXPECT_EQ(ChooseJobId({"torchrun", "--rdzv-id=exp42", "train.py"})->id, "4711") << "the scheduler's first";
}

TEST(CheckRecorderSettings, ValuesThePreloadWouldIgnoreOrThatTurnItOffAreErrors) {
  EXPECT_TRUE(CheckRecorderSettings().ok());
  const struct {
    const char* name;
    const char* value;
    std::string words;  // "" when fine
  } cases[] = {
      {"COLLWATCH_DISABLE", "0", ""},
      {"COLLWATCH_DISABLE", "yes", "COLLWATCH_DISABLE=yes turns recording off in the job"},
      {"COLLWATCH_RING_RECORDS", "4096", ""},
      {"COLLWATCH_RING_RECORDS", "abc", "COLLWATCH_RING_RECORDS=abc is not a whole number from 64 to 1048576"},
      {"COLLWATCH_RING_RECORDS", "-5", "COLLWATCH_RING_RECORDS=-5 is not a whole number"},
      {"COLLWATCH_RING_RECORDS", "99999999999999999999", "is not a whole number"},
      {"COLLWATCH_RING_LANES", "64", ""},
      {"COLLWATCH_RING_LANES", "65", "COLLWATCH_RING_LANES=65 is not a whole number from 2 to 64"},
      {"COLLWATCH_RING_LANES", "4x", "COLLWATCH_RING_LANES=4x is not a whole number"},
  };
  for (const auto& [name, value, words] : cases) {
    setenv(name, value, 1);
    const absl::Status status = CheckRecorderSettings();
    unsetenv(name);
    if (words.empty()) {
      EXPECT_TRUE(status.ok()) << name << "=" << value << ": " << status;
    } else {
      EXPECT_NE(status.message().find(words), std::string::npos) << name << "=" << value << ": " << status;
    }
  }
}

TEST_F(ChooseJobIdTest, ADotFirstIsAnErrorNamingTheVariable) {
  for (const char* id : {".", "..", ".x"}) {
    setenv("COLLWATCH_JOB_ID", id, 1);
    const absl::StatusOr<RunJobId> job = ChooseJobId({"python"});
    ASSERT_FALSE(job.ok()) << id;
    EXPECT_NE(job.status().message().find(std::string("COLLWATCH_JOB_ID='") + id + "' is not a job id"),
              std::string::npos)
        << job.status();
  }
  unsetenv("COLLWATCH_JOB_ID");
}

TEST(FindPreload, TheVariableWinsWhenItsFileCanBeRead) {
  const std::string path = (std::filesystem::path(::testing::TempDir()) / "libcollwatch-test.so").string();
  std::ofstream(path) << "not really a library";
  setenv("COLLWATCH_PRELOAD", path.c_str(), 1);
  EXPECT_EQ(FindPreload().value(), path);
  std::filesystem::remove(path);
  const absl::StatusOr<std::string> missing = FindPreload();
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("COLLWATCH_PRELOAD=" + path), std::string::npos)
      << missing.status().message();
  unsetenv("COLLWATCH_PRELOAD");
}

TEST(FindPreload, BesideThisBinarysBuildTree) {
  unsetenv("COLLWATCH_PRELOAD");
  // This test runs from build/cli; the preload was built in build/interposer.
  const absl::StatusOr<std::string> found = FindPreload();
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(std::filesystem::path(*found).filename(), "libcollwatch.so");
  EXPECT_TRUE(std::filesystem::equivalent(*found, COLLWATCH_TEST_PRELOAD));
}

TEST(RingFolderForRun, TheAskedFolderIsKept) {
  const absl::StatusOr<RingFolder> rings = RingFolderForRun("/some/rings", "/unused");
  ASSERT_TRUE(rings.ok());
  EXPECT_EQ(rings->path, "/some/rings");
  EXPECT_FALSE(rings->owned);
}

TEST(RingFolderForRun, ElseAPrivateNewFolderOwnedByTheRun) {
  const absl::StatusOr<RingFolder> first = RingFolderForRun("", ::testing::TempDir());
  const absl::StatusOr<RingFolder> second = RingFolderForRun("", ::testing::TempDir());
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_TRUE(first->owned);
  EXPECT_NE(first->path, second->path);
  struct stat info {};
  ASSERT_EQ(stat(first->path.c_str(), &info), 0);
  EXPECT_TRUE(S_ISDIR(info.st_mode));
  EXPECT_EQ(info.st_mode & 0777, 0700u);  // other users cannot read or plant rings
  std::filesystem::remove(first->path);
  std::filesystem::remove(second->path);
}

}  // namespace
}  // namespace collwatch
