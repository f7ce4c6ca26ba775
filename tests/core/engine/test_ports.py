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
