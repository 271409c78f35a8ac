// The node agent: finds the ring files of its node (new ones appear while it runs),
// tails each, and keeps one gRPC stream per rank to the collector with batching, acks,
// resend after a reconnect and exponential backoff while the collector is down; reading
// goes on meanwhile. Reports ranks whose process died or stopped beating, and ships the
// tail of rings whose process is already gone.
// Threading: one tail thread reads every ring; each rank stream has a sender thread and,
// while connected, an ack reader thread.
#ifndef COLLWATCH_AGENT_AGENT_H_
#define COLLWATCH_AGENT_AGENT_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/outgoing_batches.h"
#include "process/process_info.h"

namespace collwatch {

class RankChannel;

struct AgentOptions {
  std::string collector = "127.0.0.1:7777";  // address of the collector
  std::string ring_dir;        // default: COLLWATCH_RING_DIR, else /dev/shm/collwatch-$UID
  std::string job;             // ship only rings of this job (empty: every job)
  std::string token;           // shared secret sent as call metadata
  std::string tls_ca_pem;      // root certificates (PEM contents): use TLS
  double poll_interval_s = 0.02;   // ring polling period
  double rescan_interval_s = 0.2;  // ring folder scan period
  double silent_after_s = kSilentAfterS;  // heartbeat older than this: the rank is silent
  double max_backoff_s = 5.0;      // reconnect backoff ceiling
  double idle_exit_s = 0;          // > 0: exit when no live ring was seen for this long
  // > 0: a ring whose writer is gone stops counting as live (for idle_exit_s) once the
  // collector stored none of its records this long, whatever the reason (unreachable, or
  // ending every stream: a full disk); its unshipped records stay in the ring.
  double give_up_after_s = 0;
  // Leave a ring in place once its writer ended and every record is stored, with a
  // shipped mark beside it (`collwatch gc` removes it later); by default it is removed.
  bool keep_rings = false;
  BatchLimits limits;
  bool log = true;                 // report rank deaths and stream errors on stderr
};

// Totals over every rank stream.
struct AgentStats {
  int rings = 0;            // rings being shipped or shipped
  int drained = 0;          // rings whose writer is gone and everything is acked
  int failed = 0;           // streams the collector refused for good
  uint64_t events_read = 0;
  uint64_t lost = 0;
  uint64_t connects = 0;    // successful hellos, over all streams
};

// The default ring folder: COLLWATCH_RING_DIR, else /dev/shm/collwatch-<uid> (RingDirSetting).
std::string DefaultRingDir();

class Agent {
 public:
  static absl::StatusOr<std::unique_ptr<Agent>> Start(const AgentOptions& options);
  ~Agent();  // stops at once: unacked batches are lost with the process
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

  // Waits until every ring's writer is gone and all it held is acknowledged (or its
  // stream was refused for good), or the timeout. True only when every ring's records
  // are stored: "drained" means stored, so a refused stream makes it false at once.
  bool Drain(double timeout_s);
  // True once idle_exit_s passed with no live ring.
  bool IdleExpired() const { return idle_expired_.load(); }
  void Stop();
  AgentStats Stats();
  // The job is being stopped on purpose (collwatch run --kill-on-hang): its ranks' ends
  // are no longer news, so they are not logged as deaths.
  void NoteJobStopping() { job_stopping_ = true; }

 private:
  explicit Agent(AgentOptions options);
  void TailLoop();
  // Opens the rings not shipped yet. The tail thread and Drain (the caller's thread) both
  // scan: one scan at a time (scan_mutex_), so that a ring is opened once and no channel
  // the tail thread is polling is ever replaced.
  void Rescan();
  // Removes (or marks, with keep_rings) the rings whose records are all stored and whose
  // writer ended, once each; says so in the log. Tail thread.
  void RetireShippedRings(const std::vector<RankChannel*>& ranks);
  // Says the normal exits noted so far in one line, once no exit came for kExitQuietNs (or
  // at once when `now`): at 1,024 ranks a line each would drown the log. Tail thread, or
  // after it ended.
  void SayExits(bool now);

  AgentOptions options_;
  std::shared_ptr<void> channel_;  // the gRPC channel (type-erased to keep gRPC out of this header)
  std::mutex mutex_;  // guards ranks_
  std::map<std::string, std::unique_ptr<RankChannel>> ranks_;  // by ring path
  std::mutex scan_mutex_;  // held through each Rescan; guards unreadable_
  std::map<std::string, std::string> unreadable_;              // path -> last error logged
  std::set<std::string> given_up_;                             // rings given up on (logged once)
  std::set<std::string> retired_;  // rings removed or marked shipped (tail thread only)
  struct UnsaidExits {
    int processes = 0;
    int ranks_unknown = 0;  // processes whose ranks no record named
    std::vector<int32_t> ranks;
    uint64_t last_noted_ns = 0;  // CLOCK_MONOTONIC
  };
  UnsaidExits unsaid_exits_;  // tail thread only
  static constexpr uint64_t kExitQuietNs = 1'000'000'000;
  std::atomic<bool> stop_{false};
  std::atomic<bool> idle_expired_{false};
  std::atomic<bool> job_stopping_{false};  // read by every RankChannel
  std::thread tail_thread_;
};

}  // namespace collwatch

#endif  // COLLWATCH_AGENT_AGENT_H_
