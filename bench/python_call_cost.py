"""Cost of Python call paths per NCCL call (issue 16): a Python loop calls a no-op NCCL
through collwatch's preload from a stack DEPTH frames deep, with call paths read and not
read (COLLWATCH_PYTHON_FRAMES=off), and with no preload at all, each in a fresh process,
in interleaved rounds. Prints ns per call, the median over rounds of each configuration,
and what reading call paths adds (with against without, round by round).

Usage: python3 bench/python_call_cost.py PRELOAD NOOP_NCCL [--depth 40] [--calls 200000] [--rounds 7]
  PRELOAD    libcollwatch.so
  NOOP_NCCL  libcollwatch_noop_nccl.so (bench/noop_nccl.cc)
"""
import argparse
import ctypes
import os
import statistics
import subprocess
import sys
import tempfile
import time


class UniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_char * 128)]


def loop(nccl, comm, calls):
    all_reduce = nccl.ncclAllReduce
    one = ctypes.c_size_t(1)
    started = time.perf_counter_ns()
    for _ in range(calls):
        all_reduce(None, None, one, 7, 0, comm, None)
    return (time.perf_counter_ns() - started) / calls


def at_depth(depth, nccl, comm, calls):
    if depth > 1:
        return at_depth(depth - 1, nccl, comm, calls)
    return loop(nccl, comm, calls)


def child(args):
    ctypes.CDLL(args.noop, mode=ctypes.RTLD_GLOBAL)
    nccl = ctypes.CDLL(None)  # the preload's definitions first, where one is loaded
    comm = ctypes.c_void_p()
    unique_id = UniqueId()
    nccl.ncclGetUniqueId(ctypes.byref(unique_id))
    nccl.ncclCommInitRank(ctypes.byref(comm), 1, unique_id, 0)
    at_depth(args.depth, nccl, comm, args.calls // 10)  # warm: every path interned once
    print(at_depth(args.depth, nccl, comm, args.calls))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("preload")
    parser.add_argument("noop")
    parser.add_argument("--depth", type=int, default=40)
    parser.add_argument("--calls", type=int, default=200000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    configs = {"direct": {}, "preload, no call paths": {"LD_PRELOAD": args.preload, "COLLWATCH_PYTHON_FRAMES": "off"},
               "preload, call paths": {"LD_PRELOAD": args.preload}}
    figures = {name: [] for name in configs}
    with tempfile.TemporaryDirectory() as rings:
        for _ in range(args.rounds):
            for name, extra in configs.items():
                env = dict(os.environ, COLLWATCH_RING_DIR=os.path.join(rings, "r"), **extra)
                out = subprocess.run([sys.executable, __file__, args.preload, args.noop, "--depth", str(args.depth),
                                      "--calls", str(args.calls), "--child"], env=env, capture_output=True, text=True,
                                     check=True)
                figures[name].append(float(out.stdout.split()[-1]))
    print(f"CPython {sys.version.split()[0]}, depth {args.depth}, {args.calls} calls per round, {args.rounds} rounds")
    for name, values in figures.items():
        print(f"{name:24} {statistics.median(values):8.1f} ns/call   rounds: {' '.join(f'{v:.1f}' for v in values)}")
    added = [on - off for on, off in zip(figures["preload, call paths"], figures["preload, no call paths"])]
    print(f"{'call paths add':24} {statistics.median(added):8.1f} ns/call   rounds: {' '.join(f'{v:.1f}' for v in added)}")


if __name__ == "__main__":
    main()
