"""build_argv: golden command lines from the guide (docs/reference/seed.md), translations, refusals."""

from __future__ import annotations

import shlex

import pytest

from beedeck.core.engine.argv import ArgNote, LaunchPlan, LaunchRefused, build_argv, is_loopback, own_origin
from beedeck.core.engine.caps import EngineCaps
from beedeck.core.engine.help_text import caps_from_texts
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.mode import Mode
from tests.fixtures.engines import BEE_A, BEE_B, MAINLINE, help_stdout

# The guide's two command lines, verbatim (docs/reference/seed.md steps 6 and 8).
GUIDE_BASELINE = (
    "llama-server -m models/gemma-4-31B-it-Q4_K_S.gguf --host 0.0.0.0 --port 8910 -np 1 -ngl all -b 2048 "
    "-ub 512 --ctx-size 32768 --cache-type-k q5_0 --cache-type-v q4_1 --flash-attn on --jinja --metrics "
    "--log-timestamps --log-prefix --reasoning off --temp 0.7 --top-k 64 --top-p 0.95 --min-p 0.0"
)
GUIDE_DFLASH = (
    "llama-server -m models/gemma-4-31B-it-Q4_K_S.gguf --spec-draft-model models/gemma4-31b-it-dflash-Q5_K_M.gguf "
    "--spec-type dflash --spec-dflash-cross-ctx 1024 --host 0.0.0.0 --port 8910 -np 1 --kv-unified -ngl all "
    "--spec-draft-ngl all -b 2048 -ub 512 --ctx-size 32768 --flash-attn on --cache-ram 0 --jinja --no-mmap "
    "--mlock --no-host --metrics --log-timestamps --log-prefix --reasoning off --temp 0.7 --top-k 64 "
    "--top-p 0.95 --min-p 0.0"
)
TARGET, DRAFT = "/m/target.gguf", "/m/draft.gguf"


@pytest.fixture(scope="module")
def bee() -> EngineCaps:
    return caps_from_texts("bee", "", help_stdout(BEE_A))


@pytest.fixture(scope="module")
def ml() -> EngineCaps:
    return caps_from_texts("ml", "", help_stdout(MAINLINE))


@pytest.fixture(scope="module")
def bee_b() -> EngineCaps:
    return caps_from_texts("bee-b", "", help_stdout(BEE_B))


def comparable(pairs: list[tuple[str, str | None]]) -> list[tuple[str, str | None]]:
    """Paths, host, port, the model's alias and the CORS restriction aside: drop --host/--port/--alias/--cors-*
    (BeeDeck's own), replace model paths by their role."""
    out = []
    for flag, value in pairs:
        if flag in ("--host", "--port", "--alias", "--cors-origins", "--no-cors-credentials"):
            continue
        if flag in ("-m", "--spec-draft-model"):
            value = "<path>"
        out.append((flag, value))
    return out


def guide_pairs(line: str) -> list[tuple[str, str | None]]:
    return comparable(LaunchPlan(shlex.split(line)[1:]).pairs())


def plan_pairs(plan: LaunchPlan) -> list[tuple[str, str | None]]:
    return comparable(plan.pairs())


def kinds(plan: LaunchPlan) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for note in plan.notes:
        out.setdefault(note.setting, set()).add(note.kind)
    return out


def value_of(plan: LaunchPlan, flag: str) -> str | None:
    return dict(p for p in plan.pairs()).get(flag)


# ------------------------------------------------------------------------------- golden: Gen A


def test_guide_baseline_on_gen_a_flag_for_flag(bee: EngineCaps) -> None:
    plan = build_argv(LaunchSettings.guide_baseline(TARGET), bee)
    assert plan_pairs(plan) == guide_pairs(GUIDE_BASELINE)
    assert plan.argv[:2] == ["-m", TARGET]  # no binary in front: the server prepends caps.path
    assert plan.notes == ()


def test_guide_dflash_on_gen_a_flag_for_flag(bee: EngineCaps) -> None:
    plan = build_argv(LaunchSettings.guide_dflash(TARGET, DRAFT), bee)
    assert plan_pairs(plan) == guide_pairs(GUIDE_DFLASH)
    assert value_of(plan, "--spec-draft-model") == DRAFT
    assert [n.kind for n in plan.notes] == []  # with --kv-unified, -c 32768 really is the slot's context


def test_gen_a_speculation_without_unified_kv_doubles_the_context(bee: EngineCaps) -> None:
    s = LaunchSettings.guide_dflash(TARGET, DRAFT)
    s.kv_unified = None
    plan = build_argv(s, bee)
    assert value_of(plan, "--ctx-size") == "65536"
    assert "compensated" in kinds(plan)["ctx_size"]
    # ctx_is_total reproduces the guide's literal -c and warns instead.
    s.ctx_is_total = True
    plan = build_argv(s, bee)
    assert value_of(plan, "--ctx-size") == "32768"
    assert kinds(plan)["ctx_size"] == {"info"}
    # Model-free speculation on Gen A also splits the context.
    s2 = LaunchSettings(target=TARGET, spec_mode=Mode.MODEL_FREE, ctx_size=4096)
    assert value_of(build_argv(s2, bee), "--ctx-size") == "8192"


def test_mainline_never_doubles_but_splits_per_slot(ml: EngineCaps) -> None:
    s = LaunchSettings(target=TARGET, spec_mode=Mode.MODEL_FREE, ctx_size=4096)
    assert value_of(build_argv(s, ml), "--ctx-size") == "4096"
    s.parallel = 2
    plan = build_argv(s, ml)
    assert value_of(plan, "--ctx-size") == "8192" and "compensated" in kinds(plan)["ctx_size"]
    assert value_of(plan, "-np") == "2" and "parallel" not in kinds(plan)
    s.ctx_is_total = True
    assert value_of(build_argv(s, ml), "--ctx-size") == "4096"


@pytest.mark.parametrize("mode", [Mode.DFLASH, Mode.MTP])
def test_a_loaded_draft_keeps_one_slot_and_says_why(ml: EngineCaps, mode: Mode) -> None:
    """Speculation loses throughput at two or more slots (llama.cpp PR 27342): one slot while a draft runs."""
    s = LaunchSettings(target=TARGET, draft=DRAFT if mode == Mode.DFLASH else None, spec_mode=mode,
                       ctx_size=4096, parallel=4)
    plan = build_argv(s, ml)
    assert value_of(plan, "-np") == "1" and value_of(plan, "--ctx-size") == "4096"
    note = next(n for n in plan.notes if n.setting == "parallel")
    assert note.kind == "compensated" and note.message.startswith("One slot while a draft is loaded (-np 1, not 4)")
    assert "PR 27342" in note.message and "Baseline or N-gram keep the 4 slots" in note.message


# ---------------------------------------------------------------------- golden: translated


def test_guide_baseline_on_mainline_is_unchanged(ml: EngineCaps) -> None:
    plan = build_argv(LaunchSettings.guide_baseline(TARGET), ml)
    assert plan_pairs(plan) == guide_pairs(GUIDE_BASELINE)
    assert plan.notes == ()


def test_guide_dflash_translated_to_mainline(ml: EngineCaps) -> None:
    plan = build_argv(LaunchSettings.guide_dflash(TARGET, DRAFT), ml)
    expected = guide_pairs(GUIDE_DFLASH)
    expected = [("--spec-type", "draft-dflash") if f == "--spec-type" else (f, v) for f, v in expected]
    expected.remove(("--spec-dflash-cross-ctx", "1024"))
    i = expected.index(("--no-mmap", None))
    expected[i : i + 2] = [("--load-mode", "mlock")]
    assert plan_pairs(plan) == expected
    assert kinds(plan) == {
        "spec_mode": {"translated"},
        "dflash_cross_ctx": {"dropped"},
        "mmap": {"translated"},
    }


def test_guide_dflash_on_gen_b_uses_draft_dflash(bee_b: EngineCaps) -> None:
    plan = build_argv(LaunchSettings.guide_dflash(TARGET, DRAFT), bee_b)
    assert value_of(plan, "--spec-type") == "draft-dflash"
    assert "--spec-dflash-cross-ctx" not in plan.argv and value_of(plan, "--load-mode") == "mlock"


def test_load_mode_translations(ml: EngineCaps, bee: EngineCaps) -> None:
    cases = {(True, False): None, (False, False): "none", (False, True): "mlock", (True, True): "mmap+mlock"}
    for (mmap, mlock), mode in cases.items():
        plan = build_argv(LaunchSettings(target=TARGET, mmap=mmap, mlock=mlock), ml)
        assert value_of(plan, "--load-mode") == mode
        bee_plan = build_argv(LaunchSettings(target=TARGET, mmap=mmap, mlock=mlock), bee)
        assert ("--no-mmap" in bee_plan.argv) == (not mmap) and ("--mlock" in bee_plan.argv) == mlock


# ------------------------------------------------------------------------------ spec modes


def test_copyspec_gets_min_draft_one_and_is_refused_where_missing(bee: EngineCaps, ml: EngineCaps) -> None:
    s = LaunchSettings(target=TARGET, spec_mode=Mode.MODEL_FREE, spec_model_free_type="copyspec")
    plan = build_argv(s, bee)
    assert value_of(plan, "--spec-type") == "copyspec" and value_of(plan, "--spec-draft-n-min") == "1"
    assert ArgNote in {type(n) for n in plan.notes} and kinds(plan)["draft_n_min"] == {"compensated"}
    s.draft_n_min = 2
    assert value_of(build_argv(s, bee), "--spec-draft-n-min") == "2"
    with pytest.raises(LaunchRefused, match="no N-gram speculation type 'copyspec'.*ngram-mod"):
        build_argv(s, ml)


def test_every_model_free_type_gets_min_draft_one_on_beellama_0_1(bee: EngineCaps, ml: EngineCaps) -> None:
    """BeeLlama 0.1-0.3 runs away on an empty draft at a minimum of 0 (tests/engine/test_toolcalls_generated_real.py
    found a generated tool call cut short); mainline keeps the engine's default."""
    for kind in ("ngram-simple", "ngram-cache", "suffix", "recycle"):
        s = LaunchSettings(target=TARGET, spec_mode=Mode.MODEL_FREE, spec_model_free_type=kind)
        plan = build_argv(s, bee)
        assert value_of(plan, "--spec-draft-n-min") == "1" and kinds(plan)["draft_n_min"] == {"compensated"}, kind
        s.draft_n_min = 3
        assert value_of(build_argv(s, bee), "--spec-draft-n-min") == "3"
    plan = build_argv(LaunchSettings(target=TARGET, spec_mode=Mode.MODEL_FREE, spec_model_free_type="ngram-simple"), ml)
    assert "--spec-draft-n-min" not in plan.argv and "draft_n_min" not in kinds(plan)


def test_ngram_mod_passes_no_draft(ml: EngineCaps) -> None:
    s = LaunchSettings(target=TARGET, draft=DRAFT, spec_mode=Mode.MODEL_FREE, draft_n_max=8)
    plan = build_argv(s, ml)
    assert value_of(plan, "--spec-type") == "ngram-mod" and value_of(plan, "--spec-draft-n-max") == "8"
    assert "--spec-draft-model" not in plan.argv and kinds(plan)["draft"] == {"info"}


def test_spec_off_with_a_draft_does_not_load_it(bee: EngineCaps) -> None:
    plan = build_argv(LaunchSettings(target=TARGET, draft=DRAFT), bee)
    assert "--spec-draft-model" not in plan.argv and "--spec-type" not in plan.argv


def test_dflash_refusals(bee: EngineCaps) -> None:
    with pytest.raises(LaunchRefused, match="DFlash needs a draft model"):
        build_argv(LaunchSettings(target=TARGET, spec_mode=Mode.DFLASH), bee)
    no_dflash = caps_from_texts(
        "old", "", help_stdout(MAINLINE).replace("draft-dflash,", "").replace("draft-dspark,", "")
    )
    with pytest.raises(LaunchRefused, match="no DFlash") as err:
        build_argv(LaunchSettings(target=TARGET, draft=DRAFT, spec_mode=Mode.DFLASH), no_dflash)
    assert "ngram-mod" in err.value.reasons[0]


# ------------------------------------------------------------------------- refusals and drops


def test_cache_types(bee: EngineCaps, ml: EngineCaps, bee_b: EngineCaps) -> None:
    s = LaunchSettings(target=TARGET, cache_type_k="turbo4", cache_type_v="turbo3_tcq", flash_attn="on")
    plan = build_argv(s, bee)
    assert value_of(plan, "--cache-type-k") == "turbo4" and value_of(plan, "--cache-type-v") == "turbo3_tcq"
    with pytest.raises(LaunchRefused) as err:
        build_argv(s, ml)
    assert len(err.value.reasons) == 2 and "Use q4_0 or q8_0" in err.value.reasons[0]
    # One refusal type: a code, the message, the remedy apart, and the field it is about (the form shows it there).
    first, second = err.value.refusals
    assert (first.code, first.setting, second.setting) == ("unsupported_cache_type", "cache_type_k", "cache_type_v")
    assert first.message == "KV cache type turbo4 is TurboQuant, which only BeeLlama <= 0.3 has."
    assert first.remedy == "Use q4_0 or q8_0." and err.value.failure.code == "unsupported_cache_type"
    with pytest.raises(LaunchRefused, match="KVarN"):
        build_argv(s, bee_b)
    with pytest.raises(LaunchRefused, match="Pick one of f32, f16, bf16, q8_0"):
        build_argv(LaunchSettings(target=TARGET, cache_type_k="q7_7"), ml)
    with pytest.raises(LaunchRefused, match="quantized V cache"):
        build_argv(LaunchSettings(target=TARGET, cache_type_v="q8_0", flash_attn="off"), ml)


def test_lan_needs_api_key_and_key_is_redacted(ml: EngineCaps) -> None:
    with pytest.raises(LaunchRefused, match="Exposing on the LAN needs an API key"):
        build_argv(LaunchSettings(target=TARGET, host="0.0.0.0"), ml)
    plan = build_argv(LaunchSettings(target=TARGET, host="0.0.0.0", api_key="s3cret", port=8910), ml)
    assert value_of(plan, "--api-key") == "s3cret" and value_of(plan, "--host") == "0.0.0.0"
    assert "s3cret" not in " ".join(plan.redacted_argv())
    assert "s3cret" not in plan.command_line("/bin/llama-server")
    assert "s3cret" in plan.command_line("/bin/llama-server", reveal_secrets=True)
    assert "api_key" not in LaunchSettings(api_key="s3cret").to_dict()
    # repr lands in logs, tracebacks and f-strings: it must not carry the key either.
    assert "s3cret" not in repr(LaunchSettings(api_key="s3cret")) and "s3cret" not in repr(plan)
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert (
        not is_loopback("192.168.1.5") and not is_loopback("127.0.0.1,0.0.0.0") and not is_loopback("myhost")
    )


def test_extra_args_checked_against_the_binary(bee: EngineCaps, ml: EngineCaps) -> None:
    s = LaunchSettings(target=TARGET, extra_args=["--swa-full", "--spec-draft-p-min", "0.0", "-lv", "4"])
    assert build_argv(s, ml).argv[-5:] == s.extra_args
    s.extra_args = ["--spec-dflash-cross-ctx", "512"]
    with pytest.raises(LaunchRefused, match="--spec-dflash-cross-ctx is not an option"):
        build_argv(s, ml)
    assert build_argv(s, bee).argv[-2:] == ["--spec-dflash-cross-ctx", "512"]


def test_missing_flags_are_dropped_with_notes(ml: EngineCaps) -> None:
    bare = EngineCaps(
        path="x",
        generation=ml.generation,
        flags=frozenset({"-m", "--port", "--host", "-np", "-ngl", "--ctx-size", "--flash-attn"}),
        flash_attn_values=("on", "off", "auto"),
    )
    plan = build_argv(LaunchSettings(target=TARGET, reasoning="off", temp=0.5, mmap=False), bare)
    assert plan.argv == [
        "-m",
        TARGET,
        "--host",
        "127.0.0.1",
        "--port",
        "0",
        "-np",
        "1",
        "-ngl",
        "all",
        "--ctx-size",
        "4096",
        "--flash-attn",
        "auto",
    ]
    assert {n.setting for n in plan.notes if n.kind == "dropped"} == {
        "alias",
        "jinja",
        "metrics",
        "log",
        "reasoning",
        "temp",
        "mmap",
    }


def test_gpu_layers_values(ml: EngineCaps) -> None:
    assert value_of(build_argv(LaunchSettings(target=TARGET, n_gpu_layers="0"), ml), "-ngl") == "0"
    with pytest.raises(LaunchRefused, match="GPU layers"):
        build_argv(LaunchSettings(target=TARGET, n_gpu_layers="most"), ml)
    numbers_only = EngineCaps(path="x", generation=ml.generation, flags=ml.flags, gpu_layers_values=("auto",))
    plan = build_argv(LaunchSettings(target=TARGET), numbers_only)
    assert value_of(plan, "-ngl") == "999" and kinds(plan)["n_gpu_layers"] == {"translated"}


def test_starter_like_settings(ml: EngineCaps) -> None:
    s = LaunchSettings(
        target=TARGET,
        n_gpu_layers="0",
        draft_n_gpu_layers=None,
        jinja=False,
        chat_template="gemma",
        port=8123,
    )
    plan = build_argv(s, ml)
    assert "--no-jinja" in plan.argv and value_of(plan, "--chat-template") == "gemma"
    assert value_of(plan, "--port") == "8123" and value_of(plan, "-np") == "1"


def test_no_target_is_refused(ml: EngineCaps) -> None:
    with pytest.raises(LaunchRefused, match="No target model"):
        build_argv(LaunchSettings(), ml)


def test_settings_round_trip() -> None:
    s = LaunchSettings.guide_dflash(TARGET, DRAFT)
    assert LaunchSettings.from_dict(s.to_dict()) == s


def test_redact_masks_both_spellings_of_the_key() -> None:
    from beedeck.core.engine.argv import redact

    argv = ["-m", "m.gguf", "--api-key", "k1", "--api-key=k2", "--port", "8080"]
    out = redact(argv)
    assert "k1" not in out and not any("k2" in a for a in out)
    assert out[:2] == ["-m", "m.gguf"] and out[-2:] == ["--port", "8080"]
    assert argv[3] == "k1"  # the input is left alone


def test_threads_become_dash_t_and_the_starter_leaves_a_core_free() -> None:
    from beedeck.core.starter import cpu_threads

    caps = caps_from_texts("/bin/ls", "version: 11434 (515e85511)\nbuilt with cc", help_stdout(MAINLINE))
    argv = build_argv(LaunchSettings(target="/m.gguf", threads=3), caps).argv
    assert argv[argv.index("-t") + 1] == "3"
    assert "-t" not in build_argv(LaunchSettings(target="/m.gguf"), caps).argv
    assert cpu_threads() >= 1


def test_the_draft_context_option_exists_only_on_gen_a(bee: EngineCaps, bee_b: EngineCaps) -> None:
    s = LaunchSettings.guide_dflash(TARGET, DRAFT)
    s.draft_ctx_size = 512
    plan = build_argv(s, bee)
    assert value_of(plan, "--spec-draft-ctx-size") == "512"
    plan = build_argv(s, bee_b)
    assert "--spec-draft-ctx-size" not in plan.argv and "-cd" not in plan.argv
    assert any(n.setting == "draft_ctx_size" and "as large as the target's" in n.message for n in plan.notes)


def test_cache_reuse_is_passed_where_the_engine_has_it(ml: EngineCaps) -> None:
    caps = ml
    assert "--cache-reuse" not in build_argv(LaunchSettings(target="/m/t.gguf"), caps).argv
    argv = build_argv(LaunchSettings(target="/m/t.gguf", cache_reuse=256), caps).argv
    assert argv[argv.index("--cache-reuse") + 1] == "256"
    bare = EngineCaps(path="x", generation=ml.generation, flags=frozenset({"-m", "--port", "--host"}))
    plan = build_argv(LaunchSettings(target="/m/t.gguf", cache_reuse=256), bare)
    assert "--cache-reuse" not in plan.argv and any(n.setting == "cache_reuse" for n in plan.notes)
    assert LaunchSettings(target="/m/t.gguf", cache_reuse=-1).check()  # out of range: named with its range


# --------------------------------------------------------------------------------- local means local


@pytest.mark.parametrize("engine", ["ml", "bee_b"])
def test_only_the_servers_own_origin_may_read_it_in_a_browser(engine: str, request: pytest.FixtureRequest) -> None:
    """llama-server reflects every origin with credentials by default: any web page could drive it."""
    caps = request.getfixturevalue(engine)
    s = LaunchSettings(target=TARGET, port=8477)
    argv = build_argv(s, caps).argv
    assert value_of(build_argv(s, caps), "--cors-origins") == "http://127.0.0.1:8477"
    assert "--no-cors-credentials" in argv
    s.host, s.api_key = "0.0.0.0", "k"
    assert value_of(build_argv(s, caps), "--cors-origins") == "http://127.0.0.1:8477"
    s.extra_args = ["--cors-origins", "https://my.tool.example"]  # the user's own choice wins
    assert build_argv(s, caps).argv.count("--cors-origins") == 1 and build_argv(s, caps).argv[-1] == "https://my.tool.example"


def test_an_engine_without_cors_origins_gets_none(bee: EngineCaps) -> None:
    """BeeLlama 0.1 has no such option: nothing is passed (the guard warns: cors-reflects-every-origin)."""
    argv = build_argv(LaunchSettings(target=TARGET), bee).argv
    assert not any(a.startswith("--cors") or a == "--no-cors-credentials" for a in argv)


@pytest.mark.parametrize(("host", "origin"), [
    ("127.0.0.1", "http://127.0.0.1:9"), ("::1", "http://[::1]:9"), ("localhost", "http://localhost:9"),
    ("0.0.0.0", "http://127.0.0.1:9"), ("::", "http://127.0.0.1:9"), ("/run/llama.sock", "http://127.0.0.1:9"),
    ("192.168.1.20,127.0.0.1", "http://192.168.1.20:9"),
])
def test_the_servers_own_origin(host: str, origin: str) -> None:
    assert own_origin(host, 9) == origin
