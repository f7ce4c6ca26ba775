"""``beedeck-gui --screenshot DIR``: drive the real app offscreen and save PNGs of its main screens.

With the starter engine installed it really starts llama-server and chats, so the pictures show
real output and real speed figures. The failure-panel picture shows a sample failure (labelled). The setup
wizard's pages and Settings are taken as this machine shows them (:func:`take_setup_screenshots`): its own
detection, its own Hub connection (offline: the search's message), its engines.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QEventLoop, QRect, Qt, QTimer
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication, QLineEdit, QWidget

from beedeck.core.chat.reply_facts import ReplyFacts
from beedeck.core.engine.logparse import ServerFailure
from beedeck.core.engine.server_state import ServerState
from beedeck.ui.window.main_window import MainWindow
from beedeck.ui.window.theme import apply_theme

PASTED = "What does this print?\n\nclass Point:\n    def __str__(self):\n        return 'a point'\n\nprint(Point())"


def _wait(app: QApplication, cond: Callable[[], bool], timeout_s: float) -> bool:
    """Run the event loop until ``cond()``; it sleeps between events (processEvents in a loop would spin a
    core at 100 % and take it from the engine, which is what the pictures' speed figures measure)."""
    deadline = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() > deadline:
            return False
        loop = QEventLoop()
        QTimer.singleShot(20, loop.quit)
        loop.exec()
    return True


def _save(app: QApplication, widget: QWidget, path: Path) -> None:
    app.processEvents()
    widget.grab().save(str(path))
    print(f"saved {path}")


def take_screenshots(app: QApplication, window: MainWindow, out_dir: Path, prompt: str, theme: str) -> int:
    """Drive ``window`` (built by the app, its server starting) and save the pictures into ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    window.chat.max_tokens = 160  # a CPU starter model: keep the pictures quick
    window.resize(1280, 800)
    window.show()
    started = time.monotonic()
    ready = _wait(app, lambda: window.session.server.state in (ServerState.READY, ServerState.FAILED), 300)
    ok = ready and window.session.server.state == ServerState.READY
    if not ok:
        print("the starter server did not become ready; screenshots show the failure instead")
    _save(app, window, out_dir / "main-start.png")
    if ok:
        window.new_chat()
        window.chat.input.setPlainText(prompt)
        done: list[ReplyFacts] = []
        window.chat.reply_finished.connect(done.append)
        window.chat.send()
        _wait(app, lambda: bool(done), 300)
        if done:  # the first-run figures: what a new user waits for, and the speed the gauge shows
            facts = done[0]
            print(f"first reply: {facts.tokens or '?'} tokens at {facts.tps or '?'} tokens/s, first token "
                  f"after {facts.ttft_s or '?'} s; {time.monotonic() - started:.1f} s from the window's start")
        window.chat.input.setPlainText(PASTED)  # code pasted without a fence: shown as typed
        done.clear()
        window.chat.send()
        _wait(app, lambda: bool(done), 300)
        _save(app, window, out_dir / "main-chat.png")
        _save(app, window.speed, out_dir / "speed-panel.png")
        _save(app, window.log, out_dir / "server-log.png")
        window.failure.show_failure(
            ServerFailure(
                "out_of_memory",
                "(sample) The model and its KV cache did not fit in the GPU's memory.",
                "Lower the context size, pick a smaller quant, or use a q8_0 KV cache.",
                exit_code=1,
                log_tail=["llama_kv_cache: failed to allocate buffer for kv cache"],
            )
        )
        _save(app, window, out_dir / "failure-panel.png")
        window.failure.hide()
        other = "light" if theme == "dark" else "dark"
        apply_theme(app, other)  # as View → Theme does: every widget and the open transcript follow at once
        _save(app, window, out_dir / f"main-chat-{other}.png")
        # The smallest common laptop screen (a 40-px panel): the window a first run opens there, whole
        window.fit_screen(QRect(0, 0, 1366, 768 - 40))
        _save(app, window, out_dir / f"main-1366x768-{other}.png")
        apply_theme(app, theme)
        _save(app, window, out_dir / "main-1366x768.png")
    take_setup_screenshots(app, window, out_dir)
    window.close()  # stops the server: nothing is left running
    return 0 if ok else 1


HUB_EXAMPLE = "unsloth/Qwen3.6-27B-GGUF"  # what the wizard's Hub search is shown sizing


def take_setup_screenshots(app: QApplication, window: MainWindow, out_dir: Path) -> None:
    """The setup wizard's three pages and Settings, as this machine shows them: page 1 with what was detected
    (the RAM, cores and disk too), page 2 after Enter in the Hub search (it stays on the page with the answer),
    page 3 with the engine choices and their reasons; Settings on the window's profile, and again with a model
    file that is not there (Launch and Save greyed, the reason beside them)."""
    from beedeck.ui.launch import settings_dialog
    from beedeck.ui.setup import setup_wizard

    out_dir.mkdir(parents=True, exist_ok=True)
    wizard = setup_wizard.open_dialog(window.session, window)
    wizard.show()
    wizard.restart()
    detect = wizard.detect_page
    _wait(app, lambda: detect.report is not None, 60)
    gpu = detect.report is not None and detect.report.has_gpu
    _save(app, wizard, out_dir / ("wizard-1-detected.png" if gpu else "wizard-1-no-gpu.png"))
    wizard.next()
    page = wizard.recommend_page
    _wait(app, lambda: page.choice is not None, 120)
    search = page.hub_search
    search.field.setText(HUB_EXAMPLE)
    search.field.setFocus()
    QTest.keyClick(search.field, Qt.Key.Key_Return)
    _wait(app, lambda: search.button.isEnabled(), 120)  # answered (sized, or why not)
    _save(app, wizard, out_dir / ("wizard-2-recommend.png" if gpu else "wizard-2-starter.png"))
    wizard.next()
    run = wizard.run_page
    _wait(app, lambda: run.choice.offers is not None, 120)
    _save(app, wizard, out_dir / "wizard-3-run.png")
    wizard.reject()
    dialog = settings_dialog.open_dialog(window.session, window)
    dialog.show()
    dialog.resize(*settings_dialog.PREFERRED_SIZE)  # the offscreen screen is smaller than a real one
    if not dialog.engine_path():  # no profile yet (a first run): the Preset list's way back to the starter
        dialog.use_starter()
    _wait(app, lambda: dialog.caps is not None and dialog.devices is not None
          and dialog.form.memory_bar.plan is not None, 60)  # probed, detected, the model's header read
    _save(app, dialog, out_dir / "settings-dialog.png")
    target = dialog.form.widgets["target"]
    if isinstance(target, QLineEdit) and target.text():  # a model file that is not there: Launch and Save say why
        target.setText(str(Path(target.text()).with_name("moved-away.gguf")))
        target.textEdited.emit(target.text())
        _save(app, dialog, out_dir / "settings-cannot-launch.png")
    dialog.reject()
