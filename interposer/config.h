// The interposer's settings, read from the environment (the one table: ring/settings.h)
// once when the first ring is created. Threading: read-only after LoadConfig();
// LoadConfig() itself runs once, under the recorder's init guard.
#ifndef COLLWATCH_INTERPOSER_CONFIG_H_
#define COLLWATCH_INTERPOSER_CONFIG_H_

#include <cstdint>
#include <cstring>

#include "ring/ring_format.h"
#include "ring/settings.h"

namespace collwatch {

struct Config {
  bool disabled = false;
  bool completion = true;
  bool tsc_clock = true;  // COLLWATCH_CLOCK=auto
  bool verbose = false;
  uint64_t ring_records = 1u << 15;  // per lane
  bool ring_records_set = false;     // COLLWATCH_RING_RECORDS given: the ring is not sized to the free space
  uint32_t ring_lanes = 4;
  char ring_dir[256] = {};
  char job[ring::kJobBytes] = {};
  char collector[256] = {};   // COLLWATCH_COLLECTOR: spawn an agent for it
  char agent_path[512] = {};  // COLLWATCH_AGENT
  char token_file[512] = {};  // COLLWATCH_TOKEN_FILE: for the spawned agent
  char tls_ca[512] = {};      // COLLWATCH_TLS_CA: for the spawned agent
};

// Reads the preload's settings into a Config. Never fails: bad values fall back to defaults.
Config LoadConfig() noexcept;

// COLLWATCH_NVTX: whether NVTX ranges become regions. Read on its own, inline, because
// NVTX asks for the injection before the first NCCL call loads the Config, and the
// injection is also built without the recorder (regions.cmake).
inline bool NvtxRegionsWanted() noexcept { return std::strcmp(SettingValue(Setting::kNvtx), "off") != 0; }

}  // namespace collwatch

#endif  // COLLWATCH_INTERPOSER_CONFIG_H_
