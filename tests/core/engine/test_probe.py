"""Engine probe: parsing the real help texts, and the error paths with small real executables."""

from __future__ import annotations

import json
import os
import stat
import time
from pathlib import Path

import pytest

from beedeck.core import paths
from beedeck.core.engine.caps import EngineCaps, Generation, ProbeError
from beedeck.core.engine.help_text import caps_from_texts, parse_devices, parse_help, parse_version
from beedeck.core.engine.probe import clear_probe_cache, probe_engine
from tests.fixtures.engines import BEE_A, BEE_B, MAINLINE, help_stdout

STANDARD_TYPES = ("f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1")
TURBO = ("turbo2", "turbo3", "turbo4", "turbo3_tcq", "turbo2_tcq")


def bee_caps() -> EngineCaps:
    return caps_from_texts("bee", "version: 1 (ba1fdce)\nbuilt with cc for x86_64", help_stdout(BEE_A))


def ml_caps() -> EngineCaps:
    version = "version: 0.6.0-dev (build 11434, commit 515e85511)\nbuilt with GNU 12.2.0 for Linux x86_64"
    return caps_from_texts("ml", version, help_stdout(MAINLINE), "Available devices:\n  (none)\n")


def test_bee_a_fixture_is_generation_a_with_turbo_and_fork_dflash() -> None:
    caps = bee_caps()
    assert caps.generation == Generation.BEE_A
    assert caps.spec_types == (
        "none",
        "ngram-cache",
        "ngram-simple",
        "ngram-map-k",
        "ngram-map-k4v",
        "ngram-mod",
        "suffix",
        "copyspec",
        "recycle",
        "dflash",
    )
    assert caps.dflash_spec_type == "dflash" and caps.dflash_draft_arch == "dflash-draft"
    assert caps.cache_types == STANDARD_TYPES + TURBO  # the allowed-values line wraps onto a second line
    assert caps.has_turbo and not caps.has_kvarn
    assert caps.flash_attn_values == ("on", "off", "auto")
    assert caps.gpu_layers_values == ("auto", "all")
    for flag in (
        "--no-mmap",
        "--mlock",
        "-no-kvu",
        "--no-kv-unified",
        "--spec-dflash-cross-ctx",
        "-cd",
        "--spec-dm-adaptive",
        "--no-spec-dm-adaptive",
        "-ngl",
        "--n-gpu-layers",
        "--jinja",
        "--no-jinja",
    ):
        assert caps.has(flag), flag
    assert not caps.has("--load-mode") and not caps.has("--no-log-prefix")
    assert caps.defaults["--spec-draft-n-max"] == "16"
    assert caps.defaults["--cache-type-k"] == "f16"
    assert caps.defaults["--flash-attn"] == "auto"
    assert caps.defaults["--spec-dm-controller"] == "profit"
    assert "copyspec" in caps.model_free_spec_types and "dflash" not in caps.model_free_spec_types
    assert caps.build == 1 and caps.commit == "ba1fdce"


def test_mainline_fixture_is_mainline_with_draft_dflash_and_load_mode() -> None:
    caps = ml_caps()
    assert caps.generation == Generation.MAINLINE
    assert "draft-dflash" in caps.spec_types and "dflash" not in caps.spec_types
    assert caps.dflash_spec_type == "draft-dflash" and caps.dflash_draft_arch == "dflash"
    assert caps.cache_types == STANDARD_TYPES
    assert caps.load_modes == ("auto", "none", "mmap", "mlock", "mmap+mlock", "dio")
    assert not caps.has("--mlock") and not caps.has("--no-mmap") and not caps.has("--spec-dflash-cross-ctx")
    assert caps.has("--no-log-prefix") and caps.has("--log-timestamps")
    assert caps.defaults["--spec-draft-n-max"] == "3"
    assert (caps.version, caps.build, caps.commit) == ("0.6.0-dev", 11434, "515e85511")
    assert caps.built_with == "GNU 12.2.0 for Linux x86_64"
    assert caps.gpu_backend == "cpu" and caps.devices == ()


def test_real_gen_b_text_is_generation_b() -> None:
    # Captured from BeeLlama v0.4.3 built by BeeDeck's builder (tests/fixtures/engines/README.md).
    caps = caps_from_texts("b", "version: 0 (unknown)\nbuilt with GNU 12.2.0 for Linux x86_64", help_stdout(BEE_B))
    assert caps.generation == Generation.BEE_B
    assert caps.dflash_spec_type == "draft-dflash" and caps.has_kvarn and not caps.has_turbo
    assert "kvarn4" in caps.cache_types and "q6_0" in caps.cache_types and "turbo4" not in caps.cache_types
    assert "draft-mtp" in caps.spec_types and "copyspec" not in caps.spec_types
    assert caps.has("--spec-dm-controller") and caps.has("--kv-tail-tokens") and caps.has("--load-mode")
    assert not caps.has("--spec-draft-ctx-size") and not caps.has("--spec-dflash-cross-ctx")
    assert caps.defaults["--spec-draft-n-max"] == "3"


def test_every_option_line_yields_clean_names() -> None:
    for name in (BEE_A, MAINLINE):
        options = parse_help(help_stdout(name))
        assert len(options) > 200
        for opt in options:
            for n in opt.names:
                assert n.startswith("-") and " " not in n and "," not in n, (name, opt)
    by_first = {o.names[0]: o for o in parse_help(help_stdout(BEE_A))}
    long_line = by_first["--spec-draft-ngl"]  # names+hint longer than 37 chars: the line breaks
    assert long_line.names == ("--spec-draft-ngl", "-ngld", "--gpu-layers-draft", "--n-gpu-layers-draft")
    assert long_line.hint == "N" and "'auto', or 'all'" in long_line.help
    assert by_first["-sm"].hint == "{none,layer,row,tensor}"


def test_version_forms() -> None:
    assert parse_version("version: 0.6.0-dev (build 11434, commit 515e85511)\nbuilt with x for y") == (
        "0.6.0-dev",
        11434,
        "515e85511",
        "x for y",
    )
    assert parse_version("ggml_cuda_init: ...\nversion: 8123 (abcdef1)\n") == ("8123", 8123, "abcdef1", "")
    assert parse_version("garbage") == ("", None, "", "")
    # BeeLlama >= 0.4.5 (field notes §1): "0.4.5-dev build 213", where v0.4.3 printed "version: 11207 (ba27edad2)"
    assert parse_version("0.4.5-dev build 213\nbuilt with cc for x86_64") == ("0.4.5-dev", 213, "", "cc for x86_64")
    assert parse_version("version: 0.4.7 build 240 (1156b183)") == ("0.4.7", 240, "1156b183", "")
    assert parse_version("version: 11207 (ba27edad2)") == ("11207", 11207, "ba27edad2", "")


def test_device_list_forms() -> None:
    cuda = "Available devices:\n  CUDA0: NVIDIA GeForce RTX 3090 (24575 MiB, 23000 MiB free)\n"
    assert parse_devices(cuda) == (("CUDA0: NVIDIA GeForce RTX 3090 (24575 MiB, 23000 MiB free)",), "cuda")
    assert parse_devices("Available devices:\n  (none)\n") == ((), "cpu")
    assert parse_devices("") == ((), "")


def test_caps_round_trip_through_json() -> None:
    caps = bee_caps()
    again = EngineCaps.from_dict(json.loads(json.dumps(caps.to_dict())))
    assert again == caps


# ------------------------------------------------------------------ error paths with real programs


def _script(tmp_path: Path, name: str, body: str) -> Path:
    path = tmp_path / name
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_missing_file_and_folder_and_not_executable(tmp_path: Path) -> None:
    with pytest.raises(ProbeError, match="does not exist"):
        probe_engine(str(tmp_path / "nope"))
    with pytest.raises(ProbeError, match="is a folder"):
        probe_engine(str(tmp_path))
    plain = tmp_path / "llama-server"
    plain.write_text("#!/bin/sh\n")
    with pytest.raises(ProbeError, match="chmod \\+x"):
        probe_engine(str(plain))


def test_true_and_garbage_are_not_llama_server(tmp_path: Path) -> None:
    with pytest.raises(ProbeError, match="not llama-server: its --help prints no llama.cpp option table"):
        probe_engine("/bin/true")
    garbage = _script(tmp_path, "garbage", "echo 'hello there'; echo '-- not an option table'; echo '-x'")
    with pytest.raises(ProbeError, match="not llama-server"):
        probe_engine(str(garbage))


def test_other_llama_tool_is_named_as_such(tmp_path: Path) -> None:
    # A llama.cpp tool with an option table but no server options (like llama-cli).
    tool = _script(tmp_path, "llama-cli", "printf -- '-m,    --model FNAME                    model path\\n'")
    with pytest.raises(ProbeError, match="a llama.cpp tool but not llama-server"):
        probe_engine(str(tool))


def test_hang_is_killed_within_the_limit(tmp_path: Path) -> None:
    # The child also starts a grandchild; killing the process group must take both down.
    pidfile = tmp_path / "child.pid"
    hang = _script(tmp_path, "hang", f"sleep 1000 & echo $! > {pidfile}; wait")
    start = time.monotonic()
    with pytest.raises(ProbeError, match="did not finish within 1 s.*killed its process group"):
        probe_engine(str(hang), timeout=1.0)
    assert time.monotonic() - start < 5
    grandchild = int(pidfile.read_text())
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:  # the kernel reaps the orphan shortly after SIGKILL
        try:
            os.kill(grandchild, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:
        pytest.fail("the grandchild survived the process-group kill")


def test_crash_reports_status_and_stderr_tail(tmp_path: Path) -> None:
    crash = _script(
        tmp_path,
        "crash",
        "echo './llama-server: error while loading shared libraries: libllama.so: cannot open' >&2; exit 127",
    )
    with pytest.raises(ProbeError) as err:
        probe_engine(str(crash))
    text = str(err.value)
    assert "exited with status 127" in text and "libllama.so" in text and "shared libraries" in text
    killed = _script(tmp_path, "segv", "kill -SEGV $$")
    with pytest.raises(ProbeError, match="killed by signal SIGSEGV"):
        probe_engine(str(killed))


def _fake_engine(tmp_path: Path, counter: Path) -> Path:
    """A script that answers like the real mainline engine (its real --help text) and counts its runs."""
    help_file = tmp_path / "help.txt"
    help_file.write_text(help_stdout(MAINLINE))
    return _script(
        tmp_path,
        "llama-server",
        f"echo run >> {counter}\n"
        f'case "$1" in\n'
        f"  --help) cat {help_file} ;;\n"
        f'  --version) echo "version: 0.6.0-dev (build 11434, commit 515e85511)" >&2 ;;\n'
        f'  --list-devices) printf "Available devices:\\n  (none)\\n" ;;\n'
        f"esac",
    )


def test_cache_memory_disk_and_invalidation(tmp_path: Path) -> None:
    counter = tmp_path / "runs"
    engine = _fake_engine(tmp_path, counter)
    first = probe_engine(str(engine))
    runs_after_first = len(counter.read_text().splitlines())
    assert runs_after_first == 3 and first.generation == Generation.MAINLINE
    assert probe_engine(str(engine)) == first
    assert len(counter.read_text().splitlines()) == 3  # memory hit
    clear_probe_cache(disk=False)
    assert probe_engine(str(engine)) == first
    assert len(counter.read_text().splitlines()) == 3  # disk hit
    cache_files = list((paths.cache_dir() / "probe").glob("*.json"))
    assert len(cache_files) == 1
    cache_files[0].write_text("{not json")  # corrupt: ignored, probed again, rewritten
    clear_probe_cache(disk=False)
    assert probe_engine(str(engine)) == first
    assert len(counter.read_text().splitlines()) == 6
    json.loads(cache_files[0].read_text())
    # A changed binary (new mtime) is probed again.
    st = engine.stat()
    os.utime(engine, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    probe_engine(str(engine))
    assert len(counter.read_text().splitlines()) == 9


def test_cached_caps_carry_the_path_asked_for(tmp_path: Path) -> None:
    engine = _fake_engine(tmp_path, tmp_path / "runs")
    link = tmp_path / "link-to-server"
    link.symlink_to(engine)
    assert probe_engine(str(engine)).path == str(engine)
    assert probe_engine(str(link)).path == str(link)
    assert len((tmp_path / "runs").read_text().splitlines()) == 3


# ------------------------------------------------------------------------------------------ CLI


def test_cli_probe_human_json_and_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from beedeck.cli import main

    engine = _fake_engine(tmp_path, tmp_path / "runs")
    assert main(["engine", "probe", str(engine)]) == 0
    out = capsys.readouterr().out
    assert "generation:  mainline llama.cpp" in out and "--spec-type draft-dflash" in out
    assert "0.6.0-dev (build 11434, commit 515e85511)" in out and "none (CPU only)" in out
    assert main(["engine", "probe", str(engine), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["generation"] == "mainline" and data["dflash_spec_type"] == "draft-dflash"
    assert main(["engine", "probe", "/bin/true"]) == 1
    assert "not llama-server" in capsys.readouterr().err


def test_cli_argv_prints_the_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from beedeck.cli import main

    engine = _fake_engine(tmp_path, tmp_path / "runs")
    code = main(
        [
            "engine",
            "argv",
            "--engine",
            str(engine),
            "--target",
            "/m/t.gguf",
            "--draft",
            "/m/d.gguf",
            "--preset",
            "guide-dflash",
            "--port",
            "8910",
        ]
    )
    captured = capsys.readouterr()
    assert code == 0
    assert captured.out.startswith(
        f"{engine} -m /m/t.gguf --spec-draft-model /m/d.gguf --spec-type draft-dflash"
    )
    assert "--load-mode mlock" in captured.out and "translated" in captured.err
    assert main(["engine", "argv", "--engine", str(engine), "--target", "/m/t.gguf", "--spec", "dflash"]) == 1
    assert "DFlash needs a draft model" in capsys.readouterr().err
