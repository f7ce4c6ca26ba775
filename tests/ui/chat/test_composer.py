"""The message box: Enter / Shift+Enter / Ctrl+Enter as in other chat apps, Tab out, input methods left
alone, a visible focus ring, and the window's own shortcuts (Ctrl+Enter, Esc) not sending twice."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QImage, QInputMethodEvent, QKeySequence, QShortcut
from PySide6.QtWidgets import QApplication, QVBoxLayout, QWidget
from pytestqt.qtbot import QtBot

from beedeck.core.chat.store import ChatStore
from beedeck.core.engine.client import LlamaClient
from beedeck.ui.chat.chat_pane import ChatPane
from tests.fakes.sse_server import FakeLlamaServer
from tests.ui.chat.test_chat_pane import make_pane

ENTER = Qt.Key.Key_Return
CTRL = Qt.KeyboardModifier.ControlModifier
SHIFT = Qt.KeyboardModifier.ShiftModifier


def chat_requests(server: FakeLlamaServer) -> int:
    return sum(r.method == "POST" for r in server.requests)


def focused(qtbot: QtBot, pane: ChatPane) -> None:
    pane.activateWindow()
    qtbot.waitUntil(pane.isActiveWindow, timeout=2000)
    pane.input.setFocus()
    qtbot.waitUntil(pane.input.hasFocus, timeout=2000)


def test_enter_sends_and_shift_enter_starts_a_new_line(
    qtbot: QtBot, store: ChatStore, fake_server: FakeLlamaServer, client: LlamaClient
) -> None:
    pane = make_pane(qtbot, store, client)
    qtbot.keyClicks(pane.input, "first line")
    qtbot.keyClick(pane.input, ENTER, SHIFT)
    qtbot.keyClicks(pane.input, "second line")
    assert pane.input.toPlainText() == "first line\nsecond line" and not pane.is_generating()
    with qtbot.waitSignal(pane.reply_finished, timeout=15_000):
        qtbot.keyClick(pane.input, ENTER)
    assert [m.content for m in store.messages(pane.conversation_id)][0] == "first line\nsecond line"  # type: ignore[arg-type]
    assert pane.input.toPlainText() == ""
    assert "Enter to send" in pane.input.placeholderText() and pane.send_button.toolTip() == "Send (Enter)"


def test_with_enter_sends_off_enter_is_a_new_line_and_ctrl_enter_sends(
    qtbot: QtBot, store: ChatStore, fake_server: FakeLlamaServer, client: LlamaClient
) -> None:
    pane = make_pane(qtbot, store, client)
    pane.set_enter_sends(False)
    qtbot.keyClicks(pane.input, "a")
    qtbot.keyClick(pane.input, ENTER)
    qtbot.keyClick(pane.input, ENTER, SHIFT)
    qtbot.keyClicks(pane.input, "b")
    assert pane.input.toPlainText() == "a\n\nb" and not pane.is_generating()
    assert pane.send_button.toolTip() == "Send (Ctrl+Enter)" and "Ctrl+Enter" in pane.input.placeholderText()
    with qtbot.waitSignal(pane.reply_finished, timeout=15_000):
        qtbot.keyClick(pane.input, ENTER, CTRL)
    assert chat_requests(fake_server) == 1


def test_ctrl_enter_sends_with_enter_sends_on_too(
    qtbot: QtBot, store: ChatStore, fake_server: FakeLlamaServer, client: LlamaClient
) -> None:
    pane = make_pane(qtbot, store, client)
    qtbot.keyClicks(pane.input, "hi")
    with qtbot.waitSignal(pane.reply_finished, timeout=15_000):
        qtbot.keyClick(pane.input, Qt.Key.Key_Enter, CTRL | Qt.KeyboardModifier.KeypadModifier)
    assert chat_requests(fake_server) == 1 and pane.input.toPlainText() == ""


def test_the_window_shortcuts_do_not_send_twice_or_steal_esc_from_edit_mode(
    qtbot: QtBot, store: ChatStore, fake_server: FakeLlamaServer, client: LlamaClient
) -> None:
    """In the window, Ctrl+Enter and Esc are also window shortcuts (send, stop): the box claims them."""
    window = QWidget()
    qtbot.addWidget(window)
    pane = ChatPane(store)
    QVBoxLayout(window).addWidget(pane)
    fired: list[str] = []
    for keys, name in (("Ctrl+Return", "send"), (QKeySequence(Qt.Key.Key_Escape), "stop")):
        sc = QShortcut(QKeySequence(keys), window)
        sc.setContext(Qt.ShortcutContext.WindowShortcut)
        sc.activated.connect(lambda name=name: fired.append(name))
    window.show()
    pane.set_client(client)
    pane.new_conversation()
    qtbot.keyClicks(pane.input, "once")
    with qtbot.waitSignal(pane.reply_finished, timeout=15_000):
        qtbot.keyClick(pane.input, ENTER, CTRL)
    assert chat_requests(fake_server) == 1 and fired == []
    first = store.messages(pane.conversation_id)[0]  # type: ignore[arg-type]
    pane.begin_edit(first.id)
    qtbot.keyClick(pane.input, Qt.Key.Key_Escape)
    assert not pane.is_editing() and fired == []
    qtbot.keyClick(pane.input, Qt.Key.Key_Escape)  # outside edit mode Esc is the window's (stop)
    assert fired == ["stop"]


def test_enter_during_input_method_composition_is_left_to_the_input_method(
    qtbot: QtBot, store: ChatStore, fake_server: FakeLlamaServer, client: LlamaClient
) -> None:
    pane = make_pane(qtbot, store, client)
    pane.input.insertPlainText("日本")
    QApplication.sendEvent(pane.input, QInputMethodEvent("ご", []))  # composing: a pre-edit string shows
    qtbot.keyClick(pane.input, ENTER)
    qtbot.keyClick(pane.input, ENTER, CTRL)
    assert not pane.is_generating() and store.messages(pane.conversation_id) == []  # type: ignore[arg-type]
    commit = QInputMethodEvent()
    commit.setCommitString("語")
    QApplication.sendEvent(pane.input, commit)
    with qtbot.waitSignal(pane.reply_finished, timeout=15_000):
        qtbot.keyClick(pane.input, ENTER)
    sent = store.messages(pane.conversation_id)[0].content  # type: ignore[arg-type]
    assert sent.startswith("日本") and sent.endswith("語")


def test_tab_moves_the_focus_on_instead_of_typing_a_tab(qtbot: QtBot, store: ChatStore) -> None:
    pane = make_pane(qtbot, store, None)
    focused(qtbot, pane)
    qtbot.keyClicks(pane.input, "x")
    qtbot.keyClick(pane.input, Qt.Key.Key_Tab)
    assert pane.input.toPlainText() == "x"
    qtbot.waitUntil(lambda: not pane.input.hasFocus(), timeout=2000)


def highlight_pixels(img: QImage, color: QColor) -> int:
    """Pixels of ``color`` along the top edge and the left edge (where a border is drawn)."""
    near = 40

    def close(c: QColor) -> bool:
        return abs(c.red() - color.red()) + abs(c.green() - color.green()) + abs(c.blue() - color.blue()) < near

    edge = [(x, y) for x in range(img.width()) for y in range(3)]
    edge += [(x, y) for y in range(img.height()) for x in range(3)]
    return sum(close(img.pixelColor(x, y)) for x, y in edge)


def test_the_focused_message_box_has_a_visible_ring_in_light_and_dark_palettes(
    qtbot: QtBot, store: ChatStore
) -> None:
    pane = make_pane(qtbot, store, None)
    for dark in (False, True):
        pal = pane.palette()
        if dark:
            pal.setColor(pal.ColorRole.Base, QColor("#1e1e1e"))
            pal.setColor(pal.ColorRole.Window, QColor("#2b2b2b"))
            pal.setColor(pal.ColorRole.Highlight, QColor("#e0a100"))
        pane.setPalette(pal)
        ring = pane.input.palette().color(pal.ColorRole.Highlight)
        focused(qtbot, pane)
        with_focus = highlight_pixels(pane.input.grab().toImage(), ring)
        pane.system_prompt.setFocus()
        qtbot.waitUntil(lambda: not pane.input.hasFocus(), timeout=2000)
        without = highlight_pixels(pane.input.grab().toImage(), ring)
        assert with_focus > 200 and without == 0, (dark, with_focus, without)
