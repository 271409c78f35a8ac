// One factor for every time limit of the tests: a sanitizer build runs several times
// slower than the default one, more so on a loaded CI machine. CMake sets it per build
// (cmake/CollwatchTestTime.cmake: 1, ASan 3, TSan 5) and scales ctest's TIMEOUTs by it too.
// A limit is only a safety net against a hang; a test's workload is a count, never a time.
// Threading: constants only.
#ifndef COLLWATCH_TESTS_SUPPORT_TEST_TIME_H_
#define COLLWATCH_TESTS_SUPPORT_TEST_TIME_H_

#ifndef COLLWATCH_TEST_TIME_SCALE
#error "COLLWATCH_TEST_TIME_SCALE comes from cmake/CollwatchTestTime.cmake (test executables, collwatch_test_support)"
#endif

namespace collwatch::testing {

inline constexpr double kTestTimeScale = COLLWATCH_TEST_TIME_SCALE;

// A limit of `seconds` in the default build, for this build.
inline constexpr double Scaled(double seconds) { return seconds * kTestTimeScale; }

}  // namespace collwatch::testing

#endif  // COLLWATCH_TESTS_SUPPORT_TEST_TIME_H_
