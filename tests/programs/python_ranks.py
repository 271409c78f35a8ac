"""Python ranks that call NCCL through ctypes, with no torch: the CPU NCCL backend under
collwatch's preload, from nested functions of known names and lines. Every rank runs the
vision tower and the text embedding for two steps; in the third, odd ranks have no image
and skip the vision tower: a data-dependent branch, as a VLM batch without images takes.
With `late`, every rank has an image, but the last rank sleeps before the third step
instead: a rank late to its collective (NOT_JOINED), as one stuck loading data is. With
`late-init`, the last rank sleeps before it creates its communicator, the others wait in
theirs (COMM_INIT_STALL; the late rank has made no NCCL call, so it has no ring).

Usage: python_ranks.py BACKEND WORLD DIR [late|late-init]   (starts WORLD ranks; DIR holds the unique id)
Lines marked "# at: NAME" are what the tests expect the call paths to name.
"""
import ctypes
import os
import subprocess
import sys
import time

FLOAT32 = 7  # ncclFloat32
STEPS = 3


class UniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_char * 128)]


def check(result, what):
    if result != 0:
        sys.exit(f"rank {os.environ['RANK']}: {what} failed: {result}")


def all_gather(nccl, comm, world, count):
    send = (ctypes.c_float * count)()
    recv = (ctypes.c_float * (count * world))()
    check(nccl.ncclAllGather(send, recv, ctypes.c_size_t(count), FLOAT32, comm, None), "ncclAllGather")  # at: all-gather


def vision_tower(nccl, comm, world):
    all_gather(nccl, comm, world, 424)  # at: vision-gather


def text_embed(nccl, comm, world):
    all_gather(nccl, comm, world, 384)  # at: text-gather


def forward(nccl, comm, world, has_image):
    if has_image:
        vision_tower(nccl, comm, world)  # at: branch-image
    text_embed(nccl, comm, world)  # at: branch-text


def late_start():
    time.sleep(600)  # at: late


def train(nccl, comm, world, rank, mode):
    for step in range(STEPS):
        if mode == "late" and step == 2 and rank == world - 1:
            late_start()  # at: late-call
        forward(nccl, comm, world, has_image=mode == "late" or step < 2 or rank % 2 == 0)  # at: train-step


def run_rank(backend, world, folder, mode):
    rank = int(os.environ["RANK"])
    ctypes.CDLL(backend, mode=ctypes.RTLD_GLOBAL)
    nccl = ctypes.CDLL(None)  # the process's global scope: the preload's definitions first
    unique_id = UniqueId()
    id_path = os.path.join(folder, "unique_id")
    if rank == 0:
        check(nccl.ncclGetUniqueId(ctypes.byref(unique_id)), "ncclGetUniqueId")
        with open(id_path + ".tmp", "wb") as out:
            out.write(ctypes.string_at(ctypes.byref(unique_id), ctypes.sizeof(unique_id)))
        os.rename(id_path + ".tmp", id_path)
    else:
        while not os.path.exists(id_path):
            time.sleep(0.01)
        with open(id_path, "rb") as source:
            ctypes.memmove(ctypes.byref(unique_id), source.read(), 128)
    comm = ctypes.c_void_p()
    if mode == "late-init" and rank == world - 1:
        late_start()  # at: late-init-call
    check(nccl.ncclCommInitRank(ctypes.byref(comm), world, unique_id, rank), "ncclCommInitRank")
    train(nccl, comm, world, rank, mode)  # at: run-rank
    check(nccl.ncclCommDestroy(comm), "ncclCommDestroy")


def main():
    backend, world, folder = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    mode = sys.argv[4] if len(sys.argv) > 4 else ""
    if "RANK" in os.environ:
        run_rank(backend, world, folder, mode)  # at: main
        return 0
    ranks = [subprocess.Popen([sys.executable] + sys.argv,
                              env=dict(os.environ, RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank)))
             for rank in range(world)]
    return max(rank.wait() for rank in ranks)


if __name__ == "__main__":
    sys.exit(main())  # at: module
