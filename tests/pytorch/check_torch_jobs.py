#!/usr/bin/env python3
"""Runs tests/pytorch/torch_job.py under `collwatch run -- torchrun` and checks what collwatch saw.

For every run, NCCL's own log (NCCL_DEBUG=INFO, subsystems INIT and COLL: one line per
communicator made and per collective or p2p call enqueued) is the independent record the
rings are compared with, process by process: each communicator's calls (op, count, dtype)
in NCCL's log appear in exactly one ring communicator with the same calls in the same
order, the same rank and the same size, and nothing else is recorded. Every recorded call
that was not captured into a CUDA graph must have completed (clean runs). Clean runs must
end with exit 0 and no finding; each failing scenario must be stopped by collwatch (exit 124)
with the expected finding kind first, long before PyTorch's watchdog (600 s).

Exit 0 when every case passed, 1 when one failed, 77 (skipped) without PyTorch, CUDA or
enough GPUs. Writes each case's logs, report and a summary under --out.

  python3 tests/pytorch/check_torch_jobs.py --collwatch PATH [--preload PATH] [--nproc N]
      [--one-gpu [--mps]] [--out DIR] [CASE...]

With --one-gpu every rank runs on the one visible GPU through the CPU NCCL backend's CUDA
mode (--mps: under a private MPS server); the backend writes no NCCL log, so the
comparison with NCCL's log is left out.
"""
import argparse
import collections
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

SKIP = 77
HERE = os.path.dirname(os.path.abspath(__file__))
JOB = os.path.join(HERE, "torch_job.py")
WATCHDOG_S = 600  # PyTorch's default collective timeout, the job's own alarm

# name: (torch_job.py arguments, expected finding kind or None for a clean run, ranks needed)
CASES = {
    "features-eager": (["--job", "features", "--init", "eager"], None, 1),
    "features-lazy": (["--job", "features", "--init", "lazy"], None, 1),
    "ddp": (["--job", "ddp", "--steps", "6"], None, 1),
    "fsdp": (["--job", "fsdp", "--steps", "6"], None, 1),
    "divergent-path": (["--job", "fsdp", "--scenario", "divergent-path"], "PATH_DIVERGENCE", 2),
    "skipped-reduce-scatter": (["--job", "fsdp", "--scenario", "skipped-reduce-scatter"],
                               "SKIPPED_REDUCE_SCATTER", 2),
    "dtype-mismatch": (["--job", "fsdp", "--scenario", "dtype-mismatch"], "SIGNATURE_MISMATCH", 2),
    "late-rank": (["--job", "fsdp", "--scenario", "late-rank", "--late-seconds", "90"], "NOT_JOINED", 2),
    "stopped-rank": (["--job", "fsdp", "--scenario", "stopped-rank"], "NOT_JOINED", 2),
    "mesh2d": (["--job", "mesh2d", "--steps", "6"], None, 4),
    "mesh2d-metrics-skip": (["--job", "mesh2d", "--scenario", "metrics-skip"], "PATH_DIVERGENCE", 4),
    "mesh2d-metrics-dtype": (["--job", "mesh2d", "--scenario", "metrics-dtype"], "SIGNATURE_MISMATCH", 4),
    "fsdp1": (["--job", "fsdp1", "--steps", "6"], None, 1),
    "fsdp1-divergent-path": (["--job", "fsdp1", "--scenario", "divergent-path"], "PATH_DIVERGENCE", 2),
    "fsdp1-skipped-reduce-scatter": (["--job", "fsdp1", "--scenario", "skipped-reduce-scatter"],
                                     "SKIPPED_REDUCE_SCATTER", 2),
    "hf-vlm": (["--job", "hf-vlm", "--steps", "6"], None, 1),
    "hf-vlm-divergent-path": (["--job", "hf-vlm", "--scenario", "divergent-path"], "PATH_DIVERGENCE", 2),
    # The ranks agree for two steps first: the schedule of those names the inserted run.
    "divergent-path-later": (["--job", "fsdp", "--scenario", "divergent-path", "--diverge-from-step", "2"],
                             "PATH_DIVERGENCE", 2),
    "hf-vlm-divergent-path-later": (["--job", "hf-vlm", "--scenario", "divergent-path", "--diverge-from-step", "2"],
                                    "PATH_DIVERGENCE", 2),
    # One call of evidence on each side (an all-gather against a reduce-scatter, the first
    # collectives): undecided, the skipped reduce-scatter given as the other reading.
    "first-op-differs": (["--job", "first-op-differs"], "OP_MISMATCH", 2),
    # Two process groups called in opposite orders. On H100s with NCCL 2.28.9 the kernels of
    # the two communicators do not run side by side even with one NCCL stream per group
    # (NCCL does not promise they would): it hangs by default, and with one hardware queue.
    "comm-order": (["--job", "comm-order", "--steps", "4"], "WAIT_CYCLE", 2),
    "comm-order-one-queue": (["--job", "comm-order", "--steps", "4"], "WAIT_CYCLE", 2),
    # Every rank sends 64 MiB before it receives, outside a batch. Two H100s or H200s
    # complete a 64 MiB send pair (measured: no hang), four do not (a WAIT_CYCLE in 10.08 s,
    # docs/gpu-validation.md); 1 GiB hangs on two.
    "send-cycle": (["--job", "send-cycle"], "WAIT_CYCLE", 4),
    "send-cycle-1gib": (["--job", "send-cycle", "--p2p-mib", "1024"], "WAIT_CYCLE", 2),
    # Pipeline parallel (torch.distributed.pipelining), clean; and the last stage switching
    # from step 2 to a schedule of one microbatch fewer: that schedule's first step runs the
    # stage set-up, whose 4-byte handshake receive meets the first stage's activations
    # (measured on 2 x H200: named with the set-up's call path, docs/findings.md).
    "pipeline-gpipe": (["--job", "pipeline", "--steps", "4"], None, 2),
    "pipeline-1f1b": (["--job", "pipeline", "--schedule", "1f1b", "--steps", "4"], None, 2),
    "pipeline-fewer-microbatches": (["--job", "pipeline", "--scenario", "fewer-microbatches",
                                     "--diverge-from-step", "2"], "SIGNATURE_MISMATCH", 2),
    "pipeline-1f1b-fewer-microbatches": (["--job", "pipeline", "--schedule", "1f1b", "--scenario",
                                          "fewer-microbatches", "--diverge-from-step", "2"], "SIGNATURE_MISMATCH", 2),
    # Two stages a rank (ScheduleInterleaved1F1B), clean and with the last rank's schedule
    # one microbatch short from step 3 (microbatches 4 and 3): two clean steps after the
    # first, whose traffic the stage set-up shares, so that a rhythm can be found.
    "pipeline-interleaved": (["--job", "pipeline", "--schedule", "interleaved-1f1b", "--steps", "4"], None, 2),
    "pipeline-interleaved-fewer-microbatches": (["--job", "pipeline", "--schedule", "interleaved-1f1b", "--scenario",
                                                 "fewer-microbatches", "--diverge-from-step", "3"],
                                                "SIGNATURE_MISMATCH", 2),
    # Rank 1 dies; torchrun stops the other (OWN_END_CASES): the report names the first.
    "first-fails": (["--job", "first-fails"], None, 2),
    # DDP's skipped gradient bucket: rank 1's batches skip a branch from step 2, so it never
    # all-reduces that bucket and fails at its next forward; torchrun stops rank 0.
    "ddp-unused-branch": (["--job", "ddp", "--scenario", "unused-branch", "--diverge-from-step", "2"],
                          "RANK_LOST", 2),
    # CUDA graph replays, seen through NCCL's profiler plugin (PLUGIN_CASES).
    "graph": (["--job", "graph", "--steps", "4"], None, 1),
    "graph-replay-skip": (["--job", "graph", "--steps", "4", "--scenario", "replay-skip"], "NOT_JOINED", 2),
}
# Cases run with `collwatch run --profiler-plugin` (NCCL reports a captured call's replays
# only to a profiler plugin), and only on GPUs: the one-GPU mode refuses captured calls.
PLUGIN_CASES = {"graph", "graph-replay-skip"}
# Divergences in the very first step. With --one-gpu every rank's host stops for about
# 1.7 s right after the first differing all-gather (measured on an H100: the first matmul
# loads cuBLAS's kernels, and the CUDA mode needs eager module loading), longer than the
# analyzer's settle window; with nothing else to decide by, the honest finding is the
# undecided one that names this kind among its readings.
FIRST_STEP_DIVERGENCES = {"divergent-path", "fsdp1-divergent-path", "hf-vlm-divergent-path"}
# Cases the job's launcher ends (no --kill-on-hang): its exit status is not 0, and the
# report's words must hold this.
OWN_END_CASES = {"first-fails": "rank 1 stopped first in NCCL", "ddp-unused-branch": "find_unused_parameters=True"}
# Cases run with these variables set for the job.
CASE_ENV = {"comm-order-one-queue": {"CUDA_DEVICE_MAX_CONNECTIONS": "1"}}
# Cases whose first finding must be undecided, giving these other readings.
UNDECIDED_READINGS = {"first-op-differs": ["SKIPPED_REDUCE_SCATTER"]}
STALL_AFTER_S = 10  # collwatch's stall threshold in the failing cases (its floor; default 30)

NCCL_DTYPES = ["int8", "uint8", "int32", "uint32", "int64", "uint64", "float16", "float32", "float64",
               "bfloat16", "float8e4m3", "float8e5m2"]
# NCCL's log names of its ops in the rings' words (ring/ring_names.cc); ncclBcast logs
# Broadcast, so the ring's bcast is compared as broadcast.
NCCL_LOG_OP = {"AllReduce": "all-reduce", "Broadcast": "broadcast", "Reduce": "reduce", "AllGather": "all-gather",
               "ReduceScatter": "reduce-scatter", "AlltoAll": "all-to-all", "Gather": "gather",
               "Scatter": "scatter", "Send": "send", "Recv": "recv"}
RING_OP = {"bcast": "broadcast"}
COLL_LINE = re.compile(r"NCCL INFO (\w+): opCount \w+ sendbuff \S+ recvbuff \S+ count (\d+) datatype (\d+) "
                       r"op \d+ root -?\d+ comm (0x[0-9a-f]+) \[nranks=(\d+)\]")
COMM_LINE = re.compile(r"NCCL INFO .*comm (0x[0-9a-f]+) rank (\d+) nRanks (\d+) ")
CALL_FNS = {"all-reduce", "broadcast", "bcast", "reduce", "all-gather", "reduce-scatter", "all-to-all", "gather",
            "scatter", "send", "recv"}


def gpu_count():
    try:
        import torch
    except ImportError:
        return -1
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def missing_module(case):
    """The Python module a case's job needs that is not installed ("" when none)."""
    if "hf-vlm" not in CASES[case][0]:
        return ""
    try:
        import transformers  # noqa: F401
    except ImportError:
        return "transformers"
    return ""


def nccl_calls(log_dir):
    """pid -> {comm pointer: {"rank", "nranks", "calls": [(op, count, dtype)]}} from NCCL's logs."""
    by_pid = {}
    for name in os.listdir(log_dir):
        match = re.fullmatch(r"nccl\..*\.(\d+)\.log", name)
        if not match:
            continue
        comms = collections.defaultdict(lambda: {"rank": None, "nranks": None, "calls": []})
        with open(os.path.join(log_dir, name), errors="replace") as log:
            for line in log:
                coll = COLL_LINE.search(line)
                if coll:
                    op, count, dtype, comm, nranks = coll.groups()
                    comms[comm]["calls"].append((NCCL_LOG_OP.get(op, op), int(count), NCCL_DTYPES[int(dtype)]))
                    comms[comm]["nranks"] = int(nranks)
                    continue
                made = COMM_LINE.search(line)
                if made:
                    comm, rank, nranks = made.groups()
                    comms[comm]["rank"], comms[comm]["nranks"] = int(rank), int(nranks)
        if any(c["calls"] for c in comms.values()):
            by_pid[int(match.group(1))] = dict(comms)
    return by_pid


def ring_calls(dump_jsonl):
    """pid -> ({comm id: {"rank", "nranks", "calls"}}, ring header, [uncompleted call names])."""
    rings, records = {}, collections.defaultdict(list)
    with open(dump_jsonl) as dump:
        for line in dump:
            item = json.loads(line)
            if item["type"] == "ring":
                rings[item["pid"]] = item
            elif item["type"] == "record":
                records[item["ring_pid"]].append(item)
    result = {}
    for pid, ring in rings.items():
        comms = collections.defaultdict(lambda: {"rank": None, "nranks": None, "calls": []})
        completed = {(r["ref_lane"], r["ref"]) for r in records[pid] if r["kind"] == "complete"}
        group_of = {}
        pending = []
        replays = 0
        for r in sorted(records[pid], key=lambda r: (r["t_ns"], r["lane"], r["index"])):
            if r["kind"] != "enter":
                continue
            if r["fn"] == "group-end":
                group_of[r["group"]] = (r["lane"], r["index"])
            if r["fn"] not in CALL_FNS:
                continue
            if "replay" in r["flags"]:  # NCCL logs a captured call once, at capture
                replays += 1
                pending.append(r)
                continue
            comm = comms[r["comm"]]
            comm["rank"], comm["nranks"] = r["rank"], r["nranks"]
            comm["calls"].append((RING_OP.get(r["fn"], r["fn"]), r["count"], r["dtype"]))
            if "captured" not in r["flags"]:
                pending.append(r)
        uncompleted = [f"{r['fn']} seq {r['seq']}" for r in pending
                       if (r["lane"], r["index"]) not in completed
                       and "completes_at_return" not in r["flags"]
                       and (r["group"] == 0 or group_of.get(r["group"]) not in completed)]
        ring = dict(ring, replays=replays)
        result[pid] = (dict(comms), ring, uncompleted)
    return result


def call_path_counts(dump_jsonl):
    """pid -> "N of M": collective and p2p enters that carry a Python call path."""
    counts = collections.defaultdict(lambda: [0, 0])
    with open(dump_jsonl) as dump:
        for line in dump:
            item = json.loads(line)
            if item["type"] == "record" and item["kind"] == "enter" and item["fn"] in CALL_FNS:
                counts[item["ring_pid"]][1] += 1
                counts[item["ring_pid"]][0] += 1 if item.get("call_path") else 0
    return {str(pid): f"{n} of {m}" for pid, (n, m) in sorted(counts.items())}


def compare(nccl, rings):
    """Problems found comparing NCCL's log with the rings, process by process."""
    problems = []
    for pid, comms in sorted(nccl.items()):
        if pid not in rings:
            problems.append(f"pid {pid}: NCCL calls but no ring")
            continue
        ring_comms = dict(rings[pid][0])
        for pointer, comm in comms.items():
            if not comm["calls"]:
                continue
            match = next((cid for cid, c in ring_comms.items() if c["calls"] == comm["calls"]), None)
            if match is None:
                problems.append(f"pid {pid} comm {pointer} (rank {comm['rank']}/{comm['nranks']}): its "
                                f"{len(comm['calls'])} calls are in no ring communicator")
                continue
            got = ring_comms.pop(match)
            if (got["rank"], got["nranks"]) != (comm["rank"], comm["nranks"]):
                problems.append(f"pid {pid} comm {pointer}: NCCL says rank {comm['rank']}/{comm['nranks']}, "
                                f"the ring {got['rank']}/{got['nranks']}")
        for cid, extra in ring_comms.items():
            problems.append(f"pid {pid}: ring communicator {cid} has {len(extra['calls'])} calls NCCL did not log")
    for pid in rings:
        if pid not in nccl and any(c["calls"] for c in rings[pid][0].values()):
            problems.append(f"pid {pid}: recorded calls but NCCL logged none")
    return problems


def run_case(name, args, work):
    job_args, expected, _ = CASES[name]
    case_dir = os.path.join(work, name)
    out_dir, ring_dir, log_dir = (os.path.join(case_dir, d) for d in ("out", "rings", "nccl"))
    os.makedirs(log_dir)
    env = dict(os.environ, NCCL_DEBUG="INFO", NCCL_DEBUG_SUBSYS="INIT,COLL",
               NCCL_DEBUG_FILE=os.path.join(log_dir, "nccl.%h.%p.log"), PYTHONUNBUFFERED="1")
    env.update(CASE_ENV.get(name, {}))
    if args.preload:
        env["COLLWATCH_PRELOAD"] = args.preload
    command = [args.collwatch, "run", "--no-dashboard", "--out", out_dir, "--ring-dir", ring_dir]
    if args.one_gpu:
        command.append("--one-gpu")
        if args.mps:
            command.append("--mps")
    if expected:
        command += ["--stall-after", str(STALL_AFTER_S)]
        if name not in OWN_END_CASES:
            command.append("--kill-on-hang")
    if name in PLUGIN_CASES:
        command.append("--profiler-plugin")
    if args.one_gpu and "features" in job_args:
        job_args = job_args + ["--no-graph"]  # the CUDA mode refuses calls captured into a graph
    command += ["--", "torchrun", "--standalone", f"--nproc-per-node={args.nproc}", JOB] + job_args
    started = time.monotonic()
    with open(os.path.join(case_dir, "job.log"), "w") as log:
        # Its own session, so that a case past its time limit is stopped whole (collwatch,
        # torchrun and the ranks).
        run = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        try:
            code = run.wait(timeout=args.case_timeout)
        except subprocess.TimeoutExpired:
            os.killpg(run.pid, signal.SIGKILL)
            code = run.wait()
    wall = time.monotonic() - started
    report = {}
    report_path = os.path.join(out_dir, "report.json")
    if os.path.exists(report_path):
        with open(report_path) as f:
            report = json.load(f)
    findings = report.get("findings", [])
    result = {"case": name, "exit": code, "wall_s": round(wall, 1),
              "findings": [f"{f['kind']} comm {f.get('comm')} seq {f.get('seq')}" for f in findings]}
    problems = []
    if wall >= args.case_timeout:
        problems.append(f"still running after {args.case_timeout:.0f} s: stopped")
    if name in OWN_END_CASES:
        report_text = ""
        if os.path.exists(os.path.join(out_dir, "report.txt")):
            with open(os.path.join(out_dir, "report.txt")) as f:
                report_text = f.read()
        result["verdict"] = next((line for line in report_text.splitlines() if line.startswith("Not healthy")), "")
        if code == 0 or OWN_END_CASES[name] not in report_text:
            problems.append(f"exit {code}; report.txt lacks '{OWN_END_CASES[name]}'")
        if expected and (not findings or findings[0]["kind"] != expected):
            problems.append(f"first finding {findings[0]['kind'] if findings else 'none'}, expected {expected}")
        elif expected:
            result.update(headline=findings[0].get("headline"), summary=findings[0].get("summary"),
                          detect_latency_s=findings[0].get("detect_latency_s"))
    elif expected:
        if code != 124:
            problems.append(f"exit {code}, expected 124 (collwatch stopped the hung job)")
        undecided_reading = (args.one_gpu and name in FIRST_STEP_DIVERGENCES and findings
                             and findings[0].get("decided") is False
                             and expected in findings[0].get("other_readings", []))
        if undecided_reading:
            result["undecided"] = f"{findings[0]['kind']}, or {expected}: undecided (one GPU, first step)"
        if not findings or (findings[0]["kind"] != expected and not undecided_reading):
            problems.append(f"first finding {findings[0]['kind'] if findings else 'none'}, expected {expected}")
        elif name in UNDECIDED_READINGS and (findings[0].get("decided") is not False
                                             or findings[0].get("other_readings") != UNDECIDED_READINGS[name]):
            problems.append(f"first finding decided={findings[0].get('decided')} with other readings "
                            f"{findings[0].get('other_readings')}, expected undecided with {UNDECIDED_READINGS[name]}")
        else:
            first = findings[0]
            result.update(headline=first.get("headline"), summary=first.get("summary"), regions=first.get("regions"),
                          decided=first.get("decided"),
                          rank_classes=first.get("rank_classes"), lagging_ranks=first.get("lagging_ranks"),
                          detect_latency_s=first.get("detect_latency_s"),
                          branch_point=(first.get("branch_point") or {}).get("text"),
                          call_paths=[{"ranks": p["ranks"], "inferred": p["inferred"],
                                       "frames": [f"{f['function']} ({os.path.basename(f['file'])}:{f['line']})"
                                                  for f in p["frames"][:12]]}
                                      for p in first.get("call_paths", [])],
                          stacks=[f"{c['ranks']}: {c['thread']} {c['where']}"
                                  for c in (first.get("stacks") or {}).get("classes", [])])
            if first["kind"] == "NOT_JOINED" and not first.get("stacks"):
                problems.append("a stall without the stacks of its ranks")
            if name in PLUGIN_CASES and "CUDA graph replays" not in first.get("headline", ""):
                problems.append("the first finding is not about the CUDA graph replays: " + first.get("headline", ""))
            if wall >= WATCHDOG_S:
                problems.append(f"named after {wall:.0f} s, not before PyTorch's {WATCHDOG_S} s watchdog")
    else:
        if code != 0:
            problems.append(f"exit {code}, expected 0")
        if findings:
            problems.append("findings on a clean run: " + "; ".join(result["findings"]))
    dump = os.path.join(case_dir, "rings.jsonl")
    with open(dump, "w") as f:
        subprocess.call([args.collwatch, "dump", "--json", ring_dir], stdout=f, stderr=subprocess.DEVNULL)
    nccl, rings = nccl_calls(log_dir), ring_calls(dump)
    result["calls"] = {str(pid): sum(len(c["calls"]) for c in comms.values()) for pid, comms in sorted(nccl.items())}
    result["communicators"] = {str(pid): len(comms) for pid, comms in sorted(nccl.items())}
    result["recorded"] = {str(pid): sum(len(c["calls"]) for c in comms.values())
                          for pid, (comms, _, _) in sorted(rings.items())}
    result["with_call_path"] = call_path_counts(dump)
    result["replays"] = {str(pid): ring["replays"] for pid, (_, ring, _) in sorted(rings.items())}
    if name in PLUGIN_CASES and not expected:
        steps = int(job_args[job_args.index("--steps") + 1])
        for pid, (_, ring, _) in sorted(rings.items()):
            if ring["replays"] != steps:
                problems.append(f"pid {pid}: {ring['replays']} CUDA graph replays recorded, {steps} made")
    if not nccl:  # FSDP2 on one GPU issues no collective: nothing recorded either, checked below
        result["note"] = "NCCL logged no collective or p2p call"
    if args.one_gpu:  # the CPU backend writes no NCCL log to compare with
        result["note"] = "one GPU: no NCCL log to compare the rings with"
    elif not expected and name not in OWN_END_CASES:  # a killed job's NCCL log is cut anywhere; the comparison needs whole ones
        problems += compare(nccl, rings)
    if not expected and name not in OWN_END_CASES:
        for pid, (_, ring, uncompleted) in sorted(rings.items()):
            if uncompleted:
                problems.append(f"pid {pid} rank {ring['rank']}: {len(uncompleted)} calls never completed, "
                                f"first {uncompleted[0]}")
            if ring["lost"] or ring["torn"] or ring["dropped"]:
                problems.append(f"pid {pid}: lost {ring['lost']} torn {ring['torn']} dropped {ring['dropped']}")
    result["problems"] = problems
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--collwatch", required=True, help="the collwatch CLI")
    parser.add_argument("--preload", help="libcollwatch.so (default: the one collwatch finds)")
    parser.add_argument("--nproc", type=int, default=0,
                        help="ranks: GPUs to use (default: all), or with --one-gpu ranks on the one GPU (default 2)")
    parser.add_argument("--one-gpu", action="store_true",
                        help="every rank on one GPU (collwatch run --one-gpu, the CPU NCCL backend's CUDA mode)")
    parser.add_argument("--mps", action="store_true",
                        help="with --one-gpu: the ranks under a private MPS server (collwatch run --mps)")
    parser.add_argument("--out", help="keep every case's files here (default: a temporary folder)")
    parser.add_argument("--case-timeout", type=float, default=300)
    parser.add_argument("cases", nargs="*", help=f"default: all of {', '.join(CASES)}")
    args = parser.parse_args()
    gpus = gpu_count()
    if gpus <= 0 or shutil.which("torchrun") is None:
        print("skipped: " + ("PyTorch is not installed" if gpus < 0 else "no CUDA GPU" if gpus == 0
                             else "torchrun not found"))
        return SKIP
    args.nproc = args.nproc or (2 if args.one_gpu else gpus)
    names = args.cases or list(CASES)
    unknown = [n for n in names if n not in CASES]
    if unknown:
        print(f"unknown case {', '.join(unknown)}; the cases are: {' '.join(CASES)}")
        return 2
    if not args.one_gpu and args.nproc > gpus:
        print(f"--nproc {args.nproc}: only {gpus} GPUs (several ranks on one GPU need --one-gpu)")
        return 2
    runnable = [n for n in names if CASES[n][2] <= args.nproc and not missing_module(n)
                and not (args.one_gpu and n in PLUGIN_CASES)]
    skipped = [n for n in names if n not in runnable]
    work = args.out or tempfile.mkdtemp(prefix="collwatch-torch-")
    os.makedirs(work, exist_ok=True)
    results = []
    for name in runnable:
        result = run_case(name, args, work)
        results.append(result)
        verdict = "ok" if not result["problems"] else "FAILED: " + "; ".join(result["problems"])
        print(f"{name}: exit {result['exit']} in {result['wall_s']} s, {sum(result['calls'].values())} NCCL calls "
              f"checked, {sum(result['recorded'].values())} recorded, findings {result['findings'] or 'none'}: "
              f"{verdict}"
              + (f" [{result['undecided']}]" if "undecided" in result else "")
              + (f" ({result['note']})" if "note" in result else ""), flush=True)
    for name in skipped:
        why = (f"needs Python module {missing_module(name)}" if missing_module(name)
               else "needs a GPU per rank (the one-GPU mode refuses calls captured into a CUDA graph)"
               if args.one_gpu and name in PLUGIN_CASES
               else f"needs {CASES[name][2]} GPUs, {args.nproc} used")
        print(f"{name}: skipped, {why}", flush=True)
    with open(os.path.join(work, "summary.json"), "w") as f:
        json.dump({"nproc": args.nproc, "one_gpu": args.one_gpu, "results": results, "skipped": skipped}, f,
                  indent=1)
    failed = [r["case"] for r in results if r["problems"]]
    if failed:
        print("failed: " + ", ".join(failed))
        return 1
    if not results:
        return SKIP
    return 0


if __name__ == "__main__":
    sys.exit(main())
