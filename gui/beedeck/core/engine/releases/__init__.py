"""Prebuilt llama-server from GitHub releases (BeeLlama.cpp and mainline llama.cpp).

``assets`` the asset names, the CUDA rule and the runtime companions (:func:`pick_asset`); ``index``
which release: the newest with a build this machine runs, through the configured API base
(:func:`resolve_release`); ``download`` fetches, unpacks without trusting the archive's paths,
smoke-tests and registers it (:func:`download_engine`). Outside code imports from this package; the
modules inside import each other directly (never this ``__init__``).
"""

from __future__ import annotations

from beedeck.core.engine.releases.assets import (
    BEE_REPO,
    MAINLINE_REPO,
    AssetChoice,
    ReleaseError,
    host_platform,
    pick_asset,
    tag_version,
)
from beedeck.core.engine.releases.download import download_engine, fetch_release
from beedeck.core.engine.releases.index import RELEASES_API_ENV, releases_api_base, resolve_release

__all__ = ["BEE_REPO", "MAINLINE_REPO", "RELEASES_API_ENV", "AssetChoice", "ReleaseError", "download_engine",
           "fetch_release", "host_platform", "pick_asset", "releases_api_base", "resolve_release", "tag_version"]
