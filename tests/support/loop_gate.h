// The test's side of nccl_ranks's loop gate (COLLWATCH_TEST_LOOP_GATE): it lets the job
// run up to a step and waits until every rank stands there, so that a fault falls at a
// known point of a job whose length is a count. Threading: single-threaded test code.
#ifndef COLLWATCH_TESTS_SUPPORT_LOOP_GATE_H_
#define COLLWATCH_TESTS_SUPPORT_LOOP_GATE_H_

#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>
#include <utility>

#include "tests/support/test_time.h"

namespace collwatch::testing {

class LoopGate {
 public:
  LoopGate(std::string path, int ranks) : path_(std::move(path)), ranks_(ranks) {}

  // The value for COLLWATCH_TEST_LOOP_GATE. Until Open, no rank runs a step.
  const std::string& path() const { return path_; }

  // Lets every rank run up to `steps` steps (through a rename: a rank never reads half).
  void Open(int steps) const {
    const std::string partial = path_ + ".partial";
    std::ofstream(partial) << steps << "\n";
    std::rename(partial.c_str(), path_.c_str());
  }

  // True once every rank waits at `step`, i.e. has made exactly `step` calls of the loop;
  // false after Scaled(seconds).
  bool AwaitAll(int step, double seconds = 60) const {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(Scaled(seconds));
    while (std::chrono::steady_clock::now() < deadline) {
      int there = 0;
      for (int rank = 0; rank < ranks_; ++rank) {
        int reached = -1;
        std::ifstream(path_ + "." + std::to_string(rank)) >> reached;
        there += reached == step;
      }
      if (there == ranks_) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }

 private:
  std::string path_;
  int ranks_;
};

}  // namespace collwatch::testing

#endif  // COLLWATCH_TESTS_SUPPORT_LOOP_GATE_H_
