"""Log parsing against real captured logs and the exact strings the engines print (docs/reference/engine-facts.md §4)."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from beedeck.core.engine.argv import LaunchRefused
from beedeck.core.engine.logparse import (
    ServerFailure,
    as_failure,
    classify_failure,
    listening_port,
    parse_memory,
    strip_prefix,
    uses_amx,
)
from beedeck.core.engine.remote import KEY_WRONG, RemoteError

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "engines"
BEE_LOG = FIXTURES / "beellama-0.1-cuda.gemma3-270m.server.log"


def test_strip_prefix_handles_mainline_and_bee_styles() -> None:
    assert strip_prefix("0.02.345.678 I srv  llama_server: model loaded\n") == "srv  llama_server: model loaded"
    assert strip_prefix("12.00.001.002 E main: boom") == "main: boom"
    assert strip_prefix("main: model loaded") == "main: model loaded"
    assert strip_prefix("\x1b[31mW warn\x1b[0m") == "warn"
    assert strip_prefix("Is this kept") == "Is this kept"  # a level letter needs a space after it


def test_memory_from_real_beellama_cuda_log() -> None:
    rep = parse_memory(BEE_LOG.read_text().splitlines())
    cuda = rep.devices["CUDA0"]
    assert cuda.model_mib == pytest.approx(235.20)
    assert cuda.kv_mib == pytest.approx(12.00 + 15.00)  # non-SWA + SWA caches
    assert cuda.compute_mib == pytest.approx(513.25)
    assert rep.devices["CPU_Mapped"].model_mib == pytest.approx(170.00)
    assert rep.devices["CUDA_Host"].compute_mib == pytest.approx(12.52)
    row = rep.breakdown["CUDA0 (H200)"]  # the exit table (printed last) wins over the fit-time one
    assert (row.total_mib, row.free_mib, row.self_mib, row.model_mib, row.context_mib, row.compute_mib,
            row.unaccounted_mib) == (143155, 141765, 775, 235, 27, 513, 615)
    host = rep.breakdown["Host"]
    assert (host.self_mib, host.model_mib, host.compute_mib, host.total_mib) == (182, 170, 12, None)
    assert rep.n_ctx_slot == 4096


def test_memory_from_real_mainline_cpu_log() -> None:
    # Captured from the starter engine (mainline b11434, CPU) with -lv 4: without it mainline hides these lines.
    rep = parse_memory((FIXTURES / "mainline-b11434-cpu.gemma3-270m.lv4.server.log").read_text().splitlines())
    assert rep.devices["CPU_Mapped"].model_mib == pytest.approx(235.16)
    assert rep.devices["CPU_REPACK"].model_mib == pytest.approx(12.66)
    assert rep.devices["CPU"].kv_mib == pytest.approx(27.0)
    assert rep.devices["CPU"].compute_mib == pytest.approx(23.28)
    host = rep.breakdown["Host"]
    assert (host.self_mib, host.model_mib, host.context_mib, host.compute_mib) == (285, 235, 27, 23)
    assert rep.n_ctx_slot == 4096


def test_memory_with_mainline_prefixes() -> None:
    lines = [
        "0.00.100.000 I load_tensors:          CPU model buffer size =   235.16 MiB",
        "0.00.200.000 I llama_kv_cache:        CPU KV buffer size =    27.00 MiB",
        "0.00.300.000 I llama_context:        CPU compute buffer size =   519.00 MiB",
        "0.00.300.500 I llama_memory_recurrent:      CPU RS buffer size =     1.50 MiB",
        "0.00.400.000 I srv    load_model: initializing, n_slots = 1, n_ctx_slot = 4096, kv_unified = 'false'",
    ]
    rep = parse_memory(lines)
    cpu = rep.devices["CPU"]
    assert (cpu.model_mib, cpu.kv_mib, cpu.compute_mib, cpu.recurrent_mib) == (235.16, 27.0, 519.0, 1.5)
    assert cpu.total_mib == pytest.approx(782.66)
    assert rep.n_ctx_slot == 4096
    assert parse_memory(["nothing here"]).empty


@pytest.mark.parametrize(
    ("lines", "rc", "code", "needle"),
    [
        (["0.00.010.000 E srv         start: couldn't bind HTTP server socket, hostname: 127.0.0.1, port: 8080",
          "0.00.010.100 E srv  llama_server: exiting due to HTTP server error"], 1, "port_in_use", "127.0.0.1:8080"),
        (["E gguf_init_from_file: failed to open GGUF file '/m/x.gguf' (No such file or directory)",
          "E llama_model_load_from_file_impl: failed to load model"], 1, "model_missing", "/m/x.gguf"),
        (["srv    load_model: loading model '/m/junk.gguf'",
          "gguf_init_from_file_impl: invalid magic characters: 'junk', expected 'GGUF'",
          "llama_model_load_from_file_impl: failed to load model"], 1, "not_gguf", "/m/junk.gguf"),
        (["llama_model_load: error loading model: unknown model architecture: 'dflash-draft'",
          "srv    load_model: failed to load draft model, '/d.gguf'"], 1, "wrong_draft_format", "'dflash'"),
        (["llama_model_load: error loading model: error loading model architecture: unknown model architecture: "
          "'dflash'"], 1, "wrong_draft_format", "'dflash-draft'"),
        (["llama_model_load: error loading model: unknown model architecture: 'mamba9'"], 1,
         "unsupported_architecture", "mamba9"),
        (["ggml_backend_cuda_buffer_type_alloc_buffer: allocating 15632.11 MiB on device 0: cudaMalloc failed: "
          "out of memory", "llama_model_load: error loading model: unable to allocate CUDA0 buffer"], 1,
         "out_of_memory", "out of memory"),
        (["error: invalid argument: --mlock"], 1, "unknown_argument", "--mlock"),
        (['error while handling argument "--spec-type": unknown speculative decoding type: foo', "", "usage:"], 1,
         "bad_value", "--spec-type"),
        (["/src/llama-graph.cpp:1413: GGML_ASSERT(t_layer_inp[il] != nullptr && \"layer input tensor is null\") "
          "failed"], -signal.SIGABRT, "dflash_target_unsupported", "layer inputs"),
        (["/x/ggml.c:12: GGML_ASSERT(ne0 > 0) failed"], -signal.SIGABRT, "crashed_signal", "SIGABRT"),
        (["srv  update_slots: all slots are idle"], -signal.SIGKILL, "crashed_signal", "SIGKILL"),
        (["main: something odd"], 3, "exited", "status 3"),
    ],
)
def test_classify_failure(lines: list[str], rc: int, code: str, needle: str) -> None:
    f = classify_failure(lines, rc)
    assert f.code == code, f
    assert needle in f.message
    assert f.remedy  # every failure tells the user what to do
    assert f.exit_code == rc
    assert f.log_tail and f.log_tail[-1] == strip_prefix(lines[-1])


def test_listening_port() -> None:
    assert listening_port("0.00.5 I srv  llama_server: listening on http://127.0.0.1:41234") == 41234
    assert listening_port("main: server is listening on http://127.0.0.1:8910") == 8910
    assert listening_port("main: model loaded") is None


def test_memory_counts_each_buffer_once_when_a_request_reserves_again() -> None:
    # The starter engine serving the synthetic DFlash pair, then two requests: at load the target's compute
    # (21.02), the drafter's (9.01) and its second graph (9.01); the first request reserves the target's
    # graph again (22.02), which replaces a buffer already counted.
    lines = (FIXTURES / "mainline-b11434-cpu.synth-dflash.lv4.server.log").read_text().splitlines()
    assert any("compute buffer size =    22.02 MiB" in line for line in lines)  # the re-reservation is there
    rep = parse_memory(lines)
    cpu = rep.devices["CPU"]
    assert cpu.compute_mib == pytest.approx(21.02 + 9.01 + 9.01)
    assert cpu.kv_mib == pytest.approx(48.0 + 8.0)
    assert rep.devices["CPU_Mapped"].model_mib == pytest.approx(48.34 + 4.26)
    assert rep.breakdown["Host"].compute_mib == 22  # the exit table still reads the latest figures
    # the load log alone (a server that has answered nothing) gives the same figures
    ready = next(i for i, line in enumerate(lines) if line.endswith("model loaded"))
    assert parse_memory(lines[:ready + 1]).devices["CPU"].compute_mib == pytest.approx(cpu.compute_mib)


# Issue 25: BeeLlama v0.1.2 CUDA loading a fork-format (dflash-draft) Gemma-4 DFlash draft whose layers carry
# another norm name. The error line is the engine's own; the lines around it have the Gen A log's shape
# (beellama-0.1-cuda.gemma3-270m.server.log).
GEN_A_FORK_DRAFT = [
    "print_info: arch                  = gemma4",
    "load_tensors: offloaded 61/61 layers to GPU",
    "srv    load_model: loading draft model '/m/gemma-4-31B-it-DFlash-Q5_K_M.gguf'",
    "llama_model_loader: - kv   0:                       general.architecture str              = dflash-draft",
    "print_info: arch                  = dflash-draft",
    "llama_model_load: error loading model: missing tensor 'blk.0.post_attention_norm.weight'",
    "llama_model_load_from_file_impl: failed to load model",
    "srv    load_model: failed to load draft model, '/m/gemma-4-31B-it-DFlash-Q5_K_M.gguf'",
]


def test_a_draft_the_loader_rejects_is_a_layout_mismatch_not_a_bad_download() -> None:
    from beedeck.core.engine.caps import EngineCaps, Generation

    caps = EngineCaps(path="/e/llama-server", generation=Generation.BEE_A, release="v0.1.2", gpu_backend="cuda")
    f = classify_failure(GEN_A_FORK_DRAFT, 1, caps=caps)
    assert f.code == "wrong_draft_format" and f.issue == "draft-layout-mismatch", f
    assert f.message.startswith("This draft's layout is not what this engine's dflash-draft loader expects "
                                "(missing tensor 'blk.0.post_attention_norm.weight')")
    assert f.remedy.startswith("Use the draft made for BeeLlama 0.1-0.3 (v0.1.2)")
    assert "download it again" not in str(f)
    # Without the engine's capabilities the words stay right, only less specific.
    assert classify_failure(GEN_A_FORK_DRAFT, 1).remedy.startswith("Use the draft made for this engine")
    # A count or shape mismatch in the draft is the same story.
    shape = [*GEN_A_FORK_DRAFT[:5], "llama_model_load: error loading model: check_tensor_dims: tensor "
             "'dflash_fc.weight' has wrong shape; expected 16384, 5376, got 26880, 5376, 1, 1"]
    assert classify_failure(shape, 1, caps=caps).issue == "draft-layout-mismatch"


def test_a_target_the_loader_rejects_says_model_not_draft() -> None:
    lines = ["print_info: arch                  = gemma4",
             "llama_model_load: error loading model: missing tensor 'blk.0.attn_k_norm.weight'",
             "llama_model_load_from_file_impl: failed to load model"]
    f = classify_failure(lines, 1)
    assert f.code == "wrong_model_layout" and f.issue == "model-layout-mismatch", f
    assert f.message.startswith("This model's layout is not what this engine's gemma4 loader expects")
    assert "download it again" not in str(f) and "draft" not in f.message


def test_the_real_mainline_log_of_a_draft_of_another_layout(tmp_path: Path) -> None:
    # Mainline prints no "arch =" line at its default verbosity: the draft file's own header names the loader.
    import struct

    key, val = b"general.architecture", b"dflash"
    draft = tmp_path / "d.gguf"
    draft.write_bytes(struct.pack("<IIQQ", 0x46554747, 3, 0, 1) + struct.pack("<Q", len(key)) + key
                      + struct.pack("<I", 8) + struct.pack("<Q", len(val)) + val)
    text = (FIXTURES / "mainline-b11434-cpu.draft-layout.server.log").read_text()
    lines = text.replace("/tmp/beedeck-test/fork-layout-dflash.gguf", str(draft)).splitlines()
    f = classify_failure(lines, 1)
    assert f.issue == "draft-layout-mismatch" and f.message.startswith(
        "This draft's layout is not what this engine's dflash loader expects (tensor 'blk.0.ffn_norm.weight' not found)")
    # The file gone since: the words stay right, with the generic name for the loader.
    f = classify_failure(text.splitlines(), 1)
    assert f.issue == "draft-layout-mismatch" and "this engine's draft loader" in f.message


def test_every_failure_the_controller_reports_is_one_server_failure() -> None:
    same = ServerFailure("model_missing", "The model file does not exist.", "Pick it again.")
    assert as_failure(same) is same
    remote = as_failure(RemoteError(KEY_WRONG, "The server refused the API key (HTTP 401).", "Enter the key."))
    assert (remote.code, remote.message, remote.remedy) == ("remote:key-wrong", "The server refused the API key "
                                                             "(HTTP 401).", "Enter the key.")
    refused = as_failure(LaunchRefused(["No draft is set: pick one.", "ctx 0: set a context size."]))
    assert refused.message == "These settings cannot run on this engine."
    assert refused.remedy == "• No draft is set: pick one.\n• ctx 0: set a context size."
    plain = as_failure(RuntimeError("engine missing: install it"))
    assert (plain.code, plain.message, plain.remedy, str(plain)) == ("", "engine missing: install it", "",
                                                                     "engine missing: install it")


# Recorded on a VM whose CPU reports AMX: BeeLlama v0.1.2 built native (-march=native) by BeeDeck's builder, the
# starter model, -t 1 (SIGILL at tilezero) and -t 2 (SIGSEGV at ldtilecfg), both in warm-up.
AMX_SIGILL = FIXTURES / "beellama-0.1.2-cpu-native-amx.t1.sigill.server.log"
AMX_SIGSEGV = FIXTURES / "beellama-0.1.2-cpu-native-amx.t2.sigsegv.server.log"


def test_a_death_by_sigill_says_the_build_uses_instructions_this_machine_does_not_run() -> None:
    f = classify_failure(["main: loading model", "common_init_from_params: warming up the model"], -signal.SIGILL)
    assert f.code == "crashed_signal"
    assert f.message == "llama-server crashed with SIGILL: this build uses CPU instructions this machine does not run."
    assert f.remedy == ("Rebuild it portable (`beedeck engine build --no-native`) or download the portable build "
                        "(`beedeck engine download`).")


def test_the_real_amx_crashes_name_the_amx_code_whatever_the_signal() -> None:
    lines = AMX_SIGILL.read_text().splitlines()
    assert uses_amx(lines) and not uses_amx([x for x in lines if "AMX" not in x or "system_info" in x])
    ill = classify_failure(lines, -signal.SIGILL)
    assert ill.message == ("llama-server crashed with SIGILL: this build uses CPU instructions this machine does not "
                           "run (its AMX matrix code: its log shows an AMX buffer).")
    segv = classify_failure(AMX_SIGSEGV.read_text().splitlines(), -signal.SIGSEGV)
    assert segv.code == "crashed_signal" and "SIGSEGV" in segv.message
    assert "while running AMX matrix code (its log shows an AMX buffer)" in segv.message
    assert "`beedeck engine build --no-native`" in segv.remedy
    # A SIGSEGV without AMX stays a plain crash.
    plain = classify_failure(["main: loading model"], -signal.SIGSEGV)
    assert plain.message == "llama-server crashed with SIGSEGV." and "AMX" not in plain.remedy
