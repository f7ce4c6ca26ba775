"""The pieces :func:`beedeck.core.engine.argv.build_argv` is made of: its notes, its refusal and the
builder its per-topic helpers (``argv.build``, ``argv.spec``) write into.
"""

from __future__ import annotations

from dataclasses import dataclass

from beedeck.core.engine.caps import EngineCaps
from beedeck.core.engine.launch_settings import LaunchSettings


@dataclass(frozen=True)
class ArgNote:
    """One thing build_argv did that the user should know: a dropped, translated or compensated option."""

    setting: str
    kind: str  # "dropped" | "translated" | "compensated" | "info"
    message: str


class LaunchRefused(ValueError):
    """These settings cannot run on this engine; ``reasons`` says why, one line each, with a remedy."""

    def __init__(self, reasons: list[str]) -> None:
        super().__init__("; ".join(reasons))
        self.reasons = reasons


class Builder:
    """The argv, notes and refusals of one build_argv call, with helpers for the usual cases."""

    def __init__(self, s: LaunchSettings, caps: EngineCaps) -> None:
        self.s, self.caps = s, caps
        self.argv: list[str] = []
        self.notes: list[ArgNote] = []
        self.refusals: list[str] = []

    def add(self, *args: str) -> None:
        self.argv.extend(args)

    def note(self, setting: str, kind: str, message: str) -> None:
        self.notes.append(ArgNote(setting, kind, message))

    def drop(self, setting: str, flag: str, why: str = "") -> None:
        self.note(setting, "dropped", f"{flag} left out: this engine has no such option{why}.")

    def first(self, *flags: str) -> str | None:
        return next((f for f in flags if self.caps.has(f)), None)

    def opt(self, setting: str, flags: tuple[str, ...], value: str, refuse: str | None = None) -> None:
        """Pass ``flag value`` with the first spelling the engine has; else drop (or refuse)."""
        flag = self.first(*flags)
        if flag:
            self.add(flag, value)
        elif refuse:
            self.refusals.append(refuse)
        else:
            self.drop(setting, flags[0])

    def switch(self, setting: str, flags: tuple[str, ...]) -> None:
        flag = self.first(*flags)
        if flag:
            self.add(flag)
        else:
            self.drop(setting, flags[0])
