"""A process that learns at start-up that the cluster cannot form says so at once, not at the connect deadline.

A process joins a cluster in two halves at once: it connects to every process before it in the hostfile and
accepts every process after it.  When one half fails for good (the peer has another token, another process
count), the other half used to wait for its peers until the deadline (30 s from the command line), and only
then did the process report the error it had known from the first second.  Found starting a 3-process cluster
from the command line with process 1's token wrong: process 1 printed "wrong token" after 30 s.
"""

from __future__ import annotations

import time

import pytest
from helpers.ports import free_ports, refusing_port
from test_cluster import connect_in_thread

from runtime.communication.tcp import Endpoint, HandshakeError, Mesh

DEADLINE = 20.0
"""The connect timeout the failing process is given: it must fail long before."""


def ignore(*_: object) -> None:
    """Frames and losses after the handshake do not matter here."""


def test_a_process_whose_connection_is_refused_for_good_stops_waiting_for_later_peers() -> None:
    endpoints = [Endpoint("127.0.0.1", port) for port in free_ports(3)]
    first = Mesh(0, endpoints, "the cluster's token", ignore, ignore)
    thread, failures = connect_in_thread(first, 4.0)  # process 2 never comes: process 0 fails at its (short) deadline
    wrong = Mesh(1, endpoints, "another token", ignore, ignore)
    started = time.monotonic()
    with pytest.raises(HandshakeError, match="wrong token"):
        wrong.connect(DEADLINE)
    assert time.monotonic() - started < 5.0, "process 1 waited for process 2 after its token was refused"
    thread.join(10.0)
    first.close()
    wrong.close()
    assert not thread.is_alive() and failures, failures


def test_a_process_that_refused_a_misconfigured_peer_stops_connecting_to_earlier_ones() -> None:
    with refusing_port() as absent:
        ports = free_ports(4)
        endpoints = [Endpoint("127.0.0.1", absent), Endpoint("127.0.0.1", ports[0]), Endpoint("127.0.0.1", ports[1])]
        # process 2 started with -n 4: it takes process 1's address for process 0's
        theirs = [endpoints[1], Endpoint("127.0.0.1", ports[2]), endpoints[2], Endpoint("127.0.0.1", ports[3])]
        middle = Mesh(1, endpoints, "token", ignore, ignore)
        other = Mesh(2, theirs, "token", ignore, ignore)
        thread, failures = connect_in_thread(other, 4.0)
        started = time.monotonic()
        with pytest.raises(HandshakeError, match="process 2 of 4"):
            middle.connect(DEADLINE)  # process 0 never answers; process 2's count is wrong
        assert time.monotonic() - started < 5.0, "process 1 kept connecting to process 0 after refusing process 2"
        thread.join(10.0)
        middle.close()
        other.close()
        assert not thread.is_alive() and isinstance(failures[0], HandshakeError), failures
