"""The baseline measured once and kept (core/bench/baseline_cache.py): its key follows everything its speed
depends on and nothing else, it reads back as stored, and a damaged file is never trusted. The runner's use of it
on a real engine: tests/engine/test_bench_real.py."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

import pytest

from beedeck.core.bench.baseline_cache import KEEP, BaselineCache, baseline_key
from beedeck.core.bench.results import ModeRun, Sample
from beedeck.core.bench.suites import BenchPrompt, BenchSuite
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.mode import Mode, Variant
from beedeck.core.engine.speculation.comparison import age_text
from tests.fakes.fake_launch import mainline_caps

SUITE = BenchSuite("t", (BenchPrompt("a", "Write code A."),), max_tokens=20, temperature=0.0, seed=7)


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    out = {}
    for name in ("llama-server", "t.gguf", "d.gguf"):
        out[name] = tmp_path / name
        out[name].write_bytes(b"x" * 10)
    return out


def test_the_key_follows_what_the_baselines_speed_depends_on_and_nothing_else(files: dict[str, Path]) -> None:
    engine, caps = files["llama-server"], mainline_caps(str(files["llama-server"]))
    base = LaunchSettings(target=str(files["t.gguf"]), ctx_size=8192, cache_type_k="q5_0", cache_type_v="q4_1")

    def key(s: LaunchSettings = base, suite: BenchSuite = SUITE, reps: int = 3, gpus: tuple[str, ...] = ("RTX 4090",)) -> str:
        return baseline_key(engine, caps, s, suite, reps, 1, gpus).text()

    first = key()
    # speculation alone is no change: the baseline has no draft
    assert key(replace(base, draft=str(files["d.gguf"]), spec_mode=Mode.DFLASH, draft_n_max=15)) == first
    changes = {
        "context": key(replace(base, ctx_size=16384)), "KV types": key(replace(base, cache_type_v="q8_0")),
        "threads": key(replace(base, threads=4)), "GPU": key(gpus=("RTX 3090",)),
        "prompts": key(suite=replace(SUITE, prompts=(BenchPrompt("a", "Write code B."),))),
        "temperature": key(suite=replace(SUITE, temperature=0.7)), "seed": key(suite=replace(SUITE, seed=8)),
        "reps": key(reps=5),
    }
    assert all(k != first for k in changes.values()), [n for n, k in changes.items() if k == first]
    os.utime(files["t.gguf"], ns=(1, 1))  # the model file replaced (a new download of the same name)
    assert key() != first
    files["llama-server"].write_bytes(b"y" * 11)  # another engine build at the same path
    assert key() != first


def test_a_kept_baseline_reads_back_as_measured_and_a_damaged_file_is_not_trusted(tmp_path: Path,
                                                                                   files: dict[str, Path]) -> None:
    cache = BaselineCache(tmp_path / "baselines.json")
    caps = mainline_caps(str(files["llama-server"]))
    key = baseline_key(files["llama-server"], caps, LaunchSettings(target=str(files["t.gguf"])), SUITE, 3, 1, ())
    assert cache.get(key) is None
    samples = [Sample(Variant(Mode.BASELINE), "a", rep, 7 + rep, completion_tokens=20, gen_tps=50.0 + rep, text="t") for rep in range(3)]
    cache.put(key, ModeRun(Variant(Mode.BASELINE), "restart", argv=["llama-server", "-m", "t.gguf"], ready_s=1.5), samples,
              measured_at=1000.0)
    kept = cache.get(key)
    assert kept is not None and kept.samples == samples and kept.measured_at == 1000.0
    assert kept.run.argv == ["llama-server", "-m", "t.gguf"] and kept.run.ready_s == 1.5
    (tmp_path / "baselines.json").write_text(json.dumps({"schema": 1, "baselines": {key.text(): {"run": 3}}}))
    assert cache.get(key) is None  # damaged: measured again
    (tmp_path / "baselines.json").write_text("{not json")
    assert cache.get(key) is None
    for i in range(KEEP + 3):  # bounded: the oldest go
        cache.put(replace(key, ctx=i), ModeRun(Variant(Mode.BASELINE), "restart"), samples, measured_at=float(i))
    kept_keys = json.loads((tmp_path / "baselines.json").read_text())["baselines"]
    assert len(kept_keys) == KEEP and cache.get(replace(key, ctx=0)) is None and cache.get(replace(key, ctx=KEEP + 2))


@pytest.mark.parametrize(("age", "said"), [(30, "measured just now"), (300, "measured 5 min ago"),
                                           (3 * 3600, "measured 3 h ago"), (86400, "measured 1 day ago"),
                                           (5 * 86400, "measured 5 days ago")])
def test_how_old_a_kept_figure_is_said(age: float, said: str) -> None:
    assert age_text(1000.0, 1000.0 + age) == said
