#!/usr/bin/env bash
# Runs on a GPU machine (device tool), with .carry from scripts/pack_carry.sh: builds the
# preload and collwatch-trainer there (Release, the torch venv's LibTorch and NCCL), then
#   1. tests/pytorch/check_torch_jobs.py on every GPU: unmodified PyTorch programs under
#      `collwatch run -- torchrun`, checked against NCCL's own log (cases that need more
#      GPUs than the machine has are reported as skipped);
#   2. overhead, side by side in one run: each workload in ROUNDS interleaved rounds of
#      plain, collwatch (`collwatch run`), collwatch without Python call paths
#      (COLLWATCH_PYTHON_FRAMES=off, PyTorch programs only), collwatch with the profiler
#      plugin (`run --profiler-plugin`, PyTorch programs only), PyTorch's Flight Recorder and
#      TORCH_DISTRIBUTED_DEBUG=DETAIL (the last two only for PyTorch programs: the trainer
#      and tests/gpu/nccl_call_cost.cc call NCCL themselves); median step time, all-reduce
#      latency, or host time per NCCL call, per configuration.
#   3. one-gpu (only when named): check_torch_jobs.py --one-gpu with ONE_GPU_RANKS (default
#      "2 4") ranks on the one GPU, through the CPU NCCL backend's CUDA mode (ONE_GPU_MPS=1:
#      under a private MPS server, collwatch run --mps).
# Everything lands under $OUT: check.txt, summary.json, overhead.txt, overhead-raw.txt,
# one-gpu-N.txt and one-gpu-N.json, and reports.tar.gz: each checked case's report.txt and report.json.
#   [CASES="case ..." (check and one-gpu)] [FSDP_STEPS=12] [FSDP_HIDDEN=2048] [CONFIGS="collwatch collwatch-no-paths ..."] [ROUNDS=3] [WORKLOADS="trainer ddp fsdp allreduce enqueue latency"] [ONE_GPU_RANKS="2 4"] [ONE_GPU_MPS=1] \
#     bash scripts/gpu_pytorch.sh [check] [overhead] [one-gpu]
#   (default: check and overhead)
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/gpu_common.sh
export PYTHONUNBUFFERED=1
out=${OUT:-/tmp/collwatch-gpu-pytorch}
mkdir -p "$out"
parts=("$@")
[ ${#parts[@]} -gt 0 ] || parts=(check overhead)
rounds=${ROUNDS:-3}
read -r -a workloads <<<"${WORKLOADS:-trainer ddp fsdp allreduce enqueue latency}"
gpus=$(nvidia-smi -L | wc -l)

targets=(collwatch_preload)
# The C++ workloads only where asked for (LibTorch builds take minutes there).
if [[ " ${parts[*]} " == *" overhead "* && " ${workloads[*]} " =~ \ (trainer|enqueue|latency)\  ]]; then
  targets+=(collwatch_trainer collwatch_nccl_call_cost)
fi
[[ " ${parts[*]} " == *" one-gpu "* ]] && targets+=(collwatch_cpu_nccl)
build_gpu_trainer "$out/build.log" "${targets[@]}" || exit 1
export COLLWATCH_PRELOAD=$PWD/build-gpu-trainer/interposer/libcollwatch.so
export LD_LIBRARY_PATH="$PWD/.carry/lib:$LD_LIBRARY_PATH"
collwatch=$PWD/.carry/bin/collwatch
trainer=$PWD/build-gpu-trainer/trainer/collwatch-trainer
{ nvidia-smi -L; python3 -c 'import torch; print("torch", torch.__version__, "nccl", torch.cuda.nccl.version())'; } \
  | tee "$out/machine.txt"

if [[ " ${parts[*]} " == *" check "* ]]; then
  # shellcheck disable=SC2086  # CASES: case names, split on spaces
  python3 tests/pytorch/check_torch_jobs.py --collwatch "$collwatch" --preload "$COLLWATCH_PRELOAD" \
    --out /tmp/collwatch-torch-check ${CASES:-} 2>&1 | tee "$out/check.txt"
  cp /tmp/collwatch-torch-check/summary.json "$out/summary.json" 2>/dev/null
  (cd /tmp/collwatch-torch-check && tar czf "$out/reports.tar.gz" ./*/out/report.txt ./*/out/report.json)
fi

if [[ " ${parts[*]} " == *" one-gpu "* ]]; then
  export COLLWATCH_CPU_NCCL=$PWD/build-gpu-trainer/cpu_nccl/libnccl.so.2
  for ranks in ${ONE_GPU_RANKS:-2 4}; do
    # shellcheck disable=SC2086  # CASES: case names, split on spaces
    # shellcheck disable=SC2046  # ONE_GPU_MPS=1: collwatch run --one-gpu --mps
    python3 tests/pytorch/check_torch_jobs.py --collwatch "$collwatch" --preload "$COLLWATCH_PRELOAD" --one-gpu \
      $([ "${ONE_GPU_MPS:-0}" = 1 ] && echo --mps) \
      --nproc "$ranks" --out "/tmp/collwatch-one-gpu-$ranks" ${CASES:-} 2>&1 | tee "$out/one-gpu-$ranks.txt"
    cp "/tmp/collwatch-one-gpu-$ranks/summary.json" "$out/one-gpu-$ranks.json" 2>/dev/null
  done
  # With --mps every case's server must be gone: what is left, 5 s after the last case.
  if [ "${ONE_GPU_MPS:-0}" = 1 ]; then
    sleep 5
    { echo "MPS processes left after the cases:"; ps -eo pid,ppid,stat,comm | awk '$4 ~ /^nvidia-cuda-mp/'; } |
      tee "$out/mps-left.txt"
  fi
fi

[[ " ${parts[*]} " == *" overhead "* ]] || exit 0
# One measurement: CONFIG WORKLOAD -> prints the workload's figure (ms or us), or "-".
measure() {
  local config=$1 workload=$2 command=() env=() figure
  case $workload in
    trainer) command=("$trainer" --nproc "$gpus" --device cuda --steps 10 "${gpu_trainer_model[@]}") ;;
    ddp) command=(torchrun --standalone --nproc-per-node="$gpus" tests/pytorch/torch_job.py --job ddp
                  --steps 12 --warmup 2 --hidden 2048 --layers 8) ;;
    enqueue|latency) command=(build-gpu-trainer/tests/gpu/collwatch_nccl_call_cost 20000 9) ;;
    fsdp) command=(torchrun --standalone --nproc-per-node="$gpus" tests/pytorch/torch_job.py --job fsdp
                   --steps "${FSDP_STEPS:-12}" --warmup 2 --hidden "${FSDP_HIDDEN:-2048}" --layers 8) ;;
    allreduce) command=(torchrun --standalone --nproc-per-node="$gpus" tests/pytorch/torch_job.py
                        --job allreduce --iterations 5000) ;;
  esac
  case $config in
    collwatch) command=("$collwatch" run --no-dashboard --out "/tmp/overhead-$workload" -- "${command[@]}") ;;
    collwatch-no-paths)  # the same without reading Python call paths: what they cost
      env=(COLLWATCH_PYTHON_FRAMES=off)
      command=("$collwatch" run --no-dashboard --out "/tmp/overhead-$workload" -- "${command[@]}") ;;
    collwatch-plugin)  # completions from NCCL's profiler plugin events instead of CUDA events
      command=("$collwatch" run --no-dashboard --profiler-plugin --out "/tmp/overhead-$workload" -- "${command[@]}") ;;
    flight-recorder) env=(TORCH_FR_BUFFER_SIZE=20000 TORCH_NCCL_TRACE_BUFFER_SIZE=20000) ;;
    detail) env=(TORCH_DISTRIBUTED_DEBUG=DETAIL) ;;
  esac
  env "${env[@]}" timeout 240 "${command[@]}" > /tmp/overhead.log 2>&1
  local rc=$?
  {
    echo "== $config $workload (exit $rc)"
    grep -E 'median_step_ms|allreduce_us_median|enqueue_ns|rank 0 step' /tmp/overhead.log | tail -14
  } >> "$out/overhead-raw.txt"
  case $workload in
    trainer) figure=$(median_rank0_step /tmp/overhead.log 2 | cut -d' ' -f1) ;;  # steps after the first two
    ddp|fsdp) figure=$(awk '$1 == "median_step_ms" { print $2 }' /tmp/overhead.log) ;;
    enqueue) figure=$(awk '$1 == "enqueue_ns" { print $2 }' /tmp/overhead.log) ;;
    latency) figure=$(awk '$1 == "enqueue_ns" { print $4 }' /tmp/overhead.log) ;;
    allreduce) figure=$(awk '$1 == "allreduce_us_median" { print $2 }' /tmp/overhead.log) ;;
  esac
  echo "${figure:--}"
}

: > "$out/overhead-raw.txt"
declare -A figures
for round in $(seq "$rounds"); do
  for workload in "${workloads[@]}"; do
    # FSDP2 on one GPU issues no collective at all: nothing to compare there.
    [ "$workload" = fsdp ] && [ "$gpus" -lt 2 ] && continue
    configs=(plain collwatch)
    case $workload in ddp|fsdp|allreduce) configs+=(collwatch-no-paths collwatch-plugin flight-recorder detail) ;; esac
    if [ -n "${CONFIGS:-}" ]; then  # CONFIGS: only these (plain is always measured)
      read -r -a wanted <<<"$CONFIGS"
      configs=(plain $(printf '%s\n' "${configs[@]:1}" | grep -xF -f <(printf '%s\n' "${wanted[@]}")))
    fi
    for config in "${configs[@]}"; do
      figures[$workload.$config]+="$(measure "$config" "$workload") "
      echo "round $round $workload $config: ${figures[$workload.$config]}"
    done
  done
done
python3 - "$rounds" > "$out/overhead.txt" <<PY
import statistics, sys
figures = {
$(for key in "${!figures[@]}"; do echo "  '$key': '${figures[$key]}',"; done)
}
print(f"{sys.argv[1]} interleaved rounds; median over rounds; added = against plain in the same round")
for workload, unit in (("trainer", "ms/step"), ("ddp", "ms/step"), ("fsdp", "ms/step"),
                       ("allreduce", "us/call"), ("enqueue", "ns/call"), ("latency", "us/call")):
    if f"{workload}.plain" not in figures:
        continue
    plain = figures[f"{workload}.plain"].split()
    for config in ("plain", "collwatch", "collwatch-no-paths", "collwatch-plugin", "flight-recorder", "detail"):
        values = figures.get(f"{workload}.{config}", "").split()
        if not values:
            continue
        pairs = [(float(v), float(p)) for v, p in zip(values, plain) if v != "-" and p != "-"]
        if not pairs:
            print(f"{workload:10} {config:16} no figure")
            continue
        median = statistics.median(v for v, _ in pairs)
        added = statistics.median((v - p) / p * 100 for v, p in pairs)
        delta = statistics.median(v - p for v, p in pairs)
        print(f"{workload:10} {config:16} {median:10.3f} {unit}  added {added:+7.2f} % ({delta:+.3f} {unit})"
              f"  rounds: {' '.join(values)}")
PY
cat "$out/overhead.txt"
