// The node agent: finds the rings of its node (a folder private to its user, rescanned
// for new ones), one RankChannel per ring (rank_channel.h), the idle exit and the drain.
// Threading: see agent.h. The tail thread polls every RankChannel; ranks_ and the logged
// reasons are guarded by mutex_ (the tail thread, Drain and Stats read them).
#include "agent/agent.h"

#include <limits.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "agent/rank_channel.h"
#include "grpcpp/grpcpp.h"
#include "process/log_line.h"
#include "process/rank_membership.h"
#include "proto/collector_channel.h"
#include "ring/clocks.h"
#include "ring/collector_address.h"
#include "ring/ring_directory.h"
#include "ring/ring_leftovers.h"
#include "ring/ring_reader.h"
#include "ring/settings.h"

namespace collwatch {

std::string DefaultRingDir() {
  char dir[PATH_MAX];
  RingDirSetting(dir, sizeof dir);
  return dir;
}

absl::StatusOr<std::unique_ptr<Agent>> Agent::Start(const AgentOptions& options) {
  char why[512];
  if (!CheckCollectorAddress(options.collector.c_str(), /*min_port=*/1, why, sizeof why)) {
    return absl::InvalidArgumentError(absl::StrCat("--collector ", why));
  }
  std::unique_ptr<Agent> agent(new Agent(options));
  if (agent->options_.ring_dir.empty()) agent->options_.ring_dir = DefaultRingDir();
  grpc::ChannelArguments arguments;
  arguments.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);
  arguments.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5000);
  arguments.SetMaxSendMessageSize(64 << 20);
  agent->channel_ = CollectorChannel(options.collector, options.tls_ca_pem, arguments);
  agent->tail_thread_ = std::thread([raw = agent.get()] { raw->TailLoop(); });
  return agent;
}

Agent::Agent(AgentOptions options) : options_(std::move(options)) {}

Agent::~Agent() { Stop(); }

void Agent::Stop() {
  stop_ = true;
  if (tail_thread_.joinable()) tail_thread_.join();
  SayExits(/*now=*/true);
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& [path, rank] : ranks_) rank->Stop();
}

void Agent::Rescan() {
  std::lock_guard<std::mutex> scanning(scan_mutex_);
  // Rings in a folder another user could write into are not this user's to ship.
  const RingDirCheck dir = OpenPrivateRingDir(options_.ring_dir.c_str(), /*create=*/false);
  if (dir.fd >= 0) close(dir.fd);
  if (dir.verdict != RingDirVerdict::kPrivate) {
    if (dir.verdict == RingDirVerdict::kUnusable && dir.error == ENOENT) return;  // the folder appears with the first ring
    char why[256];
    DescribeRingDirCheck(dir, why, sizeof why);
    std::string& logged = unreadable_[options_.ring_dir];
    if (options_.log && logged != why) LogLine(LogLevel::kError, "collwatch agent") << "not reading ring folder " << options_.ring_dir << ": " << why;
    logged = why;
    return;
  }
  absl::StatusOr<std::vector<std::string>> paths = ListRingFiles(options_.ring_dir);
  if (!paths.ok()) return;  // the folder appears with the first ring
  for (const std::string& path : *paths) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (ranks_.count(path)) continue;
    }
    absl::StatusOr<std::unique_ptr<RingReader>> reader = RingReader::Open(path);
    if (!reader.ok()) {
      // A ring still being created is retried on the next scan; log each new reason once.
      std::string& logged = unreadable_[path];
      const std::string why(reader.status().message());
      if (options_.log && logged != why && why.find("not written yet") == std::string::npos) {
        LogLine(LogLevel::kError, "collwatch agent") << "skipping " << why;
      }
      logged = why;
      continue;
    }
    if (!options_.job.empty() && (*reader)->identity().job != options_.job) continue;
    unreadable_.erase(path);
    auto channel = std::static_pointer_cast<grpc::Channel>(channel_);
    auto rank = std::make_unique<RankChannel>(options_, job_stopping_, *std::move(reader), channel);
    std::lock_guard<std::mutex> lock(mutex_);
    ranks_.try_emplace(path, std::move(rank));
  }
}

void Agent::TailLoop() {
  uint64_t last_scan = 0;
  uint64_t last_live = MonotonicClockNs();
  while (!stop_) {
    const uint64_t now = MonotonicClockNs();
    if (static_cast<double>(now - last_scan) / 1e9 >= options_.rescan_interval_s) {
      Rescan();
      last_scan = now;
    }
    std::vector<RankChannel*> ranks;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (auto& [path, rank] : ranks_) ranks.push_back(rank.get());
    }
    bool any_live = false;
    for (RankChannel* rank : ranks) {
      rank->Poll();
      if (std::optional<std::vector<int32_t>> exited = rank->TakeUnsaidExit()) {
        ++unsaid_exits_.processes;
        if (exited->empty()) ++unsaid_exits_.ranks_unknown;
        unsaid_exits_.ranks.insert(unsaid_exits_.ranks.end(), exited->begin(), exited->end());
        unsaid_exits_.last_noted_ns = now;
      }
      const bool stranded = options_.give_up_after_s > 0 && rank->StrandedFor(now, options_.give_up_after_s);
      if (stranded && options_.log && given_up_.insert(rank->identity().ring_path()).second) {
        const std::string problem = rank->LastProblem();
        LogLine(LogLevel::kError, "collwatch agent") << absl::StrCat("giving up on ", rank->Who(), ": its writer ended and collector ",
                                  options_.collector, " stored none of its records for ", options_.give_up_after_s,
                                  " s", problem.empty() ? "" : absl::StrCat(" (it ", problem, ")"),
                                  "; its unshipped records stay in ", rank->identity().ring_path(),
                                  " (collwatch dump)");
      }
      any_live = any_live || (rank->live() && !stranded);
    }
    RetireShippedRings(ranks);
    SayExits(/*now=*/false);
    if (any_live) last_live = now;
    if (options_.idle_exit_s > 0 && static_cast<double>(now - last_live) / 1e9 > options_.idle_exit_s) {
      idle_expired_ = true;
    }
    std::this_thread::sleep_for(std::chrono::duration<double>(options_.poll_interval_s));
  }
}

void Agent::RetireShippedRings(const std::vector<RankChannel*>& ranks) {
  for (RankChannel* rank : ranks) {
    const std::string& path = rank->identity().ring_path();
    if (retired_.count(path) || !rank->ShippedAndEnded()) continue;
    retired_.insert(path);
    // The ring's RAM in /dev/shm is the node's: nothing else frees it once the job is gone.
    const absl::Status done = options_.keep_rings ? MarkShipped(rank->ring_identity()) : RemoveRing(path);
    if (!options_.log) continue;
    if (!done.ok()) {
      LogLine(LogLevel::kError, "collwatch agent") << done.message();
    } else if (!options_.keep_rings) {
      LogLine(LogLevel::kInfo, "collwatch agent") << absl::StrCat("removed the ring of ", rank->Who(), ": its process ended and all ",
                                rank->events_read(), " records read are stored (", path, ")");
    }
  }
}

void Agent::SayExits(bool now) {
  UnsaidExits& exits = unsaid_exits_;
  if (exits.processes == 0 || (!now && MonotonicClockNs() - exits.last_noted_ns < kExitQuietNs)) return;
  std::sort(exits.ranks.begin(), exits.ranks.end());
  exits.ranks.erase(std::unique(exits.ranks.begin(), exits.ranks.end()), exits.ranks.end());
  LogLine line(LogLevel::kInfo, "collwatch agent");
  line << exits.processes << (exits.processes == 1 ? " process" : " processes") << " exited";
  if (!exits.ranks.empty()) line << " (" << ProcessRanksText(exits.ranks) << ")";
  if (exits.ranks_unknown > 0) line << "; " << exits.ranks_unknown << " of them named no rank";
  exits = UnsaidExits{};
}

bool Agent::Drain(double timeout_s) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (std::chrono::steady_clock::now() < deadline) {
    bool done = true;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (auto& [path, rank] : ranks_) done = done && !rank->live();
    }
    if (done) {
      // A ring created at the last moment is found by one more scan.
      Rescan();
      std::lock_guard<std::mutex> lock(mutex_);
      bool still = true;
      for (auto& [path, rank] : ranks_) still = still && !rank->live();
      if (still) {
        for (auto& [path, rank] : ranks_) {
          if (!rank->drained()) return false;  // refused: its records are in its ring only
        }
        return true;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

AgentStats Agent::Stats() {
  AgentStats stats;
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& [path, rank] : ranks_) rank->AddTo(&stats);
  return stats;
}

}  // namespace collwatch
