// A ring file already at the name a new process's ring takes (its pid reused under the
// default job name "local") is another writer's: the new process keeps it aside under a
// name every reader still finds, says so in one line, and records into its own ring.
// Threading: single-threaded test code; forks one child that execs an NCCL program.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ring/ring_reader.h"
#include "tests/support/read_files.h"
#include "tests/support/subprocess.h"

extern char** environ;

namespace collwatch::kept_ring_test {
namespace {

using ::testing::HasSubstr;
using testing::ReadFile;
using testing::Subprocess;
using testing::TempDir;

// This process's environment with `extra` set over it, as execve wants it.
std::vector<std::string> EnvironmentWith(const std::map<std::string, std::string>& extra) {
  std::vector<std::string> env;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string text = *entry;
    if (!extra.count(text.substr(0, text.find('=')))) env.push_back(text);
  }
  for (const auto& [name, value] : extra) env.push_back(name + "=" + value);
  return env;
}

std::map<std::string, std::string> RankEnv(const std::string& rings, const std::string& job, const std::string& shm) {
  return {{"LD_PRELOAD", COLLWATCH_PRELOAD_LIST}, {"COLLWATCH_RING_DIR", rings}, {"COLLWATCH_JOB_ID", job},
          {"RANK", "0"}, {"LOCAL_RANK", "0"}, {"WORLD_SIZE", "1"}, {"COLLWATCH_CPU_NCCL_SHM_DIR", shm}};
}

std::vector<std::string> Rings(const std::string& dir) {
  absl::StatusOr<std::vector<std::string>> paths = ListRingFiles(dir);
  return paths.ok() ? *paths : std::vector<std::string>{};
}

TEST(KeptRingTest, ARingOfAnotherJobAndPidAtTheNewProcesssNameIsKeptAsideAndSaid) {
  TempDir dir;
  const std::string first = dir.path() + "/first", rings = dir.path() + "/rings";
  ASSERT_EQ(mkdir(first.c_str(), 0700), 0);
  ASSERT_EQ(mkdir(rings.c_str(), 0700), 0);
  const std::vector<std::string> program = {COLLWATCH_NCCL_RANKS_PATH, "1", "all", dir.path()};

  // Another job's ring, of a process that has ended.
  Subprocess earlier(program, RankEnv(first, "other", dir.path()));
  ASSERT_EQ(earlier.Wait(60), 0);
  ASSERT_EQ(Rings(first).size(), 1u);
  const std::string earlier_ring = Rings(first).front();
  absl::StatusOr<std::unique_ptr<RingReader>> earlier_reader = RingReader::Open(earlier_ring);
  ASSERT_TRUE(earlier_reader.ok()) << earlier_reader.status();
  const RingIdentity earlier_identity = (*earlier_reader)->identity();
  const uint64_t earlier_records = (*earlier_reader)->records_written();
  ASSERT_GT(earlier_records, 0u);
  earlier_reader->reset();

  // A child whose pid is known before it records: its ring will be local.<host>.<pid>.ring.
  std::vector<std::string> argv_text = program;
  std::vector<std::string> env_text = EnvironmentWith(RankEnv(rings, "local", dir.path()));
  std::vector<char*> argv, envp;
  for (std::string& arg : argv_text) argv.push_back(arg.data());
  for (std::string& entry : env_text) envp.push_back(entry.data());
  argv.push_back(nullptr);
  envp.push_back(nullptr);
  const std::string err_path = dir.path() + "/child.err";
  int go[2];
  ASSERT_EQ(pipe(go), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    const int err = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (err >= 0) dup2(err, 2);
    close(go[1]);
    char byte = 0;
    if (read(go[0], &byte, 1) != 1) _exit(126);
    execve(argv[0], argv.data(), envp.data());
    _exit(127);
  }
  close(go[0]);
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  for (char* c = host; *c != '\0'; ++c) {
    if (*c == '/') *c = '_';
  }
  const std::string name = rings + "/local." + host + "." + std::to_string(child) + ".ring";
  std::filesystem::copy_file(earlier_ring, name);
  ASSERT_EQ(write(go[1], "g", 1), 1);
  close(go[1]);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << ReadFile(err_path);

  // Both rings are there: the new process's at its name, the earlier one beside it.
  const std::string kept = rings + "/local." + host + "." + std::to_string(child) + ".kept-" +
                           std::to_string(earlier_identity.start_realtime_ns) + ".ring";
  EXPECT_THAT(Rings(rings), ::testing::UnorderedElementsAre(name, kept));
  const std::string err = ReadFile(err_path);
  EXPECT_THAT(err, HasSubstr("collwatch: kept " + name + " aside as " + std::filesystem::path(kept).filename().string()))
      << err;
  EXPECT_THAT(err, HasSubstr("job other, pid " + std::to_string(earlier_identity.pid))) << err;
  size_t lines = 0;
  for (size_t at = err.find("collwatch: "); at != std::string::npos; at = err.find("collwatch: ", at + 1)) ++lines;
  EXPECT_EQ(lines, 1u) << err;

  absl::StatusOr<std::unique_ptr<RingReader>> ours = RingReader::Open(name);
  ASSERT_TRUE(ours.ok()) << ours.status();
  EXPECT_EQ((*ours)->identity().pid, child);
  EXPECT_EQ((*ours)->identity().job, "local");
  absl::StatusOr<std::unique_ptr<RingReader>> aside = RingReader::Open(kept);
  ASSERT_TRUE(aside.ok()) << aside.status();
  EXPECT_EQ((*aside)->identity().job, "other");
  EXPECT_EQ((*aside)->identity().pid, earlier_identity.pid);
  EXPECT_EQ((*aside)->records_written(), earlier_records) << "never shipped: every record still there";

  // `collwatch dump` reads the kept ring, and finds it in the folder by its job.
  Subprocess dump({COLLWATCH_CLI_PATH, "dump", "--job", "other", rings}, {}, dir.path() + "/dump.out",
                  dir.path() + "/dump.err");
  EXPECT_EQ(dump.Wait(30), 0) << ReadFile(dir.path() + "/dump.err");
  EXPECT_THAT(ReadFile(dir.path() + "/dump.out"), HasSubstr(std::to_string(earlier_identity.pid)));
  EXPECT_THAT(ReadFile(dir.path() + "/dump.out"), HasSubstr("all-reduce"));
}

}  // namespace
}  // namespace collwatch::kept_ring_test
