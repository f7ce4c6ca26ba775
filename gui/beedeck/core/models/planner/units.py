"""The planner's units: byte sizes, KV cache types and their row bytes, padding, and one device's
bill (:class:`DeviceUse`); shared by :mod:`memory` (the plan) and :mod:`drafts` (the drafter's part)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

MiB = 1024 * 1024
GiB = 1024 * MiB

# Cache type -> (values per block, bytes per block). kvarnN is a fit (§1.4): N + 0.375 bits.
CACHE_TYPES: dict[str, tuple[int, float]] = {
    "f32": (1, 4), "f16": (1, 2), "bf16": (1, 2), "q8_0": (32, 34), "q5_1": (32, 24), "q5_0": (32, 22),
    "q4_1": (32, 20), "q4_0": (32, 18), "iq4_nl": (32, 18), "turbo4": (128, 66), "turbo3_tcq": (128, 52),
    "turbo3": (128, 50), "turbo2_tcq": (128, 36), "turbo2": (128, 34),
    "q2_0": (32, 10), "q2_1": (32, 12), "q3_0": (32, 14), "q3_1": (32, 16), "q6_0": (32, 26), "q6_1": (32, 28),
    **{f"kvarn{n}": (128, (n + 0.375) * 16) for n in (2, 3, 4, 5, 6, 8)},
}


class PlanError(ValueError):
    """The settings cannot be planned (unknown cache type, a draft given as target...)."""


def bits_per_value(cache_type: str) -> float:
    block, size = cache_geometry(cache_type)
    return size * 8 / block


def cache_geometry(cache_type: str) -> tuple[int, float]:
    try:
        return CACHE_TYPES[cache_type]
    except KeyError:
        raise PlanError(
            f"Unknown KV cache type {cache_type!r}: pick one of {', '.join(CACHE_TYPES)}."
        ) from None


def row_bytes(cache_type: str, n: int) -> int:
    """Bytes of one cache row of ``n`` values: ceil(n / block) x block bytes."""
    block, size = cache_geometry(cache_type)
    return math.ceil(math.ceil(n / block) * size)


def pad(n: int, to: int = 256) -> int:
    return (n + to - 1) // to * to


@dataclass
class DeviceUse:
    """What one device (a GPU, or the host) holds, component by component, in bytes."""

    name: str
    free: int | None  # free bytes before launch; None for the host
    items: dict[str, int] = field(default_factory=dict)

    def add(self, key: str, nbytes: float) -> None:
        if nbytes:
            self.items[key] = self.items.get(key, 0) + int(nbytes)

    @property
    def total(self) -> int:
        return sum(self.items.values())

    @property
    def left(self) -> int | None:
        return None if self.free is None else self.free - self.total



def ngl_of(value: str | None, n_layer: int) -> int:
    if value is None or value in ("all", "auto", "-1", "-2") or not value.lstrip("-").isdigit():
        return n_layer + 1
    return max(0, min(int(value), n_layer + 1))


def layer_of(name: str) -> int | None:
    if name.startswith("blk."):
        return int(name.split(".", 2)[1])
    return None

