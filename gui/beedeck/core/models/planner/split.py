"""The compute buffers of a launch whose layers run on several devices (GPUs, RPC workers, the CPU):
whether llama.cpp runs them as a pipeline, and what each device then reserves. Used by the planner."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, TypeVar

from beedeck.core.engine.launch_settings import LaunchSettings


class Chargeable(Protocol):
    """A device the compute buffers are charged to; the plan's
    :class:`~beedeck.core.models.planner.memory.DeviceUse` (the planner's one ``DeviceUse``) is one."""

    def add(self, key: str, nbytes: float) -> None: ...


D = TypeVar("D", bound=Chargeable)

_NO_PIPELINE = ("-nkvo", "--no-kv-offload", "-ot", "--override-tensor", "-cmoe", "--cpu-moe", "-ncmoe",
                "--n-cpu-moe")


def pipeline(settings: LaunchSettings, layer_dev: Sequence[Chargeable | None], out_dev: Chargeable | None,
              layer_devs: Sequence[Chargeable], workers: Sequence[Chargeable], rpc_async: bool) -> bool:
    """Whether llama.cpp runs the layers as a pipeline (``llama-context.cpp``: several devices, every
    layer and the output offloaded, ``-sm layer``, the KV offloaded, no tensor overrides, and every
    device with async compute and events); its scheduler then keeps 4 copies of every split's inputs
    (GGML_SCHED_MAX_COPIES). CUDA devices have both; an RPC worker's only where ``rpc_async`` (mainline's
    protocol 7: yes; BeeLlama 0.1.2 and 0.4.3, protocols 4 and 5: no, their ggml-rpc.cpp says so and the
    v0.1.2 CUDA run in docs/gpu-runs/2026-12-01-h200-rpc-split showed no pipeline)."""
    args = settings.extra_args
    split_mode = next((args[i + 1] for i, a in enumerate(args[:-1]) if a in ("-sm", "--split-mode")), "layer")
    return (len(layer_devs) > 1 and out_dev is not None and all(d is not None for d in layer_dev)
            and split_mode == "layer" and not any(a.split("=")[0] in _NO_PIPELINE for a in args)
            and (rpc_async or not any(g is w for g in layer_devs for w in workers)))


def device_masks(is_swa: Sequence[bool], n_tok: int, n_ctx: int, cells_swa: int) -> int:
    """The f16 KQ masks a device uses: the full-context one if it holds a full-attention layer, the
    sliding-window one if it holds a sliding-window layer (``is_swa``: its KV layers)."""
    return 2 * n_tok * ((n_ctx if not all(is_swa) else 0) + (cells_swa if any(is_swa) else 0))


def staging(masks: float, row: float) -> float:
    """The host's compute beside GPUs that run every layer without a pipeline: the masks and 4 token
    rows of CUDA_Host staging (measured on one GPU, and with BeeLlama's RPC split on an H200)."""
    return masks + 4 * row


def split_compute(layer_devs: Sequence[D], host: D, out_dev: D, cb: float,
                  cb_layers: float, masks: float, masks_of: Callable[[D], float], row: float,
                  host_layers: bool, piped: bool, notes: list[str]) -> None:
    """Compute buffers when the layers are spread over several devices, or partly left on the CPU.

    Every device that runs layers reserves its own graph: ``cb`` on the output's device, ``cb_layers``
    (no logits) on the others, each plus the KQ masks of the caches its own layers use (``masks_of``;
    ``masks``: all of them). ``row`` is n_ubatch x n_embd f32. Measured per device against the engine's
    buffer lines (mainline on the CPU with 1-3 RPC workers, SmolLM2 135M, Gemma 3 270M and four synthetic
    shapes, -c 2048-8192, -ub 128-512; BeeLlama 0.1.2 on an H200 with 1-2 CUDA workers):

    - a pipeline adds 3 more copies of the masks and 3 rows per device, 9 rows more on the first, and
      makes the host's staging 4 masks + 10 rows;
    - without one, the first backend that runs layers (the CPU when layers are left there) needs a row
      more than one device would, every later device 2 rows less, and the host stages as with one GPU.
    """
    for k, g in enumerate(layer_devs):
        own = (cb if g is out_dev else cb_layers) + masks_of(g)
        if piped:
            own += 3 * masks_of(g) + 3 * row + (9 * row if k == 0 else 0)
        elif k > 0 or host_layers:
            own -= 2 * row
        g.add("compute", own)
    if piped:
        host.add("compute", 4 * masks + 10 * row)
        notes.append("Layers on several devices run as a pipeline: each device keeps 4 copies of its inputs, "
                     "so the compute buffers are larger than on one device.")
    elif host_layers:
        host.add("compute", masks + (cb if out_dev is host else cb_layers) + row)
    else:
        host.add("compute", staging(masks, row))
