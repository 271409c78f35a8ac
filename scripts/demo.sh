#!/usr/bin/env bash
# The main job: the bundled ZeRO-3 VLM trainer on 4 CPU ranks, with image batches on
# some ranks and text-only batches on the others. It hangs as real jobs do, and
# `collwatch run` names why within a second and stops it; then the fix runs clean, and
# two more failures are named. No GPU needed: the ranks run on collwatch's CPU NCCL
# backend.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
cmake --preset default >/dev/null
cmake --build --preset default -j "$(nproc)" >/dev/null

work=$(mktemp -d /tmp/collwatch-demo-XXXXXX)
trap 'rm -rf "$work"' EXIT
export COLLWATCH_CPU_NCCL_SHM_DIR="$work"
collwatch=build/cli/collwatch
trainer=(build/trainer/collwatch-trainer --nproc 4 --steps 5 --hidden 64 --layers 2 --vision-layers 2)

# Runs one scenario under collwatch; shows its findings and how it ended.
run_scenario() {
  local scenario=$1
  shift
  echo
  echo "== collwatch run --kill-on-hang -- collwatch-trainer --scenario $scenario $* =="
  local status=0
  "$collwatch" run --out "$work/$scenario" --kill-on-hang --stall-after 5 --no-dashboard -- \
    "${trainer[@]}" --scenario "$scenario" "$@" || status=$?
  echo "-- exit status $status ($( [ "$status" = 124 ] && echo "collwatch stopped the hung job" || echo "the job's own" ))"
}

run_scenario image-text
echo
echo "== the same diagnosis post-mortem, from the trace store: collwatch analyze =="
"$collwatch" analyze "$work/image-text" | head -8 || true

run_scenario image-text-dummy
run_scenario expert-skip
run_scenario first-forward-stall --stall-seconds 60
echo
echo "Reports: report.txt and report.json beside the traces of each run (collwatch run --out DIR)."
