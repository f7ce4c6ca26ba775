"""Light and dark palettes on the Fusion style; "system" follows the desktop's colour scheme.

A switch applies to every widget at once: a style sheet that names ``palette(...)`` roles resolves
them when it is polished, so each widget with a style sheet is polished again after the palette
changes (the starter banner, the message box, the failure panel...). The transcript re-renders its
code colours itself on the palette change (``ChatView.changeEvent``).
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QGuiApplication, QPalette
from PySide6.QtWidgets import QApplication


def dark_palette() -> QPalette:
    pal = QPalette()
    colors = {
        QPalette.ColorRole.Window: "#202124",
        QPalette.ColorRole.WindowText: "#e8eaed",
        QPalette.ColorRole.Base: "#17181a",
        QPalette.ColorRole.AlternateBase: "#2a2b2e",
        QPalette.ColorRole.ToolTipBase: "#2a2b2e",
        QPalette.ColorRole.ToolTipText: "#e8eaed",
        QPalette.ColorRole.Text: "#e8eaed",
        QPalette.ColorRole.Button: "#2d2e31",
        QPalette.ColorRole.ButtonText: "#e8eaed",
        QPalette.ColorRole.BrightText: "#ffffff",
        QPalette.ColorRole.Highlight: "#e0a100",
        QPalette.ColorRole.HighlightedText: "#17181a",
        QPalette.ColorRole.Link: "#8ab4f8",
        QPalette.ColorRole.PlaceholderText: "#9aa0a6",
        QPalette.ColorRole.Mid: "#5f6368",
    }
    for role, value in colors.items():
        pal.setColor(role, QColor(value))
    for role in (QPalette.ColorRole.Text, QPalette.ColorRole.ButtonText, QPalette.ColorRole.WindowText):
        pal.setColor(QPalette.ColorGroup.Disabled, role, QColor("#6f7378"))
    return pal


def apply_theme(app: QApplication, theme: str) -> None:
    """Fusion everywhere; the palette follows the system's light/dark scheme unless forced."""
    app.setStyle("Fusion")
    if theme == "system":
        dark = QGuiApplication.styleHints().colorScheme() == Qt.ColorScheme.Dark
    else:
        dark = theme == "dark"
    if dark:
        app.setPalette(dark_palette())
    else:
        pal = app.style().standardPalette()
        pal.setColor(QPalette.ColorRole.Highlight, QColor("#c98a00"))
        app.setPalette(pal)
    for widget in app.allWidgets():
        sheet = widget.styleSheet()
        if sheet:
            widget.setStyleSheet("")
            widget.setStyleSheet(sheet)
