"""Size the catalog's repos from their GGUF headers: what the recommender plans with.

The catalog (:mod:`catalog`) names repos and quants, never sizes; :func:`refresh` reads each target
repo's listed quants (all of them when it lists none) and each draft repo's listed quants (else the
draft quants the planners pick from) by HTTP range requests (:func:`hub.sizing.size_repo`), which caches
them by repo revision, so :func:`from_catalog.recommend` then plans from the cache, online or not. A repo
already cached at the Hub's current revision costs one API call; offline (or once the Hub proves unreachable) only the
cache answers. Errors are per repo: a gated, missing or unreachable repo is a line in the result,
never the end of the refresh.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from beedeck.core.download import DownloadError, OfflineError
from beedeck.core.models import catalog as catalog_mod
from beedeck.core.models.hub import client as hub
from beedeck.core.models.hub import sizing as hub_sizing
from beedeck.core.models.recommend import catalog_plan

# The draft quants sized when a draft repo lists none: the catalog plan's, and Q8_0, which live_plan.py
# (recommend --repo, offline from this cache) prefers next.
DRAFT_QUANTS = (*catalog_plan.DRAFT_QUANTS, "Q8_0")


@dataclass
class CatalogSizing:
    """What one refresh read: per repo its sizing or the reason it has none."""

    sized: dict[str, hub_sizing.RepoSizing] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def bytes_read(self) -> int:
        return sum(s.bytes_read for s in self.sized.values())

    def lines(self) -> list[str]:
        out = []
        for repo, s in self.sized.items():
            d = hub_sizing.summary(s)
            how = (f"{d['bytes_read'] / 1e6:.1f} MB of headers in {d['requests']} range requests, {d['seconds']:.2f} s"
                   if s.source == "hub" and s.bytes_read else
                   {"hub": "up to date in the cache", "cache": "from this machine's cache",
                    "shipped": "from the headers BeeDeck ships"}.get(s.source, s.source))
            out.append(f"{repo} @ {s.revision[:12]}: {len(s.models)} GGUF file(s), {how}")
        out += [f"{repo}: not sized: {why}" for repo, why in self.errors.items()]
        out.append(f"In all: {self.bytes_read / 1e6:.1f} MB read in {self.seconds:.1f} s, nothing downloaded.")
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"repos": [hub_sizing.summary(s) for s in self.sized.values()], "errors": dict(self.errors),
                "bytes_read": self.bytes_read, "seconds": round(self.seconds, 3)}


def repos(cat: catalog_mod.Catalog) -> list[tuple[str, list[str] | None]]:
    """(repo, quants to size or None for all) for every target and every draft some engine loads, once each
    (DSpark, EAGLE-3 and MTP drafts too: ``recommend --repo`` plans them, offline from this cache)."""
    out: dict[str, list[str] | None] = {}
    for pair in cat.pairs:
        specs = [(pair.target, pair.target.quants)]
        specs += [(d, d.quants or list(DRAFT_QUANTS)) for d in pair.drafts if d.generations]
        for spec, quants in specs:
            key = spec.repo
            if key in out:
                prev = out[key]
                out[key] = None if prev is None or quants is None else sorted(set(prev) | set(quants))
            else:
                out[key] = quants
    return list(out.items())


def refresh(cat: catalog_mod.Catalog | None = None, *, endpoint: str | None = None, token: str | None = None,
            cache_dir: Path | None = None, offline: bool = False, cancel_event: threading.Event | None = None,
            on_repo: Callable[[str, int, int], None] | None = None) -> CatalogSizing:
    """Read (or find cached) the headers of every catalog repo; see the module's words."""
    cat = cat or catalog_mod.load()
    todo = repos(cat)
    out = CatalogSizing()
    t0 = time.monotonic()
    for i, (repo, quants) in enumerate(todo):
        if cancel_event is not None and cancel_event.is_set():
            break
        if on_repo is not None:
            on_repo(repo, i, len(todo))
        try:
            s = hub_sizing.size_repo(repo, endpoint=endpoint, token=token, cache_dir=cache_dir, offline=offline,
                                     cancel_event=cancel_event, quants=quants)
        except OfflineError as exc:
            out.errors[repo] = str(exc)
            offline = True  # the Hub cannot be reached: the rest from the cache only, without waiting on each
            continue
        except (DownloadError, hub.HubError) as exc:
            out.errors[repo] = str(exc)
            continue
        out.sized[repo] = s
    out.seconds = time.monotonic() - t0
    return out


def unsized(cat: catalog_mod.Catalog | None = None, cache_dir: Path | None = None) -> list[str]:
    """The ids of the pairs whose target headers this machine has not read (nor BeeDeck ships)."""
    cat = cat or catalog_mod.load()
    return [p.id for p in cat.pairs if hub_sizing.load_cached(p.target.repo, cache_dir=cache_dir) is None]
