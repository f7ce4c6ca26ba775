"""The gauge's figures without Qt: the live rate over a window of tokens, the dial's scale per reply and
the last figure per mode (core/chat/speed.py). Times are given, not slept."""

from __future__ import annotations

import pytest

from beedeck.core.chat.speed import DEFAULT_SCALE, LiveRate, ModeFigures, nice_scale
from beedeck.core.engine.mode import IN_SERVER_BASELINE, Mode
from beedeck.core.engine.speculation.comparison import Evidence, compare


def _stream(rate: LiveRate, t0: float, arrivals: list[tuple[float, int]]) -> None:
    """Feed ``arrivals`` as (seconds after t0, pieces arriving at once, a few microseconds apart)."""
    for t, pieces in arrivals:
        for i in range(pieces):
            rate.add(t0 + t + i * 2e-6)


def test_nice_scale() -> None:
    assert nice_scale(0) == 10
    assert nice_scale(30) == 50
    assert nice_scale(90) == 200
    assert nice_scale(900) == 2000


def test_two_pieces_microseconds_apart_are_no_rate() -> None:
    """The issue's cause: a rate between two near-simultaneous deltas read ~500,000 tokens/s."""
    r = LiveRate()
    r.start(100.0)
    _stream(r, 100.0, [(0.5, 2)])  # two pieces 2 us apart, after a 0.5 s prefill
    assert r.rate(100.5 + 1e-5) is None  # a stream younger than min_span_s has no rate yet
    later = r.rate(100.5 + 0.3)
    assert later is not None and later < 10  # one token over >= 0.25 s, not 1 / 2 us


@pytest.mark.parametrize("burst", [4, 16, 48])
def test_bursts_of_accepted_drafts_read_as_their_true_rate(burst: int) -> None:
    """N-gram style: ``burst`` tokens at once every 0.2 s, a true 5 x burst tokens/s. Every reading
    after the first window stays within a factor 2 of it (the old rate spiked into the 100,000s)."""
    r = LiveRate()
    r.start(0.0)
    true = burst / 0.2
    values = []
    for k in range(50):
        _stream(r, 0.0, [(0.1 + 0.2 * k, burst)])
        for after in (0.001, 0.1, 0.19):  # the dial reads every 100 ms, at any point between bursts
            value = r.rate(0.1 + 0.2 * k + after)
            if k >= 2:
                assert value is not None
                values.append(value)
    assert true / 2 <= min(values) and max(values) <= 2 * true, (min(values), max(values))


def test_steady_streams_read_their_rate_from_5_to_10000_tokens_per_s() -> None:
    for tps in (5.0, 40.0, 1000.0, 10000.0):
        r = LiveRate()
        r.start(0.0)
        n = int(tps * 4)
        for i in range(n):
            r.add(0.2 + i / tps)
        now = 0.2 + (n - 1) / tps + 0.5 / tps
        value = r.rate(now)
        assert value is not None and abs(value - tps) / tps < 0.15, (tps, value)


def test_a_stalled_stream_falls_to_zero_and_a_change_shows_within_the_window() -> None:
    r = LiveRate(max_span_s=2.0)
    r.start(0.0)
    for i in range(200):  # 100 tokens/s for 2 s
        r.add(0.1 + i / 100)
    assert r.rate(2.1 + 2.5) == 0.0  # nothing for longer than max_span_s
    r.start(10.0)
    for i in range(100):  # 100 tokens/s for 1 s, then 10 tokens/s
        r.add(10.1 + i / 100)
    for i in range(40):
        r.add(11.1 + i / 10)
    value = r.rate(15.05)
    assert value is not None and 7 < value < 14  # the window follows the slower pace, not the start


def test_ttft_is_set_by_the_first_token_and_counts_tokens() -> None:
    r = LiveRate()
    assert r.ttft() is None
    r.start(50.0)
    assert r.ttft() is None
    r.add(50.75)
    r.add(50.8, tokens=3)
    assert r.ttft() == pytest.approx(0.75) and r.count == 4
    r.start(60.0)
    assert r.ttft() is None and r.count == 0  # a new reply forgets the last one


def test_memory_stays_bounded_at_10000_tokens_per_s() -> None:
    r = LiveRate(max_span_s=2.0)
    r.start(0.0)
    for i in range(100_000):  # 10 s at 10,000 tokens/s
        r.add(i / 10_000)
    assert len(r._times) <= 2 * 10_000 + 2


def test_bad_windows_are_refused() -> None:
    with pytest.raises(ValueError):
        LiveRate(min_span_s=2.0, max_span_s=1.0)


def test_mode_figures_lines_for_every_mode_with_speedups_only_from_the_rule() -> None:
    f = ModeFigures()
    assert f.lines() == ["Baseline —"]
    f.record(Mode.MODEL_FREE, 90.0, drafted=40)
    assert f.lines() == ["Baseline —", "N-gram 90.0 tok/s (last reply)"]
    f.record(Mode.BASELINE, 30.0, "benchmark")
    f.record(Mode.DFLASH, 63.0, drafted=0)
    f.record(Mode.MTP, 45.0, "tune")
    f.record(Mode.DSPARK, 0.0)  # no figure: never recorded
    # no ratio from one figure against another: a chat reply's, or a median without its comparison
    assert f.lines() == ["Baseline 30.0 tok/s (benchmark)", "DFlash 63.0 tok/s (last reply) · drafted nothing",
                         "MTP 45.0 tok/s (tune)", "N-gram 90.0 tok/s (last reply)"]
    runs = Evidence({"a": [30.0, 31.0, 29.0]})
    f.record(Mode.MTP, 45.0, "tune", comparison=compare(runs, Evidence({"a": [45.0, 46.0, 44.0]}, drafted=9)))
    f.record(Mode.DFLASH, 64.0, "chat", comparison=compare(runs, Evidence({"a": [64.0, 64.0, 64.0]})))  # ignored
    assert f.lines()[2:4] == ["MTP 45.0 tok/s (tune)", "  vs Baseline: ×1.50 (1.42-1.59, 3 runs); tune"]
    assert f.compared(Mode.DFLASH) is None
    f.clear()
    assert f.lines() == ["Baseline —"] and f.as_dict() == {} and f.compared(Mode.MTP) is None
    # a benchmark's in-server baseline is a variant of Baseline: its own line, right after Baseline's
    f.record(Mode.DFLASH, 63.0, "benchmark")
    f.record(IN_SERVER_BASELINE, 35.0, "benchmark")
    f.record(Mode.BASELINE, 30.0, "benchmark")
    assert f.lines() == ["Baseline 30.0 tok/s (benchmark)", "Baseline (draft loaded) 35.0 tok/s (benchmark)",
                         "DFlash 63.0 tok/s (benchmark)"]
    assert f.get(IN_SERVER_BASELINE) != f.get(Mode.BASELINE) and f.scale_for(Mode.BASELINE) == 50


def test_a_speed_up_against_a_kept_baseline_says_so_and_how_old_it_is() -> None:
    """Issue 36: the dock says when the baseline a benchmark compared against came from the cache, and its age."""
    f = ModeFigures()
    runs = Evidence({"a": [30.0, 31.0, 29.0]})
    f.record(Mode.DFLASH, 60.0, "benchmark", comparison=compare(runs, Evidence({"a": [60.0, 61.0, 59.0]}, drafted=90)),
             baseline_at=1_000.0)
    assert f.lines(now=1_000.0 + 3 * 3600)[-1] == "  vs Baseline: ×2.00 (1.90-2.10, 3 runs); benchmark; baseline kept, " \
        "measured 3 h ago"
    f.record(Mode.DFLASH, 60.0, "benchmark", comparison=compare(runs, Evidence({"a": [60.0, 61.0, 59.0]}, drafted=90)))
    assert f.lines()[-1].endswith("; benchmark")  # measured with it: nothing more to say


def test_scale_per_reply_follows_the_mode_and_the_server() -> None:
    f = ModeFigures()
    assert f.scale_for(Mode.BASELINE) == DEFAULT_SCALE
    f.record(Mode.MODEL_FREE, 400.0)
    f.record(Mode.BASELINE, 30.0)
    assert f.scale_for(Mode.BASELINE) == 50  # a baseline reply: its own scale, not the n-gram's 500
    assert f.scale_for(Mode.MODEL_FREE) == 500
    assert f.scale_for(Mode.DFLASH) == 50  # unmeasured mode: room for the baseline marker
    f.clear()  # another server (a remote one): nothing of the old one stays
    assert f.scale_for(Mode.MODEL_FREE) == DEFAULT_SCALE
