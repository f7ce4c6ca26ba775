"""RAM, CPU cores and free disk space, through psutil."""

from __future__ import annotations

import logging
import os

from beedeck.core.machine.report import SystemInfo

log = logging.getLogger(__name__)


def system_info(disk_path: str | os.PathLike[str] | None = None) -> SystemInfo:
    """RAM, cores and free disk via psutil; any part that cannot be read stays None."""
    info = SystemInfo(disk_path=os.fspath(disk_path) if disk_path is not None else None)
    try:
        import psutil
    except ImportError:
        return info
    try:
        vm = psutil.virtual_memory()
        info.ram_total, info.ram_available = int(vm.total), int(vm.available)
    except Exception:
        log.debug("virtual_memory failed", exc_info=True)
    try:
        info.cpu_cores_logical = psutil.cpu_count(logical=True)
        info.cpu_cores_physical = psutil.cpu_count(logical=False)
    except Exception:
        log.debug("cpu_count failed", exc_info=True)
    if info.disk_path is not None:
        path = info.disk_path
        # The data folder may not exist yet: measure the nearest existing parent (same file system).
        while not os.path.exists(path) and os.path.dirname(path) != path:
            path = os.path.dirname(path)
        try:
            info.disk_free = int(psutil.disk_usage(path).free)
        except Exception:
            log.debug("disk_usage failed", exc_info=True)
    return info
