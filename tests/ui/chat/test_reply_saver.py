"""ReplySaver: a write the store refuses (a full disk) is kept, reported once, and retried until saved."""

from __future__ import annotations

from typing import Any

import pytest
from pytestqt.qtbot import QtBot

from beedeck.core.chat.store import ChatStore, ChatStoreError
from beedeck.ui.chat import reply_saver
from beedeck.ui.chat.reply_saver import ReplySaver


def test_a_refused_write_is_retried_until_it_is_saved(
    qtbot: QtBot, store: ChatStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(reply_saver, "RETRY_SAVE_MS", 20)
    conv = store.create_conversation()
    reply = store.add_message(conv.id, "assistant", "", complete=False)
    real_update = store.update_message
    disk_full = [True]
    calls: list[int] = []

    def update(*args: Any, **kwargs: Any) -> None:
        calls.append(1)
        if disk_full[0]:
            raise ChatStoreError("The disk holding the chat history is full", disk_full=True)
        real_update(*args, **kwargs)

    monkeypatch.setattr(store, "update_message", update)
    saver = ReplySaver(store)
    failures: list[object] = []
    saver.failed.connect(failures.append)
    saver.save(reply.id, "the whole reply", {"tokens": 3}, complete=True, reasoning="hmm")
    assert saver.has_unsaved() and len(failures) == 1 and isinstance(failures[0], ChatStoreError)
    qtbot.waitUntil(lambda: len(calls) >= 3, timeout=2000)  # retried, and refused again
    assert saver.has_unsaved() and len(failures) == 1  # a retry that fails again stays quiet
    disk_full[0] = False
    with qtbot.waitSignal(saver.saved_late, timeout=2000):
        pass
    assert not saver.has_unsaved()
    (saved,) = store.messages(conv.id)
    assert (saved.content, saved.stats, saved.complete, saved.reasoning) == ("the whole reply", {"tokens": 3}, True, "hmm")
