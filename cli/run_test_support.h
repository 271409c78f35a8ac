// Test-only helpers of collwatch_run_test: temporary paths, whole files, waiting for a
// child. Threading: single-threaded.
#ifndef COLLWATCH_CLI_RUN_TEST_SUPPORT_H_
#define COLLWATCH_CLI_RUN_TEST_SUPPORT_H_

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>

#include "cli/command_process.h"
#include "gtest/gtest.h"

namespace collwatch::testing {

// A path in the test's temporary folder, unique to this process.
inline std::string TempPath(const std::string& name) {
  return (std::filesystem::path(::testing::TempDir()) / (name + "-" + std::to_string(getpid()))).string();
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream file(path);
  std::stringstream contents;
  contents << file.rdbuf();
  return contents.str();
}

// Polls ExitStatusIfEnded until the child ends (the test's time limit guards a hang).
inline int WaitForExit(pid_t command) {
  while (true) {
    if (const std::optional<int> status = ExitStatusIfEnded(command); status.has_value()) return *status;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

}  // namespace collwatch::testing

#endif  // COLLWATCH_CLI_RUN_TEST_SUPPORT_H_
