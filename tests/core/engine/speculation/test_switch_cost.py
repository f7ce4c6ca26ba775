"""switch_cost: the toggle's "about N s" comes from this machine's own starts, per file and kind."""

from __future__ import annotations

from pathlib import Path

import pytest

from beedeck.core.engine.caps import EngineCaps, Generation
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.speculation.restart import describe_fast_restart, fast_restart_settings
from beedeck.core.engine.speculation.switch_cost import StartKey, SwitchCosts, say_expected


def test_expected_is_the_median_of_the_last_starts_and_survives_a_restart(tmp_path: Path) -> None:
    target = tmp_path / "t.gguf"
    target.write_bytes(b"x" * 10)
    costs = SwitchCosts(tmp_path / "times.json")
    first, switch = StartKey("/e", str(target), None, False), StartKey("/e", str(target), None, True)
    assert costs.expected(switch) is None  # never started: nothing promised
    for s in (9.7, 4.2, 4.4, 4.0):
        costs.record(switch, s)
    costs.record(first, 9.7)
    again = SwitchCosts(tmp_path / "times.json")
    assert again.expected(switch) == pytest.approx(4.3) and again.expected(first) == 9.7
    target.write_bytes(b"x" * 11)  # a new file of the same name is another key
    assert again.expected(switch) is None


def test_a_damaged_file_starts_over(tmp_path: Path) -> None:
    (tmp_path / "times.json").write_text("{not json")
    costs = SwitchCosts(tmp_path / "times.json")
    key = StartKey("/e", "/m", None, True)
    assert costs.expected(key) is None
    costs.record(key, 2.0)
    assert SwitchCosts(tmp_path / "times.json").expected(key) == 2.0


def test_words() -> None:
    assert say_expected(None) == "" and say_expected(0.3) == "about 1 s" and say_expected(4.6) == "about 5 s"
    assert say_expected(70) == "about 1 min 10 s"


def test_fast_restart_maps_the_page_cache_and_skips_the_fit_pass() -> None:
    s = LaunchSettings.guide_dflash("/m/t.gguf", "/m/d.gguf")
    assert not s.mmap and s.mlock  # the guide's --no-mmap --mlock
    caps = EngineCaps(path="/e", generation=Generation.BEE_B, flags=frozenset({"--fit", "--no-mmap", "--mlock"}))
    fast = fast_restart_settings(s, caps)
    assert fast.mmap and not fast.mlock and fast.extra_args[-2:] == ["--fit", "off"]
    assert s.extra_args == [] and not s.mmap  # the profile itself is untouched
    assert len(describe_fast_restart(s, caps)) == 2
    # An engine without a fit pass, or a user who chose one: nothing added.
    assert fast_restart_settings(s, EngineCaps(path="/e", generation=Generation.MAINLINE, flags=frozenset())).extra_args == []
    s.extra_args = ["--fit=on"]
    assert fast_restart_settings(s, caps).extra_args == ["--fit=on"]
