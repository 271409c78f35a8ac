// Work on many inputs in parallel whose results must be used in input order (rank traces
// read on worker threads, applied to one model on the calling thread): the model stays
// single-threaded and the result is the same as reading them one by one.
// Threading: `produce` runs on worker threads, each call on its own input; `consume` runs
// on the calling thread, in input order.
#ifndef COLLWATCH_CLI_ORDERED_PARALLEL_H_
#define COLLWATCH_CLI_ORDERED_PARALLEL_H_

#include <algorithm>
#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

namespace collwatch {

// Calls produce(i) for each i below `count` on up to `threads` workers, at most `ahead`
// inputs past the one being consumed (memory stays bounded by `ahead` results), and
// consume(i, result) on this thread for i = 0, 1, ... as each is ready. With one thread,
// or one input, all runs on this thread.
template <typename Result, typename Produce, typename Consume>
void OrderedParallel(size_t count, unsigned threads, size_t ahead, Produce produce, Consume consume) {
  threads = std::max(1u, threads);
  ahead = std::max<size_t>(ahead, threads);
  if (threads == 1 || count <= 1) {
    for (size_t i = 0; i < count; ++i) consume(i, produce(i));
    return;
  }
  std::mutex mutex;
  std::condition_variable changed;
  std::vector<std::optional<Result>> ready(count);
  size_t next_to_produce = 0;
  size_t consumed = 0;
  auto work = [&] {
    std::unique_lock<std::mutex> lock(mutex);
    while (true) {
      changed.wait(lock, [&] { return next_to_produce >= count || next_to_produce < consumed + ahead; });
      if (next_to_produce >= count) return;
      const size_t mine = next_to_produce++;
      lock.unlock();
      Result result = produce(mine);
      lock.lock();
      ready[mine].emplace(std::move(result));
      changed.notify_all();
    }
  };
  std::vector<std::thread> workers;
  for (unsigned t = 0; t < std::min<size_t>(threads, count); ++t) workers.emplace_back(work);
  for (size_t i = 0; i < count; ++i) {
    std::optional<Result> result;
    {
      std::unique_lock<std::mutex> lock(mutex);
      changed.wait(lock, [&] { return ready[i].has_value(); });
      result = std::move(ready[i]);
      ready[i].reset();
      consumed = i + 1;
      changed.notify_all();
    }
    consume(i, std::move(*result));
  }
  for (std::thread& worker : workers) worker.join();
}

}  // namespace collwatch

#endif  // COLLWATCH_CLI_ORDERED_PARALLEL_H_
