import os

import pytest

from beedeck.core.secrets import SECRET_ENV, child_env


def test_child_env_drops_every_secret_and_keeps_the_rest(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in SECRET_ENV:
        monkeypatch.setenv(name, "secret")
    monkeypatch.setenv("BEEDECK_HOME", "/somewhere")
    env = child_env()
    assert not set(SECRET_ENV) & set(env)
    assert env["BEEDECK_HOME"] == "/somewhere" and env["PATH"] == os.environ["PATH"]
    assert child_env({"BEEDECK_API_KEY": "k", "LANG": "C"}) == {"LANG": "C"}
