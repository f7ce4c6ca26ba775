"""Speculation modes: which ones an engine and the model files can run, and why not; each mode's
settings (only the speculation changes) and its command line on each engine."""

from __future__ import annotations

import dataclasses

import pytest

from beedeck.core.engine.argv import LaunchRefused, build_argv
from beedeck.core.engine.caps import EngineCaps
from beedeck.core.engine.help_text import caps_from_texts
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.mode import Mode
from beedeck.core.engine.speculation.modes import (
    ModelFacts,
    available_modes,
    engine_spec_type,
    option,
    parse_spec,
    pick_model_free_type,
    settings_for_mode,
)
from tests.fixtures.engines import BEE_A, BEE_B, MAINLINE, help_stdout


@pytest.fixture(scope="module")
def ml() -> EngineCaps:
    return caps_from_texts("/e/mainline/llama-server", "", help_stdout(MAINLINE))


@pytest.fixture(scope="module")
def bee_a() -> EngineCaps:
    return dataclasses.replace(caps_from_texts("/e/bee-a/llama-server", "", help_stdout(BEE_A)), release="v0.1.2")


@pytest.fixture(scope="module")
def bee_b() -> EngineCaps:
    return dataclasses.replace(caps_from_texts("/e/bee-b/llama-server", "", help_stdout(BEE_B)), release="v0.4.3")


MTP_TARGET = ModelFacts(target_name="qwen36.gguf", mtp_layers=1)
PLAIN_TARGET = ModelFacts(target_name="llama.gguf", mtp_layers=0)


def _facts(target: ModelFacts = PLAIN_TARGET, kind: str | None = None, read: bool = True) -> ModelFacts:
    return dataclasses.replace(target, draft_name="d.gguf", draft_read=read, draft_kind=kind)


def _available(options: list) -> list[str]:  # type: ignore[type-arg]
    return [o.key for o in options if o.available]


def test_every_mode_is_listed_in_order_and_baseline_always_runs(ml: EngineCaps) -> None:
    options = available_modes(ml, LaunchSettings(target="/m/t.gguf"), PLAIN_TARGET)
    assert [o.key for o in options] == list(tuple(Mode))
    assert _available(options) == [Mode.BASELINE, Mode.MODEL_FREE]
    free = option(options, Mode.MODEL_FREE)
    assert free is not None and free.spec_type == "ngram-mod" and free.label == "N-gram"
    assert option(options, "nope") is None


def test_mtp_is_offered_by_the_heads_in_the_target(ml: EngineCaps, bee_a: EngineCaps) -> None:
    s = LaunchSettings(target="/m/qwen36.gguf")
    mtp = option(available_modes(ml, s, MTP_TARGET), Mode.MTP)
    assert mtp is not None and mtp.available and mtp.spec_type == "draft-mtp"
    without = option(available_modes(ml, s, PLAIN_TARGET), Mode.MTP)
    assert without is not None and not without.available
    assert "llama.gguf has no MTP heads" in without.reason and "nextn_predict_layers" in without.reason
    unread = option(available_modes(ml, s, ModelFacts()), Mode.MTP)
    assert unread is not None and not unread.available and "has not read" in unread.reason
    # A profile saved in MTP mode is trusted until its header says otherwise.
    assert _available(available_modes(ml, dataclasses.replace(s, spec_mode=Mode.MTP), ModelFacts())) == [
        Mode.BASELINE, Mode.MTP, Mode.MODEL_FREE]
    # BeeLlama 0.1-0.3 has no MTP: the engine is the reason, whatever the file holds.
    old = option(available_modes(bee_a, s, MTP_TARGET), Mode.MTP)
    assert old is not None and not old.available
    assert old.reason.startswith("BeeLlama v0.1.2 has no MTP") and "0.4 or newer" in old.reason


def test_a_draft_runs_as_its_own_kind_only(ml: EngineCaps) -> None:
    s = LaunchSettings(target="/m/t.gguf", draft="/m/d.gguf", spec_mode=Mode.DFLASH)
    assert _available(available_modes(ml, s, _facts(kind="dflash"))) == [Mode.BASELINE, Mode.DFLASH, Mode.MODEL_FREE]
    assert _available(available_modes(ml, s, _facts(kind="eagle3"))) == [Mode.BASELINE, Mode.EAGLE3, Mode.MODEL_FREE]
    assert _available(available_modes(ml, s, _facts(kind="dspark"))) == [Mode.BASELINE, Mode.DSPARK, Mode.MODEL_FREE]
    options = available_modes(ml, s, _facts(MTP_TARGET, kind="eagle3"))
    assert _available(options) == [Mode.BASELINE, Mode.EAGLE3, Mode.MTP, Mode.MODEL_FREE]
    dflash = option(options, Mode.DFLASH)
    assert dflash is not None and dflash.reason == ("d.gguf is an EAGLE-3 draft, so it cannot run as DFlash: use the "
                                                    "EAGLE-3 mode for it.")
    plain = option(available_modes(ml, s, _facts(kind=None)), Mode.DFLASH)
    assert plain is not None and "an ordinary model, not a speculation draft" in plain.reason
    # A draft whose header was not read is taken for the profile's own kind.
    assert _available(available_modes(ml, dataclasses.replace(s, spec_mode=Mode.EAGLE3), _facts(read=False))) == [
        Mode.BASELINE, Mode.EAGLE3, Mode.MODEL_FREE]


def test_no_draft_says_which_draft_to_pick(ml: EngineCaps) -> None:
    for key, label in ((Mode.DFLASH, "DFlash"), (Mode.EAGLE3, "EAGLE-3"), (Mode.DSPARK, "DSpark")):
        o = option(available_modes(ml, LaunchSettings(target="/m/t.gguf"), PLAIN_TARGET), key)
        assert o is not None and not o.available and o.reason.startswith(f"No {label} draft model is configured")


def test_draft_formats_per_engine(ml: EngineCaps, bee_a: EngineCaps, bee_b: EngineCaps) -> None:
    s = LaunchSettings(target="/m/t.gguf", draft="/m/d.gguf", spec_mode=Mode.DFLASH)
    legacy = _facts(kind="dflash-draft")
    assert option(available_modes(bee_a, s, legacy), Mode.DFLASH).available  # type: ignore[union-attr]
    for caps in (ml, bee_b):
        o = option(available_modes(caps, s, legacy), Mode.DFLASH)
        assert o is not None and not o.available and "old 'dflash-draft' format" in o.reason
    upstream = option(available_modes(bee_a, s, _facts(kind="dflash")), Mode.DFLASH)
    assert upstream is not None and not upstream.available and "BeeLlama 0.2 or newer" in upstream.reason
    newer = dataclasses.replace(bee_a, release="v0.3.1")
    assert option(available_modes(newer, s, _facts(kind="dflash")), Mode.DFLASH).available  # type: ignore[union-attr]
    # BeeLlama 0.1-0.3 spell DFlash "dflash", the others "draft-dflash"; EAGLE-3 and DSpark exist on >= 0.4.
    assert option(available_modes(bee_a, s, legacy), Mode.DFLASH).spec_type == "dflash"  # type: ignore[union-attr]
    assert engine_spec_type(Mode.DFLASH, bee_b) == ("draft-dflash", "")
    assert engine_spec_type(Mode.DSPARK, bee_b) == ("draft-dspark", "")
    assert engine_spec_type(Mode.EAGLE3, bee_a)[0] is None


def test_an_engine_without_spec_type_runs_only_the_baseline(ml: EngineCaps) -> None:
    old = dataclasses.replace(ml, flags=frozenset(f for f in ml.flags if f != "--spec-type"), spec_types=())
    options = available_modes(old, LaunchSettings(target="/m/t.gguf", spec_mode=Mode.MTP), MTP_TARGET)
    assert _available(options) == [Mode.BASELINE]
    assert all("has no --spec-type option" in o.reason for o in options[1:])


def test_before_the_engine_is_probed_only_the_profiles_own_mode_runs() -> None:
    s = LaunchSettings(target="/m/t.gguf", draft="/m/d.gguf", spec_mode=Mode.DFLASH)
    options = available_modes(None, s, _facts(MTP_TARGET, kind="dflash"))
    assert _available(options) == [Mode.BASELINE, Mode.DFLASH]
    mtp = option(options, Mode.MTP)
    assert mtp is not None and "has not probed the engine yet" in mtp.reason
    # What the files say comes first: the engine may never be the reason then.
    eagle = option(options, Mode.EAGLE3)
    assert eagle is not None and "cannot run as EAGLE-3" in eagle.reason


def test_model_free_type_is_one_the_engine_runs_safely(ml: EngineCaps, bee_a: EngineCaps) -> None:
    assert pick_model_free_type(ml) == "ngram-mod"
    assert pick_model_free_type(ml, "ngram-simple") == "ngram-simple"
    assert pick_model_free_type(ml, "copyspec") == "ngram-mod"  # mainline has no copyspec
    # BeeLlama 0.1.2 aborts in sampling with ngram-mod and ngram-map-k (a known issue): the next one runs.
    assert pick_model_free_type(bee_a) == "ngram-simple"
    assert pick_model_free_type(bee_a, "ngram-mod") == "ngram-simple"
    s = LaunchSettings(target="/m/t.gguf", spec_model_free_type="copyspec")
    free = option(available_modes(bee_a, s, PLAIN_TARGET), Mode.MODEL_FREE)
    assert free is not None and free.available and free.label == "N-gram" and free.spec_type == "copyspec"  # one name per mode; the type apart


def test_settings_for_mode_changes_only_the_speculation(ml: EngineCaps) -> None:
    base = LaunchSettings(target="/m/t.gguf", draft="/m/d.gguf", spec_mode=Mode.DFLASH, ctx_size=8192,
                          draft_n_max=8, threads=3)
    off = settings_for_mode(base, Mode.BASELINE)
    assert off.draft is None and off.spec_mode == Mode.BASELINE and off.ctx_size == 8192 and off.threads == 3
    mtp = settings_for_mode(base, Mode.MTP)
    assert mtp.draft is None and mtp.spec_mode == Mode.MTP and mtp.draft_n_max == 8
    free = settings_for_mode(dataclasses.replace(base, spec_model_free_type="copyspec"), Mode.MODEL_FREE, ml)
    assert free.spec_mode == Mode.MODEL_FREE and free.spec_model_free_type == "ngram-mod" and free.draft is None
    assert settings_for_mode(base, Mode.EAGLE3).draft == "/m/d.gguf"
    assert settings_for_mode(base, Mode.DFLASH) == base


def test_each_mode_differs_from_the_baseline_only_in_speculation_flags(ml: EngineCaps) -> None:
    base = LaunchSettings(target="/m/t.gguf", draft="/m/d.gguf", port=8910, draft_n_max=6)
    plain = build_argv(settings_for_mode(base, Mode.BASELINE), ml).argv
    assert not [a for a in plain if a.startswith("--spec")]
    for key, added in ((Mode.DFLASH, ["--spec-draft-model", "/m/d.gguf", "--spec-type", "draft-dflash"]),
                       (Mode.EAGLE3, ["--spec-draft-model", "/m/d.gguf", "--spec-type", "draft-eagle3"]),
                       (Mode.DSPARK, ["--spec-draft-model", "/m/d.gguf", "--spec-type", "draft-dspark",
                                 "--spec-draft-p-min", "0"]),
                       (Mode.MTP, ["--spec-type", "draft-mtp"]),
                       (Mode.MODEL_FREE, ["--spec-type", "ngram-mod"])):
        argv = build_argv(settings_for_mode(base, key, ml), ml).argv
        assert argv[:2] == ["-m", "/m/t.gguf"]
        assert argv[2:2 + len(added)] == added, (key, argv)
        rest = argv[2 + len(added):]
        assert rest[:2] == ["--spec-draft-n-max", "6"]
        if key in (Mode.DFLASH, Mode.EAGLE3, Mode.DSPARK):  # the draft's own GPU layers, among the memory flags
            i = rest.index("--spec-draft-ngl")
            assert rest[i + 1] == "all"
            rest = rest[:i] + rest[i + 2:]
        assert ["-m", "/m/t.gguf", *rest[2:]] == plain, key
    assert "--spec-draft-ngl" not in build_argv(settings_for_mode(base, Mode.MTP), ml).argv


def test_modes_the_engine_lacks_are_refused_with_the_engine_named(bee_a: EngineCaps) -> None:
    for mode, words in ((Mode.MTP, "has no MTP"), (Mode.EAGLE3, "has no EAGLE-3"),
                        (Mode.DSPARK, "has no DSpark")):
        with pytest.raises(LaunchRefused) as exc:
            build_argv(LaunchSettings(target="/m/t.gguf", draft="/m/d.gguf", spec_mode=mode), bee_a)
        assert any(words in r and "BeeLlama v0.1.2" in r and "Or pick another speculation mode" in r
                   for r in exc.value.reasons), exc.value.reasons
    with pytest.raises(LaunchRefused, match="EAGLE-3 needs a draft model"):
        build_argv(LaunchSettings(target="/m/t.gguf", spec_mode=Mode.EAGLE3),
                   caps_from_texts("ml", "", help_stdout(MAINLINE)))


def test_an_mtp_profile_with_a_draft_leaves_the_draft_out(ml: EngineCaps) -> None:
    plan = build_argv(LaunchSettings(target="/m/t.gguf", draft="/m/d.gguf", spec_mode=Mode.MTP), ml)
    assert "--spec-draft-model" not in plan.argv and plan.argv[2:4] == ["--spec-type", "draft-mtp"]
    assert any("MTP drafts with the heads inside the target" in n.message for n in plan.notes)


def test_a_dspark_p_min_in_the_extra_arguments_is_left_to_the_user(ml: EngineCaps) -> None:
    s = LaunchSettings(target="/m/t.gguf", draft="/m/d.gguf", spec_mode=Mode.DSPARK,
                       extra_args=["--spec-draft-p-min", "0.5"])
    argv = build_argv(s, ml).argv
    assert argv.count("--spec-draft-p-min") == 1 and argv[-2:] == ["--spec-draft-p-min", "0.5"]


@pytest.mark.parametrize(("text", "want"), [
    ("off", (Mode.BASELINE, None)), ("baseline", (Mode.BASELINE, None)), ("", (Mode.BASELINE, None)),
    ("dflash", (Mode.DFLASH, None)), ("draft-dflash", (Mode.DFLASH, None)),
    ("mtp", (Mode.MTP, None)), ("draft-mtp", (Mode.MTP, None)), ("EAGLE3", (Mode.EAGLE3, None)),
    ("dspark", (Mode.DSPARK, None)), ("model-free", (Mode.MODEL_FREE, None)),
    ("ngram-mod", (Mode.MODEL_FREE, "ngram-mod")), ("copyspec", (Mode.MODEL_FREE, "copyspec")),
])
def test_parse_spec(text: str, want: tuple[Mode, str | None]) -> None:
    assert parse_spec(text) == want


HEAD = "/m/Qwen-GGUF/mtp-Qwen-Q4_K_M.gguf"


def _head_facts(name: str = "mtp-Qwen-Q4_K_M.gguf", target: ModelFacts = PLAIN_TARGET) -> ModelFacts:
    return dataclasses.replace(target, draft_name=name, draft_read=True, draft_kind="mtp")


def test_an_mtp_head_file_as_the_draft_offers_mtp_for_a_target_without_heads(
        ml: EngineCaps, bee_b: EngineCaps) -> None:
    s = LaunchSettings(target="/m/Qwen-GGUF/Qwen-Q4_K_M.gguf", draft=HEAD)
    mtp = option(available_modes(ml, s, _head_facts()), Mode.MTP)
    assert mtp is not None and mtp.available and mtp.spec_type == "draft-mtp", mtp
    # the head is no DFlash draft, and says which mode it runs as
    dflash = option(available_modes(ml, s, _head_facts()), Mode.DFLASH)
    assert dflash is not None and not dflash.available and "use the MTP mode for it" in dflash.reason
    # only mainline is known to load a head file as the draft
    on_bee = option(available_modes(bee_b, s, _head_facts()), Mode.MTP)
    assert on_bee is not None and not on_bee.available and "only mainline llama.cpp" in on_bee.reason
    # a head that is not under its mtp- name cannot be passed by build_argv: the reason says to rename it
    odd = option(available_modes(ml, dataclasses.replace(s, draft="/m/head.gguf"), _head_facts("head.gguf")), Mode.MTP)
    assert odd is not None and not odd.available and "rename it to mtp-head.gguf" in odd.reason
    # without a head file the old reason still names the fix
    plain = option(available_modes(ml, LaunchSettings(target="/m/t.gguf"), PLAIN_TARGET), Mode.MTP)
    assert plain is not None and not plain.available and "mtp- head file as the draft" in plain.reason


def test_mtp_keeps_only_a_head_file_and_passes_it_as_the_engine_wants(ml: EngineCaps) -> None:
    profile = LaunchSettings(target="/m/t.gguf", draft=HEAD, spec_mode=Mode.BASELINE)
    mtp = settings_for_mode(profile, Mode.MTP, ml, _head_facts())
    assert mtp.draft == HEAD and mtp.spec_mode == Mode.MTP
    assert settings_for_mode(profile, Mode.MTP, ml).draft == HEAD  # headers not read: by its mtp- name
    # a target with its own heads needs no head file; a DFlash draft is never an MTP head
    assert settings_for_mode(profile, Mode.MTP, ml, _head_facts(target=MTP_TARGET)).draft is None
    dflash = dataclasses.replace(profile, draft="/m/dflash-t.gguf", spec_mode=Mode.DFLASH)
    assert settings_for_mode(dflash, Mode.MTP, ml, _facts(kind="dflash")).draft is None
    assert settings_for_mode(dflash, Mode.MTP, ml).draft is None
    plan = build_argv(mtp, ml)
    i = plan.argv.index("--spec-draft-model")
    assert plan.argv[i:i + 4] == ["--spec-draft-model", HEAD, "--spec-type", "draft-mtp"], plan.argv
    assert any("head file mtp-Qwen-Q4_K_M.gguf" in n.message for n in plan.notes)


def test_in_mtp_mode_a_draft_that_is_no_head_is_refused_by_the_files_check(ml: EngineCaps) -> None:
    s = LaunchSettings(target="/m/t.gguf", draft="/m/dflash-t.gguf", spec_mode=Mode.MTP)
    mtp = option(available_modes(ml, s, _facts(MTP_TARGET, kind="dflash")), Mode.MTP)
    assert mtp is not None and not mtp.available and "not an MTP head file" in mtp.reason
    # a DFlash profile's toggle still offers MTP on a target with heads (the draft is dropped for it)
    dflash = dataclasses.replace(s, spec_mode=Mode.DFLASH)
    assert Mode.MTP in _available(available_modes(ml, dflash, _facts(MTP_TARGET, kind="dflash")))


def test_only_model_free_types_that_may_keep_state_are_said_to() -> None:
    from beedeck.core.engine.speculation.modes import keeps_across_requests

    assert keeps_across_requests(Mode.MODEL_FREE, "ngram-mod") and keeps_across_requests(Mode.MODEL_FREE, "copyspec")
    assert not keeps_across_requests(Mode.MODEL_FREE, "ngram-simple")  # drafts from the request's own tokens
    assert not keeps_across_requests(Mode.DFLASH, "draft-dflash") and not keeps_across_requests(Mode.BASELINE, None)
