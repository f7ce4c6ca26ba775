"""The wait before the first token in words (issue 37: a 13 s time to first token after a long reply, with no
hint that the conversation was being read again): from the server's own progress, else from the size."""

from __future__ import annotations

from beedeck.core.chat.prompt_read import prompt_chars, reading_hint, reading_short, seconds_left
from beedeck.core.engine.client import PromptProgress


def test_the_progress_the_server_reports_says_how_far_and_how_long() -> None:
    start = PromptProgress(total=3076, cache=0, processed=0, time_ms=0)
    assert reading_hint(start, 12_000) == "Reading the whole conversation before the reply: 0 of 3,076 tokens."
    third = PromptProgress(total=3076, cache=0, processed=1024, time_ms=6939)
    assert seconds_left(third) == 14  # 2,052 tokens left at 147.6 tokens/s
    assert reading_hint(third, 12_000) == ("Reading the whole conversation before the reply: 1,024 of 3,076 tokens, "
                                           "about 14 s left.")
    assert reading_short(third) == "reading the prompt: 1,024 of 3,076 tokens…"


def test_what_the_server_kept_from_before_is_not_read_again_and_said_so() -> None:
    kept = PromptProgress(total=3400, cache=3100, processed=3200, time_ms=1000)
    assert kept.to_read == 300 and kept.read == 100 and seconds_left(kept) == 2
    assert reading_hint(kept, 13_000) == ("Reading the new part of the conversation (3,100 tokens kept from before) "
                                          "before the reply: 100 of 300 tokens, about 2 s left.")
    done = PromptProgress(total=3400, cache=3100, processed=3400, time_ms=3000)
    assert seconds_left(done) is None and reading_hint(done, 1).endswith("300 of 300 tokens.")


def test_a_server_that_says_nothing_gets_the_size_of_what_it_reads() -> None:
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "x" * 20_000},
                {"role": "assistant", "content": "y" * 4_000}, {"role": "user", "content": None}]
    assert prompt_chars(messages) == 24_009
    assert reading_hint(None, 24_009) == ("Waiting for the first token: the server reads the whole conversation first "
                                          "(24,009 characters), and a long one takes a while.")
    assert reading_short(None) == "waiting for the first token…"
