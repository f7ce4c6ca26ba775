"""The pieces :func:`beedeck.core.engine.argv.build_argv` is made of: its notes, its refusal and the
builder its per-topic helpers (``argv.build``, ``argv.spec``) write into.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from beedeck.core.engine.caps import EngineCaps
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.logparse import ServerFailed, ServerFailure

Refusal = ServerFailure  # the one refusal type: a code, a message, a remedy, and the setting it is about


@dataclass(frozen=True)
class ArgNote:
    """One thing build_argv did that the user should know: a dropped, translated or compensated option."""

    setting: str
    kind: str  # "dropped" | "translated" | "compensated" | "info"
    message: str


def merged(refusals: Sequence[Refusal]) -> Refusal:
    """Several refusals as one (the first one's code and setting), for a failure panel or a CLI line."""
    first = refusals[0]
    if len(refusals) == 1:
        return first
    return Refusal(first.code, " ".join(r.message for r in refusals),
                   " ".join(dict.fromkeys(r.remedy for r in refusals if r.remedy)), setting=first.setting)


class LaunchRefused(ServerFailed, ValueError):
    """These settings cannot start: ``refusals`` says why, each a :data:`Refusal` (code, message, remedy and
    the setting it is about); ``failure`` is all of them as one (``code``, ``message`` and ``remedy`` read
    it), so a caller that catches ServerFailed shows a refusal like any failed start. ``reasons``: each
    refusal as one line of text.

    A plain string is taken as a refusal of the engine's argument list (code ``bad_value``, no remedy)."""

    def __init__(self, refusals: Sequence[Refusal | str]) -> None:
        self.refusals = [r if isinstance(r, ServerFailure) else Refusal("bad_value", r, "") for r in refusals]
        if not self.refusals:
            raise ValueError("LaunchRefused needs at least one refusal")
        super().__init__(merged(self.refusals))

    @property
    def reasons(self) -> list[str]:
        return [str(r) for r in self.refusals]

    @property
    def code(self) -> str:
        return self.failure.code

    @property
    def message(self) -> str:
        return self.failure.message

    @property
    def remedy(self) -> str:
        return self.failure.remedy

    def __str__(self) -> str:
        return "; ".join(self.reasons)


class Builder:
    """The argv, notes and refusals of one build_argv call, with helpers for the usual cases."""

    def __init__(self, s: LaunchSettings, caps: EngineCaps) -> None:
        self.s, self.caps = s, caps
        self.argv: list[str] = []
        self.notes: list[ArgNote] = []
        self.refusals: list[Refusal] = []

    def refuse(self, setting: str, message: str, remedy: str, code: str = "bad_value") -> None:
        """These settings cannot run on this engine: what is wrong, what to do, and the setting it is about."""
        self.refusals.append(Refusal(code, message, remedy, setting=setting))

    def add(self, *args: str) -> None:
        self.argv.extend(args)

    def note(self, setting: str, kind: str, message: str) -> None:
        self.notes.append(ArgNote(setting, kind, message))

    def drop(self, setting: str, flag: str, why: str = "") -> None:
        self.note(setting, "dropped", f"{flag} left out: this engine has no such option{why}.")

    def first(self, *flags: str) -> str | None:
        return next((f for f in flags if self.caps.has(f)), None)

    def opt(self, setting: str, flags: tuple[str, ...], value: str, refuse: tuple[str, str] | None = None) -> None:
        """Pass ``flag value`` with the first spelling the engine has; else drop (or refuse: the message and
        the remedy, as an option this engine lacks)."""
        flag = self.first(*flags)
        if flag:
            self.add(flag, value)
        elif refuse:
            self.refuse(setting, *refuse, code="unknown_argument")
        else:
            self.drop(setting, flags[0])

    def switch(self, setting: str, flags: tuple[str, ...]) -> None:
        flag = self.first(*flags)
        if flag:
            self.add(flag)
        else:
            self.drop(setting, flags[0])
