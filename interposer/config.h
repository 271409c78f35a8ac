// The interposer's settings: one table of environment variables (name, default,
// description), read once when the first ring is created. Threading: read-only after
// LoadConfig(); LoadConfig() itself runs once, under the recorder's init guard.
#ifndef COLLWATCH_INTERPOSER_CONFIG_H_
#define COLLWATCH_INTERPOSER_CONFIG_H_

#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace collwatch {

struct EnvVar {
  const char* name;
  const char* default_value;  // "" where the default is computed (see description)
  const char* description;
};

// Every variable the interposer reads, in one place (docs/ and `collwatch env` list it).
inline constexpr EnvVar kEnvVars[] = {
    {"COLLWATCH_DISABLE", "0", "1: forward every call without recording anything"},
    {"COLLWATCH_RING_DIR", "", "folder of the ring files (default /dev/shm/collwatch-<uid>)"},
    {"COLLWATCH_RING_RECORDS", "32768",
     "records per lane (128 bytes each), rounded up to a power of two"},
    {"COLLWATCH_RING_LANES", "4",
     "lanes per ring: lane 0 shared, one owned lane per NCCL-calling thread after that"},
    {"COLLWATCH_JOB_ID", "",
     "job name in ring names (default TORCHELASTIC_RUN_ID, SLURM_JOB_ID, else 'local')"},
    {"COLLWATCH_COMPLETION", "auto",
     "auto: track GPU completion with CUDA events where a CUDA driver is loaded; off: never"},
    {"COLLWATCH_CLOCK", "auto",
     "auto: timestamps from the TSC where it is invariant, calibrated against CLOCK_MONOTONIC; "
     "monotonic: clock_gettime for every timestamp"},
    {"COLLWATCH_NVTX", "on",
     "off: ignore NVTX ranges (records carry no region; the preload declines NVTX injection, so "
     "the program's NVTX calls cost nothing)"},
    {"COLLWATCH_VERBOSE", "0", "1: print the settings and the ring path once on stderr"},
    {"COLLWATCH_COLLECTOR", "",
     "collector address: the first communicator init of a node starts `collwatch agent` for "
     "it, unless an agent of this node and job runs (lock file in the ring folder)"},
    {"COLLWATCH_AGENT", "",
     "the collwatch binary to start as the agent (default: beside libcollwatch.so, or "
     "../cli/ or ../bin/ from it)"},
    {"COLLWATCH_TOKEN_FILE", "",
     "file holding the collector's token: the agent the preload starts sends it (--token-file)"},
    {"COLLWATCH_TLS_CA", "",
     "root certificates (PEM file): the agent the preload starts connects with TLS (--tls-ca)"},
};

struct Config {
  bool disabled = false;
  bool completion = true;
  bool tsc_clock = true;  // COLLWATCH_CLOCK=auto
  bool verbose = false;
  uint64_t ring_records = 1u << 15;  // per lane
  uint32_t ring_lanes = 4;
  char ring_dir[256] = {};
  char job[64] = {};
  char collector[256] = {};   // COLLWATCH_COLLECTOR: spawn an agent for it
  char agent_path[512] = {};  // COLLWATCH_AGENT
  char token_file[512] = {};  // COLLWATCH_TOKEN_FILE: for the spawned agent
  char tls_ca[512] = {};      // COLLWATCH_TLS_CA: for the spawned agent
};

// Reads kEnvVars into a Config. Never fails: bad values fall back to defaults.
Config LoadConfig() noexcept;

// COLLWATCH_NVTX: whether NVTX ranges become regions. Read on its own, inline, because
// NVTX asks for the injection before the first NCCL call loads the Config, and the
// injection is also built without the recorder (regions.cmake).
inline bool NvtxRegionsWanted() noexcept {
  const char* value = std::getenv("COLLWATCH_NVTX");
  return value == nullptr || std::strcmp(value, "off") != 0;
}

}  // namespace collwatch

#endif  // COLLWATCH_INTERPOSER_CONFIG_H_
