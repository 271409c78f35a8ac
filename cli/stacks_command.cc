// `collwatch stacks` (see stacks_command.h).
#include "cli/stacks_command.h"

#include <signal.h>

#include <algorithm>
#include <cerrno>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "analyzer/call_sites.h"
#include "analyzer/stack_classes.h"
#include "cli/job_processes.h"
#include "files/json_contract.h"
#include "files/safe_text.h"
#include "nlohmann/json.hpp"
#include "ring/clocks.h"
#include "ring/settings.h"
#include "stacks/process_stacks.h"

namespace collwatch {
namespace {

using analyzer::RankStacks;
using nlohmann::json;

json FramesJson(const stacks::ThreadStack& thread) {
  json native = json::array();
  for (const stacks::NativeFrame& frame : thread.native) {
    json one = {{"pc", absl::StrCat("0x", absl::Hex(frame.pc))}, {"function", frame.function}, {"module", frame.module}};
    if (!frame.file.empty()) {
      one["file"] = frame.file;
      one["line"] = frame.line;
    }
    native.push_back(std::move(one));
  }
  json python = json::array();
  for (const CallFrame& frame : thread.python.frames) {
    python.push_back({{"file", frame.file}, {"function", frame.function}, {"line", frame.line}});
  }
  return {{"tid", thread.tid}, {"name", thread.name}, {"state", std::string(1, thread.state)},
          {"native", std::move(native)}, {"python", std::move(python)}};
}

// Which job a process is of: the job id its launcher gave it (COLLWATCH_JOB_ID,
// TORCHELASTIC_RUN_ID, Slurm's job and step, as the preload reads them), else, where none
// names one, the launcher it runs under (its parent): a pid high in the tree (1, a
// session leader) covers every job of the machine, and rank 0 of one is not rank 0 of another.
std::string JobOf(pid_t pid) {
  const std::string block = ProcessEnvironment(pid);
  char job[256];
  if (JobIdFrom([&block](const char* name) { return EnvironmentValue(block, name); }, job, sizeof job) != nullptr) {
    return job;
  }
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(stat, line);
  const size_t close = line.rfind(')');
  std::istringstream fields(close == std::string::npos ? "" : line.substr(close + 1));
  std::string state;
  pid_t parent = 0;
  fields >> state >> parent;
  return absl::StrCat("of no job id, under pid ", parent);
}

struct JobStacks {
  std::string job;
  std::vector<RankStacks> processes;
};

void ProcessesJson(const JobStacks& job, json* report) {
  for (const analyzer::StackClass& merged : analyzer::MergeStacks(job.processes)) {
    (*report)["classes"].push_back({{"job", job.job}, {"ranks", merged.ranks}, {"pids", merged.pids},
                                    {"thread", merged.thread}, {"where", merged.where}});
  }
  for (const RankStacks& process : job.processes) {
    json threads = json::array();
    for (const stacks::ThreadStack& thread : process.stacks.threads) threads.push_back(FramesJson(thread));
    (*report)["processes"].push_back({{"pid", process.stacks.pid},
                                      {"job", job.job},
                                      {"ranks", process.ranks},
                                      {"program", process.stacks.program},
                                      {"state", std::string(1, process.stacks.state)},
                                      {"python_version", process.stacks.python_version},
                                      {"longest_pause_ms", static_cast<double>(process.stacks.longest_pause_ns) / 1e6},
                                      {"problems", process.stacks.problems},
                                      {"threads", std::move(threads)}});
  }
}

void PrintProcesses(const std::vector<RankStacks>& processes, std::ostream& out) {
  out << "Where each process is:\n" << analyzer::StackClassesText(analyzer::MergeStacks(processes));
  for (const RankStacks& process : processes) {
    out << "\npid " << process.stacks.pid;
    if (!process.ranks.empty()) out << " (rank " << process.ranks.front() << ")";
    out << " " << process.stacks.program << ", longest pause "
        << absl::StrCat(static_cast<double>(process.stacks.longest_pause_ns) / 1e6) << " ms\n";
    for (const std::string& problem : process.stacks.problems) out << "  (" << problem << ")\n";
    for (const stacks::ThreadStack& thread : process.stacks.threads) {
      out << "  thread " << stacks::ThreadLabel(process.stacks, thread) << " [" << thread.state << "]\n";
      for (const CallFrame& frame : thread.python.frames) out << "    py  " << analyzer::FrameText(frame) << "\n";
      for (const stacks::NativeFrame& frame : thread.native) {
        out << "    " << (frame.function.empty() ? "??" : frame.function) << " (" << frame.module;
        if (!frame.file.empty()) out << ", " << frame.file << ":" << frame.line;
        out << ")\n";
      }
    }
  }
}

}  // namespace

int RunStacksCommand(const StacksCommandOptions& options, std::ostream& out, std::ostream& err) {
  // Grouped by job, in the order first seen: ranks of different jobs are never merged.
  std::vector<JobStacks> jobs;
  const auto add = [&jobs](pid_t pid, RankStacks stacks) {
    const std::string job = JobOf(pid);
    auto it = std::find_if(jobs.begin(), jobs.end(), [&job](const JobStacks& one) { return one.job == job; });
    if (it == jobs.end()) it = jobs.insert(jobs.end(), JobStacks{job, {}});
    it->processes.push_back(std::move(stacks));
  };
  stacks::StackOptions stack_options;
  stack_options.native = !options.no_native;
  for (const pid_t pid : options.pids) {
    if (kill(pid, 0) != 0 && errno == ESRCH) {
      err << "collwatch stacks: no process " << pid << "\n";
      continue;
    }
    // A launcher's ranks, or the process itself where it holds no rank.
    JobProcessTree tree(pid);
    std::vector<RankProcess> ranks = tree.Walk(static_cast<int64_t>(RealtimeNs()));
    if (ranks.empty()) {
      add(pid, RankStacks{{}, stacks::TakeProcessStacks(pid, stack_options)});
      continue;
    }
    for (const RankProcess& rank : ranks) {
      std::vector<int32_t> held;
      if (rank.info.global_rank >= 0) held.push_back(rank.info.global_rank);
      add(rank.info.pid, RankStacks{held, stacks::TakeProcessStacks(rank.info.pid, stack_options)});
    }
  }
  if (jobs.empty()) return 2;

  bool complete = true;
  for (const JobStacks& job : jobs) {
    for (const RankStacks& process : job.processes) complete = complete && process.stacks.problems.empty();
  }
  if (options.json) {
    json report = {{kSchemaVersionKey, kStacksSchemaVersion}, {"classes", json::array()}, {"processes", json::array()}};
    for (const JobStacks& job : jobs) ProcessesJson(job, &report);
    out << SafeJsonText(report, 2) << "\n";
    return complete ? 0 : 1;
  }
  if (jobs.size() == 1) {
    PrintProcesses(jobs.front().processes, out);
    return complete ? 0 : 1;
  }
  out << "These processes are of " << jobs.size() << " jobs, each shown apart:\n";
  for (const JobStacks& job : jobs) {
    const size_t count = job.processes.size();
    out << "\n== Job " << TerminalText(job.job) << " (" << count << (count == 1 ? " process" : " processes")
        << ") ==\n";
    PrintProcesses(job.processes, out);
  }
  return complete ? 0 : 1;
}

}  // namespace collwatch
