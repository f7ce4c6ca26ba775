"""The install test: `make dist`'s .deb checked for its contents and metadata, unpacked into a
temporary root and run from there (the CLI on the bundled starter, the window under Xvfb with a
screenshot kept in build/test-artifacts/), then installed and removed for real with dpkg where the
machine allows it (root).

The package is built once per source state (packaging/build_dist.py keeps a stamp of the sources it
was built from); under `make test` that is this test's fixture, after the engine tests.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from beedeck import APP_ID, __version__
from tests.conftest import REPO, load_build_dist

pytestmark = pytest.mark.slow
ARTIFACTS = REPO / "build" / "test-artifacts"


_build_dist = load_build_dist


@pytest.fixture(scope="module")
def deb() -> Path:
    bd = _build_dist()
    path = REPO / "dist" / f"beedeck_{__version__}_amd64.deb"
    if not (path.is_file() and bd.built_from_current_sources(path)):
        # As `make dist` runs it, in its own process (PyInstaller, Qt for the icons); log kept.
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        log = ARTIFACTS / "make-dist.log"
        with open(log, "w") as fh:
            done = subprocess.run([sys.executable, str(REPO / "packaging" / "build_dist.py")], stdout=fh,
                                  stderr=subprocess.STDOUT, cwd=REPO, check=False)
        assert done.returncode == 0, f"make dist failed: {log.read_text()[-3000:]}"
    return path


def run(*args: str | Path, timeout: float = 300, **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=timeout, **kw)  # type: ignore[call-overload]


def test_the_package_declares_itself_and_what_qt_needs(deb: Path) -> None:
    info = run("dpkg-deb", "--info", deb).stdout
    fields = dict(re.findall(r"^ (\w[\w-]*): (.*)$", info, re.M))
    assert fields["Package"] == "beedeck" and fields["Version"] == __version__ and fields["Architecture"] == "amd64"
    depends = fields["Depends"]
    script = (REPO / "packaging" / "linux" / "install-system-deps.sh").read_text()
    runtime = re.search(r"runtime=\(([^)]*)\)", script)
    assert runtime is not None
    for pkg in runtime.group(1).split():
        assert re.search(rf"(^|[ |]){re.escape(pkg)}([ ,(|]|$)", depends), f"{pkg} is not in Depends: {depends}"


def test_the_package_holds_the_app_engine_model_menu_entry_and_icons(deb: Path) -> None:
    listing = run("dpkg-deb", "--contents", deb).stdout
    names = {line.split()[5] for line in listing.splitlines()}
    links = {line.split()[5]: line.split()[-1] for line in listing.splitlines() if " -> " in line}
    share = "./usr/share"
    for want in ("./opt/beedeck/beedeck", "./opt/beedeck/_internal/starter/engine/llama-server",
                 "./opt/beedeck/_internal/starter/SmolLM2-135M-Instruct.Q4_1.gguf",
                 f"{share}/applications/{APP_ID}.desktop", f"{share}/metainfo/{APP_ID}.metainfo.xml",
                 f"{share}/icons/hicolor/scalable/apps/{APP_ID}.svg", f"{share}/doc/beedeck/copyright",
                 f"{share}/doc/beedeck/changelog.Debian.gz", "./opt/beedeck/_internal/resources/catalog.json"):
        assert want in names, want
    for size in (32, 48, 64, 128, 256, 512):
        assert f"{share}/icons/hicolor/{size}x{size}/apps/{APP_ID}.png" in names
    assert links["./usr/bin/beedeck"] == "../../opt/beedeck/beedeck"  # relative: works in any root


def test_the_menu_entry_and_metainfo_validate(tmp_path: Path, deb: Path) -> None:
    run("dpkg-deb", "-x", deb, tmp_path)
    desktop = tmp_path / "usr" / "share" / "applications" / f"{APP_ID}.desktop"
    done = run("desktop-file-validate", desktop)
    assert done.returncode == 0, done.stdout + done.stderr
    text = desktop.read_text()
    assert "Exec=beedeck\n" in text and f"Icon={APP_ID}\n" in text and "StartupWMClass=beedeck" in text
    done = run("appstreamcli", "validate", "--no-net", "--pedantic",
               tmp_path / "usr" / "share" / "metainfo" / f"{APP_ID}.metainfo.xml")
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.fixture(scope="module")
def unpacked(deb: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("deb-root")
    assert run("dpkg-deb", "-x", deb, root).returncode == 0
    return root


def _env(home: Path) -> dict[str, str]:
    keep = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "LC_ALL", "TMPDIR")}
    # Nothing of the checkout or its venv: the installed app must stand on its own.
    return {**keep, "HOME": str(home), "BEEDECK_HOME": str(home / "beedeck")}


def test_the_installed_command_knows_its_version_and_its_engine_finds_its_libraries(unpacked: Path,
                                                                                      tmp_path: Path) -> None:
    done = run(unpacked / "usr" / "bin" / "beedeck", "--version", env=_env(tmp_path))
    assert done.returncode == 0 and __version__ in done.stdout
    engine = unpacked / "opt" / "beedeck" / "_internal" / "starter" / "engine" / "llama-server"
    dynamic = run("readelf", "-d", engine).stdout
    assert "[$ORIGIN]" in dynamic, dynamic  # not the build machine's folder
    built = json.loads((_build_dist().engine_folder() / "built.json").read_text())
    assert "-DGGML_NATIVE=OFF" in built["stdout"]  # portable: not only this machine's CPU


def test_the_installed_cli_chats_on_the_bundled_starter(unpacked: Path, tmp_path: Path) -> None:
    done = run(unpacked / "usr" / "bin" / "beedeck", "chat", "Write a Python function that reverses a string.",
               "--max-tokens", "96", "--temperature", "0", "--json", env=_env(tmp_path), timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    reply = json.loads(done.stdout)
    assert "def " in reply["text"] and reply["timings"]["predicted_n"] > 0
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    (ARTIFACTS / "installed-cli-chat.json").write_text(json.dumps(reply, indent=1))


def test_the_installed_window_opens_under_x_and_chats(unpacked: Path, tmp_path: Path) -> None:
    shots = ARTIFACTS / "installed-window"
    shutil.rmtree(shots, ignore_errors=True)
    env = {**_env(tmp_path), "QT_QPA_PLATFORM": "xcb"}
    done = run("xvfb-run", "-a", "-s", "-screen 0 1366x768x24", unpacked / "usr" / "bin" / "beedeck",
               "--screenshot", shots, "--screenshot-prompt", "Write a Python function that reverses a string.",
               env=env, timeout=600)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    assert (shots / "main-chat.png").stat().st_size > 10_000  # a real picture of a real first reply
    assert "first reply: " in done.stdout  # and its figures (tokens/s, time from the window's start)
    (ARTIFACTS / "installed-window.txt").write_text(done.stdout)


@pytest.fixture
def installed(deb: Path) -> Iterator[Path]:
    # Root, or sudo without a password, as packaging/linux/install-system-deps.sh uses to install.
    sudo = [] if os.geteuid() == 0 else ["sudo", "-n"]
    if shutil.which("dpkg") is None or (sudo and run("sudo", "-n", "true").returncode != 0):
        pytest.fail("the dpkg round trip needs dpkg and root (or sudo without a password), as `make test` "
                    "needs to install its system packages")
    done = run(*sudo, "dpkg", "-i", deb)
    assert done.returncode == 0, done.stdout + done.stderr
    try:
        yield Path("/usr/bin/beedeck")
    finally:
        run(*sudo, "dpkg", "-r", "beedeck")


def test_dpkg_installs_and_removes_it_and_leaves_the_users_data(installed: Path, tmp_path: Path) -> None:
    data = tmp_path / "beedeck" / "data"
    data.mkdir(parents=True)
    (data / "chats.sqlite3").write_bytes(b"the user's chats")
    status = run("dpkg-query", "-W", "-f", "${Status} ${Version}", "beedeck").stdout
    assert status == f"install ok installed {__version__}"
    done = run(installed, "--version", env=_env(tmp_path))
    assert done.returncode == 0 and __version__ in done.stdout
    sudo = [] if os.geteuid() == 0 else ["sudo", "-n"]
    assert run(*sudo, "dpkg", "-r", "beedeck").returncode == 0
    assert not Path("/opt/beedeck").exists() and not installed.exists()
    assert (data / "chats.sqlite3").read_bytes() == b"the user's chats"


def test_the_tarball_holds_the_same_app_and_its_installer(deb: Path) -> None:
    import tarfile

    tar = REPO / "dist" / f"beedeck-{__version__}-linux-x86_64.tar.gz"
    with tarfile.open(tar) as tf:
        names = set(tf.getnames())
    top = f"beedeck-{__version__}-linux-x86_64"
    for want in ("beedeck/beedeck", "beedeck/_internal/starter/engine/llama-server", "install.sh",
                 f"{APP_ID}.desktop", f"{APP_ID}.png"):
        assert f"{top}/{want}" in names, want
