// Finds the next definition of an NCCL symbol after libcollwatch.so: dlsym(RTLD_NEXT),
// else any loaded library that exports it (a framework may have loaded libnccl with
// RTLD_LOCAL, out of RTLD_NEXT's reach). Threading: any thread; results are not cached
// here (callers cache them).
#ifndef COLLWATCH_INTERPOSER_REAL_SYMBOLS_H_
#define COLLWATCH_INTERPOSER_REAL_SYMBOLS_H_

namespace collwatch {

// The address of `name` in the first loaded object other than libcollwatch.so, or
// nullptr when no such object is loaded (yet).
void* FindRealSymbol(const char* name) noexcept;

}  // namespace collwatch

#endif  // COLLWATCH_INTERPOSER_REAL_SYMBOLS_H_
