"""Endpoint label and failure panel."""

from __future__ import annotations

from PySide6.QtGui import QGuiApplication
from pytestqt.qtbot import QtBot

from beedeck.core.engine.argv import LaunchRefused
from beedeck.core.engine.logparse import ServerFailure
from beedeck.ui.engine.endpoint_label import EndpointLabel
from beedeck.ui.engine.failure_panel import FailurePanel


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
    assert "port_in_use" in p.title.text()
    assert "Port 8080 is already in use." in p.what.text()
    assert "Pick another port" in p.remedy.text()
    assert "exit code 1" in p.detail.text() and "couldn't bind" in p.detail.text()
    with qtbot.waitSignal(p.retry_requested):
        p.retry_button.click()
    p.show_failure(LaunchRefused(["--spec-type dflash is not known to this engine: pick a BeeLlama build."]))
    assert "pick a BeeLlama build" in p.remedy.text()
    p.close_button.click()
    assert p.isHidden()
