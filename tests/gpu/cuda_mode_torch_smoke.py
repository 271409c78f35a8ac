"""PyTorch through the CPU NCCL backend's CUDA mode: every rank on cuda:0, the library
preloaded in place of site-packages' libnccl.so.2 (scripts/gpu_cuda_mode.sh). Checks the
results of the collectives ProcessGroupNCCL issues and says which libnccl is mapped."""
import os

import torch
import torch.distributed as dist


def mapped_nccl():
    with open("/proc/self/maps") as maps:
        return sorted({line.split()[-1] for line in maps if "libnccl" in line})


def main():
    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    device = torch.device("cuda:0")  # one GPU for every rank
    torch.cuda.set_device(device)
    dist.init_process_group("nccl", device_id=device)
    n = 1 << 20
    x = torch.full((n,), float(rank + 1), device=device)
    dist.all_reduce(x)
    assert x[0].item() == world * (world + 1) / 2 and x[-1].item() == x[0].item()
    gathered = torch.empty(world * n, device=device)
    dist.all_gather_into_tensor(gathered, torch.full((n,), float(rank), device=device))
    assert all(gathered[r * n].item() == r for r in range(world))
    part = torch.empty(n, device=device)
    dist.reduce_scatter_tensor(part, torch.ones(world * n, device=device))
    assert part[0].item() == world
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        y = torch.ones(n, device=device)
        work = dist.all_reduce(y, async_op=True)
    work.wait()
    torch.cuda.synchronize()
    assert y[0].item() == world
    dist.barrier()
    print(f"rank {rank}: torch ok; nccl {torch.cuda.nccl.version()}; "
          f"CUDA_MODULE_LOADING={os.environ.get('CUDA_MODULE_LOADING')}; mapped {mapped_nccl()}",
          flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
