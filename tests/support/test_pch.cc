// The target that builds the test executables' shared precompiled header
// (cmake/CollwatchTestOptimisation.cmake); a test program of no tests.
