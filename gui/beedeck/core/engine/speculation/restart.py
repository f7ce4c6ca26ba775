"""A mode switch that restarts the server (BeeLlama >= 0.4 and mainline ignore per-request
speculation), made as short as the hardware allows.

A switch starts the same target again with the same settings apart from speculation, right after
a start of it succeeded, so two things the first start needs are waste the second time:

- **reading the file again.** The guide's DFlash line loads with ``--no-mmap --mlock``: each start
  reads the whole 19 GB file through a private buffer. A switch memory-maps it instead, so the pages
  the first start brought into the page cache are copied to the GPU from there (no disk read).
- **the fit pass.** Mainline and BeeLlama >= 0.4 first load the model's layout once more to fit
  unset arguments to the device memory (``--fit on``, their default). BeeDeck sets every argument the
  fit pass may change (``-ngl``, ``-c``, the KV types) from its own plan, and the start just before
  proved they fit, so a switch passes ``--fit off``.

Nothing else changes: the engine, the model files, context, KV types, sampling and the port stay
those of the profile, and the first start of a profile is never changed.
"""

from __future__ import annotations

from dataclasses import replace

from beedeck.core.engine.caps import EngineCaps
from beedeck.core.engine.launch_settings import LaunchSettings

FIT_FLAGS = ("--fit", "-fit")


def fast_restart_settings(settings: LaunchSettings, caps: EngineCaps | None) -> LaunchSettings:
    """``settings`` for a restart of a target that has just loaded with them (a mode switch)."""
    s = replace(settings, extra_args=list(settings.extra_args))
    s.mmap, s.mlock = True, False
    if caps is not None:
        fit = next((f for f in FIT_FLAGS if caps.has(f)), None)
        given = any(a.split("=", 1)[0] in FIT_FLAGS for a in s.extra_args)
        if fit is not None and not given:
            s.extra_args += [fit, "off"]
    return s


def describe_fast_restart(settings: LaunchSettings, caps: EngineCaps | None) -> list[str]:
    """What a switch changes in the launch, in words (the toggle's tooltip)."""
    fast = fast_restart_settings(settings, caps)
    out = []
    if not settings.mmap or settings.mlock:
        out.append("maps the model from the page cache instead of reading it again (--no-mmap/--mlock dropped)")
    if fast.extra_args != settings.extra_args:
        out.append("skips the engine's fit pass (--fit off): the start just before proved the settings fit")
    return out
