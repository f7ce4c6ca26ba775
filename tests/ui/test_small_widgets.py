"""Endpoint label and failure panel."""

from __future__ import annotations

from PySide6 import QtGui
from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication, QTextDocument
from PySide6.QtWidgets import QLabel
from pytestqt.qtbot import QtBot

from beedeck.core.engine.argv import LaunchRefused, Refusal
from beedeck.core.engine.logparse import ServerFailure
from beedeck.ui.engine.endpoint_label import EndpointLabel
from beedeck.ui.engine.failure_panel import FailurePanel, code_words


def test_endpoint_label_copies_the_v1_url(qtbot: QtBot) -> None:
    w = EndpointLabel()
    qtbot.addWidget(w)
    assert not w.copy_button.isEnabled()
    w.set_base_url("http://127.0.0.1:8123")
    assert w.endpoint() == "http://127.0.0.1:8123/v1"
    w.copy_button.click()
    assert QGuiApplication.clipboard().text() == "http://127.0.0.1:8123/v1"


def test_failure_panel_shows_what_why_and_remedy(qtbot: QtBot) -> None:
    p = FailurePanel()
    qtbot.addWidget(p)
    assert p.isHidden()
    f = ServerFailure("port_in_use", "Port 8080 is already in use.", "Pick another port or stop the other server.",
                      exit_code=1, log_tail=["a", "b", "couldn't bind HTTP server socket"])
    p.show_failure(f)
    assert not p.isHidden()
    assert "(the port is taken)" in p.title.text() and "port_in_use" not in p.title.text()
    assert "Port 8080 is already in use." in p.what.text()
    assert "Pick another port" in p.remedy.text()
    assert "exit code 1" in p.detail.text() and "couldn't bind" in p.detail.text()
    with qtbot.waitSignal(p.retry_requested):
        p.retry_button.click()
    # A refused launch: one refusal reads as any failure (its message, its remedy); several are listed.
    spec = Refusal("unknown_argument", "--spec-type dflash is not known to this engine.", "Pick a BeeLlama build.")
    p.show_failure(LaunchRefused([spec]))
    assert "is not known to this engine" in p.what.text() and "Pick a BeeLlama build" in p.remedy.text()
    p.show_failure(LaunchRefused([spec, Refusal("model_missing", "The target model /m/x.gguf does not exist.",
                                                "Check the path.")]))
    assert "• --spec-type dflash is not known to this engine. Pick a BeeLlama build." in p.remedy.text()
    assert "• The target model /m/x.gguf does not exist. Check the path." in p.remedy.text()
    p.close_button.click()
    assert p.isHidden()


def shown(label: QLabel) -> str:
    """What a label shows: its text as rich text where Qt renders it so, else as it is."""
    fmt, text = label.textFormat(), label.text()
    rich = fmt == Qt.TextFormat.RichText or (fmt == Qt.TextFormat.AutoText and QtGui.Qt.mightBeRichText(text))
    doc = QTextDocument()
    doc.setHtml(text) if rich else doc.setPlainText(text)
    return doc.toPlainText()


def test_the_failure_panel_shows_text_as_it_was_written(qtbot: QtBot) -> None:
    """The Disconnected panel showed "BeeDeck&#x27;s own server": the text was HTML-escaped, apostrophe
    included, into a label that took it for plain text. Whatever the text holds, it shows as written, and a
    list of refusals keeps a line each."""
    p = FailurePanel()
    qtbot.addWidget(p)
    p.show_notice("Disconnected", "The server at http://10.0.0.2:8080 keeps running where it is.",
                  "Connect again, or go back to BeeDeck's own server.", True)
    assert shown(p.remedy) == "Connect again, or go back to BeeDeck's own server."
    assert shown(p.what) == "The server at http://10.0.0.2:8080 keeps running where it is."
    assert shown(p.title) == "Disconnected"
    p.show_failure(ServerFailure("bad_value", "The value <auto> & 'q8_0' isn't one this build takes.",
                                 "First line.\nSecond line."), "A <new> title")
    assert shown(p.what) == "What happened: The value <auto> & 'q8_0' isn't one this build takes."
    assert shown(p.remedy).splitlines() == ["What to change: First line.", "Second line."]
    assert shown(p.title).startswith("A <new> title")


def test_failure_titles_say_words_for_every_code_beedeck_raises(qtbot: QtBot) -> None:
    """The issue: titles showed "(model_missing)" and "(remote:refused)". Every code of the known-issue
    table, of the launch guard and log reader, and every kind of remote failure has words; an unknown
    code or a plain exception shows no bracket at all (a class name says nothing to a user)."""
    import json
    import re
    from pathlib import Path

    from beedeck.core import paths
    from beedeck.core.engine import logparse, remote, server
    from beedeck.core.engine.remote import RemoteError
    from beedeck.core.models import guard

    table = json.loads(paths.resource_path("known-issues.json").read_text())
    codes = {row["code"] for row in table["issues"]}
    for module in (logparse, guard, server):  # the codes these modules raise, read from their source
        source = Path(module.__file__ or "").read_text()
        codes |= set(re.findall(r'(?:fail|_refuse)\(\s*"([a-z_]+)"', source))
        codes |= set(re.findall(r'ServerFailure\(\s*"([a-z_]+)"', source))
    codes |= {f"remote:{kind}" for kind in (remote.BAD_URL, remote.REFUSED, remote.DNS, remote.UNREACHABLE,
                                             remote.TIMEOUT, remote.KEY_MISSING, remote.KEY_WRONG, remote.NOT_LLAMA,
                                             remote.LOADING, remote.HTTP_ERROR)}
    assert {"model_missing", "not_gguf", "crashed_signal", "remote:refused"} <= codes
    assert [c for c in sorted(codes) if not code_words(c)] == []
    p = FailurePanel()
    qtbot.addWidget(p)
    p.show_failure(RemoteError(remote.REFUSED, "Nothing listens at http://127.0.0.1:9.", "Start it."),
                   title="The server could not be reached")
    assert "(nothing answers at that address)" in p.title.text() and "remote:" not in p.title.text()
    p.show_failure(ServerFailure("model_missing", "The target model /x.gguf does not exist.", "Check the path."))
    assert "(model file not found)" in p.title.text()
    p.show_failure(ValueError("something odd"))
    assert "(" not in p.title.text() and "ValueError" not in p.title.text()
