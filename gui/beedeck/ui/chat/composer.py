"""The message box: keys as in other chat apps, a visible focus ring, and Esc out of edit mode.

Enter sends and Shift+Enter starts a new line (``enter_sends`` False: Enter is a new line); Ctrl+Enter
sends in both modes. Tab moves the focus on instead of typing a tab. Only plain key presses are
acted on: while an input method composes (a pre-edit string is showing), Enter belongs to it.

The box grows with its text, from :data:`MIN_LINES` to :data:`MAX_LINES` lines (then it scrolls), so
an empty box leaves the window's height to the transcript.
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, Qt, Signal
from PySide6.QtGui import QFocusEvent, QInputMethodEvent, QKeyEvent, QResizeEvent
from PySide6.QtWidgets import QPlainTextEdit, QWidget

# The ring uses palette roles, so it reads in light and dark themes alike; the unfocused border is
# set too, because a style sheet that styles only :focus would switch the frame's style on focus.
FOCUS_STYLE = (
    "QPlainTextEdit#composer { border: 1px solid palette(mid); border-radius: 4px; padding: 2px; }"
    "QPlainTextEdit#composer:focus { border: 2px solid palette(highlight); padding: 1px; }"
)
_ENTER_KEYS = (Qt.Key.Key_Return, Qt.Key.Key_Enter)
MIN_LINES, MAX_LINES = 2, 10


class ChatInput(QPlainTextEdit):
    """The chat pane's input box.

    Signals: ``send_requested()`` the send key was pressed; ``cancel_requested()`` Esc while
    :attr:`editing` (the pane leaves edit mode).
    """

    send_requested = Signal()
    cancel_requested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("composer")
        self.setTabChangesFocus(True)
        self.setStyleSheet(FOCUS_STYLE)
        self.editing = False  # Esc leaves edit mode (otherwise Esc is the window's: stop the reply)
        self._preedit = False  # an input method is composing (its pre-edit text shows)
        self._enter_sends = True
        self.set_enter_sends(True)
        self.document().documentLayout().documentSizeChanged.connect(lambda _size: self._fit_height())
        self._fit_height()

    def lines_shown(self) -> int:
        """Lines of text the box is tall enough for now (its text's wrapped lines, within the limits)."""
        return max(MIN_LINES, min(MAX_LINES, int(self.document().size().height())))

    def _fit_height(self) -> None:
        margins = self.contentsMargins()
        doc_margin = self.document().documentMargin()
        height = (self.lines_shown() * self.fontMetrics().lineSpacing() + 2 * doc_margin
                  + margins.top() + margins.bottom() + 6)
        if self.height() != int(height) or self.minimumHeight() != int(height):
            self.setFixedHeight(int(height))

    def resizeEvent(self, e: QResizeEvent) -> None:
        super().resizeEvent(e)
        self._fit_height()  # a narrower box wraps its text onto more lines

    @property
    def enter_sends(self) -> bool:
        return self._enter_sends

    def set_enter_sends(self, enter_sends: bool) -> None:
        """True: Enter sends, Shift+Enter is a new line. False: Enter is a new line. Ctrl+Enter always sends."""
        self._enter_sends = enter_sends
        self.setPlaceholderText(
            "Message… (Enter to send, Shift+Enter for a new line)" if enter_sends
            else "Message… (Ctrl+Enter to send)"
        )

    def send_keys(self) -> str:
        """The key that sends, as the hints name it."""
        return "Enter" if self._enter_sends else "Ctrl+Enter"

    def inputMethodEvent(self, e: QInputMethodEvent) -> None:
        self._preedit = bool(e.preeditString())
        super().inputMethodEvent(e)

    def focusOutEvent(self, e: QFocusEvent) -> None:
        self._preedit = False  # leaving the box ends (commits or drops) any composition
        super().focusOutEvent(e)

    def _action(self, e: QKeyEvent) -> str:
        """What a key press means here: "send", "newline", "cancel" or "" (the editor's default)."""
        if self._preedit:  # composing: the keys are the input method's, acted on by the editor alone
            return ""
        mods = e.modifiers() & ~Qt.KeyboardModifier.KeypadModifier
        if e.key() in _ENTER_KEYS:
            if mods == Qt.KeyboardModifier.ControlModifier:
                return "send"
            if mods == Qt.KeyboardModifier.NoModifier:
                return "send" if self._enter_sends else ""
            if mods == Qt.KeyboardModifier.ShiftModifier:
                return "newline"
        if e.key() == Qt.Key.Key_Escape and mods == Qt.KeyboardModifier.NoModifier and self.editing:
            return "cancel"
        return ""

    def event(self, e: QEvent) -> bool:
        # Claim the keys handled here before a window shortcut (Ctrl+Enter: send, Esc: stop) takes them.
        if e.type() == QEvent.Type.ShortcutOverride and isinstance(e, QKeyEvent) and self._action(e):
            e.accept()
            return True
        return super().event(e)

    def keyPressEvent(self, e: QKeyEvent) -> None:
        action = self._action(e)
        if action == "send":
            if not e.isAutoRepeat():  # a held Enter sends once, and types nothing
                self.send_requested.emit()
        elif action == "newline":
            # A real paragraph: QPlainTextEdit's own Shift+Enter inserts U+2028, a line separator.
            self.insertPlainText("\n")
            self.ensureCursorVisible()
        elif action == "cancel":
            self.cancel_requested.emit()
        else:
            super().keyPressEvent(e)
            return
        e.accept()
