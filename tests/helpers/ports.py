"""Ports for the tests' servers that other tests, and other programs on the machine, do not take meanwhile.

A port probed free and released is bound later by the process under test, often a second or more later (a new
interpreter, a JVM). In between, two things can take it:

- any connection opened on the machine, if the port is in Linux's ephemeral range (32768-60999): the kernel gives
  outgoing connections, and every ``bind(("...", 0))``, ports from there. The ports here are drawn below it.
- another test probing at the same moment: under pytest-xdist each worker draws from a slice of its own
  (``$PYTEST_XDIST_WORKER`` of ``$PYTEST_XDIST_WORKER_COUNT``), and a worker runs one test at a time.

A port that must refuse connections is held by :func:`refusing_port`: bound and not listening, for as long as the
test uses it, so that no one can listen there.
"""

from __future__ import annotations

import os
import random
import socket
from collections.abc import Iterator
from contextlib import contextmanager

LOW = 20000
"""The lowest port drawn."""
HIGH = 32768
"""The first port of Linux's ephemeral range (``/proc/sys/net/ipv4/ip_local_port_range``): drawn below it."""


def worker_slice(worker: str | None = None, workers: str | None = None) -> range:
    """The ports this pytest-xdist worker draws from (all of ``LOW..HIGH`` without xdist)."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "") if worker is None else worker
    workers = os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") if workers is None else workers
    count = int(workers) if workers.isdigit() and int(workers) > 0 else 1
    index = int(worker[2:]) % count if worker.startswith("gw") and worker[2:].isdigit() else 0
    width = (HIGH - LOW) // count
    return range(LOW + index * width, LOW + (index + 1) * width)


def _family(host: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in host else socket.AF_INET


def _all_free(ports: list[int], host: str) -> bool:
    """Whether every port can be bound on ``host`` now (each bound at once, without ``SO_REUSEADDR``: a port left
    in TIME_WAIT by an earlier test counts as taken)."""
    sockets: list[socket.socket] = []
    try:
        for port in ports:
            sock = socket.socket(_family(host), socket.SOCK_STREAM)
            sockets.append(sock)
            sock.bind((host, port))
    except OSError:
        return False
    finally:
        for sock in sockets:
            sock.close()
    return True


def free_ports(count: int, host: str = "127.0.0.1", consecutive: bool = False) -> list[int]:
    """``count`` distinct ports free on ``host`` now, from this worker's slice below the ephemeral range.

    ``consecutive``: ``base .. base + count - 1``, for a program that takes a base port and adds its process index.
    """
    ports = worker_slice()
    for _ in range(200):
        if consecutive:
            base = random.randrange(ports.start, ports.stop - count + 1)
            drawn = list(range(base, base + count))
        else:
            drawn = random.sample(ports, count)
        if _all_free(drawn, host):
            return drawn
    raise RuntimeError(f"no {count} free port(s) found in {ports.start}-{ports.stop - 1} on {host}")


def free_port(host: str = "127.0.0.1") -> int:
    """One port free on ``host`` now (see :func:`free_ports`)."""
    return free_ports(1, host)[0]


@contextmanager
def refusing_port(host: str = "127.0.0.1") -> Iterator[int]:
    """A port where connections are refused while the block runs: bound, never listening, so no one else listens.

    Without ``SO_REUSEADDR``: Linux lets a second socket bind a port only if both set it.
    """
    with socket.socket(_family(host), socket.SOCK_STREAM) as holder:
        holder.bind((host, 0))
        yield int(holder.getsockname()[1])
