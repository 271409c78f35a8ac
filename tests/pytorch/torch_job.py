#!/usr/bin/env python3
"""Unmodified-PyTorch programs that collwatch is checked against on GPU machines.

Run each with torchrun (one process per GPU), plain or under `collwatch run`:

  torchrun --nproc-per-node=N tests/pytorch/torch_job.py --job JOB [--scenario S]

Jobs:
  features   every way PyTorch reaches NCCL that collwatch must record: the default
             group (ncclCommInitRankConfig with an explicit config), created eagerly
             (--init eager, device_id) or lazily at the first collective (--init lazy),
             subgroups (new_group: split communicators when eager), every collective,
             coalesced collectives, batched and single p2p, and a section captured into a
             CUDA graph and replayed. Results are checked on the host.
  ddp        a small transformer under DistributedDataParallel; scenarios clean,
             divergent-path (odd ranks all-reduce a metric no even rank does),
             dtype-mismatch (rank 1's replica in bf16: its gradient buckets differ),
             late-rank, stopped-rank, and unused-branch (odd ranks' batches skip the
             image projector from --diverge-from-step on: DDP's unused parameter).
  fsdp       a small vision-language model with a mixture of experts under FSDP2
             (fully_shard), in the scenarios below.
  fsdp1      the same model under FSDP1 (FullyShardedDataParallel, one unit per block,
             expert and the vision tower), in the scenarios below.
  hf-vlm     a Hugging Face transformers LLaVA (CLIP vision tower, Llama decoder) built
             from a small config with random weights, vision tower frozen, under FSDP2
             (one unit per encoder and decoder layer); scenarios clean and divergent-path.
  allreduce  small all-reduce latency: a loop of 1-element all-reduces, each waited for.
  graph      an all-reduce captured into a CUDA graph (as torch.compile's reduce-overhead
             mode or a graphed decoder does) and replayed --steps times, then a barrier;
             scenario replay-skip: the last rank replays it once less (a data-dependent
             early stop on one rank), so the others' last replay waits for it forever.

Scenarios (fsdp, fsdp1; hf-vlm: clean and divergent-path; `clean` elsewhere), each a PyTorch rendition of a bug collwatch names:
  clean                    every rank takes the same path.
  divergent-path           odd ranks get text-only batches and skip the vision tower, so
                           only even ranks all-gather it (PATH_DIVERGENCE); from step
                           --diverge-from-step on (default 0: the first).
  skipped-reduce-scatter   on rank 1 no token reaches expert 1: its output is dropped, its
                           parameters get no gradient and FSDP skips their reduce-scatter
                           (SKIPPED_REDUCE_SCATTER).
  dtype-mismatch           rank 1 keeps its parameters in bf16, the others in fp32
                           (SIGNATURE_MISMATCH).
  late-rank                rank 1 reaches the first forward --late-seconds late (NOT_JOINED).
  stopped-rank             rank 1 stops itself (SIGSTOP, as Ctrl-Z or a debugger would) at its
                           first forward: a hung rank (NOT_JOINED, the process stopped).

mesh2d (4 ranks): 2-D parallelism on a device mesh, data-parallel 2 x tensor-parallel 2
(communicators of 2: tp {0,1} {2,3}, dp {0,2} {1,3}), with a metrics group of all 4
(new_group, apart from the world) and an evaluation group of 3 (ranks 0-2). Scenarios
that break the metrics group only, the other communicators staying healthy:
  metrics-skip             rank 3 skips logging its loss in step 2 (3 ranks against 1).
  metrics-dtype            ranks 2,3 (one tensor-parallel group) log in bf16, ranks 0,1 in
                           fp32 (2 ranks against 2).

Each rank prints `rank R step S time_ms T loss L`; rank 0 ends with `median_step_ms M`
(steps after --warmup), or for `allreduce`, `allreduce_us_median M`.
"""
import argparse
import datetime
import os
import signal
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

from mesh2d_job import run_mesh2d
from pipeline_job import run_pipeline
from wait_jobs import run_comm_order, run_first_fails, run_send_cycle


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--job", required=True,
                        choices=["features", "ddp", "fsdp", "fsdp1", "hf-vlm", "allreduce", "mesh2d", "graph",
                                 "first-op-differs", "comm-order", "send-cycle", "first-fails", "pipeline"])
    parser.add_argument("--scenario", default="clean",
                        choices=["clean", "divergent-path", "skipped-reduce-scatter", "dtype-mismatch",
                                 "late-rank", "stopped-rank", "metrics-skip", "metrics-dtype", "replay-skip",
                                 "unused-branch", "fewer-microbatches"])
    parser.add_argument("--init", default="eager", choices=["eager", "lazy"],
                        help="create the default communicator at init (device_id) or at its first collective")
    parser.add_argument("--no-graph", action="store_true",
                        help="features: leave out the section captured into a CUDA graph (the CPU NCCL "
                             "backend's CUDA mode refuses captured calls)")
    parser.add_argument("--diverge-from-step", type=int, default=0,
                        help="divergent-path, unused-branch: the first step with text-only batches (earlier "
                             "steps agree)")
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--warmup", type=int, default=2, help="steps left out of the median")
    parser.add_argument("--iterations", type=int, default=2000, help="allreduce: calls timed")
    parser.add_argument("--hidden", type=int, default=1024)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--late-seconds", type=float, default=60.0)
    parser.add_argument("--p2p-mib", type=int, default=64, help="send-cycle: MiB each rank sends")
    parser.add_argument("--schedule", default="gpipe", choices=["gpipe", "1f1b", "interleaved-1f1b"],
                        help="pipeline: its schedule (interleaved-1f1b: two stages a rank)")
    parser.add_argument("--microbatches", type=int, default=4, help="pipeline: microbatches a step")
    parser.add_argument("--hold-at-step", type=int, default=0,
                        help="late-rank, stopped-rank: the step whose forward rank 1 is late to or stops at")
    parser.add_argument("--timeout", type=float, default=600.0,
                        help="PyTorch's collective timeout in seconds (its watchdog)")
    parser.add_argument("--flight-recorder-dump", metavar="PREFIX",
                        help="at the end, each rank writes its Flight Recorder as PyTorch dumps it, "
                             "to PREFIX<rank> (pickle) and PREFIX<rank>.json")
    return parser.parse_args()


def init(args):
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local_rank)
    device = torch.device("cuda", local_rank)
    kwargs = {"backend": "nccl", "timeout": datetime.timedelta(seconds=args.timeout)}
    if args.init == "eager":
        kwargs["device_id"] = device
    if args.job == "features":
        # A non-default NCCL config: PyTorch passes it to ncclCommInitRankConfig.
        options = dist.ProcessGroupNCCL.Options()
        options.is_high_priority_stream = True
        if hasattr(options, "config") and hasattr(options.config, "max_ctas"):
            options.config.max_ctas = 16
        kwargs["pg_options"] = options
    dist.init_process_group(**kwargs)
    return device


def train_timed(args, optimizer, forward_loss):
    """Runs args.steps optimizer steps on `forward_loss()` (data and forward), each timed from
    a synchronized start to a synchronized end; prints every step, and on rank 0 the median
    of the steps after args.warmup. A late or stopped rank is held back before its step."""
    rank = dist.get_rank()
    times = []
    for step in range(args.steps):
        hold_back(args, rank, step)
        torch.cuda.synchronize()
        start = time.perf_counter()
        loss = forward_loss()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        times.append((time.perf_counter() - start) * 1e3)
        print(f"rank {rank} step {step} time_ms {times[-1]:.3f} loss {loss.item():.5f}", flush=True)
    kept = times[args.warmup:] or times
    if rank == 0 and kept:
        print(f"median_step_ms {statistics.median(kept):.3f}", flush=True)


class TextOnlyBatches:
    """Whether this rank's batch is text-only, call by call (one call per step): in the
    divergent-path scenario odd ranks get text-only batches from --diverge-from-step on."""

    def __init__(self, args, rank):
        self.diverging = args.scenario == "divergent-path" and rank % 2 == 1
        self.from_step = args.diverge_from_step
        self.step = -1

    def __call__(self):
        self.step += 1
        return self.diverging and self.step >= self.from_step


def expect(condition, what):
    if not condition:
        raise SystemExit(f"rank {dist.get_rank()}: wrong result: {what}")


# ---------------------------------------------------------------------------------------
# features


def run_features(args, device):
    rank, world = dist.get_rank(), dist.get_world_size()
    ones = torch.ones(1024, device=device)

    x = ones * (rank + 1)
    dist.all_reduce(x)
    expect(torch.all(x == world * (world + 1) / 2), "all_reduce")
    x = torch.full((4096,), float(rank), device=device)
    dist.broadcast(x, src=0)
    expect(torch.all(x == 0), "broadcast")
    x = ones * (rank + 1)
    dist.reduce(x, dst=world - 1, op=dist.ReduceOp.MAX)
    if rank == world - 1:
        expect(torch.all(x == world), "reduce")
    gathered = torch.empty(world * 1024, device=device)
    dist.all_gather_into_tensor(gathered, ones * rank)
    expect(torch.equal(gathered.view(world, 1024)[:, 0].cpu(), torch.arange(world, dtype=torch.float32)),
           "all_gather_into_tensor")
    shard = torch.empty(1024, device=device)
    dist.reduce_scatter_tensor(shard, torch.ones(world * 1024, device=device))
    expect(torch.all(shard == world), "reduce_scatter_tensor")
    exchanged = torch.empty(world * 16, device=device)
    dist.all_to_all_single(exchanged, torch.full((world * 16,), float(rank), device=device))
    expect(torch.equal(exchanged.view(world, 16)[:, 0].cpu(), torch.arange(world, dtype=torch.float32)),
           "all_to_all_single")
    pieces = [torch.empty(256, device=device) for _ in range(world)]
    dist.all_gather(pieces, torch.full((256,), float(rank), device=device))
    expect(all(torch.all(p == i) for i, p in enumerate(pieces)), "all_gather")
    bucket = [torch.empty(128, device=device) for _ in range(world)] if rank == 0 else None
    dist.gather(torch.full((128,), float(rank), device=device), bucket, dst=0)
    if rank == 0:
        expect(all(torch.all(b == i) for i, b in enumerate(bucket)), "gather")
    piece = torch.empty(128, device=device)
    sources = [torch.full((128,), float(i), device=device) for i in range(world)] if rank == 0 else None
    dist.scatter(piece, sources, src=0)
    expect(torch.all(piece == rank), "scatter")
    dist.barrier()

    # Subgroups: even and odd ranks (split communicators when the parent was made eagerly),
    # and one of every rank whose communicator is made at its first collective.
    evens = dist.new_group([r for r in range(world) if r % 2 == 0])
    odds = dist.new_group([r for r in range(world) if r % 2 == 1]) if world > 1 else None
    mine = evens if rank % 2 == 0 else odds
    x = ones.clone()
    dist.all_reduce(x, group=mine)
    expect(torch.all(x == dist.get_world_size(mine)), "subgroup all_reduce")
    everyone = dist.new_group(list(range(world)))
    x = ones.clone()
    dist.all_reduce(x, group=everyone)
    expect(torch.all(x == world), "second group all_reduce")

    # Coalesced collectives: one NCCL group of several all-reduces, then of all-gathers.
    tensors = [ones * (i + 1) for i in range(4)]
    with dist._coalescing_manager(device=device, async_ops=True) as manager:
        for t in tensors:
            dist.all_reduce(t)
    manager.wait()
    expect(all(torch.all(t == world * (i + 1)) for i, t in enumerate(tensors)), "coalesced all_reduce")
    outputs = [torch.empty(world * 512, device=device) for _ in range(3)]
    with dist._coalescing_manager(device=device, async_ops=True) as manager:
        for out in outputs:
            dist.all_gather_into_tensor(out, torch.full((512,), float(rank), device=device))
    manager.wait()

    # Point-to-point: a batched ring exchange, then a single send/recv pair.
    if world > 1:
        to_next = torch.full((2048,), float(rank), device=device)
        from_prev = torch.empty(2048, device=device)
        ops = [dist.P2POp(dist.isend, to_next, (rank + 1) % world),
               dist.P2POp(dist.irecv, from_prev, (rank - 1) % world)]
        for request in dist.batch_isend_irecv(ops):
            request.wait()
        expect(torch.all(from_prev == (rank - 1) % world), "batch_isend_irecv")
        if rank == 0:
            dist.send(torch.full((64,), 7.0, device=device), dst=1)
        elif rank == 1:
            got = torch.empty(64, device=device)
            dist.recv(got, src=0)
            expect(torch.all(got == 7), "send/recv")

    if args.no_graph:
        dist.barrier()
        if rank == 0:
            print("features: every result checked (no CUDA graph)", flush=True)
        return
    # A section captured into a CUDA graph, then replayed: NCCL sees the call once, at capture.
    static, graph = captured_all_reduce(8192, device)
    for _ in range(3):
        static.fill_(1.0)
        graph.replay()
    torch.cuda.synchronize()
    expect(torch.all(static == world), "captured all_reduce replay")
    del graph
    dist.barrier()
    if rank == 0:
        print("features: every result checked", flush=True)


# ---------------------------------------------------------------------------------------
# ddp


class Block(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.norm = nn.LayerNorm(hidden)
        self.attention = nn.MultiheadAttention(hidden, 8, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(hidden, 4 * hidden), nn.GELU(), nn.Linear(4 * hidden, hidden))

    def forward(self, x):
        h = self.norm(x)
        x = x + self.attention(h, h, h, need_weights=False)[0]
        return x + self.mlp(self.norm(x))


def hold_back(args, rank, step):
    """late-rank and stopped-rank: rank 1 comes late to the forward of step --hold-at-step,
    or stops there."""
    if step != args.hold_at_step:
        return
    if args.scenario == "late-rank" and rank == 1:
        print(f"rank {rank}: late by {args.late_seconds} s (data loader stall)", flush=True)
        time.sleep(args.late_seconds)
    if args.scenario == "stopped-rank" and rank == 1:
        print(f"rank {rank}: stopping itself (SIGSTOP)", flush=True)
        os.kill(os.getpid(), signal.SIGSTOP)


class WithImageProjector(nn.Module):
    """The blocks, then an image projector that only image batches go through: a branch
    whose parameters get no gradient on a text-only batch."""

    def __init__(self, hidden, layers):
        super().__init__()
        self.blocks = nn.Sequential(*[Block(hidden) for _ in range(layers)])
        self.image_projector = nn.Linear(hidden, hidden)

    def forward(self, x, has_image):
        h = self.blocks(x)
        return h + self.image_projector(h) if has_image else h


def run_ddp(args, device):
    rank = dist.get_rank()
    torch.manual_seed(0)
    dtype = torch.bfloat16 if args.scenario == "dtype-mismatch" and rank == 1 else torch.float32
    text_only = TextOnlyBatches(args, rank)
    if args.scenario == "unused-branch":
        # Odd ranks get text-only batches from --diverge-from-step on: the projector's
        # gradient bucket is never ready there, and DDP (find_unused_parameters=False) raises
        # at their next forward.
        text_only.diverging = rank % 2 == 1
        module = WithImageProjector(args.hidden, args.layers)
    else:
        module = nn.Sequential(*[Block(args.hidden) for _ in range(args.layers)])
    model = nn.parallel.DistributedDataParallel(module.to(device).to(dtype), device_ids=[device.index])
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    generator = torch.Generator(device=device).manual_seed(1 + rank)

    def forward_loss():
        x = torch.randn(8, 128, args.hidden, device=device, generator=generator, dtype=dtype)
        if args.scenario == "unused-branch":
            return model(x, has_image=not text_only()).float().pow(2).mean()
        loss = model(x).float().pow(2).mean()
        if text_only():  # this rank's logging averages a metric the others never send
            metric = loss.detach().clone()
            dist.all_reduce(metric)
        return loss

    train_timed(args, optimizer, forward_loss)


# ---------------------------------------------------------------------------------------
# fsdp: a vision-language model with experts, sharded by FSDP2


class Expert(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.up = nn.Linear(hidden, 2 * hidden)
        self.down = nn.Linear(2 * hidden, hidden)

    def forward(self, x):
        return self.down(F.gelu(self.up(x)))


class VisionLanguageModel(nn.Module):
    def __init__(self, hidden, layers, vocab=8192, experts=2):
        super().__init__()
        self.vision = nn.Sequential(nn.Linear(3 * 16 * 16, hidden), Block(hidden), Block(hidden))
        self.embed = nn.Embedding(vocab, hidden)
        self.blocks = nn.ModuleList(Block(hidden) for _ in range(layers))
        self.router = nn.Linear(hidden, experts)
        self.experts = nn.ModuleList(Expert(hidden) for _ in range(experts))
        self.head = nn.Linear(hidden, vocab)

    def forward(self, tokens, patches, starve_expert=None):
        x = self.embed(tokens)
        if patches is not None:  # image batches put their patch features in front
            x = torch.cat([self.vision(patches), x], dim=1)
        for block in self.blocks:
            x = block(x)
        choice = self.router(x).argmax(dim=-1)
        if starve_expert is not None:  # the data routed nothing there on this rank
            choice = torch.where(choice == starve_expert, 1 - starve_expert, choice)
        mixed = torch.zeros_like(x)
        for index, expert in enumerate(self.experts):
            out = expert(x)  # FSDP gathers every expert; a token-free one's output is dropped
            picked = (choice == index).unsqueeze(-1)
            if index == starve_expert:
                continue
            mixed = mixed + out * picked
        return self.head(x + mixed)


def scenario_vlm(args, rank):
    """This rank's VisionLanguageModel (on the host) and its dtype: bf16 on rank 1 of the
    dtype-mismatch scenario, fp32 elsewhere."""
    torch.manual_seed(0)
    model = VisionLanguageModel(args.hidden, args.layers)
    if args.scenario == "dtype-mismatch" and rank == 1:
        model = model.to(torch.bfloat16)  # this rank's copy of the config said bf16
    return model, next(model.parameters()).dtype


def train_vlm(args, device, model, dtype):
    """Trains a sharded VisionLanguageModel in the fsdp scenarios (text-only batches, a
    starved expert, a late rank)."""
    rank = dist.get_rank()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    generator = torch.Generator(device=device).manual_seed(1 + rank)
    text_only = TextOnlyBatches(args, rank)
    starve = 1 if args.scenario == "skipped-reduce-scatter" and rank == 1 else None

    def forward_loss():
        tokens = torch.randint(0, 8192, (4, 256), device=device, generator=generator)
        patches = None if text_only() else torch.randn(4, 64, 3 * 16 * 16, device=device, generator=generator,
                                                     dtype=dtype)
        logits = model(tokens, patches, starve)
        return F.cross_entropy(logits[:, -tokens.shape[1]:].float().reshape(-1, logits.shape[-1]),
                               tokens.reshape(-1))

    train_timed(args, optimizer, forward_loss)


def run_fsdp(args, device):
    from torch.distributed.fsdp import fully_shard, MixedPrecisionPolicy

    model, dtype = scenario_vlm(args, dist.get_rank())
    model = model.to(device)
    policy = MixedPrecisionPolicy(param_dtype=dtype, reduce_dtype=dtype)
    fully_shard(model.vision, mp_policy=policy)
    for block in model.blocks:
        fully_shard(block, mp_policy=policy)
    for expert in model.experts:
        # Kept gathered after forward: backward needs no all-gather, only the reduce-scatter.
        fully_shard(expert, mp_policy=policy, reshard_after_forward=False)
    fully_shard(model, mp_policy=policy)
    train_vlm(args, device, model, dtype)


def run_fsdp1(args, device):
    import functools
    from torch.distributed.fsdp import FullyShardedDataParallel, MixedPrecision
    from torch.distributed.fsdp.wrap import lambda_auto_wrap_policy

    model, dtype = scenario_vlm(args, dist.get_rank())
    # The same units as run_fsdp: the vision tower whole, each trunk block, each expert.
    units = {id(model.vision)} | {id(block) for block in model.blocks} | {id(expert) for expert in model.experts}
    policy = functools.partial(lambda_auto_wrap_policy, lambda_fn=lambda module: id(module) in units)
    model = FullyShardedDataParallel(model, auto_wrap_policy=policy, device_id=device, use_orig_params=True,
                                     mixed_precision=MixedPrecision(param_dtype=dtype, reduce_dtype=dtype))
    train_vlm(args, device, model, dtype)


# ---------------------------------------------------------------------------------------
# hf-vlm: a transformers LLaVA with random weights, as a user's VLM fine-tuning job runs it


def run_hf_vlm(args, device):
    from torch.distributed.fsdp import fully_shard
    from transformers import CLIPVisionConfig, LlamaConfig, LlavaConfig, LlavaForConditionalGeneration

    if args.scenario not in ("clean", "divergent-path"):
        raise SystemExit(f"hf-vlm: scenario {args.scenario} is not written for this job")
    rank = dist.get_rank()
    vocab, text_tokens = 4096, 256
    image_token = vocab - 1
    vision_config = CLIPVisionConfig(hidden_size=256, intermediate_size=1024, num_hidden_layers=args.layers,
                                     num_attention_heads=4, image_size=64, patch_size=8, projection_dim=256)
    text_config = LlamaConfig(hidden_size=args.hidden, intermediate_size=2 * args.hidden,
                              num_hidden_layers=args.layers, num_attention_heads=8, num_key_value_heads=8,
                              vocab_size=vocab, max_position_embeddings=2048)
    config = LlavaConfig(vision_config=vision_config, text_config=text_config, image_token_index=image_token,
                         vision_feature_select_strategy="default", vision_feature_layer=-2)
    config.image_token_id = image_token  # the name newer transformers read
    torch.manual_seed(0)
    model = LlavaForConditionalGeneration(config).to(device)
    # Its image features: one per patch, the CLS token dropped ("default" strategy).
    image_features = (vision_config.image_size // vision_config.patch_size) ** 2
    vision_tower = next(module for name, module in model.named_modules() if name.endswith("vision_tower"))
    for parameter in vision_tower.parameters():
        parameter.requires_grad_(False)  # a frozen vision tower, as LLaVA fine-tuning keeps it
    # One unit per encoder and decoder layer; the vision tower's embeddings and norms stay
    # in the root unit. (Sharding the whole CLIPVisionModel loses its hidden states in
    # transformers 5: LLaVA then fails reading them.)
    for module in model.modules():
        if type(module).__name__ in ("CLIPEncoderLayer", "LlamaDecoderLayer"):
            fully_shard(module)
    fully_shard(model)
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)
    generator = torch.Generator(device=device).manual_seed(1 + rank)
    text_only = TextOnlyBatches(args, rank)

    def forward_loss():
        text = torch.randint(0, vocab - 1, (2, text_tokens), device=device, generator=generator)
        if text_only():
            logits = model(input_ids=text).logits
        else:
            image_slots = torch.full((2, image_features), image_token, device=device, dtype=text.dtype)
            pixels = torch.randn(2, 3, vision_config.image_size, vision_config.image_size, device=device,
                                 generator=generator)
            logits = model(input_ids=torch.cat([image_slots, text], dim=1), pixel_values=pixels).logits
        return F.cross_entropy(logits[:, -text_tokens:].float().reshape(-1, vocab), text.reshape(-1))

    train_timed(args, optimizer, forward_loss)


# ---------------------------------------------------------------------------------------
# mesh2d: tensor parallel inside data parallel, on subgroups of different sizes


def captured_all_reduce(numel, device):
    """A tensor of `numel` ones and a CUDA graph holding an all-reduce of it, warmed up
    outside the capture on a side stream, as torch.cuda.graph requires."""
    static = torch.ones(numel, device=device)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            dist.all_reduce(static)
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        dist.all_reduce(static)
    return static, graph


def run_graph(args, device):
    rank, world = dist.get_rank(), dist.get_world_size()
    static, graph = captured_all_reduce(4096, device)
    replays = args.steps - (1 if args.scenario == "replay-skip" and rank == world - 1 else 0)
    for step in range(replays):
        static.fill_(1.0)
        graph.replay()
        torch.cuda.synchronize()
        expect(torch.all(static == world), f"replay {step}")
        print(f"rank {rank} replay {step} done", flush=True)
    dist.barrier()
    del graph
    if rank == 0:
        print(f"graph: {replays} replays checked", flush=True)


def run_allreduce(args, device):
    x = torch.ones(1, device=device)
    for _ in range(50):
        dist.all_reduce(x)
    torch.cuda.synchronize()
    samples = []
    for _ in range(args.iterations):
        start = time.perf_counter()
        dist.all_reduce(x)
        torch.cuda.synchronize()
        samples.append((time.perf_counter() - start) * 1e6)
    if dist.get_rank() == 0:
        print(f"allreduce_us_median {statistics.median(samples):.3f} "
              f"p10 {sorted(samples)[len(samples) // 10]:.3f} calls {len(samples)}", flush=True)


def run_first_op_differs(args, device):
    """PyTorch's own desync case: the default group's first collectives are an all-gather on
    rank 0 and a reduce-scatter on rank 1, and nothing follows (the job hangs in them)."""
    world = dist.get_world_size()
    shard = torch.ones(1024, device=device)
    full = torch.zeros(1024 * world, device=device)
    if dist.get_rank() == 0:
        dist.all_gather_into_tensor(full, shard)
    else:
        dist.reduce_scatter_tensor(shard, full)
    torch.cuda.synchronize()


def write_flight_recorder(prefix, rank):
    """The Flight Recorder as PyTorch dumps it on a timeout (pickle), and its JSON form."""
    from torch._C._distributed_c10d import _dump_nccl_trace, _dump_nccl_trace_json
    torch.cuda.synchronize()
    with open(f"{prefix}{rank}", "wb") as f:
        f.write(_dump_nccl_trace())
    json_form = _dump_nccl_trace_json()  # bytes or str, by version
    with open(f"{prefix}{rank}.json", "wb") as f:
        f.write(json_form if isinstance(json_form, bytes) else json_form.encode())


def main():
    args = parse_args()
    device = init(args)
    jobs = {"features": run_features, "ddp": run_ddp, "fsdp": run_fsdp, "fsdp1": run_fsdp1, "hf-vlm": run_hf_vlm,
            "allreduce": run_allreduce, "mesh2d": run_mesh2d, "graph": run_graph,
            "first-op-differs": run_first_op_differs, "comm-order": run_comm_order, "send-cycle": run_send_cycle,
            "first-fails": run_first_fails, "pipeline": run_pipeline}
    jobs[args.job](args, device)
    if args.flight_recorder_dump:
        write_flight_recorder(args.flight_recorder_dump, dist.get_rank())
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
