# Sourced (from the repository root) by the scripts that run on a GPU machine through the
# device tool: its environment, the build of the preload, collwatch-trainer and the GPU
# programs against the torch venv's LibTorch and NCCL, the trainer's GPU-sized model, and
# the median step time of rank 0. Needs .carry from scripts/pack_carry.sh for CLI11.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PATH="/usr/local/cuda/bin:$PATH" CUDACXX=/usr/local/cuda/bin/nvcc
nccl_root=$(python3 -c 'import nvidia, os; print(os.path.join(list(nvidia.__path__)[0], "nccl"))')
export LD_LIBRARY_PATH="$nccl_root/lib:${LD_LIBRARY_PATH:-}"

# Large enough that the first forward all-gathers gigabytes (16 blocks of hidden 2048).
gpu_trainer_model=(--hidden 2048 --heads 16 --layers 8 --vision-layers 4 --experts 2 --vocab 32000
                   --seq 256 --image-size 64 --patch 8 --batch 4 --lr 3e-4)

# build_gpu_trainer LOG TARGET...: configures build-gpu-trainer (Release) and builds the
# TARGETs, output in LOG; on failure prints LOG's end and returns 1.
build_gpu_trainer() {
  local log=$1
  shift
  local torch_prefix cli11=() generator=()
  torch_prefix=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')
  [ -f /usr/include/CLI/CLI.hpp ] || cli11=(-DCOLLWATCH_CLI11_INCLUDE_DIR="$PWD/.carry/include")
  command -v ninja >/dev/null || generator=(-G "Unix Makefiles")
  {
    cmake -S . -B build-gpu-trainer "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
      -DCOLLWATCH_PRELOAD_ONLY=ON -DCOLLWATCH_BUILD_TESTS=OFF -DCOLLWATCH_BUILD_BENCHMARKS=OFF \
      -DCOLLWATCH_NCCL_ROOT="$nccl_root" -DCOLLWATCH_TRAINER_NCCL=real -DCOLLWATCH_BUILD_GPU_PROGRAMS=ON \
      -DCMAKE_PREFIX_PATH="$torch_prefix" -DCMAKE_POLICY_VERSION_MINIMUM=3.5 "${cli11[@]}" &&
    cmake --build build-gpu-trainer -j 16 --target "$@"
  } > "$log" 2>&1 || { tail -60 "$log"; return 1; }
}

# median_rank0_step LOG FIRST: "MEDIAN COUNT" of rank 0's step times (ms) in a trainer log,
# over the steps numbered FIRST and later; nothing when there are none.
median_rank0_step() {
  awk -v first="$2" '$1 == "rank" && $2 == 0 && $3 == "step" && $4 >= first { print $8 }' "$1" | sort -n |
    awk '{ v[NR] = $1 } END { if (NR) printf "%.3f %d\n", v[int((NR + 1) / 2)], NR }'
}
