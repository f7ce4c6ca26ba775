"""``beedeck models list|get|scan``: the local library and Hugging Face downloads, headless."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any, TextIO

from beedeck.core.download import DownloadError
from beedeck.core.models import library
from beedeck.core.printable import printable


def register(sub: Any, groups: dict[str, Any]) -> None:
    models = groups["models"]

    p = models.add_parser("list", help="GGUF models already on disk (Hub cache, BeeDeck, LM Studio)")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=_cmd_list)

    p = models.add_parser("scan", help="look for GGUF models in folders (default: the usual places)")
    p.add_argument("dirs", nargs="*", type=Path, metavar="DIR")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=_cmd_scan)

    p = models.add_parser("get", help="download a GGUF (a whole split set for -00001-of-N files) from Hugging Face")
    p.add_argument("repo", metavar="REPO", help="e.g. unsloth/Qwen3-8B-GGUF")
    p.add_argument("file", metavar="FILE", help="file in the repo, e.g. Qwen3-8B-Q4_K_M.gguf")
    p.add_argument("--revision", default="main", help="branch, tag or commit (default: main)")
    p.add_argument("--dest", type=Path, default=None, metavar="DIR",
                   help="download into DIR instead of the shared Hugging Face cache")
    p.add_argument("--json", action="store_true", help="print the result as JSON (progress still goes to stderr)")
    # No --token option on purpose: a token on the command line shows up in `ps` and shell history.
    # The token comes from HF_TOKEN, BeeDeck's keyring entry or `hf auth login`'s token file.
    p.set_defaults(func=_cmd_get)


def _human(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if n < 1000 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} TB"


def _catalog_matches(models: list[library.LocalModel]) -> dict[Path, tuple[str, str]]:
    from beedeck.core.models.catalog import CatalogError

    try:
        return library.match_catalog(models, library.catalog_entries())
    except CatalogError:
        return {}  # a broken catalog must not hide the user's files


def _print_models(models: list[library.LocalModel], as_json: bool) -> int:
    matches = _catalog_matches(models)
    if as_json:
        rows = []
        for m in models:
            hit = matches.get(m.path)
            rows.append({**m.to_json(), "catalog": {"repo": hit[0], "file": hit[1]} if hit else None})
        print(json.dumps(rows, indent=2))
        return 0
    if not models:
        print("No GGUF models found. Download one with `beedeck models get REPO FILE`.")
        return 0
    for m in models:
        kind = f"draft/{m.kind}" if m.is_draft else printable(m.architecture or "?", 40)
        flags = "" if m.complete else "  [incomplete split set]"
        if m.error:
            flags += f"  [unreadable: {m.error}]"
        if m.path in matches:
            flags += "  [in catalog]"
        if m.mtp_heads:
            flags += f"  [MTP heads inside: {m.mtp_heads}]"
        where = m.repo + "/" + m.filename if m.repo else str(m.path)
        print(f"{m.source:9} {kind:18} {m.file_type_name:8} {_human(m.size):>9}  {where}{flags}")
        if m.repo:
            print(f"{'':9} {'':18} {'':8} {'':>9}  {m.path}")
        offered = m.best_sidecar()
        for side in m.sidecars:
            mark = "offered" if side is offered else "draft"
            print(f"{'':9} {'':18} {'':8} {'':>9}  + {mark} {side.path.name} ({side.label}"
                  f"{', ' + side.quant if side.quant else ''}): {side.verdict()}")
    return 0


def _cmd_list(args: argparse.Namespace) -> int:
    return _print_models(library.scan(), args.json)


def _cmd_scan(args: argparse.Namespace) -> int:
    return _print_models(library.scan(args.dirs or None), args.json)


class _Bar:
    """A one-line terminal progress bar on stderr, redrawn at most 10 times a second. Without a
    terminal (a log, a pipe, CI) a plain line at every tenth of the way and at least every 30 s."""

    LINE_EVERY_S = 30.0

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.t0 = time.monotonic()
        self.last = 0.0
        self.label = ""
        self.tty = stream.isatty()
        self.tenth = 0  # without a tty: the last tenth of the way a line was printed for
        self.last_line = self.t0

    def file(self, name: str, index: int, count: int) -> None:
        self.label = name if count == 1 else f"{name} ({index + 1}/{count})"
        if self.tty and self.last:
            self.stream.write("\n")  # keep the previous file's last bar on its own line
        print(f"downloading {self.label}", file=self.stream)

    def update(self, done: int, total: int | None) -> None:
        now = time.monotonic()
        if not self.tty:
            self._line(done, total, now)
            return
        if now - self.last < 0.1 and done != total:
            return
        self.last = now
        rate = done / max(now - self.t0, 1e-6)
        if total:
            frac = min(1.0, done / total)
            bar = "#" * int(frac * 30)
            eta = (total - done) / rate if rate > 0 else 0
            text = f"[{bar:<30}] {frac * 100:5.1f}% {_human(done)}/{_human(total)} {_human(rate)}/s ETA {eta:4.0f}s"
        else:
            text = f"{_human(done)} {_human(rate)}/s"
        self.stream.write(f"\r{text}  ")
        self.stream.flush()

    def _line(self, done: int, total: int | None, now: float) -> None:
        tenth = min(10, done * 10 // total) if total else self.tenth
        if tenth <= self.tenth and now - self.last_line < self.LINE_EVERY_S:
            return
        self.tenth, self.last_line = max(tenth, self.tenth), now
        rate = done / max(now - self.t0, 1e-6)
        of = f" of {_human(total)} ({done * 100 // total}%)" if total else ""
        print(f"downloaded {_human(done)}{of} at {_human(rate)}/s", file=self.stream, flush=True)

    def finish(self) -> None:
        if self.tty:
            self.stream.write("\n")
            self.stream.flush()


def _cmd_get(args: argparse.Namespace) -> int:
    from beedeck.core.models.hub import client as hub

    local = library.find_local(args.repo, args.file) if args.dest is None else None
    if local is not None:
        # Trusted only with the Hub's sha256 (remembered per size + mtime): a copy damaged in place
        # keeps its size, and would otherwise be served as good.
        try:
            changed = hub.changed_files(args.repo, args.file, list(local.files), revision=args.revision)
            checked = ""
        except hub.OfflineError:
            changed, checked = [], " (not checked against the Hub, which cannot be reached)"
        except DownloadError as exc:  # the copy on disk is still the user's: say why it is unchecked
            changed, checked = [], ""
            print(f"note: the copy on disk was not checked against the Hub: {exc}", file=sys.stderr)
        if not changed:
            result = {"repo": args.repo, "file": args.file, "paths": [str(p) for p in local.files],
                      "downloaded": False}
            print(json.dumps(result) if args.json else f"Already on disk: {local.path}{checked}")
            return 0
        print(f"note: {', '.join(printable(c) for c in changed)} on disk ({local.path.parent}) does not have the "
              "Hub's sha256 (changed or damaged since it was downloaded): downloading it again.", file=sys.stderr)
    bar = _Bar(sys.stderr)
    try:
        paths = hub.download_model(args.repo, args.file, revision=args.revision, dest_dir=args.dest,
                                   on_progress=bar.update, on_file=lambda f, i, n: bar.file(f.basename, i, n),
                                   on_note=None if local is not None else  # said above already
                                   lambda text: print(f"note: {text}", file=sys.stderr))
    except DownloadError as exc:
        bar.finish()
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        bar.finish()
        print("interrupted: run the same command again to resume the download", file=sys.stderr)
        return 130
    bar.finish()
    if args.json:
        print(json.dumps({"repo": args.repo, "file": args.file, "paths": [str(p) for p in paths], "downloaded": True}))
    else:
        for p in paths:
            print(p)
    return 0
