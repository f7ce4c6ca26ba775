"""The window on a 1366x768 laptop (issue 22): the transcript gets most of the height (server log hidden
until asked for, a one-line starter banner, a message box that grows with its text), the menus show
their keys, and the Connect dialog shows all of its text."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6 import QtGui
from PySide6.QtCore import QRect, QSize, Qt
from PySide6.QtGui import QKeySequence, QScreen, QTextDocument
from PySide6.QtWidgets import QApplication, QLabel, QToolButton, QToolTip
from pytestqt.qtbot import QtBot

from beedeck.core.chat.store import ChatStore
from beedeck.core.engine.caps import EngineCaps, Generation
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.mode import Mode
from beedeck.core.engine.server_state import ServerState
from beedeck.core.engine.speculation.standby import LOADED_BESIDE, RESTARTED
from beedeck.core.starter import STARTER_NOTE
from beedeck.ui.chat.composer import MAX_LINES
from beedeck.ui.screen_fit import FRAME_H, FRAME_W
from beedeck.ui.window.connect_dialog import ConnectDialog
from beedeck.ui.window.main_window import MainWindow
from beedeck.ui.window.menus import next_mode
from beedeck.ui.window.shortcuts_dialog import shortcut_rows
from tests.ui.window.test_first_hour import NO_GPU, starter_profile
from tests.ui.window.test_integration import RecordingController


def laptop_window(qtbot: QtBot) -> MainWindow:
    window = MainWindow(ChatStore(), RecordingController())
    qtbot.addWidget(window)
    window.resize(1366, 768 - 40 - 30)  # a 40-px taskbar and a title bar
    window.show()
    qtbot.waitExposed(window)
    window.session.set_profile(starter_profile())
    window.session.set_hardware(NO_GPU)
    QApplication.processEvents()
    return window


def test_the_transcript_gets_most_of_a_1366x768_window(qtbot: QtBot, beedeck_home: Path) -> None:
    window = laptop_window(qtbot)
    assert window.log.isHidden()  # a fresh start: the server log waits in View → Server log
    assert window.starter_banner.isVisible() and window.starter_banner.height() <= 40  # one line
    line = window.chat.input.fontMetrics().lineSpacing()
    empty = window.chat.input.height()
    assert empty <= 3 * line + 16  # an empty box is about two lines tall
    assert window.chat.view.height() >= 0.6 * window.height(), (window.chat.view.height(), window.height())
    window.chat.input.setPlainText("\n".join(f"line {i}" for i in range(5)))
    QApplication.processEvents()
    assert window.chat.input.height() >= empty + 2 * line  # it grows with its text...
    window.chat.input.setPlainText("\n".join(f"line {i}" for i in range(40)))
    QApplication.processEvents()
    assert window.chat.input.height() <= (MAX_LINES + 1) * line + 16  # ...up to a limit, then scrolls
    window.chat.input.clear()
    QApplication.processEvents()
    assert window.chat.input.height() == empty
    window.close()


def test_menus_show_the_keys_of_start_stop_regenerate_and_the_mode_toggle(qtbot: QtBot, beedeck_home: Path) -> None:
    window = laptop_window(qtbot)
    keys = {a.text(): a.shortcut().toString() for menu in window.menuBar().actions() for a in menu.menu().actions()}
    assert keys["Start"] == "F5" and keys["Stop"] == "Shift+F5"
    assert keys["Regenerate the last reply"] == "Ctrl+R" and keys["Next speculation mode"] == "Ctrl+M"
    assert "New chat\tCtrl+N" in keys and "Stop the reply\tEsc" in keys  # the window's own shortcuts, shown
    registered = [a.shortcut() for menu in window.menuBar().actions() for a in menu.menu().actions()
                  if not a.shortcut().isEmpty()] + [s.key() for s in window.shortcuts]
    assert len(registered) == len({k.toString() for k in registered})  # no key twice: it would fire neither
    assert QKeySequence("Ctrl+R") in registered and QKeySequence("Ctrl+M") in registered
    window.close()


def test_next_mode_goes_round_the_modes_this_setup_can_run(qtbot: QtBot, tmp_path: Path) -> None:
    from tests.ui.speculation.sessions import bind, make_session, restart_done

    session = make_session(tmp_path)
    toggle = bind(qtbot, session)
    binary = tmp_path / "llama-server"
    binary.write_text("#!/bin/sh\n")
    caps = EngineCaps(path=str(binary), generation=Generation.MAINLINE, spec_types=("draft-dflash", "ngram-mod"),
                      flags=frozenset({"--spec-type"}))
    session.switching.configure(LaunchSettings(target="/m/t.gguf"), caps)
    assert toggle.offered() == ["baseline", "model-free"] and session.switch.mode == "baseline"
    with qtbot.waitSignal(session.switching.restarting):
        assert next_mode(session) is True  # the same path as a click: a restart into N-gram
    restart_done(session)
    assert session.switch.mode == "model-free"


def test_the_connect_dialog_shows_all_of_its_text_and_fits_a_768_px_screen(qtbot: QtBot) -> None:
    dialog = ConnectDialog()
    qtbot.addWidget(dialog)
    dialog.show()
    qtbot.waitExposed(dialog)
    note = dialog.note
    needed = note.fontMetrics().boundingRect(0, 0, note.width(), 10_000, Qt.TextFlag.TextWordWrap, note.text())
    assert note.height() >= needed.height()  # not clipped
    assert dialog.height() < 768 - 80 and dialog.width() <= 700


def test_the_starter_note_is_never_cut_the_prompt_chips_give_way(qtbot: QtBot, beedeck_home: Path) -> None:
    """At 1366x768 (and in a 1280-px window's chat column) the note and the two ways to a real model show
    whole; the prompt chips that do not fit beside them go, last first (the note read "Starter: ti")."""
    window = laptop_window(qtbot)
    banner = window.starter_banner
    for width in (1366, 1280, 1024):
        window.resize(width, 768 - 40 - 30)
        QApplication.processEvents()
        assert banner.height() <= 40  # still one line
        assert banner.text.width() >= banner.text.sizeHint().width(), width  # the note whole
        for button in (banner.wizard_button, banner.settings_button):
            assert button.isVisible() and button.width() >= button.sizeHint().width(), width
        shown = [c.isVisible() for c in banner.chips]
        assert shown == sorted(shown, reverse=True), (width, shown)  # the first chips stay, in order
        assert any(shown) or width < 1280, width  # a laptop's line keeps a prompt to try
        visible = [w for w in (banner.text, banner.try_label, *banner.chips, banner.wizard_button,
                               banner.settings_button, banner.dismiss_button) if w.isVisible()]
        for a, b in zip(visible, visible[1:], strict=False):
            assert a.geometry().right() < b.geometry().left(), (width, a, b)  # side by side, none overlaps
    window.close()


@pytest.mark.parametrize("screen", [QRect(0, 0, 1366, 768 - 40), QRect(0, 24, 1280, 800 - 24 - 40)])
def test_a_fresh_window_opens_inside_the_screens_free_area(qtbot: QtBot, beedeck_home: Path,
                                                           monkeypatch: pytest.MonkeyPatch, screen: QRect) -> None:
    """A first run (no saved geometry) on a 1366x768 laptop with a 40-px panel asked for 1280x800: Send, Stop,
    Regenerate and the status bar sat below the screen's edge until the user maximised the window."""
    monkeypatch.setattr(QScreen, "availableGeometry", lambda _screen: QRect(screen))
    window = MainWindow(ChatStore(), RecordingController())
    qtbot.addWidget(window)
    window.show()
    qtbot.waitExposed(window)
    window.session.set_profile(starter_profile())
    QApplication.processEvents()
    # From where the window's frame begins, its client area with the title bar and borders a WM adds
    outer = QRect(window.frameGeometry().topLeft(), window.size() + QSize(FRAME_W, FRAME_H))
    assert screen.contains(outer), (outer, screen)
    for widget in (window.chat.send_button, window.chat.stop_button, window.chat.regen_button, window.statusBar()):
        corner = widget.mapTo(window, widget.rect().bottomRight())
        assert widget.isVisible() and window.rect().contains(corner), widget  # laid out inside the window
    window.close()


def tip_size(tip: str) -> QSize:
    """The size Qt gives a tooltip on a screen wider than it (QTipLabel: word wrap for rich text only)."""
    label = QLabel()
    label.setFont(QToolTip.font())
    label.setWordWrap(QtGui.Qt.mightBeRichText(tip))  # QtGui's Qt namespace has it, QtCore's not
    label.setText(tip)
    return label.sizeHint()


def test_the_starter_banners_tooltip_wraps(qtbot: QtBot, beedeck_home: Path) -> None:
    """It was one plain line about 1,500 px wide (on a 1600-px screen Qt does not wrap it)."""
    window = laptop_window(qtbot)
    tip = window.starter_banner.toolTip()
    assert tip_size(tip).width() <= 600, tip_size(tip)
    doc = QTextDocument()
    doc.setHtml(tip)
    shown = doc.toPlainText()
    assert STARTER_NOTE in shown and "No NVIDIA GPU in use: the NVIDIA driver is not installed" in shown
    window.close()


def test_a_switchs_report_leaves_the_toolbar_whole_and_goes_at_stop_or_when_old(qtbot: QtBot,
                                                                                beedeck_home: Path) -> None:
    """"N-gram: loaded the server … beside the other in 3.2 s; both stay loaded, so switching back loads nothing"
    pushed "API" and Copy into the toolbar's overflow at 1366 px and stayed there for ever, after Stop too."""
    window = laptop_window(qtbot)
    s = window.session
    binary = beedeck_home / "llama-server"
    binary.parent.mkdir(parents=True, exist_ok=True)
    binary.write_text("#!/bin/sh\n")
    caps = EngineCaps(path=str(binary), generation=Generation.MAINLINE, spec_types=("ngram-mod",),
                      flags=frozenset({"--spec-type"}))
    s.switching.configure(LaunchSettings(target="/m/t.gguf"), caps)
    s.server._set_state(ServerState.READY)
    s.controller.ready.emit("http://127.0.0.1:8477")
    assert s.request_mode(Mode.MODEL_FREE)
    s.server.last_switch = LOADED_BESIDE
    s.controller.ready.emit("http://127.0.0.1:8477")  # the N-gram server is ready beside the other
    QApplication.processEvents()
    line = window.mode.status
    assert "both stay loaded" in s.switch.status
    assert "both stay loaded" in line.text() + line.toolTip()  # shown, whole or in its tooltip
    extension = window.toolbar.findChild(QToolButton, "qt_toolbar_ext_button")
    assert window.endpoint.isVisible() and window.endpoint.copy_button.isVisible()
    assert extension is None or not extension.isVisible()  # nothing went into the overflow menu
    s.stop_server()
    QApplication.processEvents()
    assert line.text() == "" and s.switch.status == ""  # both servers are gone, so is the line saying they stay
    # A report goes on its own too, once old
    s.switching.news_ms = 50
    s.server._set_state(ServerState.READY)
    assert s.request_mode(Mode.BASELINE)
    s.server.last_switch = RESTARTED
    s.controller.ready.emit("http://127.0.0.1:8477")
    QApplication.processEvents()  # laid out again for its new width
    assert line.text() == "Baseline: restarted the server without speculation in 0.0 s"
    qtbot.waitUntil(lambda: line.text() == "", timeout=2000)
    assert window.mode.button(Mode.BASELINE) is not None and window.mode.button(Mode.BASELINE).isChecked()
    window.close()


def test_the_chat_can_be_exported_from_the_menus_and_by_key(qtbot: QtBot, beedeck_home: Path, tmp_path: Path) -> None:
    """Issue 37: Export was only in the chat list's right-click menu."""
    window = laptop_window(qtbot)
    window.open_latest_chat()
    cid = window.chat.conversation_id
    assert cid is not None
    window.store.add_message(cid, "user", "What is a list?")
    asked: list[str] = []
    window.conversations.ask_save_path = lambda suggested: asked.append(suggested) or str(tmp_path / suggested)
    file_menu = next(a.menu() for a in window.menuBar().actions() if a.text() == "&File")
    entries = {a.text(): a for a in file_menu.actions()}
    markdown, json_entry = entries["Export this chat as Markdown…"], entries["Export this chat as JSON…"]
    assert markdown.shortcut() == QKeySequence("Ctrl+E")
    markdown.trigger()
    assert asked == ["New chat.md"] and "What is a list?" in (tmp_path / "New chat.md").read_text()
    json_entry.trigger()
    assert asked[-1] == "New chat.json" and "What is a list?" in (tmp_path / "New chat.json").read_text()
    assert "New chat.json" in window.statusBar().currentMessage()  # where it went
    assert ("Ctrl+E", "Export this chat as Markdown") in shortcut_rows(True)
    window.close()
