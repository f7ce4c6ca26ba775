"""How a launch walks the layers, and how often it builds its argument list (issue 35). Not a test: prints counts.

    QT_QPA_PLATFORM=offscreen .venv/bin/python benchmarks/launch_walk.py

Each launch runs the app's real path (Session, the serving, the preflight, build_argv, start_server) with only
the process faked (ServerProcess.start/stop/wait_ready, so no engine runs) on a real GGUF header.

- build_argv: its calls per launch, counted by a profile hook on its code: an app start, a replace (Settings →
  Launch over the running server), a mode switch's restart, a mode switch loaded beside, and ``beedeck serve``'s
  launch with port 0.
- the walk from ``Session.apply_profile`` to the process start: the calls made by the functions on the stack
  where the launch happens (each build_argv call, the job thread's start, the process start) and by the ui
  helpers they call; a move is such a call from a ui/ function into a core/ one, a climb one from core/ into
  ui/ (stdlib and Qt frames are transparent). The profile's commit (``Session._commit``: showing and saving
  it) is left out: it is no part of the launch. Also counted: calls from core/ into ui/ anywhere until the
  server is ready (a callback such as a process's state), the path's or not.
"""

from __future__ import annotations

import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from types import FrameType
from typing import Any

from PySide6.QtWidgets import QApplication
from tests.fixtures.engines import MAINLINE, help_stdout
from tests.fixtures.meta_gguf import tiny_model

from beedeck.core.engine import server as srv
from beedeck.core.engine.argv import build as argv_build
from beedeck.core.engine.help_text import caps_from_texts
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.mode import Mode
from beedeck.core.profile import Profile
from beedeck.core.settings import AppSettings

ServerState = srv.ServerState  # (as server.py names it: the script runs on the tree before issue 35 too)
ENGINE = "/e/ml/llama-server"
GUI = str(Path(argv_build.__file__).resolve().parents[3])  # .../gui/beedeck
started = threading.Event()


def fake_start(self: srv.ServerProcess) -> srv.ServerProcess:
    started.set()
    self._set_state(ServerState.STARTING)
    self._set_state(ServerState.READY)
    return self


srv.ServerProcess.start = fake_start  # type: ignore[method-assign]
srv.ServerProcess.stop = lambda self, timeout=10.0: self._set_state(ServerState.STOPPED)  # type: ignore[assignment,method-assign]
srv.ServerProcess.wait_ready = lambda self, timeout=300.0: 0.0  # type: ignore[assignment,method-assign]


def kind(frame: FrameType) -> str | None:
    name = frame.f_code.co_filename
    return "ui" if name.startswith(GUI + "/ui/") else "core" if name.startswith(GUI + "/core/") else None


def name(frame: FrameType) -> str:
    return f"{Path(frame.f_code.co_filename).relative_to(GUI)}:{frame.f_code.co_qualname}"


def stack(frame: FrameType | None) -> list[FrameType]:
    out = []
    while frame is not None:
        if kind(frame) is not None:
            out.append(frame)
        frame = frame.f_back
    return out


class Walk:
    """The profile hook: crossings between ui/ and core/, the functions on the launch's path, build_argv calls."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, str, tuple[str, ...]]] = []
        self.path: set[str] = set()
        self.argv = 0
        self.climbs: set[tuple[str, str]] = set()  # core -> ui anywhere until ready

    def __call__(self, frame: FrameType, event: str, arg: Any) -> None:
        if event != "call":
            return
        if kind(frame) == "ui" and (caller := next(iter(stack(frame.f_back)), None)) and kind(caller) == "core":
            self.climbs.add((name(caller), name(frame)))
        if started.is_set():
            return
        code = frame.f_code
        if (code.co_name == "start" and code.co_filename.endswith("/threading.py")) or code is fake_start.__code__:
            self.path.update(name(f) for f in stack(frame))
            return
        here = kind(frame)
        if here is None:
            return
        if code is argv_build.build_argv.__code__:
            self.argv += 1
            self.path.update(name(f) for f in stack(frame))
        up = frame.f_back
        while up is not None and kind(up) is None:
            up = up.f_back
        if up is None or kind(up) == here:
            return
        owners, f = [], up  # the caller, and for a ui caller the ui frames above it up to the first core one
        while f is not None and kind(f) != here:
            if kind(f) is not None:
                owners.append(name(f))
            f = f.f_back
        self.calls.append(("move" if kind(up) == "ui" else "climb", name(up), name(frame), tuple(owners)))

    def report(self, label: str) -> None:
        walk: list[tuple[str, str, str]] = []
        for move, caller, callee, owners in self.calls:
            if any("Session._commit" in o for o in owners) or not any(o in self.path for o in owners):
                continue
            if (move, caller, callee) not in walk:
                walk.append((move, caller, callee))
        moves = sum(1 for w in walk if w[0] == "move")
        print(f"{label}: build_argv {self.argv}x; walk: {moves} ui->core moves, {len(walk) - moves} core->ui climbs; "
              f"core->ui calls until ready: {len(self.climbs)}")
        for move, caller, callee in walk:
            print(f"    {move:5} {caller} -> {callee}")
        for caller, callee in sorted(self.climbs):
            print(f"    called back: {caller} -> {callee}")


def measure(app: QApplication, label: str, act: Callable[[], object], done: Callable[[], bool]) -> None:
    hook = Walk()
    started.clear()
    threading.setprofile(hook)
    sys.setprofile(hook)
    act()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not done():
        app.processEvents()
        time.sleep(0.01)
    sys.setprofile(None)
    threading.setprofile(None)  # type: ignore[arg-type]
    hook.report(label)


def main() -> int:
    app = QApplication.instance() or QApplication([])
    from beedeck.core import launcher
    from beedeck.ui.session import Session

    model = str(tiny_model(Path(tempfile.mkdtemp()) / "t.gguf"))
    caps = caps_from_texts(ENGINE, "version: 11434 (515e85511)", help_stdout(MAINLINE))
    measure(app, "beedeck serve (launch, port 0)",
            lambda: launcher.launch(ENGINE, caps, LaunchSettings(target=model, n_gpu_layers="0")), lambda: True)
    session = Session(AppSettings(), saver=lambda _s: None)
    session.profile_saver = lambda _p: None
    server: Any = getattr(session, "server", None) or session.controller  # the serving, or (before) the controller
    ready: list[str] = []
    session.controller.ready.connect(ready.append)
    first = LaunchSettings(target=model, n_gpu_layers="0", spec_mode=Mode.MODEL_FREE)
    measure(app, "app start (Session.apply_profile, nothing running)",
            lambda: session.apply_profile(Profile(ENGINE, first, "a"), caps, start=True), lambda: len(ready) >= 1)
    measure(app, "replace (Session.apply_profile over the running server)",
            lambda: session.apply_profile(Profile(ENGINE, replace(first, ctx_size=1024), "b"), caps, start=True),
            lambda: len(ready) >= 2)
    server.standby = False
    asked = session.profile.settings if session.profile else first
    measure(app, "mode switch (restart)", lambda: server.restart(replace(asked, spec_mode=Mode.BASELINE)),
            lambda: len(ready) >= 3)
    server.standby = True
    if hasattr(server, "parts"):
        server.parts.free_now = lambda: (None, 64 << 30)
    else:
        server._free_now = lambda: (None, 64 << 30)
    measure(app, "mode switch (the other mode loaded beside)", lambda: server.restart(asked), lambda: len(ready) >= 4)
    session.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
