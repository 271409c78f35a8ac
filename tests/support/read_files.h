// Reading what a run left behind, for the end-to-end tests: a whole file, or its JSON
// (discarded, not thrown, when it does not parse: the tests then say what is missing);
// and the marked lines of the test programs they run.
// Threading: pure functions.
#ifndef COLLWATCH_TESTS_SUPPORT_READ_FILES_H_
#define COLLWATCH_TESTS_SUPPORT_READ_FILES_H_

#include <fstream>
#include <iterator>
#include <sstream>
#include <string>

#include "nlohmann/json.hpp"

namespace collwatch::testing {

// The file's bytes ("" when it cannot be read).
inline std::string ReadFile(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
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
