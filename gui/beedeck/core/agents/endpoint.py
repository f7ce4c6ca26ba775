"""The server a coding agent talks to: its URLs, its model alias, its context, whether its chat template
renders tools, and how the key is given (never its value: a command that prints it, in a form that keeps a
key the user already exported)."""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from dataclasses import dataclass

from beedeck.core import secrets
from beedeck.core.engine.alias import model_alias
from beedeck.core.engine.argv import is_loopback
from beedeck.core.engine.launch_settings import DEFAULT_PORT, LaunchSettings

KEY_ENV = "BEEDECK_API_KEY"  # the variable configs name where the key is needed (never its value)
# llama-server without --api-key accepts any key; clients that insist on one get this (no secret).
NO_KEY = "beedeck-local"


def beedeck_command() -> list[str]:
    """How a client's shell (apiKeyHelper, $(...)) runs BeeDeck's CLI: the installed ``beedeck``, else
    this Python with ``-m beedeck`` (a source checkout)."""
    found = shutil.which("beedeck")
    if found and not os.environ.get("BEEDECK_AGENT_CLI_FROM_PYTHON"):
        return [found]
    return [sys.executable, "-m", "beedeck"]


@dataclass(frozen=True)
class Endpoint:
    """One server seen from an agent. ``key_required``: the server was started with ``--api-key``
    (a LAN-exposed server keeps it); the key itself stays in the keyring (:func:`api_key`)."""

    host: str
    port: int
    model: str
    ctx_size: int
    key_required: bool = False
    jinja: bool = True
    tools: bool | None = None  # the chat template renders tools (/props chat_template_caps); None: unknown

    @property
    def base_url(self) -> str:
        """Scheme, host and port: the Anthropic-style base (clients add /v1/messages)."""
        host = "127.0.0.1" if self.host in ("0.0.0.0", "::", "") else self.host
        if ":" in host and not host.startswith("["):
            host = f"[{host}]"
        return f"http://{host}:{self.port}"

    @property
    def openai_url(self) -> str:
        """The OpenAI-style base (clients add /chat/completions)."""
        return self.base_url + "/v1"

    @property
    def is_local(self) -> bool:
        return is_loopback(self.host)

    def key_command(self) -> str:
        """The shell words that print the key from the keyring: ``beedeck agent key``."""
        return shlex.join([*beedeck_command(), "agent", "key"])

    def key_fill(self, var: str) -> str:
        """``VAR="${VAR:-$(beedeck agent key)}" ``: the key from BeeDeck unless the user exported VAR already
        (a key they set is never overwritten)."""
        return f'{var}="${{{var}:-$({self.key_command()})}}" '

    def key_env_prefix(self) -> str:
        """What to put before a client's command so it gets the key without it being typed or stored."""
        return self.key_fill(KEY_ENV) if self.key_required else ""


def endpoint_from_settings(settings: LaunchSettings, port: int | None = None) -> Endpoint:
    """The endpoint of a server launched with ``settings`` (``port``: the one it really listens on), as the
    settings say: :mod:`beedeck.core.agents.running` reads what a running server really gives."""
    return Endpoint(
        host=settings.host,
        port=port or settings.port or DEFAULT_PORT,
        model=model_alias(settings.target),
        ctx_size=settings.ctx_size,
        key_required=bool(settings.api_key) or not is_loopback(settings.host),
        jinja=settings.jinja,
    )


def api_key() -> str | None:
    """The server's API key from the OS keyring (None when none is stored or there is no keyring)."""
    return secrets.get_secret(secrets.SERVER_API_KEY)
