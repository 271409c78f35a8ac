// Every environment variable collwatch reads, in one table: its name, default, who reads
// it and what it means. Loading goes through SettingValue; `collwatch env` prints the
// table with the values in force and writes the table of docs/environment.md (checked by
// ctest). Header-only, no allocation, noexcept: the preload and the CPU NCCL backend
// read it inside training jobs. Threading: reads the environment only.
#ifndef COLLWATCH_RING_SETTINGS_H_
#define COLLWATCH_RING_SETTINGS_H_

#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>

#include "ring/hash.h"

namespace collwatch {

enum class Setting : unsigned char {
  // libcollwatch.so, the interposer.
  kDisable,
  kRingDir,
  kRingRecords,
  kRingLanes,
  kJobId,
  kCompletion,
  kClock,
  kNvtx,
  kNvtxChain,
  kPythonFrames,
  kVerbose,
  kCollector,
  kAgent,
  kTokenFile,
  kTlsCa,
  // The `collwatch` command.
  kPreload,
  kCpuNcclLibrary,
  kKeepRings,
  kNoColor,
  kBuildApart,
  // The CPU NCCL backend (libnccl.so.2 of cpu_nccl/).
  kCpuNcclShmDir,
  kCpuNcclSpin,
  kCpuNcclCuda,
  kCpuNcclLibcuda,
  kCpuNcclIpc,
  kCpuNcclTrace,
  kCpuNcclMismatch,
  kCpuNcclOneGpu,
  kCpuNcclProfilerVersion,
  kOriginalLocalRank,
  // Set by launchers (torchrun, Slurm) and NVTX, read by collwatch.
  kRank,
  kLocalRank,
  kWorldSize,
  kTorchelasticRunId,
  kSlurmJobId,
  kSlurmStepId,
  kSlurmProcid,
  kSlurmLocalid,
  kSlurmNtasks,
  kOmpiRank,
  kOmpiLocalRank,
  kOmpiSize,
  kPmiRank,
  kMpiLocalRankId,
  kPmiSize,
  kMasterAddr,
  kMasterPort,
  kNvtxInjectionPath,
  kLdPreload,
  kNcclProfilerPlugin,
  // PyTorch's Flight Recorder, read from the ranks' environments by `collwatch run`.
  kTorchFrPipeFile,
  kTorchNcclPipeFile,
  kTorchFrDumpFile,
  kTorchNcclDumpFile,
  kHome,
  // collwatch's own programs, benchmarks and tests.
  kTrainerLaunched,
  kBenchDir,
  kTestProcess,
  kTestStepMs,
  kTestLoopSteps,
  kTestLoopGate,
  kTestNvtxLog,
  kNeverHurtsBaseline,
  kScreenshotDir,
  kUpdateGolden,
};

struct SettingInfo {
  Setting setting;
  const char* name;
  // What the reader uses when the variable is unset or empty; "" where there is none or
  // it is computed (`default_text` says how).
  const char* default_value;
  const char* default_text;  // the default as the docs show it
  const char* read_by;
  const char* meaning;
};

// In the order of Setting (SettingInfoOf checks it at compile time).
inline constexpr SettingInfo kSettings[] = {
    {Setting::kDisable, "COLLWATCH_DISABLE", "0", "`0`", "libcollwatch.so",
     "`1`: forward every call without recording anything"},
    {Setting::kRingDir, "COLLWATCH_RING_DIR", "", "`/dev/shm/collwatch-<uid>`",
     "libcollwatch.so, collwatch agent",
     "folder of the ring files (created 0700; files 0600). Used only if it is a directory of this user, not a "
     "symlink, closed to others, in a parent others cannot swap it in; else one warning and nothing is "
     "recorded (docs/security.md). `collwatch agent` ships the rings of this folder by default"},
    {Setting::kRingRecords, "COLLWATCH_RING_RECORDS", "32768", "`32768`", "libcollwatch.so",
     "records per lane (128 bytes each), rounded up to a power of two, 64 ... 1 Mi. Unset: 32768, halved (with "
     "the ring's name and call path tables) while a ring would take more than a quarter of the ring folder's free "
     "space, down to 1024 (about 0.9 MiB a ring); where even that does not fit, the rank has no ring and a "
     "`.noring` note there gives the reason to `analyze`"},
    {Setting::kRingLanes, "COLLWATCH_RING_LANES", "4", "`4`", "libcollwatch.so",
     "lanes per ring, 2 ... 64: lane 0 is shared, each further lane belongs to one thread that calls NCCL "
     "(the watcher thread takes one on GPUs)"},
    {Setting::kJobId, "COLLWATCH_JOB_ID", "",
     "`TORCHELASTIC_RUN_ID`, `SLURM_JOB_ID`_`SLURM_STEP_ID`, else `local`", "libcollwatch.so, collwatch run",
     "job name in ring file names (characters other than letters, digits, `-`, `_`, `.` become `_`). "
     "`collwatch run` keeps it if set, else takes the launcher's (`TORCHELASTIC_RUN_ID`, Slurm's job and step, "
     "a torchrun command's `--rdzv-id`), else sets `run-<time>-<pid>`: every node of a job wrapped in its own "
     "`collwatch run` must get the same one"},
    {Setting::kCompletion, "COLLWATCH_COMPLETION", "auto", "`auto`", "libcollwatch.so",
     "`auto`: track GPU completion with CUDA events where a CUDA driver is loaded; `off`: never"},
    {Setting::kClock, "COLLWATCH_CLOCK", "auto", "`auto`", "libcollwatch.so",
     "`auto`: record times come from the TSC where it is invariant (`constant_tsc` and `nonstop_tsc`), "
     "calibrated against `CLOCK_MONOTONIC` every 100 ms and re-based when it jumps; `monotonic`: "
     "`clock_gettime` for every timestamp (20-45 ns more per call)"},
    {Setting::kNvtx, "COLLWATCH_NVTX", "on", "`on`", "libcollwatch.so",
     "`off`: ignore NVTX ranges: the preload declines NVTX's injection request (read when NVTX asks, at the "
     "program's first NVTX call), so records carry no region and the program's NVTX calls are no-ops. The "
     "tests run labelled programs as unlabelled ones with it"},
    {Setting::kNvtxChain, "COLLWATCH_NVTX_CHAIN", "", "unset", "libcollwatch.so, collwatch run",
     "another NVTX injection library (Nsight Systems') that sees the ranges too: libcollwatch.so, as the "
     "injection library, loads it and initialises it first for each NVTX instance, and its own callbacks "
     "call the tool's. `collwatch run` moves an `NVTX_INJECTION64_PATH` naming another library here; one that "
     "cannot be loaded is said once on stderr per process (docs/environment.md, Living beside Nsight Systems)"},
    {Setting::kPythonFrames, "COLLWATCH_PYTHON_FRAMES", "on", "`on`", "libcollwatch.so",
     "`off`: never read the calling thread's Python stack (CPython 3.10-3.13) at NCCL calls, so records "
     "carry no Python call path; `pretend-unsupported` (tests): treat the interpreter as a version whose "
     "layout is unknown"},
    {Setting::kVerbose, "COLLWATCH_VERBOSE", "0", "`0`", "libcollwatch.so",
     "`1`: print the settings and the ring path once on stderr"},
    {Setting::kCollector, "COLLWATCH_COLLECTOR", "", "unset", "libcollwatch.so",
     "collector address: the first communicator init of a node starts `collwatch agent --collector ADDR "
     "--ring-dir ... --job ... --idle-exit 30 --give-up-after 600`, unless an agent of this node and job runs "
     "(it holds `flock` on `<ring dir>/agent.<job>.lock`, which also names its pid; its output goes to "
     "`agent.<job>.log` there)"},
    {Setting::kAgent, "COLLWATCH_AGENT", "", "beside `libcollwatch.so`, else `../cli/collwatch`, `../bin/collwatch`",
     "libcollwatch.so", "the `collwatch` binary started as the agent"},
    {Setting::kTokenFile, "COLLWATCH_TOKEN_FILE", "", "unset", "libcollwatch.so",
     "file holding the collector's token: the agent started for `COLLWATCH_COLLECTOR` gets `--token-file` "
     "with it"},
    {Setting::kTlsCa, "COLLWATCH_TLS_CA", "", "unset", "libcollwatch.so",
     "root certificates (PEM file): the agent started for `COLLWATCH_COLLECTOR` connects with TLS "
     "(`--tls-ca`)"},
    {Setting::kPreload, "COLLWATCH_PRELOAD", "",
     "beside the `collwatch` binary (`../interposer/`, `../lib/`, its own folder)", "collwatch run",
     "the `libcollwatch.so` that `collwatch run` preloads"},
    {Setting::kCpuNcclLibrary, "COLLWATCH_CPU_NCCL", "",
     "beside the `collwatch` binary (`../cpu_nccl/`, `../lib/collwatch-cpu-nccl/`)", "collwatch run --one-gpu",
     "the CPU NCCL backend's `libnccl.so.2` that `--one-gpu` puts under the job"},
    {Setting::kKeepRings, "COLLWATCH_KEEP_RINGS", "0", "`0`", "collwatch agent",
     "`1`: the agent leaves a ring in place once its process ended and every record is stored, beside a "
     "`.shipped` mark (`collwatch gc` removes it later), as `--keep-rings` does; `0`: it removes the ring"},
    {Setting::kNoColor, "NO_COLOR", "", "unset", "collwatch top, collwatch run",
     "any value but empty: the dashboard draws without colour (bold, dim and reverse stay), as no-color.org asks"},
    {Setting::kBuildApart, "COLLWATCH_BUILD_APART", "auto", "`auto`",
     "collwatch analyze, export, diff, baseline, check",
     "`on`: each rank trace of a trace store is built into a model of its own on the thread that read it (and, "
     "for `collwatch analyze`, folded there into the rank classes found so far), and the job's model takes those "
     "in; `off`: every trace is applied on one thread; `auto` (or any other value): `on` from 2 cores up. The "
     "report is the same either way"},
    {Setting::kCpuNcclShmDir, "COLLWATCH_CPU_NCCL_SHM_DIR", "/dev/shm", "`/dev/shm`", "CPU NCCL backend",
     "folder of the per-communicator shared-memory files (use a tmpfs); read when a communicator is created"},
    {Setting::kCpuNcclSpin, "COLLWATCH_CPU_NCCL_SPIN", "64", "`64`", "CPU NCCL backend",
     "polls of a blocked operation before it sleeps on its futex (0: sleep at once)"},
    {Setting::kCpuNcclCuda, "COLLWATCH_CPU_NCCL_CUDA", "auto", "`auto`", "CPU NCCL backend",
     "CUDA buffers: `auto` (if `libcuda.so.1` is already loaded), `on` (load it; fail clearly if impossible), "
     "`off` (every buffer is host memory); read at each call that may touch CUDA"},
    {Setting::kCpuNcclLibcuda, "COLLWATCH_CPU_NCCL_LIBCUDA", "libcuda.so.1", "`libcuda.so.1`",
     "CPU NCCL backend", "the CUDA driver library `on` loads"},
    {Setting::kCpuNcclIpc, "COLLWATCH_CPU_NCCL_IPC", "1", "`1`", "CPU NCCL backend",
     "`1`: all-gathers and float32/bfloat16 sum reduce-scatters on CUDA buffers, of at most 8 ranks and not "
     "grouped with other operations, move GPU to GPU through CUDA IPC, on the collective's stream (staged "
     "through host memory when a rank's buffer cannot be shared); `0`: every CUDA buffer is staged through "
     "host memory"},
    {Setting::kCpuNcclTrace, "COLLWATCH_CPU_NCCL_TRACE", "0", "`0`", "CPU NCCL backend",
     "`1`: the CUDA mode logs each stream operation's enqueue, start and end (and the IPC path taken) to "
     "stderr, and operations that wait longer than 5 s, with each task's stage"},
    {Setting::kCpuNcclMismatch, "COLLWATCH_CPU_NCCL_MISMATCH", "hang", "`hang`", "CPU NCCL backend",
     "a collective the ranks disagree on (op, count, dtype, reduce op, root): `hang` blocks every rank for "
     "good; `complete` returns on every rank without moving data (outputs unspecified), as NCCL on GPUs often "
     "runs one to completion on garbage (`collwatch run --one-gpu` sets it; not on the IPC path)"},
    {Setting::kCpuNcclOneGpu, "COLLWATCH_CPU_NCCL_ONE_GPU", "", "unset", "CPU NCCL backend",
     "`1` (`collwatch run --one-gpu` sets it): each rank sees `LOCAL_RANK=0`, the launcher's value kept in "
     "`COLLWATCH_ORIGINAL_LOCAL_RANK`; read once, when the library is loaded"},
    {Setting::kCpuNcclProfilerVersion, "COLLWATCH_CPU_NCCL_PROFILER_VERSION", "5", "`5`", "CPU NCCL backend",
     "the newest profiler plugin interface version the backend knows, as an older NCCL would (`4`: 2.27, `3`: "
     "2.26, `2`: 2.24-2.25, `1`: 2.23): it takes the plugin's `ncclProfiler_vN` or the next older one, with that "
     "version's init, descriptors and events (tests); read when the plugin is loaded"},
    {Setting::kOriginalLocalRank, "COLLWATCH_ORIGINAL_LOCAL_RANK", "", "unset", "CPU NCCL backend",
     "set by the backend in one-GPU mode: the `LOCAL_RANK` the launcher gave (kept if already set)"},
    {Setting::kRank, "RANK", "", "unset", "libcollwatch.so, collwatch run",
     "the process's global rank: copied into its ring's header; `collwatch run` reads it from its command's "
     "processes (`/proc/PID/environ`) to find the ranks, including those that have not called NCCL yet. "
     "Unset: `SLURM_PROCID`, `OMPI_COMM_WORLD_RANK`, then `PMI_RANK` (with that launcher's local rank and "
     "size)"},
    {Setting::kLocalRank, "LOCAL_RANK", "", "unset", "libcollwatch.so, CPU NCCL backend",
     "the rank on its node: copied into the ring's header; the one-GPU view moves it aside"},
    {Setting::kWorldSize, "WORLD_SIZE", "", "unset", "libcollwatch.so, collwatch run",
     "the job's rank count: copied into the ring's header; read by `collwatch run` like `RANK`"},
    {Setting::kTorchelasticRunId, "TORCHELASTIC_RUN_ID", "", "unset", "libcollwatch.so, collwatch run",
     "torchrun's job id (`--rdzv-id`): the job name when `COLLWATCH_JOB_ID` is unset (torchrun's `none` "
     "does not count)"},
    {Setting::kSlurmJobId, "SLURM_JOB_ID", "", "unset", "libcollwatch.so, collwatch run",
     "Slurm's job id: with `SLURM_STEP_ID`, the job name (`<job>_<step>`, as the trace store names its "
     "folder) when neither `COLLWATCH_JOB_ID` nor `TORCHELASTIC_RUN_ID` is set"},
    {Setting::kSlurmStepId, "SLURM_STEP_ID", "", "unset", "libcollwatch.so, collwatch run",
     "Slurm's step within its job: part of the job name after `SLURM_JOB_ID`"},
    {Setting::kSlurmProcid, "SLURM_PROCID", "", "unset", "libcollwatch.so, collwatch run",
     "the task's rank under `srun`: the rank when `RANK` is unset"},
    {Setting::kSlurmLocalid, "SLURM_LOCALID", "", "unset", "libcollwatch.so",
     "the task's rank on its node under `srun` (with `SLURM_PROCID`)"},
    {Setting::kSlurmNtasks, "SLURM_NTASKS", "", "unset", "libcollwatch.so, collwatch run",
     "the task count under `srun`: the world size (with `SLURM_PROCID`)"},
    {Setting::kOmpiRank, "OMPI_COMM_WORLD_RANK", "", "unset", "libcollwatch.so, collwatch run",
     "the rank under Open MPI's `mpirun`, when neither `RANK` nor `SLURM_PROCID` is set"},
    {Setting::kOmpiLocalRank, "OMPI_COMM_WORLD_LOCAL_RANK", "", "unset", "libcollwatch.so",
     "the rank on its node under Open MPI's `mpirun` (with `OMPI_COMM_WORLD_RANK`)"},
    {Setting::kOmpiSize, "OMPI_COMM_WORLD_SIZE", "", "unset", "libcollwatch.so, collwatch run",
     "the world size under Open MPI's `mpirun` (with `OMPI_COMM_WORLD_RANK`)"},
    {Setting::kPmiRank, "PMI_RANK", "", "unset", "libcollwatch.so, collwatch run",
     "the rank under a PMI launcher (MPICH's and Intel MPI's `mpirun`, `srun --mpi=pmi2`), when no variable "
     "above is set"},
    {Setting::kMpiLocalRankId, "MPI_LOCALRANKID", "", "unset", "libcollwatch.so",
     "the rank on its node under MPICH's and Intel MPI's `mpirun` (with `PMI_RANK`)"},
    {Setting::kPmiSize, "PMI_SIZE", "", "unset", "libcollwatch.so, collwatch run",
     "the world size under a PMI launcher (with `PMI_RANK`)"},
    {Setting::kMasterAddr, "MASTER_ADDR", "", "unset", "collwatch-trainer",
     "the rendezvous host of a trainer started by torchrun (with `MASTER_PORT`)"},
    {Setting::kMasterPort, "MASTER_PORT", "", "unset", "collwatch-trainer",
     "the rendezvous port of a trainer started by torchrun; needed when `WORLD_SIZE` > 1 without `--nproc`"},
    {Setting::kNvtxInjectionPath, "NVTX_INJECTION64_PATH", "", "unset", "NVTX",
     "must name `libcollwatch.so` for records to carry NVTX regions (`collwatch run` sets it, and moves another "
     "library found there, such as Nsight Systems', to `COLLWATCH_NVTX_CHAIN`)"},
    {Setting::kLdPreload, "LD_PRELOAD", "", "unset", "collwatch run",
     "kept for the command `collwatch run` starts, after `libcollwatch.so`"},
    {Setting::kNcclProfilerPlugin, "NCCL_PROFILER_PLUGIN", "", "unset", "NCCL, CPU NCCL backend",
     "the profiler plugin NCCL loads; naming `libcollwatch.so` records through NCCL's profiler events too "
     "(`collwatch run --profiler-plugin` sets it; docs/profiler-plugin.md)"},
    {Setting::kTorchFrPipeFile, "TORCH_FR_DEBUG_INFO_PIPE_FILE", "", "unset", "collwatch run",
     "PyTorch's (newer name, taken first): where a rank whose Flight Recorder is on makes its dump pipe, "
     "`<value><rank>.pipe`. Before `--kill-on-hang` stops a job, `collwatch run` writes one byte into each "
     "rank's pipe (never blocking, only into a FIFO of this user with a reader) and waits up to 5 s for the "
     "dumps (docs/flight-recorder.md)"},
    {Setting::kTorchNcclPipeFile, "TORCH_NCCL_DEBUG_INFO_PIPE_FILE", "", "unset", "collwatch run",
     "the older name of `TORCH_FR_DEBUG_INFO_PIPE_FILE`, read when that is unset"},
    {Setting::kTorchFrDumpFile, "TORCH_FR_DUMP_TEMP_FILE", "",
     "`$HOME/.cache/torch/comm_lib_trace_rank_`, earlier `/tmp/nccl_trace_rank_`", "collwatch run",
     "PyTorch's (newer name, taken first): the prefix of a rank's Flight Recorder dump, `<value><rank>`: "
     "where `collwatch run --kill-on-hang` looks for the dumps it asked for (unset: at both defaults)"},
    {Setting::kTorchNcclDumpFile, "TORCH_NCCL_DEBUG_INFO_TEMP_FILE", "", "as `TORCH_FR_DUMP_TEMP_FILE`",
     "collwatch run", "the older name of `TORCH_FR_DUMP_TEMP_FILE`, read when that is unset"},
    {Setting::kHome, "HOME", "/tmp", "`/tmp`", "collwatch run",
     "a rank's home, read from its environment: PyTorch's default dump prefix lies under it"},
    {Setting::kTrainerLaunched, "COLLWATCH_TRAINER_LAUNCHED", "", "unset", "collwatch-trainer",
     "set by `collwatch-trainer --nproc N` in the rank processes it starts (internal)"},
    {Setting::kBenchDir, "COLLWATCH_BENCH_DIR", "", "`/dev/shm`", "interposer benchmark",
     "parent folder of the benchmark's rings (to measure another file system)"},
    {Setting::kTestProcess, "COLLWATCH_TEST_PROCESS", "", "unset", "tests/programs",
     "set in the rank processes the test programs start (internal)"},
    {Setting::kTestStepMs, "COLLWATCH_TEST_STEP_MS", "0", "`0`", "tests/programs",
     "milliseconds between the steps of `nccl_multirank`"},
    {Setting::kTestLoopSteps, "COLLWATCH_TEST_LOOP_STEPS", "3000", "`3000`", "tests/programs",
     "how many all-reduces `nccl_ranks`'s loop plan makes (a count, so that a slow machine records the same)"},
    {Setting::kTestLoopGate, "COLLWATCH_TEST_LOOP_GATE", "", "unset", "tests/programs",
     "file holding how many steps of `nccl_ranks`'s loop plan may run; each rank writes where it waits "
     "to `<file>.<rank>` (the fault tests stop the job there)"},
    {Setting::kTestNvtxLog, "COLLWATCH_TEST_NVTX_LOG", "", "unset", "tests/programs",
     "file where the test NVTX tool (`nvtx_counting_tool`) appends each range it sees"},
    {Setting::kNeverHurtsBaseline, "COLLWATCH_NEVER_HURTS_BASELINE", "", "unset", "tests",
     "folder where the never-hurts tests keep the job's unrecorded results (set by CMake)"},
    {Setting::kScreenshotDir, "COLLWATCH_SCREENSHOT_DIR", "", "unset", "tests",
     "keep the dashboard tests' captured screens there (docs/dashboard.md shows them)"},
    {Setting::kUpdateGolden, "COLLWATCH_UPDATE_GOLDEN", "", "unset", "tests",
     "`1`: the golden-report tests rewrite their expected reports instead of comparing"},
};

constexpr const SettingInfo& SettingInfoOf(Setting setting) noexcept {
  return kSettings[static_cast<size_t>(setting)];
}

namespace settings_internal {
constexpr bool TableInSettingOrder() {
  for (size_t i = 0; i < sizeof kSettings / sizeof kSettings[0]; ++i) {
    if (static_cast<size_t>(kSettings[i].setting) != i) return false;
  }
  return true;
}
static_assert(TableInSettingOrder(), "kSettings must list every Setting in its order");
static_assert(sizeof kSettings / sizeof kSettings[0] == static_cast<size_t>(Setting::kUpdateGolden) + 1,
              "every Setting needs its row in kSettings");
}  // namespace settings_internal

// The variable's value when set and not empty, else nullptr.
inline const char* SettingIfSet(Setting setting) noexcept {
  const char* value = std::getenv(SettingInfoOf(setting).name);
  return value != nullptr && value[0] != '\0' ? value : nullptr;
}

// The variable's value when set and not empty, else the table's default ("" where none).
inline const char* SettingValue(Setting setting) noexcept {
  const char* value = SettingIfSet(setting);
  return value != nullptr ? value : SettingInfoOf(setting).default_value;
}

// The ring folder: COLLWATCH_RING_DIR, else /dev/shm/collwatch-<uid>. The one place both
// the writer (interposer) and the readers (agent, run) take it from.
inline void RingDirSetting(char* out, size_t size) noexcept {
  if (const char* dir = SettingIfSet(Setting::kRingDir)) {
    std::snprintf(out, size, "%s", dir);
  } else {
    std::snprintf(out, size, "/dev/shm/collwatch-%u", static_cast<unsigned>(getuid()));
  }
}

// The job's name as launchers give it, raw (SafeJobName makes it a ring file name's part):
// COLLWATCH_JOB_ID, TORCHELASTIC_RUN_ID (torchrun's default "none" names no job),
// SLURM_JOB_ID with "_SLURM_STEP_ID" when set. Returns the name of the variable taken;
// nullptr, and "local", when none is set.
// JobIdFrom reads the variables through `lookup(name)` (a const char*, nullptr when unset):
// another process's environment (`collwatch stacks` tells jobs apart by it) as well as ours.
template <typename Lookup>
const char* JobIdFrom(Lookup lookup, char* out, size_t size) noexcept {
  const auto set = [&lookup](Setting setting) -> const char* {
    const char* value = lookup(SettingInfoOf(setting).name);
    return value != nullptr && value[0] != '\0' ? value : nullptr;
  };
  for (const Setting setting : {Setting::kJobId, Setting::kTorchelasticRunId}) {
    const char* value = set(setting);
    if (value != nullptr && (setting == Setting::kJobId || std::strcmp(value, "none") != 0)) {
      std::snprintf(out, size, "%s", value);
      return SettingInfoOf(setting).name;
    }
  }
  if (const char* slurm_job = set(Setting::kSlurmJobId)) {
    const char* step = set(Setting::kSlurmStepId);
    std::snprintf(out, size, "%s%s%s", slurm_job, step != nullptr ? "_" : "", step != nullptr ? step : "");
    return SettingInfoOf(Setting::kSlurmJobId).name;
  }
  std::snprintf(out, size, "local");
  return nullptr;
}

inline const char* JobIdSetting(char* out, size_t size) noexcept {
  return JobIdFrom([](const char* name) -> const char* { return std::getenv(name); }, out, size);
}

// Where launchers put a process's rank, its rank on its node and the job's size, in the
// order they are believed: torchrun's (and any launcher that sets RANK), srun's, Open
// MPI's, PMI's (MPICH, Intel MPI). A process takes all three from the first launcher
// whose rank it has: srun then torchrun sets both, and torchrun's are the workers'.
struct LauncherRankVariables {
  const char* launcher;
  Setting rank, local_rank, world_size;
};
inline constexpr LauncherRankVariables kLauncherRankVariables[] = {
    {"torchrun", Setting::kRank, Setting::kLocalRank, Setting::kWorldSize},
    {"srun", Setting::kSlurmProcid, Setting::kSlurmLocalid, Setting::kSlurmNtasks},
    {"Open MPI", Setting::kOmpiRank, Setting::kOmpiLocalRank, Setting::kOmpiSize},
    {"PMI", Setting::kPmiRank, Setting::kMpiLocalRankId, Setting::kPmiSize},
};

// The launcher variables whose rank `lookup(name)` (a const char*, nullptr when unset)
// finds set and not empty; nullptr when none is.
template <typename Lookup>
const LauncherRankVariables* LauncherOf(Lookup lookup) noexcept {
  for (const LauncherRankVariables& launcher : kLauncherRankVariables) {
    const char* rank = lookup(SettingInfoOf(launcher.rank).name);
    if (rank != nullptr && rank[0] != '\0') return &launcher;
  }
  return nullptr;
}

// The ring's size settings: their bounds, and their values read the one way the preload
// and `collwatch run` (which refuses a bad one before the job starts) both use.
inline constexpr unsigned long long kMinRingRecords = 64;         // a few pages per lane
inline constexpr unsigned long long kMaxRingRecords = 1ull << 20;  // 128 MiB per lane
inline constexpr unsigned long long kMinRingLanes = 2;
inline constexpr unsigned long long kMaxRingLanes = 64;

// `text` as a whole decimal number from `min` to `max` (digits only, nothing after them).
inline bool WholeNumberIn(const char* text, unsigned long long min, unsigned long long max,
                          unsigned long long* value) noexcept {
  if (text == nullptr || *text < '0' || *text > '9') return false;
  char* end = nullptr;
  errno = 0;
  const unsigned long long parsed = std::strtoull(text, &end, 10);
  if (errno != 0 || *end != '\0' || parsed < min || parsed > max) return false;
  *value = parsed;
  return true;
}

// The values a setting takes, for those whose readers check them: a whole number from
// `min` to `max`, or one of the words of `choices` ('|' between them). Any other value is
// invalid, and every reader uses the table's default in its place, as if it were unset:
// the preload says so once on stderr, `collwatch env` beside the value, `collwatch run`
// refuses the ring's sizes before the job starts. The one rule all of them read.
struct SettingRule {
  Setting setting;
  unsigned long long min, max;  // a number's bounds, where `choices` is nullptr
  const char* choices;
};
inline constexpr SettingRule kSettingRules[] = {
    {Setting::kRingRecords, kMinRingRecords, kMaxRingRecords, nullptr},
    {Setting::kRingLanes, kMinRingLanes, kMaxRingLanes, nullptr},
    {Setting::kCompletion, 0, 0, "auto|off"},
    {Setting::kClock, 0, 0, "auto|monotonic"},
    {Setting::kNvtx, 0, 0, "on|off"},
    {Setting::kPythonFrames, 0, 0, "on|off|pretend-unsupported"},
};

// The rule of `setting`; nullptr where any value is taken as it is.
constexpr const SettingRule* SettingRuleOf(Setting setting) noexcept {
  for (const SettingRule& rule : kSettingRules) {
    if (rule.setting == setting) return &rule;
  }
  return nullptr;
}

// Whether `value` (not nullptr) is one `setting` takes; a number's value in `*number`.
inline bool SettingValid(Setting setting, const char* value, unsigned long long* number = nullptr) noexcept {
  const SettingRule* rule = SettingRuleOf(setting);
  if (rule == nullptr) return true;
  if (rule->choices == nullptr) {
    unsigned long long parsed = 0;
    if (!WholeNumberIn(value, rule->min, rule->max, &parsed)) return false;
    if (number != nullptr) *number = parsed;
    return true;
  }
  const size_t length = std::strlen(value);
  for (const char* choice = rule->choices; *choice != '\0';) {
    const char* end = std::strchr(choice, '|');
    const size_t choice_length = end != nullptr ? static_cast<size_t>(end - choice) : std::strlen(choice);
    if (length == choice_length && std::strncmp(value, choice, length) == 0) return true;
    choice += choice_length + (end != nullptr ? 1 : 0);
  }
  return false;
}

// The rule in words, for "X=VALUE is not ...": "a whole number from 64 to 1048576",
// "one of auto, monotonic".
inline void SettingRuleWords(const SettingRule& rule, char* out, size_t size) noexcept {
  if (rule.choices == nullptr) {
    std::snprintf(out, size, "a whole number from %llu to %llu", rule.min, rule.max);
    return;
  }
  size_t used = static_cast<size_t>(std::snprintf(out, size, "one of "));
  for (const char* c = rule.choices; *c != '\0' && used + 3 < size; ++c) {
    if (*c == '|') {
      out[used++] = ',';
      out[used++] = ' ';
    } else {
      out[used++] = *c;
    }
  }
  out[used < size ? used : size - 1] = '\0';
}

// The value in force: the variable's when set, not empty and valid, else the default.
inline const char* SettingInForce(Setting setting) noexcept {
  const char* value = SettingIfSet(setting);
  return value != nullptr && SettingValid(setting, value) ? value : SettingInfoOf(setting).default_value;
}

// The most of a job id that is read from the environment (JobIdSetting's buffer, in the
// preload and in `collwatch run` alike): SafeJobName hashes what is read whole, so both
// must read the same bytes. Ids longer still are cut before the hash.
inline constexpr size_t kJobIdSettingBytes = 1024;

// `requested` as ring file names carry a job: every byte but letters, digits, '-', '_' and
// '.' made '_', and a '.' first too (the job names a folder of the trace store, never ".",
// ".." or a hidden one); cut to fit `size` (ring::kJobBytes in the ring header). A cut id
// keeps its head and ends in '-' and 16 hex digits of the hash of the whole id: two ids
// that share their first 63 bytes stay two jobs (they were read as one). This is the one
// place a job id is cut: the trace store's folder of a job (JobTracesDir) goes through it.
inline void SafeJobName(const char* requested, char* out, size_t size) noexcept {
  constexpr size_t kHashChars = 17;  // '-' and 16 hex digits
  const size_t length = std::strlen(requested);
  std::snprintf(out, size, "%s", requested);
  if (size > 2 * kHashChars && length >= size) {
    const uint64_t hash = Hash64(requested, length, 0x4a4f4249445f4355ull);
    std::snprintf(out + size - 1 - kHashChars, kHashChars + 1, "-%016llx", static_cast<unsigned long long>(hash));
  }
  for (char* c = out; *c != '\0'; ++c) {
    const bool safe = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
                      *c == '-' || *c == '_' || (*c == '.' && c != out);
    if (!safe) *c = '_';
  }
}

}  // namespace collwatch

#endif  // COLLWATCH_RING_SETTINGS_H_
