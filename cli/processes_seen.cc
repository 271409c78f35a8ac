// Copies and rank clashes among a load's inputs (processes_seen.h).
#include "cli/processes_seen.h"

#include "absl/strings/str_cat.h"

namespace collwatch {
namespace {

std::string ProcessText(const InputProcess& process) {
  return absl::StrCat(process.input, " (host ", process.host, ", pid ", process.pid, ", started at ", process.start_ns,
                      " ns)");
}

}  // namespace

std::string ProcessesSeen::CopyOf(const InputProcess& process) {
  auto [it, fresh] = inputs_.try_emplace({process.host, process.pid, process.start_ns}, process.input);
  if (!fresh) return it->second;
  if (process.rank < 0) return "";
  auto [claimed, first] = ranks_.try_emplace({process.job, process.rank}, process);
  if (!first && clash_.empty()) {
    clash_ = absl::StrCat("two processes are rank ", process.rank, " of job ", process.job, ": ",
                          ProcessText(claimed->second), " and ", ProcessText(process),
                          ". These are two jobs, or two attempts of one, under one job id, and are never read as "
                          "one: put each one's traces or rings in a folder of its own and analyse them apart");
  }
  return "";
}

absl::Status ProcessesSeen::RankClash() const {
  return clash_.empty() ? absl::OkStatus() : absl::InvalidArgumentError(clash_);
}

std::string ProcessesSeen::CopyNote(const InputProcess& copy, const std::string& first) {
  return absl::StrCat(copy.input, ": a copy of ", first, " (the same process: host ", copy.host, ", pid ", copy.pid,
                      ", started at ", copy.start_ns, " ns): read once, from ", first);
}

}  // namespace collwatch
