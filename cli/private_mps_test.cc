// The private MPS server of `run --one-gpu --mps`, against a fake nvidia-cuda-mps-control
// (a shell script first in PATH) whose daemon (a script) starts a "server" (a copy of
// sleep) without the pipe variable in its environment, both named like NVIDIA's: started
// on folders of its own, asked to quit after the job, killed when they do not go, and
// every failure to start said with what to do.
#include "cli/private_mps.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "gtest/gtest.h"
#include "tests/support/subprocess.h"

namespace collwatch {
namespace {

namespace fs = std::filesystem;

constexpr char kFakeControl[] = R"script(#!/bin/bash
# A stand-in for nvidia-cuda-mps-control: -d starts the "daemon" and returns; otherwise
# one command is read from stdin.
if [ "$1" = "-d" ]; then
  if [ -n "$FAKE_MPS_FAIL_START" ]; then
    echo "fake: no GPU" > "$CUDA_MPS_LOG_DIRECTORY/control.log"; echo "fake: said on stderr" >&2; exit 1
  fi
  echo "start $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY" >> "$FAKE_MPS_RECORD"
  setsid "$FAKE_MPS_DAEMON" < /dev/null > /dev/null 2>&1 &
  while [ ! -s "$CUDA_MPS_PIPE_DIRECTORY/server.pid" ]; do sleep 0.01; done
  exit 0
fi
read -r command
echo "$command" >> "$FAKE_MPS_RECORD"
if [ "$command" = quit ] && [ -z "$FAKE_MPS_IGNORE_QUIT" ]; then
  [ -n "$FAKE_MPS_QUIT_LEAVES_SERVER" ] || kill "$(cat "$CUDA_MPS_PIPE_DIRECTORY/server.pid")"
  kill "$(cat "$CUDA_MPS_PIPE_DIRECTORY/daemon.pid")"
fi
exit 0
)script";

// The control daemon: starts the server as a child without the pipe variable, then waits.
// The server's pid is published once it runs under its name, as NVIDIA's does from the
// start (before, the child is `env` for a moment, and no MPS process to look for).
constexpr char kFakeDaemon[] = R"script(#!/bin/bash
echo $$ > "$CUDA_MPS_PIPE_DIRECTORY/daemon.pid"
env -u CUDA_MPS_PIPE_DIRECTORY "$FAKE_MPS_SERVER" 300 &
server=$!
until [ "$(cat /proc/$server/comm 2>/dev/null)" = nvidia-cuda-mps ]; do sleep 0.01; done
echo $server > "$CUDA_MPS_PIPE_DIRECTORY/server.pid"
wait
)script";

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Alive and not a zombie (a killed daemon may wait to be reaped by whoever adopted it).
bool Running(pid_t pid) {
  const std::string stat = ReadFile("/proc/" + std::to_string(pid) + "/stat");
  const size_t end_of_name = stat.rfind(')');
  return end_of_name != std::string::npos && end_of_name + 2 < stat.size() && stat[end_of_name + 2] != 'Z';
}

class PrivateMpsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(temp_.path().empty());
    dir_ = temp_.path();
    const fs::path control = dir_ / "nvidia-cuda-mps-control";
    std::ofstream(control) << kFakeControl;
    fs::permissions(control, fs::perms::owner_all);
    const fs::path daemon = dir_ / "nvidia-cuda-mps-control-daemon";
    std::ofstream(daemon) << kFakeDaemon;
    fs::permissions(daemon, fs::perms::owner_all);
    fs::copy_file("/bin/sleep", dir_ / "nvidia-cuda-mps-server");
    old_path_ = getenv("PATH");
    setenv("PATH", (dir_.string() + ":" + old_path_).c_str(), 1);
    setenv("TMPDIR", dir_.c_str(), 1);
    setenv("FAKE_MPS_RECORD", (dir_ / "record").c_str(), 1);
    setenv("FAKE_MPS_DAEMON", (dir_ / "nvidia-cuda-mps-control-daemon").c_str(), 1);
    setenv("FAKE_MPS_SERVER", (dir_ / "nvidia-cuda-mps-server").c_str(), 1);
  }
  void TearDown() override {
    setenv("PATH", old_path_.c_str(), 1);
    for (const char* name : {"TMPDIR", "FAKE_MPS_RECORD", "FAKE_MPS_DAEMON", "FAKE_MPS_SERVER",
                             "FAKE_MPS_IGNORE_QUIT", "FAKE_MPS_QUIT_LEAVES_SERVER", "FAKE_MPS_FAIL_START"}) {
      unsetenv(name);
    }
  }
  pid_t PidIn(const PrivateMpsServer& server, const char* file) {
    return static_cast<pid_t>(std::stol(ReadFile(fs::path(server.folder()) / "pipe" / file)));
  }
  pid_t DaemonOf(const PrivateMpsServer& server) { return PidIn(server, "daemon.pid"); }
  pid_t ServerOf(const PrivateMpsServer& server) { return PidIn(server, "server.pid"); }
  static void WaitGone(pid_t pid) {
    for (int i = 0; i < 200 && Running(pid); ++i) usleep(10 * 1000);
  }
  // Folders the servers made under TMPDIR.
  int ServerFolders() {
    int n = 0;
    for (const auto& entry : fs::directory_iterator(dir_)) n += entry.path().filename().string().rfind("collwatch-mps-", 0) == 0;
    return n;
  }

  testing::TempDir temp_;
  fs::path dir_;
  std::string old_path_;
};

TEST_F(PrivateMpsTest, StartsOnFoldersOfItsOwnAndQuitsAfterTheJob) {
  absl::StatusOr<std::unique_ptr<PrivateMpsServer>> server = PrivateMpsServer::Start();
  ASSERT_TRUE(server.ok()) << server.status();
  const std::map<std::string, std::string> environment = (*server)->JobEnvironment();
  const std::string pipe = environment.at("CUDA_MPS_PIPE_DIRECTORY");
  const std::string log = environment.at("CUDA_MPS_LOG_DIRECTORY");
  EXPECT_EQ(pipe, (*server)->folder() + "/pipe");
  EXPECT_EQ(log, (*server)->folder() + "/log");
  EXPECT_TRUE(fs::is_directory(pipe) && fs::is_directory(log));
  EXPECT_EQ(ReadFile(dir_ / "record"), "start " + pipe + " " + log + "\n");
  const pid_t daemon = DaemonOf(**server);
  const pid_t mps_server = ServerOf(**server);
  EXPECT_TRUE(Running(daemon));
  EXPECT_TRUE(Running(mps_server));

  EXPECT_EQ((*server)->Stop(), "");
  EXPECT_EQ(ReadFile(dir_ / "record"), "start " + pipe + " " + log + "\nquit\n");
  WaitGone(daemon);
  EXPECT_FALSE(Running(daemon));
  EXPECT_FALSE(Running(mps_server));
  EXPECT_FALSE(fs::exists((*server)->folder()));
  EXPECT_EQ((*server)->Stop(), "");  // once only
  EXPECT_EQ(ReadFile(dir_ / "record"), "start " + pipe + " " + log + "\nquit\n");
}

TEST_F(PrivateMpsTest, AServerThatOutlivesItsQuitIsKilled) {
  setenv("FAKE_MPS_IGNORE_QUIT", "1", 1);
  absl::StatusOr<std::unique_ptr<PrivateMpsServer>> server = PrivateMpsServer::Start();
  ASSERT_TRUE(server.ok()) << server.status();
  const pid_t daemon = DaemonOf(**server);
  const pid_t mps_server = ServerOf(**server);
  const std::string problem = (*server)->Stop(0.5);
  EXPECT_NE(problem.find("killed 2 MPS process(es) that outlived its quit"), std::string::npos) << problem;
  WaitGone(daemon);
  WaitGone(mps_server);
  EXPECT_FALSE(Running(daemon));
  EXPECT_FALSE(Running(mps_server));
  EXPECT_EQ(ServerFolders(), 0);
}

// The server need not carry the pipe folder in its environment, and outlives its daemon.
TEST_F(PrivateMpsTest, AServerLeftByItsDaemonIsKilled) {
  setenv("FAKE_MPS_QUIT_LEAVES_SERVER", "1", 1);
  absl::StatusOr<std::unique_ptr<PrivateMpsServer>> server = PrivateMpsServer::Start();
  ASSERT_TRUE(server.ok()) << server.status();
  const pid_t mps_server = ServerOf(**server);
  const std::string problem = (*server)->Stop(0.5);
  EXPECT_NE(problem.find("killed 1 MPS process(es) that outlived its quit"), std::string::npos) << problem;
  WaitGone(mps_server);
  EXPECT_FALSE(Running(mps_server));
}

TEST_F(PrivateMpsTest, TheServerStopsWhenItsOwnerGoes) {
  pid_t daemon = 0;
  {
    absl::StatusOr<std::unique_ptr<PrivateMpsServer>> server = PrivateMpsServer::Start();
    ASSERT_TRUE(server.ok()) << server.status();
    daemon = DaemonOf(**server);
  }  // an early return of `run` after the start
  WaitGone(daemon);
  EXPECT_FALSE(Running(daemon));
  EXPECT_EQ(ServerFolders(), 0);
}

// MPS's socket paths are short: a long TMPDIR gives way to /tmp.
TEST_F(PrivateMpsTest, ALongTmpdirGivesWayToTmp) {
  const fs::path long_tmp = dir_ / std::string(80, 'x');
  fs::create_directories(long_tmp);
  setenv("TMPDIR", long_tmp.c_str(), 1);
  absl::StatusOr<std::unique_ptr<PrivateMpsServer>> server = PrivateMpsServer::Start();
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_EQ((*server)->folder().rfind("/tmp/collwatch-mps-", 0), 0u) << (*server)->folder();
  EXPECT_EQ((*server)->Stop(), "");
  EXPECT_FALSE(fs::exists((*server)->folder()));
}

TEST_F(PrivateMpsTest, NoControlProgramIsSaidSo) {
  setenv("PATH", "/nonexistent", 1);
  absl::StatusOr<std::unique_ptr<PrivateMpsServer>> server = PrivateMpsServer::Start();
  ASSERT_FALSE(server.ok());
  EXPECT_NE(server.status().message().find("--mps: nvidia-cuda-mps-control is not in PATH"), std::string::npos)
      << server.status();
  EXPECT_NE(server.status().message().find("Without --mps"), std::string::npos);
  EXPECT_EQ(ServerFolders(), 0);
}

TEST_F(PrivateMpsTest, AFailedStartIsSaidWithTheServersLog) {
  setenv("FAKE_MPS_FAIL_START", "1", 1);
  absl::StatusOr<std::unique_ptr<PrivateMpsServer>> server = PrivateMpsServer::Start();
  ASSERT_FALSE(server.ok());
  EXPECT_NE(server.status().message().find("nvidia-cuda-mps-control -d failed (exit status 1) (its log: fake: no GPU"),
            std::string::npos)
      << server.status();
  EXPECT_NE(server.status().message().find("fake: said on stderr)"), std::string::npos) << server.status();
  EXPECT_EQ(ServerFolders(), 0);
}

}  // namespace
}  // namespace collwatch
