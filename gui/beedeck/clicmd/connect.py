"""`beedeck connect URL`: what a running llama-server is, or exactly why it cannot be used.

The API key comes from ``--api-key-file`` (a file holding it, as llama-server's own
``--api-key-file`` reads it), else ``BEEDECK_API_KEY``, else the keyring entry a saved remote
profile of that URL left; never the command line (it would sit in the shell history and ``ps``).
``--save`` makes the URL the saved profile (the app then connects to it) and keeps the key in the
keyring. ``--say TEXT`` streams one reply and prints the time from connecting to its first token.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from beedeck.core import secrets
from beedeck.core.engine.client import ClientError, LlamaClient
from beedeck.core.engine.remote import (
    CONNECT_TIMEOUT_S,
    READ_TIMEOUT_S,
    RemoteError,
    inspect_server,
    normalize_url,
)


def register(sub: Any, groups: dict[str, Any]) -> None:
    p = sub.add_parser("connect", help="check a running llama-server (model, context, speculation, engine)")
    p.add_argument("url", help="the server, e.g. http://192.168.1.20:8080 (host:port is enough)")
    p.add_argument("--api-key-file", type=Path, metavar="F",
                   help="a file holding the server's API key (else BEEDECK_API_KEY, else the keyring)")
    p.add_argument("--save", action="store_true", help="save it as the app's profile (key in the keyring)")
    p.add_argument("--label", default="", help="a name for the saved profile")
    p.add_argument("--say", metavar="TEXT", help="stream one reply to TEXT and time the first token")
    p.add_argument("--max-tokens", type=int, default=64, metavar="N", help="reply length for --say (default 64)")
    p.add_argument("--timeout", type=float, default=READ_TIMEOUT_S, metavar="S",
                   help=f"seconds each answer may take, from connecting to its last byte (default {READ_TIMEOUT_S:g})")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=run_connect)


def key_from(args: argparse.Namespace, url: str) -> tuple[str | None, str]:
    """The API key and where it came from (never the key itself in any message)."""
    if args.api_key_file is not None:
        try:
            text = args.api_key_file.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise RemoteError("key-file", f"The API key file {args.api_key_file} could not be read ({exc}).",
                              "Give a readable file that holds only the key.") from None
        if not text:
            raise RemoteError("key-file", f"The API key file {args.api_key_file} is empty.",
                              "Put the key the server was started with into it.")
        return text.splitlines()[0].strip(), "the key file"
    if os.environ.get("BEEDECK_API_KEY"):
        return os.environ["BEEDECK_API_KEY"], "BEEDECK_API_KEY"
    stored = secrets.get_secret(secrets.remote_api_key_name(url))
    return (stored, "the keyring") if stored else (None, "none")


def run_connect(args: argparse.Namespace) -> int:
    t0 = time.perf_counter()
    try:
        url = normalize_url(args.url)
        api_key, source = key_from(args, url)
        if not 0 < args.timeout <= 3600:
            raise RemoteError("bad-timeout", f"--timeout {args.timeout:g} is out of range.", "Give 1 to 3600 seconds.")
        info = inspect_server(url, api_key, connect_timeout=min(CONNECT_TIMEOUT_S, args.timeout),
                              read_timeout=args.timeout)
    except RemoteError as exc:
        if args.json:
            print(json.dumps({"ok": False, "kind": exc.kind, "message": exc.message, "remedy": exc.remedy}))
        else:
            print(f"error: {exc.message}\n  {exc.remedy}", file=sys.stderr)
        return 1
    out: dict[str, Any] = {"ok": True, "url": info.url, "model": info.model, "n_ctx": info.n_ctx,
                           "engine": info.engine, "build_info": info.build_info, "speculation": info.speculation(),
                           "metrics": info.metrics, "needs_key": info.needs_key, "key_from": source,
                           "inspect_s": round(info.seconds, 3)}
    if not args.json:
        print("\n".join(info.describe()))
        print(f"key from:     {source}")
    if args.say:
        client = LlamaClient(info.url, api_key)
        try:
            stream = client.stream_chat([{"role": "user", "content": args.say}], max_tokens=args.max_tokens)
            first: float | None = None
            for delta in stream:
                if first is None:
                    first = delta.t - t0
                if not args.json:
                    print(delta.content or delta.reasoning, end="", flush=True)
        except ClientError as exc:
            print(f"\nerror: {exc}", file=sys.stderr)
            return 1
        res = stream.result
        out.update(connect_to_first_token_s=round(first, 3) if first is not None else None,
                   tokens_per_s=res.timings.predicted_per_second if res.timings else None)
        if not args.json:
            print(f"\nconnect to first token: {first * 1000:.0f} ms" if first is not None else "\nno token arrived")
    if args.save:
        from beedeck.core.profile import ProfileError, remote_profile, save_profile

        try:
            path = save_profile(remote_profile(info.url, api_key, args.label))
        except ProfileError as exc:  # a newer BeeDeck's profile.json: left as it is
            print(f"error: {exc}", file=sys.stderr)
            return 1
        out["saved"] = str(path)
        if not args.json:
            print(f"saved as the app's profile: {path} (the key is in the keyring, not in the file)")
    if args.json:
        print(json.dumps(out))
    return 0
