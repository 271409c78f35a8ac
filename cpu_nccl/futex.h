// Futex wait/wake on 32-bit words of the shared segment (shared futexes: no PRIVATE flag,
// so processes that map the same file meet on the same word), and a CPU pause.
// Threading: any thread; these are thin system-call wrappers.
#ifndef COLLWATCH_CPU_NCCL_FUTEX_H_
#define COLLWATCH_CPU_NCCL_FUTEX_H_

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <climits>
#include <cstdint>

namespace collwatch::cpu_nccl {

// Sleeps while *word == expected, at most `timeout` (relative; nullptr: no limit). Returns
// early on a wake, a signal, or when the word already differs.
inline void FutexWait(std::atomic<uint32_t>* word, uint32_t expected,
                      const timespec* timeout) noexcept {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, expected, timeout, nullptr, 0);
}

inline void FutexWakeAll(std::atomic<uint32_t>* word) noexcept {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

inline void CpuRelax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

}  // namespace collwatch::cpu_nccl

#endif  // COLLWATCH_CPU_NCCL_FUTEX_H_
