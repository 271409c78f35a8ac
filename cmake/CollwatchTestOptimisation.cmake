# Test executables (those linking GoogleTest) compile at -O1 in RelWithDebInfo builds, the
# default preset and CI's first build: the libraries they check keep -O2, and the suite's
# own code compiles about a quarter faster (analyzer/report_test.cc: 6.8 s at -O2 -g1,
# 5.2 s at -O1 -g1 on the 2-core machine). Sanitizer builds are Debug (-O0) already.
function(collwatch_optimise_tests_less dir)
  get_property(targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
  foreach(target IN LISTS targets)
    get_target_property(type ${target} TYPE)
    get_target_property(libraries ${target} LINK_LIBRARIES)
    if(type STREQUAL "EXECUTABLE" AND libraries MATCHES "GTest::")
      target_compile_options(${target} PRIVATE $<$<CONFIG:RelWithDebInfo>:-O1>)
    endif()
  endforeach()
  get_property(subdirectories DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
  foreach(subdirectory IN LISTS subdirectories)
    collwatch_optimise_tests_less(${subdirectory})
  endforeach()
endfunction()
