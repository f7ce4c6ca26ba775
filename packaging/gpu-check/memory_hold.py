#!/usr/bin/env python3
"""Hold all of one GPU's memory but a 4090's, so every full-size figure is what a 24 GB card gets (issue 36).

    memory_hold.py --leave-mib 24064 --ready FILE [--device 0] [--parent PID]

A side process (the GPU machine's python3, which has PyTorch): plain device allocations (the caching
allocator's cudaMalloc, never managed memory) until the GPU has ``--leave-mib`` MiB free (24,564 MiB of a
4090 less the ~500 MiB a desktop session takes: 24,064), counting this process's own CUDA context as used,
as a desktop's would be. It writes what it reached to ``--ready`` (JSON) and holds until its parent is gone,
``--ready`` is removed, or it is signalled: the kernel kills it with its parent (PR_SET_PDEATHSIG), so the
memory is released at the end whatever happens to the run.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import signal
import sys
import time
from pathlib import Path

MiB = 1 << 20
CHUNK = 1 << 30
CLOSE_MIB = 32  # stop within this much above the target


def _die_with_parent(parent: int) -> None:
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass  # the poll below still ends it
    if os.getppid() != parent:
        sys.exit("the parent is gone already")


def hold(leave_mib: int, device: int) -> tuple[list[object], dict[str, int]]:
    import torch

    torch.cuda.set_device(device)
    blocks: list[object] = [torch.empty(1, dtype=torch.uint8, device=f"cuda:{device}")]  # the context
    target = leave_mib * MiB
    free, total = torch.cuda.mem_get_info(device)
    size = CHUNK
    while free > target + CLOSE_MIB * MiB and size >= 2 * MiB:
        want = min(size, free - target)
        try:
            blocks.append(torch.empty(want, dtype=torch.uint8, device=f"cuda:{device}"))
        except RuntimeError:  # out of memory for this size: finer steps
            size //= 2
            continue
        free, _ = torch.cuda.mem_get_info(device)
        if free - target < size:
            size = max(2 * MiB, (free - target) // 2)
    free, total = torch.cuda.mem_get_info(device)
    return blocks, {"device": device, "total_mib": total // MiB, "free_mib": free // MiB,
                    "held_mib": (total - free) // MiB, "leave_mib": leave_mib, "pid": os.getpid()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--leave-mib", type=int, required=True)
    ap.add_argument("--ready", type=Path, required=True)
    ap.add_argument("--device", type=int, default=0)
    ap.add_argument("--parent", type=int, default=os.getppid())
    args = ap.parse_args(argv)
    _die_with_parent(args.parent)
    blocks, reached = hold(args.leave_mib, args.device)
    tmp = args.ready.with_suffix(".tmp")
    tmp.write_text(json.dumps(reached))
    tmp.replace(args.ready)
    while args.ready.exists() and os.getppid() == args.parent:
        time.sleep(0.5)
    del blocks
    return 0


if __name__ == "__main__":
    sys.exit(main())
