// `collwatch stacks` (see stacks_command.h).
#include "cli/stacks_command.h"

#include <signal.h>

#include <cerrno>
#include <string>

#include "absl/strings/str_cat.h"
#include "analyzer/call_sites.h"
#include "analyzer/stack_classes.h"
#include "cli/job_processes.h"
#include "files/safe_text.h"
#include "nlohmann/json.hpp"
#include "ring/clocks.h"
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

}  // namespace

int RunStacksCommand(const StacksCommandOptions& options, std::ostream& out, std::ostream& err) {
  std::vector<RankStacks> processes;
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
      processes.push_back(RankStacks{{}, stacks::TakeProcessStacks(pid, stack_options)});
      continue;
    }
    for (const RankProcess& rank : ranks) {
      std::vector<int32_t> held;
      if (rank.info.global_rank >= 0) held.push_back(rank.info.global_rank);
      processes.push_back(RankStacks{held, stacks::TakeProcessStacks(rank.info.pid, stack_options)});
    }
  }
  if (processes.empty()) return 2;

  bool complete = true;
  for (const RankStacks& process : processes) complete = complete && process.stacks.problems.empty();
  const std::vector<analyzer::StackClass> classes = analyzer::MergeStacks(processes);
  if (options.json) {
    json report = {{"classes", json::array()}, {"processes", json::array()}};
    for (const analyzer::StackClass& merged : classes) {
      report["classes"].push_back({{"ranks", merged.ranks}, {"pids", merged.pids}, {"thread", merged.thread},
                                   {"where", merged.where}});
    }
    for (const RankStacks& process : processes) {
      json threads = json::array();
      for (const stacks::ThreadStack& thread : process.stacks.threads) threads.push_back(FramesJson(thread));
      report["processes"].push_back({{"pid", process.stacks.pid},
                                     {"ranks", process.ranks},
                                     {"program", process.stacks.program},
                                     {"state", std::string(1, process.stacks.state)},
                                     {"python_version", process.stacks.python_version},
                                     {"longest_pause_ms", static_cast<double>(process.stacks.longest_pause_ns) / 1e6},
                                     {"problems", process.stacks.problems},
                                     {"threads", std::move(threads)}});
    }
    out << SafeJsonText(report, 2) << "\n";
    return complete ? 0 : 1;
  }

  out << "Where each process is:\n" << analyzer::StackClassesText(classes);
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
  return complete ? 0 : 1;
}

}  // namespace collwatch
