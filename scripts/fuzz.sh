#!/usr/bin/env bash
# Builds the libFuzzer targets (the fuzz preset: clang, ASan+UBSan) and gives each SECONDS
# (default 60) of CPU from its seed corpus in tests/fuzz/<target>/, copied to a temporary
# folder so the repository is left as it is; all targets at once, sharing the cores.
# Fails on any crash, leak, timeout or out-of-memory, and names the input that did it.
# docs/fuzzing.md explains the targets.
# Usage: scripts/fuzz.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
scripts/install_deps.sh
cmake --preset fuzz >/dev/null
cmake --build --preset fuzz -j "$(nproc)"

# target name, binary under build-fuzz/
targets=(
  "ring_reader tests/fuzz/collwatch_ring_reader_fuzzer"
  "trace_store tests/fuzz/collwatch_trace_store_fuzzer"
  "event_ingest tests/fuzz/collwatch_event_ingest_fuzzer"
  "baseline tests/fuzz/collwatch_baseline_fuzzer"
  "flight_recorder tests/fuzz/collwatch_flight_recorder_fuzzer"
)
work="$(mktemp -d "${TMPDIR:-/tmp}/collwatch-fuzz.XXXXXX")"

# Runs one target; its log and any reproducer stay in $work/NAME/.
run_target() {
  local name="$1" binary="$2" wall="$3"
  mkdir -p "$work/$name/corpus"
  cp tests/fuzz/"$name"/* "$work/$name/corpus/"
  "build-fuzz/$binary" "$work/$name/corpus" -max_total_time="$wall" -rss_limit_mb=2048 -timeout=10 \
    -print_final_stats=1 -artifact_prefix="$work/$name/" >"$work/$name/log" 2>&1
}

# Every target runs at once, for as long as gives each SECONDS of CPU on this machine's
# cores (5 targets, 60 s, 2 cores: 150 s). Rounds of one target per core would leave a
# core idle in the last round.
cores="$(nproc)"
wall=$(( (seconds * ${#targets[@]} + cores - 1) / cores ))
[ "$wall" -ge "$seconds" ] || wall="$seconds"
pids=()
names=()
for entry in "${targets[@]}"; do
  read -r name binary <<<"$entry"
  echo "fuzz: $name, ${wall}s wall for ${seconds}s of CPU ($(ls tests/fuzz/"$name" | wc -l) seeds)" >&2
  run_target "$name" "$binary" "$wall" &
  pids+=("$!")
  names+=("$name")
done
failed=()
for i in "${!pids[@]}"; do
  if wait "${pids[$i]}"; then
    grep -E '^(#[0-9]+[[:space:]]+DONE|stat::number_of_executed_units|stat::average_exec_per_sec)' \
      "$work/${names[$i]}/log" | sed "s/^/fuzz: ${names[$i]}: /" >&2 || true
  else
    tail -n 60 "$work/${names[$i]}/log" >&2
    echo "fuzz: ${names[$i]} FAILED; log and reproducer in $work/${names[$i]}/" >&2
    failed+=("${names[$i]}")
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: failed: ${failed[*]}" >&2
  exit 1
fi
rm -rf "$work"
echo "fuzz: every target ran ${seconds} CPU-s without a crash, leak or timeout" >&2
