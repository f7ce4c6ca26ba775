"""BeeDeck's application settings: one typed dataclass, stored as JSON in ``config_dir()/settings.json``.

No singleton: load once at start-up with :func:`load_settings` and pass the object around. The file
carries a ``schema_version``; :data:`MIGRATIONS` upgrades older files step by step. A file that
cannot be read is moved aside as ``settings.json.corrupt-<time>`` (never deleted) and the defaults
are used, so a bad edit never locks the user out of the app. Fields this BeeDeck does not know (a newer
one's) are kept through a save; a file a newer BeeDeck wrote (a higher ``schema_version``) is left as it is,
not used and never overwritten: :func:`save_settings` raises :class:`NewerSettingsError` instead.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from beedeck.core import paths

log = logging.getLogger(__name__)

SCHEMA_VERSION = 2
FILE_NAME = "settings.json"
GOALS = ("quality", "speed", "context")
THEMES = ("system", "light", "dark")


@dataclass
class AppSettings:
    """Every app-level preference, with its default. Launch options live in ``last_profile``
    (a :meth:`LaunchSettings.to_dict`, which never holds the API key)."""

    first_run_done: bool = False
    last_profile: dict[str, Any] | None = None  # LaunchSettings.to_dict() of the last launch
    last_engine: str | None = None  # binary path of the last launch
    default_engine_id: str | None = None  # EngineRegistry id
    download_dir: str | None = None  # None: paths.models_dir()
    goal: str = "quality"  # recommender goal
    theme: str = "system"
    last_preset: str | None = None
    enter_sends: bool = True  # Enter sends, Shift+Enter breaks the line (False: Ctrl+Enter sends)
    autostart: bool = True  # start the saved profile's server when the app opens
    follow_advice: bool = False  # the toggle follows the learnt fastest mode per prompt kind (opt-in)
    # The releases API engine downloads use: None is api.github.com; a GitHub Enterprise base
    # (https://HOST/api/v3) or a company cache serving the same paths. BEEDECK_RELEASES_API wins over it.
    releases_api: str | None = None
    # A mode switch keeps the other mode's server loaded beside the running one when memory allows
    # (core/engine/speculation/standby.py): switching back loads nothing. Off: every switch restarts the server.
    standby: bool = True
    # File → Connect's last server BeeDeck did not start: its address and name, offered the next time (its API
    # key is in the keyring with the profile, never here).
    last_remote_url: str | None = None
    last_remote_label: str | None = None

    def check(self) -> list[str]:
        """Problems with the values, one line each with the fix; empty when all is well."""
        problems = []
        if self.goal not in GOALS:
            problems.append(f"goal {self.goal!r} is unknown: use one of {', '.join(GOALS)}.")
        if self.theme not in THEMES:
            problems.append(f"theme {self.theme!r} is unknown: use one of {', '.join(THEMES)}.")
        return problems

    def models_folder(self) -> Path:
        return Path(self.download_dir).expanduser() if self.download_dir else paths.models_dir()


def _v1_to_v2(data: dict[str, Any]) -> dict[str, Any]:
    # v1 (early drafts of BeeDeck) called the launch profile "profile" and the goal "recommend_goal".
    out = dict(data)
    if "profile" in out:
        out["last_profile"] = out.pop("profile")
    if "recommend_goal" in out:
        out["goal"] = out.pop("recommend_goal")
    return out


# schema_version N -> function that turns a version-N dict into a version-(N+1) dict
MIGRATIONS: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {1: _v1_to_v2}


def settings_path() -> Path:
    return paths.config_dir() / FILE_NAME


class NewerSettingsError(ValueError):
    """settings.json was written by a newer BeeDeck: it is left as it is, never kept aside or overwritten."""


def migrate(data: dict[str, Any]) -> dict[str, Any]:
    """Bring a stored dict up to :data:`SCHEMA_VERSION`. Raises NewerSettingsError for a newer file."""
    version = int(data.get("schema_version", 1))
    if version > SCHEMA_VERSION:
        raise NewerSettingsError(
            f"settings.json was written by a newer BeeDeck (schema {version}; this one reads up to {SCHEMA_VERSION})"
        )
    while version < SCHEMA_VERSION:
        data = MIGRATIONS[version](data)
        version += 1
    data["schema_version"] = version
    return data


def from_dict(data: dict[str, Any], problems: list[str] | None = None) -> AppSettings:
    """Build settings from a (migrated) dict; unknown keys are ignored, wrong types fall back to
    defaults, and each such repair is appended to ``problems``."""
    problems = problems if problems is not None else []
    defaults = AppSettings()
    clean: dict[str, Any] = {}
    for f in fields(AppSettings):
        if f.name not in data:
            continue
        value, default = data[f.name], getattr(defaults, f.name)
        if f.name == "last_profile":
            ok = value is None or isinstance(value, dict)
        elif isinstance(default, bool):
            ok = isinstance(value, bool)
        elif default is None:
            ok = value is None or isinstance(value, str)
        else:
            ok = isinstance(value, type(default))
        if ok:
            clean[f.name] = value
        else:
            problems.append(f"{f.name} was a {type(value).__name__}, expected like {default!r}: using the default")
    s = AppSettings(**clean)
    problems.extend(s.check())
    if s.goal not in GOALS:
        s.goal = defaults.goal
    if s.theme not in THEMES:
        s.theme = defaults.theme
    for problem in problems:
        log.warning("settings: %s", problem)
    return s


def _set_aside(path: Path, why: str) -> Path:
    aside = paths.keep_aside(path)
    log.warning("settings: %s could not be read (%s); kept as %s, using defaults", path, why, aside.name)
    return aside


def load_settings(path: Path | None = None) -> AppSettings:
    """Read the settings; a missing file gives defaults, a corrupt one is kept aside and gives defaults."""
    return load_settings_checked(path)[0]


def load_settings_checked(path: Path | None = None) -> tuple[AppSettings, str]:
    """The settings, and a sentence for the person at the window when the file had to be repaired
    (kept aside when unreadable, single bad values replaced by defaults); "" when all was well."""
    path = path or settings_path()
    if not path.exists():
        return AppSettings(), ""
    try:
        data = json.loads(paths.read_regular_text(path, paths.CONFIG_MAX_BYTES))
        if not isinstance(data, dict):
            raise ValueError(f"top level is a {type(data).__name__}, not an object")
        problems: list[str] = []
        settings = from_dict(migrate(data), problems)
    except NewerSettingsError as exc:  # an older BeeDeck run after a newer one (a downgrade): keep the file
        log.warning("settings: %s", exc)
        return AppSettings(), (f"BeeDeck's {exc}. It is left as it is: this session uses the defaults and saves no "
                               "change over it. Update BeeDeck, or remove the file to start from defaults.")
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError) as exc:
        aside = _set_aside(path, str(exc))
        return AppSettings(), (f"BeeDeck's settings file could not be read ({exc}): it was kept as {aside.name} "
                               "and the defaults are used.")
    if problems:
        return settings, f"Some of BeeDeck's settings were invalid and were reset: {'; '.join(problems)}."
    return settings, ""


def _unknown_fields(old: dict[str, Any]) -> dict[str, Any]:
    """The fields of a stored (current or older) dict that this BeeDeck does not know: a newer one's."""
    try:
        current = migrate(dict(old))
    except (ValueError, KeyError, TypeError):
        return {}
    known = {f.name for f in fields(AppSettings)} | {"schema_version"}
    return {k: v for k, v in current.items() if k not in known}


def save_settings(settings: AppSettings, path: Path | None = None) -> Path:
    """Write atomically (a crash mid-write leaves the old file), keeping the fields a newer BeeDeck wrote
    there. Secrets never reach this file. A file written by a newer BeeDeck is never overwritten: this
    raises NewerSettingsError, writing nothing, so the caller can say the change is for this session only."""
    path = path or settings_path()
    old = paths.config_object_on_disk(path)
    if old is not None:
        try:
            migrate(dict(old))
        except NewerSettingsError as exc:
            log.warning("settings: %s was written by a newer BeeDeck; not overwritten", path)
            raise NewerSettingsError(f"{exc} and is left as it is: update BeeDeck, or remove the file to save "
                                     "settings with this version") from None
        except (ValueError, KeyError, TypeError):
            pass  # unreadable as settings: replaced, as a damaged file is at load
    data = asdict(settings)
    if isinstance(data.get("last_profile"), dict):
        data["last_profile"] = {k: v for k, v in data["last_profile"].items() if k != "api_key"}
    data = {**(_unknown_fields(old) if old is not None else {}), **data, "schema_version": SCHEMA_VERSION}
    paths.atomic_write_text(path, json.dumps(data, indent=1, sort_keys=True))
    return path


def try_save(settings: AppSettings) -> str | None:
    """:func:`save_settings`; None when saved, else why not (a file that cannot be written, a newer BeeDeck's)."""
    try:
        save_settings(settings)
    except (OSError, NewerSettingsError) as exc:
        return str(exc)
    return None
