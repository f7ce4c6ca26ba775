"""Remote attach against a REAL llama-server (the mainline starter engine + SmolLM2) that BeeDeck did not
start for the window: another loopback port, an API key. The right key reads the server and streams; a
wrong or missing key, a non-llama HTTP server and a closed port each get their own message; the window
connects, chats with a live gauge, disconnects (the server keeps running) and reports a server that goes
away. Prints the time from Connect to the first streamed token."""

from __future__ import annotations

import http.server
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from pytestqt.qtbot import QtBot

from beedeck.core import secrets
from beedeck.core.chat.store import ChatStore
from beedeck.core.engine import remote
from beedeck.core.engine.client import LlamaClient
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.remote import RemoteError, inspect_server
from beedeck.core.engine.server import ServerProcess, free_port
from beedeck.core.engine.server_state import ServerState
from beedeck.core.profile import load_saved_profile, remote_profile, save_profile
from beedeck.core.serving import Serving, ServingParts
from beedeck.ui.engine.server_controller import ServerController
from beedeck.ui.window.main_window import MainWindow
from tests.engine.conftest import StartServer
from tests.engine.procs import pid_alive

KEY = "test-key-7f3a9c"  # a test secret: it must never show up in a message or a log line

pytestmark = pytest.mark.engine


@pytest.fixture
def keyed_server(start_server: StartServer) -> Iterator[ServerProcess]:
    lines: list[str] = []
    proc = start_server(api_key=KEY, port=free_port(), ctx_size=2048, on_line=lines.append)
    proc.wait_ready(120)
    yield proc
    assert not any(KEY in line for line in lines), "the API key reached the server log BeeDeck shows"


class _NotLlama(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b"<html><body>a web server</body></html>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def web_server() -> Iterator[str]:
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _NotLlama)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def test_right_key_reads_the_server_and_streams(keyed_server: ServerProcess) -> None:
    t0 = time.perf_counter()
    info = inspect_server(keyed_server.base_url + "/v1/", KEY)  # the editor-style address works too
    client = LlamaClient(info.url, KEY)
    stream = client.stream_chat([{"role": "user", "content": "Say hello."}], max_tokens=16, temperature=0.0)
    first = None
    for delta in stream:
        first = first if first is not None else delta.t - t0
    assert info.url == keyed_server.base_url
    assert info.model_name == "smollm2-135m-instruct.q4_1"  # the server's short alias (--alias), not a path
    assert info.n_ctx == 2048 and info.total_slots == 1
    assert info.engine == "llama.cpp" and info.build_info.startswith("b")
    assert info.speculative is False and info.speculation() == "off"
    assert info.metrics and info.slots and info.needs_key
    assert "smollm2" in info.summary() and "context 2048" in info.summary()
    assert stream.result.text.strip() and stream.result.timings is not None
    assert first is not None
    print(f"\n[measure] remote attach: inspect {info.seconds * 1000:.0f} ms, Connect -> first streamed token "
          f"{first * 1000:.0f} ms (loopback, SmolLM2-135M on CPU)")


def test_wrong_and_missing_key_get_their_own_messages(keyed_server: ServerProcess) -> None:
    with pytest.raises(RemoteError) as wrong:
        inspect_server(keyed_server.base_url, "not-the-key")
    assert wrong.value.kind == remote.KEY_WRONG
    assert "refused the API key" in wrong.value.message and "--api-key" in wrong.value.remedy
    assert "not-the-key" not in str(wrong.value)
    with pytest.raises(RemoteError) as missing:
        inspect_server(keyed_server.base_url, None)
    assert missing.value.kind == remote.KEY_MISSING and "needs an API key" in missing.value.message


def test_a_web_server_that_is_not_llama_is_named(web_server: str) -> None:
    with pytest.raises(RemoteError) as exc:
        inspect_server(web_server)
    assert exc.value.kind == remote.NOT_LLAMA
    assert "not as llama.cpp's llama-server" in exc.value.message and "another program" in exc.value.remedy


def test_a_closed_port_is_refused() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(RemoteError) as exc:
        inspect_server(url)
    assert exc.value.kind == remote.REFUSED
    assert "Nothing listens" in exc.value.message and "--host" in exc.value.remedy


def test_controller_connects_disconnects_and_sees_the_server_go(
    qtbot: QtBot, start_server: StartServer
) -> None:
    proc = start_server(api_key=KEY, port=free_port(), ctx_size=2048)
    proc.wait_ready(120)
    controller = ServerController(serving=Serving(ServingParts(health_interval_s=0.3)))
    serving = controller.serving
    with qtbot.waitSignal(controller.remote_attached, timeout=30_000) as attached:
        serving.start(proc.base_url, LaunchSettings(api_key=KEY))
    assert attached.args[0].model_name.startswith("smollm2") and serving.state == ServerState.READY
    assert serving.is_remote() and serving.base_url == proc.base_url
    with qtbot.waitSignal(controller.failed, timeout=5000) as failed:
        serving.restart(LaunchSettings())
    assert "did not start this server" in str(failed.args[0]) and serving.state == ServerState.READY
    with qtbot.waitSignal(controller.stopped, timeout=10_000):
        serving.stop()
    assert serving.state == ServerState.STOPPED and pid_alive(proc.pid), "Disconnect must leave the server running"

    with qtbot.waitSignal(controller.ready, timeout=30_000):
        serving.start(proc.base_url, LaunchSettings(api_key=KEY))
    with qtbot.waitSignal(controller.failed, timeout=20_000) as gone:
        proc.stop(5.0)
    assert gone.args[0].code == f"remote:{remote.REFUSED}" and "went away" in gone.args[0].message
    assert serving.state == ServerState.FAILED and serving.remote is None
    serving.shutdown()


def _window(qtbot: QtBot) -> tuple[MainWindow, ChatStore]:
    store = ChatStore()
    window = MainWindow(store)
    qtbot.addWidget(window)
    window.open_latest_chat()
    window.show()
    return window, store


def test_window_connects_chats_with_a_live_gauge_and_disconnects(
    qtbot: QtBot, keyed_server: ServerProcess
) -> None:
    window, store = _window(qtbot)
    profile = remote_profile(keyed_server.base_url, KEY, "pod")
    save_profile(profile)  # the key goes to the keyring, never into profile.json
    assert KEY not in Path(save_profile(profile)).read_text()
    assert secrets.get_secret(secrets.remote_api_key_name(keyed_server.base_url)) == KEY
    loaded = load_saved_profile()
    assert loaded is not None and loaded.is_remote and loaded.settings.api_key == KEY
    window.session.set_profile(loaded)
    assert window.start_action.text() == "Connect" and window.stop_action.text() == "Disconnect"

    t0 = time.perf_counter()
    with qtbot.waitSignal(window.session.controller.remote_attached, timeout=30_000):
        window.start_action.trigger()
    assert window.state_label.text() == "server: ready"
    assert "smollm2" in window.pair_label.text() and "context 2,048" in window.pair_label.text()
    assert "speculation off" in window.pair_label.text() and "llama.cpp" in window.engine_label.text()
    assert window.endpoint.endpoint() == keyed_server.base_url + "/v1"
    assert "smollm2" in window.endpoint.label.toolTip().lower()
    assert not window.mode.isEnabled() and "runs without speculation" in window.mode.toolTip()
    assert "did not start this server" in window.mode.toolTip()
    window.log.view.flush()
    log = window.log.view.text.toPlainText()
    assert "connected to " + keyed_server.base_url in log and KEY not in log

    window.chat.max_tokens = 24
    window.chat.input.setPlainText("Write one sentence about bees.")
    first: list[float] = []
    window.chat.delta_received.connect(lambda _text: first.append(time.perf_counter() - t0) if not first else None)
    with qtbot.waitSignal(window.chat.reply_finished, timeout=120_000) as blocker:
        window.chat.send_button.click()
    stats = blocker.args[0].to_json()  # the ReplyFacts as stored
    assert stats["tokens"] > 0 and stats["tps"] > 0
    assert window.speed.gauge.value == pytest.approx(stats["tps"])
    reply = store.messages(window.chat.conversation_id)[-1]  # type: ignore[arg-type]
    assert reply.role == "assistant" and reply.complete and reply.content.strip()
    print(f"\n[measure] window: Connect -> first streamed token {first[0] * 1000:.0f} ms "
          f"(includes typing the prompt programmatically; reply {stats['tps']:.0f} tok/s)")

    with qtbot.waitSignal(window.session.controller.stopped, timeout=10_000):
        window.stop_action.trigger()
    assert window.state_label.text() == "server: stopped" and pid_alive(keyed_server.pid)
    pid = keyed_server.pid
    window.close()
    assert pid is not None and psutil.pid_exists(pid), "closing the window must not stop a server it did not start"
    store.close()


def test_connect_command_prints_what_the_server_is(
    keyed_server: ServerProcess, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from beedeck.cli import main

    key_file = tmp_path / "key"
    key_file.write_text(KEY + "\n")
    assert main(["connect", keyed_server.base_url, "--api-key-file", str(key_file), "--say", "Hi", "--json"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["ok"] and out["model"] == "smollm2-135m-instruct.q4_1" and out["key_from"] == "the key file"
    assert out["connect_to_first_token_s"] > 0
    assert main(["connect", keyed_server.base_url]) == 1
    err = capsys.readouterr().err
    assert "needs an API key" in err and KEY not in err


def test_bench_url_measures_the_keyed_server_with_the_saved_key(
    keyed_server: ServerProcess, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from beedeck.cli import main

    save_profile(remote_profile(keyed_server.base_url, KEY, "pod"))  # what Connect… saves
    code = main(["bench", "--url", keyed_server.base_url, "--reps", "1", "--warmup", "0", "--max-tokens", "8",
                 "--out", str(tmp_path / "report")])
    out = capsys.readouterr()
    assert code == 0, out.err
    assert list((tmp_path / "report").glob("*.md")) and KEY not in out.out + out.err
