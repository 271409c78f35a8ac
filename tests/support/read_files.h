// Reading what a run left behind, for the end-to-end tests: a whole file, or its JSON
// (discarded, not thrown, when it does not parse: the tests then say what is missing);
// the marked lines of the test programs they run; and a wait for words in a log.
// Threading: single-threaded test code.
#ifndef COLLWATCH_TESTS_SUPPORT_READ_FILES_H_
#define COLLWATCH_TESTS_SUPPORT_READ_FILES_H_

#include <chrono>
#include <fstream>
#include <functional>
#include <iterator>
#include <sstream>
#include <string>
#include <thread>

#include "nlohmann/json.hpp"
#include "tests/support/test_time.h"

namespace collwatch::testing {

// The file's bytes ("" when it cannot be read).
inline std::string ReadFile(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
}

// Polls `path` until it holds `text` (a collector's "listening on"), for at most
// `seconds` of the default build (scaled), or until `alive` says its writer has ended.
// Returns the file as last read.
inline std::string WaitForText(const std::string& path, const std::string& text, double seconds,
                               const std::function<bool()>& alive = {}) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(Scaled(seconds));
  std::string contents = ReadFile(path);
  while (contents.find(text) == std::string::npos && std::chrono::steady_clock::now() < deadline &&
         (!alive || alive())) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    contents = ReadFile(path);
  }
  return contents;
}

inline nlohmann::json ReadJson(const std::string& path) {
  return nlohmann::json::parse(ReadFile(path), nullptr, /*allow_exceptions=*/false);
}

// The 1-based number of the line of a test program that ends in the comment marker
// "at: <marker>" ("# at: late", "// at: read"); -1 when none does.
inline int MarkedLine(const std::string& path, const std::string& marker) {
  std::istringstream text(ReadFile(path));
  const std::string ending = " at: " + marker;
  std::string line;
  for (int number = 1; std::getline(text, line); ++number) {
    if (line.size() >= ending.size() && line.compare(line.size() - ending.size(), ending.size(), ending) == 0) {
      return number;
    }
  }
  return -1;
}

}  // namespace collwatch::testing

#endif  // COLLWATCH_TESTS_SUPPORT_READ_FILES_H_
