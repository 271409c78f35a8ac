#!/usr/bin/env bash
# The main job, for now: a 4-process NCCL program on the CPU NCCL backend with
# libcollwatch.so preloaded, then `collwatch dump` of the rings it left. Then the same
# program with one rank skipping an all-reduce: a real hang, read live from the rings.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
cmake --preset default >/dev/null
cmake --build --preset default -j "$(nproc)" >/dev/null

work=$(mktemp -d /tmp/collwatch-demo-XXXXXX)
trap 'rm -rf "$work"' EXIT
preload="$PWD/build/interposer/libcollwatch.so"
export COLLWATCH_RING_DIR="$work/rings" COLLWATCH_CPU_NCCL_SHM_DIR="$work"

echo "== 4 ranks, every collective, p2p in a group, a split; preloaded =="
LD_PRELOAD="$preload" NVTX_INJECTION64_PATH="$preload" \
  build/tests/collwatch_nccl_ranks 4 all "$work"
build/cli/collwatch dump "$COLLWATCH_RING_DIR"

echo
echo "== 3 ranks, rank 1 skips an all-reduce: ranks 0 and 2 hang inside it =="
rm -rf "$COLLWATCH_RING_DIR" "$work/unique_id"
LD_PRELOAD="$preload" build/tests/collwatch_nccl_ranks 3 skip "$work" &
job=$!
sleep 3
echo "-- rings while the job hangs: the last record of each rank (an 'enter' with no"
echo "   'return' after it means the rank is inside that call):"
build/cli/collwatch dump "$COLLWATCH_RING_DIR" | awk '
  /^ring / { if (last != "") print last; print; next }
  /^  +[0-9]+:[0-9]+ / { last = $0 }
  END { if (last != "") print last }'
pkill -KILL -P "$job" 2>/dev/null || true
kill -KILL "$job" 2>/dev/null || true
wait "$job" 2>/dev/null || true
echo "-- killed; the rings still hold every record:"
build/cli/collwatch dump "$COLLWATCH_RING_DIR" | grep -E "^ring|records=" | head -12
