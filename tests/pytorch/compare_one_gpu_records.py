#!/usr/bin/env python3
"""Compares what collwatch recorded of the same jobs on real NCCL (one rank per GPU) and in
the one-GPU mode (every rank on one GPU through the CPU NCCL backend's CUDA mode), from the
rings.jsonl that check_torch_jobs.py leaves in each case's folder.

Usage: compare_one_gpu_records.py REAL_OUT ONE_GPU_OUT [CASE...]
  REAL_OUT, ONE_GPU_OUT: check_torch_jobs.py --out folders (without and with --one-gpu),
  run with the same number of ranks. CASE: the cases to compare (default: every case with
  rings in both).

Per process (named by its rank on its first communicator), per communicator in the order
the process first used them: the rank, the size and every collective and p2p call (op,
count, dtype) in order, and how many calls never completed. Prints one line per case and
exits 1 when a case differs.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_torch_jobs import ring_calls  # noqa: E402


def schedule(dump_jsonl):
    """rank -> [(rank, nranks, [(op, count, dtype)])] per communicator, and uncompleted calls."""
    by_rank, uncompleted = {}, 0
    for comms, _ring, pending in ring_calls(dump_jsonl).values():
        used = [c for c in comms.values() if c["calls"]]
        if not used:
            continue
        by_rank[used[0]["rank"]] = [(c["rank"], c["nranks"], c["calls"]) for c in used]
        uncompleted += len(pending)
    return by_rank, uncompleted


def first_difference(real, one_gpu):
    """A sentence naming the first place the two schedules differ, or "" when they agree."""
    if sorted(real) != sorted(one_gpu):
        return f"ranks {sorted(real)} on real NCCL, {sorted(one_gpu)} in the one-GPU mode"
    for rank in sorted(real):
        a, b = real[rank], one_gpu[rank]
        if len(a) != len(b):
            return f"rank {rank}: {len(a)} communicators on real NCCL, {len(b)} in the one-GPU mode"
        for index, ((ra, na, ca), (rb, nb, cb)) in enumerate(zip(a, b)):
            if (ra, na) != (rb, nb):
                return f"rank {rank} communicator {index}: rank {ra}/{na} on real NCCL, {rb}/{nb} in the one-GPU mode"
            for call, (x, y) in enumerate(zip(ca, cb)):
                if x != y:
                    return f"rank {rank} communicator {index} call {call}: {x} on real NCCL, {y} in the one-GPU mode"
            if len(ca) != len(cb):
                return f"rank {rank} communicator {index}: {len(ca)} calls on real NCCL, {len(cb)} in the one-GPU mode"
    return ""


def main():
    if len(sys.argv) < 3:
        print(__doc__.strip().splitlines()[3], file=sys.stderr)
        return 2
    real_out, one_gpu_out, cases = sys.argv[1], sys.argv[2], sys.argv[3:]
    if not cases:
        cases = sorted(c for c in os.listdir(real_out)
                       if os.path.isfile(os.path.join(real_out, c, "rings.jsonl"))
                       and os.path.isfile(os.path.join(one_gpu_out, c, "rings.jsonl")))
    failed = False
    for case in cases:
        real, real_pending = schedule(os.path.join(real_out, case, "rings.jsonl"))
        one_gpu, one_gpu_pending = schedule(os.path.join(one_gpu_out, case, "rings.jsonl"))
        difference = first_difference(real, one_gpu)
        comms = sum(len(c) for c in real.values())
        calls = sum(len(calls) for c in real.values() for _r, _n, calls in c)
        print(f"{case}: {len(real)} ranks, {comms} communicators, {calls} calls; "
              f"uncompleted {real_pending} on real NCCL, {one_gpu_pending} in the one-GPU mode: "
              + (f"DIFFER: {difference}" if difference else "equal"))
        failed = failed or bool(difference)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
