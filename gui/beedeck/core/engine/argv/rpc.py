"""build_argv's block for RPC workers: ``--rpc host:port,...``, with a draft kept on this machine.

llama.cpp places the target's layers on the workers' devices first, then on the local GPUs, in
proportion to their free memory unless ``--tensor-split`` says otherwise (the memory planner mirrors
that: ``core/models/planner/devices.py``). A speculation draft follows ``--device`` by default, which
would put it on the workers too: BeeDeck pins it to this machine's devices (``--spec-draft-device``,
``none`` = the CPU), where it drafts without a network round trip per token.
"""

from __future__ import annotations

from beedeck.core.engine.argv.base import Builder


def rpc_args(b: Builder, spec_on: bool) -> None:
    s = b.s
    if not s.rpc_workers:
        return
    b.opt("rpc_workers", ("--rpc",), ",".join(s.rpc_workers),
          refuse=("This engine has no --rpc option, so it cannot use RPC workers.",
                  "Build it with RPC (GGML_RPC=ON) or clear the worker list."))
    if spec_on and s.spec_mode.uses_draft_file:
        local = [line.split(":", 1)[0].strip() for line in b.caps.devices if ":" in line]
        flag = b.first("--spec-draft-device", "-devd", "--device-draft")
        if flag:
            b.add(flag, ",".join(local) or "none")
            b.note("rpc_workers", "info", "The draft stays on this machine (" + (", ".join(local) or "the CPU")
                   + "): only the target's layers go to the workers.")
        else:
            b.note("rpc_workers", "info", "This engine cannot pin the draft to a device: it may be placed on a "
                   "worker, which costs a network round trip per drafted token.")
