"""The launch profile: which engine binary to run with which launch settings, saved as profile.json.

A profile of kind :data:`REMOTE` is a server that is already running (a GPU pod, another machine):
its ``engine`` is the server's URL and its ``settings`` carry only the API key; Start connects to it.
API keys are never written to the file: they live in the OS keyring (``beedeck.core.secrets``).

The file carries a ``schema_version`` (:data:`SCHEMA_VERSION`; a file without one is version 1). One written
by a newer BeeDeck (a higher version, a kind of profile or a speculation mode this one does not know) is
reported as such, left in place, not used and never overwritten; fields this BeeDeck does not know (a newer
one's) are kept through a save. Only a file that cannot be read as a profile at all is kept aside as damaged.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from beedeck.core import paths, secrets
from beedeck.core.engine.caps import EngineCaps
from beedeck.core.engine.launch_settings import LaunchSettings, SettingsError
from beedeck.core.engine.mode import Mode
from beedeck.core.engine.remote import RemoteError, normalize_url
from beedeck.core.engine.speculation.modes import uses_draft

LOCAL = "local"  # BeeDeck starts the engine binary
REMOTE = "remote"  # BeeDeck connects to a llama-server that already runs
SCHEMA_VERSION = 1  # profile.json's format: a higher one was written by a newer BeeDeck
_KNOWN = frozenset({"schema_version", "engine", "settings", "label", "kind", "url"})  # profile.json's own keys


@dataclass
class Profile:
    """What to launch: an engine binary and its settings (the starter, or what Settings saved); or,
    with ``kind`` :data:`REMOTE`, the URL of a running server in ``engine`` and its key in
    ``settings.api_key``."""

    engine: str
    settings: LaunchSettings
    label: str = ""
    kind: str = LOCAL

    @property
    def is_remote(self) -> bool:
        return self.kind == REMOTE


def remote_profile(url: str, api_key: str | None = None, label: str = "") -> Profile:
    """A profile for the llama-server at ``url`` (normalised; RemoteError for a bad address)."""
    base = normalize_url(url)
    return Profile(base, LaunchSettings(api_key=api_key or None), label or base.split("://", 1)[1], REMOTE)


def engine_display_name(profile: Profile, caps: EngineCaps | None = None) -> str:
    """One name for the engine everywhere (status bar, About, logs): the profile's label (or the
    binary's file name), then what the probe found (generation and version) once it is known."""
    if profile.is_remote:
        return f"{profile.label or profile.engine} (running server)"
    name = profile.label or Path(profile.engine).name
    if caps is None:
        return name
    gen = getattr(caps.generation, "value", str(caps.generation))
    version = caps.version
    if caps.build and str(caps.build) != version:  # "0.6.0-dev (build 11434, ...)": which build, too
        version += f" (b{caps.build})"
    return f"{name} · {gen} {version}".strip()


def pair_name(settings: LaunchSettings) -> str:
    """One name for the model pair (status bar, About): the target's file, and the draft's where the
    settings load one ("—" without a target)."""
    pair = Path(settings.target).name if settings.target else "—"
    if settings.draft and uses_draft(settings):
        pair += " + " + Path(settings.draft).name
    return pair


def profile_path() -> Path:
    """Where Settings / the setup wizard save the launch profile (engine + LaunchSettings)."""
    return paths.config_dir() / "profile.json"


class ProfileError(ValueError):
    """The saved profile could not be used; it was kept aside. The message says so, for the window."""


class NewerProfileError(ProfileError):
    """profile.json was written by a newer BeeDeck: it is left in place, unused, and never overwritten."""


def newer_reason(data: object) -> str | None:
    """Why profile.json's object was written by a newer BeeDeck (a higher format version, a kind of profile or
    a speculation mode this one does not know), or None. Text where a value belongs is not "newer": a newer
    BeeDeck adds values, it does not change their type."""
    if not isinstance(data, dict):
        return None
    version = data.get("schema_version", SCHEMA_VERSION)
    if isinstance(version, int) and not isinstance(version, bool) and version > SCHEMA_VERSION:
        return f"format version {version}; this BeeDeck reads up to {SCHEMA_VERSION}"
    kind = data.get("kind", LOCAL)
    if isinstance(kind, str) and kind not in (LOCAL, REMOTE):
        return f"a kind of profile this BeeDeck does not know: {kind!r}"
    settings = data.get("settings")
    mode = settings.get("spec_mode") if isinstance(settings, dict) and kind == LOCAL else None
    if isinstance(mode, str) and mode not in {m.setting for m in Mode}:
        return f"a speculation mode this BeeDeck does not know: {mode!r}"
    return None


def profile_from_dict(data: object) -> Profile:
    """Validate profile.json's object: an engine path, checked launch settings, a label. (A newer BeeDeck's
    profile, :func:`newer_reason`, is refused here as invalid: check that first.)"""
    if not isinstance(data, dict):
        raise SettingsError(f"the file holds a {type(data).__name__}, not an object")
    version = data.get("schema_version", SCHEMA_VERSION)
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise SettingsError(f"'schema_version' is {version!r}, not a format version (a whole number from 1)")
    engine, label, kind = data.get("engine"), data.get("label", ""), data.get("kind", LOCAL)
    if not isinstance(label, str):
        raise SettingsError("'label' is not text")
    if kind == REMOTE:
        try:
            return remote_profile(str(data.get("url", "")), None, label)
        except RemoteError as exc:
            raise SettingsError(f"'url' is not a server address: {exc.message}") from None
    if kind != LOCAL:
        raise SettingsError(f"'kind' is {kind!r}: it must be {LOCAL!r} or {REMOTE!r}")
    if not isinstance(engine, str) or not engine:
        raise SettingsError("'engine' is missing or not a path")
    settings = LaunchSettings.from_dict(data.get("settings"))  # type and range checked
    return Profile(engine, settings, label)


def load_saved_profile() -> Profile | None:
    """The saved profile; None when there is none. Raises ProfileError when the file is unusable: it is then
    kept aside under a name no earlier copy has (house style: settings are never deleted); NewerProfileError
    when a newer BeeDeck wrote it: it is then left as it is."""
    path = profile_path()
    try:
        data = json.loads(paths.read_regular_text(path, paths.CONFIG_MAX_BYTES))
        newer = newer_reason(data)
        profile = profile_from_dict(data) if newer is None else None
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        aside = paths.keep_aside(path)
        raise ProfileError(f"The saved launch profile could not be used ({exc}): it was kept as {aside.name}. "
                           "Choose the engine and models again in Settings (or the setup wizard).") from None
    if profile is None:
        raise NewerProfileError(
            f"The saved launch profile {path} was written by a newer BeeDeck ({newer}). It is left as it is and not "
            "used, and BeeDeck saves no profile over it: update BeeDeck to use it, or remove the file to save "
            "profiles with this version.")
    profile.settings.api_key = secrets.get_secret(_key_name(profile))  # kept in the OS keyring only
    return profile


def _key_name(profile: Profile) -> str:
    return secrets.remote_api_key_name(profile.engine) if profile.is_remote else secrets.SERVER_API_KEY


def _kept_unknown(old: dict[str, Any] | None, data: dict[str, Any]) -> dict[str, Any]:
    """``data`` with the fields of ``old`` (the file it replaces) that this BeeDeck does not know: a newer
    BeeDeck's, kept for it. Within the launch settings only when both are local profiles."""
    if old is None:
        return data
    out = {**{k: v for k, v in old.items() if k not in _KNOWN}, **data}
    settings, old_settings = data.get("settings"), old.get("settings")
    if isinstance(settings, dict) and isinstance(old_settings, dict) and old.get("kind", LOCAL) == LOCAL:
        known = {f.name for f in fields(LaunchSettings)}
        out["settings"] = {**{k: v for k, v in old_settings.items() if k not in known}, **settings}
    return out


def save_profile(profile: Profile) -> Path:
    """Write profile.json atomically (a crash leaves the old file), keeping the fields a newer BeeDeck wrote
    there. The API key is never written there (``LaunchSettings.to_dict`` drops it): it goes to the OS keyring,
    and where there is no keyring it lives only in the running session's profile. Raises NewerProfileError,
    writing nothing, when a newer BeeDeck wrote the file."""
    path = profile_path()
    old = paths.config_object_on_disk(path)
    newer = newer_reason(old)
    if newer is not None:
        raise NewerProfileError(
            f"The launch profile was not saved: {path} was written by a newer BeeDeck ({newer}) and is left as "
            "it is. The profile applies to this session only: update BeeDeck, or remove that file to save "
            "profiles with this version.")
    secrets.set_secret(_key_name(profile), profile.settings.api_key)
    data: dict[str, object]
    if profile.is_remote:
        data = {"kind": REMOTE, "url": profile.engine, "label": profile.label}
    else:
        data = {"engine": profile.engine, "settings": profile.settings.to_dict(), "label": profile.label}
    data = {**_kept_unknown(old, data), "schema_version": SCHEMA_VERSION}
    paths.atomic_write_text(path, json.dumps(data, indent=1, sort_keys=True))
    return path
