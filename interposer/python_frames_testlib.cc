// Test library for python_frames: loaded by tests/interposer/python_frames_calls.py through
// ctypes, it captures and describes the calling thread's Python frames from C, as the
// hooks will. Threading: any thread; no shared state of its own.
#include <time.h>

#include <cstddef>
#include <cstdio>

#include "interposer/python_frames.h"

namespace {
constexpr size_t kMaxFrames = 128;
}  // namespace

// Writes "file\tfunction\tline\n" per frame, innermost first; returns the frame count.
// When not ready: "unready\t<why>\n" and 0.
extern "C" __attribute__((visibility("default"))) int collwatch_test_python_frames(char* out, size_t size) {
  const char* why = nullptr;
  if (!collwatch::PythonFramesReady(&why)) {
    std::snprintf(out, size, "unready\t%s\n", why);
    return static_cast<int>(collwatch::CapturePythonFrames(nullptr, 0));
  }
  collwatch::RawPythonFrame frames[kMaxFrames];
  const size_t count = collwatch::CapturePythonFrames(frames, kMaxFrames);
  size_t used = 0;
  if (size > 0) out[0] = '\0';
  for (size_t i = 0; i < count && used < size; ++i) {
    char file[512];
    char function[256];
    int32_t line = 0;
    if (!collwatch::DescribePythonFrame(frames[i], file, sizeof file, function, sizeof function, &line)) {
      std::snprintf(file, sizeof file, "?");
      std::snprintf(function, sizeof function, "?");
    }
    const int written = std::snprintf(out + used, size - used, "%s\t%s\t%d\n", file, function, line);
    if (written < 0) break;
    used += static_cast<size_t>(written);
  }
  return static_cast<int>(count);
}

extern "C" __attribute__((visibility("default"))) int collwatch_test_python_version() {
  return collwatch::PythonVersion();
}

// Mean nanoseconds of one CapturePythonFrames (up to 64 frames) over `iterations`; the
// frame count of the last one in `*depth`.
extern "C" __attribute__((visibility("default"))) double collwatch_test_capture_ns(int iterations, int* depth) {
  if (!collwatch::PythonFramesReady(nullptr) || iterations <= 0) return -1;
  collwatch::RawPythonFrame frames[64];
  size_t count = 0;
  timespec start{};
  timespec end{};
  clock_gettime(CLOCK_MONOTONIC, &start);
  for (int i = 0; i < iterations; ++i) {
    count = collwatch::CapturePythonFrames(frames, 64);
    asm volatile("" : : "r"(frames) : "memory");
  }
  clock_gettime(CLOCK_MONOTONIC, &end);
  *depth = static_cast<int>(count);
  const double ns = static_cast<double>(end.tv_sec - start.tv_sec) * 1e9 +
                    static_cast<double>(end.tv_nsec - start.tv_nsec);
  return ns / iterations;
}
