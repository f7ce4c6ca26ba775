"""The memory bar: grouping of planner items, verdicts, debounce, and that it paints."""

from __future__ import annotations

import functools

from PySide6.QtGui import QColor
from pytestqt.qtbot import QtBot

from beedeck.core.models.planner import DeviceUse, GiB, MemoryPlan, MiB
from beedeck.ui.launch.memory_bar import RED, MemoryBar, grouped, verdict


def make_plan(free: int, weights: int, kv: int, draft: int = 0) -> MemoryPlan:
    gpu = DeviceUse("CUDA0", free)
    gpu.add("weights", weights)
    gpu.add("kv", kv)
    gpu.add("compute", 300 * MiB)
    gpu.add("cuda_context", 350 * MiB)
    gpu.add("draft_weights", draft)
    gpu.add("dflash_ring", draft // 10)
    host = DeviceUse("CPU", None)
    host.add("weights", 500 * MiB)
    return MemoryPlan([gpu, host], 32768, 32768, 0, [])


def test_grouping_puts_every_item_somewhere() -> None:
    p = make_plan(24 * GiB, 18 * GiB, 2 * GiB, 1 * GiB)
    g = grouped(p.gpus[0])
    assert list(g) == ["weights", "KV cache", "compute", "draft", "overhead"]
    assert sum(g.values()) == p.gpus[0].total
    assert g["draft"] == GiB + GiB // 10 and g["overhead"] == 350 * MiB


def test_verdicts() -> None:
    assert verdict(make_plan(24 * GiB, 18 * GiB, 2 * GiB))[0] == "ok"
    state, text = verdict(make_plan(21 * GiB, 18 * GiB, 2 * GiB))
    assert state == "tight" and "1 GiB should stay free" in text
    state, text = verdict(make_plan(16 * GiB, 18 * GiB, 2 * GiB))
    assert state == "over" and "CUDA0 runs out of memory" in text and "Lower the context" in text
    cpu = MemoryPlan([DeviceUse("CPU", None, {"weights": GiB})], 4096, 4096, 0, [])
    assert verdict(cpu) == ("ok", "CPU only: about 1.0 GiB of system memory.")


def test_schedule_debounces_and_reports_fit_changes(qtbot: QtBot) -> None:
    bar = MemoryBar()
    qtbot.addWidget(bar)
    computed: list[int] = []

    def compute(kv: int) -> MemoryPlan:
        computed.append(kv)
        return make_plan(24 * GiB, 18 * GiB, kv * GiB)

    with qtbot.waitSignal(bar.fits_changed, timeout=2000) as blocker:
        for kv in (1, 2, 3, 8):
            bar.schedule(functools.partial(compute, kv))
    assert computed == [8]  # only the last request of the burst ran
    assert blocker.args == [False] and bar.state == "over" and not bar.fits
    assert "color: #d62728" in bar.summary.styleSheet()
    with qtbot.waitSignal(bar.fits_changed, timeout=2000) as blocker:
        bar.schedule(lambda: compute(1))
    assert blocker.args == [True] and bar.state == "ok"


def test_planner_errors_are_shown_not_raised(qtbot: QtBot) -> None:
    bar = MemoryBar()
    qtbot.addWidget(bar)

    def bad() -> MemoryPlan:
        raise ValueError("A quantized V cache (q4_0) needs flash attention: set flash attention on.")

    bar.schedule(bad)
    bar.flush()
    assert bar.state == "error" and "flash attention" in bar.summary.text()


def test_over_plan_paints_a_red_outline(qtbot: QtBot) -> None:
    bar = MemoryBar()
    qtbot.addWidget(bar)
    bar.resize(500, 120)
    bar.set_plan(make_plan(16 * GiB, 18 * GiB, 2 * GiB))
    image = bar.canvas.grab().toImage()
    # the track's outline (left edge, middle of the row) is drawn in red
    y = 11
    reds = [x for x in range(60, 80) if QColor(image.pixel(x, y)).red() > 180
            and QColor(image.pixel(x, y)).green() < 90]
    assert reds, "no red outline at the bar's left edge"
    assert RED.name() == "#d62728"
