#!/usr/bin/env bash
# Builds the libFuzzer targets (in the asan preset's build: clang, ASan+UBSan, the same
# objects its tests use) and gives each SECONDS (default 60) CPU-seconds from its seed
# corpus in tests/fuzz/<target>/, copied to a temporary folder so the repository is left as
# it is; all targets at once, sharing the cores. A target is stopped (SIGINT, after which
# libFuzzer prints its statistics) once its own CPU time reaches SECONDS, so it gets its
# share whatever else runs beside it (.ci/run fuzzes while the TSan tests run).
# Fails on any crash, leak, timeout or out-of-memory, and names the input that did it.
# docs/fuzzing.md explains the targets.
# Usage: scripts/fuzz.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
scripts/install_deps.sh
# Configured once: .ci/run fuzzes while the ASan tests may still read that build's files.
[ -f build-asan/CMakeCache.txt ] || cmake --preset asan >/dev/null
cmake --build --preset fuzz -j "$(nproc)"

# target name, binary under build-asan/
targets=(
  "ring_reader tests/fuzz/collwatch_ring_reader_fuzzer"
  "trace_store tests/fuzz/collwatch_trace_store_fuzzer"
  "event_ingest tests/fuzz/collwatch_event_ingest_fuzzer"
  "baseline tests/fuzz/collwatch_baseline_fuzzer"
  "flight_recorder tests/fuzz/collwatch_flight_recorder_fuzzer"
)
work="$(mktemp -d "${TMPDIR:-/tmp}/collwatch-fuzz.XXXXXX")"
ticks_per_second="$(getconf CLK_TCK)"
# libFuzzer's exit status after SIGINT ("run interrupted"), which only this script sends.
interrupted_status=72

# The CPU time (user + system, all threads) process PID has used so far, in ticks; -1 once
# it has ended (gone or a zombie not yet waited for). Its name has no spaces.
cpu_ticks() { awk '{ print ($3 == "Z") ? -1 : $14 + $15 }' "/proc/$1/stat" 2>/dev/null || echo -1; }

pids=()
names=()
for entry in "${targets[@]}"; do
  read -r name binary <<<"$entry"
  mkdir -p "$work/$name/corpus"
  cp tests/fuzz/"$name"/* "$work/$name/corpus/"
  echo "fuzz: $name, ${seconds} CPU-s ($(ls tests/fuzz/"$name" | wc -l) seeds)" >&2
  # -max_total_time is only a safety net (a starved machine): the CPU budget stops it first.
  # -timeout (wall time for one input) is 120 s: the ASan build is -O0 with coverage, and the
  # targets share two cores with each other and with the TSan tests. A ring whose damaged
  # size claims a million ranks is linear work that takes 3 s alone and took 37 s so shared
  # (a clean-clone run, 2026-11-28): slow, not hung. A hang still ends at the limit.
  "build-asan/$binary" "$work/$name/corpus" -max_total_time=$((seconds * 20)) -rss_limit_mb=2048 \
    -timeout=120 -print_final_stats=1 -artifact_prefix="$work/$name/" >"$work/$name/log" 2>&1 &
  pids+=("$!")
  names+=("$name")
done

# Stops each target at its budget.
budget=$((seconds * ticks_per_second))
running=${#pids[@]}
declare -A stopped=()
while [ "$running" -gt 0 ]; do
  sleep 1
  running=0
  for i in "${!pids[@]}"; do
    used="$(cpu_ticks "${pids[$i]}")"
    [ "$used" -ge 0 ] || continue
    if [ "$used" -ge "$budget" ] && [ -z "${stopped[$i]:-}" ]; then
      kill -INT "${pids[$i]}" 2>/dev/null || true
      stopped[$i]=1
    fi
    running=$((running + 1))
  done
done

failed=()
for i in "${!pids[@]}"; do
  status=0
  wait "${pids[$i]}" || status=$?
  log="$work/${names[$i]}/log"
  if [ "$status" -eq 0 ] && [ -z "${stopped[$i]:-}" ]; then
    tail -n 20 "$log" >&2
    echo "fuzz: ${names[$i]} ended at its wall-time safety net before ${seconds} CPU-s" >&2
    failed+=("${names[$i]}")
  elif [ "$status" -eq 0 ] || { [ "$status" -eq "$interrupted_status" ] && [ -n "${stopped[$i]:-}" ]; }; then
    grep -E '^(#[0-9]+[[:space:]]+DONE|stat::number_of_executed_units|stat::average_exec_per_sec)' \
      "$log" | sed "s/^/fuzz: ${names[$i]}: /" >&2 || true
  else
    tail -n 60 "$log" >&2
    echo "fuzz: ${names[$i]} FAILED (exit $status); log and reproducer in $work/${names[$i]}/" >&2
    failed+=("${names[$i]}")
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: failed: ${failed[*]}" >&2
  exit 1
fi
rm -rf "$work"
echo "fuzz: every target ran ${seconds} CPU-s without a crash, leak or timeout" >&2
