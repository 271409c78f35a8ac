"""Rank processes stuck where the stack tests expect them, with no NCCL: `stack_ranks.py N`
starts N ranks (RANK, WORLD_SIZE set); the last sleeps in late_start before its first
collective would be, the others block reading a pipe in wait_for_peers. The launcher
waits for them. Lines marked "# at: NAME" are what the tests expect the stacks to name.
"""
import os
import subprocess
import sys
import time


def wait_for_peers():
    read_end, _ = os.pipe()
    os.read(read_end, 1)  # at: wait


def late_start():
    time.sleep(600)  # at: late


def rank_main():
    if int(os.environ["RANK"]) == int(os.environ["WORLD_SIZE"]) - 1:
        late_start()  # at: late-call
    else:
        wait_for_peers()  # at: wait-call


def main():
    if "RANK" in os.environ:
        rank_main()
        return
    world = int(sys.argv[1])
    ranks = [subprocess.Popen([sys.executable, __file__],
                              env=dict(os.environ, RANK=str(rank), WORLD_SIZE=str(world)))
             for rank in range(world)]
    for rank in ranks:
        rank.wait()


if __name__ == "__main__":
    main()
