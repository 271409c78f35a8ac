// Process setup: the torchrun/srun-style environment (RANK, WORLD_SIZE, LOCAL_RANK,
// MASTER_ADDR, MASTER_PORT), the `--nproc N` launcher that starts N local ranks of this
// binary, and the ncclUniqueId exchange through a c10d TCPStore (rank 0 is the server).
// Threading: called from the main thread only.
#ifndef COLLWATCH_TRAINER_LAUNCH_H_
#define COLLWATCH_TRAINER_LAUNCH_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace collwatch::trainer {

struct DistEnv {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 0;  // 0: no store (a single process without a launcher)
};

// Reads the launcher's environment; a process without RANK/WORLD_SIZE is rank 0 of 1.
// Exits with a message when the variables are present but malformed.
DistEnv ReadDistEnv();

// True in a rank started by LaunchLocalRanks (which must not launch again).
bool IsLaunchedRank();

// Runs this binary again, same arguments, as ranks 0..nproc-1 with the launcher
// environment set. Returns 0 when all ranks succeed, else the first failing rank's code
// (128 + signal when killed); the other ranks are then stopped, as torchrun does.
int LaunchLocalRanks(int nproc, char** argv);

// The rendezvous store: rank 0 serves it, everyone connects. Kept alive for the whole
// run so late ranks can still read what rank 0 published.
class RendezvousStore {
 public:
  explicit RendezvousStore(const DistEnv& env);
  ~RendezvousStore();
  RendezvousStore(const RendezvousStore&) = delete;
  RendezvousStore& operator=(const RendezvousStore&) = delete;

  // Rank 0 publishes `value` under `key`; the others wait for it and return it.
  std::vector<uint8_t> Share(const std::string& key, const std::vector<uint8_t>& value);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int rank_ = 0;
};

}  // namespace collwatch::trainer

#endif  // COLLWATCH_TRAINER_LAUNCH_H_
