// The interposer never hurts the job: the bundled trainer (4 CPU ranks, clean scenario)
// with libcollwatch.so preloaded trains exactly as without it (the same loss lines, the
// same final parameters and gradients bit for bit, exit 0) while collwatch's side
// fails: the collector is down, the agent is SIGKILLed mid-run, the ring folder cannot
// be made, /dev/shm is full, the ring would pass the file size limit, the ring folder is
// unsafe. Where recording is impossible each rank warns exactly once and runs unrecorded.
// Threading: single-threaded test code driving child processes.
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "ring/ring_reader.h"
#include "tests/support/subprocess.h"
#include "tests/support/test_time.h"
#include "ring/settings.h"

namespace collwatch {
namespace {

using testing::Subprocess;
using testing::Scaled;
using testing::TempDir;

constexpr int kRanks = 4;
constexpr char kJob[] = "never-hurts";
constexpr int kCannotSetUp = 77;  // collwatch_full_tmpfs: no namespace to mount in

std::string ReadFile(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
}

void Sleep(double seconds) { std::this_thread::sleep_for(std::chrono::duration<double>(seconds)); }

// The lines of `text` that contain `needle`.
std::vector<std::string> LinesWith(const std::string& text, const std::string& needle) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.find(needle) != std::string::npos) lines.push_back(line);
  }
  return lines;
}

// What a trainer run leaves to compare: its exit code, the "rank R step S loss L" part of
// every loss line (the step time differs run to run), the dump of the final parameters
// and gradients, and its stderr.
struct TrainerOutcome {
  int exit_code = -1;
  std::vector<std::string> losses;
  std::string dump;
  std::string stderr_text;
};

// One trainer run in its own folder; `wrapper` goes before the trainer's command line.
class TrainerRun {
 public:
  explicit TrainerRun(std::map<std::string, std::string> env, const std::vector<std::string>& wrapper = {}) {
    std::vector<std::string> argv = wrapper;
    for (const std::string& arg :
         {std::string(COLLWATCH_TRAINER_PATH), std::string("--nproc"), std::to_string(kRanks), std::string("--scenario"),
          std::string("clean"), std::string("--steps"), std::string("8"), std::string("--batch"), std::string("2"),
          std::string("--hidden"), std::string("32"), std::string("--layers"), std::string("2"),
          std::string("--vision-layers"), std::string("1"), std::string("--seq"), std::string("16"),
          std::string("--vocab"), std::string("32"), std::string("--dump-params"), Path("params.bin")}) {
      argv.push_back(arg);
    }
    env["COLLWATCH_CPU_NCCL_SHM_DIR"] = dir_.path();
    process_ = std::make_unique<Subprocess>(argv, env, Path("stdout.log"), Path("stderr.log"));
  }

  Subprocess& process() { return *process_; }
  std::string Path(const std::string& name) const { return dir_.path() + "/" + name; }

  TrainerOutcome Finish(double seconds = 120) {
    TrainerOutcome outcome;
    outcome.exit_code = process_->Wait(seconds);
    if (outcome.exit_code < 0) process_->KillGroup();
    std::istringstream lines(ReadFile(Path("stdout.log")));
    for (std::string line; std::getline(lines, line);) {
      const size_t time = line.find(" time_ms ");
      if (line.rfind("rank ", 0) == 0 && line.find(" loss ") != std::string::npos && time != std::string::npos) {
        outcome.losses.push_back(line.substr(0, time));
      }
    }
    std::sort(outcome.losses.begin(), outcome.losses.end());
    outcome.dump = ReadFile(Path("params.bin"));
    outcome.stderr_text = ReadFile(Path("stderr.log"));
    return outcome;
  }

 private:
  TempDir dir_;
  std::unique_ptr<Subprocess> process_;
};

// The preload's environment, recording into `ring_dir`.
std::map<std::string, std::string> PreloadEnv(const std::string& ring_dir) {
  return {{"LD_PRELOAD", COLLWATCH_PRELOAD_LIST},
          {"NVTX_INJECTION64_PATH", COLLWATCH_PRELOAD_PATH},
          {"COLLWATCH_RING_DIR", ring_dir},
          {"COLLWATCH_JOB_ID", kJob}};
}

// The agent the preload started (its pid is in the lock file); SIGKILLed when the test
// ends, as it lives in its own session, out of reach of the job's process group.
class SpawnedAgent {
 public:
  explicit SpawnedAgent(std::string ring_dir) : ring_dir_(std::move(ring_dir)) {}
  ~SpawnedAgent() {
    if (const pid_t agent = Pid(); agent > 0) kill(agent, SIGKILL);
  }
  pid_t Pid() const {
    std::ifstream lock(ring_dir_ + "/agent." + kJob + ".lock");
    pid_t pid = 0;
    lock >> pid;
    return pid;
  }
  std::string Log() const { return ReadFile(ring_dir_ + "/agent." + std::string(kJob) + ".log"); }

 private:
  std::string ring_dir_;
};

// True once `pid` has ended (a zombie has: only its parent has not reaped it yet).
bool GoneOrZombie(pid_t pid) {
  for (int i = 0; i < Scaled(200); ++i) {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
    const size_t paren = text.rfind(')');
    if (text.empty() || (paren != std::string::npos && text.compare(paren + 1, 3, " Z ") == 0)) return true;
    Sleep(0.01);
  }
  return false;
}

// The pipes and sockets `pid` holds open ("pipe:[inode]", "socket:[inode]").
std::set<std::string> PipesAndSockets(pid_t pid) {
  std::set<std::string> found;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd", error)) {
    const std::string target = std::filesystem::read_symlink(entry.path(), error).string();
    if (target.rfind("pipe:", 0) == 0 || target.rfind("socket:", 0) == 0) found.insert(target);
  }
  return found;
}

// `pid` and its children.
std::vector<pid_t> ProcessAndChildren(pid_t pid) {
  std::vector<pid_t> pids = {pid};
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", error)) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat(entry.path() / "stat");
    const std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
    const size_t paren = text.rfind(')');
    if (paren == std::string::npos) continue;
    std::istringstream fields(text.substr(paren + 2));
    std::string state;
    pid_t parent = 0;
    fields >> state >> parent;
    if (parent == pid) pids.push_back(static_cast<pid_t>(std::stoi(name)));
  }
  return pids;
}

// Records in every ring of `dir`, by rank.
std::map<int, uint64_t> RecordsByRank(const std::string& dir) {
  std::map<int, uint64_t> records;
  auto paths = ListRingFiles(dir);
  if (!paths.ok()) return records;
  for (const std::string& path : *paths) {
    auto reader = RingReader::Open(path);
    if (reader.ok()) records[(*reader)->identity().rank] = (*reader)->records_written();
  }
  return records;
}

// The reference run (the same training without collwatch) is made once: by ctest's
// fixture NeverHurtsBaseline.Record into COLLWATCH_NEVER_HURTS_BASELINE, which the tests
// then read; run by hand without that variable, each test process makes its own.
std::string BaselineDir() {
  const char* dir = SettingIfSet(Setting::kNeverHurtsBaseline);
  return dir != nullptr ? dir : "";
}

TrainerOutcome RunPlain() {
  TrainerRun run({});
  return run.Finish();
}

void SaveBaseline(const TrainerOutcome& outcome, const std::string& dir) {
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/exit_code") << outcome.exit_code;
  std::ofstream losses(dir + "/losses");
  for (const std::string& line : outcome.losses) losses << line << "\n";
  std::ofstream(dir + "/params.bin", std::ios::binary) << outcome.dump;
  std::ofstream(dir + "/stderr") << outcome.stderr_text;
}

TrainerOutcome LoadBaseline(const std::string& dir) {
  TrainerOutcome outcome;
  std::ifstream(dir + "/exit_code") >> outcome.exit_code;
  std::istringstream losses(ReadFile(dir + "/losses"));
  for (std::string line; std::getline(losses, line);) outcome.losses.push_back(line);
  outcome.dump = ReadFile(dir + "/params.bin");
  outcome.stderr_text = ReadFile(dir + "/stderr");
  return outcome;
}

TEST(NeverHurtsBaseline, Record) {
  const TrainerOutcome plain = RunPlain();
  EXPECT_EQ(plain.exit_code, 0) << plain.stderr_text;
  if (!BaselineDir().empty()) SaveBaseline(plain, BaselineDir());
}

// Waits (up to a minute, while the job runs) until every rank has a ring and the agent
// the preload started runs (its log says "shipping rings").
bool WaitForRunningAgent(TrainerRun& run, const SpawnedAgent& agent, const std::string& rings) {
  for (int i = 0; i < Scaled(3000) && run.process().Running(); ++i) {
    if (agent.Pid() > 0 && RecordsByRank(rings).size() == static_cast<size_t>(kRanks) &&
        agent.Log().find("shipping rings") != std::string::npos) {
      return true;
    }
    Sleep(0.02);
  }
  return false;
}

class NeverHurtsTest : public ::testing::Test {
 protected:
  static const TrainerOutcome& Plain() {
    static const TrainerOutcome plain = BaselineDir().empty() ? RunPlain() : LoadBaseline(BaselineDir());
    return plain;
  }

  static void SetUpTestSuite() {
    const TrainerOutcome& plain = Plain();
    ASSERT_EQ(plain.exit_code, 0) << plain.stderr_text;
    ASSERT_EQ(plain.losses.size(), static_cast<size_t>(kRanks * 8)) << "a loss line per rank and step";
    ASSERT_FALSE(plain.dump.empty()) << "no parameter dump";
  }

  // Same exit, same losses, same parameters and gradients, bit for bit.
  static void ExpectSameTraining(const TrainerOutcome& outcome) {
    EXPECT_EQ(outcome.exit_code, 0) << outcome.stderr_text;
    EXPECT_EQ(outcome.losses, Plain().losses);
    EXPECT_EQ(outcome.dump.size(), Plain().dump.size());
    EXPECT_TRUE(outcome.dump == Plain().dump) << "final parameters or gradients differ";
  }

  // Each rank printed `warning` once, and collwatch printed nothing else.
  static void ExpectOneWarningPerRank(const TrainerOutcome& outcome, const std::string& warning) {
    const std::vector<std::string> ours = LinesWith(outcome.stderr_text, "collwatch:");
    EXPECT_EQ(ours.size(), static_cast<size_t>(kRanks)) << outcome.stderr_text;
    for (const std::string& line : ours) {
      EXPECT_NE(line.find(warning), std::string::npos) << line;
      EXPECT_NE(line.find("not recorded"), std::string::npos) << line;
    }
  }

  static void ExpectNoCollwatchOutput(const TrainerOutcome& outcome) {
    EXPECT_TRUE(LinesWith(outcome.stderr_text, "collwatch:").empty()) << outcome.stderr_text;
  }

  TempDir dir_;  // rings and collector output of the collwatch side
};

// The collector is down: the agent the preload starts cannot reach anything and says so
// in its own log; the ranks record on, silently, and train exactly as without collwatch.
// The agent holds none of the job's descriptors.
TEST_F(NeverHurtsTest, CollectorDown) {
  const std::string rings = dir_.path() + "/rings";
  SpawnedAgent agent(rings);
  std::map<std::string, std::string> env = PreloadEnv(rings);
  const testing::DeadLoopbackPort never_a_collector;
  env["COLLWATCH_COLLECTOR"] = never_a_collector.address();
  env["COLLWATCH_AGENT"] = COLLWATCH_CLI_PATH;
  TrainerRun run(env);
  // While the job runs, the agent holds none of its pipes or sockets: a launcher reading
  // a pipe to its end, or a port to be bound again, would otherwise wait for the agent.
  // The job is held (SIGSTOP) while they are compared, so the comparison lands mid-run
  // however loaded the machine is; the agent must have started (its log says so), else
  // it could still be between fork and exec.
  ASSERT_TRUE(WaitForRunningAgent(run, agent, rings)) << agent.Log();
  ASSERT_EQ(kill(-run.process().pid(), SIGSTOP), 0);
  const std::set<std::string> agent_holds = PipesAndSockets(agent.Pid());
  std::vector<pid_t> job = ProcessAndChildren(run.process().pid());
  ASSERT_TRUE(run.process().Running()) << "the job ended before its descriptors were compared";
  EXPECT_EQ(job.size(), static_cast<size_t>(kRanks + 1)) << "the launcher and its ranks";
  for (const pid_t process : job) {
    for (const std::string& held : PipesAndSockets(process)) {
      EXPECT_EQ(agent_holds.count(held), 0u) << "the agent inherited " << held << " of process " << process;
    }
  }
  ASSERT_EQ(kill(-run.process().pid(), SIGCONT), 0);
  const TrainerOutcome outcome = run.Finish();
  ExpectSameTraining(outcome);
  ExpectNoCollwatchOutput(outcome);
  const std::map<int, uint64_t> records = RecordsByRank(rings);
  EXPECT_EQ(records.size(), static_cast<size_t>(kRanks));
  for (const auto& [rank, count] : records) EXPECT_GT(count, 100u) << "rank " << rank << " stopped recording";
  for (int i = 0; i < Scaled(100) && agent.Log().find("unreachable") == std::string::npos; ++i) Sleep(0.05);
  EXPECT_NE(agent.Log().find("unreachable"), std::string::npos) << agent.Log();
}

// The agent is SIGKILLed while it ships the running job's records to a live collector.
TEST_F(NeverHurtsTest, AgentKilledMidRun) {
  const std::string rings = dir_.path() + "/rings";
  const std::string address = "127.0.0.1:" + std::to_string(testing::FreeLoopbackPort());
  Subprocess collector({COLLWATCH_CLI_PATH, "collector", "--listen", address, "--out", dir_.path() + "/out", "--job",
                        kJob},
                       {}, "", dir_.path() + "/collector.log");
  SpawnedAgent agent(rings);
  std::map<std::string, std::string> env = PreloadEnv(rings);
  env["COLLWATCH_COLLECTOR"] = address;
  env["COLLWATCH_AGENT"] = COLLWATCH_CLI_PATH;
  TrainerRun run(env);
  // The job is held (SIGSTOP) once every rank records, the agent ships some of it, is
  // killed, and the job goes on (SIGCONT): the kill lands mid-run however loaded the
  // machine is.
  ASSERT_TRUE(WaitForRunningAgent(run, agent, rings)) << agent.Log();
  ASSERT_EQ(kill(-run.process().pid(), SIGSTOP), 0);
  const std::string traces = dir_.path() + "/out/" + kJob;
  bool shipping = false;
  for (int i = 0; i < Scaled(1500) && !shipping; ++i) {
    shipping = std::filesystem::exists(traces) && !std::filesystem::is_empty(traces);
    if (!shipping) Sleep(0.02);
  }
  ASSERT_TRUE(shipping) << "the agent shipped nothing in 30 s: " << agent.Log();
  ASSERT_TRUE(run.process().Running());
  ASSERT_EQ(kill(agent.Pid(), SIGKILL), 0);
  EXPECT_TRUE(GoneOrZombie(agent.Pid())) << "the agent survived SIGKILL";
  ASSERT_EQ(kill(-run.process().pid(), SIGCONT), 0);
  const TrainerOutcome outcome = run.Finish();
  ExpectSameTraining(outcome);
  ExpectNoCollwatchOutput(outcome);
  collector.KillGroup();
}

// The ring folder cannot be made: its parent is a regular file. (Not a 0500 folder: root,
// as CI containers often run, writes into one anyway; ENOTDIR stops root too.)
TEST_F(NeverHurtsTest, RingFolderCannotBeCreated) {
  std::ofstream(dir_.path() + "/a-file") << "not a folder";
  TrainerRun run(PreloadEnv(dir_.path() + "/a-file/rings"));
  const TrainerOutcome outcome = run.Finish();
  ExpectSameTraining(outcome);
  ExpectOneWarningPerRank(outcome, "cannot use ring folder " + dir_.path() + "/a-file/rings: Not a directory");
}

// A ring folder that lets other users in (someone made it 0755 first) is refused, not used.
TEST_F(NeverHurtsTest, RingFolderOpenToOthers) {
  const std::string rings = dir_.path() + "/rings";
  ASSERT_EQ(mkdir(rings.c_str(), 0700), 0);
  ASSERT_EQ(chmod(rings.c_str(), 0755), 0);
  TrainerRun run(PreloadEnv(rings));
  const TrainerOutcome outcome = run.Finish();
  ExpectSameTraining(outcome);
  ExpectOneWarningPerRank(outcome, "lets other users in");
  EXPECT_TRUE(std::filesystem::is_empty(rings));
}

// /dev/shm is full. Honestly so: the ring folder is on a real tmpfs, filled to its last
// page before the job starts (collwatch_full_tmpfs mounts it in a private mount namespace,
// which needs no root where unprivileged user namespaces are allowed). Ring creation
// then fails before anything is reserved: the free space is below the smallest ring.
TEST_F(NeverHurtsTest, ShmFull) {
  const std::string mountpoint = dir_.path() + "/tiny-shm";
  ASSERT_EQ(mkdir(mountpoint.c_str(), 0700), 0);
  TrainerRun run(PreloadEnv(mountpoint + "/rings"), {COLLWATCH_FULL_TMPFS_PATH, mountpoint, "rings", "--"});
  const TrainerOutcome outcome = run.Finish();
  if (outcome.exit_code == kCannotSetUp) {
    GTEST_SKIP() << "no mount namespace here (unprivileged user namespaces off?): " << outcome.stderr_text;
  }
  ExpectSameTraining(outcome);
  // The preload sees the free space before it reserves anything, and says what to do.
  ExpectOneWarningPerRank(outcome, "cannot create ring");
  EXPECT_EQ(LinesWith(outcome.stderr_text, "a ring needs at least 0.9 MiB; raise the container's shm size").size(),
            static_cast<size_t>(kRanks))
      << outcome.stderr_text;
}

// The job runs under a file size limit (ulimit -f) ample for its own files (the CPU NCCL
// backend's 12 MiB segment) but smaller than the ring asked for (4 lanes of 256 Ki
// records: 128 MiB): making that ring would earn the rank SIGXFSZ, which kills. No ring
// instead.
TEST_F(NeverHurtsTest, FileSizeLimitBelowTheRing) {
  rlimit previous{};
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &previous), 0);
  rlimit low = previous;
  low.rlim_cur = 64 << 20;
  std::map<std::string, std::string> env = PreloadEnv(dir_.path() + "/rings");
  env["COLLWATCH_RING_RECORDS"] = "262144";
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &low), 0);
  TrainerRun run(env);  // the child inherits the limit
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &previous), 0);
  const TrainerOutcome outcome = run.Finish();
  ExpectSameTraining(outcome);
  ExpectOneWarningPerRank(outcome, "file size limit");
}

// The control: recording works in the same setup, so the runs above compare like with like.
TEST_F(NeverHurtsTest, RecordingNormally) {
  const std::string rings = dir_.path() + "/rings";
  TrainerRun run(PreloadEnv(rings));
  const TrainerOutcome outcome = run.Finish();
  ExpectSameTraining(outcome);
  ExpectNoCollwatchOutput(outcome);
  EXPECT_EQ(RecordsByRank(rings).size(), static_cast<size_t>(kRanks));
}

}  // namespace
}  // namespace collwatch
