"""The session owns what happens to the profile and the server (the window only shows it): a new profile
replaces a running server only once its launch passed the preflight, so a refused launch keeps the old
profile shown and saved, the reply in flight going and the old server serving; one that passed is shown,
saved, and stops the reply before the old server goes. Saving, going back to the local profile and the
notices follow the same one object."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from pytestqt.qtbot import QtBot

from beedeck.core import profile as profile_mod
from beedeck.core.chat.store import ChatStore
from beedeck.core.engine.caps import EngineCaps
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.logparse import ServerFailure
from beedeck.core.engine.server import ServerState
from beedeck.core.launcher import Preflight
from beedeck.core.profile import Profile, remote_profile
from beedeck.core.serving import Serving, ServingParts
from beedeck.core.settings import AppSettings, load_settings
from beedeck.ui.engine.server_controller import ServerController
from beedeck.ui.session import NOT_LAUNCHED, Session
from beedeck.ui.window.main_window import MainWindow
from tests.fakes.sse_server import FakeLlamaServer
from tests.ui.window.test_integration import RecordingController, ml_caps

ENGINE = "/opt/ml/llama-server"
TOO_BIG = 999_999  # the context the preflight below refuses
REFUSAL = ServerFailure("out_of_memory", "A 999,999-token context needs 80 GiB; this machine has 23 GiB.",
                        "Lower the context size.", setting="ctx_size")


def _refuse_too_big(caps: EngineCaps, settings: LaunchSettings, **_: Any) -> Preflight:
    """The launch plan, or the refusal of a context of TOO_BIG."""
    return Preflight([REFUSAL] if settings.ctx_size == TOO_BIG else [], caps=caps, settings=settings)


def _no_engine_here(*_a: Any, **_kw: Any) -> Any:
    raise RuntimeError("no engine runs in this test")


def _serving(qtbot: QtBot, store: ChatStore, fake_server: FakeLlamaServer) -> tuple[MainWindow, Profile]:
    """A window whose server (the fake, ready) serves the saved profile ``old`` through a real controller, its
    preflight refusing a context of TOO_BIG, and a reply in flight (stalled after its first token)."""
    controller = ServerController(serving=Serving(ServingParts(preflight=_refuse_too_big, start=_no_engine_here)))
    w = MainWindow(store, controller)
    qtbot.addWidget(w)
    w.open_latest_chat()
    old = Profile(ENGINE, LaunchSettings(target="/m/old.gguf", ctx_size=4096), "mine")
    w.session.save_profile(old, ml_caps())
    serving = controller.serving
    serving.engine, serving.settings, serving.caps = ENGINE, old.settings, ml_caps()
    serving._set_state(ServerState.READY)
    controller.ready.emit(fake_server.base_url)
    fake_server.script.stall_after = 1
    w.chat.input.setPlainText("Write a long story.")
    w.chat.send()
    qtbot.waitUntil(fake_server.stalled.is_set, timeout=10_000)
    assert w.chat.is_generating()
    return w, old


def test_a_refused_launch_keeps_the_old_profile_the_reply_and_the_server(
        qtbot: QtBot, store: ChatStore, fake_server: FakeLlamaServer) -> None:
    """The bug: Settings → Launch showed and saved the new profile and stopped the reply before the preflight
    ran; when it refused, the old server kept serving a profile no longer shown or saved."""
    w, old = _serving(qtbot, store, fake_server)
    refused = Profile(ENGINE, replace(old.settings, ctx_size=TOO_BIG), "mine")
    with qtbot.waitSignal(w.session.controller.refused, timeout=10_000):
        w.session.apply_profile(refused, ml_caps(), start=True)
    assert w.session.profile is old and w.pair_label.text() == "model: old.gguf"
    saved = profile_mod.load_saved_profile()
    assert saved is not None and saved.settings.ctx_size == 4096  # profile.json still holds the old one
    assert w.session.server.state == ServerState.READY and w.session.server.settings is old.settings  # still serving
    assert w.failure.isVisibleTo(w) and NOT_LAUNCHED in w.failure.title.text() and "80 GiB" in w.failure.what.text()
    assert w.chat.is_generating()  # the reply was not stopped
    with qtbot.waitSignal(w.chat.reply_finished, timeout=10_000) as finished:
        fake_server.release_stall()
    assert finished.args[0].cancelled is False and finished.args[0].tokens == 4  # it ran to its end
    w.close()


def test_a_launch_that_passed_its_preflight_is_shown_saved_and_stops_the_reply(
        qtbot: QtBot, store: ChatStore, fake_server: FakeLlamaServer) -> None:
    w, old = _serving(qtbot, store, fake_server)
    bigger = Profile(ENGINE, replace(old.settings, ctx_size=8192), "mine")
    with qtbot.waitSignal(w.chat.reply_finished, timeout=10_000) as stopped, \
            qtbot.waitSignal(w.session.controller.failed, timeout=10_000) as failed:
        w.session.apply_profile(bigger, ml_caps(), start=True)
    assert stopped.args[0].cancelled is True  # stopped before the old server went
    assert w.session.profile is bigger and w.pair_label.text() == "model: old.gguf"
    saved = profile_mod.load_saved_profile()
    assert saved is not None and saved.settings.ctx_size == 8192
    assert "no engine runs in this test" in failed.args[0].message  # then the (fake) start failed, and says so
    assert w.failure.isVisibleTo(w) and "could not start" in w.failure.title.text()
    fake_server.release_stall()
    w.close()


def test_without_a_server_a_new_profile_is_shown_saved_and_started(qtbot: QtBot, tmp_path: Path) -> None:
    controller = RecordingController()
    session = Session(AppSettings(), controller, saver=lambda s: None)
    changed: list[Profile] = []
    session.profile_changed.connect(changed.append)
    profile = Profile(ENGINE, LaunchSettings(target="/m/q.gguf"), "mine")
    session.apply_profile(profile, ml_caps(), start=True)
    assert changed == [profile] and session.profile is profile and session.caps() is not None
    assert controller.serving.calls == [("start", ENGINE, profile.settings, session.caps())]
    saved = profile_mod.load_saved_profile()
    assert saved is not None and saved.settings.target == "/m/q.gguf"
    session.shutdown()


def test_back_to_the_local_server_or_to_settings(qtbot: QtBot) -> None:
    controller = RecordingController()
    session = Session(AppSettings(), controller, saver=lambda s: None)
    wanted: list[str] = []
    session.settings_wanted.connect(lambda: wanted.append("settings"))
    session.setup_wanted.connect(lambda: wanted.append("setup"))
    session.start_server()  # no profile yet: the setup wizard (or Settings) opens instead
    session.set_profile(remote_profile("http://127.0.0.1:9"))
    session.use_local_server()  # never a local profile: Settings opens on the starter
    assert wanted == ["setup", "settings"] and controller.serving.calls == []
    assert session.notice.startswith("Not connected. Press Connect")  # the chat says what Start means here
    local = Profile(ENGINE, LaunchSettings(target="/m/q.gguf"), "mine")
    session.set_profile(local)
    session.set_profile(remote_profile("http://127.0.0.1:9"))
    assert session.last_local_profile is local
    session.use_local_server()
    assert session.profile is local and [c[0] for c in controller.serving.calls] == ["start"]
    session.shutdown()


def test_the_one_app_settings_copy_is_saved_and_its_choices_take_effect(qtbot: QtBot) -> None:
    session = Session(AppSettings(), RecordingController())
    saved: list[AppSettings] = []
    session.settings_saved.connect(saved.append)
    session.set_standby(False)
    session.set_follow_advice(True)
    stored = load_settings()
    assert not stored.standby and stored.follow_advice and session.server.standby is False
    assert session.advice_follower.follow and saved == [session.app_settings] * 2

    def broken(_settings: AppSettings) -> None:
        raise OSError("read-only file system")

    said: list[tuple[str, str, str]] = []
    failing = Session(AppSettings(), RecordingController(), saver=broken)
    failing.lasting_notice.connect(lambda key, title, text: said.append((key, title, text)))
    failing.set_theme("dark")
    assert failing.app_settings.theme == "dark"  # in effect for this session, and said until dismissed
    assert said == [("settings", "The theme applies to this session only",
                     "The theme could not be saved (read-only file system); it applies to this session.")]
    session.shutdown()
    failing.shutdown()
