"""A draft whose tensor list the engine's loader rejects: the real mainline engine on a ``dflash`` draft that
carries the fork's ``post_attention_norm`` where mainline's loader wants ``ffn_norm`` (the mirror image of
issue 25's fork-format draft on BeeLlama v0.1.2). BeeDeck says the layout is wrong and names the draft to
use, not "download it again": the file is whole."""

from __future__ import annotations

from pathlib import Path

import pytest

from beedeck.core.engine.mode import Mode
from beedeck.core.engine.server import ServerFailed
from tests.conftest import PERSISTENT
from tests.fixtures import synth_gguf as sg

from .conftest import StartServer

pytestmark = pytest.mark.engine


def test_a_draft_of_another_layout_names_the_loader_and_the_draft_to_use(start_server: StartServer,
                                                                        tmp_path: Path) -> None:
    target = sg.cached_target(PERSISTENT / "synth", sticky=True)
    draft = sg.write_dflash_draft(tmp_path / "fork-layout-dflash.gguf", target, sticky=True,
                                  post_norm="post_attention_norm")
    proc = start_server(target=str(target), draft=str(draft), spec_mode=Mode.DFLASH, ctx_size=4096,
                        flash_attn="auto", extra_args=["--threads", "1"])  # the pre-launch guard lets it through
    with pytest.raises(ServerFailed) as info:
        proc.wait_ready(120)
    f = info.value.failure
    log = "\n".join(proc.log_lines())
    assert "tensor 'blk.0.ffn_norm.weight' not found" in log, log[-2000:]  # mainline's words for it
    assert f.code == "wrong_draft_format" and f.issue == "draft-layout-mismatch", f
    assert f.message.startswith("This draft's layout is not what this engine's dflash loader expects "
                                "(tensor 'blk.0.ffn_norm.weight' not found)"), f.message
    assert f.remedy.startswith("Use the draft made for mainline llama.cpp"), f.remedy
    assert "download it again" not in str(f)
