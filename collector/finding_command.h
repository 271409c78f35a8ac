// --on-finding CMD: runs `/bin/sh -c CMD` once per new finding with the finding's JSON
// (report.json's form) on its standard input: a webhook, a Slack message, a Slurm requeue.
// Never on the ingest path: the analysis thread only queues (bounded; past kMaxQueued a
// finding's command is dropped, counted and logged), one worker thread runs the commands
// one at a time, each stopped (its process group killed) after its time limit, and logs
// how each ended. Threading: Enqueue and counts from any thread; the worker is ours.
#ifndef COLLWATCH_COLLECTOR_FINDING_COMMAND_H_
#define COLLWATCH_COLLECTOR_FINDING_COMMAND_H_

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <thread>

namespace collwatch {

// How the commands ended so far (collwatch_on_finding_commands_total's `outcome`).
struct FindingCommandCounts {
  uint64_t succeeded = 0;  // exit status 0
  uint64_t failed = 0;     // another exit status, a signal, or it could not start
  uint64_t timed_out = 0;  // killed at the time limit
  uint64_t dropped = 0;    // never run: the queue was full, or the collector was stopping
};

class FindingCommand {
 public:
  static constexpr size_t kMaxQueued = 64;

  // Runs `command` under `timeout_s` of time each.
  FindingCommand(std::string command, double timeout_s);
  // Runs what is queued, within one time limit in all; what is left is dropped.
  ~FindingCommand();
  FindingCommand(const FindingCommand&) = delete;
  FindingCommand& operator=(const FindingCommand&) = delete;

  // Queues a run with `json` on stdin and `environment` added to collwatch's own.
  void Enqueue(std::string json, std::map<std::string, std::string> environment);
  FindingCommandCounts counts();

 private:
  struct Run {
    std::string json;
    std::map<std::string, std::string> environment;
  };
  void WorkLoop();
  // Runs one command to its end or its time limit, ending by `deadline_ns` at the latest
  // (CLOCK_MONOTONIC); counts and logs how it ended.
  void RunOne(const Run& run, uint64_t deadline_ns);

  const std::string command_;
  const double timeout_s_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Run> queue_;
  bool stopping_ = false;
  uint64_t stop_deadline_ns_ = 0;  // once stopping: commands still queued then are dropped
  FindingCommandCounts counts_;
  std::thread worker_;
};

}  // namespace collwatch

#endif  // COLLWATCH_COLLECTOR_FINDING_COMMAND_H_
