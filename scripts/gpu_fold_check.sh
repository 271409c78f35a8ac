#!/usr/bin/env bash
# Runs on a GPU machine (device tool), with .carry from scripts/pack_carry.sh: longer
# unmodified PyTorch jobs than check_torch_jobs.py's (hundreds of collectives a rank, so
# that `collwatch analyze` folds ranks into their classes: issue 39), each under
# `collwatch run -- torchrun` on every GPU; then `collwatch analyze` of each output folder
# as text and as JSON, folding and with --keep-every-call, compared byte for byte, with
# each analysis's wall time and peak memory.
# Everything lands under $OUT: fold.txt (one line per job and form), machine.txt, and
# reports.tar.gz (each job's report.txt and report.json from analyze).
#   [JOBS="name ..."] bash scripts/gpu_fold_check.sh
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/gpu_common.sh
export PYTHONUNBUFFERED=1
out=${OUT:-/tmp/collwatch-gpu-fold}
work=/tmp/collwatch-fold-check
mkdir -p "$out" && rm -rf "$work" && mkdir -p "$work"
gpus=$(nvidia-smi -L | wc -l)
build_gpu_trainer "$out/build.log" collwatch_preload || exit 1
export COLLWATCH_PRELOAD=$PWD/build-gpu-trainer/interposer/libcollwatch.so
export LD_LIBRARY_PATH="$PWD/.carry/lib:$LD_LIBRARY_PATH"
collwatch=$PWD/.carry/bin/collwatch
{ nvidia-smi -L; python3 -c 'import torch; print("torch", torch.__version__, "nccl", torch.cuda.nccl.version())'; } \
  | tee "$out/machine.txt"

# name: torch_job.py arguments; the failing ones hang and are stopped by collwatch.
declare -A job_args=(
  [fsdp-clean]="--job fsdp --steps 60"
  [hf-vlm-clean]="--job hf-vlm --steps 30"
  [ddp-clean]="--job ddp --steps 200"
  [fsdp-divergent-late]="--job fsdp --steps 40 --scenario divergent-path --diverge-from-step 30"
  [hf-vlm-divergent-late]="--job hf-vlm --steps 25 --scenario divergent-path --diverge-from-step 15"
  [pipeline-1f1b]="--job pipeline --schedule 1f1b --steps 40"
)
read -r -a jobs <<<"${JOBS:-fsdp-clean hf-vlm-clean ddp-clean fsdp-divergent-late hf-vlm-divergent-late pipeline-1f1b}"

for name in "${jobs[@]}"; do
  dir=$work/$name
  mkdir -p "$dir"
  hang=()
  [[ $name == *divergent* ]] && hang=(--stall-after 10 --kill-on-hang)
  # shellcheck disable=SC2086  # the job's arguments, split on spaces
  timeout 240 "$collwatch" run --no-dashboard --out "$dir/out" --ring-dir "$dir/rings" "${hang[@]}" -- \
    torchrun --standalone --nproc-per-node="$gpus" tests/pytorch/torch_job.py ${job_args[$name]} \
    > "$dir/job.log" 2>&1
  echo "$name: collwatch run exit $?" | tee -a "$out/fold.txt"
  for form in text json; do
    flag=()
    [ $form = json ] && flag=(--json)
    for mode in folded kept; do
      keep=()
      [ $mode = kept ] && keep=(--keep-every-call)
      /usr/bin/time -f "%e s, %M KB" -o "$dir/$form-$mode.time" \
        "$collwatch" analyze "${flag[@]}" "${keep[@]}" "$dir/out" > "$dir/$form-$mode.report" 2> "$dir/$form-$mode.err"
      echo "$?" > "$dir/$form-$mode.exit"
    done
    same=different
    cmp -s "$dir/$form-folded.report" "$dir/$form-kept.report" && same=identical
    echo "$name $form: exit $(cat "$dir/$form-folded.exit")/$(cat "$dir/$form-kept.exit"), folded" \
      "$(tail -1 "$dir/$form-folded.time"), kept $(tail -1 "$dir/$form-kept.time"), reports $same" | tee -a "$out/fold.txt"
  done
  head -3 "$dir/text-folded.report" | sed "s/^/  /" | tee -a "$out/fold.txt"
done
(cd "$work" && tar czf "$out/reports.tar.gz" ./*/text-folded.report ./*/json-folded.report ./*/job.log)
