#!/usr/bin/env python3
"""torch_nccl.py: torch.distributed (NCCL backend) and libtp's NCCL provider in one process, under tprun.

Run by hand from the build directory of a GPU machine (one GPU per rank):
    tprun -n 2 python3 tests/gpu/torch_nccl.py
Each rank takes GPU local_rank, calls init_process_group("nccl") and tp_init, wraps torch's current stream with
tp_stream_create, all-reduces a CUDA tensor through libtp on that stream and through torch, and checks libtp's
result bit for bit against libtp's host engine (rank-order sum of the same values in host memory); at 1 or 2 ranks
torch's NCCL sum must give the same bits too. Prints "torch_nccl rank R: ok ..."; 77 without torch or a GPU per
local rank; 1 on a failure. libtp is TORCH_DIST_LIBTP, else .libs/libtp.so of this build, else libtp.so.
"""
import ctypes
import os
import sys

SKIP = 77
TP_DEVICE_CUDA, TP_F32, TP_SUM = 1, 1, 0


def say(msg):
    print("torch_nccl rank %s: %s" % (os.environ.get("RANK", "?"), msg), flush=True)


def main():
    try:
        import torch
        import torch.distributed as dist
    except ImportError:
        say("SKIP: no torch")
        return SKIP
    local = int(os.environ.get("LOCAL_RANK", "0"))
    if not torch.cuda.is_available() or torch.cuda.device_count() <= local:
        say("SKIP: no GPU for local rank %d" % local)
        return SKIP
    torch.cuda.set_device(local)
    here = os.path.dirname(os.path.abspath(__file__))
    lib = None
    for path in (os.environ.get("TORCH_DIST_LIBTP"), os.path.join(here, "..", "..", ".libs", "libtp.so"), "libtp.so"):
        if path:
            try:
                lib = ctypes.CDLL(path)
                break
            except OSError:
                pass
    if lib is None:
        say("FAIL: cannot load libtp")
        return 1
    vp, sz = ctypes.c_void_p, ctypes.c_size_t
    lib.tp_init.argtypes = [vp, ctypes.POINTER(vp)]
    lib.tp_finalize.argtypes = [vp]
    lib.tp_status_string.restype = ctypes.c_char_p
    lib.tp_last_error.restype = ctypes.c_char_p
    lib.tp_stream_create.argtypes = [ctypes.c_int, vp, ctypes.POINTER(vp)]
    lib.tp_stream_destroy.argtypes = [vp]
    lib.tp_all_reduce.argtypes = [vp, vp, vp, sz, ctypes.c_int, ctypes.c_int, vp]

    def check(status, what):
        if status != 0:
            say("FAIL: %s: %s (%s)" % (what, lib.tp_status_string(status).decode(), lib.tp_last_error().decode()))
            sys.exit(1)

    dist.init_process_group("nccl", init_method="env://")
    comm = vp()
    check(lib.tp_init(None, ctypes.byref(comm)), "tp_init")
    rank, world = dist.get_rank(), dist.get_world_size()
    stream = vp()
    check(lib.tp_stream_create(TP_DEVICE_CUDA, torch.cuda.current_stream().cuda_stream, ctypes.byref(stream)),
          "tp_stream_create")
    g = torch.Generator().manual_seed(1234 + rank)
    host_in = (torch.randn(1 << 20, generator=g) * torch.exp2(torch.randint(-20, 20, (1 << 20,), generator=g))).float()
    dev = host_in.cuda()
    mine = dev.clone()
    check(lib.tp_all_reduce(comm, mine.data_ptr(), mine.data_ptr(), mine.numel(), TP_F32, TP_SUM, stream),
          "tp_all_reduce on torch's stream")
    theirs = dev.clone()
    dist.all_reduce(theirs)
    torch.cuda.current_stream().synchronize()
    want = host_in.clone()
    check(lib.tp_all_reduce(comm, want.data_ptr(), want.data_ptr(), want.numel(), TP_F32, TP_SUM, None),
          "tp_all_reduce on host memory")
    got = mine.cpu()
    if not torch.equal(got.view(torch.int32), want.view(torch.int32)):
        say("FAIL: libtp's CUDA all-reduce differs from the host engine's rank-order sum in %d elements"
            % int((got.view(torch.int32) != want.view(torch.int32)).sum()))
        return 1
    same_as_torch = torch.equal(theirs.cpu().view(torch.int32), want.view(torch.int32))
    if world <= 2 and not same_as_torch:
        say("FAIL: at %d ranks torch's NCCL sum should equal the rank-order sum" % world)
        return 1
    dist.barrier()
    lib.tp_stream_destroy(stream)
    dist.destroy_process_group()
    check(lib.tp_finalize(comm), "tp_finalize")
    say("ok: 1M f32 all-reduced by libtp on torch's stream, bit for bit as the host engine; torch's NCCL %s"
        % ("agrees" if same_as_torch else "differs (its own order)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
