"""The real BeeDeck window (offscreen) as a child process for the signal faults.

``--no-gpu`` makes GPU detection answer "no GPU" whatever the machine has, so the first start takes
the path under test (the starter profile, started at once); everything else is the real app.
"""

from __future__ import annotations

import functools
import sys

from beedeck.core.machine.report import HardwareReport
from beedeck.ui.window import app


def no_gpu() -> HardwareReport:
    return HardwareReport(reason="no NVIDIA GPU (the fault tests' window)", source="none")


if __name__ == "__main__":
    argv = sys.argv[1:]
    if "--no-gpu" in argv:
        argv.remove("--no-gpu")
        app.build_window = functools.partial(app.build_window, detect=no_gpu)
    sys.exit(app.main(argv))
