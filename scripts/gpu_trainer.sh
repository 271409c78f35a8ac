#!/usr/bin/env bash
# Runs on a GPU machine (device tool): builds collwatch-trainer against the torch venv's
# LibTorch (CUDA) and NCCL plus the preload, then runs `clean` and every failing scenario
# on 2 GPUs with the preload, each bounded by `timeout`; records step times, the first
# forward's all-gather bytes and the rings (dumped with the carried `collwatch`, see
# scripts/pack_carry.sh). Writes everything under $OUT.
#   bash scripts/gpu_trainer.sh [NPROC [SCENARIO...]]   (default: every scenario, then
#   `clean` without the preload; name scenarios to split the runs over several calls)
# With UNDER_COLLWATCH=1 each scenario runs under the carried `collwatch run
# --kill-on-hang` instead of a bare LD_PRELOAD: its report.txt/report.json land in $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/gpu_common.sh
out=${OUT:-/tmp/collwatch-gpu-trainer}
mkdir -p "$out"
nproc_gpu=${1:-2}
shift $(( $# > 0 ? 1 : 0 ))
scenarios=("$@")
scenario_timeout=${SCENARIO_TIMEOUT:-75}
build_gpu_trainer "$out/build.log" collwatch_preload collwatch_trainer || exit 1

trainer=$PWD/build-gpu-trainer/trainer/collwatch-trainer
preload=$PWD/build-gpu-trainer/interposer/libcollwatch.so
ldd "$trainer" > "$out/trainer.ldd" 2>&1
work=$(mktemp -d)

# Kills what a scenario left behind: only processes running this build's trainer.
kill_leftovers() {
  local pids
  pids=$(pgrep -f "$trainer" || true)
  [ -n "$pids" ] && kill -9 $pids 2>/dev/null
  sleep 1
}

# Median step time of rank 0 over the steps after the first, into run.log.
report_median() {
  local median count
  read -r median count < <(median_rank0_step "$1" 1)
  [ -z "$median" ] || printf "rank 0 median step %.1f ms over %d steps\n" "$median" "$count" | tee -a "$out/run.log"
}

run_scenario() {  # NAME STEPS [extra flags...]
  local name=$1 steps=$2
  shift 2
  echo "-- $name" | tee -a "$out/run.log"
  local started=$SECONDS
  if [ -n "${UNDER_COLLWATCH:-}" ]; then
    LD_LIBRARY_PATH="$PWD/.carry/lib:$LD_LIBRARY_PATH" COLLWATCH_PRELOAD="$preload" \
      timeout --kill-after=10 "$scenario_timeout" .carry/bin/collwatch run --out "$work/run-$name" \
      --ring-dir "$work/rings-$name" --kill-on-hang -- "$trainer" --nproc "$nproc_gpu" --device cuda \
      --scenario "$name" --steps "$steps" "${gpu_trainer_model[@]}" "$@" > "$out/$name.log" 2>&1
  else
    COLLWATCH_RING_DIR="$work/rings-$name" LD_PRELOAD="$preload" NVTX_INJECTION64_PATH="$preload" \
      timeout --kill-after=10 "$scenario_timeout" "$trainer" --nproc "$nproc_gpu" --device cuda \
      --scenario "$name" --steps "$steps" "${gpu_trainer_model[@]}" "$@" > "$out/$name.log" 2>&1
  fi
  local rc=$?
  if [ -f "$work/run-$name/report.txt" ]; then
    cp "$work/run-$name/report.txt" "$out/$name.report.txt"
    cp "$work/run-$name/report.json" "$out/$name.report.json"
  fi
  kill_leftovers
  echo "$name: exit $rc after $((SECONDS - started)) s (124/137: stopped by timeout)" | tee -a "$out/run.log"
  grep -m1 "first forward all-gather" "$out/$name.log" | tee -a "$out/run.log"
  # Median step time of rank 0 over steps after the first.
  report_median "$out/$name.log"
  tail -3 "$out/$name.log" >> "$out/run.log"
  if [ -d "$work/rings-$name" ]; then
    LD_LIBRARY_PATH=.carry/lib .carry/bin/collwatch dump "$work/rings-$name" > "$out/$name.rings.txt" 2>&1
    LD_LIBRARY_PATH=.carry/lib .carry/bin/collwatch dump --json "$work/rings-$name" \
      > "$out/$name.rings.jsonl" 2>&1
  fi
}

: > "$out/run.log"
steps_of() {  # scenarios that finish train longer; hanging ones stop at the timeout
  case $1 in clean) echo 6 ;; *-dummy|*-batchsync|mtp-*) echo 3 ;; *) echo 6 ;; esac
}
[ ${#scenarios[@]} -gt 0 ] || scenarios=(clean mtp-sequential-backward image-text-dummy
  image-text-batchsync image-text expert-skip dtype-mismatch first-forward-stall plain)
for name in "${scenarios[@]}"; do
  case $name in
    first-forward-stall) run_scenario "$name" 6 --stall-seconds 30 ;;
    plain)  # clean without the preload, for the step-time comparison
      echo "-- clean without the preload" | tee -a "$out/run.log"
      timeout --kill-after=10 "$scenario_timeout" "$trainer" --nproc "$nproc_gpu" --device cuda \
        --steps 6 "${gpu_trainer_model[@]}" > "$out/clean-plain.log" 2>&1
      echo "clean without the preload: exit $?" | tee -a "$out/run.log"
      kill_leftovers
      report_median "$out/clean-plain.log" ;;
    *) run_scenario "$name" "$(steps_of "$name")" ;;
  esac
done
rm -rf "$work"
