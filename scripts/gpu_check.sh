#!/usr/bin/env bash
# Runs on a GPU machine (device tool): builds the preload and the GPU check program
# against the torch venv's NCCL, runs 2 ranks with the preload, dumps the rings with the
# `collwatch` binary carried from the build machine (scripts/pack_carry.sh) and
# summarises them. Writes everything under $OUT.
set -euo pipefail
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
out=${OUT:-/tmp/collwatch-gpu}
mkdir -p "$out"
nproc_gpu=${1:-2}

nccl_root=$(python3 -c 'import nvidia, os; print(os.path.join(list(nvidia.__path__)[0], "nccl"))')
generator=()
command -v ninja >/dev/null || generator=(-G "Unix Makefiles")
cmake -S . -B build-gpu "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DCOLLWATCH_PRELOAD_ONLY=ON -DCOLLWATCH_BUILD_TESTS=OFF -DCOLLWATCH_BUILD_BENCHMARKS=OFF \
  -DCOLLWATCH_BUILD_GPU_PROGRAMS=ON -DCOLLWATCH_NCCL_ROOT="$nccl_root" > "$out/build.log" 2>&1
cmake --build build-gpu -j 16 >> "$out/build.log" 2>&1 || { tail -40 "$out/build.log"; exit 1; }

work=$(mktemp -d)
mkdir -p "$work/plain"
preload=$PWD/build-gpu/interposer/libcollwatch.so
export LD_LIBRARY_PATH="$nccl_root/lib:${LD_LIBRARY_PATH:-}"
echo "-- without the preload" | tee "$out/run.log"
timeout 60 build-gpu/tests/gpu/collwatch_nccl_gpu_ranks "$nproc_gpu" "$work/plain" 2>&1 |
  tee -a "$out/run.log" || echo "plain run failed" | tee -a "$out/run.log"
pkill -9 -f collwatch_nccl_gpu_ranks || true
echo "-- with the preload" | tee -a "$out/run.log"
mkdir -p "$work/preloaded"
COLLWATCH_RING_DIR="$work/rings" LD_PRELOAD="$preload" NVTX_INJECTION64_PATH="$preload" \
  timeout 90 build-gpu/tests/gpu/collwatch_nccl_gpu_ranks "$nproc_gpu" "$work/preloaded" 2>&1 |
  tee -a "$out/run.log" || echo "preloaded run failed" | tee -a "$out/run.log"
pkill -9 -f collwatch_nccl_gpu_ranks || true

LD_LIBRARY_PATH=.carry/lib .carry/bin/collwatch dump "$work/rings" > "$out/rings.txt"
LD_LIBRARY_PATH=.carry/lib .carry/bin/collwatch dump --json "$work/rings" > "$out/rings.jsonl"
python3 - "$out/rings.jsonl" <<'PY' | tee "$out/summary.txt"
import collections, json, sys
rings, counts, completes, captured = {}, collections.Counter(), collections.Counter(), collections.Counter()
latency = collections.defaultdict(list)
enter_t = {}
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r["type"] == "ring":
        rings[r["pid"]] = r
        continue
    key = (r["ring_pid"], r["fn"])
    if r["kind"] == "enter":
        counts[key] += 1
        enter_t[(r["ring_pid"], r["lane"], r["index"])] = r["t_ns"]
        if "captured" in r["flags"]:
            captured[key] += 1
    elif r["kind"] == "complete":
        completes[key] += 1
        start = enter_t.get((r["ring_pid"], r["ref_lane"], r["ref"]))
        if start is not None:
            latency[r["fn"]].append((r["t_ns"] - start) / 1e3)
for pid, ring in sorted(rings.items()):
    print(f"ring pid {pid} rank {ring['rank']}: records {ring['records']} lost {ring['lost']} "
          f"torn {ring['torn']} dropped {ring['dropped']} state {ring['writer_state']}")
    for (p, fn), n in sorted(counts.items()):
        if p == pid:
            print(f"  {fn:16s} enters {n:3d} completions {completes[(p, fn)]:3d} captured {captured[(p, fn)]}")
for fn, values in sorted(latency.items()):
    values.sort()
    print(f"enter->completion observed {fn}: median {values[len(values)//2]:.0f} us over {len(values)}")
PY
