"""`beedeck chat "prompt"`: stream one reply, then the speed figures (client and server side).

Without ``--url`` it starts the starter profile (or ``--engine/--model``), chats, and stops it again.
The API key for ``--url`` comes from the ``BEEDECK_API_KEY`` environment variable, never the command line.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
from typing import Any

from beedeck.clicmd.engine.serve import add_launch_arguments, print_failure, start_from_args
from beedeck.core.engine.client import (
    STALL_S,
    ChatResult,
    ClientError,
    InvalidText,
    LlamaClient,
    ReplyOverrun,
    Stalled,
    check_text,
    reply_deadline,
)
from beedeck.core.engine.launch_settings import RANGES
from beedeck.core.engine.server import ServerFailed, ServerProcess


def register(sub: Any, groups: dict[str, Any]) -> None:
    p = sub.add_parser("chat", help="send one prompt and stream the reply, with tokens/s")
    p.add_argument("prompt", help="what to ask")
    p.add_argument("--url", help="a running llama-server (default: start the starter profile for this chat)")
    p.add_argument("--max-tokens", type=int, default=256, metavar="N", help="reply length cap (default: 256)")
    p.add_argument("--temperature", type=temperature, metavar="T",
                   help="sampling temperature, 0..5 (default: the server's)")
    p.add_argument("--seed", type=int, metavar="N")
    p.add_argument("--json", action="store_true", help="print the reply and the figures as one JSON object")
    p.add_argument("--ready-timeout", type=float, default=600.0, help=argparse.SUPPRESS)
    p.add_argument("--stall-timeout", type=float, default=STALL_S, metavar="S",
                   help=f"give up when the reply stops arriving for S seconds (default: {STALL_S:.0f})")
    p.add_argument("--deadline", type=deadline, metavar="S",
                   help=f"end a reply that takes longer than S seconds in all (default: {reply_deadline(0):.0f} "
                        "plus 2 per token of --max-tokens)")
    add_launch_arguments(p)
    p.set_defaults(func=run_chat)


def temperature(text: str) -> float:
    """``--temperature``: a finite number in the launch settings' range (NaN would reach the sampler)."""
    low, high = RANGES["temp"][:2]
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number: give one from {low:g} to {high:g}, "
                                         "e.g. --temperature 0.7") from None
    if not low <= value <= high:  # False for NaN too
        raise argparse.ArgumentTypeError(f"{text} is out of range: give a number from {low:g} to {high:g} "
                                         "(0 = greedy), e.g. --temperature 0.7")
    return value


def deadline(text: str) -> float:
    """``--deadline``: a finite number of seconds above 0."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value < 1e9:  # False for NaN too
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds above 0, e.g. --deadline 600")
    return value


def stats_lines(res: ChatResult) -> list[str]:
    out = []
    t = res.timings
    gen = f"generation: {res.client_tokens_per_s:.1f} tok/s seen by the client" if res.client_tokens_per_s else \
        "generation: too short to time on the client"
    if t is not None:
        gen += f", {t.predicted_per_second:.1f} tok/s by the server ({t.predicted_n} tokens)"
    out.append(gen)
    if res.ttft_s is not None:
        out.append(f"time to first token: {res.ttft_s * 1000:.0f} ms")
    if t is not None:
        out.append(f"prompt: {t.prompt_per_second:.1f} tok/s ({t.prompt_n} tokens, {t.cache_n} from cache)")
        if t.draft_n:
            out.append(f"draft: {t.draft_n_accepted}/{t.draft_n} accepted ({(t.acceptance or 0) * 100:.0f}%)")
    out.append(f"finish: {res.finish_reason or 'none'}" + (" (cancelled)" if res.cancelled else ""))
    if res.timings_rejected:
        out.append(f"note: {res.timings_rejected}: BeeDeck shows only what its own clock measured.")
    return out


def result_json(res: ChatResult) -> dict[str, Any]:
    t = res.timings
    return {
        "text": res.text,
        "reasoning": res.reasoning,
        "finish_reason": res.finish_reason,
        "model": res.model,
        "ttft_s": res.ttft_s,
        "client_tokens_per_s": res.client_tokens_per_s,
        "wall_s": res.wall_s,
        "cancelled": res.cancelled,
        "timings": None if t is None else {
            **t.__dict__, "acceptance": t.acceptance,
        },
        "timings_rejected": res.timings_rejected or None,
        "usage": res.usage,
    }


def run_chat(args: argparse.Namespace) -> int:
    try:
        check_text(args.prompt, "The prompt")
    except InvalidText as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if not args.prompt.strip():
        print("error: the prompt is empty: pass the text to ask, e.g. beedeck chat \"hello\".", file=sys.stderr)
        return 2
    proc: ServerProcess | None = None
    try:
        if args.url:
            client = LlamaClient(args.url, api_key=os.environ.get("BEEDECK_API_KEY") or None)
        else:
            started = start_from_args(args)
            if isinstance(started, int):
                return started
            proc = started
            if not args.json:
                print(f"starting {proc.engine.name} ...", file=sys.stderr, flush=True)
            try:
                ready_s = proc.wait_ready(args.ready_timeout)
            except ServerFailed as exc:
                print_failure(exc.failure)
                return 1
            if not args.json:
                print(f"ready in {ready_s:.2f} s", file=sys.stderr, flush=True)
            client = LlamaClient(proc.base_url, api_key=proc.api_key)
        stream = client.stream_chat([{"role": "user", "content": args.prompt}], max_tokens=args.max_tokens,
                                    temperature=args.temperature, seed=args.seed, stall_s=args.stall_timeout,
                                    deadline_s=args.deadline)
        interrupted = threading.Event()
        try:
            for delta in stream:
                if not args.json:
                    sys.stdout.write(delta.content)
                    sys.stdout.flush()
        except KeyboardInterrupt:
            interrupted.set()
            stream.cancel()
        except ClientError as exc:
            print(f"\nerror: {exc}", file=sys.stderr)
            if proc is not None and not isinstance(exc, Stalled | ReplyOverrun):
                # The reply broke off: if the server died, say why (its exit is read a moment later).
                proc.wait_exit(5)
                if proc.failure is not None:
                    print_failure(proc.failure)
                elif proc.exit_code is None:
                    print("  the server is still running: the connection broke, not the server.", file=sys.stderr)
            return 1
        if interrupted.is_set():
            print("\n(cancelled)", file=sys.stderr)
            return 130
        res = stream.result
        if args.json:
            print(json.dumps(result_json(res)))
        else:
            print("\n")
            for line in stats_lines(res):
                print(line)
        return 0
    finally:
        if proc is not None:
            proc.stop()
