// The lines collwatch's long-running commands (collector, agent, run) write on stderr:
// each stamped with the UTC time and this host, so the logs of many nodes merge and
// sort; --quiet keeps findings and errors only. Threading: thread-safe; a message is one
// write(2), so the lines of two threads never interleave within a line.
#ifndef COLLWATCH_PROCESS_LOG_LINE_H_
#define COLLWATCH_PROCESS_LOG_LINE_H_

#include <sstream>
#include <string>
#include <string_view>

namespace collwatch {

enum class LogLevel {
  kInfo,     // what happens as expected: dropped by --quiet
  kFinding,  // what the analysis found
  kError,    // what went wrong, or what the user must act on
};

// --quiet: from now on only findings and errors are written.
void SetQuietLog(bool quiet);
bool QuietLog();

// "2025-01-31T12:00:00.123Z node7": the stamp every line starts with.
std::string LogStamp();

// Writes each line of `text` (a last newline is dropped) as "STAMP WHO: line" on stderr,
// unless --quiet leaves out `level`.
void WriteLog(LogLevel level, std::string_view who, std::string_view text);

// One message built with <<, written by WriteLog when the statement ends:
//   LogLine(LogLevel::kError, "collwatch agent") << "cannot read " << path;
class LogLine {
 public:
  LogLine(LogLevel level, std::string_view who) : level_(level), who_(who) {}
  ~LogLine() { WriteLog(level_, who_, text_.str()); }
  LogLine(const LogLine&) = delete;
  LogLine& operator=(const LogLine&) = delete;

  template <typename T>
  LogLine& operator<<(const T& value) {
    text_ << value;
    return *this;
  }

 private:
  LogLevel level_;
  std::string who_;
  std::ostringstream text_;
};

}  // namespace collwatch

#endif  // COLLWATCH_PROCESS_LOG_LINE_H_
