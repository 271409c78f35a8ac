// `collwatch run` end to end on the CPU NCCL backend: a 4-rank NCCL program's every
// record reaches the trace store, in lane order, once, byte for byte; CMD's exit status
// comes back.
#include <dlfcn.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include "cli/exit_codes.h"
#include "collector/collector_service.h"
#include "gtest/gtest.h"
#include "proto/collwatch.grpc.pb.h"
#include "nlohmann/json.hpp"
#include "tests/collector/trace_check.h"
#include "tests/support/run_env.h"
#include "tests/support/subprocess.h"
#include "tests/support/test_time.h"

namespace collwatch::end_to_end_test {
namespace {

using testing::Subprocess;
using testing::TempDir;

// Runs `workload` under `collwatch run` (4 ranks) and checks that the store holds every
// record of every rank's ring, once, in lane order, byte for byte.
void ExpectEveryRecordStoredOnce(const std::vector<std::string>& workload, uint64_t min_records) {
  TempDir dir;
  const std::string out = dir.path() + "/out";
  const std::string rings = dir.path() + "/rings";
  std::vector<std::string> argv = {COLLWATCH_CLI_PATH, "run", "--out", out, "--ring-dir", rings,
                                   "--stall-after", "30", "--"};
  for (const std::string& arg : workload) {
    argv.push_back(arg == "RENDEZVOUS_DIR" ? dir.path() : arg);
  }
  Subprocess run(argv, testing::CollwatchRunEnv({{"COLLWATCH_CPU_NCCL_SHM_DIR", dir.path()}, {"COLLWATCH_JOB_ID", "e2e"}}));
  ASSERT_EQ(run.Wait(120), 0);

  const testing::TraceComparison comparison = testing::CompareTracesWithRings(rings, out, "e2e");
  EXPECT_EQ(comparison.rings, 4);
  EXPECT_EQ(comparison.traces, 4);
  EXPECT_GT(comparison.ring_records, min_records);
  EXPECT_EQ(comparison.stored_records, comparison.ring_records);
  EXPECT_EQ(comparison.mismatch, "");
  for (const auto& [rank, status] : comparison.status_by_rank) {
    EXPECT_EQ(status.writer_status(), v1::WRITER_STATUS_EXITED) << "rank " << rank;
  }
  nlohmann::json run_json = nlohmann::json::parse(std::ifstream(out + "/run.json"));
  EXPECT_EQ(run_json["exit_status"], 0);
  EXPECT_EQ(run_json["drained"], true);
  EXPECT_EQ(run_json["stall_after_s"], 30.0);
  EXPECT_EQ(run_json["job"], "e2e");
}

// Every NCCL call kind: collectives, p2p in groups, a split.
TEST(CollwatchRunTest, FourRanksEveryRecordStoredOnceInOrder) {
  ExpectEveryRecordStoredOnce({COLLWATCH_NCCL_RANKS_PATH, "4", "all", "RENDEZVOUS_DIR"}, 4u * 40);
}

#ifdef COLLWATCH_TRAINER_PATH
// The bundled trainer: a real training schedule (hundreds of collectives per rank).
TEST(CollwatchRunTest, TrainerEveryRecordStoredOnceInOrder) {
  ExpectEveryRecordStoredOnce({COLLWATCH_TRAINER_PATH, "--nproc", "4", "--scenario", "clean",
                               "--steps", "3", "--hidden", "32", "--layers", "2",
                               "--vision-layers", "1", "--seq", "16", "--vocab", "32", "--batch", "2"},
                              4u * 150);
}
#endif

TEST(CollwatchRunTest, ExitsWithTheCommandsStatus) {
  TempDir dir;
  Subprocess run({COLLWATCH_CLI_PATH, "run", "--out", dir.path() + "/out", "--", "sh", "-c", "exit 7"},
                 testing::CollwatchRunEnv({}));
  EXPECT_EQ(run.Wait(30), 7);
  Subprocess missing({COLLWATCH_CLI_PATH, "run", "--out", dir.path() + "/out", "--", dir.path() + "/no-such-program"},
                     testing::CollwatchRunEnv({}));
  EXPECT_EQ(missing.Wait(30), 127);
}

std::string ReadWhole(const std::string& path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

// --one-gpu is checked before the job starts: what is missing is said, and nothing runs.
TEST(CollwatchRunTest, OneGpuModeWithoutItsBackendSaysSoAndRunsNothing) {
  TempDir dir;
  const std::string marker = dir.path() + "/ran";
  Subprocess run({COLLWATCH_CLI_PATH, "run", "--one-gpu", "--out", dir.path() + "/out", "--", "touch", marker},
                 testing::CollwatchRunEnv({{"COLLWATCH_CPU_NCCL", dir.path() + "/no-libnccl.so.2"}}), "",
                 dir.path() + "/err");
  EXPECT_EQ(run.Wait(30), kExitRunFailed);
  EXPECT_NE(ReadWhole(dir.path() + "/err").find("--one-gpu: COLLWATCH_CPU_NCCL=" + dir.path() + "/no-libnccl.so.2 cannot be read"),
            std::string::npos)
      << ReadWhole(dir.path() + "/err");
  EXPECT_FALSE(std::filesystem::exists(marker));
}

TEST(CollwatchRunTest, OneGpuModeWithoutAGpuSaysSoBeforeTheJobStarts) {
  if (void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL); driver != nullptr) {
    dlclose(driver);
    GTEST_SKIP() << "this machine has a CUDA driver";
  }
  TempDir dir;
  const std::string marker = dir.path() + "/ran";
  Subprocess run({COLLWATCH_CLI_PATH, "run", "--one-gpu", "--out", dir.path() + "/out", "--", "touch", marker},
                 testing::CollwatchRunEnv({{"COLLWATCH_CPU_NCCL", COLLWATCH_CPU_NCCL_PATH}}), "", dir.path() + "/err");
  EXPECT_EQ(run.Wait(30), kExitRunFailed);
  const std::string err = ReadWhole(dir.path() + "/err");
  EXPECT_NE(err.find("--one-gpu runs every rank on one GPU, and there is no CUDA driver on this machine"), std::string::npos) << err;
  EXPECT_NE(err.find("leave --one-gpu off"), std::string::npos) << err;
  EXPECT_FALSE(std::filesystem::exists(marker));
}

// --mps is a part of the one-GPU mode: alone it is refused, and nothing runs.
TEST(CollwatchRunTest, MpsWithoutOneGpuIsRefused) {
  TempDir dir;
  const std::string marker = dir.path() + "/ran";
  Subprocess run({COLLWATCH_CLI_PATH, "run", "--mps", "--out", dir.path() + "/out", "--", "touch", marker},
                 testing::CollwatchRunEnv({}), "", dir.path() + "/err");
  EXPECT_EQ(run.Wait(30), kExitRunFailed);
  EXPECT_NE(ReadWhole(dir.path() + "/err").find("--mps requires --one-gpu"), std::string::npos)
      << ReadWhole(dir.path() + "/err");
  EXPECT_FALSE(std::filesystem::exists(marker));
}

// The backend, preloaded with the mode on, shows each rank LOCAL_RANK=0 and loads CUDA
// modules eagerly; without the mode LOCAL_RANK stays.
TEST(OneGpuViewTest, EachRankSeesLocalRankZeroAndEagerLoading) {
  TempDir dir;
  const std::string runtime = COLLWATCH_SANITIZER_RUNTIME;
  const std::string preload = runtime.empty() ? COLLWATCH_CPU_NCCL_PATH : runtime + ":" + COLLWATCH_CPU_NCCL_PATH;
  const auto env_of = [&](const std::string& mode, const std::string& name) {
    const std::string out = dir.path() + "/" + name;
    Subprocess env({"/usr/bin/env"}, {{"LD_PRELOAD", preload}, {"COLLWATCH_CPU_NCCL_ONE_GPU", mode}, {"LOCAL_RANK", "3"},
                             {"CUDA_MODULE_LOADING", "LAZY"}},
                   out);
    EXPECT_EQ(env.Wait(30), 0);
    return "\n" + ReadWhole(out);  // every variable's line starts after a newline
  };
  const std::string on = env_of("1", "on");
  EXPECT_NE(on.find("\nLOCAL_RANK=0\n"), std::string::npos) << on;
  EXPECT_NE(on.find("\nCOLLWATCH_ORIGINAL_LOCAL_RANK=3\n"), std::string::npos) << on;
  EXPECT_NE(on.find("\nCUDA_MODULE_LOADING=EAGER\n"), std::string::npos) << on;
  const std::string off = env_of("", "off");
  EXPECT_NE(off.find("\nLOCAL_RANK=3\n"), std::string::npos) << off;
  EXPECT_EQ(off.find("COLLWATCH_ORIGINAL_LOCAL_RANK"), std::string::npos) << off;
}

// Opens Watch with `token` (none when empty) and reads the first state: the call's status
// (OK once a state came).
grpc::Status WatchWith(v1::Collector::Stub& stub, const std::string& token) {
  grpc::ClientContext context;
  if (!token.empty()) context.AddMetadata(kTokenMetadataKey, token);
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  context.set_wait_for_ready(true);  // a slow first connection (sanitizers, load) is not the answer
  auto reader = stub.Watch(&context, v1::WatchRequest());
  v1::WatchResponse state;
  if (reader->Read(&state)) {
    context.TryCancel();
    while (reader->Read(&state)) {
    }
    reader->Finish();
    return grpc::Status::OK;
  }
  return reader->Finish();
}

// The embedded collector listens on loopback, which every user of the node reaches: it
// takes calls only with the run's own random secret, kept in a file its owner alone can
// read, named for `collwatch top`, and removed when the run ends.
TEST(CollwatchRunTest, EmbeddedCollectorTakesCallsOnlyWithTheRunsSecret) {
  TempDir dir;
  const std::string log = dir.path() + "/run.log";
  Subprocess run({COLLWATCH_CLI_PATH, "run", "--no-dashboard", "--out", dir.path() + "/out", "--", "sleep", "60"},
                 testing::CollwatchRunEnv({}), "", log);
  std::smatch hint;
  std::string text;
  const std::regex pattern("collwatch top --collector (\\S+) --token-file (\\S+)");
  for (int i = 0; i < testing::Scaled(300) && !std::regex_search(text, hint, pattern); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    std::stringstream contents;
    contents << std::ifstream(log).rdbuf();
    text = contents.str();
  }
  ASSERT_FALSE(hint.empty()) << text;
  const std::string address = hint[1];
  const std::string token_file = hint[2];
  struct stat info {};
  ASSERT_EQ(stat(token_file.c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0600u);
  std::string token;
  std::getline(std::ifstream(token_file), token);
  EXPECT_GE(token.size(), 32u);

  auto stub = v1::Collector::NewStub(CollectorChannel(address, ""));
  EXPECT_EQ(WatchWith(*stub, "").error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(WatchWith(*stub, token + "0").error_code(), grpc::StatusCode::UNAUTHENTICATED);
  {
    grpc::ClientContext context;  // a forged record stream
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    context.set_wait_for_ready(true);
    auto stream = stub->StreamEvents(&context);
    stream->Write(v1::StreamEventsRequest());
    v1::StreamEventsResponse answer;
    while (stream->Read(&answer)) {
    }
    EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::UNAUTHENTICATED);
  }
  EXPECT_TRUE(WatchWith(*stub, token).ok());
  if (HasFailure()) {
    std::stringstream contents;
    contents << std::ifstream(log).rdbuf();
    ADD_FAILURE() << "collwatch run said:\n" << contents.str();
  }

  kill(run.pid(), SIGTERM);  // passed on to the job, which ends; the run then ends too
  EXPECT_EQ(run.Wait(30), 128 + SIGTERM);
  EXPECT_FALSE(std::filesystem::exists(token_file));
}

}  // namespace
}  // namespace collwatch::end_to_end_test
