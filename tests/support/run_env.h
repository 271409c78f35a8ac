// Environment for tests that start `collwatch run`: a sanitizer build preloads its
// runtime first, or the preload it injects into uninstrumented programs (sh, python)
// would make the sanitizer refuse to start. Threading: pure function.
#ifndef COLLWATCH_TESTS_SUPPORT_RUN_ENV_H_
#define COLLWATCH_TESTS_SUPPORT_RUN_ENV_H_

#include <map>
#include <string>

namespace collwatch::testing {

inline std::map<std::string, std::string> CollwatchRunEnv(std::map<std::string, std::string> env) {
  const std::string runtime = COLLWATCH_SANITIZER_RUNTIME;
  if (!runtime.empty()) env["LD_PRELOAD"] = runtime;
  return env;
}

}  // namespace collwatch::testing

#endif  // COLLWATCH_TESTS_SUPPORT_RUN_ENV_H_
