"""The launch profile: which engine binary to run with which launch settings, saved as profile.json.

The API key is never written to the file: it lives in the OS keyring (``beedeck.core.secrets``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from beedeck.core import paths, secrets
from beedeck.core.engine.launch_settings import LaunchSettings


@dataclass
class Profile:
    """What to launch: an engine binary and its settings (the starter, or what Settings saved)."""

    engine: str
    settings: LaunchSettings
    label: str = ""


def profile_path() -> Path:
    """Where Settings / the setup wizard save the launch profile (engine + LaunchSettings)."""
    return paths.config_dir() / "profile.json"


def load_saved_profile() -> Profile | None:
    path = profile_path()
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        settings = LaunchSettings.from_dict(data["settings"])
        settings.api_key = secrets.get_secret(secrets.SERVER_API_KEY)  # kept in the OS keyring only
        return Profile(str(data["engine"]), settings, str(data.get("label", "")))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError):
        # A corrupt profile is kept aside, never silently deleted (house-style: settings).
        path.replace(path.with_name(path.name + ".corrupt"))
        return None


def save_profile(profile: Profile) -> Path:
    """Write profile.json atomically (a crash leaves the old file). The API key is never written
    there (``LaunchSettings.to_dict`` drops it): it goes to the OS keyring, and where there is no
    keyring it lives only in the running session's profile."""
    path = profile_path()
    secrets.set_secret(secrets.SERVER_API_KEY, profile.settings.api_key)
    data = {"engine": profile.engine, "settings": profile.settings.to_dict(), "label": profile.label}
    paths.atomic_write_text(path, json.dumps(data, indent=1, sort_keys=True))
    return path
