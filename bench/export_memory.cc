// Memory of `collwatch export --format chrome` against the size of the run: synthetic trace
// stores of N calls (R ranks on one world communicator, a step of all-gathers and
// reduce-scatters in named regions, as bench/analyzer_scale.cc issues; the last collective
// diverges on half the ranks and never returns), each exported by the collwatch binary in
// a child process, whose peak resident memory (wait4's ru_maxrss) and time are printed per
// size. Bounded memory means the same peak at every size. The findings to mark:
//   report    from DIR/report.json, written first by `collwatch analyze --json` (not measured),
//             as `collwatch run` leaves one (default)
//   analysis  none beside the traces: the export analyses the run, which holds it
//   none      --no-findings
//   collwatch_export_memory [--calls 10000,1000000] [--ranks 8] [--findings report|analysis|none]
//                           [--cli PATH] [--keep DIR] [-- EXTRA EXPORT ARGUMENTS]
// Single-threaded; the store is written in batches, never held.
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "analyzer/synthetic_job.h"
#include "tests/support/synthetic_store.h"

namespace {

namespace fs = std::filesystem;
using collwatch::analyzer::kMs;
using collwatch::analyzer::SyntheticJob;
using collwatch::analyzer::FsdpLikeStep;
using collwatch::analyzer::SyntheticOp;

constexpr uint64_t kWorld = 0x3f2a9c0100000001ull;

double Now() {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) / 1e9;
}

uint64_t FolderBytes(const fs::path& dir) {
  uint64_t bytes = 0;
  std::error_code error;
  for (const auto& entry : fs::recursive_directory_iterator(dir, error)) {
    if (entry.is_regular_file(error)) bytes += entry.file_size(error);
  }
  return bytes;
}

// `calls` calls over `ranks` ranks (their creation included) under `out`.
bool WriteStore(const std::string& out, uint64_t calls, int ranks) {
  collwatch::testing::SyntheticStore store(out, "bench");
  SyntheticJob job(&store);
  std::vector<collwatch::analyzer::ProcessId> processes;
  for (int rank = 0; rank < ranks; ++rank) {
    processes.push_back(job.AddProcess(rank));
    job.Init(processes.back(), kWorld, rank, ranks, 1'700'000'000'000'000'000 + rank * kMs);
  }
  const std::vector<SyntheticOp> step = FsdpLikeStep(/*scatter_redop=*/4);
  const uint64_t per_rank = calls / static_cast<uint64_t>(ranks) - 2;
  int64_t t_ns = 1'700'000'001'000'000'000;
  for (uint64_t seq = 1; seq <= per_rank; ++seq) {
    const SyntheticOp& op = step[(seq - 1) % step.size()];
    for (int rank = 0; rank < ranks; ++rank) {
      job.Collective(processes[static_cast<size_t>(rank)], kWorld, rank, ranks, seq, op, t_ns + rank * 1000,
                     t_ns + 200'000);
    }
    t_ns += 250'000;
  }
  // The last collective: ranks of the upper half in another region, and nobody returns.
  for (int rank = 0; rank < ranks; ++rank) {
    SyntheticOp last = step[0];
    if (rank >= ranks / 2) last.region = "fwd/other";
    job.Collective(processes[static_cast<size_t>(rank)], kWorld, rank, ranks, per_rank + 1, last,
                   t_ns + rank * 1000, 0);
  }
  const absl::Status finished = store.Finish(collwatch::v1::WRITER_STATUS_RUNNING);
  if (!finished.ok()) std::fprintf(stderr, "writing the store: %s\n", std::string(finished.message()).c_str());
  return finished.ok();
}

struct ChildRun {
  int status = -1;
  double seconds = 0;
  double peak_mib = 0;
};

// `args` in a child (its standard output in `stdout_path`), timed, its peak memory read.
ChildRun RunChild(const std::vector<std::string>& args, const std::string& stdout_path = "/dev/null") {
  std::vector<char*> argv;
  for (const std::string& arg : args) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  ChildRun run;
  std::fflush(stdout);  // else the child's copy of the buffer is printed again at its exit
  const double start = Now();
  const pid_t child = fork();
  if (child == 0) {
    if (freopen(stdout_path.c_str(), "w", stdout) == nullptr) _exit(126);
    execv(argv[0], argv.data());
    _exit(127);
  }
  rusage usage{};
  int status = 0;
  if (child < 0 || wait4(child, &status, 0, &usage) != child) return run;
  run.seconds = Now() - start;
  run.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  run.peak_mib = static_cast<double>(usage.ru_maxrss) / 1024.0;  // KiB on Linux
  return run;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<uint64_t> sizes = {10'000, 1'000'000};
  int ranks = 8;
  std::string cli = COLLWATCH_CLI_PATH;
  std::string keep;
  std::string findings = "report";
  std::vector<std::string> extra;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--") {
      extra.assign(argv + i + 1, argv + argc);
      break;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "%s needs a value\n", flag.c_str());
      return 2;
    }
    const std::string value = argv[++i];
    if (flag == "--calls") {
      sizes.clear();
      for (const absl::string_view part : absl::StrSplit(value, ',')) {
        uint64_t calls = 0;
        if (!absl::SimpleAtoi(part, &calls) || calls == 0) return 2;
        sizes.push_back(calls);
      }
    } else if (flag == "--ranks") {
      if (!absl::SimpleAtoi(value, &ranks) || ranks <= 0) return 2;
    } else if (flag == "--cli") {
      cli = value;
    } else if (flag == "--keep") {
      keep = value;
    } else if (flag == "--findings" && (value == "report" || value == "analysis" || value == "none")) {
      findings = value;
    } else {
      std::fprintf(stderr, "unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  const std::string scratch = "collwatch-export-memory-" + std::to_string(getpid());
  const fs::path root = keep.empty() ? fs::temp_directory_path() / scratch : fs::path(keep);
  std::printf("findings: %s\n%12s %6s %12s %12s %9s %10s %14s\n", findings.c_str(), "calls", "ranks", "store MiB",
              "trace MiB", "export s", "peak MiB", "B/call > first");
  double first_peak = -1;
  uint64_t first_calls = 0;
  for (const uint64_t calls : sizes) {
    const fs::path dir = root / ("calls-" + std::to_string(calls));
    fs::remove_all(dir);
    // Written by a child of its own: a child's peak memory counts what it shared with this
    // process when forked (Linux keeps the high-water mark across exec), so this one stays
    // small.
    std::fflush(stdout);
    const pid_t writer = fork();
    if (writer == 0) _exit(WriteStore(dir.string(), calls, ranks) ? 0 : 1);
    int written = 0;
    if (writer < 0 || waitpid(writer, &written, 0) != writer || !WIFEXITED(written) || WEXITSTATUS(written) != 0) {
      return 1;
    }
    if (findings == "report") {
      const std::string report = (dir / "report.json").string();
      if (RunChild({cli, "analyze", "--json", dir.string()}, report).status != 1) {
        std::fprintf(stderr, "collwatch analyze found no finding in %s\n", dir.c_str());
        return 1;
      }
    }
    std::vector<std::string> args = {cli, "export", "--chrome", dir.string(), "-o", (dir / "trace.json").string()};
    if (findings == "none") args.push_back("--no-findings");
    args.insert(args.end(), extra.begin(), extra.end());
    const ChildRun run = RunChild(args);
    if (run.status != 0) {
      std::fprintf(stderr, "%s exited %d\n", cli.c_str(), run.status);
      return 1;
    }
    const double trace_mib = static_cast<double>(fs::file_size(dir / "trace.json")) / (1 << 20);
    const double store_mib = static_cast<double>(FolderBytes(dir / "bench")) / (1 << 20);
    std::string per_call = "-";
    if (first_peak < 0) {
      first_peak = run.peak_mib;
      first_calls = calls;
    } else if (calls > first_calls) {
      per_call = std::to_string(static_cast<int64_t>((run.peak_mib - first_peak) * (1 << 20) /
                                                     static_cast<double>(calls - first_calls)));
    }
    std::printf("%12llu %6d %12.1f %12.1f %9.2f %10.1f %14s\n", static_cast<unsigned long long>(calls), ranks,
                store_mib, trace_mib, run.seconds, run.peak_mib, per_call.c_str());
    std::fflush(stdout);
    if (keep.empty()) fs::remove_all(dir);
  }
  if (keep.empty()) fs::remove_all(root);
  return 0;
}
