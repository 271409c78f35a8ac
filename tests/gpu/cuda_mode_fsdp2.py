"""A small FSDP2 job through the CPU NCCL backend's CUDA mode: every rank on cuda:0, the
same data on every rank, so the loss of every step must equal the 1-rank run's (gradients
averaged over identical copies). Prints one line per rank: losses and the median step
time. Run under torchrun with the library preloaded (scripts/gpu_cuda_mode.sh)."""
import faulthandler
import os
import statistics
import time

import torch
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard


def main():
    # A hang prints every thread's stack instead of waiting for an outer timeout.
    faulthandler.dump_traceback_later(float(os.environ.get("FSDP2_STACKS_AFTER_S", "600")), exit=True)
    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    device = torch.device("cuda:0")
    torch.cuda.set_device(device)
    dist.init_process_group("nccl", device_id=device)
    torch.manual_seed(0)
    width, depth, batch = 2048, 8, 64
    layers = [torch.nn.Sequential(torch.nn.Linear(width, width), torch.nn.ReLU())
              for _ in range(depth)]
    model = torch.nn.Sequential(*layers).to(device)
    for layer in model:
        fully_shard(layer)
    fully_shard(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    generator = torch.Generator(device=device).manual_seed(1)
    losses, times = [], []
    for step in range(20):
        x = torch.randn(batch, width, device=device, generator=generator)
        torch.cuda.synchronize()
        start = time.perf_counter()
        loss = model(x).square().mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
        losses.append(loss.item())
    dist.barrier()
    step_ms = statistics.median(times[5:]) * 1e3
    shown = " ".join(f"{v:.6f}" for v in losses[::4])
    print(f"fsdp2 world {world} rank {rank}: median step {step_ms:.2f} ms; losses {shown} "
          f"last {losses[-1]:.6f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
