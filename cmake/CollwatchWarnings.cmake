# Warning flags every collwatch target gets through collwatch_set_warnings().
function(collwatch_set_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow
    -Wno-missing-field-initializers)
endfunction()
