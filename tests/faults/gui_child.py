"""The real BeeDeck window (offscreen) as a child process for the signal and many-process faults.

``--no-gpu`` makes GPU detection answer "no GPU" whatever the machine has, so the first start takes
the path under test (the starter profile, started at once); everything else is the real app.

``--commands FILE`` lets the test drive the window as a user would: the child reads FILE's new lines every
0.1 s and does each (``send TEXT``: type it and press Send; ``state``: print one ``state {json}`` line with
what the window shows; ``quit``: close the window), and prints ``ready URL`` when its server is ready and
``replied CONVERSATION`` when a reply ends. Replies are cut at 24 tokens (the starter model is slow).
``--slow-launch S`` waits S seconds between picking the port and starting the server on it: the moment in
which two processes started together both found the port free.
"""

from __future__ import annotations

import functools
import json
import sys
import time
from pathlib import Path
from typing import Any

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication

from beedeck.core import launcher
from beedeck.core.machine.report import HardwareReport
from beedeck.ui.window import app


def no_gpu() -> HardwareReport:
    return HardwareReport(reason="no NVIDIA GPU (the fault tests' window)", source="none")


def _option(argv: list[str], name: str) -> str | None:
    if name not in argv:
        return None
    i = argv.index(name)
    value = argv[i + 1]
    del argv[i : i + 2]
    return value


def say(line: str) -> None:
    print(line, flush=True)


def state(window: Any) -> dict[str, Any]:
    chat, server = window.chat, window.session.server
    bar = getattr(window, "notices", None)  # the lasting notices (a window without that bar: the failure panel)
    notices = bar.text() if bar is not None else window.failure.what.text()
    return {"conversation": chat.conversation_id, "notices": notices, "chat_notice": chat.notice.text(),
            "status": window.statusBar().currentMessage(), "base_url": server.base_url,
            "port": server.settings.port if server.settings else None, "state": server.state.value,
            "shown": [m.content for m in chat.view.messages()]}


def drive(window: Any, commands: Path) -> None:
    """Do the commands the test appends to ``commands``, one line each."""
    window.chat.max_tokens = 24
    window.session.serving.connect(lambda url: say(f"ready {url}"))
    window.chat.reply_finished.connect(lambda _facts: say(f"replied {window.chat.conversation_id}"))
    window.chat.reply_failed.connect(lambda message: say(f"failed {message!r}"))
    done = [0]

    def poll() -> None:
        lines = commands.read_text(encoding="utf-8").splitlines() if commands.exists() else []
        for line in lines[done[0]:]:
            done[0] += 1
            verb, _, rest = line.partition(" ")
            if verb == "send":
                window.chat.input.setPlainText(rest)
                window.chat.send()
            elif verb == "state":
                say("state " + json.dumps(state(window)))
            elif verb == "quit":
                window.close()
                QApplication.quit()

    timer = QTimer(window, interval=100)
    timer.timeout.connect(poll)
    timer.start()


def slow(launch: Any, seconds: float) -> Any:
    def slow_launch(*args: Any, **kwargs: Any) -> Any:
        time.sleep(seconds)  # the port is picked (ports.app_port), not yet bound by a server
        return launch(*args, **kwargs)

    return slow_launch


if __name__ == "__main__":
    argv = sys.argv[1:]
    commands, slow_s = _option(argv, "--commands"), _option(argv, "--slow-launch")
    build = app.build_window
    if "--no-gpu" in argv:
        argv.remove("--no-gpu")
        build = functools.partial(build, detect=no_gpu)
    if slow_s is not None:
        launcher.launch = slow(launcher.launch, float(slow_s))

    def build_window(*args: Any, **kwargs: Any) -> Any:
        window = build(*args, **kwargs)
        if commands is not None:
            drive(window, Path(commands))
        return window

    app.build_window = build_window
    sys.exit(app.main(argv))
