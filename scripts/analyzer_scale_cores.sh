#!/usr/bin/env bash
# bench/analyzer_scale on 1..N worker threads, each case built apart (--build-apart) and
# applied in order on the model's thread (--apply-in-order), for how the post-mortem
# analysis spreads over a machine's cores. Prints one line per run; the benchmark's whole
# output goes to OUT_DIR.
#   scripts/analyzer_scale_cores.sh BENCH OUT_DIR [THREADS...]   (default threads: 2 4 8 16)
set -euo pipefail
bench=$1
out=$2
shift 2
threads=("$@")
[ ${#threads[@]} -gt 0 ] || threads=(2 4 8 16)
mkdir -p "$out"
echo "cores: $(nproc); $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
run() {  # name, then the benchmark's arguments
  local name=$1
  shift
  "$bench" "$@" > "$out/$name.txt" 2>&1 || true
  local took peak named
  took=$(grep -o 'records -> findings.*' "$out/$name.txt" | tr -s ' ')
  peak=$(grep -o 'peak RSS *: [0-9]* MiB' "$out/$name.txt" | tr -s ' ')
  named=$(grep -o 'named correctly: .*' "$out/$name.txt")
  printf '%-34s %s | %s | %s\n' "$name" "$took" "$peak" "$named"
}
for t in "${threads[@]}"; do
  for mode in apart in-order; do
    flag=(--build-apart)
    [ "$mode" = in-order ] && flag=(--apply-in-order)
    run "16k-divergence-t$t-$mode" --ranks 16384 --collectives 2000 --threads "$t" "${flag[@]}"
    run "16k-comms64-t$t-$mode" --ranks 16384 --collectives 2000 --comms 64 --threads "$t" "${flag[@]}"
  done
done
t=${threads[-1]}
for mode in apart in-order; do
  flag=(--build-apart)
  [ "$mode" = in-order ] && flag=(--apply-in-order)
  run "131k-divergence-t$t-$mode" --ranks 131072 --collectives 2000 --threads "$t" "${flag[@]}"
done
