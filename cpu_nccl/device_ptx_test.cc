// The CUDA mode's PTX (stream-hold kernel, move kernel) assembles for the GPUs the
// mode runs on, checked with ptxas where the CUDA toolkit is installed (no GPU needed).
// Threading: single-threaded test.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "cpu_nccl/device_move_kernel.h"
#include "cpu_nccl/stream_hold_kernel.h"

namespace collwatch::cpu_nccl {
namespace {

constexpr char kPtxas[] = "/usr/local/cuda/bin/ptxas";

// Runs ptxas on `ptx` for `arch`; true when it assembles.
bool Assembles(const char* ptx, const char* arch) {
  char path[] = "/tmp/collwatch-ptx-XXXXXX";
  const int fd = mkstemp(path);
  if (fd < 0) return false;
  const size_t length = std::strlen(ptx);
  const bool written = write(fd, ptx, length) == static_cast<ssize_t>(length);
  close(fd);
  const std::string command =
      std::string(kPtxas) + " -arch=" + arch + " " + path + " -o /dev/null 2>&1";
  const bool ok = written && std::system(command.c_str()) == 0;
  unlink(path);
  return ok;
}

TEST(DevicePtxTest, MoveModuleNamesItsKernel) {
  const std::string entry = std::string(".entry ") + kMoveKernelName + "(";
  EXPECT_NE(std::strstr(kMovePtx, entry.c_str()), nullptr);
}

TEST(DevicePtxTest, KernelsAssembleForTuringAndHopper) {
  if (access(kPtxas, X_OK) != 0) GTEST_SKIP() << "no ptxas at " << kPtxas;
  // The PTX targets sm_70; CUDA 13's ptxas assembles from sm_75 on (the driver JITs it).
  for (const char* arch : {"sm_75", "sm_90"}) {
    EXPECT_TRUE(Assembles(kStreamHoldPtx, arch)) << arch;
    EXPECT_TRUE(Assembles(kMovePtx, arch)) << arch;
  }
}

}  // namespace
}  // namespace collwatch::cpu_nccl
