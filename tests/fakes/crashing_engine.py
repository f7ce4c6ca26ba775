"""A llama-server that probes as the real one and dies in warm-up the way a build whose CPU code cannot run
here does (BeeLlama's native builds on a host reporting AMX: SIGILL with one thread, SIGSEGV with more).

``--help``, ``--version`` and ``--list-devices`` run the real engine, so BeeDeck's probe reads a real option
table; a launch prints the lines llama-server prints up to warm-up (an "AMX model buffer" when asked) and then
``exec``s a tiny C program that executes ``ud2`` (the CPU's own illegal-instruction fault: SIGILL) or writes
through a null pointer (SIGSEGV). The process BeeDeck started is the one that dies, by that signal.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

_CRASH_C = """int main(void) {
#ifdef SEGV
    *(volatile int *)0 = 1;
#else
    __builtin_trap();
#endif
    return 0;
}
"""
_AMX_LINE = "load_tensors:          AMX model buffer size =    95.34 MiB"


def crashing_engine(folder: Path, real_engine: Path, *, signal: str = "ILL", amx: bool = False) -> Path:
    """``folder/llama-server``: probes as ``real_engine``, dies in warm-up by ``signal`` ("ILL" or "SEGV")."""
    folder.mkdir(parents=True, exist_ok=True)
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    assert cc, "a C compiler is needed (the builder's tests need one too)"
    (folder / "crash.c").write_text(_CRASH_C)
    subprocess.run([cc, "-O0", *(["-DSEGV"] if signal == "SEGV" else []), "-o", str(folder / "crash"),
                    str(folder / "crash.c")], check=True, capture_output=True)
    script = folder / "llama-server"
    lines = ["main: loading model", "system_info: n_threads = 2 (n_threads_batch = 2) / 2 | CPU : AVX2 = 1 | "
             "AVX512 = 1 | AMX_INT8 = 1 |", *([_AMX_LINE] if amx else []),
             "common_init_from_params: warming up the model with an empty run - please wait ... "
             "(--no-warmup to disable)"]
    echo = "\n".join(f"echo '{line}' >&2" for line in lines)
    script.write_text(f'#!/bin/sh\ncase "$*" in *--help*|*--version*|*--list-devices*) exec "{real_engine}" "$@";; '
                      f'esac\n{echo}\nexec "{folder / "crash"}"\n')
    script.chmod(0o755)
    return script
