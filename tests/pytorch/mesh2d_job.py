"""The 2-D mesh job of torch_job.py (--job mesh2d): tensor parallel inside data parallel
on a DeviceMesh, with a metrics communicator whose scenarios go wrong on some ranks only.
Imported by torch_job.py, which parses the arguments and initialises the process group."""

import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F


def log_loss(loss, group, dtype):
    total = loss.detach().reshape(1).to(dtype)
    dist.all_reduce(total, group=group)
    return total


def log_token_counts(tokens, group):
    counts = torch.bincount(tokens.reshape(-1) % 8, minlength=8)
    dist.all_reduce(counts, group=group)
    return counts


def evaluate(model_shard, eval_group, device):
    with torch.no_grad():
        score = model_shard(torch.ones(2, model_shard.in_features, device=device)).sum().reshape(1)
        dist.all_reduce(score, group=eval_group)
    return score


def run_mesh2d(args, device):
    from torch.distributed.device_mesh import init_device_mesh

    rank = dist.get_rank()
    world = dist.get_world_size()
    if world != 4:
        sys.exit(f"mesh2d needs 4 ranks, got {world}")
    mesh = init_device_mesh("cuda", (2, 2), mesh_dim_names=("dp", "tp"))
    dp_group, tp_group = mesh.get_group("dp"), mesh.get_group("tp")
    metrics_group = dist.new_group([0, 1, 2, 3])
    eval_group = dist.new_group([0, 1, 2])
    tp_rank = dist.get_rank(tp_group)
    torch.manual_seed(0)
    # Row-parallel: each tensor-parallel rank holds half of the input features.
    shard = nn.Linear(args.hidden // 2, args.hidden, bias=False).to(device)
    head = nn.Linear(args.hidden, 16).to(device)
    params = list(shard.parameters()) + list(head.parameters())
    for param in params:
        dist.broadcast(param.data, src=dist.get_global_rank(dp_group, 0), group=dp_group)
    optimizer = torch.optim.SGD(params, lr=1e-3)
    generator = torch.Generator(device=device).manual_seed(1 + dist.get_rank(dp_group))
    metrics_dtype = torch.bfloat16 if args.scenario == "metrics-dtype" and rank >= 2 else torch.float32
    times = []
    for step in range(args.steps):
        torch.cuda.synchronize()
        start = time.perf_counter()
        tokens = torch.randint(0, 16, (8,), device=device, generator=generator)
        features = torch.randn(8, args.hidden, device=device, generator=generator)
        local = features[:, tp_rank * (args.hidden // 2):(tp_rank + 1) * (args.hidden // 2)]
        hidden = shard(local)
        dist.all_reduce(hidden, group=tp_group)  # the row-parallel layer's sum
        loss = F.cross_entropy(head(torch.relu(hidden)), tokens)
        loss.backward()
        for param in params:  # data parallel: average the gradients
            dist.all_reduce(param.grad, group=dp_group)
            param.grad /= 2
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if not (args.scenario == "metrics-skip" and rank == 3 and step == 2):
            log_loss(loss, metrics_group, metrics_dtype)
        log_token_counts(tokens, metrics_group)
        if rank in (0, 1, 2):
            evaluate(shard, eval_group, device)
        torch.cuda.synchronize()
        times.append((time.perf_counter() - start) * 1e3)
        print(f"rank {rank} step {step} time_ms {times[-1]:.3f} loss {loss.item():.5f}", flush=True)
    dist.barrier()


# ---------------------------------------------------------------------------------------
# allreduce latency
