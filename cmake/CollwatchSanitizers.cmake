# Applies COLLWATCH_SANITIZE to every target of the build (set by the asan/tsan presets).
if(COLLWATCH_SANITIZE)
  # Line tables (-g1) are all a sanitizer report needs (file:line in its stacks), and less
  # to compile and link than -g.
  add_compile_options(-fsanitize=${COLLWATCH_SANITIZE} -fno-omit-frame-pointer -g1)
  add_link_options(-fsanitize=${COLLWATCH_SANITIZE})
  if(COLLWATCH_SANITIZE MATCHES "undefined")
    add_compile_options(-fno-sanitize-recover=undefined)
  endif()
endif()

# The sanitizer's runtime, which a sanitized preload needs loaded before it in programs
# that are not sanitized themselves (/bin/sh under `collwatch run` in the tests).
# Empty without a sanitizer.
set(COLLWATCH_SANITIZER_RUNTIME_PATH "")
if(COLLWATCH_SANITIZE MATCHES "address")
  execute_process(COMMAND ${CMAKE_CXX_COMPILER} -print-file-name=libasan.so
    OUTPUT_VARIABLE COLLWATCH_SANITIZER_RUNTIME_PATH OUTPUT_STRIP_TRAILING_WHITESPACE)
elseif(COLLWATCH_SANITIZE MATCHES "thread")
  execute_process(COMMAND ${CMAKE_CXX_COMPILER} -print-file-name=libtsan.so
    OUTPUT_VARIABLE COLLWATCH_SANITIZER_RUNTIME_PATH OUTPUT_STRIP_TRAILING_WHITESPACE)
endif()
