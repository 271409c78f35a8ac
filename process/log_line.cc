// Stamped log lines. Threading: see log_line.h; the quiet switch is an atomic.
#include "process/log_line.h"

#include <unistd.h>

#include <atomic>
#include <cerrno>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "process/process_sample.h"

namespace collwatch {
namespace {

std::atomic<bool> quiet{false};

const std::string& HostName() {
  static const std::string host = ThisHostName();  // fixed for the process's life
  return host;
}

void WriteAll(const std::string& bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t wrote = write(STDERR_FILENO, bytes.data() + done, bytes.size() - done);
    if (wrote < 0 && errno == EINTR) continue;
    if (wrote <= 0) return;  // stderr closed: nothing else to tell
    done += static_cast<size_t>(wrote);
  }
}

}  // namespace

void SetQuietLog(bool on) { quiet.store(on); }
bool QuietLog() { return quiet.load(); }

std::string LogStamp() {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ ", absl::Now(), absl::UTCTimeZone()) + HostName();
}

void WriteLog(LogLevel level, std::string_view who, std::string_view text) {
  if (level == LogLevel::kInfo && QuietLog()) return;
  if (!text.empty() && text.back() == '\n') text.remove_suffix(1);
  const std::string prefix = LogStamp() + " " + std::string(who) + ":";
  std::string lines;
  while (true) {
    const size_t end = text.find('\n');
    const std::string_view line = text.substr(0, end);
    lines += prefix;
    if (!line.empty()) lines.append(" ").append(line);
    lines += '\n';
    if (end == std::string_view::npos) break;
    text.remove_prefix(end + 1);
  }
  WriteAll(lines);
}

}  // namespace collwatch
