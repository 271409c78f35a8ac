#!/usr/bin/env bash
# Runs on a GPU machine with 2 GPUs (device tool; needs nothing built): makes the Flight
# Recorder fixtures of tests/data/flight_recorder. Each case is an unmodified PyTorch job
# (tests/pytorch/torch_job.py) that hangs; PyTorch's watchdog times it out after
# TIMEOUT s and dumps every rank's Flight Recorder as it does for users
# (TORCH_NCCL_DUMP_ON_TIMEOUT). PyTorch's own analyzer (fr_trace) is run on each dump,
# for docs/flight-recorder.md. Everything lands in $OUT/flight-recorder.tar.gz.
#   [TIMEOUT=20] [CASES="case ..."] bash scripts/gpu_flight_recorder.sh
set -uo pipefail
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
out=${OUT:-/tmp/collwatch-gpu-fr}
work=/tmp/flight-recorder
rm -rf "$work" && mkdir -p "$work" "$out"
timeout_s=${TIMEOUT:-20}

# case name -> torch_job.py arguments (and FR_ENTRIES: the Flight Recorder's size).
declare -A cases=(
  [fsdp-divergent-path]="--job fsdp --scenario divergent-path --steps 3"
  [fsdp-skipped-reduce-scatter]="--job fsdp --scenario skipped-reduce-scatter --steps 12"
  [fsdp-dtype-mismatch]="--job fsdp --scenario dtype-mismatch --steps 3"
  [fsdp-late-rank]="--job fsdp --scenario late-rank --hold-at-step 1 --steps 3 --late-seconds 90"
  [fsdp-stopped-rank]="--job fsdp --scenario stopped-rank --hold-at-step 1 --steps 3"
  [fsdp-history-cut]="--job fsdp --scenario divergent-path --diverge-from-step 3 --steps 6"
  [ddp-divergent-path]="--job ddp --scenario divergent-path --diverge-from-step 2 --steps 4"
  [ddp-dtype-mismatch]="--job ddp --scenario dtype-mismatch --steps 3"
  [ddp-clean-json]="--job ddp --steps 2"
)
read -r -a names <<<"${CASES:-fsdp-divergent-path fsdp-skipped-reduce-scatter fsdp-dtype-mismatch fsdp-late-rank \
fsdp-stopped-rank fsdp-history-cut ddp-divergent-path ddp-dtype-mismatch ddp-clean-json}"
{ nvidia-smi -L; python3 -c 'import torch; print("torch", torch.__version__, "nccl", torch.cuda.nccl.version())'; } \
  > "$work/machine.txt"
for name in "${names[@]}"; do
  dir=$work/$name
  mkdir -p "$dir"
  entries=2000
  [ "$name" = fsdp-history-cut ] && entries=60
  extra=()
  [ "$name" = ddp-clean-json ] && extra=(--flight-recorder-dump "$dir/nccl_trace_rank_")
  start=$(date +%s)
  # shellcheck disable=SC2086  # the case's arguments, split on spaces
  TORCH_NCCL_TRACE_BUFFER_SIZE=$entries TORCH_NCCL_DUMP_ON_TIMEOUT=1 \
    TORCH_FR_DUMP_TEMP_FILE="$dir/nccl_trace_rank_" TORCH_NCCL_DEBUG_INFO_TEMP_FILE="$dir/nccl_trace_rank_" \
    torchrun --standalone --nproc-per-node=2 tests/pytorch/torch_job.py ${cases[$name]} \
    --timeout "$timeout_s" "${extra[@]}" > "$dir/job.log" 2>&1 &
  job=$!
  # A stopped rank never dumps nor exits: 20 s after the first dump the rest is killed.
  first_dump=0
  while kill -0 "$job" 2>/dev/null; do
    sleep 1
    now=$(date +%s)
    if [ "$first_dump" = 0 ] && compgen -G "$dir/nccl_trace_rank_*" >/dev/null; then first_dump=$now; fi
    if { [ "$first_dump" != 0 ] && [ $((now - first_dump)) -ge 20 ]; } || [ $((now - start)) -ge 240 ]; then
      pkill -KILL -f torch_job.py; pkill -KILL -f torchrun
    fi
  done
  wait "$job"
  echo "$name: exit $? after $(( $(date +%s) - start )) s; dumps: $(cd "$dir" && ls nccl_trace_rank_* 2>/dev/null | tr '\n' ' ')" \
    | tee -a "$work/cases.txt"
  pkill -KILL -f torch_job.py 2>/dev/null
  (cd "$dir" && ls nccl_trace_rank_* >/dev/null 2>&1) || continue
  timeout 120 python3 -m torch.distributed.flight_recorder.fr_trace "$dir" --prefix nccl_trace_rank_ \
    > "$dir/fr_trace.txt" 2>&1
  echo "fr_trace exit $?" >> "$dir/fr_trace.txt"
done
python3 - "$work" > "$work/formats.txt" 2>&1 <<'PY'
import pickle, pickletools, sys, glob, collections
for path in sorted(glob.glob(sys.argv[1] + "/*/nccl_trace_rank_*")):
    if path.endswith(".json"):
        continue
    data = open(path, "rb").read()
    ops = collections.Counter(op.name for op, arg, pos in pickletools.genops(data))
    globals_ = {arg for op, arg, pos in pickletools.genops(data) if op.name in ("GLOBAL", "STACK_GLOBAL")}
    print(path, len(data), "bytes", dict(ops), "globals", globals_)
    d = pickle.loads(data)
    print("  keys", {k: type(v).__name__ for k, v in d.items()}, "version", d.get("version"))
    if d.get("entries"):
        print("  entry", d["entries"][-1])
PY
tar czf "$out/flight-recorder.tar.gz" -C "$work" .
cat "$work/cases.txt"
