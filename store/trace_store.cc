// TraceStore: one writer per rank stream under an output folder (DIR/<job>/<rank trace>),
// and the folder names and listing of rank traces. Frames: trace_frames.cc; the writer and
// the reader: rank_trace_writer.cc, rank_trace_reader.cc.
// Threading: see trace_store.h (TraceStore: one mutex).
#include "store/trace_store.h"

#include <algorithm>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ring/ring_format.h"
#include "ring/settings.h"
#include "store/trace_store_format.h"

namespace collwatch {
namespace {


std::string SafeName(const std::string& text) {
  std::string out = text.empty() ? "unknown" : text;
  for (char& c : out) {
    const bool safe = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '-' || c == '_';
    if (!safe) c = '_';
  }
  return out.substr(0, 64);
}

}  // namespace

std::string JobTracesDir(const std::string& out_dir, const std::string& job) {
  // Cut as a ring cuts it (one place: a cut id keeps a hash of the whole), never at 64.
  char cut[ring::kJobBytes];
  SafeJobName(job.c_str(), cut, sizeof cut);
  return absl::StrCat(out_dir, "/", SafeName(cut));
}

std::string RankTraceDirName(const v1::RankIdentity& identity) {
  return absl::StrCat("rank-", identity.rank(), ".", SafeName(identity.host()), ".", identity.pid(), ".",
                      identity.start_realtime_ns());
}

absl::StatusOr<std::shared_ptr<RankTraceWriter>> TraceStore::Writer(const v1::RankIdentity& identity) {
  const std::string dir = absl::StrCat(JobTracesDir(out_dir_, identity.job()), "/", RankTraceDirName(identity));
  std::lock_guard<std::mutex> lock(mutex_);
  auto found = writers_.find(dir);
  if (found != writers_.end()) return found->second;
  absl::StatusOr<std::unique_ptr<RankTraceWriter>> writer = RankTraceWriter::Open(dir, identity, options_);
  if (!writer.ok()) return writer.status();
  std::shared_ptr<RankTraceWriter> shared = *std::move(writer);
  writers_[dir] = shared;
  return shared;
}

std::vector<std::string> ListRankTraces(const std::string& out_dir, const std::string& job) {
  std::vector<std::string> dirs;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(JobTracesDir(out_dir, job), error)) {
    if (std::filesystem::exists(entry.path() / store::kLogFileName)) dirs.push_back(entry.path().string());
  }
  std::sort(dirs.begin(), dirs.end());
  return dirs;
}

}  // namespace collwatch
