# gold where the compiler can use it: it links the test executables about twice as fast
# as GNU ld (collwatch_run_test under TSan: 1.10 s with ld, 0.57 s with gold), and a build
# links about 150 of them. (lld is faster still but cannot read the GCC LTO objects of the
# preload.) -DCOLLWATCH_FAST_LINKER=OFF keeps the system linker.
option(COLLWATCH_FAST_LINKER "Link with gold when the compiler can" ON)
if(COLLWATCH_FAST_LINKER)
  include(CheckLinkerFlag)
  check_linker_flag(CXX "-fuse-ld=gold" COLLWATCH_GOLD_WORKS)
  if(COLLWATCH_GOLD_WORKS)
    add_link_options(-fuse-ld=gold)
  endif()
endif()
