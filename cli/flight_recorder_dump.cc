// PyTorch's side, as its sources have it: with the Flight Recorder on (a trace buffer above
// 0) and a pipe prefix set, each rank makes the FIFO `<prefix><global rank>.pipe`, holds it
// open read-only and non-blocking, and polls it from its monitor thread; any byte read asks
// for a dump to `<dump prefix><global rank>`, written in place (no rename). So a dump is
// "written" here once that file is new or changed since the ask and stops growing.
// Threading: see flight_recorder_dump.h.
#include "cli/flight_recorder_dump.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <initializer_list>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "process/process_sample.h"
#include "ring/settings.h"

namespace collwatch {
namespace {

// How often the wait looks at the dump files; a file unchanged over one look has stopped
// growing (PyTorch writes a dump in one go).
constexpr auto kDumpPollInterval = std::chrono::milliseconds(100);

// The first of `settings` set and not empty in `environment`, else nullptr: PyTorch takes
// its newer name first.
const char* FirstSet(const std::string& environment, std::initializer_list<Setting> settings) {
  for (const Setting setting : settings) {
    const char* value = EnvironmentValue(environment, SettingInfoOf(setting).name);
    if (value != nullptr && value[0] != '\0') return value;
  }
  return nullptr;
}

// What is at a dump's path: enough to tell a new or rewritten file from the one before.
struct FileLook {
  bool exists = false;
  off_t size = 0;
  int64_t modified_ns = 0;
  ino_t inode = 0;

  bool operator==(const FileLook& other) const {
    return exists == other.exists && size == other.size && modified_ns == other.modified_ns && inode == other.inode;
  }
};

FileLook LookAt(const std::string& path) {
  struct stat seen {};
  // A dump is a regular file; a symbolic link PyTorch did not make is not followed.
  if (lstat(path.c_str(), &seen) != 0 || !S_ISREG(seen.st_mode)) return {};
  return {.exists = true,
          .size = seen.st_size,
          .modified_ns = static_cast<int64_t>(seen.st_mtim.tv_sec) * 1'000'000'000 + seen.st_mtim.tv_nsec,
          .inode = seen.st_ino};
}

}  // namespace

std::optional<FlightRecorderDump> FlightRecorderDumpOf(pid_t pid, int32_t rank, const std::string& environment) {
  const char* pipe_prefix = FirstSet(environment, {Setting::kTorchFrPipeFile, Setting::kTorchNcclPipeFile});
  if (pipe_prefix == nullptr || rank < 0) return std::nullopt;
  FlightRecorderDump dump;
  dump.rank = rank;
  dump.pid = pid;
  dump.pipe = absl::StrCat(pipe_prefix, rank, ".pipe");
  if (const char* dump_prefix = FirstSet(environment, {Setting::kTorchFrDumpFile, Setting::kTorchNcclDumpFile})) {
    dump.files.push_back(absl::StrCat(dump_prefix, rank));
  } else {
    // Unset: PyTorch's default, which moved from /tmp to the user's cache folder (the
    // version is not known from outside): both are watched.
    const char* home = FirstSet(environment, {Setting::kHome});
    dump.files.push_back(
        absl::StrCat(home != nullptr ? home : SettingInfoOf(Setting::kHome).default_value,
                     "/.cache/torch/comm_lib_trace_rank_", rank));
    dump.files.push_back(absl::StrCat("/tmp/nccl_trace_rank_", rank));
  }
  return dump;
}

std::string PokeDumpPipe(const std::string& path) {
  struct stat seen {};
  if (lstat(path.c_str(), &seen) != 0) {
    return errno == ENOENT ? "no pipe there (the rank's Flight Recorder is off, or it has not started)"
                           : std::strerror(errno);
  }
  if (!S_ISFIFO(seen.st_mode)) return "not a FIFO: left alone";
  if (seen.st_uid != geteuid()) return "a FIFO of another user: left alone";
  // Non-blocking: opening a FIFO for writing fails at once (ENXIO) where nobody reads it,
  // instead of waiting for a reader; O_NOFOLLOW: what was looked at is what is opened.
  const int fd = open(path.c_str(), O_WRONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return errno == ENXIO ? "nobody reads it" : std::strerror(errno);
  struct stat opened {};
  if (fstat(fd, &opened) != 0 || !S_ISFIFO(opened.st_mode) || opened.st_ino != seen.st_ino ||
      opened.st_dev != seen.st_dev) {
    close(fd);
    return "replaced by something other than the FIFO: left alone";
  }
  // A reader that closes its end before the write raises SIGPIPE, which would end
  // collwatch: it is held blocked for this thread, and taken back if it came.
  sigset_t pipe_signal;
  sigemptyset(&pipe_signal);
  sigaddset(&pipe_signal, SIGPIPE);
  sigset_t previous;
  pthread_sigmask(SIG_BLOCK, &pipe_signal, &previous);
  const char byte = '1';
  const ssize_t written = write(fd, &byte, 1);
  const int write_errno = errno;
  if (written < 0 && write_errno == EPIPE) {
    const timespec no_wait{};
    sigtimedwait(&pipe_signal, nullptr, &no_wait);
  }
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  close(fd);
  // A full pipe holds bytes not read yet: a dump is asked already.
  if (written == 1 || (written < 0 && write_errno == EAGAIN)) return "";
  return write_errno == EPIPE ? "nobody reads it" : std::strerror(write_errno);
}

std::vector<FlightRecorderDump> FlightRecorderDumpsOf(const std::map<pid_t, RankProcess>& ranks) {
  std::vector<FlightRecorderDump> dumps;
  for (const auto& [pid, rank] : ranks) {
    if (rank.sample.state == ProcessState::kGone) continue;
    std::optional<FlightRecorderDump> dump = FlightRecorderDumpOf(pid, rank.info.global_rank, ProcessEnvironment(pid));
    if (dump.has_value()) dumps.push_back(std::move(*dump));
  }
  std::sort(dumps.begin(), dumps.end(),
            [](const FlightRecorderDump& a, const FlightRecorderDump& b) { return a.rank < b.rank; });
  return dumps;
}

void AskFlightRecorderDumps(double wait_s, std::vector<FlightRecorderDump>* dumps_out) {
  std::vector<FlightRecorderDump>& dumps = *dumps_out;
  // What is at each dump's path before the ask: an older dump there is not this one.
  std::vector<std::vector<FileLook>> before(dumps.size());
  for (size_t i = 0; i < dumps.size(); ++i) {
    for (const std::string& file : dumps[i].files) before[i].push_back(LookAt(file));
  }
  for (FlightRecorderDump& dump : dumps) dump.not_asked = PokeDumpPipe(dump.pipe);

  std::vector<std::vector<FileLook>> last = before;
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                             std::chrono::duration<double>(std::max(wait_s, 0.0)));
  while (true) {
    bool waiting = false;
    for (size_t i = 0; i < dumps.size(); ++i) {
      FlightRecorderDump& dump = dumps[i];
      if (!dump.asked() || dump.written()) continue;
      for (size_t j = 0; j < dump.files.size() && !dump.written(); ++j) {
        const FileLook look = LookAt(dump.files[j]);
        if (!look.exists || look.size == 0 || look == before[i][j]) continue;  // nothing new yet
        if (look == last[i][j]) dump.file = dump.files[j];                       // unchanged over a look
        last[i][j] = look;
      }
      waiting = waiting || !dump.written();
    }
    if (!waiting || std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(kDumpPollInterval);
  }
  // At the deadline, a dump begun but still growing is named all the same: part of it
  // may be there.
  for (size_t i = 0; i < dumps.size(); ++i) {
    FlightRecorderDump& dump = dumps[i];
    for (size_t j = 0; j < dump.files.size() && dump.asked() && !dump.written(); ++j) {
      if (!last[i][j].exists || last[i][j] == before[i][j]) continue;
      dump.file = dump.files[j];
      dump.still_growing = true;
    }
  }
}

std::string FlightRecorderDumpText(const FlightRecorderDump& dump) {
  const std::string whose = absl::StrCat("rank ", dump.rank, "'s Flight Recorder dump");
  if (!dump.asked()) return absl::StrCat(whose, " not asked for: ", dump.pipe, ": ", dump.not_asked);
  if (!dump.written()) {
    return absl::StrCat(whose, " asked for (", dump.pipe, "), none written before the stop at ",
                        absl::StrJoin(dump.files, " or "));
  }
  return absl::StrCat(whose, " (asked for through ", dump.pipe, "): ", dump.file,
                      dump.still_growing ? " (still being written when the job was stopped: it may be cut short)"
                                         : "");
}

}  // namespace collwatch
