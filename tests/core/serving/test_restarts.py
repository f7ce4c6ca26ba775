"""What a restart learns (core/serving/restarts.py): the start times it keeps and what a switch is expected
to take, per mode with its draft file or without."""

from __future__ import annotations

from pathlib import Path

from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.mode import Mode
from beedeck.core.engine.speculation.switch_cost import SwitchCosts
from beedeck.core.serving import StartTimes


def test_a_switch_is_expected_to_take_what_the_last_ones_took(tmp_path: Path) -> None:
    times = StartTimes(SwitchCosts(tmp_path / "times.json"))
    dflash = LaunchSettings(target="/m/t.gguf", draft="/m/d.gguf", spec_mode=Mode.DFLASH)
    baseline = LaunchSettings(target="/m/t.gguf", draft="/m/d.gguf")
    times.started("/e/llama-server", dflash, 30.0, switch=False)  # the first start: read from disk
    assert times.expected(True) is None and times.expected(False) is None  # no switch measured yet
    times.started("/e/llama-server", baseline, 4.0, switch=True)
    assert times.expected(False) == 4.0 and times.expected(True) is None
    times.started("/e/llama-server", dflash, 5.0, switch=True)
    times.started("/e/llama-server", dflash, 7.0, switch=True)
    assert times.expected(True) == 6.0 and times.expected(False) == 4.0
    again = StartTimes(SwitchCosts(tmp_path / "times.json"))  # kept across sessions
    again.started("/e/llama-server", baseline, 4.0, switch=True)
    assert again.expected(False) == 4.0 and again.expected(True) is None  # which draft: learnt once loaded

