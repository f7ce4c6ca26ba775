"""What the launch preflight knows about a launch beyond its settings, as the launch form gathers it: the model
files' headers (through the one :class:`~beedeck.core.models.header_cache.HeaderCache`), the engine and its
recorded build options, the GPUs' free memory and the host's RAM, the RPC workers' check, and the last verdict
(the refusals, by field). Every fact is read off the GUI thread by the caller and handed in here; this object
reads nothing itself, so the form can ask it on every edit.

A fact not gathered yet is what it is: a header not read yet is absent (``header(path)`` None), build options
not looked up yet are :data:`~beedeck.core.launcher.UNSET`; the preflight judges each once it is in.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from beedeck.core.engine.argv import Refusal
from beedeck.core.engine.caps import EngineCaps
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.rpc import RpcError
from beedeck.core.engine.rpc.probe import RpcDevice
from beedeck.core.launcher import UNSET, Preflight, Unset, preflight
from beedeck.core.models.gguf.reader import ModelInfo
from beedeck.core.models.header_cache import HeaderCache, Read
from beedeck.core.models.planner import MemoryPlan
from beedeck.core.models.planner.launch import plan_launch


@dataclass
class LaunchFacts:
    """The launch form's model of what the preflight knows (see the module's docstring)."""

    headers: HeaderCache = field(default_factory=HeaderCache)
    caps: EngineCaps | None = None
    binary: str = "llama-server"
    engine_problem: str | None = None  # why there are no caps (being probed, the probe failed)
    devices: list[int] = field(default_factory=list)  # free bytes per GPU (empty: CPU only)
    host_ram: int | None = None  # this machine's RAM (None: not detected yet)
    build_options: tuple[str, ...] | None | Unset = UNSET  # the engine's recorded build (None: none recorded)
    rpc: Sequence[RpcDevice] | RpcError | Unset = field(default_factory=list)  # the workers' check ([]: none)
    rpc_devices: list[RpcDevice] = field(default_factory=list)  # the devices that check found (workers first)
    refusals: list[Refusal] = field(default_factory=list)  # the last verdict (empty: Launch may go)
    refused_fields: dict[str, str] = field(default_factory=dict)  # field -> why the launch is refused over it

    def set_engine(self, caps: EngineCaps | None, binary: str | None = None, problem: str | None = None) -> str | None:
        """A new engine (or none: ``problem`` says why). Its build options are unknown until looked up: returns
        the binary whose options the caller looks up off its GUI thread (None: no engine)."""
        self.caps, self.engine_problem = caps, problem
        self.binary = binary or (caps.path if caps else "llama-server")
        self.build_options = UNSET
        return caps.path if caps is not None else None

    def build_options_found(self, path: str, options: tuple[str, ...] | None) -> bool:
        """The build options looked up for ``path``; False when the engine changed meanwhile (dropped)."""
        if self.caps is None or self.caps.path != path:
            return False
        self.build_options = options
        return True

    def header(self, path: str | None) -> Read | None:
        """What the last look at ``path`` found; None while it has not been looked at."""
        return self.headers.known.get(path) if path else None

    def info(self, path: str | None) -> ModelInfo | None:
        return self.headers.info(path)

    def to_read(self, settings: LaunchSettings) -> list[str]:
        """The files of ``settings`` not looked at yet (a form asks on every edit: a file is looked at once per
        path): give each ``headers.reader(path)`` to the background, then :meth:`HeaderCache.store` (or
        ``forget``) its result."""
        return self.headers.to_read(settings, again=False)

    def reading(self, settings: LaunchSettings) -> bool:
        """Whether a look at the target or the draft is still to come (its verdict waits for it)."""
        return any(p and (self.header(p) is None or p in self.headers.reading) for p in (settings.target, settings.draft))

    def unreadable(self, settings: LaunchSettings) -> bool:
        """Whether the target or the draft was looked at and is no GGUF BeeDeck can read."""
        return any((r := self.header(p)) is not None and bool(r.error) for p in (settings.target, settings.draft))

    def check(self, settings: LaunchSettings, args_text: str | None = None) -> Preflight:
        """The launch's own :func:`preflight` on what is known (nothing read here), kept as the verdict; without
        an engine, what the engine is doing (``engine_problem``) is the first refusal."""
        checked = preflight(self.caps, settings, target=self.info(settings.target), draft=self.info(settings.draft),
                            read=False, errors=self.headers.errors(), devices=self.devices, host_ram=self.host_ram,
                            build_options=self.build_options, rpc=self.rpc, args_text=args_text)
        if self.caps is None and self.engine_problem:
            checked.refusals[0] = replace(checked.refusals[0], message=self.engine_problem, remedy="")
        self.refusals = checked.refusals
        self.refused_fields = {}
        for r in checked.refusals:
            if r.setting:
                self.refused_fields[r.setting] = " ".join(filter(None, (self.refused_fields.get(r.setting), str(r))))
        return checked

    def plan(self, settings: LaunchSettings) -> MemoryPlan | None:
        """The memory plan of the launch (:func:`plan_launch`), from the headers read so far; None without the
        target's."""
        target = self.info(settings.target)
        if target is None:
            return None
        return plan_launch(target, self.info(settings.draft), settings, self.caps, self.devices, self.rpc_devices)
