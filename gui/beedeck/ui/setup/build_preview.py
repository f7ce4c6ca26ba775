"""Under the wizard's build choice: what the build would do, before it starts.

The same dry run as `beedeck engine build --dry-run` (``build_engine(dry_run=True)``: fetch the
source, configure, count the Ninja steps, estimate the time from the cost profile; nothing compiled)
runs on a worker, and the same lines are shown (``core.engine.build_plan``): the FlashAttention
choice, the CMake options, the targets, the steps and the minutes at this machine's ``-j``. The run
page starts it when the user picks the build, or at the first press of its start button (a build is
started only once its plan has been shown). The configured folder is the build's own, so the build
that follows starts compiling at once; a build step reached while the dry run still runs waits for it
(:meth:`when_idle`) rather than configure the same folder twice. A failed dry run shows the core's
message (it names the remedy) and the first ``CMake Error`` lines of the configure.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QWidget

from beedeck.core.engine.building import BuildResult, minutes_text, plan_lines
from beedeck.ui.setup.task_runner import TaskRunner
from beedeck.ui.wrap_label import WrapLabel

WORKING = "Working out what the build compiles: fetching the source and configuring it (nothing is compiled yet)…"
HEADING = "Build plan (what `beedeck engine build --dry-run` prints):"
FAILED = "The dry run failed, so the build would too: "


class BuildPreview(WrapLabel):
    """The dry run's lines for the build the page would start. ``dry_run(**kwargs)`` is the page's
    ``build_engine`` (called with ``dry_run=True``, on a worker); :meth:`show_plan_for` takes the
    build's arguments as the page would pass them. Hidden until a build is chosen. Signal: ``changed()``
    when a dry run starts or ends."""

    changed = Signal()

    def __init__(self, dry_run: Callable[..., Any], parent: QWidget | None = None) -> None:
        super().__init__("", parent)  # the label itself (a label in a box of its own got squeezed)
        self._dry_run = dry_run
        self.setStyleSheet("color: palette(placeholder-text);")
        self.runner = TaskRunner(self)
        self.runner.finished.connect(self._on_finished)
        self.runner.failed.connect(self._on_failed)
        self.runner.cancelled.connect(self._on_cancelled)
        self.result: Any = None  # the last dry run's BuildResult
        self._key: str | None = None  # the arguments of the plan shown or being made
        self._next: dict[str, Any] | None = None  # arguments to plan once the running dry run has stopped
        self._waiting: list[Callable[[], None]] = []
        self._errors: list[str] = []  # the configure's "CMake Error" lines and what each says
        self.hide()

    @property
    def busy(self) -> bool:
        return self.runner.is_running()

    def has_plan(self, build_args: dict[str, Any]) -> bool:
        """A dry run for these arguments has finished and its plan is shown."""
        return not self.busy and self.result is not None and self._key == _key(build_args)

    def minutes(self) -> str:
        """The shown plan's estimated time ("8 min"), "" when there is none."""
        est = self.result.estimate_s if isinstance(self.result, BuildResult) and not self.busy else None
        return minutes_text(est) if est is not None else ""

    def show_plan_for(self, build_args: dict[str, Any]) -> None:
        """Show the plan for these build arguments: the one shown if it is theirs, else a new dry run."""
        self.show()
        key = _key(build_args)
        if key == self._key:
            return
        if self.busy:  # another build's plan is being made: stop it, then make this one
            self._next = build_args
            self.runner.cancel()
            return
        self._start(build_args)

    def when_idle(self, then: Callable[[], None]) -> None:
        """Call ``then`` now, or once the running dry run has ended (it configures the build's folder)."""
        if self.busy:
            self._waiting.append(then)
        else:
            then()

    def shutdown(self) -> None:
        """The wizard closes: stop the dry run (its configure's processes) and wait for the worker."""
        self._waiting.clear()
        self._next = None
        self.runner.shutdown()

    def _start(self, build_args: dict[str, Any]) -> None:
        self._key, self._errors, self.result = _key(build_args), [], None
        self._set(WORKING, None)
        run = self._dry_run
        errors = self._errors

        def task(*, on_progress: Callable[[int, int | None], None], on_line: Callable[[str], None],
                 cancel_event: threading.Event) -> Any:
            collecting = [False]

            def line(text: str) -> None:
                # Each "CMake Error" and what it says (its indented lines), up to its call stack.
                if "CMake Error" in text:
                    collecting[0] = True
                elif text.startswith("Call Stack") or not text.startswith(" ") and text.strip():
                    collecting[0] = False
                if collecting[0] and text.strip() and len(errors) < 8:
                    errors.append(text.strip())
                on_line(text)

            return run(**build_args, dry_run=True, on_line=line, cancel_event=cancel_event)

        self.runner.start(task)
        self.changed.emit()

    def _on_finished(self, result: object) -> None:
        self.result = result
        lines = [f"chose: {n}" for n in result.notes] + plan_lines(result) if isinstance(result, BuildResult) \
            else [str(result)]
        self._set("\n".join([HEADING, *lines]), None)
        self._ended()

    def _on_failed(self, message: str) -> None:
        detail = "\n".join(e for e in self._errors if e)
        self._key = None  # a retry (choosing the build again) runs it again
        self._set(FAILED + message + (f"\n{detail}" if detail else ""), "#d62728")
        self._ended()

    def _on_cancelled(self) -> None:
        self._key = None
        self._set("", None)
        self._ended()

    def _ended(self) -> None:
        if self._next is not None:
            build_args, self._next = self._next, None
            self._start(build_args)
            return
        self.changed.emit()
        waiting, self._waiting = self._waiting, []
        for then in waiting:
            then()

    def _set(self, text: str, color: str | None) -> None:
        self.setStyleSheet(f"color: {color or 'palette(placeholder-text)'};")
        self.setText(text)


def _key(build_args: dict[str, Any]) -> str:
    return repr(sorted((k, v) for k, v in build_args.items() if k != "registry"))
