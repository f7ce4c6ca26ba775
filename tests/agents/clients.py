"""The coding-agent clients the agent tests run for real, installed from their package registries into
a cache OUTSIDE the checkout, one folder per name and version (``~/.cache/beedeck-test-clients``, or
``$BEEDECK_TEST_CLIENTS``): the first run installs (minutes), later runs find it. CI caches the folder.

``python -m tests.agents.clients`` installs every client and prints each cold install time.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

# Exact versions: a new release is a deliberate bump (and a new cache folder), never a surprise.
NPM_CLIENTS = {
    "opencode": ("opencode-ai", "1.18.33", "opencode"),
    "codex": ("@openai/codex", "0.171.0", "codex"),
    "continue": ("@continuedev/cli", "1.5.47", "cn"),
    "claude-code": ("@anthropic-ai/claude-code", "2.1.332", "claude"),
}
PYPI_CLIENTS = {"aider": ("aider-chat", "0.86.2", "aider")}


def cache_root() -> Path:
    return Path(os.environ.get("BEEDECK_TEST_CLIENTS", Path.home() / ".cache" / "beedeck-test-clients"))


@dataclass(frozen=True)
class InstalledClient:
    """One client installed in the cache: its executable and how long the install took (0 when warm)."""

    name: str
    package: str
    version: str
    executable: Path
    install_s: float


def _folder(package: str, version: str) -> Path:
    return cache_root() / f"{package.replace('/', '+').lstrip('@')}-{version}"


def _run(argv: list[str], timeout: float) -> None:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    if done.returncode:
        tail = (done.stdout + done.stderr)[-3000:]
        raise RuntimeError(f"{' '.join(argv)} failed ({done.returncode}):\n{tail}")


def ensure_client(name: str, timeout: float = 1800.0) -> InstalledClient:
    """Install ``name`` (a key of NPM_CLIENTS or PYPI_CLIENTS) once per version; return its executable."""
    if name in NPM_CLIENTS:
        package, version, exe = NPM_CLIENTS[name]
        folder = _folder(package, version)
        executable = folder / "node_modules" / ".bin" / exe
    else:
        package, version, exe = PYPI_CLIENTS[name]
        folder = _folder(package, version)
        executable = folder / "venv" / "bin" / exe
    stamp = folder / ".installed"
    if stamp.is_file() and executable.exists():
        return InstalledClient(name, package, version, executable, 0.0)
    npm = shutil.which("npm")
    shutil.rmtree(folder, ignore_errors=True)  # a half-finished install is never reused
    folder.mkdir(parents=True)
    start = time.monotonic()
    if name in NPM_CLIENTS:
        if npm is None:
            raise RuntimeError("npm is not installed: the agent tests install their clients with npm")
        _run([npm, "install", "--no-audit", "--no-fund", "--prefix", str(folder), f"{package}@{version}"], timeout)
    else:
        _run([sys.executable, "-m", "venv", str(folder / "venv")], timeout)
        _run([str(folder / "venv" / "bin" / "python"), "-m", "pip", "install", "-q", f"{package}=={version}"], timeout)
    took = time.monotonic() - start
    if not executable.exists():
        raise RuntimeError(f"{package}@{version} installed but has no {exe} executable at {executable}")
    stamp.write_text(f"{took:.1f}\n")
    return InstalledClient(name, package, version, executable, took)


def cold_install_s(client: InstalledClient) -> float:
    """The install time recorded when the cache folder was filled."""
    stamp = _folder(client.package, client.version) / ".installed"
    return float(stamp.read_text())


if __name__ == "__main__":
    for key in (*NPM_CLIENTS, *PYPI_CLIENTS):
        got = ensure_client(key)
        print(f"{key}: {got.package} {got.version} installed in {cold_install_s(got):.1f} s ({got.executable})",
              flush=True)
