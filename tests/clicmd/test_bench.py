"""`beedeck bench` against a running server (the protocol-level fake): the report is written and the
terminal says why the speed advice does not learn from a server BeeDeck did not start."""

from __future__ import annotations

from pathlib import Path

import pytest

from beedeck.cli import main
from beedeck.core import paths
from tests.fakes.sse_server import FakeLlamaServer, SSEScript


def test_a_url_bench_reports_and_says_the_advice_cannot_learn(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with FakeLlamaServer(SSEScript(tokens=[f"w{i} " for i in range(6)])) as srv:
        rc = main(["bench", "--url", srv.base_url, "--reps", "1", "--warmup", "0", "--max-tokens", "6",
                   "--no-charts", "--out", str(tmp_path / "out")])
    out = capsys.readouterr().out
    assert rc == 0 and (tmp_path / "out" / "report.md").is_file()
    assert "the speed advice learns only from benchmarks BeeDeck starts" in out
    assert not (paths.data_dir() / "advice.json").exists() and "learnt" not in out
