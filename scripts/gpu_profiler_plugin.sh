#!/usr/bin/env bash
# Runs on a GPU machine with 2 GPUs (device tool), with .carry from scripts/pack_carry.sh:
# builds the preload and tests/gpu/nccl_two_gpu_cost.cc there against the torch venv's
# NCCL, then measures the host time per small all-reduce and reduce-scatter in ROUNDS
# interleaved rounds of: plain, preload (LD_PRELOAD), plugin (NCCL_PROFILER_PLUGIN only),
# both, run (`collwatch run`), run+plugin — with one process per GPU and with one process
# driving both GPUs. Completion is tracked in every collwatch configuration. Two figures per
# op: long back-to-back runs (OP: bound by the GPUs if the launch queue fills; on 2 x H100
# it did not) and short bursts the GPUs keep up with (OP_burst: the host's cost per call).
# Lands in $OUT: profiler-plugin.txt (medians per configuration), profiler-plugin-raw.txt.
#   [ROUNDS=5] [CALLS=20000] bash scripts/gpu_profiler_plugin.sh
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/gpu_common.sh
out=${OUT:-/tmp/collwatch-gpu-plugin}
mkdir -p "$out"
rounds=${ROUNDS:-5}
calls=${CALLS:-20000}
build_gpu_trainer "$out/build.log" collwatch_preload collwatch_nccl_two_gpu_cost || exit 1
preload=$PWD/build-gpu-trainer/interposer/libcollwatch.so
program=$PWD/build-gpu-trainer/tests/gpu/collwatch_nccl_two_gpu_cost
export LD_LIBRARY_PATH="$PWD/.carry/lib:$LD_LIBRARY_PATH"
collwatch=$PWD/.carry/bin/collwatch
export COLLWATCH_AGENT=$collwatch
{ nvidia-smi -L; python3 -c 'import torch; print("torch", torch.__version__, "nccl", torch.cuda.nccl.version())'; } \
  > "$out/machine.txt"

read -r -a configs <<<"${CONFIGS:-plain preload plugin both run run+plugin}"
layouts=(per-gpu one-process)
: > "$out/profiler-plugin-raw.txt"
for round in $(seq "$rounds"); do
  for layout in "${layouts[@]}"; do
    for config in "${configs[@]}"; do
      rings=/tmp/plugin-rings-$config-$layout-$round
      rm -rf "$rings" /tmp/plugin-run
      env=(COLLWATCH_RING_DIR="$rings")
      command=("$program" "$layout" "$calls" 9)
      case $config in
        preload) env+=(LD_PRELOAD="$preload") ;;
        plugin) env+=(NCCL_PROFILER_PLUGIN="$preload") ;;
        both) env+=(LD_PRELOAD="$preload" NCCL_PROFILER_PLUGIN="$preload") ;;
        run) command=("$collwatch" run --no-dashboard --out /tmp/plugin-run -- "${command[@]}") ;;
        run+plugin) env+=(NCCL_PROFILER_PLUGIN="$preload")
                    command=("$collwatch" run --no-dashboard --out /tmp/plugin-run -- "${command[@]}") ;;
      esac
      log=$(env "${env[@]}" COLLWATCH_PRELOAD="$preload" timeout 300 "${command[@]}" 2>&1)
      for op in all_reduce reduce_scatter all_reduce_burst reduce_scatter_burst; do
        figure=$(awk -v key="${op}_ns" '$1 == key { print $2 }' <<<"$log")
        echo "$round $layout $config $op ${figure:--}" >> "$out/profiler-plugin-raw.txt"
      done
      awk -v tag="$round $layout $config" '$1 ~ /_burst_ns$/ { print "spread", tag, $0 }' <<<"$log" \
        >> "$out/profiler-plugin-raw.txt"
      [ -n "$(awk '$1 == "all_reduce_ns"' <<<"$log")" ] || { echo "$config $layout failed:"; tail -5 <<<"$log"; }
      # Records written, and completions among them (the configurations that record).
      if [ -d "$rings" ] || [ -d /tmp/plugin-run ]; then
        "$collwatch" dump "$( [ -d /tmp/plugin-run ] && echo /tmp/plugin-run || echo "$rings")" 2>/dev/null |
          awk -v tag="$round $layout $config" '$3 == "enter" { e++ } $3 == "complete" { c++ }
            END { print "records " tag " enters " e + 0 " completions " c + 0 }' >> "$out/profiler-plugin-raw.txt"
      fi
    done
  done
done
# Medians per (layout, config, op).
awk '$1 != "records" && $1 != "spread" && $5 != "-" { print $2, $3, $4, $5 }' "$out/profiler-plugin-raw.txt" | sort -k1,3 -k4,4n |
  awk '{ k = $1 " " $2 " " $3; v[k] = v[k] " " $4; n[k]++ }
    END { for (k in v) { split(v[k], a, " "); printf "%-40s median_ns %8.1f  rounds %d\n", k, a[int((n[k] + 1) / 2)], n[k] } }' |
  sort > "$out/profiler-plugin.txt"
grep records "$out/profiler-plugin-raw.txt" | awk '$2 == 1' >> "$out/profiler-plugin.txt"
cat "$out/profiler-plugin.txt"
