#!/usr/bin/env bash
# Runs on a GPU machine with 2 GPUs (device tool), with .carry from scripts/pack_carry.sh:
# what decides the two modes of the host time per small NCCL call (issue 19: about 14 or
# about 21 µs per group of two, changing from one process to the next, plain included).
# Builds tests/gpu/nccl_two_gpu_cost.cc and the preload there, then
#   1. topology.txt: CPUs, SMT siblings, NUMA nodes, the GPUs' CPU affinity;
#   2. UNPINNED runs of each layout, plain, unpinned, and ASLR_OFF one-process runs with
#      address space randomisation off (setarch -R): does the mode follow the addresses?
#   3. for each CPU in CPUS (default: every CPU), the timing thread pinned there
#      (COLLWATCH_BENCH_CPUS), one-process, plain then with the preload: does the mode follow
#      the CPU, and what does the preload add at a fixed placement?
# Every run prints its figures, the timing thread's CPU and involuntary switches, and each
# busy thread's CPU, run and wait share. Lands in $OUT: topology.txt, modes-raw.txt (every
# run's output, tagged), modes.txt (one line per run).
# PRELOADED=1 adds a preloaded one-process run to each unpinned round; every run ends with
# its repetitions' per-call times beside the speed of the core (modes-raw.txt `repetition`).
#   4. PAIRED runs of each layout with the preload and COLLWATCH_BENCH_PAIRED=1: NCCL's own
#      entry points against the preload's, round by round in one process (paired.txt), then
#      PAIRED_NO_COMPLETION more with COLLWATCH_COMPLETION=off (the ring alone);
#   5. PROFILED plain one-process runs and as many preloaded ones with COLLWATCH_BENCH_PROFILE=1:
#      where the timing thread's time goes, per shared object and place, every place in
#      libcollwatch.so (profiles.txt; libcollwatch.nm: its symbols, to name those places);
#   6. PRIMITIVES=1: the driver calls a tracked call is made of, each timed alone on one GPU
#      (collwatch_nccl_call_cost ... primitives: primitives.txt).
#   [UNPINNED=8] [PRELOADED=1] [ASLR_OFF=6] [CPUS="0 1 ..." ("": none)] [CALLS=5000]
#   BEFORE_PRELOAD=PATH (another build of libcollwatch.so, e.g. an earlier commit's): each
#      PAIRED round also runs it (tag paired-before-...), to compare two builds in one run;
#      PRELOAD=PATH replaces the build made here (two builds from one compiler compare best).
#   [PAIRED=0] [PAIRED_NO_COMPLETION=0] [PAIRED_ROUNDS=8] [PROFILED=0] [BEFORE_PRELOAD=PATH] [PRELOAD=PATH]
#   [PRIMITIVES=0] bash scripts/gpu_call_modes.sh
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/gpu_common.sh
out=${OUT:-/tmp/collwatch-call-modes}
mkdir -p "$out"
calls=${CALLS:-5000}
rings=/tmp/modes-rings
build_gpu_trainer "$out/build.log" collwatch_preload collwatch_nccl_two_gpu_cost collwatch_nccl_call_cost || exit 1
preload=${PRELOAD:-$PWD/build-gpu-trainer/interposer/libcollwatch.so}
program=$PWD/build-gpu-trainer/tests/gpu/collwatch_nccl_two_gpu_cost

{
  nvidia-smi -L
  nvidia-smi topo -m
  lscpu
  lscpu -e
  for cpu in /sys/devices/system/cpu/cpu[0-9]*; do
    echo "${cpu##*/} siblings $(cat "$cpu/topology/thread_siblings_list" 2>/dev/null)" \
      "core $(cat "$cpu/topology/core_id" 2>/dev/null) package $(cat "$cpu/topology/physical_package_id" 2>/dev/null)"
  done
  cat /sys/kernel/mm/transparent_hugepage/enabled /proc/sys/kernel/randomize_va_space 2>/dev/null
} > "$out/topology.txt" 2>&1

# One run: TAG [NAME=VALUE...] COMMAND...; its output lands tagged in modes-raw.txt and as one line
# in modes.txt: tag, figures, the timing thread's CPU at start and end, its involuntary
# switches, and the busy threads as name@cpu:run%/wait%.
measure() {
  local tag=$1 log
  shift
  log=$(env "$@" 2>&1)
  sed "s/^/$tag /" <<<"$log" >> "$out/modes-raw.txt"
  grep '^paired ' <<<"$log" | sed "s/^/$tag /" >> "$out/paired.txt"
  grep '^profile' <<<"$log" | sed "s/^/$tag /" >> "$out/profiles.txt"
  awk -v tag="$tag" '
    $1 == "all_reduce_ns" { ar = $2 } $1 == "reduce_scatter_ns" { rs = $2 }
    $1 == "all_reduce_burst_ns" { arb = $2 } $1 == "reduce_scatter_burst_ns" { rsb = $2 }
    $1 == "placement" { cpus = $3 "->" $5; switches = $7 }
    $1 == "thread" { busy = busy " " $3 "@" $5 ":" $7 "/" $9 }
    END { printf "%-28s ar %7s rs %7s ar_burst %7s rs_burst %7s main_cpu %-6s invol %5s busy%s\n",
          tag, ar, rs, arb, rsb, cpus, switches, busy }' <<<"$log" | tee -a "$out/modes.txt"
}

: > "$out/modes-raw.txt"
: > "$out/modes.txt"
: > "$out/paired.txt"
: > "$out/profiles.txt"
for run in $(seq "${UNPINNED:-8}"); do
  measure "unpinned-one-process-$run" "$program" one-process "$calls" 5
  measure "unpinned-per-gpu-$run" "$program" per-gpu "$calls" 5
  [ "${PRELOADED:-0}" = 1 ] && measure "preload-one-process-$run" LD_PRELOAD="$preload" \
    COLLWATCH_RING_DIR=$rings "$program" one-process "$calls" 5 && rm -rf $rings
done
for run in $(seq "${ASLR_OFF:-6}"); do
  measure "aslr-off-one-process-$run" setarch "$(uname -m)" -R "$program" one-process "$calls" 5
done
read -r -a cpus <<<"${CPUS-$(seq -s ' ' 0 $(($(nproc) - 1)))}"
for cpu in "${cpus[@]}"; do
  measure "cpu$cpu-plain" COLLWATCH_BENCH_CPUS="$cpu" "$program" one-process "$calls" 5
  measure "cpu$cpu-preload" COLLWATCH_BENCH_CPUS="$cpu" LD_PRELOAD="$preload" COLLWATCH_RING_DIR=$rings \
    "$program" one-process "$calls" 5
  rm -rf $rings
done
collwatch=$PWD/.carry/bin/collwatch
export LD_LIBRARY_PATH="$PWD/.carry/lib:$LD_LIBRARY_PATH"
builds=("paired:$preload")
[ -n "${BEFORE_PRELOAD:-}" ] && builds+=("paired-before:$BEFORE_PRELOAD")
# paired_runs RUNS TAG_PART [NAME=VALUE...]: RUNS rounds of paired runs of each layout and
# build, tagged BUILD[TAG_PART]-LAYOUT-RUN, with the environment given.
paired_runs() {
  local runs=$1 part=$2 run layout build tag
  shift 2
  for run in $(seq "$runs"); do
    for layout in per-gpu one-process; do
      for build in "${builds[@]}"; do
        tag="${build%%:*}$part-$layout-$run"
        measure "$tag" COLLWATCH_BENCH_PAIRED=1 "$@" LD_PRELOAD="${build#*:}" COLLWATCH_RING_DIR=$rings \
          "$program" "$layout" "$calls" "${PAIRED_ROUNDS:-8}"
        # Completions the preload could not track (a refused event: `dropped`), per ring.
        "$collwatch" dump $rings 2>&1 | grep -o 'records=[0-9]* lost=[0-9]* torn=[0-9]* dropped=[0-9]*' |
          sed "s/^/$tag ring /" >> "$out/paired.txt"
        rm -rf $rings
      done
    done
  done
}
paired_runs "${PAIRED:-0}" ""
paired_runs "${PAIRED_NO_COMPLETION:-0}" -no-completion COLLWATCH_COMPLETION=off
[ "${PROFILED:-0}" -gt 0 ] && nm -n --defined-only "$preload" > "$out/libcollwatch.nm"
for run in $(seq "${PROFILED:-0}"); do
  measure "profiled-plain-$run" COLLWATCH_BENCH_PROFILE=1 "$program" one-process "$calls" 5
  for layout in one-process per-gpu; do
    measure "profiled-paired-$layout-$run" COLLWATCH_BENCH_PROFILE=1 COLLWATCH_BENCH_PROFILE_OBJECT=libcollwatch.so \
      COLLWATCH_BENCH_PAIRED=1 LD_PRELOAD="$preload" COLLWATCH_RING_DIR=$rings "$program" "$layout" "$calls" 8
    rm -rf $rings
  done
done
if [ "${PRIMITIVES:-0}" = 1 ]; then
  build-gpu-trainer/tests/gpu/collwatch_nccl_call_cost 20000 9 primitives > "$out/primitives.txt" 2>&1
fi
