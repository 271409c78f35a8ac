// Reading what a run left behind, for the end-to-end tests: a whole file, or its JSON
// (discarded, not thrown, when it does not parse: the tests then say what is missing).
// Threading: pure functions.
#ifndef COLLWATCH_TESTS_SUPPORT_READ_FILES_H_
#define COLLWATCH_TESTS_SUPPORT_READ_FILES_H_

#include <fstream>
#include <iterator>
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

}  // namespace collwatch::testing

#endif  // COLLWATCH_TESTS_SUPPORT_READ_FILES_H_
