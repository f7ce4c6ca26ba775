"""The launch profile: which engine binary to run with which launch settings, saved as profile.json.

A profile of kind :data:`REMOTE` is a server that is already running (a GPU pod, another machine):
its ``engine`` is the server's URL and its ``settings`` carry only the API key; Start connects to it.
API keys are never written to the file: they live in the OS keyring (``beedeck.core.secrets``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from beedeck.core import paths, secrets
from beedeck.core.engine.caps import EngineCaps
from beedeck.core.engine.launch_settings import LaunchSettings, SettingsError
from beedeck.core.engine.remote import RemoteError, normalize_url
from beedeck.core.engine.speculation.modes import uses_draft

LOCAL = "local"  # BeeDeck starts the engine binary
REMOTE = "remote"  # BeeDeck connects to a llama-server that already runs


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
    return f"{name} · {gen} {caps.version}".strip()


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


def profile_from_dict(data: object) -> Profile:
    """Validate profile.json's object: an engine path, checked launch settings, a label."""
    if not isinstance(data, dict):
        raise SettingsError(f"the file holds a {type(data).__name__}, not an object")
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
    """The saved profile; None when there is none. Raises ProfileError when the file is unusable:
    it is then kept aside under a name no earlier copy has (house style: settings are never deleted)."""
    path = profile_path()
    try:
        profile = profile_from_dict(json.loads(paths.read_regular_text(path, paths.CONFIG_MAX_BYTES)))
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        aside = paths.keep_aside(path)
        raise ProfileError(f"The saved launch profile could not be used ({exc}): it was kept as {aside.name}. "
                           "Choose the engine and models again in Settings (or the setup wizard).") from None
    profile.settings.api_key = secrets.get_secret(_key_name(profile))  # kept in the OS keyring only
    return profile


def _key_name(profile: Profile) -> str:
    return secrets.remote_api_key_name(profile.engine) if profile.is_remote else secrets.SERVER_API_KEY


def save_profile(profile: Profile) -> Path:
    """Write profile.json atomically (a crash leaves the old file). The API key is never written
    there (``LaunchSettings.to_dict`` drops it): it goes to the OS keyring, and where there is no
    keyring it lives only in the running session's profile."""
    path = profile_path()
    secrets.set_secret(_key_name(profile), profile.settings.api_key)
    data: dict[str, object]
    if profile.is_remote:
        data = {"kind": REMOTE, "url": profile.engine, "label": profile.label}
    else:
        data = {"engine": profile.engine, "settings": profile.settings.to_dict(), "label": profile.label}
    paths.atomic_write_text(path, json.dumps(data, indent=1, sort_keys=True))
    return path
