"""Fuzzing the GGUF reader: seeded mutations of real headers, in a child with a memory cap.

The seeds are the real starter model's header (SmolLM2, 49,152 tokens) and metadata-only files with
the real shapes of Gemma 4, Qwen3.6 and a DFlash draft (tests/fixtures/meta_gguf.py). Each case
rewrites one to four *structural* fields (a string or array length, a value or element type, a tensor
count, dimension or ggml type: found by walking the seed) with an extreme value, flips random bytes or
cuts the file; the file keeps its original (sparse) size, so tensor-size checks still pass and the
reader goes deep. A quarter of the cases *grow* the seed instead, aimed at sums no single limit sees
(issue 34): hundreds to thousands of small arrays, long keys, strings of up to 16 MiB (sparse), token
lists, tensor entries, or a key or tensor name repeated; a grown header past the budget, or with a
repeat, must be refused. ``inspect`` (plus the lazy token readers) must give a result or a GGUFError:
any other exception, a MemoryError under the child's address-space cap, a hang past the child's
timeout, a grown header that is read though it must not be, or a peak above PEAK_MB fails the test.
The cases are fixed by the seed (no clock decides how many run); the child prints its rate and peak
memory, which the test reports.
"""

from __future__ import annotations

import json
import os
import random
import resource
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.fixtures import meta_gguf as mg
from tests.fixtures.hostile_sums import peak_kb

SEED = 20
CASES = int(os.environ.get("BEEDECK_FUZZ_CASES", "800"))  # ~15 s of CPU (a minute on 2 busy cores); more for a longer hunt
CHILD_AS = 2 << 30  # the child's address space: the reader must stay far below it
CHILD_TIMEOUT_S = 300  # a hang guard (the run takes ~20 s), not a speed check
EXTREMES = [0, 1, 7, 0x7F, 0xFF, 0xFFFF, 1 << 31, (1 << 32) - 1, 1 << 32, 1 << 40, 1 << 62, (1 << 63) - 1,
            (1 << 64) - 1]


def structure(data: bytes) -> list[tuple[int, int]]:
    """(offset, width) of every structural field of a GGUF header: counts, lengths, types, dims. An
    independent walker (not the reader under test); token strings past the first few are skipped."""
    return _walk(data)[0]


Span = tuple[int, int]  # [start, end) of one metadata entry or tensor-table entry


def _walk(data: bytes) -> tuple[list[tuple[int, int]], list[Span], list[Span]]:
    """The structural fields, the metadata entries' spans and the tensor entries' spans of a header."""
    out: list[tuple[int, int]] = [(8, 8), (16, 8), (4, 4)]
    kvs: list[Span] = []
    tensors: list[Span] = []
    n_tensors, n_kv = struct.unpack_from("<QQ", data, 8)
    pos = 24
    sizes = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}

    def string(pos: int, mark: bool = True) -> int:
        if mark:
            out.append((pos, 8))
        return pos + 8 + struct.unpack_from("<Q", data, pos)[0]

    for _ in range(n_kv):
        start = pos
        pos = string(pos)
        vt = struct.unpack_from("<I", data, pos)[0]
        out.append((pos, 4))
        pos += 4
        if vt in sizes:
            out.append((pos, sizes[vt]))
            pos += sizes[vt]
        elif vt == 8:
            pos = string(pos)
        else:
            st, n = struct.unpack_from("<IQ", data, pos)
            out += [(pos, 4), (pos + 4, 8)]
            pos += 12
            if st in sizes:
                pos += n * sizes[st]
            else:
                for i in range(n):
                    pos = string(pos, mark=i < 8)
        kvs.append((start, pos))
    for _ in range(n_tensors):
        start = pos
        pos = string(pos)
        n_dims = struct.unpack_from("<I", data, pos)[0]
        out.append((pos, 4))
        out += [(pos + 4 + 8 * d, 8) for d in range(n_dims)]
        pos += 4 + 8 * n_dims
        out += [(pos, 4), (pos + 4, 8)]
        pos += 12
        tensors.append((start, pos))
    return out, kvs, tensors


# --------------------------------------------------------------------------- growth: the sums

PEAK_MB = 400  # the child's peak RSS over every case (it held 71 MB before growth cases were added)
Grown = tuple[list[tuple[int, bytes]], int, str]  # pieces (zeros between), file size, what must refuse it ("")


def _kv(key: bytes, vtype: int, payload: bytes) -> bytes:
    return struct.pack("<Q", len(key)) + key + struct.pack("<I", vtype) + payload


def _grow(rng: random.Random, data: bytes, size: int) -> Grown:
    """The seed with entries added where the reader meets them; ``size`` is the seed file's (sparse) size."""
    _fields, kvs, tensors = _walk(data)
    n_tensors, n_kv = struct.unpack_from("<QQ", data, 8)
    how = rng.choice(["arrays", "arrays", "strings", "strings", "keys", "lists", "tensors", "repeat-key",
                      "repeat-tensor"])
    extra: list[tuple[bytes, int]] = []  # (bytes, zeros after them): metadata entries to add
    table: list[bytes] = []  # tensor entries to add
    must = ""
    if how == "arrays":  # small arrays, each decoded: 32 B of Python per element counted against 1 MiB
        k, each = rng.randint(100, 4000), rng.choice([64, 512, 4096])
        extra = [(_kv(b"g.a%d" % i, 9, struct.pack("<IQ", 0, each)), each) for i in range(k)]
        must = "kept" if k * (each * 32 + 110) > 1 << 20 else ""
    elif how == "strings":  # long string values (skipped past 64 KiB), zeros in a sparse file
        k, each = rng.randint(1, 400), rng.choice([1 << 10, 1 << 17, 1 << 20, 1 << 24])
        extra = [(struct.pack("<Q", 8) + b"g.s%05d" % i + struct.pack("<IQ", 8, each), each) for i in range(k)]
        must = "bytes" if k * each > 64 << 20 else ""
    elif how == "keys":  # long, distinct keys (each within 64 KiB), kept
        k, each = rng.randint(100, 3000), rng.choice([64, 1024, 4096])
        extra = [(_kv(b"g.%05d." % i + b"k" * each, 4, struct.pack("<I", i)), 0) for i in range(k)]
        must = "kept" if k * (each + 108) > 1 << 20 else ""
    elif how == "lists":  # token lists of empty strings (zeros: sparse), walked one by one
        k, count = rng.randint(1, 3), 1 << 21
        extra = [(_kv(b"g.l%d" % i, 9, struct.pack("<IQ", 8, count)), 8 * count) for i in range(k)]
        must = "walked" if k * count > 1 << 22 else ""
    elif how == "tensors":  # tensor entries with names of their own
        k = rng.choice([1000, 20_000, 70_000])
        table = [struct.pack("<Q", 9) + b"g.%07d" % i + struct.pack("<IQIQ", 1, 32, 0, 0) for i in range(k)]
        must = "tensors" if n_tensors + k > 1 << 16 else ""
    elif how == "repeat-key" and kvs:
        a, b = rng.choice(kvs)
        extra, must = [(data[a:b], 0)], "duplicate key"
    elif how == "repeat-tensor" and tensors:
        a, b = rng.choice(tensors)
        table, must = [data[a:b]], "duplicate tensor name"
    head = data[:8] + struct.pack("<QQ", n_tensors + len(table), n_kv + len(extra))
    pieces, pos = [(0, head)], 24
    for chunk, zeros in extra:
        pieces.append((pos, chunk))
        pos += len(chunk) + zeros
    table_at = tensors[-1][1] if tensors else kvs[-1][1] if kvs else 24
    pieces += [(pos, data[24:table_at]), (pos + table_at - 24, b"".join(table) + data[table_at:])]
    grown = pos - 24 + sum(len(t) for t in table)
    return pieces, size + grown + 64, MUST_SAY.get(must, "")


# what the refusal of a grown header says, by the budget it must overrun
MUST_SAY = {"kept": "to keep", "bytes": "goes on past", "walked": "to walk one by one", "tensors": "tensors",
            "duplicate key": "duplicate key", "duplicate tensor name": "duplicate tensor name"}
GROW_SHARE = 0.25  # of the cases


def mutate(rng: random.Random, data: bytes, fields: list[tuple[int, int]]) -> bytes:
    buf = bytearray(data)
    how = rng.random()
    if how < 0.75:
        for _ in range(rng.randint(1, 4)):
            off, width = rng.choice(fields)
            value = rng.choice(EXTREMES) if rng.random() < 0.7 else rng.getrandbits(8 * width)
            if rng.random() < 0.3:  # a small step off the real value: types 0..13, lengths +-1
                value = int.from_bytes(buf[off:off + width], "little") + rng.choice([-2, -1, 1, 2, 3])
            buf[off:off + width] = (value % (1 << (8 * width))).to_bytes(width, "little")
    elif how < 0.9:
        for _ in range(rng.randint(1, 16)):
            buf[rng.randrange(len(buf))] = rng.randrange(256)
    else:
        del buf[rng.randrange(24, len(buf)):]
    return bytes(buf)


def _write(path: Path, pieces: list[tuple[int, bytes]], size: int) -> None:
    with open(path, "wb") as fh:
        for offset, chunk in pieces:
            fh.seek(offset)
            fh.write(chunk)
        fh.truncate(size)


def _child(spec: str) -> None:
    """Run in the capped child: every case through inspect; one JSON line of results at the end."""
    from beedeck.core.models.gguf.reader import GGUFError, inspect, token_texts, tokenizer_digest

    job = json.loads(spec)
    work = Path(job["work"])
    seeds = [(Path(s["header"]).read_bytes(), s["size"]) for s in job["seeds"]]
    fields = [structure(h) for h, _size in seeds]
    rng = random.Random(job["seed"])
    counts = {"result": 0, "GGUFError": 0, "grown": 0}
    start = time.perf_counter()
    worst = 0.0
    for case in range(job["cases"]):
        k = case % len(seeds)
        header, size = seeds[k]
        path = work / f"case-{k}.gguf"
        must = ""
        if rng.random() < GROW_SHARE:
            pieces, grown_size, must = _grow(rng, header, size)
            _write(path, pieces, grown_size)
            counts["grown"] += 1
        else:
            data = mutate(rng, header, fields[k])
            path.write_bytes(data)
            os.truncate(path, max(size, len(data)) if len(data) == len(header) else len(data))
        t0 = time.perf_counter()
        try:
            info = inspect(path)
            token_texts(info)
            tokenizer_digest(info)
            counts["result"] += 1
            if must:
                raise AssertionError(f"a grown header that must be refused ({must!r}) was read")
        except GGUFError as exc:
            counts["GGUFError"] += 1
            if must and must not in str(exc):
                raise AssertionError(f"refused for another reason than {must!r}: {exc}") from None
        except BaseException as exc:  # the finding: anything else
            os.replace(path, work / "finding.gguf")
            print(json.dumps({"case": case, "seed": k, "error": f"{type(exc).__name__}: {exc}"[:500]}))
            return
        worst = max(worst, time.perf_counter() - t0)
    took = time.perf_counter() - start
    # VmHWM, not ru_maxrss: that one keeps the peak of the pytest process this child was forked from
    print(json.dumps({"counts": counts, "seconds": took, "worst_case_s": worst, "peak_rss_mb": peak_kb() / 1024,
                      "cases_per_s": job["cases"] / took}))


def _seed_files(folder: Path, starter: Path) -> list[dict[str, object]]:
    from beedeck.core.models.gguf.reader import read_header

    models = [starter, mg.gemma4_31b(folder / "gemma4.gguf", n_vocab=2000),
              mg.qwen36_27b(folder / "qwen36.gguf", n_vocab=2000),
              mg.dflash_draft(folder / "draft.gguf", "dflash", 5120, [1, 16, 31, 46, 61], 1000)]
    seeds = []
    for i, model in enumerate(models):
        end = read_header(model, tensors=True).data_offset
        with open(model, "rb") as fh:
            header = fh.read(end)
        (folder / f"seed-{i}.bin").write_bytes(header)
        seeds.append({"header": str(folder / f"seed-{i}.bin"), "size": model.stat().st_size})
    return seeds


def _cap() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (CHILD_AS, CHILD_AS))


def test_mutated_real_headers_give_a_result_or_a_gguf_error_within_bounds(
        tmp_path: Path, starter_model_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    job = {"work": str(tmp_path), "seed": SEED, "cases": CASES, "seeds": _seed_files(tmp_path, starter_model_path)}
    code = f"from tests.core.models.gguf.test_fuzz import _child; _child({json.dumps(json.dumps(job))})"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "gui"), str(REPO)])}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=REPO,
                          timeout=CHILD_TIMEOUT_S, preexec_fn=_cap)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert "error" not in result, f"case {result.get('case')} (seed {result.get('seed')}): {result.get('error')}"
    counts = result["counts"]
    assert counts["result"] + counts["GGUFError"] == CASES
    assert counts["GGUFError"] > CASES // 4 and counts["result"] > 0  # the mutations reach both outcomes
    assert counts["grown"] > CASES // 5  # and the growth cases run
    assert result["peak_rss_mb"] < PEAK_MB, f"the reader's child peaked at {result['peak_rss_mb']:.0f} MB"
    with capsys.disabled():
        print(f"\nGGUF fuzz: {CASES} cases, {result['cases_per_s']:.0f}/s, worst case {result['worst_case_s']:.2f} s, "
              f"peak RSS {result['peak_rss_mb']:.0f} MB (cap {CHILD_AS >> 20} MB), {counts}")
