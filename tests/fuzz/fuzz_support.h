// What the libFuzzer targets share. Include it from the fuzzer's one source file: it
// defines LLVMFuzzerInitialize.
#ifndef COLLWATCH_TESTS_FUZZ_FUZZ_SUPPORT_H_
#define COLLWATCH_TESTS_FUZZ_FUZZ_SUPPORT_H_

#include <stdlib.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "google/protobuf/stubs/logging.h"

namespace collwatch::fuzz {

// A folder for the fuzzer's files, in memory where /dev/shm exists, removed at exit.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& name) {
    const std::string base = std::filesystem::exists("/dev/shm") ? "/dev/shm/" : "/tmp/";
    std::string pattern = base + "collwatch-" + name + "-fuzz-XXXXXX";
    if (mkdtemp(pattern.data()) == nullptr) std::abort();
    root_ = pattern;
  }
  ~ScratchDir() {
    std::error_code error;
    std::filesystem::remove_all(root_, error);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  const std::string& root() const { return root_; }

 private:
  std::string root_;
};

}  // namespace collwatch::fuzz

// Malformed input is the point: protobuf's warnings about it would drown the fuzzer's output.
extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

#endif  // COLLWATCH_TESTS_FUZZ_FUZZ_SUPPORT_H_
