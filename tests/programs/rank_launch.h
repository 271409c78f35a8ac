// Shared by the NCCL test programs: start N rank processes (or N processes of several
// ranks) of the same program, and hand rank 0's ncclUniqueId to the others through a
// file. Header-only; single-threaded.
#ifndef COLLWATCH_TESTS_PROGRAMS_RANK_LAUNCH_H_
#define COLLWATCH_TESTS_PROGRAMS_RANK_LAUNCH_H_

#include <nccl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace collwatch::programs {

// Runs `argv` again as processes 0..nproc-1, each child's environment set by
// `set_env(index)`, and returns the worst exit code (128 + signal for a killed one).
template <typename SetEnv>
inline int LaunchCopies(int nproc, char** argv, SetEnv set_env) {
  std::vector<pid_t> children;
  for (int index = 0; index < nproc; ++index) {
    const pid_t child = fork();
    if (child < 0) return 1;
    if (child == 0) {
      set_env(index);
      execv("/proc/self/exe", argv);
      _exit(127);
    }
    children.push_back(child);
  }
  int worst = 0;
  for (pid_t child : children) {
    int status = 0;
    waitpid(child, &status, 0);
    const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (code > worst) worst = code;
  }
  return worst;
}

// Ranks 0..nproc-1, one per process (RANK, LOCAL_RANK, WORLD_SIZE set).
inline int LaunchRanks(int nproc, char** argv) {
  return LaunchCopies(nproc, argv, [nproc](int rank) {
    setenv("RANK", std::to_string(rank).c_str(), 1);
    setenv("LOCAL_RANK", std::to_string(rank).c_str(), 1);
    setenv("WORLD_SIZE", std::to_string(nproc).c_str(), 1);
  });
}

// Processes that may hold several ranks each: no RANK, LOCAL_RANK or WORLD_SIZE (as under
// a launcher that knows nothing of ranks); `index_env` numbers them 0..nproc-1.
inline int LaunchProcesses(int nproc, char** argv, const char* index_env) {
  return LaunchCopies(nproc, argv, [index_env](int index) {
    unsetenv("RANK");
    unsetenv("LOCAL_RANK");
    unsetenv("WORLD_SIZE");
    setenv(index_env, std::to_string(index).c_str(), 1);
  });
}

// Rank 0 creates the id and publishes it atomically (write, then rename); the others
// wait for the file, up to a minute. Exits the process on failure.
inline ncclUniqueId ExchangeUniqueId(int rank, const std::string& dir) {
  ncclUniqueId id{};
  const std::string path = dir + "/unique_id";
  if (rank == 0) {
    const std::string tmp = path + ".tmp";
    FILE* file = nullptr;
    if (ncclGetUniqueId(&id) != ncclSuccess || (file = std::fopen(tmp.c_str(), "wb")) == nullptr ||
        std::fwrite(&id, sizeof id, 1, file) != 1 || std::fclose(file) != 0 ||
        std::rename(tmp.c_str(), path.c_str()) != 0) {
      std::fprintf(stderr, "rank 0: cannot publish the unique id in %s\n", dir.c_str());
      std::exit(12);
    }
    return id;
  }
  for (int attempt = 0; attempt < 60000; ++attempt) {
    if (FILE* file = std::fopen(path.c_str(), "rb")) {
      const bool read = std::fread(&id, sizeof id, 1, file) == 1;
      std::fclose(file);
      if (read) return id;
    }
    usleep(1000);
  }
  std::fprintf(stderr, "rank %d: no unique id after 60 s\n", rank);
  std::exit(13);
}

}  // namespace collwatch::programs

#endif  // COLLWATCH_TESTS_PROGRAMS_RANK_LAUNCH_H_
