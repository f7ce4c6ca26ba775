"""cure: which rebuild cures a build whose CPU code crashed in the smoke test's generation (pure)."""

from __future__ import annotations

import signal
from pathlib import Path

from beedeck.core.engine.building.builder import scan_source_options
from beedeck.core.engine.building.cure import (
    cpu_flags,
    cure_for,
    option_value,
    portable,
    with_option,
    without_amx,
)

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures"
# BeeLlama v0.1.2's ggml options (the tree kept for the builder's tests): the instruction sets it can name.
GEN_A = scan_source_options(FIXTURES / "builds" / "trees" / "beellama-v0.1.2")
# This VM's /proc/cpuinfo flags line (a Xeon reporting AMX), shortened to what matters here.
AMX_HOST = ("flags\t\t: fpu sse sse2 ssse3 fma sse4_1 sse4_2 avx f16c bmi2 avx2 avx512f avx512dq avx512cd avx512bw "
            "avx512vl avx512vbmi avx512_vnni avx512_bf16 avx_vnni amx_bf16 amx_tile amx_int8 hypervisor\n")
NATIVE = ["-DGGML_CUDA=OFF", "-DGGML_NATIVE=ON", "-DCMAKE_BUILD_TYPE=Release", "-DLLAMA_BUILD_WEBUI=OFF"]
ILL, SEGV = int(signal.SIGILL), int(signal.SIGSEGV)


def test_cpu_flags_reads_the_flags_line_and_nothing_elsewhere() -> None:
    flags = cpu_flags("processor\t: 0\nmodel name\t: Intel(R) Xeon(R) Processor\n" + AMX_HOST + "flags\t: other\n")
    assert {"amx_int8", "avx512f", "avx2"} <= flags and "other" not in flags  # the first CPU's line
    assert cpu_flags("processor\t: 0\n") == frozenset()


def test_with_option_replaces_in_place_removes_and_appends() -> None:
    opts = ["-DA=1", "-DGGML_NATIVE=ON", "-DB=2", "-DGGML_NATIVE=ON"]
    assert with_option(opts, "GGML_NATIVE", "OFF") == ["-DA=1", "-DGGML_NATIVE=OFF", "-DB=2"]
    assert with_option(opts, "GGML_NATIVE", None) == ["-DA=1", "-DB=2"]
    assert with_option(["-DA=1"], "GGML_AVX2", "ON") == ["-DA=1", "-DGGML_AVX2=ON"]
    assert option_value(["-DX=1", "-DX=2"], "X") == "2" and option_value([], "X") is None


def test_an_amx_crash_keeps_this_cpus_other_instructions_and_turns_every_amx_option_off() -> None:
    cure = cure_for(NATIVE, sig=ILL, amx=True, flags=cpu_flags(AMX_HOST), known=GEN_A)
    assert cure is not None and cure.label == "without AMX"
    assert option_value(cure.options, "GGML_NATIVE") == "OFF"
    for name in ("GGML_AVX2", "GGML_FMA", "GGML_F16C", "GGML_BMI2", "GGML_AVX_VNNI", "GGML_AVX512", "GGML_AVX512_VBMI",
                 "GGML_AVX512_VNNI", "GGML_AVX512_BF16"):
        assert option_value(cure.options, name) == "ON", name
    assert all(option_value(cure.options, a) == "OFF" for a in ("GGML_AMX_TILE", "GGML_AMX_INT8", "GGML_AMX_BF16"))
    assert "-DLLAMA_BUILD_WEBUI=OFF" in cure.options  # what else was asked stays
    assert "AMX matrix code crashed (SIGILL)" in cure.reason and "AVX512_BF16" in cure.reason
    # With more threads the same fault is a SIGSEGV (ldtilecfg on a config of stack garbage): the same cure.
    segv = cure_for(NATIVE, sig=SEGV, amx=True, flags=cpu_flags(AMX_HOST), known=GEN_A)
    assert segv is not None and segv.options == cure.options and "(SIGSEGV)" in segv.reason


def test_an_instruction_set_the_cpu_lacks_is_turned_off_not_guessed() -> None:
    no_512 = cpu_flags("flags : sse4_2 avx avx2 fma f16c bmi2 amx_int8\n")
    opts = without_amx(NATIVE, no_512, GEN_A)
    assert opts is not None and option_value(opts, "GGML_AVX2") == "ON"
    assert option_value(opts, "GGML_AVX512") == "OFF" and option_value(opts, "GGML_AVX512_VNNI") == "OFF"
    # avx512f alone is not GGML_AVX512: ggml adds -mavx512cd/vl/dq/bw with it.
    partial = cpu_flags("flags : avx2 avx512f\n")
    assert option_value(without_amx(NATIVE, partial, GEN_A) or [], "GGML_AVX512") == "OFF"


def test_without_cpuinfo_or_the_trees_options_an_amx_crash_goes_portable() -> None:
    cure = cure_for(NATIVE, sig=ILL, amx=True, flags=frozenset(), known=GEN_A)
    assert cure is not None and cure.label == "portable" and cure.options == portable(NATIVE)
    old_tree = cure_for(NATIVE, sig=ILL, amx=True, flags=cpu_flags(AMX_HOST), known={"GGML_NATIVE"})
    assert old_tree is not None and old_tree.label == "portable"


def test_a_sigill_outside_amx_goes_portable_and_the_baseline_has_no_cure() -> None:
    cure = cure_for(NATIVE, sig=ILL, amx=False, flags=cpu_flags(AMX_HOST), known=GEN_A)
    assert cure is not None and cure.label == "portable"
    assert option_value(cure.options, "GGML_NATIVE") == "OFF" and "CPU instructions this machine does not run" in cure.reason
    # The "without AMX" rebuild still crashing by SIGILL: portable drops the instruction sets it named.
    named = without_amx(NATIVE, cpu_flags(AMX_HOST), GEN_A) or []
    again = cure_for(named, sig=ILL, amx=False, flags=cpu_flags(AMX_HOST), known=GEN_A)
    assert again is not None and again.options == portable(NATIVE)
    assert not any(o.startswith(("-DGGML_AVX", "-DGGML_AMX")) for o in again.options)
    assert cure_for(portable(NATIVE), sig=ILL, amx=False, flags=cpu_flags(AMX_HOST), known=GEN_A) is None


def test_other_deaths_are_no_cpu_fault() -> None:
    assert cure_for(NATIVE, sig=SEGV, amx=False, flags=cpu_flags(AMX_HOST), known=GEN_A) is None  # a plain bug
    assert cure_for(NATIVE, sig=None, amx=True, flags=cpu_flags(AMX_HOST), known=GEN_A) is None  # no crash at all
    assert cure_for(NATIVE, sig=int(signal.SIGKILL), amx=True, flags=cpu_flags(AMX_HOST), known=GEN_A) is None
