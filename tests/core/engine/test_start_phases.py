"""Where a start's seconds go (core/engine/start_phases.py), read from real engine logs: the starter engine
(mainline b11434) at ``-lv 4`` with the synthetic DFlash pair on this CPU, and BeeLlama v0.4.3 CUDA at the
default verbosity on an H200 (docs/gpu-runs/2026-12-02-h200-standby: a switch to DFlash)."""

from __future__ import annotations

import pytest

from beedeck.core.engine.start_phases import engine_seconds, start_phases

MAINLINE_LV4 = """\
0.00.001.887 I srv  llama_server: initializing ...
0.00.005.581 I srv    load_model: loading model '/m/synth-target-sticky.gguf'
0.00.005.634 I cmn  common_init_: fitting params to device memory ...
0.00.009.683 I common_fit_params: fitting params to free memory took 0.00 seconds
0.00.009.874 I llama_model_loader: loaded meta data with 23 key-value pairs and 56 tensors from /m/t.gguf
0.00.010.660 I load_tensors: loading model tensors, this can take a while... (load_mode = mmap)
0.00.011.466 I load_tensors:   CPU_Mapped model buffer size =     1.96 MiB
0.00.011.712 I llama_context: constructing llama_context
0.00.018.765 I cmn          init: llama threadpool init, n_threads = 1
0.00.018.799 I cmn  common_init_: warming up the model with an empty run - please wait ... (--no-warmup to disable)
0.00.021.284 I common_speculative_init_result: loading draft model '/m/synth-dflash.gguf'
0.00.021.432 I llama_model_loader: loaded meta data with 28 key-value pairs and 14 tensors from /m/d.gguf
0.00.022.312 I load_tensors: loading model tensors, this can take a while... (load_mode = mmap)
0.00.022.538 I llama_context: constructing llama_context
0.00.026.545 I srv    load_model: initializing, n_slots = 1, n_ctx_slot = 4096, kv_unified = 'false'
0.00.031.321 I srv  llama_server: model loaded
0.00.031.333 I srv  llama_server: listening on http://127.0.0.1:18620
0.00.051.000 I slot get_availabl: id  0 | task -1 | selected slot by LRU, t_last = -1
""".splitlines()

GENB_CUDA = """\
0.00.099.626 I cmn  common_param: common_params_print_info: verbosity = 3 (adjust with the `-lv N` CLI arg)
0.00.207.602 I srv    load_model: loading model '/tmp/beedeck-gpu/meta/gemma-4-31B-it-Q4_K_M.gguf'
0.00.343.489 W load: SPM vocabulary, but newline token not found: unordered_map::at! Using special_pad_id instead.
0.02.704.291 I common_speculative_init_result: loading draft model '/tmp/beedeck-gpu/meta/gemma4-draft.gguf'
0.03.149.744 I srv    load_model: initializing, n_slots = 1, n_ctx_slot = 32768, kv_unified = 'true'
0.03.151.233 I srv  llama_server: model loaded
0.03.151.240 I srv  llama_server: listening on http://127.0.0.1:34359
""".splitlines()


def test_the_engine_clock_reads_minutes_seconds_and_fractions() -> None:
    assert engine_seconds("1.02.704.291 I srv x") == pytest.approx(62.704291)
    assert engine_seconds("srv  load_model: no stamp") is None


def test_a_verbose_mainline_start_splits_into_every_phase_the_draft_after_the_targets_warm_up() -> None:
    p = start_phases(MAINLINE_LV4)
    assert [n for n, _ in p.phases] == ["load", "fit pass", "header and mapping", "weights to the device",
                                        "context (KV cache, graph reserve)", "warm-up", "draft load", "slots"]
    assert p.seconds("fit pass") == pytest.approx(0.009874 - 0.005634)
    assert p.seconds("weights to the device") == pytest.approx(0.011712 - 0.010660)  # the target's, not the draft's
    assert p.seconds("warm-up") == pytest.approx(0.021284 - 0.018765)
    assert p.seconds("draft load") == pytest.approx(0.026545 - 0.021284)
    assert p.listening_s == pytest.approx(0.031333) and sum(s for _, s in p.phases) == pytest.approx(0.031333 - 0.005581)
    assert p.before_log_s is None and p.after_listening_s is None  # no BeeDeck clock given


def test_a_default_verbosity_cuda_start_is_load_then_draft_then_slots_and_beedeck_clocks_the_rest() -> None:
    arrivals = [10.0 + i * 0.001 for i in range(len(GENB_CUDA))]
    arrivals[-1] = 13.2  # "listening" arrived at 13.2 on BeeDeck's clock
    p = start_phases(GENB_CUDA, arrivals, spawned=9.8, ready=13.25)
    assert [(n, round(s, 3)) for n, s in p.phases] == [("load", 2.497), ("draft load", 0.445), ("slots", 0.001)]
    assert p.before_log_s == pytest.approx(10.0 - 9.8 - 0.099626)  # exec, libraries, CUDA's init before the log
    assert p.after_listening_s == pytest.approx(0.05)
    assert p.text().startswith("before the first log line 0.10 s, load 2.50 s, draft load 0.45 s")
    assert p.as_dict()["listening to ready"] == 0.05
