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
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
out=${OUT:-/tmp/collwatch-gpu-trainer}
mkdir -p "$out"
nproc_gpu=${1:-2}
shift $(( $# > 0 ? 1 : 0 ))
scenarios=("$@")
scenario_timeout=${SCENARIO_TIMEOUT:-75}

nccl_root=$(python3 -c 'import nvidia, os; print(os.path.join(list(nvidia.__path__)[0], "nccl"))')
torch_prefix=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')
cli11=()
[ -f /usr/include/CLI/CLI.hpp ] || cli11=(-DCOLLWATCH_CLI11_INCLUDE_DIR="$PWD/.carry/include")
generator=()
command -v ninja >/dev/null || generator=(-G "Unix Makefiles")
export PATH="/usr/local/cuda/bin:$PATH" CUDACXX=/usr/local/cuda/bin/nvcc
{
  cmake -S . -B build-gpu-trainer "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
    -DCOLLWATCH_PRELOAD_ONLY=ON -DCOLLWATCH_BUILD_TESTS=OFF -DCOLLWATCH_BUILD_BENCHMARKS=OFF \
    -DCOLLWATCH_NCCL_ROOT="$nccl_root" -DCOLLWATCH_TRAINER_NCCL=real \
    -DCMAKE_PREFIX_PATH="$torch_prefix" -DCMAKE_POLICY_VERSION_MINIMUM=3.5 "${cli11[@]}" &&
  cmake --build build-gpu-trainer -j 16 --target collwatch_preload collwatch_trainer
} > "$out/build.log" 2>&1 || { tail -60 "$out/build.log"; exit 1; }

trainer=$PWD/build-gpu-trainer/trainer/collwatch-trainer
preload=$PWD/build-gpu-trainer/interposer/libcollwatch.so
export LD_LIBRARY_PATH="$nccl_root/lib:${LD_LIBRARY_PATH:-}"
ldd "$trainer" > "$out/trainer.ldd" 2>&1
work=$(mktemp -d)
# Large enough that the first forward all-gathers gigabytes (16 blocks of hidden 2048).
model=(--hidden 2048 --heads 16 --layers 8 --vision-layers 4 --experts 2 --vocab 32000
       --seq 256 --image-size 64 --patch 8 --batch 4 --lr 3e-4)

# Kills what a scenario left behind: only processes running this build's trainer.
kill_leftovers() {
  local pids
  pids=$(pgrep -f "$trainer" || true)
  [ -n "$pids" ] && kill -9 $pids 2>/dev/null
  sleep 1
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
      --scenario "$name" --steps "$steps" "${model[@]}" "$@" > "$out/$name.log" 2>&1
  else
    COLLWATCH_RING_DIR="$work/rings-$name" LD_PRELOAD="$preload" NVTX_INJECTION64_PATH="$preload" \
      timeout --kill-after=10 "$scenario_timeout" "$trainer" --nproc "$nproc_gpu" --device cuda \
      --scenario "$name" --steps "$steps" "${model[@]}" "$@" > "$out/$name.log" 2>&1
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
  awk '$1 == "rank" && $2 == 0 && $3 == "step" && $4 > 0 { print $8 }' "$out/$name.log" | sort -n |
    awk '{ v[NR] = $1 } END { if (NR) printf "rank 0 median step %.1f ms over %d steps\n", v[int((NR + 1) / 2)], NR }' |
    tee -a "$out/run.log"
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
        --steps 6 "${model[@]}" > "$out/clean-plain.log" 2>&1
      echo "clean without the preload: exit $?" | tee -a "$out/run.log"
      kill_leftovers
      awk '$1 == "rank" && $2 == 0 && $3 == "step" && $4 > 0 { print $8 }' "$out/clean-plain.log" |
        sort -n | awk '{ v[NR] = $1 } END { if (NR) printf "rank 0 median step %.1f ms over %d steps\n", v[int((NR + 1) / 2)], NR }' |
        tee -a "$out/run.log" ;;
    *) run_scenario "$name" "$(steps_of "$name")" ;;
  esac
done
rm -rf "$work"
