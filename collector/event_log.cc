// The JSON-lines event log. Threading: see event_log.h.
#include "collector/event_log.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "files/json_contract.h"
#include "process/log_line.h"
#include "process/process_sample.h"
#include "ring/clocks.h"

namespace collwatch {

absl::StatusOr<std::unique_ptr<EventLog>> EventLog::Open(const std::string& path) {
  const int fd = open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0644);
  if (fd < 0) {
    return absl::InvalidArgumentError(absl::StrCat("cannot open the event log ", path, ": ", std::strerror(errno)));
  }
  return std::unique_ptr<EventLog>(new EventLog(fd));
}

EventLog::~EventLog() { close(fd_); }

void EventLog::Finding(const std::string& job, const nlohmann::json& finding) {
  Write({{"event", "finding"}, {"job", job}, {"finding", finding}}, static_cast<int64_t>(RealtimeNs()));
}

void EventLog::Process(const ProcessChange& change) {
  const v1::RankIdentity& who = change.identity;
  Write({{"event", "process"},
         {"job", who.job()},
         {"state", change.state},
         {"process", {{"host", who.host()}, {"pid", who.pid()}, {"rank", who.rank()}, {"ring", who.ring_path()}}}},
        change.time_ns);
}

void EventLog::ChangesDropped(uint64_t count) {
  Write({{"event", "process_changes_dropped"}, {"count", count}}, static_cast<int64_t>(RealtimeNs()));
}

bool EventLog::failed() {
  std::lock_guard<std::mutex> lock(mutex_);
  return failed_;
}

void EventLog::Write(nlohmann::json line, int64_t time_ns) {
  line[kSchemaVersionKey] = kEventLogSchemaVersion;
  line["time"] = absl::FormatTime("%Y-%m-%dT%H:%M:%E6SZ", absl::FromUnixNanos(time_ns), absl::UTCTimeZone());
  line["host"] = ThisHostName();
  const std::string text = line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  std::lock_guard<std::mutex> lock(mutex_);
  // One write: a reader tailing the file never sees half a line. A full disk or a FIFO
  // nobody reads costs this line, never the collector's progress.
  const ssize_t wrote = write(fd_, text.data(), text.size());
  if (wrote == static_cast<ssize_t>(text.size()) || failed_) return;
  failed_ = true;
  LogLine(LogLevel::kError, "collwatch collector")
      << "the event log lost a line (" << (wrote < 0 ? std::strerror(errno) : "short write")
      << "); said once, later losses are not";
}

}  // namespace collwatch
