"""Live sizing of Hub repos from range-read GGUF headers, against the protocol-level fake Hub.

The models are metadata-only GGUFs with real tensor layouts (tests/fixtures/hub_models.py: Qwen3.8 27B
with its MTP head, a 3-part split quant, DFlash2 and DSpark drafts); the fake Hub serves their header
bytes and zeros behind them up to their full size, so a 17 GB file costs a few MB here.
"""

from __future__ import annotations

import re
import socket
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import httpx2
import pytest

from beedeck.core.engine.caps import Generation
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.mode import Mode
from beedeck.core.models.gguf.reader import inspect, read_header
from beedeck.core.models.hub import client as hubmod
from beedeck.core.models.hub.range_reader import RangeReader, RangeReadError
from beedeck.core.models.hub.sizing import (
    OfflineError,
    SizingError,
    load_cached,
    quant_of,
    size_repo,
    summary,
)
from beedeck.core.models.planner import GiB, plan
from beedeck.core.models.recommend.live_plan import plan_live
from tests.conftest import PERSISTENT
from tests.fakes.fake_hub import FakeFile, FakeHub
from tests.fixtures import hub_models
from tests.fixtures.meta_gguf import tiny_model

TARGET_REPO, DFLASH2_REPO, DSPARK_REPO = "unsloth/Qwen3.8-27B-GGUF", "incoai/Qwen3.8-27B-DFlash2-GGUF", \
    "Anbeeld/Qwen3.8-27B-DSpark-GGUF"
EAGLE3_REPO = "someone/Qwen3.8-27B-EAGLE3-GGUF"


@pytest.fixture(scope="module")
def files() -> dict[str, Path]:
    return hub_models.build_all(PERSISTENT / "hub-models")


@pytest.fixture
def hub(files: dict[str, Path]) -> Iterator[FakeHub]:
    with FakeHub() as h:
        target = {n: FakeFile.sparse_gguf(p) for n, p in files.items() if n.endswith(".gguf")}  # drafts: no suffix
        target["README.md"] = FakeFile(b"# Qwen3.8", lfs=False)
        h.add_repo(TARGET_REPO, target)
        h.add_repo(DFLASH2_REPO, {files["dflash2"].name: FakeFile.sparse_gguf(files["dflash2"]),
                                  files["dflash2-q8"].name: FakeFile.sparse_gguf(files["dflash2-q8"])})
        h.add_repo(DSPARK_REPO, {files["dspark"].name: FakeFile.sparse_gguf(files["dspark"])})
        h.add_repo(EAGLE3_REPO, {files["eagle3"].name: FakeFile.sparse_gguf(files["eagle3"])})
        yield h


def _cache(tmp_path: Path) -> Path:
    return tmp_path / "sizing-cache"


def _settings(mode: Mode, draft: str | None = None, **kw: object) -> LaunchSettings:
    base = LaunchSettings(target="t.gguf", draft=draft, spec_mode=mode, ctx_size=65536, cache_type_k="q8_0",
                          cache_type_v="q8_0", flash_attn="on", parallel=1, kv_unified=True, batch_size=1024,
                          ubatch_size=512)
    return replace(base, **kw)  # type: ignore[arg-type]


def test_a_repo_is_sized_from_range_reads_and_plans_exactly_as_the_files(hub: FakeHub, files: dict[str, Path],
                                                                          tmp_path: Path) -> None:
    s = size_repo(TARGET_REPO, endpoint=hub.endpoint, cache_dir=_cache(tmp_path))
    by_name = {m.filename: m for m in s.models}
    assert set(by_name) == {"Qwen3.8-27B-Q4_K_M.gguf", "Q8_0/Qwen3.8-27B-Q8_0-00001-of-00003.gguf"}
    assert s.skipped == ["mmproj-F16.gguf: a vision projector (mmproj), not a model to plan"]
    q4, q8 = by_name["Qwen3.8-27B-Q4_K_M.gguf"], by_name["Q8_0/Qwen3.8-27B-Q8_0-00001-of-00003.gguf"]
    assert (q4.quant, q8.quant, q4.kind, q4.mtp_heads) == ("Q4_K_M", "Q8_0", "target", 1)
    local_q4 = inspect(files["Qwen3.8-27B-Q4_K_M.gguf"])
    local_q8 = inspect(files["Q8_0/Qwen3.8-27B-Q8_0-00001-of-00003.gguf"])
    # the split: sizes from all parts, every part's tensors
    assert q8.size == sum(p.stat().st_size for n, p in files.items() if n.startswith("Q8_0/")) == local_q8.file_size
    assert [t.name for t in q8.info.tensors] == [t.name for t in local_q8.tensors]
    assert len(q8.parts) == 3
    drafts = size_repo(DFLASH2_REPO, endpoint=hub.endpoint, cache_dir=_cache(tmp_path))
    d2 = next(m for m in drafts.models if m.quant == "Q4_K_M")
    assert d2.kind == "dflash2" and q4.tokenizer_sha256 == d2.tokenizer_sha256 != ""
    local_d2 = inspect(files["dflash2"])
    e3 = size_repo(EAGLE3_REPO, endpoint=hub.endpoint, cache_dir=_cache(tmp_path)).models[0]
    assert e3.kind == "eagle3"
    # planner figures from live headers == the same files' plan from disk, item by item
    for live, local in ((q4, local_q4), (q8, local_q8)):
        for mode, draft, local_draft, gen in ((Mode.BASELINE, None, None, Generation.MAINLINE),
                                              (Mode.MTP, None, None, Generation.MAINLINE),
                                              (Mode.DFLASH, d2.info, local_d2, Generation.BEE_B),
                                              (Mode.DFLASH, d2.info, local_d2, Generation.MAINLINE),
                                              (Mode.EAGLE3, e3.info, inspect(files["eagle3"]), Generation.MAINLINE)):
            st = _settings(mode, "d.gguf" if draft else None, draft_n_max=7 if draft else None)
            a = plan(live.info, draft, st, gen, [24 * GiB])
            b = plan(local, local_draft, st, gen, [24 * GiB])
            assert [(d.name, d.items) for d in a.devices] == [(d.name, d.items) for d in b.devices], (live.quant, mode)
            assert a.fits == b.fits and a.n_ctx == b.n_ctx
    mtp = plan(q4.info, None, _settings(Mode.MTP), Generation.MAINLINE, [24 * GiB])
    assert mtp.component("mtp_weights") > 0 and mtp.component("mtp_kv") > 0  # the head is counted under MTP
    assert plan(q4.info, None, _settings(Mode.BASELINE), Generation.MAINLINE, [24 * GiB]).component("mtp_weights") == 0


def test_only_header_bytes_are_read_growing_past_the_first_range(hub: FakeHub, files: dict[str, Path],
                                                                 tmp_path: Path) -> None:
    s = size_repo(TARGET_REPO, endpoint=hub.endpoint, cache_dir=_cache(tmp_path))
    q4 = next(m for m in s.models if m.quant == "Q4_K_M")
    q8 = next(m for m in s.models if m.quant == "Q8_0")  # read first (Q8_0/... sorts first), in full
    header = read_header(files["Q8_0/Qwen3.8-27B-Q8_0-00001-of-00003.gguf"], tensors=True).data_offset
    later = [read_header(files[f"Q8_0/Qwen3.8-27B-Q8_0-0000{k}-of-00003.gguf"], tensors=True).data_offset
             for k in (2, 3)]
    assert header > 1 << 20  # the token list makes the header larger than the first 1 MiB range
    assert header + sum(later) <= q8.bytes_read < 2 * header + 2 * 64 * 1024
    # the next quant has the same token list (count and bytes): jumped over, only the rest of its header read
    q4_header = read_header(files["Qwen3.8-27B-Q4_K_M.gguf"], tensors=True).data_offset
    assert q4.bytes_read < q4_header / 3 and q4.tokenizer_sha256 == q8.tokenizer_sha256
    assert q4.bytes_read < q4.size / 10_000
    ranges = [r.headers.get("range", "") for r in hub.cdn_gets()]
    assert ranges and all(re.fullmatch(r"bytes=\d+-\d+", x) for x in ranges)
    assert ranges[0] == "bytes=0-1048575"
    assert hub.bytes_sent == s.bytes_read  # nothing beyond what the reader kept crossed the wire
    d = summary(s)
    assert d["bytes_read"] == s.bytes_read and d["requests"] == s.requests >= 3 and 0 < d["fraction_read"] < 1e-3


def test_a_tiny_model_sized_live_equals_its_real_download(tmp_path: Path) -> None:
    path = tiny_model(tmp_path / "src" / "tiny-Q8_0.gguf", n_layer=3)
    with FakeHub() as h:
        h.add_repo("org/tiny-GGUF", {"tiny-Q8_0.gguf": path.read_bytes()})
        live = size_repo("org/tiny-GGUF", endpoint=h.endpoint, cache_dir=_cache(tmp_path), first_range=512)
        got = hubmod.download_model("org/tiny-GGUF", "tiny-Q8_0.gguf", endpoint=h.endpoint,
                                    dest_dir=tmp_path / "dl")
    local = inspect(got[0])
    m = live.models[0]
    assert m.size == local.file_size and m.info.tensors == local.tensors and m.info.n_layer == local.n_layer
    st = _settings(Mode.BASELINE, ctx_size=2048, cache_type_k="f16", cache_type_v="f16")
    a, b = plan(m.info, None, st, Generation.MAINLINE, [GiB]), plan(local, None, st, Generation.MAINLINE, [GiB])
    assert [d.items for d in a.devices] == [d.items for d in b.devices]
    assert live.requests >= 2  # 512 bytes could not hold this header


def test_the_cache_serves_the_same_revision_and_works_offline(hub: FakeHub, tmp_path: Path) -> None:
    first = size_repo(DSPARK_REPO, endpoint=hub.endpoint, cache_dir=_cache(tmp_path))
    sent = hub.bytes_sent
    again = size_repo(DSPARK_REPO, endpoint=hub.endpoint, cache_dir=_cache(tmp_path))
    assert again.source == "cache" and hub.bytes_sent == sent and again.bytes_read == 0
    assert again.models[0].info.tensors == first.models[0].info.tensors and again.models[0].kind == "dspark"
    offline = size_repo(DSPARK_REPO, offline=True, cache_dir=_cache(tmp_path))
    assert offline.revision == first.revision == hub.repos[DSPARK_REPO].commit
    # the Hub cannot be reached (nothing listens on that port): the cached headers answer, with a note
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{sock.getsockname()[1]}"
    gone = size_repo(DSPARK_REPO, endpoint=dead, cache_dir=_cache(tmp_path))
    assert gone.source == "cache" and "cannot be reached" in gone.notes[0]
    with pytest.raises(OfflineError, match="has not been sized on this machine yet"):
        size_repo("someone/never-seen-GGUF", offline=True, cache_dir=_cache(tmp_path))
    assert load_cached(DSPARK_REPO, cache_dir=_cache(tmp_path)) is not None


def test_a_new_revision_is_read_again(hub: FakeHub, files: dict[str, Path], tmp_path: Path) -> None:
    a = size_repo(DSPARK_REPO, endpoint=hub.endpoint, cache_dir=_cache(tmp_path))
    hub.replace_file(DSPARK_REPO, "README.md", b"new card")
    b = size_repo(DSPARK_REPO, endpoint=hub.endpoint, cache_dir=_cache(tmp_path))
    assert b.revision != a.revision and b.source == "hub" and b.bytes_read > 0


def test_gated_missing_and_non_gguf_repos_get_their_own_message(hub: FakeHub, files: dict[str, Path],
                                                                tmp_path: Path) -> None:
    hub.add_repo("google/gated-GGUF", {"m-Q4_0.gguf": FakeFile.sparse_gguf(files["dspark"])}, gated="manual",
                 accepted_tokens={"hf_ok"})
    hub.add_repo("org/safetensors-only", {"model.safetensors": b"x" * 100})
    with pytest.raises(hubmod.TokenRequiredError, match="gated.*Sizing reads only the GGUF headers"):
        size_repo("google/gated-GGUF", endpoint=hub.endpoint, cache_dir=_cache(tmp_path))
    with pytest.raises(hubmod.GatedRepoError, match="accept the licence"):
        size_repo("google/gated-GGUF", endpoint=hub.endpoint, cache_dir=_cache(tmp_path), token="hf_nope")
    assert size_repo("google/gated-GGUF", endpoint=hub.endpoint, cache_dir=_cache(tmp_path), token="hf_ok").models
    with pytest.raises(hubmod.RepoMissingError, match="was not found on the Hub"):
        size_repo("nobody/nothing-GGUF", endpoint=hub.endpoint, cache_dir=_cache(tmp_path))
    with pytest.raises(SizingError, match="holds no GGUF model files"):
        size_repo("org/safetensors-only", endpoint=hub.endpoint, cache_dir=_cache(tmp_path))
    with pytest.raises(SizingError, match="OWNER/NAME"):
        size_repo("../etc/passwd", endpoint=hub.endpoint, cache_dir=_cache(tmp_path))


def test_a_cut_connection_resumes_and_a_dead_one_says_what_to_do(hub: FakeHub, tmp_path: Path) -> None:
    hub.cdn.cut_after, hub.cdn.cut_times = 300_000, 2  # two answers cut mid-body, then the rest
    s = size_repo(DFLASH2_REPO, endpoint=hub.endpoint, cache_dir=_cache(tmp_path))
    assert all(m.kind == "dflash2" for m in s.models) and len(s.models) == 2
    starts = [int(r.headers["range"].split("=")[1].split("-")[0]) for r in hub.cdn_gets()]
    assert 300_000 in starts  # the resume asked from the first byte not received
    hub.cdn.cut_after, hub.cdn.cut_times = 10_000, 99
    with pytest.raises(RangeReadError, match=r"failed 4 times \(.*\): check the network and retry; nothing was downloaded"):
        size_repo(DSPARK_REPO, endpoint=hub.endpoint, cache_dir=_cache(tmp_path))


def test_a_stalled_or_slow_connection(hub: FakeHub, tmp_path: Path) -> None:
    hub.cdn.stall_after = 5_000  # one answer stops sending: the read timeout ends it, the retry completes
    with httpx2.Client(follow_redirects=True, timeout=httpx2.Timeout(5.0, read=0.5)) as client:
        s = size_repo(DSPARK_REPO, endpoint=hub.endpoint, cache_dir=_cache(tmp_path), client=client)
    assert s.models[0].kind == "dspark"
    hub.cdn.throttle_bps = 4_000_000  # slow but steady: the answer is the same
    slow = size_repo(DFLASH2_REPO, endpoint=hub.endpoint, cache_dir=_cache(tmp_path) / "other")
    assert {m.quant for m in slow.models} == {"Q4_K_M", "Q8_0"}


def test_a_server_that_ignores_range_is_read_only_as_far_as_needed(hub: FakeHub, files: dict[str, Path],
                                                                   tmp_path: Path) -> None:
    hub.cdn.ignore_range = True
    s = size_repo(DSPARK_REPO, endpoint=hub.endpoint, cache_dir=_cache(tmp_path))
    assert s.models[0].info.tensors == inspect(files["dspark"]).tensors
    assert s.bytes_read < 8 << 20


def test_every_quant_with_every_draft_kind_for_a_24_gb_card(hub: FakeHub, tmp_path: Path) -> None:
    c = _cache(tmp_path)
    target = size_repo(TARGET_REPO, endpoint=hub.endpoint, cache_dir=c)
    drafts = [size_repo(r, endpoint=hub.endpoint, cache_dir=c) for r in (DFLASH2_REPO, DSPARK_REPO, EAGLE3_REPO)]
    rows, notes = plan_live(target, drafts, [int(23.5 * GiB)], Generation.MAINLINE, ubd=64)
    q4 = {r.kind: r for r in rows if r.target.quant == "Q4_K_M"}
    assert set(q4) == {"none", "mtp", "dflash2", "dspark", "eagle3"} and not notes
    assert q4["eagle3"].fits and q4["eagle3"].plan is not None and q4["eagle3"].plan.component("draft_kv") > 0
    assert q4["dflash2"].draft is not None and q4["dflash2"].draft.quant == "Q4_K_M"  # the preferred draft quant
    assert q4["none"].fits and q4["none"].ctx > q4["mtp"].ctx > 0 and q4["none"].ctx > q4["dflash2"].ctx > 0
    assert q4["dflash2"].cost_tokens == q4["none"].ctx - q4["dflash2"].ctx > 0
    assert q4["dflash2"].settings.draft_n_max == 7 and q4["dflash2"].settings.draft_ubatch_size == 64
    assert "DFlash2 costs about" in q4["dflash2"].line() and "tokens of context here" in q4["dflash2"].line()
    q8 = [r for r in rows if r.target.quant == "Q8_0"]
    assert q8 and all(not r.fits for r in q8)  # 28 GB of weights: no context fits a 24 GB card
    bee = {r.kind: r for r in plan_live(target, drafts, [int(23.5 * GiB)], Generation.BEE_B)[0]
           if r.target.quant == "Q4_K_M"}
    # BeeLlama >= 0.4 runs DSpark and EAGLE-3 too: its own --help lists draft-eagle3, draft-mtp, draft-dspark
    assert not bee["dspark"].problem and not bee["eagle3"].problem and bee["dflash2"].fits and bee["dspark"].fits
    gen_a = {r.kind: r for r in plan_live(target, drafts, [int(23.5 * GiB)], Generation.BEE_A)[0]
             if r.target.quant == "Q4_K_M"}
    assert gen_a["dspark"].problem == "DSpark does not run on bee-a engines" and gen_a["mtp"].problem
    # BeeLlama >= 0.4.7 offering -ubd and KVarN draft caches: the drafters get kvarn5 caches and -ubd 64,
    # which buys context back
    from beedeck.core.engine.caps import EngineCaps
    caps = EngineCaps(path="/e", generation=Generation.BEE_B, version="0.4.7", spec_types=("draft-dflash", "draft-mtp"),
                      cache_types=("f16", "q8_0", "q5_0", "q4_1", "kvarn4", "kvarn5"),
                      draft_cache_types=("f16", "q8_0", "kvarn4", "kvarn5"),
                      flags=frozenset({"--spec-type", "--spec-draft-type-k", "--spec-draft-type-v", "-ubd"}))
    tuned = {r.kind: r for r in plan_live(target, drafts, [int(23.5 * GiB)], Generation.BEE_B, caps, ubd=64)[0]
             if r.target.quant == "Q4_K_M"}
    assert tuned["dflash2"].settings.draft_cache_type == tuned["mtp"].settings.draft_cache_type == "kvarn5"
    assert tuned["dflash2"].ctx > bee["dflash2"].ctx and tuned["mtp"].ctx > q4["mtp"].ctx
    assert tuned["none"].settings.draft_cache_type is None
    # each row's settings plan to the row's own figures
    r = q4["dflash2"]
    assert r.plan is not None and r.draft is not None
    again = plan(r.target.info, r.draft.info, r.settings, Generation.MAINLINE, [int(23.5 * GiB)])
    assert again.gpu_total == r.plan.gpu_total and again.fits


def test_a_draft_for_another_model_is_left_out_with_the_reason(hub: FakeHub, files: dict[str, Path],
                                                               tmp_path: Path) -> None:
    other = hub_models.qwen38_draft(tmp_path / "other-DFlash-Q4_K_M.gguf", "dflash2", n_vocab=151_936)
    hub.add_repo("someone/Other-DFlash2-GGUF", {other.name: FakeFile.sparse_gguf(other)})
    c = _cache(tmp_path)
    target = size_repo(TARGET_REPO, endpoint=hub.endpoint, cache_dir=c)
    drafts = [size_repo("someone/Other-DFlash2-GGUF", endpoint=hub.endpoint, cache_dir=c)]
    rows, notes = plan_live(target, drafts, [int(23.5 * GiB)], Generation.MAINLINE)
    assert {r.kind for r in rows} == {"none", "mtp"}
    assert notes and "other-DFlash-Q4_K_M.gguf left out" in notes[0] and "another model" in notes[0]


@pytest.mark.parametrize(("name", "quant"), [
    ("Qwen3.8-27B-UD-Q4_K_XL.gguf", "UD-Q4_K_XL"), ("Q8_0/Qwen3.8-27B-Q8_0-00001-of-00003.gguf", "Q8_0"),
    ("gemma-4-31B-it-IQ4_XS.gguf", "IQ4_XS"), ("model-BF16.gguf", "BF16"), ("x.gguf", "?")])
def test_quant_names_come_from_the_file_name(name: str, quant: str) -> None:
    assert quant_of(name) == quant


def test_the_catalog_recommender_sizes_qwen38_from_headers_read_earlier(hub: FakeHub) -> None:
    from beedeck.core.models import catalog
    from beedeck.core.models.recommend.from_catalog import recommend

    cat = catalog.load()
    only = replace(cat, pairs=tuple(p for p in cat.pairs if p.id == "qwen3.8-27b"))
    before = recommend([int(23.5 * GiB)], "quality", Generation.BEE_B, cat=only, local=[])
    assert before.primary.pair_id == "starter"  # the catalog holds no sizes for it
    size_repo(TARGET_REPO, endpoint=hub.endpoint)  # into this machine's cache, as the search box or the CLI does
    size_repo(DFLASH2_REPO, endpoint=hub.endpoint)
    r = recommend([int(23.5 * GiB)], "quality", Generation.BEE_B, cat=only, local=[])
    c = r.primary
    assert (c.pair_id, c.target_file, c.draft_repo) == ("qwen3.8-27b", "Qwen3.8-27B-Q4_K_M.gguf", DFLASH2_REPO)
    assert c.draft_file == "Qwen3.8-27B-DFlash2-Q4_K_M.gguf" and c.sized_from.startswith("headers @ ")
    assert c.settings.draft_n_max == 7  # DFlash2's fixed block of 8, as the live plan sets it
    assert c.download_bytes == next(m.size for m in size_repo(TARGET_REPO, endpoint=hub.endpoint).models
                                    if m.quant == "Q4_K_M") + next(m.size for m in size_repo(
                                        DFLASH2_REPO, endpoint=hub.endpoint).models if m.quant == "Q4_K_M")
    assert r.plan is not None and r.plan.fits and c.settings.ctx_size >= 32768
    assert any("Sized from the GGUF headers" in x for x in r.reasons)
    assert not any("were estimated" in x for x in r.reasons)


def test_a_quant_whose_token_list_differs_is_read_in_full_not_jumped(tmp_path: Path) -> None:
    # Same token count, different bytes: the jump over the sibling's token list lands wrong, the header
    # read with it does not account for the file, and the header is read again in full.
    a = tiny_model(tmp_path / "src" / "m-Q4_0.gguf", n_vocab=3000)
    b = tiny_model(tmp_path / "src" / "m-Q8_0.gguf", n_vocab=3000, salt="longer")
    with FakeHub() as h:
        h.add_repo("org/m-GGUF", {a.name: a.read_bytes(), b.name: b.read_bytes()})
        s = size_repo("org/m-GGUF", endpoint=h.endpoint, cache_dir=_cache(tmp_path), first_range=4096)
    by = {m.quant: m for m in s.models}
    assert by["Q4_0"].info.tensors == inspect(a).tensors and by["Q8_0"].info.tensors == inspect(b).tensors
    assert by["Q4_0"].tokenizer_sha256 != by["Q8_0"].tokenizer_sha256 != ""


def test_a_broken_file_is_skipped_with_its_reason_and_the_rest_is_sized(tmp_path: Path) -> None:
    good = tiny_model(tmp_path / "src" / "m-Q8_0.gguf")
    with FakeHub() as h:
        h.add_repo("org/m-GGUF", {"m-Q8_0.gguf": good.read_bytes(), "broken-Q4_0.gguf": b"PK\x03\x04 a zip" * 10})
        s = size_repo("org/m-GGUF", endpoint=h.endpoint, cache_dir=_cache(tmp_path))
    assert [m.filename for m in s.models] == ["m-Q8_0.gguf"]
    assert len(s.skipped) == 1 and s.skipped[0].startswith("broken-Q4_0.gguf: ") and "not a GGUF model" in s.skipped[0]


def test_a_range_reader_fetches_nothing_past_its_limit() -> None:
    # The GGUF header budget (64 MiB by default) bounds what a header read over HTTP may fetch and hold.
    asked: list[tuple[int, int]] = []

    def fetch(start: int, end: int) -> bytes:
        asked.append((start, end))
        return bytes(end - start)

    r = RangeReader(fetch, size=1 << 30, first=1 << 20, limit=4 << 20)
    got = 0
    while chunk := r.read(1 << 20):
        got += len(chunk)
    r.seek(8 << 20)
    assert r.read(100) == b""  # past the limit: nothing, and nothing fetched
    assert got == 4 << 20 and max(end for _start, end in asked) == 4 << 20 and r.bytes_read == 4 << 20
