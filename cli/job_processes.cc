// Walking the command's process tree through /proc. Threading: see job_processes.h.
#include "cli/job_processes.h"

#include <dirent.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <set>

#include "analyzer/liveness.h"
#include "ring/settings.h"

namespace collwatch {
namespace {

// The parent of `pid` from /proc/PID/stat, -1 when it cannot be read.
pid_t ParentOf(pid_t pid) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/stat", pid);
  FILE* file = std::fopen(path, "re");
  if (file == nullptr) return -1;
  char line[512] = {};
  const bool read = std::fgets(line, sizeof line, file) != nullptr;
  std::fclose(file);
  // "pid (comm) S ppid ...": the name may hold spaces and parentheses; the last ')' ends it.
  const char* after_name = read ? std::strrchr(line, ')') : nullptr;
  if (after_name == nullptr || std::strlen(after_name) < 5) return -1;
  return static_cast<pid_t>(std::strtol(after_name + 4, nullptr, 10));
}

// Every process's parent.
std::map<pid_t, pid_t> ParentsOfAll() {
  std::map<pid_t, pid_t> parents;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return parents;
  while (const dirent* entry = readdir(proc)) {
    if (!std::isdigit(static_cast<unsigned char>(entry->d_name[0]))) continue;
    const auto pid = static_cast<pid_t>(std::strtol(entry->d_name, nullptr, 10));
    if (const pid_t parent = ParentOf(pid); parent >= 0) parents[pid] = parent;
  }
  closedir(proc);
  return parents;
}

// As the ring writer reads a rank variable: a plain non-negative number, else -1.
int32_t RankNumber(const char* value) {
  if (value == nullptr || *value == '\0') return -1;
  char* rest = nullptr;
  const long parsed = std::strtol(value, &rest, 10);
  return *rest == '\0' && parsed >= 0 && parsed < (1L << 30) ? static_cast<int32_t>(parsed) : -1;
}

// A launcher that starts the ranks itself (srun then torchrun): its own SLURM_PROCID or
// PMI_RANK is its node's task number, not a rank. Read from its command line.
bool IsRankLauncher(pid_t pid) {
  std::ifstream file("/proc/" + std::to_string(pid) + "/cmdline", std::ios::binary);
  const std::string line((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  for (size_t start = 0; start < line.size();) {
    size_t end = line.find('\0', start);
    if (end == std::string::npos) end = line.size();
    const std::string argument = line.substr(start, end - start);
    const std::string name = argument.substr(argument.rfind('/') == std::string::npos ? 0 : argument.rfind('/') + 1);
    if (name == "torchrun" || name == "deepspeed" || name == "accelerate" || argument == "torch.distributed.run" ||
        argument == "torch.distributed.launch") {
      return true;
    }
    start = end + 1;
  }
  return false;
}

}  // namespace

std::string ProcessEnvironment(pid_t pid) {
  std::ifstream file("/proc/" + std::to_string(pid) + "/environ", std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
}

const char* EnvironmentValue(const std::string& block, const char* name) {
  const size_t name_length = std::strlen(name);
  size_t start = 0;
  while (start < block.size()) {
    size_t end = block.find('\0', start);
    if (end == std::string::npos) end = block.size();
    if (end - start > name_length && block.compare(start, name_length, name) == 0 && block[start + name_length] == '=') {
      return block.c_str() + start + name_length + 1;
    }
    start = end + 1;
  }
  return nullptr;
}

JobProcessTree::JobProcessTree(pid_t root) : root_(root), host_(ThisHostName()) {}

const JobProcessTree::RankEnvironment& JobProcessTree::EnvironmentOf(pid_t pid) {
  // A process read between its fork and its exec shows its parent's environment: a
  // process with no RANK is read again on the next walks before it is believed.
  constexpr int kReadsBeforeBelieved = 3;
  RankEnvironment& environment = environments_[pid];
  if (environment.rank >= 0 || environment.reads >= kReadsBeforeBelieved) return environment;
  ++environment.reads;
  const std::string block = ProcessEnvironment(pid);
  const LauncherRankVariables* launcher =
      LauncherOf([&block](const char* name) { return EnvironmentValue(block, name); });
  if (launcher == nullptr) return environment;
  if (launcher != &kLauncherRankVariables[0]) {
    // srun's and MPI's variables are collwatch run's own too: a process read before its
    // exec would pass for a rank. Believed from the second read on.
    if (environment.reads < 2) return environment;
    if (IsRankLauncher(pid)) {
      environment.reads = kReadsBeforeBelieved;  // a launcher stays one
      return environment;
    }
  }
  environment.rank = RankNumber(EnvironmentValue(block, SettingInfoOf(launcher->rank).name));
  environment.world_size = RankNumber(EnvironmentValue(block, SettingInfoOf(launcher->world_size).name));
  return environment;
}

std::vector<RankProcess> JobProcessTree::Walk(int64_t now_realtime_ns) {
  const std::map<pid_t, pid_t> parents = ParentsOfAll();
  std::map<pid_t, std::vector<pid_t>> children;
  for (const auto& [pid, parent] : parents) children[parent].push_back(pid);
  // The root and its descendants, parents before children.
  std::vector<pid_t> tree;
  if (parents.count(root_) != 0) tree.push_back(root_);
  for (size_t next = 0; next < tree.size(); ++next) {
    for (const pid_t child : children[tree[next]]) tree.push_back(child);
  }
  const std::set<pid_t> in_tree(tree.begin(), tree.end());
  for (auto it = environments_.begin(); it != environments_.end();) {
    it = in_tree.count(it->first) != 0 ? std::next(it) : environments_.erase(it);
  }

  std::vector<RankProcess> seen;
  std::set<pid_t> ranks_now;
  for (const pid_t pid : tree) {
    const RankEnvironment environment = EnvironmentOf(pid);
    if (environment.rank < 0) continue;
    // A child with its parent's RANK is a worker the rank forked (or a wrapper's child).
    const pid_t parent = parents.at(pid);
    if (pid != root_ && in_tree.count(parent) != 0 && EnvironmentOf(parent).rank == environment.rank) continue;
    ranks_now.insert(pid);
    RankProcess& rank = ranks_[pid];
    const ProcessSample previous = rank.sample;
    rank.info.host = host_;
    rank.info.pid = pid;
    rank.info.global_rank = environment.rank;
    rank.info.world_size = environment.world_size;
    rank.sample = SampleProcess(pid, previous.sampled_ns != 0 ? &previous : nullptr, now_realtime_ns);
    seen.push_back(rank);
  }
  // Rank processes that left the tree: gone (reaped), said once.
  for (auto it = ranks_.begin(); it != ranks_.end();) {
    if (ranks_now.count(it->first) != 0) {
      ++it;
      continue;
    }
    it->second.sample = ProcessSample{};
    it->second.sample.state = ProcessState::kGone;
    it->second.sample.sampled_ns = now_realtime_ns;
    seen.push_back(it->second);
    it = ranks_.erase(it);
  }
  return seen;
}

}  // namespace collwatch
