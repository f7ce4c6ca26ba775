"""Faults, round three: GGUF headers that cost by their sum, and files llama.cpp refuses.

Every value of these headers is within its own limit; their sum was not bounded (16,000 small arrays:
half a gigabyte; 300 strings of 16 MiB in a sparse file: 4.8 GB). Each runs ``beedeck inspect`` as a
child under a 3 GB address-space cap and asserts the refusal, its words and the child's own peak memory
(VmHWM at its exit: wait4's figure keeps the peak of the pytest process it was forked from). The pair check streams two token lists of a million tokens within a few MB; a header
read over HTTP fetches no byte past the budget. A key or tensor name twice, a tensor name of 64 bytes and
split sets whose parts disagree are refused by ``inspect`` and before any server starts, quoting the
reason the real llama-server gives for the same file (checked against the starter engine's own log).
"""

from __future__ import annotations

import json
import os
import re
import resource
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from beedeck.core.models.gguf.header import HEADER_BYTES
from beedeck.core.models.hub.sizing import size_repo
from tests.fakes.fake_hub import FakeFile, FakeHub
from tests.fixtures import hostile_gguf as hg
from tests.fixtures import hostile_sums as hs

from .conftest import Beedeck

pytestmark = pytest.mark.engine

CHILD_AS = 3 << 30  # a crafted header that sizes its memory by its sum shows as a MemoryError (or a kill)
PEAK_MB = 150  # what `beedeck inspect` may reach on any of them (Python and BeeDeck alone: ~40 MB)


def _capped() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (CHILD_AS, CHILD_AS))


def inspect_measured(bd: Beedeck, path: Path) -> tuple[subprocess.CompletedProcess[str], float]:
    """``beedeck inspect PATH`` under the cap: how it ended and its own peak RSS in MB (VmHWM at its exit)."""
    peak = bd.workdir / "inspect.peak"
    peak.unlink(missing_ok=True)
    done = subprocess.run([sys.executable, "-c", hs.CLI_WITH_PEAK, "inspect", str(path)],
                          env=bd.env(BEEDECK_PEAK_FILE=str(peak)), capture_output=True, text=True, timeout=300,
                          cwd=bd.workdir, preexec_fn=_capped)
    return done, hs.peak_mb(peak)


def refused(done: subprocess.CompletedProcess[str], *says: str) -> None:
    assert "Traceback" not in done.stderr and "MemoryError" not in done.stderr, done.stderr[-3000:]
    assert done.returncode == 1, (done.returncode, done.stdout[-500:], done.stderr[-3000:])
    for words in says:
        assert words in done.stderr, done.stderr[-3000:]
    assert "download" in done.stderr.lower()  # the remedy


# ---------------------------------------------------------------------------- sums

@pytest.mark.parametrize("name", list(hs.SUMS))
def test_a_header_whose_values_fit_their_limits_but_not_their_sum_is_refused_cheaply(beedeck: Beedeck,
                                                                                   name: str) -> None:
    path = hs.write_sum(beedeck.workdir / f"{name}.gguf", name)
    done, peak_mb = inspect_measured(beedeck, path)
    refused(done, hs.SUMS[name][1], "more than any real model's header needs")
    assert peak_mb < PEAK_MB, f"{name}: peak RSS {peak_mb:.0f} MB"


PAIR_CHILD = """
import json, sys
from beedeck.core.models.gguf.reader import inspect
from beedeck.core.models.paircheck import check_pair
from tests.fixtures.hostile_sums import peak_kb, reset_peak
target, draft = inspect(sys.argv[1]), inspect(sys.argv[2])
before = reset_peak()
verdict = check_pair(target, draft)
print(json.dumps({"reasons": verdict.reasons, "grew_mb": (peak_kb() - before) / 1024}))
"""


def test_the_pair_check_streams_two_token_lists_of_a_million_tokens(beedeck: Beedeck) -> None:
    target = hs.token_model(beedeck.workdir / "target.gguf", 1_000_000)
    draft = hs.token_model(beedeck.workdir / "draft.gguf", 1_000_000, last="other")
    done = subprocess.run([sys.executable, "-c", PAIR_CHILD, str(target), str(draft)], env=beedeck.env(),
                          capture_output=True, text=True, timeout=300, preexec_fn=_capped, cwd=beedeck.workdir)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    assert result["reasons"] == ["draft.gguf's token 999999 is 'other' but target.gguf's is 'tok999999': the "
                                 "vocabularies differ, so llama.cpp refuses the pair."]
    # Two 1 MiB chunks and the tokens in flight: 3 MB; before, both lists whole: 150 MB.
    assert result["grew_mb"] < 16, f"the pair check took {result['grew_mb']:.0f} MB more"


class _LongArrayFile(FakeFile):
    """A GGUF served by the fake Hub whose one string array holds ``n`` strings of ``each`` zero bytes (generated
    on request, nothing held): each string is read through the window, so its header is all bytes to fetch."""

    def __init__(self, n: int, each: int) -> None:
        self.n, self.each = n, each
        head = hs.preamble(2) + hg.kv_str("general.architecture", "llama")
        self.prefix = head + hg.kv("x.strings", hg.ARRAY, hg.array_head(hg.STRING, n))
        super().__init__(self.prefix, sparse_size=len(self.prefix) + n * (8 + each) + 32)

    def read(self, start: int, end: int) -> bytes:
        end = min(end, self.size)
        out = bytearray(self.prefix[start:end].ljust(max(0, end - start), b"\0"))
        step, first = 8 + self.each, len(self.prefix)
        for k in range(max(0, (start - first) // step), min(self.n, (end - first) // step + 1)):
            at = first + k * step
            field = struct.pack("<Q", self.each)
            lo, hi = max(at, start), min(at + 8, end)
            if lo < hi:
                out[lo - start:hi - start] = field[lo - at:hi - at]
        return bytes(out)


def test_a_header_read_over_http_fetches_nothing_past_the_budget(tmp_path: Path) -> None:
    big = _LongArrayFile(n=1100, each=64 * 1024)  # 72 MB of header, every string within its limits
    with FakeHub() as hub:
        hub.add_repo("org/m-GGUF", {"m-Q4_0.gguf": big})
        sizing = size_repo("org/m-GGUF", endpoint=hub.endpoint, cache_dir=tmp_path / "cache")
        sent = hub.bytes_sent
    assert sizing.models == [] and len(sizing.skipped) == 1, sizing.skipped
    assert "its header goes on past 67,108,864 bytes" in sizing.skipped[0]
    assert sent <= HEADER_BYTES, f"fetched {sent:,} bytes"  # before: all 72 MB, and the model sized


# ---------------------------------------------------------------------------- what llama.cpp refuses

REFUSED = {**{n: "crafted" for n in ("duplicate-key", "tensor-name-64-bytes", "duplicate-tensor-name")},
           **{n: "split" for n in ("index-count-architecture-tensor", "index", "tensor-name", "no-split-key",
                                   "a-part-that-is-another", "tensor-count", "part-1-name")}}


def _make(name: str, folder: Path) -> Path:
    if REFUSED.get(name) == "crafted":
        return hg.write(folder / f"{name}.gguf", name)
    return hs.SPLITS[name][0](folder / name)


@pytest.mark.parametrize("name", list(hs.SPLITS))
def test_a_split_set_whose_parts_disagree_is_refused_with_the_reason(beedeck: Beedeck, name: str) -> None:
    first = hs.SPLITS[name][0](beedeck.workdir / name)
    done, _peak = inspect_measured(beedeck, first)
    refused(done, *hs.SPLITS[name][1])


@pytest.mark.parametrize("name", ["index-count-architecture-tensor", "duplicate-key"])
def test_a_file_llama_cpp_refuses_is_refused_before_a_server_starts(beedeck: Beedeck, name: str) -> None:
    model = _make(name, beedeck.workdir)
    done = beedeck.run("serve", "--engine", str(beedeck.engine), "--model", str(model), "--exit-when-ready")
    assert done.returncode == 1, done.stderr[-3000:]
    assert "llama.cpp" in done.stderr and "what to do:" in done.stderr, done.stderr[-3000:]
    assert "running:" not in done.stdout  # refused before any llama-server started


@pytest.mark.parametrize("name", list(REFUSED))
def test_beedeck_quotes_the_reason_the_real_llama_server_gives(beedeck: Beedeck, name: str) -> None:
    model = _make(name, beedeck.workdir)
    done, _peak = inspect_measured(beedeck, model)
    quoted = re.findall(r'llama\.cpp(?: refuses \(|: )"([^"]+)"', done.stderr)
    assert done.returncode == 1 and quoted, done.stderr[-3000:]
    server = subprocess.run([str(beedeck.engine), "-m", str(model), "--port", "0", "--threads", "1"],
                            capture_output=True, timeout=120, cwd=beedeck.workdir)
    log = (server.stdout + server.stderr).decode("utf-8", "replace").replace(f"{model.parent}{os.sep}", "")
    assert server.returncode != 0 and "failed to load model" in log, log[-3000:]
    assert quoted[0] in log, (quoted[0], log[-3000:])  # llama.cpp stops at its first reason, BeeDeck says all
