# Executables link with gold where the compiler can: it links the test executables about
# twice as fast as GNU ld (collwatch_run_test under TSan: 1.10 s with ld, 0.57 s with
# gold), and a build links about 150 of them. (lld is faster still but cannot read the
# preload's GCC LTO objects.) Shared libraries, the preload and the CPU NCCL backend that
# jobs load among them, keep the system linker: gold's build of the preload, loaded both
# by LD_PRELOAD and as NCCL's profiler plugin, read a wrong pointer under ASan
# (ProfilerPluginTest.WithThePreloadEveryRecordIsWrittenOnceAndCompletionsComeFromThePlugin).
# -DCOLLWATCH_FAST_LINKER=OFF keeps the system linker everywhere.
option(COLLWATCH_FAST_LINKER "Link executables with gold when the compiler can" ON)
if(COLLWATCH_FAST_LINKER)
  include(CheckLinkerFlag)
  check_linker_flag(CXX "-fuse-ld=gold" COLLWATCH_GOLD_WORKS)
  if(COLLWATCH_GOLD_WORKS)
    string(APPEND CMAKE_EXE_LINKER_FLAGS " -fuse-ld=gold")
  endif()
endif()
