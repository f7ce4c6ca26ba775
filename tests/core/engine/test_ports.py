"""free_port on IPv4, IPv6 and host names: the port a server on that host could take."""

from __future__ import annotations

import socket

import pytest

from beedeck.core.engine.ports import HostError, free_port


@pytest.mark.parametrize(("host", "family"), [("127.0.0.1", socket.AF_INET), ("0.0.0.0", socket.AF_INET),
                                              ("localhost", socket.AF_INET), ("::1", socket.AF_INET6),
                                              ("::", socket.AF_INET6), ("[::1]", socket.AF_INET6)])
def test_free_port_binds_the_family_of_the_host(host: str, family: socket.AddressFamily) -> None:
    port = free_port(host)
    address = host.strip("[]") if family == socket.AF_INET6 else "127.0.0.1"
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.bind((address, port))  # free there (before: '::' raised, IPv4 only)


def test_free_port_says_when_a_host_name_does_not_resolve() -> None:
    with pytest.raises(HostError, match="'no-such-host.invalid' cannot be resolved"):
        free_port("no-such-host.invalid")


def test_free_port_says_when_the_address_is_not_this_machines() -> None:
    with pytest.raises(HostError, match="not an address of this machine"):
        free_port("192.0.2.77")  # TEST-NET-1: never assigned to a host


# -- the port rule every launch follows ----------------------------------------------------------


def test_the_rule_reads_port_0_as_its_default_and_claims_only_when_asked() -> None:
    from beedeck.core.engine.launch_settings import DEFAULT_PORT
    from beedeck.core.engine.ports import ANY_FREE, SHOWN, PortChoice, PortRule, app_rule

    assert SHOWN.choose("127.0.0.1", 0) == PortChoice(DEFAULT_PORT, DEFAULT_PORT)  # the form: never --port 0
    assert SHOWN.choose("127.0.0.1", 9000) == PortChoice(9000, 9000)
    any_port = ANY_FREE.choose("127.0.0.1", 0)  # the CLI: any free port, found now
    assert any_port.wanted == 0 and any_port.used not in (0, DEFAULT_PORT) and any_port.note is None
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        busy = held.getsockname()[1]
        assert ANY_FREE.choose("127.0.0.1", busy) == PortChoice(busy, busy)  # a port given to the CLI: as given
        assert SHOWN.choose("127.0.0.1", busy) == PortChoice(busy, busy)  # judged, not claimed
        moved = app_rule(busy).choose("127.0.0.1", 0)  # the app's default port, taken by another program
        assert moved.wanted == busy and moved.used != busy and moved.note and f"Port {busy} is taken" in moved.note
        assert app_rule(busy, freed=[busy]).choose("127.0.0.1", 0) == PortChoice(busy, busy)  # ours: stops first
        assert PortRule(default=busy + 1, claim=True).choose("127.0.0.1", 0).wanted == busy + 1
    with pytest.raises(HostError, match="cannot be resolved"):
        ANY_FREE.choose("no-such-host.invalid", 0)
