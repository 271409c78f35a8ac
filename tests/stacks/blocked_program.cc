// A native program blocked in a system call inside functions of its own, for the stack
// tests: main -> WaitForInput -> BlockedReadingAPipe -> read() on a pipe nobody writes.
#include <unistd.h>

namespace {

__attribute__((noinline)) int BlockedReadingAPipe(int fd) {
  char byte = 0;
  const ssize_t got = read(fd, &byte, 1);  // at: read
  asm volatile("" ::: "memory");  // keeps the call from becoming a tail call
  return static_cast<int>(got);
}

__attribute__((noinline)) int WaitForInput() {
  int ends[2];
  if (pipe(ends) != 0) return 1;
  const int got = BlockedReadingAPipe(ends[0]);  // at: blocked
  asm volatile("" ::: "memory");
  return got;
}

}  // namespace

int main() { return WaitForInput(); }
