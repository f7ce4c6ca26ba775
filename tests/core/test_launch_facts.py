"""The launch form's facts without Qt: the headers through the one header cache (looked at once per path, a file
that is no GGUF named in the reader's words), the engine and its build options, the GPUs and the RAM, the RPC
check, and the preflight's verdict by field. Nothing is read by the object itself; a fact not in yet is absent,
never a placeholder."""

from __future__ import annotations

from pathlib import Path

from beedeck.core.engine.caps import EngineCaps
from beedeck.core.engine.help_text import caps_from_texts
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.mode import Mode
from beedeck.core.launch_facts import LaunchFacts
from beedeck.core.launcher import UNSET
from beedeck.core.models.gguf import reader as gguf
from beedeck.core.models.gguf.reader import ModelInfo
from beedeck.core.models.header_cache import HeaderCache
from tests.fixtures import meta_gguf as mg
from tests.fixtures.engines import MAINLINE, help_stdout

GiB = 1 << 30


def _caps(path: str = "/opt/ml/llama-server") -> EngineCaps:
    return caps_from_texts(path, "version: 11434 (515e85511)", help_stdout(MAINLINE))


def _look(facts: LaunchFacts, settings: LaunchSettings) -> list[str]:
    """What the form does off its GUI thread: look at each file not looked at yet, and keep what was found."""
    paths = facts.to_read(settings)
    for path in paths:
        facts.headers.store(path, facts.headers.reader(path)())
    return paths


def test_headers_come_through_the_one_cache_once_per_path_and_a_bad_file_is_named(tmp_path: Path) -> None:
    read: list[str] = []

    def inspect(path: str) -> ModelInfo:
        read.append(path)
        return gguf.inspect(path)

    target = mg.tiny_model(tmp_path / "t.gguf", n_embd=128)
    fake = tmp_path / "fake.gguf"
    fake.write_text("a text file renamed .gguf\n")
    facts = LaunchFacts(HeaderCache(inspect))
    facts.set_engine(_caps())
    s = LaunchSettings(target=str(target), draft=str(fake), spec_mode=Mode.DFLASH)
    assert facts.header(str(target)) is None and facts.reading(s)  # not looked at yet: absent, and said so
    assert facts.info(str(target)) is None and facts.plan(s) is None
    assert _look(facts, s) == [str(target), str(fake)] and read == [str(target), str(fake)]
    assert _look(facts, s) == [] and len(read) == 2  # a form asks on every edit: each path is looked at once
    assert not facts.reading(s) and facts.info(str(target)) is not None and facts.unreadable(s)
    header = facts.header(str(fake))
    assert header is not None and header.info is None and "fake.gguf" in header.error
    refusal = next(r for r in facts.check(s).refusals if r.setting == "draft")
    assert refusal.code == "not_gguf" and header.error in refusal.message  # the reader's own words
    assert facts.refused_fields["draft"] == str(refusal)
    plan = facts.plan(LaunchSettings(target=str(target)))
    assert plan is not None and plan.n_ctx > 0


def test_without_an_engine_the_first_reason_is_what_the_engine_is_doing(tmp_path: Path) -> None:
    facts = LaunchFacts()
    assert facts.set_engine(None, "/opt/x/llama-server", "Checking the engine (llama-server --help)…") is None
    checked = facts.check(LaunchSettings(target=str(mg.tiny_model(tmp_path / "t.gguf"))))
    assert checked.refusals[0].message == "Checking the engine (llama-server --help)…"
    assert facts.refusals == checked.refusals and facts.binary == "/opt/x/llama-server"
    facts.set_engine(None)
    assert facts.check(LaunchSettings()).refusals[0].message == "No engine is picked."


def test_build_options_are_judged_once_looked_up_and_a_stale_lookup_is_dropped(tmp_path: Path) -> None:
    facts = LaunchFacts()
    caps = _caps(str(tmp_path / "llama-server"))
    assert facts.set_engine(caps) == caps.path and facts.build_options is UNSET
    s = LaunchSettings(target=str(mg.tiny_model(tmp_path / "t.gguf")), cache_type_k="kvarn4", cache_type_v="kvarn4")
    _look(facts, s)
    assert not [r for r in facts.check(s).refusals if "without KVarN kernels" in r.message]  # judged once looked up
    assert not facts.build_options_found("/another/llama-server", ("-DGGML_CUDA_KVARN=OFF",))  # the engine changed
    assert facts.build_options is UNSET
    assert facts.build_options_found(caps.path, ("-DGGML_CUDA=ON", "-DGGML_CUDA_KVARN=OFF"))
    kernels = [r for r in facts.check(s).refusals if "without KVarN kernels" in r.message]
    assert kernels and kernels[0].code == "unsupported_cache_type" and kernels[0].setting == "cache_type_k"


def test_the_machines_memory_is_judged_as_the_launch_judges_it(tmp_path: Path) -> None:
    facts = LaunchFacts()
    facts.set_engine(_caps())
    s = LaunchSettings(target=str(mg.qwen36_27b(tmp_path / "q36.gguf")), ctx_size=8192, n_gpu_layers="0")
    _look(facts, s)
    assert not [r for r in facts.check(s).refusals if r.code == "out_of_memory"]  # the RAM is not known yet
    facts.devices, facts.host_ram = [], 4 * GiB
    ram = [r for r in facts.check(s).refusals if r.code == "out_of_memory"]
    assert ram and "of host memory (RAM)" in ram[0].message and facts.refused_fields["ctx_size"] == str(ram[0])
    facts.devices, facts.host_ram = [2 * GiB], 512 * GiB
    on_gpu = LaunchSettings(target=s.target, ctx_size=8192, n_gpu_layers="all", flash_attn="on")
    gpu = [r for r in facts.check(on_gpu).refusals if r.code == "out_of_memory"]
    assert gpu and "GiB free" in gpu[0].message and gpu[0].setting == "n_gpu_layers"
    plan = facts.plan(on_gpu)
    assert plan is not None and not plan.fits
