#!/usr/bin/env bash
# Runs on a GPU machine (device tool): builds collwatch's libnccl.so.2 (the CPU NCCL
# backend) and the CUDA-mode check program, runs it in each configuration of
# CUDA_MODE_RUNS (figures to $OUT/figures.csv), then, where PyTorch is installed, a torch
# job of 2 ranks on the one GPU with the library preloaded in place of NVIDIA's.
# A configuration is SHARING:IPC:RANKS: SHARING "ts" (the driver's time slices between
# processes) or "mps" (a private MPS server: the ranks' kernels run at once), IPC 0 (host
# staging) or 1 (COLLWATCH_CPU_NCCL_IPC=1). CUDA_MODE_FSDP lists FSDP2 jobs to run after
# (tests/gpu/cuda_mode_fsdp2.py). With 2 GPUs, the results checks also run on real NCCL,
# a GPU per rank (CUDA_MODE_REAL_NCCL=0: not). Writes under $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
out=${OUT:-/tmp/collwatch-gpu}
mkdir -p "$out"
runs=${CUDA_MODE_RUNS:-ts:0:2 ts:0:4}
# nccl.h 2.28 and NVIDIA's library: the torch venv's (the GPU image has no other), else a
# carried copy under .nccl/, else the CUDA root.
torch_nccl=$(python3 -c 'import nvidia, os; print(os.path.join(list(nvidia.__path__)[0], "nccl"))' 2>/dev/null)
nccl_root=${COLLWATCH_NCCL_ROOT:-/usr/local/cuda}
[ -z "${COLLWATCH_NCCL_ROOT:-}" ] && [ -f "$torch_nccl/include/nccl.h" ] && nccl_root=$torch_nccl
[ -f .nccl/include/nccl.h ] && nccl_root=$PWD/.nccl
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$out/gpu.txt" 2>&1
generator=()
command -v ninja >/dev/null || generator=(-G "Unix Makefiles")
cmake -S . -B build-gpu "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DCOLLWATCH_PRELOAD_ONLY=ON -DCOLLWATCH_BUILD_TESTS=OFF -DCOLLWATCH_BUILD_BENCHMARKS=OFF \
  -DCOLLWATCH_BUILD_TRAINER=OFF -DCOLLWATCH_BUILD_GPU_PROGRAMS=ON \
  -DCOLLWATCH_NCCL_ROOT="$nccl_root" > "$out/build.log" 2>&1
cmake --build build-gpu -j 16 --target collwatch_cpu_nccl_cuda_mode >> "$out/build.log" 2>&1 ||
  { tail -40 "$out/build.log"; exit 1; }
library=$PWD/build-gpu/cpu_nccl/libnccl.so.2
program=build-gpu/tests/gpu/collwatch_cpu_nccl_cuda_mode
echo "configuration,collective,bytes,ranks,us_per_op,busbw_GBps" > "$out/figures.csv"

mps_dir=""
start_mps() {
  [ -n "$mps_dir" ] && return 0
  command -v nvidia-cuda-mps-control >/dev/null || { echo "no nvidia-cuda-mps-control"; return 1; }
  mps_dir=$(mktemp -d)
  mkdir -p "$mps_dir/pipe" "$mps_dir/log"
  CUDA_MPS_PIPE_DIRECTORY=$mps_dir/pipe CUDA_MPS_LOG_DIRECTORY=$mps_dir/log \
    nvidia-cuda-mps-control -d
}
for run in $runs; do
  IFS=: read -r sharing ipc ranks <<< "$run"
  label="$sharing$([ "$ipc" = 1 ] && echo +ipc)"
  unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
  if [ "$sharing" = mps ]; then
    start_mps || continue
    export CUDA_MPS_PIPE_DIRECTORY=$mps_dir/pipe CUDA_MPS_LOG_DIRECTORY=$mps_dir/log
  fi
  rendezvous=$(mktemp -d)
  echo "-- $ranks ranks on one GPU, $label" | tee -a "$out/run.log"
  CUDA_MODE_LABEL=$label COLLWATCH_CPU_NCCL_IPC=$ipc timeout "${CUDA_MODE_TIMEOUT:-200}" \
    "$program" "$ranks" "$rendezvous" "$out/figures.csv" 2>&1 | tee -a "$out/run.log"
  echo "exit ${PIPESTATUS[0]}" | tee -a "$out/run.log"
done
unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY

# Real NCCL against the same expectations, a GPU per rank, where there are 2 GPUs and
# NVIDIA's library: both agree with the host's results, so with each other.
real_nccl=$nccl_root/lib/libnccl.so.2
if [ "${CUDA_MODE_REAL_NCCL:-1}" = 1 ] && [ "$(nvidia-smi -L | wc -l)" -ge 2 ] && [ -f "$real_nccl" ]; then
  echo "-- real NCCL ($real_nccl), 2 ranks on 2 GPUs" | tee -a "$out/run.log"
  CUDA_MODE_CHECK_REAL_NCCL=1 LD_PRELOAD=$real_nccl timeout 120 "$program" 2 "$(mktemp -d)" 2>&1 |
    tee -a "$out/run.log"
  echo "exit ${PIPESTATUS[0]}" | tee -a "$out/run.log"
fi

have_torch=0
python3 -c 'import torch' 2>/dev/null && have_torch=1
if [ "${CUDA_MODE_TORCH:-1}" = 1 ] && [ $have_torch = 1 ]; then
  echo "-- torch, 2 ranks on one GPU, LD_PRELOAD=$library" | tee -a "$out/run.log"
  LD_PRELOAD=$library timeout 150 python3 -m torch.distributed.run --nproc-per-node 2 \
    tests/gpu/cuda_mode_torch_smoke.py 2>&1 | tee -a "$out/run.log"
  echo "exit ${PIPESTATUS[0]}" | tee -a "$out/run.log"
fi
# FSDP2 jobs, each SHARING:RANKS (e.g. "ts:1 mps:4"): losses must equal the 1-rank run's.
for job in ${CUDA_MODE_FSDP:-}; do
  [ $have_torch = 1 ] || break
  IFS=: read -r sharing ranks <<< "$job"
  unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
  if [ "$sharing" = mps ]; then
    start_mps || continue
    export CUDA_MPS_PIPE_DIRECTORY=$mps_dir/pipe CUDA_MPS_LOG_DIRECTORY=$mps_dir/log
  fi
  echo "-- torch FSDP2, $ranks ranks on one GPU, $sharing" | tee -a "$out/run.log"
  LD_PRELOAD=$library timeout 200 python3 -m torch.distributed.run --nproc-per-node "$ranks" \
    tests/gpu/cuda_mode_fsdp2.py 2>&1 | grep -v "^\*\*\*\|OMP_NUM_THREADS" | tee -a "$out/run.log"
  echo "exit ${PIPESTATUS[0]}" | tee -a "$out/run.log"
done
unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
[ -n "$mps_dir" ] && echo quit |
  CUDA_MPS_PIPE_DIRECTORY=$mps_dir/pipe nvidia-cuda-mps-control
exit 0
