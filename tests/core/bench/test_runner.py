"""The benchmark core against the protocol-level fake llama-server (the real engine runs in
tests/engine/test_bench_real.py): suites, fairness of the requests, statistics, reports."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from beedeck.core.bench import report as br
from beedeck.core.bench.results import BenchReport, Sample
from beedeck.core.bench.runner import check_modes, mode_settings, parse_variants, run_bench
from beedeck.core.bench.suites import (
    BenchError,
    BenchPrompt,
    BenchSuite,
    SuiteError,
    load_suite,
    suite_from_dict,
)
from beedeck.core.engine.argv import build_argv
from beedeck.core.engine.help_text import caps_from_texts
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.mode import IN_SERVER_BASELINE, Mode, Variant
from beedeck.core.engine.speculation.comparison import compare
from beedeck.core.engine.speculation.switching import PerRequestMemory, PerRequestVerdict
from tests.conftest import FIXTURES
from tests.fakes.sse_server import FakeLlamaServer, SSEScript
from tests.fixtures.engines import BEE_A, MAINLINE, help_stdout


class ModeAwareFake(FakeLlamaServer):
    """The fake llama-server, answering a request that turns speculation off (BeeLlama's
    ``speculative.n_max: 0``) from ``base`` and any other from ``spec``, as a Bee server would."""

    def __init__(self, base: SSEScript, spec: SSEScript) -> None:
        super().__init__(base)
        self.base, self.spec = base, spec

    def stream_bytes(self, script: SSEScript) -> Iterator[bytes | None]:
        body = self.requests[-1].body
        chosen = self.base if isinstance(body, dict) and body.get("speculative.n_max") == 0 else self.spec
        return super().stream_bytes(chosen)


SUITE = BenchSuite("t", (BenchPrompt("a", "Write code A."), BenchPrompt("b", "Write prose B.", "prose")),
                   max_tokens=20, temperature=0.0, seed=7)


@pytest.fixture
def fake() -> Iterator[ModeAwareFake]:
    tokens = [f"t{i} " for i in range(20)]
    srv = ModeAwareFake(SSEScript(tokens=tokens, rate=100),
                        SSEScript(tokens=tokens, rate=400, draft_n=18, draft_n_accepted=15))
    srv.start()
    yield srv
    srv.stop()


def _chat_bodies(srv: FakeLlamaServer) -> list[dict[str, Any]]:
    return [r.body for r in srv.requests if r.method == "POST"]


# --------------------------------------------------------------------------------------- suites


def test_builtin_suites_load_and_seed_matches_the_guide() -> None:
    guide = json.loads((FIXTURES / "seed-bench-prompts.json").read_text())
    seed = load_suite("seed")
    assert [p.text for p in seed.prompts] == [p["text"] for p in guide["prompts"]]
    assert (seed.max_tokens, seed.temperature) == (1200, 0.7)
    assert seed.reference and seed.reference["baseline_tok_s"] == 40.68
    for name in ("prose", "json", "code-edit", "agent"):
        s = load_suite(name)
        assert len(s.prompts) >= 3 and s.source == f"builtin:{name}"


def test_agent_suite_shares_a_long_prefix_over_several_turns() -> None:
    agent = load_suite("agent")
    systems = {p.system for p in agent.prompts}
    assert len(systems) == 1 and len(next(iter(systems)) or "") > 3000, "one long shared prefix"
    assert agent.max_tokens <= 128, "agents get short edits back"
    turns = [p.messages() for p in agent.prompts]
    second, third = turns[1], turns[2]
    assert [m["role"] for m in second] == ["system", "user", "assistant", "user"]
    assert third[:len(second)] == second, "each turn repeats the conversation so far: a shared prefix"
    again = suite_from_dict(agent.to_dict(), "round-trip")
    assert again.prompts == agent.prompts
    with pytest.raises(SuiteError, match=r"prompts\[0\].history\[0\]: is not a user or assistant turn"):
        suite_from_dict({"prompts": [{"text": "x", "history": [{"role": "tool", "content": "y"}]}]}, "mine")


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "not a JSON object"),
        ('{"prompts": []}', "prompts: is missing or empty"),
        ('{"prompts": ["x"], "request": {"max_tokens": 0}}', "request.max_tokens: 0 is not a positive whole number"),
        ('{"prompts": ["x"], "request": {"temperature": "hot"}}', "request.temperature"),
        ('{"prompts": ["x"], "request": {"cache_prompt": true}}', "cache_prompt is set by the benchmark itself"),
        ('{"prompts": [{"id": "a", "text": "x"}, {"id": "a", "text": "y"}]}', "prompts[1].id: 'a' is used twice"),
        ('{"prompts": [{"id": "a", "text": "  "}]}', "prompts[0].text: is missing or empty"),
        ('{"prompts": [{"text": "x", "max_tokens": -5}]}', "prompts[0].max_tokens"),
    ],
)
def test_user_suite_errors_name_the_field_and_the_fix(tmp_path: Path, content: str, expected: str) -> None:
    path = tmp_path / "mine.json"
    path.write_text(content)
    with pytest.raises(SuiteError) as err:
        load_suite(path)
    assert expected in str(err.value)
    assert str(path) in str(err.value)


def test_user_suite_from_file_and_unknown_name(tmp_path: Path) -> None:
    path = tmp_path / "mine.json"
    path.write_text(json.dumps({"prompts": ["Say hi.", {"id": "q", "text": "Q?", "category": "prose",
                                                        "system": "Be brief."}],
                                "request": {"max_tokens": 50, "top_k": 1}}))
    s = load_suite(str(path))
    assert s.name == "mine" and s.max_tokens == 50 and s.extra == {"top_k": 1}
    assert s.prompts[1].messages()[0] == {"role": "system", "content": "Be brief."}
    assert s.with_overrides(max_tokens=8).max_tokens_for(s.prompts[0]) == 8
    with pytest.raises(SuiteError, match="not a built-in suite: use one of seed"):
        load_suite("nope")


# ------------------------------------------------------------------------------ modes and argv


def test_mode_checks_and_per_request_choice() -> None:
    ml = caps_from_texts("ml", "", help_stdout(MAINLINE))
    bee = caps_from_texts("bee", "", help_stdout(BEE_A))
    with pytest.raises(BenchError, match="The DFlash mode cannot run: No DFlash draft model is configured.*Or leave "
                                         "dflash out of the modes"):
        check_modes([Variant(Mode.BASELINE), Variant(Mode.DFLASH)], ml, LaunchSettings(target="t.gguf"))
    with pytest.raises(BenchError, match="Unknown benchmark mode 'fast'"):
        parse_variants(["fast"])
    assert check_modes(parse_variants(["baseline", "baseline"]) + [Variant(Mode.MODEL_FREE)], ml, LaunchSettings(target="t")) == [Variant(Mode.BASELINE), Variant(Mode.MODEL_FREE)]
    with pytest.raises(BenchError, match="add dflash"):
        check_modes([IN_SERVER_BASELINE], bee, LaunchSettings(target="t", draft="d"))


def test_mode_checks_read_the_model_files(tmp_path: Path) -> None:
    from tests.fixtures import meta_gguf as mg

    ml = caps_from_texts("ml", "", help_stdout(MAINLINE))
    bee = caps_from_texts("bee", "", help_stdout(BEE_A))
    mtp = mg.tiny_model(tmp_path / "mtp.gguf", arch="qwen35", n_embd=128, extra={"qwen35.nextn_predict_layers": 1})
    plain = mg.tiny_model(tmp_path / "plain.gguf", n_embd=128)
    assert check_modes([Variant(Mode.BASELINE), Variant(Mode.MTP), Variant(Mode.MODEL_FREE)], ml, LaunchSettings(target=str(mtp))) == [Variant(Mode.BASELINE), Variant(Mode.MTP), Variant(Mode.MODEL_FREE)]
    with pytest.raises(BenchError, match="The MTP mode cannot run: plain.gguf has no MTP heads"):
        check_modes([Variant(Mode.BASELINE), Variant(Mode.MTP)], ml, LaunchSettings(target=str(plain)))
    with pytest.raises(BenchError, match="The MTP mode cannot run: BeeLlama 0.1-0.3 has no MTP"):
        check_modes([Variant(Mode.MTP)], bee, LaunchSettings(target=str(mtp)))
    with pytest.raises(BenchError, match="plain.gguf is an ordinary model, not a speculation draft"):
        check_modes([Variant(Mode.EAGLE3)], ml, LaunchSettings(target=str(mtp), draft=str(plain)))
    with pytest.raises(BenchError, match="Unknown benchmark mode 'draft-mtp'"):
        parse_variants(["draft-mtp"])  # the engines' words are the CLI's (parse_modes), not a variant's


def test_restart_modes_differ_only_in_speculation_flags() -> None:
    ml = caps_from_texts("ml", "", help_stdout(MAINLINE))
    base = LaunchSettings(target="t.gguf", draft="d.gguf", port=8910, draft_n_max=15)
    plans = {m: build_argv(mode_settings(base, m, ml), ml) for m in (Mode.BASELINE, Mode.DFLASH, Mode.MODEL_FREE)}
    argv = {m: p.argv for m, p in plans.items()}
    for m in (Mode.DFLASH, Mode.MODEL_FREE):
        rest = [pair for pair in plans[m].pairs() if not pair[0].startswith("--spec-")]
        assert rest == plans[Mode.BASELINE].pairs()
        assert len(plans[m].pairs()) > len(rest)
    assert "draft-dflash" in argv[Mode.DFLASH] and "ngram-mod" in argv[Mode.MODEL_FREE]


# ---------------------------------------------------------------------------------- the runner


def test_per_request_run_is_fair_and_names_its_baseline_for_what_it_is(fake: ModeAwareFake) -> None:
    progress: list[tuple[int, int, str]] = []
    seen: list[Sample] = []
    report = run_bench(None, None, None, SUITE, (Variant(Mode.BASELINE), Variant(Mode.DFLASH)), reps=3, warmup=1, url=fake.base_url,
                       switching="per-request", on_progress=lambda d, t, s: progress.append((d, t, s)),
                       on_sample=seen.append, environment={})
    assert report.ok, report.errors
    # A running server switched per request has no baseline without the draft: its baseline is the
    # in-server one, named so, and the report says what the speed-ups are then against.
    assert report.variants == [IN_SERVER_BASELINE, Variant(Mode.DFLASH)]
    bodies = _chat_bodies(fake)
    assert len(bodies) == 2 * 1 + 2 * 3 * 2  # warm-ups + modes x reps x prompts
    assert all(b["cache_prompt"] is False and b["temperature"] == 0.0 for b in bodies)
    base_bodies = [b for b in bodies if b.get("speculative.n_max") == 0]
    assert len(base_bodies) == 7 and all(b["speculative.n_min"] == 0 for b in base_bodies)
    # modes interleave, each (prompt, rep) pair goes out with the same seed and messages in both modes
    measured = bodies[2:]
    for i in range(0, len(measured), 2):
        a, b = measured[i], measured[i + 1]
        assert a["seed"] == b["seed"] and a["messages"] == b["messages"] and a["max_tokens"] == b["max_tokens"] == 20
    assert sorted({b["seed"] for b in measured}) == [7, 8, 9]
    assert len(report.samples) == len(seen) == 12
    # In tokens: 2 modes x (a 20-token warm-up + 3 reps x 2 prompts x 20 tokens).
    assert progress[-1][:2] == (280, 280) and "280 of 280 tokens" in progress[-1][2]

    s = br.summarize(report)
    d = s.overall[Variant(Mode.DFLASH)]
    assert d.acceptance == pytest.approx(15 / 18) and d.accepted_share == pytest.approx(15 / 20)
    assert d.speedup is not None and d.speedup.ratio > 1.5 and d.speedup.ci_low > 1.2, d.speedup
    assert d.speedup.ci_low <= d.speedup.ratio <= d.speedup.ci_high
    assert d.similarity == 1.0 and d.identical == d.compared == 6
    assert s.overall[IN_SERVER_BASELINE].acceptance is None and s.prompts["a"][Variant(Mode.DFLASH)].speedup is not None
    assert len(s.flags) == 1 and "no baseline without the draft" in s.flags[0]


def test_a_baseline_reply_that_drafted_is_an_error_not_a_data_point(fake: ModeAwareFake, tmp_path: Path) -> None:
    # A server that ignores the per-request field (BeeLlama >= 0.4, mainline): the "baseline" drafts.
    fake.base.draft_n, fake.base.draft_n_accepted = 17, 17
    engine = tmp_path / "llama-server"
    engine.write_text("")
    caps = dataclasses.replace(caps_from_texts(str(engine), "", help_stdout(BEE_A)), path=str(engine))
    memory = PerRequestMemory(tmp_path / "per-request.json")
    memory.remember(caps, PerRequestVerdict(True, 20, 0, 0.0))  # a stale verdict the replies overturn
    report = run_bench(None, caps, None, SUITE, (Variant(Mode.BASELINE), Variant(Mode.DFLASH)), reps=2, warmup=0, url=fake.base_url,
                       switching="per-request", environment={}, per_request_memory=memory)
    bad = [x for x in report.samples if x.variant == IN_SERVER_BASELINE]
    assert len(bad) == 4 and all(x.error and "drafted 17 tokens" in x.error for x in bad)
    assert report.samples_for(IN_SERVER_BASELINE) == [] and not report.ok
    assert any("drafted 17 tokens" in e for e in report.errors)
    assert IN_SERVER_BASELINE not in br.summarize(report).overall  # never a figure
    assert memory.get(caps) is False


def test_greedy_text_mismatch_is_flagged(fake: ModeAwareFake) -> None:
    fake.spec.tokens = [f"t{i} " for i in range(19)] + ["different"]
    report = run_bench(None, None, None, SUITE, (Variant(Mode.BASELINE), Variant(Mode.DFLASH)), reps=1, warmup=0, url=fake.base_url,
                       switching="per-request", environment={})
    s = br.summarize(report)
    assert s.overall[Variant(Mode.DFLASH)].identical == 0 and 0.8 < (s.overall[Variant(Mode.DFLASH)].similarity or 0) < 1.0
    assert any("greedy decoding the text differs" in f for f in s.flags)


def test_cancel_stops_the_run_and_keeps_what_finished(fake: ModeAwareFake) -> None:
    cancel = threading.Event()

    def on_progress(done: int, total: int, label: str) -> None:
        if done >= 4 * SUITE.max_tokens:  # four replies' budget
            cancel.set()

    report = run_bench(None, None, None, SUITE, (Variant(Mode.DFLASH),), reps=5, warmup=0, url=fake.base_url,
                       on_progress=on_progress, cancel_event=cancel, environment={})
    assert report.cancelled and not report.ok and not report.errors
    assert 4 <= len(report.samples) < 10
    assert any("cancelled" in f for f in br.summarize(report).flags)


def test_server_errors_are_recorded_not_raised() -> None:
    with FakeLlamaServer(SSEScript(status=500, error_message="Invalid input batch.")) as srv:
        report = run_bench(None, None, None, SUITE, (Variant(Mode.BASELINE),), reps=1, warmup=0, url=srv.base_url, environment={})
    assert not report.ok and "Invalid input batch." in report.errors[0]
    assert all(s.error for s in report.samples)
    assert br.summarize(report).overall == {}


def test_a_running_server_cannot_be_switched_without_per_request() -> None:
    with pytest.raises(BenchError, match="only be benchmarked in one mode"):
        run_bench(None, None, None, SUITE, (Variant(Mode.BASELINE), Variant(Mode.DFLASH)), url="http://127.0.0.1:9", environment={})
    with pytest.raises(BenchError, match="reps must be at least 1"):
        run_bench(None, None, None, SUITE, (Variant(Mode.BASELINE),), reps=0, url="http://127.0.0.1:9", environment={})


# ---------------------------------------------------------------------------------- statistics


def test_stats_and_bootstrap_are_exact_and_reproducible() -> None:
    st = br.stats([10.0, 30.0, 20.0, None, 40.0])
    assert st is not None and (st.n, st.median, st.min, st.max) == (4, 25.0, 10.0, 40.0)
    assert (st.q1, st.q3) == (17.5, 32.5) and st.iqr == 15.0
    assert br.stats([]) is None
    # the speed-ups: BeeDeck's one rule (tests/core/engine/speculation/test_comparison.py)
    base = br.mode_evidence([Sample(Variant(Mode.BASELINE), "a", r, r, gen_tps=v) for r, v in enumerate((10, 11, 9))], Variant(Mode.BASELINE))
    fast = br.mode_evidence([Sample(Variant(Mode.DFLASH), "a", r, r, gen_tps=v, draft_n=5) for r, v in enumerate((30, 33, 27))],
                            Variant(Mode.DFLASH))
    one = compare(base, fast)
    assert one == compare(base, fast)  # seeded
    assert one.ratio == 3.0 and one.ci_low is not None and one.ci_high is not None
    assert 27 / 11 <= one.ci_low <= 3.0 <= one.ci_high <= 33 / 9


def _report_with(samples: list[Sample], env: dict[str, Any]) -> BenchReport:
    r = BenchReport(SUITE, [Variant(Mode.BASELINE), Variant(Mode.DFLASH)], reps=3, warmup=1, samples=samples, environment=env)
    return r


def _samples() -> list[Sample]:
    out = []
    for rep in range(3):
        for pid in ("a", "b"):
            out.append(Sample(Variant(Mode.BASELINE), pid, rep, 7 + rep, completion_tokens=20, gen_tps=40 + rep, text="x y"))
            out.append(Sample(Variant(Mode.DFLASH), pid, rep, 7 + rep, completion_tokens=20, gen_tps=140 + rep, draft_n=19,
                              draft_n_accepted=17, acceptance=17 / 19, accepted_share=0.85, text="x y"))
    return out


def test_reports_are_written_and_consistent(tmp_path: Path) -> None:
    report = _report_with(_samples(), {"gpus": [], "engine": {"path": "/x/llama-server"}})
    files = br.write_reports(report, tmp_path / "out")
    assert [f.name for f in files] == ["report.md", "report.json", "samples.csv"]
    md = files[0].read_text()
    assert "| Baseline | 41.0 |" in md and "| DFlash | 141.0 |" in md  # one name per mode: the label
    assert "3.44x (" in md and ", 3 runs of 2 prompts) |" in md  # the speed-up with its interval and runs
    assert "| baseline |" not in md and "| dflash |" not in md
    assert "are not shown: this run's GPU or model pair differs" in md
    data = json.loads(files[1].read_text())
    assert data["kind"] == "beedeck-bench" and len(data["samples"]) == 12
    assert data["summary"]["overall"]["dflash"]["acceptance"] == pytest.approx(17 / 19)
    assert data["suite"]["prompts"][0]["text"] == "Write code A."
    rows = list(csv.DictReader(io.StringIO(files[2].read_text())))
    assert len(rows) == 12 and rows[1]["mode"] == "dflash" and float(rows[1]["gen_tps"]) == 140.0


def test_guide_reference_only_for_the_guides_gpu_and_pair() -> None:
    env = {"gpus": [{"name": "NVIDIA GeForce RTX 4090"}],
           "models": {"target": {"file": "gemma-4-31B-it-Q4_K_S.gguf"},
                      "draft": {"file": "gemma4-31b-it-dflash-Q5_K_M.gguf"}}}
    md = br.to_markdown(_report_with(_samples(), env))
    assert "guide (RTX 4090) |" in md and "| 40.68 |" in md and "| 130-153 |" in md
    env["gpus"] = [{"name": "NVIDIA GeForce RTX 3090"}]
    assert br.guide_reference(env) is None



def test_peak_gpu_memory_comes_from_the_sampler(fake: ModeAwareFake) -> None:
    from beedeck.core.machine.sampler import GpuSampler
    from tests.fakes.fake_nvml import FakeNvml, rtx4090

    gpu = rtx4090()
    sampler = GpuSampler(nvml_module=FakeNvml([gpu]), interval=0.01)
    # (The fake drafts when not asked otherwise: measured as DFlash, since a "baseline" that drafts is an error.)
    report = run_bench(None, None, None, SUITE, (Variant(Mode.DFLASH),), reps=1, warmup=0, url=fake.base_url,
                       gpu_sampler=sampler, environment={})
    assert report.ok and not sampler.running  # the run stops its sampler
    # A running server has no pid the benchmark knows: the whole GPU's use is the figure.
    assert [s.peak_gpu_mem for s in report.samples] == [gpu.used, gpu.used]
    s = br.summarize(report)
    assert s.overall[Variant(Mode.DFLASH)].peak_gpu_mem == gpu.used
    assert f"{gpu.used / 2**30:.2f} GiB" in br.to_markdown(report, s)


def test_cancel_while_the_server_loads_stops_it_at_once(tmp_path: Path) -> None:
    """A big model can load for minutes: a cancel then must stop the server now, not once it is ready."""
    import contextlib
    import os
    import signal
    import time

    from tests.fixtures.meta_gguf import tiny_model

    pid_file = tmp_path / "engine.pid"
    engine = tmp_path / "llama-server"  # prints one log line, then "loads" forever without listening
    engine.write_text(f"#!/bin/sh\necho $$ > {pid_file}\necho 'loading model'\nexec sleep 600\n")
    engine.chmod(0o755)
    caps = caps_from_texts(str(engine), "version: 11434 (abcdef0)", help_stdout(MAINLINE))
    settings = LaunchSettings(target=str(tiny_model(tmp_path / "tiny.gguf")), n_gpu_layers="0")
    cancel = threading.Event()

    def on_line(line: str) -> None:
        if "loading model" in line:
            cancel.set()

    t0 = time.monotonic()
    try:
        report = run_bench(engine, caps, settings, SUITE, (Variant(Mode.BASELINE),), reps=1, warmup=0, switching="restart",
                           on_line=on_line, cancel_event=cancel, ready_timeout=30, environment={},
                           pid_file=tmp_path / "bench.pid")
        elapsed = time.monotonic() - t0
        assert report.cancelled and not report.samples
        assert elapsed < 10, f"the cancel waited {elapsed:.1f} s for a server that never got ready"
        pid = int(pid_file.read_text())
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    finally:
        if pid_file.exists():  # in case a check above failed: never leave the fake engine behind
            with contextlib.suppress(ProcessLookupError, ValueError):
                os.killpg(int(pid_file.read_text()), signal.SIGKILL)


def test_cli_modes_accept_the_engines_words_and_all(tmp_path: Path) -> None:
    from beedeck.clicmd.bench import default_bench_modes, parse_modes
    from tests.fixtures import meta_gguf as mg

    ml = caps_from_texts("ml", "", help_stdout(MAINLINE))
    mtp = mg.tiny_model(tmp_path / "mtp.gguf", arch="qwen35", n_embd=128, extra={"qwen35.nextn_predict_layers": 1})
    s = LaunchSettings(target=str(mtp))
    assert default_bench_modes(ml, s) == [Variant(Mode.BASELINE), Variant(Mode.MTP)]
    assert parse_modes("off, draft-mtp,ngram", ml, s) == [Variant(Mode.BASELINE), Variant(Mode.MTP), Variant(Mode.MODEL_FREE)]
    assert parse_modes("all", ml, s) == [Variant(Mode.BASELINE), Variant(Mode.MTP), Variant(Mode.MODEL_FREE)]
    with pytest.raises(BenchError, match="Unknown benchmark mode 'copyspec': use baseline, dflash, eagle3, dspark, mtp, "
                                         "model-free, baseline-draft-loaded"):
        parse_modes("baseline,copyspec", ml, s)  # not a mainline type
    assert parse_modes("baseline,ngram-simple", ml, s) == [Variant(Mode.BASELINE), Variant(Mode.MODEL_FREE)] and s.spec_model_free_type == "ngram-simple"
    with pytest.raises(BenchError, match="--modes all needs BeeDeck to start the engine"):
        parse_modes("all", None, None)


def test_progress_counts_tokens_so_a_long_reply_moves_the_bar(fake: ModeAwareFake) -> None:
    """The issue: progress counted prompts (87 % for over 30 s while the longest reply ran). It moves
    with the tokens of a streaming reply, and a reply that ends early closes its whole budget."""
    fake.spec.tokens = [f"t{i} " for i in range(60)]
    fake.spec.rate = 100  # 0.6 s per reply: progress arrives within replies (twice a second)
    # b's cap holds the fake's 60 tokens: a server streaming far past max_tokens is ended (ReplyOverrun).
    long = BenchSuite("long", (BenchPrompt("a", "Write code A.", max_tokens=80), BenchPrompt("b", "Short.", max_tokens=60)),
                      max_tokens=80, temperature=0.0, seed=7)
    progress: list[tuple[int, int, str]] = []
    report = run_bench(None, None, None, long, (Variant(Mode.DFLASH),), reps=1, warmup=0, url=fake.base_url,
                       on_progress=lambda d, t, s: progress.append((d, t, s)), environment={})
    assert report.ok, report.errors
    assert {t for _d, t, _s in progress} == {140}  # 80 + 60 tokens of budget
    dones = [d for d, _t, _s in progress]
    assert dones == sorted(dones) and dones[-1] == 140
    assert any(0 < d < 80 for d in dones)  # inside the first reply: the bar moved with its tokens
    assert 80 in dones  # the first reply ended after 60 of its 80 tokens: its budget closed


def test_no_interval_below_three_replies_and_same_text_is_explained(fake: ModeAwareFake) -> None:
    """The issue: a CI printed at n=1 and "same text 0/3" unexplained."""
    from beedeck.clicmd.bench import format_table

    fake.spec.tokens = [f"t{i} " for i in range(19)] + ["different"]
    one = dataclasses.replace(SUITE, prompts=SUITE.prompts[:1])
    report = run_bench(None, None, None, one, (Variant(Mode.BASELINE), Variant(Mode.DFLASH)), reps=1, warmup=0, url=fake.base_url,
                       switching="per-request", environment={})
    s = br.summarize(report)
    sp = s.overall[Variant(Mode.DFLASH)].speedup
    assert sp is not None and sp.runs == 1 and not sp.shown
    md = br.to_markdown(report, s)
    assert "| one run: no interval |" in md
    table = format_table(report, s)
    assert "one run: no interval" in table
    assert [row.split()[0] for row in table.splitlines()[2:]] == ["Baseline", "DFlash"]  # the toggle's names
    note = br.same_text_note(report, s)
    assert note.startswith("same text: 0/1 replies word for word the baseline's at temperature 0") and note in md
    hot = dataclasses.replace(one, temperature=0.7)
    report = run_bench(None, None, None, hot, (Variant(Mode.BASELINE), Variant(Mode.DFLASH)), reps=3, warmup=0, url=fake.base_url,
                       switching="per-request", environment={})
    s = br.summarize(report)
    assert s.overall[Variant(Mode.DFLASH)].speedup is not None and s.overall[Variant(Mode.DFLASH)].speedup.runs == 3
    assert "temperature 0.7" in br.same_text_note(report, s) and "is expected" in br.same_text_note(report, s)
    fake.spec.tokens = list(fake.base.tokens)
    report = run_bench(None, None, None, one, (Variant(Mode.BASELINE), Variant(Mode.DFLASH)), reps=1, warmup=0, url=fake.base_url,
                       switching="per-request", environment={})
    assert br.same_text_note(report, br.summarize(report)) == ""  # all the same: nothing to explain
