// Process setup for the trainer (see launch.h): environment, local launcher, TCPStore
// rendezvous. Threading: main thread only; the launcher's signal handler only forwards
// signals to the children.
#include "trainer/launch.h"
#include "ring/loopback_port.h"
#include "ring/settings.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <torch/csrc/distributed/c10d/TCPStore.hpp>

namespace collwatch::trainer {
namespace {

const char* const kLaunchedVariable = SettingInfoOf(Setting::kTrainerLaunched).name;
constexpr auto kStoreTimeout = std::chrono::seconds(300);

[[noreturn]] void Fail(const std::string& message) {
  std::fprintf(stderr, "collwatch-trainer: %s\n", message.c_str());
  std::exit(2);
}

int IntFromEnv(Setting setting, int fallback) {
  const char* text = SettingIfSet(setting);
  if (text == nullptr) return fallback;
  const char* name = SettingInfoOf(setting).name;
  char* end = nullptr;
  const long value = std::strtol(text, &end, 10);
  if (*end != '\0' || value < 0 || value > 1 << 20) {
    Fail(std::string(name) + "='" + text + "' is not a valid number");
  }
  return static_cast<int>(value);
}

// A port nobody listens on now; the store binds it a moment later.
int PickStorePort() {
  const int port = PickLoopbackPort();
  if (port < 0) {
    Fail("cannot pick a free port for the rendezvous store (none of " + std::to_string(kPickAttempts) +
         " tried in " + std::to_string(kFirstPickedPort) + "-" + std::to_string(kLastPickedPort) + " could be bound)");
  }
  return port;
}

std::vector<pid_t> g_children;  // read by the signal handler
volatile sig_atomic_t g_stopping = 0;  // a signal told the launcher to stop the job

void ForwardSignal(int signal_number) {
  g_stopping = 1;
  for (pid_t child : g_children) kill(child, signal_number);
}

}  // namespace

DistEnv ReadDistEnv() {
  DistEnv env;
  env.world_size = IntFromEnv(Setting::kWorldSize, 1);
  env.rank = IntFromEnv(Setting::kRank, 0);
  env.local_rank = IntFromEnv(Setting::kLocalRank, env.rank);
  if (env.world_size < 1 || env.rank >= env.world_size) {
    Fail("RANK " + std::to_string(env.rank) + " is outside WORLD_SIZE " +
         std::to_string(env.world_size));
  }
  if (const char* addr = SettingIfSet(Setting::kMasterAddr)) {
    env.master_addr = addr;
  }
  env.master_port = IntFromEnv(Setting::kMasterPort, 0);
  if (env.world_size > 1 && env.master_port == 0) {
    Fail("WORLD_SIZE > 1 needs MASTER_ADDR and MASTER_PORT (or use --nproc)");
  }
  return env;
}

bool IsLaunchedRank() { return SettingIfSet(Setting::kTrainerLaunched) != nullptr; }

int LaunchLocalRanks(int nproc, char** argv) {
  const std::string port = std::to_string(PickStorePort());
  for (int rank = 0; rank < nproc; ++rank) {
    const pid_t child = fork();
    if (child < 0) Fail("fork failed");
    if (child == 0) {
      const std::string rank_text = std::to_string(rank);
      setenv("RANK", rank_text.c_str(), 1);
      setenv("LOCAL_RANK", rank_text.c_str(), 1);
      setenv("WORLD_SIZE", std::to_string(nproc).c_str(), 1);
      setenv("LOCAL_WORLD_SIZE", std::to_string(nproc).c_str(), 1);
      setenv("MASTER_ADDR", "127.0.0.1", 1);
      setenv("MASTER_PORT", port.c_str(), 1);
      setenv(kLaunchedVariable, "1", 1);
      execv("/proc/self/exe", argv);
      std::perror("collwatch-trainer: exec");
      _exit(127);
    }
    g_children.push_back(child);
  }
  signal(SIGTERM, ForwardSignal);
  signal(SIGINT, ForwardSignal);

  int result = 0;
  size_t running = g_children.size();
  while (running > 0) {
    int status = 0;
    const pid_t done = waitpid(-1, &status, 0);
    if (done < 0) break;
    --running;
    const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (code != 0 && result == 0) {
      result = code;
      if (g_stopping) continue;  // the children were told to stop: no rank failed
      int rank = 0;
      while (rank < nproc && g_children[rank] != done) ++rank;
      std::fprintf(stderr, "collwatch-trainer: rank %d exited with code %d; stopping the others\n",
                   rank, code);
      for (pid_t child : g_children) {
        if (child != done) kill(child, SIGKILL);
      }
    }
  }
  return result;
}

struct RendezvousStore::Impl {
  c10::intrusive_ptr<c10d::TCPStore> store;
};

RendezvousStore::RendezvousStore(const DistEnv& env) : impl_(new Impl), rank_(env.rank) {
  c10d::TCPStoreOptions options;
  options.port = static_cast<std::uint16_t>(env.master_port);
  options.isServer = env.rank == 0;
  options.numWorkers = static_cast<std::size_t>(env.world_size);
  options.waitWorkers = false;
  options.timeout = kStoreTimeout;
  try {
    impl_->store = c10::make_intrusive<c10d::TCPStore>(env.master_addr, options);
  } catch (const std::exception& error) {
    Fail("rank " + std::to_string(env.rank) + ": cannot reach the rendezvous store at " +
         env.master_addr + ":" + std::to_string(env.master_port) + ": " + error.what());
  }
}

RendezvousStore::~RendezvousStore() = default;

std::vector<uint8_t> RendezvousStore::Share(const std::string& key,
                                            const std::vector<uint8_t>& value) {
  try {
    if (rank_ == 0) {
      impl_->store->set(key, value);
      return value;
    }
    return impl_->store->get(key);
  } catch (const std::exception& error) {
    Fail("rank " + std::to_string(rank_) + ": rendezvous key '" + key + "' failed: " + error.what());
  }
}

}  // namespace collwatch::trainer
