// Collector endpoints through real processes: an address with a port out of range is
// refused by every command and by the preload before it spawns an agent (gRPC dialled
// 99999 as 34463); a second collector never takes over a live collector's unix socket
// path, nor its store folder removed and made again while it runs; the loopback ports
// tests and the trainer pick lie below the kernel's ephemeral range.
// Threading: single-threaded test code over real collector, agent and job processes.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ring/loopback_port.h"
#include "tests/support/cli_run.h"
#include "tests/support/read_files.h"
#include "tests/support/run_env.h"
#include "tests/support/subprocess.h"
#include "tests/support/test_time.h"

namespace collwatch::endpoints_test {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing::ReadFile;
using testing::Subprocess;
using testing::TempDir;

using Outcome = testing::CliOutcome;

// `collwatch ARGS...` with `env` added; killed after 30 s.
Outcome Collwatch(const TempDir& dir, const std::vector<std::string>& args,
                  const std::map<std::string, std::string>& env = {}) {
  return testing::RunCollwatch(dir, args, env);
}

// A collector on `listen` with its store at `out`, its stderr in `err`; waits until it
// listens or has exited.
std::unique_ptr<Subprocess> StartCollector(const std::string& listen, const std::string& out, const std::string& err) {
  auto collector = std::make_unique<Subprocess>(
      std::vector<std::string>{COLLWATCH_CLI_PATH, "collector", "--listen", listen, "--out", out},
      testing::CollwatchRunEnv({}), "", err);
  testing::WaitForText(err, "listening", 10, [&] { return collector->Running(); });
  return collector;
}

// Whether a server answers a connect on the unix socket `path`.
bool Answers(const std::string& path) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::strncpy(address.sun_path, path.c_str(), sizeof address.sun_path - 1);
  const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  const bool answered = connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0;
  close(fd);
  return answered;
}

std::map<std::string, std::string> RankEnv(const std::string& rings, const std::string& shm) {
  return {{"LD_PRELOAD", COLLWATCH_PRELOAD_LIST}, {"COLLWATCH_RING_DIR", rings}, {"COLLWATCH_JOB_ID", "ends"},
          {"RANK", "0"}, {"LOCAL_RANK", "0"}, {"WORLD_SIZE", "1"}, {"COLLWATCH_CPU_NCCL_SHM_DIR", shm}};
}

TEST(EndpointsTest, APortOutOfRangeIsRefusedByEveryCommandNamingThePort) {
  TempDir dir;
  const struct {
    std::vector<std::string> args;
    int exit_code;
    std::string words;
  } cases[] = {
      {{"agent", "--collector", "127.0.0.1:99999", "--idle-exit", "1"}, 2, "port 99999 is out of range"},
      {{"agent", "--collector", "127.0.0.1", "--idle-exit", "1"}, 2, "'127.0.0.1' has no port"},
      {{"agent", "--collector", "127.0.0.1:0", "--idle-exit", "1"}, 2, "port 0 is out of range"},
      {{"agent", "--collector", "::1:7777", "--idle-exit", "1"}, 2, "an IPv6 address goes in brackets"},
      {{"agent", "--collector", "unix:", "--idle-exit", "1"}, 2, "'unix:' names no socket"},
      {{"top", "--collector", "localhost:70000"}, 2, "port 70000 is out of range"},
      {{"run", "--collector", "127.0.0.1:99999", "--", "true"}, 125, "port 99999 is out of range"},
  };
  for (const auto& [args, exit_code, words] : cases) {
    const Outcome outcome = Collwatch(dir, args);
    EXPECT_EQ(outcome.exit_code, exit_code) << args[2] << "\n" << outcome.err;
    EXPECT_THAT(outcome.err, HasSubstr("--collector: ")) << outcome.err;
    EXPECT_THAT(outcome.err, HasSubstr(words)) << outcome.err;
    EXPECT_THAT(outcome.err, HasSubstr(args[2] == "unix:" ? "give unix:PATH"
                                                          : "give HOST:PORT with a port from 1 to 65535, or unix:PATH"))
        << outcome.err;
  }
  const Outcome fine = Collwatch(dir, {"agent", "--collector", "[::1]:7777", "--ring-dir", dir.path() + "/none",
                                       "--idle-exit", "0.5"});
  EXPECT_THAT(fine.err, Not(HasSubstr("--collector: "))) << fine.err;
}

// The preload checks COLLWATCH_COLLECTOR before it spawns an agent: one line, no agent,
// the ring kept for an agent started by hand.
TEST(EndpointsTest, ThePreloadSpawnsNoAgentForABadCollectorAddress) {
  TempDir dir;
  const std::string rings = dir.path() + "/rings";
  ASSERT_EQ(mkdir(rings.c_str(), 0700), 0);
  std::map<std::string, std::string> env = RankEnv(rings, dir.path());
  env["COLLWATCH_COLLECTOR"] = "127.0.0.1:99999";
  env["COLLWATCH_AGENT"] = COLLWATCH_CLI_PATH;
  Subprocess job({COLLWATCH_NCCL_RANKS_PATH, "1", "all", dir.path()}, env, "", dir.path() + "/job.err");
  ASSERT_EQ(job.Wait(60), 0) << ReadFile(dir.path() + "/job.err");
  const std::string err = ReadFile(dir.path() + "/job.err");
  EXPECT_THAT(err, HasSubstr("collwatch: COLLWATCH_COLLECTOR '127.0.0.1:99999': port 99999 is out of range")) << err;
  EXPECT_THAT(err, HasSubstr("no agent started")) << err;
  EXPECT_FALSE(std::filesystem::exists(rings + "/agent.ends.log")) << "an agent was spawned";
  EXPECT_FALSE(std::filesystem::exists(rings + "/agent.ends.lock")) << "an agent was spawned";
}

// A second collector on a live collector's unix socket path is refused (gRPC removed the
// socket and bound its own, taking every agent's streams); the first still serves. A
// stale socket nobody answers on is taken.
TEST(EndpointsTest, ALiveCollectorsUnixSocketIsNeverTakenOver) {
  TempDir dir;
  const std::string path = dir.path() + "/c.sock", socket = "unix:" + path;
  auto first = StartCollector(socket, dir.path() + "/first", dir.path() + "/first.err");
  ASSERT_THAT(ReadFile(dir.path() + "/first.err"), HasSubstr("listening on"));
  auto second = StartCollector(socket, dir.path() + "/second", dir.path() + "/second.err");
  EXPECT_EQ(second->Wait(30), 2) << ReadFile(dir.path() + "/second.err");
  EXPECT_THAT(ReadFile(dir.path() + "/second.err"),
              HasSubstr("cannot listen on " + socket + ": a server (another collector?) answers there"));
  ASSERT_TRUE(first->Running());
  EXPECT_TRUE(Answers(path));

  // The first still takes streams: an ended rank's ring is shipped into its store.
  const std::string rings = dir.path() + "/rings";
  ASSERT_EQ(mkdir(rings.c_str(), 0700), 0);
  Subprocess job({COLLWATCH_NCCL_RANKS_PATH, "1", "all", dir.path()}, RankEnv(rings, dir.path()));
  ASSERT_EQ(job.Wait(60), 0);
  const Outcome agent = Collwatch(dir, {"agent", "--collector", socket, "--ring-dir", rings, "--idle-exit", "1"});
  EXPECT_EQ(agent.exit_code, 0) << agent.err;
  EXPECT_TRUE(std::filesystem::exists(dir.path() + "/first/ends")) << agent.err;
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/second/ends"));

  // A socket left by a collector that is gone: nobody answers, the next collector takes it.
  first->KillGroup();
  ASSERT_TRUE(std::filesystem::exists(path)) << "SIGKILL leaves the socket file";
  auto third = StartCollector(socket, dir.path() + "/third", dir.path() + "/third.err");
  EXPECT_THAT(ReadFile(dir.path() + "/third.err"), HasSubstr("listening on " + socket));
  EXPECT_TRUE(third->Running());
}

// The store folder removed and made again while its collector runs: a second collector
// there is refused by the path's lock (the folder's own lock went with the old folder).
TEST(EndpointsTest, AStoreFolderRemovedAndMadeAgainStaysTheRunningCollectors) {
  TempDir dir;
  const std::string store = dir.path() + "/store";
  auto first = StartCollector("unix:" + dir.path() + "/first.sock", store, dir.path() + "/first.err");
  ASSERT_THAT(ReadFile(dir.path() + "/first.err"), HasSubstr("listening on"));
  std::filesystem::remove_all(store);
  ASSERT_EQ(mkdir(store.c_str(), 0755), 0);
  auto second = StartCollector("unix:" + dir.path() + "/second.sock", store, dir.path() + "/second.err");
  EXPECT_EQ(second->Wait(30), 2) << ReadFile(dir.path() + "/second.err");
  EXPECT_THAT(ReadFile(dir.path() + "/second.err"),
              HasSubstr(store + ": another collector (pid " + std::to_string(first->pid()) + ") writes there already"));
  EXPECT_TRUE(first->Running());
  // Once the first is gone, the path is free again.
  first->KillGroup();
  auto third = StartCollector("unix:" + dir.path() + "/third.sock", store, dir.path() + "/third.err");
  EXPECT_THAT(ReadFile(dir.path() + "/third.err"), HasSubstr("listening on"));
  EXPECT_TRUE(third->Running());
}

// The ports tests and the trainer's rendezvous store pick lie below the kernel's ephemeral
// range, where no bind to port 0 or outgoing connection of another process lands, and a
// server can bind each at once (the kernel's own pick, released, went to another process
// before the server bound it: EADDRINUSE in clean-clone runs).
TEST(EndpointsTest, PickedLoopbackPortsLieBelowTheEphemeralRangeAndCanBeListenedOn) {
  int ephemeral_low = 0, ephemeral_high = 0;
  std::istringstream(ReadFile("/proc/sys/net/ipv4/ip_local_port_range")) >> ephemeral_low >> ephemeral_high;
  ASSERT_GT(ephemeral_low, 0);
  if (ephemeral_low <= kLastPickedPort) {
    GTEST_SKIP() << "this machine's ephemeral range starts at " << ephemeral_low
                 << ", inside the picker's: no port there is out of the kernel's reach";
  }
  for (int pick = 0; pick < 20; ++pick) {
    const int port = PickLoopbackPort();
    ASSERT_GE(port, kFirstPickedPort);
    EXPECT_LE(port, kLastPickedPort);
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = htons(static_cast<uint16_t>(port));
    EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address), 0) << "port " << port;
    EXPECT_EQ(listen(fd, 1), 0) << "port " << port;
    close(fd);
  }
}

}  // namespace
}  // namespace collwatch::endpoints_test
