"""The tests' ports (helpers/ports.py): below the ephemeral range, one slice per xdist worker, refused when held."""

from __future__ import annotations

import socket

import pytest
from helpers.ports import HIGH, LOW, free_ports, refusing_port, worker_slice


def test_the_workers_slices_are_disjoint_and_below_the_ephemeral_range() -> None:
    with open("/proc/sys/net/ipv4/ip_local_port_range") as ranges:
        assert int(ranges.read().split()[0]) >= HIGH  # Linux's default is 32768-60999
    slices = [set(worker_slice(f"gw{index}", "4")) for index in range(4)]
    assert all(len(ports) >= 3000 for ports in slices)
    assert set.union(*slices) <= set(range(LOW, HIGH)) and sum(map(len, slices)) == len(set.union(*slices))
    assert worker_slice("", "1") == worker_slice("master", "") == range(LOW, HIGH)


def test_free_ports_are_distinct_free_and_consecutive_when_asked() -> None:
    ports = free_ports(5)
    assert len(set(ports)) == 5 and all(port in worker_slice() for port in ports)
    base = free_ports(3, consecutive=True)[0]
    servers = [socket.create_server(("127.0.0.1", port)) for port in [*ports, base, base + 1, base + 2]]
    for server in servers:
        server.close()


def test_a_held_port_refuses_connections_and_cannot_be_bound() -> None:
    with refusing_port() as port:
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=5).close()
        with pytest.raises(OSError):
            socket.create_server(("127.0.0.1", port)).close()  # SO_REUSEADDR on this side only
