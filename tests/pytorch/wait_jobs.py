"""Jobs whose ranks wait for each other across process groups or point-to-point pairs
(torch_job.py --job comm-order | send-cycle), for collwatch's WAIT_CYCLE and
ORDER_INVERSION findings on real NCCL, and one whose ranks all die (--job first-fails).

comm-order: two process groups over the same ranks (as a tensor-parallel and a
data-parallel group that happen to share them), used in one order for two steps, then
rank 0 all-reduces on the first group and then on the second while the other ranks do the
reverse. NCCL does not promise that two communicators' kernels run side by side; where
they do, the job gets through (ORDER_INVERSION), where they do not (measured: H100s,
NCCL 2.28.9, with and without CUDA_DEVICE_MAX_CONNECTIONS=1) it hangs (WAIT_CYCLE).

send-cycle: every rank sends --p2p-mib MiB (default 64) to the next rank before it receives from the previous
one, outside a batch: a send of that size waits for its receive, so the sends wait for
each other in a cycle.

first-fails: rank 1 exits with 3 after two all-reduces; the others wait in the third
until torchrun, seeing a worker fail, stops them.
"""
import os
import sys

import torch
import torch.distributed as dist


def run_comm_order(args, device):
    world = dist.get_world_size()
    rank = dist.get_rank()
    first = dist.new_group(list(range(world)))
    second = dist.new_group(list(range(world)))
    tensor = torch.ones(1 << 20, device=device)
    for _ in range(2):  # one order on every rank: both communicators are made in it
        dist.all_reduce(tensor, group=first)
        dist.all_reduce(tensor, group=second)
    torch.cuda.synchronize()
    for _ in range(max(1, args.steps - 2)):
        if rank == 0:
            dist.all_reduce(tensor, group=first)
            dist.all_reduce(tensor, group=second)
        else:
            dist.all_reduce(tensor, group=second)
            dist.all_reduce(tensor, group=first)
        torch.cuda.synchronize()
    dist.barrier()


def run_send_cycle(args, device):
    world = dist.get_world_size()
    rank = dist.get_rank()
    nxt, prev = (rank + 1) % world, (rank + world - 1) % world
    out = torch.full((args.p2p_mib << 18,), float(rank), device=device)  # float32: 2^18 a MiB
    into = torch.zeros_like(out)
    # One exchange as it should be (batched): the pair's communicator is made here.
    for work in dist.batch_isend_irecv([dist.P2POp(dist.isend, out, nxt), dist.P2POp(dist.irecv, into, prev)]):
        work.wait()
    torch.cuda.synchronize()
    dist.send(out, nxt)
    dist.recv(into, prev)
    torch.cuda.synchronize()


def run_first_fails(args, device):
    tensor = torch.ones(1024, device=device)
    for _ in range(2):
        dist.all_reduce(tensor)
    torch.cuda.synchronize()
    if dist.get_rank() == 1:
        sys.stdout.flush()
        os._exit(3)  # as a crash would: no teardown of the process group
    dist.all_reduce(tensor)
    torch.cuda.synchronize()
