"""build_argv's block for RPC workers: ``--rpc host:port,...``, with a draft kept on this machine.

llama.cpp places the target's layers on the workers' devices first, then on the local GPUs, in
proportion to their free memory unless ``--tensor-split`` says otherwise (the memory planner mirrors
that: ``core/models/planner/devices.py``). A speculation draft follows ``--device`` by default, which
would put it on the workers too: BeeDeck pins it to this machine's devices (``--spec-draft-device``,
``none`` = the CPU), where it drafts without a network round trip per token.

``-ngl`` counts the layers on every device but this machine's CPU, the workers' included: GPU layers 0 (a CPU
profile, the starter's) would give the workers nothing, so it is refused with workers named (the CLI's
``--rpc`` without ``--gpu-layers`` gives them all: :func:`layers_for_workers`).
"""

from __future__ import annotations

from beedeck.core.engine.argv.base import Builder

NO_LAYERS = "rpc:no-layers"


def layers_for_workers(n_gpu_layers: str) -> str:
    """GPU layers for a launch with RPC workers named and no GPU layers given (``beedeck serve --rpc``): a
    profile that keeps every layer on this machine ("0": the starter, a CPU profile) gives them all to the
    devices, and llama.cpp splits them across the workers by their free memory, as the memory plan does; any
    other value is the profile's own choice and stays."""
    return "all" if n_gpu_layers.strip() == "0" else n_gpu_layers


def rpc_args(b: Builder, spec_on: bool) -> None:
    s = b.s
    if not s.rpc_workers:
        return
    b.opt("rpc_workers", ("--rpc",), ",".join(s.rpc_workers),
          refuse=("This engine has no --rpc option, so it cannot use RPC workers.",
                  "Build it with RPC (GGML_RPC=ON) or clear the worker list."))
    if s.n_gpu_layers.strip() == "0":
        b.refuse("n_gpu_layers", f"GPU layers is 0, so the RPC workers at {', '.join(s.rpc_workers)} would hold "
                 "none of the model: every layer would stay on this machine's CPU.",
                 "Set GPU layers to all (the layers are split across the workers by their free memory, as the "
                 "memory plan shows), or to how many layers the workers should take; or clear the worker list.",
                 code=NO_LAYERS)
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
