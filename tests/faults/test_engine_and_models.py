"""Faults: the llama-server dying or hanging under a reply, broken engine binaries, bad model files.

Driven through ``beedeck serve`` / ``beedeck chat`` as child processes against the real starter
engine; the broken engines are real executables (a shell script, a binary without its libraries, a
wrapper around the real engine that crashes once it is asked to serve).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
from pathlib import Path

import pytest

from beedeck.core.engine.caps import ProbeError
from beedeck.core.engine.probe import probe_engine
from beedeck.core.engine.releases.assets import BEE_REPO
from tests.conftest import FIXTURES
from tests.fakes.crashing_engine import crashing_engine
from tests.fakes.fake_releases import FakeReleases, make_tar_gz

from .conftest import Beedeck, alive, place_starter, wait_for

pytestmark = pytest.mark.engine

COUNTING = "Count from 1 to 400, one number per line."
LONG_GREEDY = "List the numbers from 1 to 1000, separated by commas."  # at temperature 0: 1,500+ tokens


def script(path: Path, body: str) -> Path:
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def chat_child(bd: Beedeck, *extra: str) -> tuple[object, int]:
    # Greedy, and a prompt the starter answers at length: it runs to the 3,000-token cap every time. At
    # the starter's own temperature 0.2 the count could end after 122 tokens (2 s), before the kill landed.
    child = bd.spawn("chat", LONG_GREEDY, "--max-tokens", "3000", "--temperature", "0", *bd.starter_args(), *extra)
    server = int(next(iter(wait_for(child.servers, 120, "the chat's server"))))
    wait_for(lambda: len(child.stdout()) > 20, 120, "streamed text")
    return child, server


# ------------------------------------------------------------------------------------ the server


def test_server_killed_mid_reply_the_cli_says_which_signal_and_keeps_what_arrived(beedeck: Beedeck) -> None:
    child, server = chat_child(beedeck)
    got_before = beedeck.workdir.joinpath("child0.out").read_text()
    os.kill(server, signal.SIGKILL)
    assert child.wait(60) == 1  # type: ignore[attr-defined]
    err = child.stderr()  # type: ignore[attr-defined]
    assert "connection to the server broke in the middle of the reply" in err
    assert "error: llama-server crashed with SIGKILL." in err
    assert "what to do: It was killed from outside (perhaps the system ran out of memory)" in err
    assert child.stdout().startswith(got_before)  # type: ignore[attr-defined]  # the streamed part stays printed


def test_server_hung_mid_reply_is_given_up_after_the_stall_timeout(beedeck: Beedeck) -> None:
    child, server = chat_child(beedeck, "--stall-timeout", "2")
    os.kill(server, signal.SIGSTOP)  # alive, holding the connection, sending nothing
    assert child.wait(60) == 1  # type: ignore[attr-defined]
    err = child.stderr()  # type: ignore[attr-defined]
    assert "llama-server sent nothing for 2 s in the middle of the reply: it looks hung" in err
    assert "restart the server" in err
    wait_for(lambda: not alive(server), 20, "the hung server to be stopped")  # SIGTERM + SIGCONT, or SIGKILL


# ----------------------------------------------------------------------------------- the engine


@pytest.mark.parametrize(("make", "says"), [
    (lambda d: d / "missing" / "llama-server", "does not exist: pick the llama-server binary"),
    (lambda d: (d / "folder").mkdir() or d / "folder", "is a folder: pick the llama-server binary inside it"),
    (lambda d: script(d / "llama-server", "echo hello").parent / "llama-server",
     "is not llama-server: its --help prints no llama.cpp option table"),
    (lambda d: script(d / "llama-server", "kill -SEGV $$"), "--help was killed by signal SIGSEGV"),
], ids=["missing", "folder", "not-llama-server", "crashes-on-help"])
def test_a_broken_engine_binary_is_refused_with_the_reason(beedeck: Beedeck, make: object, says: str) -> None:
    engine = make(beedeck.workdir)  # type: ignore[operator]
    done = beedeck.run("serve", "--engine", str(engine), "--model", str(beedeck.model), "--exit-when-ready")
    assert done.returncode == 2 and says in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


def test_an_engine_that_is_not_executable_says_chmod(beedeck: Beedeck) -> None:
    engine = beedeck.workdir / "llama-server"
    shutil.copy(beedeck.engine, engine)
    engine.chmod(0o644)
    done = beedeck.run("serve", "--engine", str(engine), "--model", str(beedeck.model), "--exit-when-ready")
    assert done.returncode == 2 and f"run `chmod +x {engine}`" in done.stderr


def test_an_engine_moved_away_from_its_libraries_says_so(beedeck: Beedeck) -> None:
    """A real llama-server copied without the .so files of its build folder."""
    lonely = beedeck.workdir / "llama-server"
    shutil.copy(beedeck.engine, lonely)
    done = beedeck.run("serve", "--engine", str(lonely), "--model", str(beedeck.model), "--exit-when-ready")
    assert done.returncode == 2
    assert "cannot find its shared libraries (libllama/libggml)" in done.stderr
    assert "keep the binary next to the .so/.dll files" in done.stderr


def test_an_engine_that_hangs_is_killed_with_its_children(beedeck: Beedeck) -> None:
    """A binary that never answers --help (here: it waits on a child of its own). The probe's timeout
    kills the whole process group, children included."""
    marker = beedeck.workdir / "child.pid"
    engine = script(beedeck.workdir / "llama-server", f"sleep 300 & echo $! > {marker}; wait")
    with pytest.raises(ProbeError, match="--help did not finish within 1 s, so BeeDeck stopped it"):
        probe_engine(str(engine), timeout=1.0, use_cache=False)
    sleeper = int(marker.read_text())
    wait_for(lambda: not alive(sleeper), 10, "the hung engine's own child to be killed")


def test_an_engine_that_crashes_once_serving_is_explained(beedeck: Beedeck) -> None:
    """Probes fine (the real engine answers --help), then dies at load: the CLI names the signal."""
    engine = script(beedeck.workdir / "llama-server",
                    f'case "$*" in *--help*|*--version*|*--list-devices*) exec "{beedeck.engine}" "$@";; esac\n'
                    'echo "load_model: loading model"; kill -SEGV $$')
    done = beedeck.run("serve", "--engine", str(engine), "--model", str(beedeck.model), "--exit-when-ready")
    assert done.returncode == 1
    assert "error: llama-server crashed with SIGSEGV." in done.stderr and "what to do:" in done.stderr
    assert "load_model: loading model" in done.stderr  # the log tail that goes with it


def test_an_engine_that_dies_by_sigill_says_it_uses_instructions_this_machine_does_not_run(
        beedeck: Beedeck) -> None:
    """A build made for another CPU (a real illegal instruction in warm-up): the reason and the remedy, not a
    bare signal."""
    engine = crashing_engine(beedeck.workdir / "native", beedeck.engine)
    done = beedeck.run("serve", "--engine", str(engine), "--model", str(beedeck.model), "--exit-when-ready")
    assert done.returncode == 1
    assert ("error: llama-server crashed with SIGILL: this build uses CPU instructions this machine does not run."
            in done.stderr)
    assert "`beedeck engine build --no-native`" in done.stderr and "`beedeck engine download`" in done.stderr


def test_a_build_whose_amx_code_crashes_here_is_rebuilt_without_amx_and_registered_ready(beedeck: Beedeck) -> None:
    """The AMX host's native build, as a real CMake build whose server dies by SIGILL after an AMX buffer."""
    source = beedeck.workdir / "src"
    shutil.copytree(FIXTURES / "mini_cmake", source)
    place_starter(beedeck.home, beedeck.model)  # the model the smoke test generates from
    done = beedeck.run("engine", "build", "--source", str(source), "--cpu", "-D", "MINI_CRASH=amx", "-j", "1")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "note: rebuilt without AMX: its AMX matrix code crashed (SIGILL) in its first generation" in done.stderr
    listed = json.loads(beedeck.run("engine", "list", "--json").stdout)["engines"]
    built = [e for e in listed if e["origin"] == "built"]
    assert len(built) == 1 and built[0]["smoke"]["ok"] and "-DGGML_AMX_INT8=OFF" in built[0]["build_options"]
    assert "generated 2 tokens from SmolLM2" in built[0]["smoke"]["message"]


def test_a_downloaded_build_that_dies_by_sigill_is_refused_with_the_reason(beedeck: Beedeck) -> None:
    engine = crashing_engine(beedeck.workdir / "prebuilt", beedeck.engine)
    archive = make_tar_gz(beedeck.workdir / "beellama-v0.4.6-bin-ubuntu-x64.tar.gz", {"llama-server": engine})
    place_starter(beedeck.home, beedeck.model)
    with FakeReleases() as releases:
        releases.add_release(BEE_REPO, "v0.4.6", [archive])
        done = beedeck.run("engine", "download", "--repo", "bee", "--backend", "cpu", "--api-url", releases.url)
    assert done.returncode == 1
    assert ("error: beellama.cpp v0.4.6 (beellama-v0.4.6-bin-ubuntu-x64.tar.gz) was downloaded but cannot run on this "
            "machine: in its first generation llama-server crashed with SIGILL: this build uses CPU instructions this "
            "machine does not run. BeeDeck did not register it and removed its files.") in done.stderr
    listed = json.loads(beedeck.run("engine", "list", "--json").stdout)["engines"]
    assert [e["id"] for e in listed if e["origin"] == "downloaded"] == []


def test_a_cuda_build_without_cublas_names_the_toolkit_before_configuring(beedeck: Beedeck) -> None:
    """nvcc without the rest of the toolkit (this machine: pip's nvcc in /usr/local/cuda, no cuBLAS): named,
    with the package and the download, before CMake runs (it stopped at "CUDA::cublas")."""
    source = beedeck.workdir / "src"
    shutil.copytree(FIXTURES / "mini_cmake", source)
    toolkit = beedeck.workdir / "cuda"
    (toolkit / "bin").mkdir(parents=True)
    script(toolkit / "bin" / "nvcc", "echo 'Cuda compilation tools, release 12.4, V12.4.131'")
    cmake = Path(shutil.which("cmake") or "/usr/bin/cmake").parent
    done = beedeck.run("engine", "build", "--source", str(source), "--gpu", "8.6", "--dry-run",
                       PATH=f"{toolkit / 'bin'}:{cmake}:/usr/bin:/bin", CUDA_PATH=str(toolkit), CUDA_HOME=str(toolkit))
    assert done.returncode == 1
    assert f"- cuBLAS: not found: nvcc 12.4 is there but no cublas_v2.h with its library under {toolkit}" in done.stderr
    assert "libcublas-dev-12-4" in done.stderr and "`beedeck engine download`" in done.stderr
    assert not list((beedeck.home / "data" / "engines").glob("*/build/CMakeCache.txt"))  # CMake never ran


def test_a_relative_engine_path_runs_that_file_not_a_path_lookup(beedeck: Beedeck) -> None:
    script(beedeck.workdir / "llama-server", "echo hello")
    done = beedeck.run("serve", "--engine", "llama-server", "--model", str(beedeck.model), "--exit-when-ready")
    assert done.returncode == 2 and f"{beedeck.workdir / 'llama-server'} is not llama-server" in done.stderr


# ---------------------------------------------------------------------------------- model files


def _cut(src: Path, dest: Path, n: int) -> Path:
    with open(src, "rb") as fh:
        dest.write_bytes(fh.read(n))
    return dest


def _garbled(src: Path, dest: Path) -> Path:
    data = bytearray(src.read_bytes()[:8_000_000])
    data[500_000:900_000] = os.urandom(400_000)  # noise across the tokenizer's strings (the header is 1.8 MB)
    dest.write_bytes(bytes(data))
    return dest


@pytest.mark.parametrize(("make", "says"), [
    (lambda d, m: d / "nope.gguf", "The target model {path} does not exist."),
    (lambda d, m: (d / "notes.gguf").write_text("hello") and d / "notes.gguf",
     "notes.gguf is not a GGUF model (wrong magic bytes)"),
    (lambda d, m: (d / "empty.gguf").write_bytes(b"") or d / "empty.gguf", "empty.gguf is empty (0 bytes)"),
    (lambda d, m: _cut(m, d / "head.gguf", 100), "head.gguf is truncated (the header ends early)"),
    (lambda d, m: _cut(m, d / "late.gguf", 60_000_000),
     "late.gguf is truncated: it has 60,000,000 bytes but its tensors need"),
    (lambda d, m: _garbled(m, d / "garbled.gguf"), "garbled.gguf has a corrupt"),
], ids=["missing", "text", "empty", "cut-in-header", "cut-in-tensors", "garbled"])
def test_a_bad_model_file_is_refused_before_start(beedeck: Beedeck, make: object, says: str) -> None:
    model = make(beedeck.workdir, beedeck.model)  # type: ignore[operator]
    done = beedeck.run("serve", "--engine", str(beedeck.engine), "--model", str(model), "--exit-when-ready")
    assert done.returncode == 1, done.stderr
    assert says.format(path=model) in done.stderr and "what to do:" in done.stderr
    assert "running:" not in done.stdout  # refused before any llama-server started


def test_a_draft_that_is_not_dflash_is_refused_before_start(beedeck: Beedeck) -> None:
    done = beedeck.run("serve", *beedeck.starter_args(), "--spec", "dflash", "--draft", str(beedeck.model),
                       "--exit-when-ready")
    assert done.returncode == 1
    assert "is an ordinary model, not a speculation draft, so it cannot run as DFlash" in done.stderr
    assert "what to do: Pick the draft file made for this target" in done.stderr


def test_server_killed_mid_reply_the_window_says_it_stopped_while_running_and_keeps_the_text(
        qtbot: object, starter_window: object) -> None:
    # --ignore-eos: the starter samples at temperature 0.2, and now and then it answered the count in
    # under 20 characters and stopped before the kill could land (the CI failure of this test).
    window = starter_window(extra_args=["--ignore-eos"])  # type: ignore[operator]
    chat = window.chat
    chat.max_tokens = 2000
    chat.input.setPlainText(COUNTING)
    chat.send_button.click()
    try:
        qtbot.waitUntil(lambda: chat.view.current_reply() is not None  # type: ignore[attr-defined]
                        and len(chat.view.current_reply().content) > 20, timeout=120_000)
    except Exception:  # say what the window showed: the reply as far as it came, and whether it still runs
        shown = [(m.role, m.content[:200]) for m in chat.view.messages()]  # type: ignore[attr-defined]
        proc = window.session.server.proc
        tail = proc.log_lines()[-8:] if proc is not None else "no server"
        raise AssertionError(f"no reply of 20 characters streaming: generating={chat.is_generating()}, "  # type: ignore[attr-defined]
                             f"running={window.session.server.is_running()}, shown={shown}, server log tail={tail}") from None
    server = window.session.server.proc.pid
    os.kill(server, signal.SIGKILL)
    qtbot.waitUntil(lambda: window.failure.isVisibleTo(window), timeout=30_000)  # type: ignore[attr-defined]
    assert "The server stopped while running" in window.failure.title.text()
    assert "SIGKILL" in window.failure.what.text() and "killed from outside" in window.failure.remedy.text()
    qtbot.waitUntil(lambda: not chat.is_generating(), timeout=30_000)  # type: ignore[attr-defined]
    reply = window.store.messages(chat.conversation_id)[-1]
    assert reply.role == "assistant" and len(reply.content) > 20 and not reply.complete  # kept, marked cut off
    assert chat.view.messages()[-1].content == reply.content  # on screen what is saved
