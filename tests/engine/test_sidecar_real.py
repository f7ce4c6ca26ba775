"""A real ``mtp-`` sidecar on the CPU mainline llama-server (the starter's b11434): the MTP head alone,
next to a target without heads, is what BeeDeck's library finds and offers for mainline, and the
engine runs it as ``--spec-draft-model mtp-... --spec-type draft-mtp`` (one server start, its command
line from BeeDeck's own ``settings_for_mode`` + ``build_argv``).

The target is synth_mtp.py's sticky ``qwen35`` trunk without its MTP block; the sidecar is the MTP
block of the same sticky model without the trunk (tests/core/models/sidecar_files.py), so every
drafted token must be accepted and the reply is " bee bee ...".
"""

from __future__ import annotations

from pathlib import Path

import pytest

from beedeck.core.engine.argv import build_argv
from beedeck.core.engine.caps import EngineCaps
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.mode import Mode
from beedeck.core.engine.speculation.modes import settings_for_mode
from beedeck.core.models import library
from beedeck.core.models.paircheck import model_facts, modes_for, read_infos
from tests.core.models import sidecar_files as sf
from tests.fixtures import synth_mtp as sm
from tests.fixtures.llama_server import free_port, post_chat, serving

pytestmark = pytest.mark.engine

N_TOKENS = 48


def test_the_mtp_sidecar_beedeck_offers_runs_on_mainline(tmp_path: Path, starter_engine_path: Path,
                                                         starter_caps: EngineCaps) -> None:
    folder = tmp_path / "Qwen-GGUF"
    folder.mkdir()
    raw = sm.write_mtp_target(tmp_path / "raw.gguf", sticky=True, mtp=False)
    target = sf.rewrite(raw, folder / "Qwen-Q4_K_M.gguf", kv={"general.file_type": sf.Q4_K_M})
    head = sf.mtp_head(folder, "mtp-Qwen-Q4_K_M.gguf")

    t = next(m for m in library.scan([tmp_path]) if m.path == target)
    assert t.mtp_heads == 0 and [s.path for s in t.sidecars] == [head]
    side = t.best_sidecar("mainline")
    assert side is not None and side.kind == "mtp" and side.path == head and not side.warnings
    assert side.reason_on(starter_caps) == ""  # the probed starter engine runs it

    # BeeDeck's own path: the head file as the draft, its headers read, MTP offered for a target without
    # heads, and the settings for MTP turned into argv by build_argv (the head passed as the draft model).
    port = free_port()
    profile = LaunchSettings(target=str(target), draft=str(side.path), ctx_size=4096, parallel=1, threads=1,
                             port=port, extra_args=["-tb", "1"])
    infos = read_infos(profile)
    assert Mode.MTP in [o.key for o in modes_for(starter_caps, profile, *infos) if o.available]
    settings = settings_for_mode(profile, Mode.MTP, starter_caps, model_facts(*infos))
    plan = build_argv(settings, starter_caps)
    i = plan.argv.index("--spec-draft-model")
    assert plan.argv[i:i + 4] == ["--spec-draft-model", str(head), "--spec-type", "draft-mtp"], plan.argv
    log = tmp_path / "server.log"
    with serving(starter_engine_path, plan.argv, port, log) as server:
        reply = post_chat(server, {"messages": [{"role": "user", "content": "say hello"}], "max_tokens": N_TOKENS,
                                   "temperature": 0})
    timings = reply["timings"]
    assert isinstance(timings, dict)
    text = reply["choices"][0]["message"]["content"]
    assert text == " bee" * N_TOKENS
    assert timings["draft_n"] > 0 and timings["draft_n_accepted"] == timings["draft_n"], timings
    logged = log.read_text(errors="replace")
    assert f"loading draft model '{head}'" in logged and "draft acceptance = 1.00000" in logged
