"""A pipeline-parallel job (torch_job.py --job pipeline) on torch.distributed.pipelining:
a stack of MLP blocks split into one stage per rank, trained with ScheduleGPipe or
Schedule1F1B (--schedule) over --microbatches microbatches a step; or two stages a rank
(rank r holds stages r and r + world) under ScheduleInterleaved1F1B.

Scenario fewer-microbatches: from step --diverge-from-step on, the last stage's schedule
runs one microbatch less than the others' (a data loader that gives the last stage a
shorter batch): the stages' sends and receives no longer pair, and the job hangs.
"""
import torch
import torch.distributed as dist
import torch.nn as nn


class Stage(nn.Module):
    def __init__(self, hidden, layers):
        super().__init__()
        self.blocks = nn.Sequential(*[nn.Sequential(nn.Linear(hidden, hidden), nn.GELU()) for _ in range(layers)])

    def forward(self, x):
        return self.blocks(x)


def run_pipeline(args, device):
    from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe, ScheduleInterleaved1F1B

    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(rank)
    per_rank = 2 if args.schedule == "interleaved-1f1b" else 1
    stages = [PipelineStage(Stage(args.hidden, args.layers).to(device), stage_index=rank + k * world,
                            num_stages=world * per_rank, device=device) for k in range(per_rank)]
    schedules = {"gpipe": ScheduleGPipe, "1f1b": Schedule1F1B, "interleaved-1f1b": ScheduleInterleaved1F1B}

    def loss_fn(output, target):
        return (output - target).pow(2).mean()

    def schedule_of(microbatches):
        return schedules[args.schedule](stages if per_rank > 1 else stages[0], n_microbatches=microbatches,
                                        loss_fn=loss_fn)

    full = schedule_of(args.microbatches)
    short = schedule_of(args.microbatches - 1) if args.scenario == "fewer-microbatches" else full
    optimizer = torch.optim.SGD([p for stage in stages for p in stage.submod.parameters()], lr=1e-3)
    batch = 4 * args.microbatches
    for step in range(args.steps):
        diverging = args.scenario == "fewer-microbatches" and rank == world - 1 and step >= args.diverge_from_step
        schedule = short if diverging else full
        rows = batch - 4 if diverging else batch  # the shorter batch: one microbatch of 4 rows less
        x = torch.randn(rows, args.hidden, device=device)
        if rank == 0:
            schedule.step(x)
        elif rank == world - 1:
            losses = []
            schedule.step(target=torch.zeros(rows, args.hidden, device=device), losses=losses)
        else:
            schedule.step()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        print(f"rank {rank} step {step} done", flush=True)
    dist.barrier()
