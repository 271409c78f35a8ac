// --event-log FILE: what happened to the job as JSON lines, for log shippers and scripts
// (docs/monitoring.md has the fields): each finding as it appears, each process's stream
// opening or closing and its writer's state changing. Appended, never truncated, one
// write(2) a line; names from rings may be any bytes and are written with invalid UTF-8
// replaced. Threading: thread-safe (one mutex).
#ifndef COLLWATCH_COLLECTOR_EVENT_LOG_H_
#define COLLWATCH_COLLECTOR_EVENT_LOG_H_

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "absl/status/statusor.h"
#include "collector/live_state.h"
#include "nlohmann/json.hpp"

namespace collwatch {

class EventLog {
 public:
  // Opens `path` for appending (made 0644 when missing; never through a symbolic link).
  static absl::StatusOr<std::unique_ptr<EventLog>> Open(const std::string& path);
  ~EventLog();
  EventLog(const EventLog&) = delete;
  EventLog& operator=(const EventLog&) = delete;

  // {"event": "finding", "time", "host", "job", "finding": report.json's finding}
  void Finding(const std::string& job, const nlohmann::json& finding);
  // {"event": "process", "time", "host", "job", "state", "process": {"host", "pid", "rank", "ring"}}
  void Process(const ProcessChange& change);
  // {"event": "process_changes_dropped", "count"}: more changes came than were kept.
  void ChangesDropped(uint64_t count);
  // Whether a write failed (said once on stderr).
  bool failed();

 private:
  explicit EventLog(int fd) : fd_(fd) {}
  void Write(nlohmann::json line, int64_t time_ns);

  std::mutex mutex_;
  int fd_;
  bool failed_ = false;
};

}  // namespace collwatch

#endif  // COLLWATCH_COLLECTOR_EVENT_LOG_H_
