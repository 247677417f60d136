#!/usr/bin/env python3
"""torch_dist.py: real torch.distributed under tprun, with and without libtp in the same process.

Run by hand (not part of make check), from the build directory:
    tprun -n 2 python3 tests/gpu/torch_dist.py gloo
    tprun -n 2 python3 tests/gpu/torch_dist.py gloo --libtp before
    tprun -n 2 python3 tests/gpu/torch_dist.py nccl --libtp after
Each rank calls init_process_group(BACKEND, init_method="env://") (rank 0's TCPStore on MASTER_ADDR:MASTER_PORT),
all-reduces its rank + 1 and checks the sum. --libtp before|after also loads libtp with ctypes and calls tp_init
before or after init_process_group and checks a tp_all_reduce, with libtp's bootstrap and torch's store alive at
once; tp_finalize comes after destroy_process_group. libtp is TORCH_DIST_LIBTP, else .libs/libtp.so of this build, else
libtp.so from the loader's path. Prints "torch_dist rank R: ok ..." and exits 0; 77 when torch (or, for nccl, CUDA
with a GPU per local rank) is missing; 1 on a failure.
"""
import argparse
import ctypes
import os
import sys

SKIP = 77
TP_I64, TP_SUM = 6, 0


def say(msg):
    print("torch_dist rank %s: %s" % (os.environ.get("RANK", "?"), msg), flush=True)


def load_libtp():
    here = os.path.dirname(os.path.abspath(__file__))
    for path in (os.environ.get("TORCH_DIST_LIBTP"), os.path.join(here, "..", "..", ".libs", "libtp.so"), "libtp.so"):
        if not path:
            continue
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        lib.tp_init.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p)]
        lib.tp_finalize.argtypes = [ctypes.c_void_p]
        lib.tp_status_string.restype = ctypes.c_char_p
        lib.tp_all_reduce.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t,
                                      ctypes.c_int, ctypes.c_int, ctypes.c_void_p]
        return lib, path
    say("FAIL: cannot load libtp (set TORCH_DIST_LIBTP to its path)")
    sys.exit(1)


def tp_check(lib, status, what):
    if status != 0:
        say("FAIL: %s: %s" % (what, lib.tp_status_string(status).decode()))
        sys.exit(1)


def libtp_start(lib, rank, world):
    comm = ctypes.c_void_p()
    tp_check(lib, lib.tp_init(None, ctypes.byref(comm)), "tp_init")
    send, recv = ctypes.c_int64(rank + 1), ctypes.c_int64(0)
    tp_check(lib, lib.tp_all_reduce(comm, ctypes.byref(send), ctypes.byref(recv), 1, TP_I64, TP_SUM, None),
             "tp_all_reduce")
    if recv.value != world * (world + 1) // 2:
        say("FAIL: tp_all_reduce gave %d, expected %d" % (recv.value, world * (world + 1) // 2))
        sys.exit(1)
    return comm


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("backend", choices=["gloo", "nccl"])
    ap.add_argument("--libtp", choices=["none", "before", "after"], default="none")
    args = ap.parse_args()
    try:
        import torch
        import torch.distributed as dist
    except ImportError as e:
        say("skip: torch is not installed (%s)" % e)
        return SKIP
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    device = torch.device("cpu")
    if args.backend == "nccl":
        if not torch.cuda.is_available() or torch.cuda.device_count() < local_world:
            say("skip: nccl needs CUDA with a GPU per local rank (%d GPUs, %d local ranks)" %
                (torch.cuda.device_count() if torch.cuda.is_available() else 0, local_world))
            return SKIP
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
    lib = comm = None
    if args.libtp != "none":
        lib, path = load_libtp()
    if args.libtp == "before":
        comm = libtp_start(lib, rank, world)
    dist.init_process_group(args.backend, init_method="env://")
    if args.libtp == "after":
        comm = libtp_start(lib, rank, world)
    t = torch.tensor([rank + 1], dtype=torch.int64, device=device)
    dist.all_reduce(t)
    want = world * (world + 1) // 2
    if int(t.item()) != want:
        say("FAIL: all_reduce gave %d, expected %d" % (int(t.item()), want))
        return 1
    dist.barrier()
    dist.destroy_process_group()
    if comm is not None:
        tp_check(lib, lib.tp_finalize(comm), "tp_finalize")
    say("ok backend=%s libtp=%s torch=%s MASTER_ADDR=%s MASTER_PORT=%s" %
        (args.backend, args.libtp, torch.__version__, os.environ.get("MASTER_ADDR"), os.environ.get("MASTER_PORT")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
