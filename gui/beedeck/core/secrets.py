"""Secrets (the Hugging Face token, the server's API key) in the OS keyring, never in plain files.

Where no keyring exists (a headless Linux without Secret Service, CI) the functions say so and the
caller keeps the secret for the session only.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping

SERVICE = "beedeck"
HF_TOKEN = "huggingface-token"
SERVER_API_KEY = "server-api-key"

# Secrets BeeDeck reads from its own environment. A child (llama-server, a build, a probe) needs none of
# them: the server gets its key through a 0600 --api-key-file, and a child's environment is readable
# by the user's other processes (/proc/PID/environ) and often ends up in crash reports.
SECRET_ENV = ("BEEDECK_API_KEY", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")


def child_env(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """``env`` (default: this process's environment) without the secrets in :data:`SECRET_ENV`."""
    source = os.environ if env is None else env
    return {k: v for k, v in source.items() if k not in SECRET_ENV}


def remote_api_key_name(url: str) -> str:
    """The keyring entry of the API key of a server BeeDeck did not start (one per normalised URL)."""
    return f"remote-api-key:{url}"


def get_secret(name: str) -> str | None:
    """The stored secret, or None when there is none or no keyring to ask."""
    try:
        import keyring
        import keyring.errors
    except ImportError:
        return None
    try:
        return keyring.get_password(SERVICE, name)
    except keyring.errors.KeyringError:  # NoKeyringError and friends: no secret store here
        return None


def set_secret(name: str, value: str | None) -> bool:
    """Store (or, with None/empty, delete) a secret. False when there is no keyring."""
    try:
        import keyring
        import keyring.errors
    except ImportError:
        return False
    try:
        if value:
            keyring.set_password(SERVICE, name, value)
        else:
            with contextlib.suppress(keyring.errors.PasswordDeleteError):
                keyring.delete_password(SERVICE, name)
    except keyring.errors.KeyringError:
        return False
    return True
