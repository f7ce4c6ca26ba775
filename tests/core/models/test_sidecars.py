"""Sidecar drafts: real GGUFs (tests/fixtures/synth_gguf.py, synth_mtp.py, and variants of them) next
to their target are found by the library scan and the recommender, the right quant is offered, and
each file that cannot serve says why and what to do."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from beedeck.core import paths
from beedeck.core.engine.caps import EngineCaps, Generation
from beedeck.core.engine.help_text import caps_from_texts
from beedeck.core.models import library, sidecars
from beedeck.core.models.recommend.from_catalog import recommend
from beedeck.core.models.sidecars import Sidecar
from tests.core.models import sidecar_files as sf
from tests.fixtures.engines import BEE_A, BEE_B, MAINLINE, help_stdout

GiB = 1 << 30
ML_VERSION = "version: 0.6.0-dev (build 11434, commit 515e85511)\nbuilt with GNU 12.2.0 for Linux x86_64"


def caps(name: str) -> EngineCaps:
    """Engine capabilities parsed from the real ``--help`` texts in tests/fixtures/engines."""
    version = {BEE_A: "version: 1 (ba1fdce)\nbuilt with cc for x86_64", MAINLINE: ML_VERSION,
               BEE_B: "version: 0 (unknown)\nbuilt with GNU 12.2.0 for Linux x86_64"}[name]
    return caps_from_texts(name, version, help_stdout(name), "Available devices:\n  (none)\n")


@pytest.fixture(scope="module")
def shelf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two model folders: a llama target with every kind of draft beside it, and a qwen35 target with
    its MTP head as an ``mtp-`` sidecar. Written once for the module (real GGUFs, ~2 MB each)."""
    root = tmp_path_factory.mktemp("shelf")
    a = root / "Synth-GGUF"
    a.mkdir()
    t = sf.target(a, "Synth-Q5_K_M.gguf", file_type=sf.Q5_K_M)
    sf.dflash(a, "dflash-Synth-Q4_K_M.gguf", t, file_type=sf.Q4_K_M)
    sf.dflash(a, "dflash-Synth-Q8_0.gguf", t, file_type=sf.Q8_0)
    sf.dflash(a, "dflash-Synth-legacy-Q5_K_M.gguf", t, file_type=sf.Q5_K_M, fmt="bee")
    sf.dspark(a, "dspark-Synth.gguf", t)
    sf.lucebox(a, "dflash-gemma-lucebox.gguf", t)
    other = root / "other"
    other.mkdir()
    sf.dflash(a, "dflash-Wide-Q4_K_M.gguf", sf.target(other, "wide.gguf", n_embd=256))
    sf.dflash(a, "dflash-Bigvocab-Q4_K_M.gguf", sf.target(other, "bigvocab.gguf", n_vocab=400))
    shutil.rmtree(other)
    m = root / "Qwen-MTP-GGUF"
    m.mkdir()
    sf.mtp_target(m, "Qwen-Q4_K_M.gguf")
    sf.mtp_head(m, "mtp-Qwen-Q4_K_M.gguf")
    sf.mtp_head(m, "mtp-Wider-Q4_K_M.gguf", n_embd=256)
    return root


def _target(models: list[library.LocalModel], name: str) -> library.LocalModel:
    return next(m for m in models if m.path.name == name)


def _side(t: library.LocalModel, name: str) -> Sidecar:
    return next(s for s in t.sidecars if s.path.name == name)


def test_scan_finds_the_drafts_next_to_each_target_and_offers_one(shelf: Path) -> None:
    models = library.scan([shelf])
    t = _target(models, "Synth-Q5_K_M.gguf")
    assert not t.is_draft and t.file_type_name == "Q5_K_M"
    names = [s.path.name for s in t.sidecars]
    assert set(names) == {"dflash-Synth-Q4_K_M.gguf", "dflash-Synth-Q8_0.gguf", "dflash-Synth-legacy-Q5_K_M.gguf",
                          "dspark-Synth.gguf", "dflash-gemma-lucebox.gguf", "dflash-Wide-Q4_K_M.gguf",
                          "dflash-Bigvocab-Q4_K_M.gguf"}
    # usable ones first, the offered one at the top; the drafts themselves are not targets
    assert names[0] == "dflash-Synth-Q4_K_M.gguf" and t.best_sidecar() is t.sidecars[0]
    assert [s.usable for s in t.sidecars] == sorted((s.usable for s in t.sidecars), reverse=True)
    kinds = {s.path.name: s.kind for s in t.sidecars}
    assert kinds["dflash-Synth-legacy-Q5_K_M.gguf"] == "dflash-draft" and kinds["dspark-Synth.gguf"] == "dspark"
    assert all(not d.sidecars for d in models if d.is_draft)
    q = _target(models, "Qwen-Q4_K_M.gguf")
    assert q.mtp_heads == 1 and [s.path.name for s in q.sidecars][0] == "mtp-Qwen-Q4_K_M.gguf"
    head = _side(q, "mtp-Qwen-Q4_K_M.gguf")
    assert head.kind == "mtp" and head.usable_on == ["mainline"] and head.label == "MTP head"
    assert any("carries its own MTP head" in w for w in head.warnings)
    assert _target(models, "mtp-Qwen-Q4_K_M.gguf").is_draft  # a head without a trunk is no target


def test_the_offered_quant_is_the_one_llama_cpp_would_pick(shelf: Path, tmp_path: Path) -> None:
    # Q5_K_M target: the legacy Q5_K_M draft is the same quant but only BeeLlama 0.1-0.3 runs it; among
    # upstream drafts Q4_K_M (1 bit off) beats Q8_0 (3 bits off).
    t = _target(library.scan([shelf]), "Synth-Q5_K_M.gguf")
    assert t.best_sidecar("mainline").path.name == "dflash-Synth-Q4_K_M.gguf"  # type: ignore[union-attr]
    assert t.best_sidecar("bee-b").path.name == "dflash-Synth-Q4_K_M.gguf"  # type: ignore[union-attr]
    assert t.best_sidecar("bee-a").path.name == "dflash-Synth-legacy-Q5_K_M.gguf"  # type: ignore[union-attr]
    assert t.best_sidecar("mainline", ["dspark"]).path.name == "dspark-Synth.gguf"  # type: ignore[union-attr]
    # a Q8_0 target gets the Q8_0 draft; an exact name match beats an equal bit count (IQ4_XS vs Q4_K_M)
    d = tmp_path / "q8"
    d.mkdir()
    t8 = sf.target(d, "Synth-Q8_0.gguf", file_type=sf.Q8_0)
    for name, ft in (("dflash-Synth-Q4_K_M.gguf", sf.Q4_K_M), ("dflash-Synth-Q8_0.gguf", sf.Q8_0),
                     ("dflash-Synth-IQ4_XS.gguf", sf.IQ4_XS)):
        sf.dflash(d, name, t8, file_type=ft)
    got = library.sidecars_next_to(t8)
    assert got[0].path.name == "dflash-Synth-Q8_0.gguf" and len(got) == 3
    assert sidecars.pick(got, "Q4_K_M").path.name == "dflash-Synth-Q4_K_M.gguf"  # type: ignore[union-attr]
    assert sidecars.pick(got, "IQ4_XS").path.name == "dflash-Synth-IQ4_XS.gguf"  # type: ignore[union-attr]
    assert sidecars.pick(got, "Q8_0", "bee-a") is None  # upstream drafts only: nothing for BeeLlama 0.1-0.3


def test_legacy_fork_format_is_refused_on_gen_b_and_mainline_with_the_conversion(shelf: Path) -> None:
    s = _side(_target(library.scan([shelf]), "Synth-Q5_K_M.gguf"), "dflash-Synth-legacy-Q5_K_M.gguf")
    assert s.usable_on == ["bee-a"] and not s.problems
    for engine in (BEE_B, MAINLINE):
        why = s.reason_on(caps(engine))
        assert "old fork format (dflash-draft)" in why and "convert-dflash-draft-to-upstream.py --verify" in why, why
    assert s.reason_on(caps(BEE_A)) == ""
    up = _side(_target(library.scan([shelf]), "Synth-Q5_K_M.gguf"), "dflash-Synth-Q4_K_M.gguf")
    assert "upstream 'dflash' format" in up.reason_on(caps(BEE_A)) and "BeeLlama >= 0.4" in up.reason_on(caps(BEE_A))
    assert up.reason_on(caps(MAINLINE)) == "" and up.reason_on(caps(BEE_B)) == ""


def test_lucebox_gemma4_format_is_refused_everywhere_with_the_upstream_repo(shelf: Path) -> None:
    s = _side(_target(library.scan([shelf]), "Synth-Q5_K_M.gguf"), "dflash-gemma-lucebox.gguf")
    assert s.kind == "" and s.architecture == "gemma4-dflash-draft" and not s.usable
    for why in (s.reason(), s.reason_on(caps(MAINLINE)), s.reason_on(caps(BEE_B)), s.verdict()):
        assert "Lucebox" in why and "Anbeeld/gemma-4-31B-it-DFlash-GGUF" in why, why


def test_vocabulary_and_hidden_size_mismatches_name_both_numbers_and_the_remedy(shelf: Path) -> None:
    t = _target(library.scan([shelf]), "Synth-Q5_K_M.gguf")
    vocab = _side(t, "dflash-Bigvocab-Q4_K_M.gguf")
    assert not vocab.usable and vocab.usable_on == []
    assert "400 tokens" in vocab.reason() and "320" in vocab.reason() and "Use the draft made for" in vocab.reason()
    wide = _side(t, "dflash-Wide-Q4_K_M.gguf")
    assert "hidden size 256" in wide.reason() and "has 128" in wide.reason() and "pick the draft" in wide.reason()
    assert wide.reason_on(caps(MAINLINE)) == wide.reason()  # the file's problem outranks any engine
    q = _target(library.scan([shelf]), "Qwen-Q4_K_M.gguf")
    other = _side(q, "mtp-Wider-Q4_K_M.gguf")
    assert not other.usable and "1 x 256" not in other.reason() and "x 256" in other.reason()
    assert "use the mtp- file from Qwen-Q4_K_M.gguf's own repo" in other.reason()


def test_an_engine_without_the_mode_says_so(shelf: Path, tmp_path: Path) -> None:
    t = _target(library.scan([shelf]), "Synth-Q5_K_M.gguf")
    spark = _side(t, "dspark-Synth.gguf")
    assert spark.usable_on == ["mainline"] and spark.reason_on(caps(MAINLINE)) == ""
    assert "has no DSpark" in spark.reason_on(caps(BEE_A)) and "BeeLlama 0.4 or newer" in spark.reason_on(caps(BEE_A))
    head = _side(_target(library.scan([shelf]), "Qwen-Q4_K_M.gguf"), "mtp-Qwen-Q4_K_M.gguf")
    assert "has no MTP" in head.reason_on(caps(BEE_A))
    # an MTP head next to a model of another architecture belongs to another model
    d = tmp_path / "llama"
    d.mkdir()
    sf.target(d, "Synth-Q4_K_M.gguf")
    shutil.copy(shelf / "Qwen-MTP-GGUF" / "mtp-Qwen-Q4_K_M.gguf", d)
    got = library.sidecars_next_to(d / "Synth-Q4_K_M.gguf")
    assert len(got) == 1 and not got[0].usable
    assert "MTP head of a 'qwen35' model" in got[0].reason() and "'llama'" in got[0].reason()


def test_the_cli_lists_the_offered_draft_and_each_reason(shelf: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from beedeck import cli

    assert cli.main(["models", "scan", str(shelf)]) == 0
    out = capsys.readouterr().out
    assert "+ offered dflash-Synth-Q4_K_M.gguf (DFlash, Q4_K_M): usable on BeeLlama >= 0.4, mainline llama.cpp" in out
    assert "+ draft dflash-gemma-lucebox.gguf" in out and "not usable:" in out and "Lucebox" in out
    assert "+ offered mtp-Qwen-Q4_K_M.gguf (MTP head, Q4_K_M)" in out
    assert cli.main(["models", "scan", str(shelf), "--json"]) == 0
    rows = {Path(r["path"]).name: r for r in json.loads(capsys.readouterr().out)}
    row = rows["Synth-Q5_K_M.gguf"]
    assert Path(row["offered_draft"]).name == "dflash-Synth-Q4_K_M.gguf"
    vocab = next(d for d in row["drafts"] if d["file"] == "dflash-Bigvocab-Q4_K_M.gguf")
    assert vocab["usable"] is False and "400 tokens" in vocab["reason"]


@pytest.fixture
def in_models_dir(shelf: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """The llama target and its drafts in BeeDeck's own models folder, found by a default scan."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # no LM Studio folder of the machine's user
    dest = paths.models_dir() / "Synth-GGUF"
    shutil.copytree(shelf / "Synth-GGUF", dest)
    return dest


def test_the_recommender_offers_the_sidecar_pair_first_and_says_why_others_are_not_used(in_models_dir: Path) -> None:
    r = recommend([8 * GiB], "quality", Generation.MAINLINE)
    c = r.primary
    assert c.target_path == in_models_dir / "Synth-Q5_K_M.gguf"
    assert c.draft_path == in_models_dir / "dflash-Synth-Q4_K_M.gguf" and c.draft_kind == "dflash"
    assert c.settings.target == str(c.target_path) and c.settings.draft == str(c.draft_path)
    assert c.settings.spec_mode == "dflash" and "(both on disk)" in c.summary()
    text = "\n".join(r.reasons)
    assert "Draft found next to the model: dflash-Synth-Q4_K_M.gguf" in text
    assert "dflash-gemma-lucebox.gguf next to Synth-Q5_K_M.gguf but did not use it" in text and "Lucebox" in text
    assert "dflash-Synth-legacy-Q5_K_M.gguf next to Synth-Q5_K_M.gguf but did not use it" in text
    assert "convert-dflash-draft-to-upstream.py" in text
    # BeeLlama 0.1-0.3 (the probed engine): the fork-format draft, never an upstream one
    a = recommend([8 * GiB], "quality", caps=caps(BEE_A))
    assert a.primary.generation == Generation.BEE_A and a.primary.draft_path is not None
    assert a.primary.draft_path.name == "dflash-Synth-legacy-Q5_K_M.gguf"
    assert "upstream 'dflash' format" in "\n".join(a.reasons)


def test_an_engine_without_dflash_gets_no_pair_and_the_reason(in_models_dir: Path) -> None:
    text = help_stdout(MAINLINE).replace("draft-dflash", "draft-dfl4sh")  # mainline before DFlash (b9831)
    old = caps_from_texts("ml-old", ML_VERSION, text, "Available devices:\n  (none)\n")
    assert old.dflash_spec_type is None
    r = recommend([8 * GiB], "quality", caps=old)
    assert r.primary.draft_file is None and r.primary.pair_id == "starter"
    assert "has no DFlash" in r.reasons[0] and "none is offered" in r.reasons[1]


@pytest.mark.engine
def test_cli_recommend_for_a_probed_engine_offers_its_sidecar(in_models_dir: Path, starter_engine_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    from beedeck import cli

    assert cli.main(["recommend", "--vram", "8", "--engine", str(starter_engine_path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    p = out["primary"]
    assert p["generation"] == "mainline" and Path(p["draft_path"]) == in_models_dir / "dflash-Synth-Q4_K_M.gguf"
    assert p["settings"]["draft"] == p["draft_path"] and p["settings"]["target"] == p["target_path"]
    assert any("dflash-Synth-legacy-Q5_K_M.gguf" in r and "convert-dflash-draft-to-upstream.py" in r
               for r in out["reasons"])
    assert cli.main(["recommend", "--vram", "8", "--engine", str(in_models_dir / "nope")]) == 1
    assert "could not be probed" in capsys.readouterr().err


def test_a_hub_repo_is_one_folder_even_across_snapshots(shelf: Path, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """``beedeck models get`` puts files in the Hub cache: a target and the ``mtp-`` file of its repo,
    fetched at different commits, still pair (ggml-org/Qwen3.8-27B-GGUF/mtp-Qwen3.8-27B-Q4_0.gguf)."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    repo = library.hub_cache_dir() / "models--org--Qwen-GGUF"
    for commit, name in (("c1", "Qwen-Q4_K_M.gguf"), ("c2", "mtp-Qwen-Q4_K_M.gguf")):
        blob = repo / "blobs" / f"blob-{commit}"
        blob.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(shelf / "Qwen-MTP-GGUF" / name, blob)
        link = repo / "snapshots" / commit / name
        link.parent.mkdir(parents=True)
        link.symlink_to(Path("..", "..", "blobs", blob.name))
    t = _target(library.scan(), "Qwen-Q4_K_M.gguf")
    assert t.source == "hf-cache" and t.repo == "org/Qwen-GGUF"
    assert [(s.filename, s.kind) for s in t.sidecars] == [("mtp-Qwen-Q4_K_M.gguf", "mtp")]
