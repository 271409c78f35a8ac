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
