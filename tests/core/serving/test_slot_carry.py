"""The steps that keep the conversation across a mode switch's restart (core/serving/slot_carry.py), in plain
pytest: a slot client that writes the file as the engine does (the real engines: tests/engine/
test_slot_carry_real.py; their faults in the window: tests/faults/test_switch_faults.py)."""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest

from beedeck.core.engine.caps import EngineCaps, Generation
from beedeck.core.engine.client import HTTPStatusError, SlotFile
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.mode import Mode
from beedeck.core.serving import Restart, SlotCarry
from beedeck.core.serving.slot_carry import FLAG, folder_of
from tests.fakes.fake_launch import mainline_caps

GiB = 1 << 30


@dataclass
class Engine:
    """One llama-server's slot endpoint, as far as the steps see it: it writes (or reads) the named file in its
    folder; ``refuse``: its answer to a restore (a 400 as the real ones give for a file that does not fit)."""

    folder: Path
    tokens: int = 3000
    refuse_save: str = ""
    refuse_restore: str = ""
    calls: list[tuple[str, str]] = field(default_factory=list)

    def slot_file(self, slot: int, action: str, filename: str) -> SlotFile:
        self.calls.append((action, filename))
        path = self.folder / filename
        if action == "save":
            if self.refuse_save:
                path.write_bytes(b"half")  # what a full disk leaves
                raise HTTPStatusError(500, self.refuse_save)
            path.write_bytes(b"kv" * 100)
            os.chmod(path, 0o644)  # the engine's umask
            return SlotFile(self.tokens, path.stat().st_size, 1.0)
        if self.refuse_restore:
            raise HTTPStatusError(400, self.refuse_restore)
        return SlotFile(self.tokens, path.stat().st_size, 1.0)


@dataclass
class Proc:
    argv: list[str]
    base_url: str = "http://127.0.0.1:1"
    api_key: str | None = None


@pytest.fixture
def caps() -> EngineCaps:
    ml = mainline_caps("/opt/llama-server")
    return replace(ml, flags=frozenset({*ml.flags, FLAG}))


@pytest.fixture
def model(tmp_path: Path) -> str:
    path = tmp_path / "t.gguf"
    path.write_bytes(b"GGUF")
    return str(path)


def _modes(model: str) -> tuple[LaunchSettings, LaunchSettings]:
    dflash = LaunchSettings(target=model, draft=model, spec_mode=Mode.DFLASH, ctx_size=8192, kv_unified=True)
    return replace(dflash, draft=None, spec_mode=Mode.BASELINE), dflash


def _carry(tmp_path: Path, engine: Engine, free: int = 100 * GiB) -> SlotCarry:
    return SlotCarry(engine.folder, client=lambda url, key: engine, disk_free=lambda p: free)


def _restart(caps: EngineCaps, before: LaunchSettings, after: LaunchSettings, log: list[str],
             kv: int | None = GiB) -> Restart:
    return Restart("/opt/llama-server", caps, after, True, before, kv, log.append)


def _launched(carry: SlotCarry, s: LaunchSettings, caps: EngineCaps) -> Proc:
    return Proc(carry.prepare(s, caps).extra_args)


def test_every_start_gets_a_private_slot_folder_where_the_engine_has_the_option(tmp_path: Path, caps: EngineCaps,
                                                                               model: str) -> None:
    folder = tmp_path / "state" / "slots"
    carry = SlotCarry(folder)
    base, _ = _modes(model)
    s = carry.prepare(replace(base, extra_args=["--fit", "off"]), caps)
    assert s.extra_args == [FLAG, str(folder), "--fit", "off"]  # the user's own arguments keep the end
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert carry.prepare(base, replace(caps, flags=frozenset(caps.flags - {FLAG}))) == base  # no option: as is
    own = replace(base, extra_args=[FLAG, "/mine"])
    assert carry.prepare(own, caps) == own  # the user's own folder is used as it is
    assert folder_of(own.extra_args) == "/mine" and folder_of([f"{FLAG}=/x"]) == "/x"


def test_a_switch_saves_before_the_stop_restores_before_ready_and_leaves_no_file(tmp_path: Path, caps: EngineCaps,
                                                                                model: str) -> None:
    engine = Engine(tmp_path / "slots")
    carry = _carry(tmp_path, engine)
    base, dflash = _modes(model)
    log: list[str] = []
    old, new = _launched(carry, base, caps), _launched(carry, dflash, caps)
    restart = _restart(caps, base, dflash, log)
    carry.before_stop(restart, old)
    (action, name), = engine.calls
    saved = engine.folder / name
    assert action == "save" and name.startswith(f"carry-{os.getpid()}-") and stat.S_IMODE(saved.stat().st_mode) == 0o600
    carry.after_ready(restart, new, 1.0)
    carry.ended(restart)
    assert engine.calls[-1] == ("restore", name) and not saved.exists()
    assert carry.last is not None and carry.last.kind == "restored" and carry.last.tokens == 3000
    assert "kept the conversation's cache (3,000 tokens" in carry.said() and "reads only what is new" in carry.said()
    assert [line.split(" (")[0] for line in log] == ["mode switch: saved the conversation's cache",
                                                     "mode switch: restored the conversation's cache"]


def test_a_restored_cache_the_engine_did_not_use_is_said_remembered_and_not_saved_again(
        tmp_path: Path, caps: EngineCaps, model: str) -> None:
    """Issue 36, measured at 24 GB: mainline reads a Gemma 4 conversation again after a restore (sliding-window
    layers). The first reply's own figures tell; the pair is remembered, so later switches neither save nor promise."""
    engine = Engine(tmp_path / "slots")
    base, dflash = _modes(model)

    def switch(carry: SlotCarry, before: LaunchSettings, after: LaunchSettings) -> Restart:
        restart = _restart(caps, before, after, [])
        carry.before_stop(restart, _launched(carry, before, caps))
        carry.after_ready(restart, _launched(carry, after, caps), 1.0)
        carry.ended(restart)
        return restart

    carry = _carry(tmp_path, engine)
    switch(carry, base, dflash)
    assert carry.reply_read(40, 3000) == ""  # used: the reply read its 40 new tokens only
    assert carry.reply_read(3040, 0) == ""  # only the first reply after a restore is checked
    switch(carry, dflash, base)
    said = carry.reply_read(3040, 0)
    assert said.startswith("the engine did not use the conversation's cache restored at the switch: this reply "
                           "read all 3,040 tokens again") and "no longer save it" in said, said
    saves = len([c for c in engine.calls if c[0] == "save"])
    for fresh in (carry, _carry(tmp_path, engine)):  # remembered, also by the next BeeDeck
        why, _ = fresh.forecast(_restart(caps, base, dflash, []), _launched(fresh, base, caps))
        assert why.startswith("the engine did not use the cache restored at the last switch"), why
        switch(fresh, base, dflash)
        assert fresh.last is not None and fresh.last.kind == "unavailable"
    assert len([c for c in engine.calls if c[0] == "save"]) == saves and not list(engine.folder.glob("*.bin"))
    Path(model).write_bytes(b"GGUF, another model")  # another file under the name: checked anew
    switch(carry, base, dflash)
    assert carry.last is not None and carry.last.kind == "restored"


@pytest.mark.parametrize(("generation", "build", "rule", "carried"), [
    (Generation.MAINLINE, None, True, False), (Generation.MAINLINE, 11434, True, False),
    (Generation.MAINLINE, 11500, True, True), (Generation.BEE_B, None, True, True),
    (Generation.MAINLINE, 11434, False, True)])
def test_a_sliding_window_model_on_mainline_up_to_b11434_is_not_carried_and_not_promised(
        tmp_path: Path, caps: EngineCaps, model: str, generation: Generation, build: int | None, rule: bool,
        carried: bool) -> None:
    """Measured (Gemma 4 31B at 24 GB, a small Gemma 3 on the CPU): mainline b11434 reads a sliding-window model's
    conversation again after a restore, BeeLlama does not. A newer mainline, or the rule off, is tried (and the
    reply after it checked)."""
    from beedeck.core.serving.slot_carry import SWA_REREAD

    engine = Engine(tmp_path / "slots")
    carry = SlotCarry(engine.folder, client=lambda url, key: engine, disk_free=lambda p: 100 * GiB, known_rules=rule)
    caps = replace(caps, generation=generation, build=build)
    base, dflash = _modes(model)
    restart = replace(_restart(caps, base, dflash, []), sliding_window=True)
    why, _ = carry.forecast(restart, _launched(carry, base, caps))
    carry.before_stop(restart, _launched(carry, base, caps))
    assert (why == "") == carried and bool(engine.calls) == carried, (why, engine.calls)
    if not carried:
        assert why == SWA_REREAD and carry.last is not None and carry.last.kind == "unavailable"
        assert SWA_REREAD in carry.said()
    carry.ended(restart)
    plain = _restart(caps, base, dflash, [])  # no sliding window: carried on every engine
    assert carry.forecast(plain, _launched(carry, base, caps))[0] == ""


@pytest.mark.parametrize("why", ["refused", "changed", "elsewhere"])
def test_a_restore_that_cannot_be_done_is_said_and_its_file_removed(tmp_path: Path, caps: EngineCaps, model: str,
                                                                    why: str) -> None:
    engine = Engine(tmp_path / "slots", refuse_restore="Unable to restore slot" if why == "refused" else "")
    carry = _carry(tmp_path, engine)
    base, dflash = _modes(model)
    restart = _restart(caps, base, dflash, [])
    carry.before_stop(restart, _launched(carry, base, caps))
    if why == "changed":  # another model under the same name (a new download): the engine would take it
        Path(model).write_bytes(b"GGUF and more")
    new = _launched(carry, dflash, caps) if why != "elsewhere" else Proc([FLAG, str(tmp_path)])
    carry.after_ready(restart, new, 1.0)
    assert not list(engine.folder.glob("*.bin"))
    said = carry.said()
    assert said.startswith("the conversation's cache could not be kept (") and said.endswith(
        "the next reply reads the conversation again")
    assert {"refused": "the new server refused it: The server answered HTTP 400",
            "changed": "the model file changed on disk since the cache was saved",
            "elsewhere": "keeps its slots in another folder"}[why] in said
    assert [a for a, _ in engine.calls] == (["save", "restore"] if why == "refused" else ["save"])


def test_a_save_that_fails_or_a_full_disk_leaves_nothing_and_is_said(tmp_path: Path, caps: EngineCaps,
                                                                    model: str) -> None:
    base, dflash = _modes(model)
    engine = Engine(tmp_path / "slots", refuse_save="Unable to save slot")
    carry = _carry(tmp_path, engine)
    restart = _restart(caps, base, dflash, [])
    carry.before_stop(restart, _launched(carry, base, caps))
    carry.after_ready(restart, _launched(carry, dflash, caps), 1.0)
    assert not list(engine.folder.glob("*")) and "the engine did not save it" in carry.said()
    full = Engine(tmp_path / "full")
    carry = _carry(tmp_path, full, free=int(1.5 * GiB))
    carry.before_stop(_restart(caps, base, dflash, [], kv=GiB), _launched(carry, base, caps))
    assert full.calls == [] and "the disk has 1.5 GiB free and the cache may take up to 1.0 GiB" in carry.said()


def test_a_restart_that_never_became_ready_removes_the_saved_file(tmp_path: Path, caps: EngineCaps, model: str) -> None:
    engine = Engine(tmp_path / "slots")
    carry = _carry(tmp_path, engine)
    base, dflash = _modes(model)
    restart = _restart(caps, base, dflash, [])
    carry.before_stop(restart, _launched(carry, base, caps))
    assert list(engine.folder.glob("*.bin"))
    carry.ended(restart)
    assert not list(engine.folder.glob("*.bin"))


@pytest.mark.parametrize("case", ["no option", "no folder", "slots", "streams", "not a switch", "empty"])
def test_where_nothing_can_be_carried_nothing_is_saved(tmp_path: Path, caps: EngineCaps, model: str, case: str) -> None:
    engine = Engine(tmp_path / "slots", tokens=0 if case == "empty" else 3000)
    carry = _carry(tmp_path, engine)
    base, dflash = _modes(model)
    running = _launched(carry, base, caps)
    if case == "no option":
        caps = replace(caps, flags=frozenset(caps.flags - {FLAG}))
    elif case == "no folder":
        running = Proc([])
    elif case == "slots":
        base = replace(base, parallel=4)
    elif case == "streams":  # BeeLlama 0.1-0.3 without a unified cache: two streams with speculation on
        caps = replace(caps, generation=Generation.BEE_A)
        base, dflash = replace(base, kv_unified=None), replace(dflash, kv_unified=None)
    restart = replace(_restart(caps, base, dflash, []), fast=case != "not a switch")
    carry.before_stop(restart, running)
    assert [a for a, _ in engine.calls] == (["save"] if case == "empty" else [])
    assert not list(engine.folder.glob("*.bin"))
    expected = {"no option": f"it has no {FLAG}", "no folder": "started without a slot folder",
                "slots": "with 4 parallel slots", "streams": "its cache has 1 stream in one mode and 2 in the other",
                "not a switch": "", "empty": ""}[case]
    said = carry.said()
    assert (expected in said and "cannot be kept across this switch" in said) if expected else said == ""
    carry.before_stop(restart, running)
    assert carry.said() == ""  # once per engine


def test_files_a_gone_beedeck_left_are_swept_at_the_next_start(tmp_path: Path, caps: EngineCaps, model: str) -> None:
    folder = tmp_path / "slots"
    folder.mkdir()
    dead = folder / "carry-999999999-abc.bin"
    mine = folder / f"carry-{os.getpid()}-abc.bin"
    other = folder / "notes.txt"
    for p in (dead, mine, other):
        p.write_bytes(b"x")
    SlotCarry(folder).prepare(_modes(model)[0], caps)
    assert not dead.exists() and mine.exists() and other.exists()
