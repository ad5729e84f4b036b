"""A worker alone in its process watches its shared-memory rings before it parks, and backs off when that fails."""

from __future__ import annotations

import os
import select
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from helpers import eventually
from test_shm_transport import linked_pair

from runtime.communication.process_fabric import CREDIT, ProcessFabric
from runtime.communication.shm_transport import ShmTransport, may_spin, shared_memory_supported
from runtime.communication.wire import frame

pytestmark = pytest.mark.skipif(not shared_memory_supported(), reason="needs Linux memfds and eventfds")


@pytest.fixture
def linked() -> Iterator[tuple[ProcessFabric, ShmTransport, list[tuple[int, Any]]]]:
    """Process 0's fabric (one worker) on the rings to process 1, that worker's spinning allowed."""
    first, second, received = linked_pair()
    fabric = ProcessFabric(0, 2, 1, first.mesh)
    fabric.shm = first
    fabric.use_links()
    fabric.spin = True  # whatever this machine's core count (may_spin is tested below)
    try:
        yield fabric, second, received
    finally:
        first.close()
        second.close()


def test_a_frame_that_comes_before_parking_is_read_without_sleeping_or_a_doorbell(
    linked: tuple[ProcessFabric, ShmTransport, list[tuple[int, Any]]],
) -> None:
    fabric, peer, received = linked
    communicator = fabric.communicators()[0]
    peer.send(0, [frame([CREDIT, 0])])
    communicator.park(5.0)
    assert fabric.shm is not None and fabric.shm.sleeps == 0  # the rings were never told to ring
    communicator.take_activations()
    assert received == [(1, ([CREDIT, 0], b""))]


def test_watches_that_see_nothing_make_the_next_parks_skip_watching(
    linked: tuple[ProcessFabric, ShmTransport, list[tuple[int, Any]]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fabric, peer, received = linked
    links = fabric.shm
    assert links is not None
    looks = [0]
    has_data = links.has_data

    def counted() -> bool:
        looks[0] += 1
        return has_data()

    monkeypatch.setattr(links, "has_data", counted)
    communicator = fabric.communicators()[0]
    watched = []
    for _ in range(8):
        before = looks[0]
        communicator.park(0.0005)
        watched.append(looks[0] > before)
    # a miss skips 2 parks, a second one 4 more
    assert watched == [True, False, False, True, False, False, False, False]
    assert links.sleeps == 8
    peer.send(0, [frame([CREDIT, 0])])
    communicator.park(0.0005)  # the skips are used up: it watches again, and sees the frame without sleeping
    assert links.sleeps == 8
    communicator.take_activations()
    assert received == [(1, ([CREDIT, 0], b""))]
    before = looks[0]
    communicator.park(0.0005)  # a hit: the next park watches at once
    assert looks[0] > before


def test_only_a_worker_alone_in_its_process_with_a_core_for_each_process_on_its_host_spins() -> None:
    assert may_spin(workers=1, processes_on_host=2, cores=2)
    assert not may_spin(workers=2, processes_on_host=2, cores=8)  # it would hold the GIL from its peer thread
    assert not may_spin(workers=1, processes_on_host=4, cores=2)  # it would hold a core from the peer it waits for


def test_a_watch_yields_the_core_between_looks(
    linked: tuple[ProcessFabric, ShmTransport, list[tuple[int, Any]]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """On a busy machine the peer may share this core: watching must let it run, not hold the core for 250 us."""
    fabric, _, _ = linked
    yields = [0]
    sched_yield = os.sched_yield

    def counted() -> None:
        yields[0] += 1
        sched_yield()

    monkeypatch.setattr(os, "sched_yield", counted)
    fabric.communicators()[0].park(0.0005)
    assert yields[0] >= 1


def test_a_park_resets_only_the_doorbells_that_rang(
    linked: tuple[ProcessFabric, ShmTransport, list[tuple[int, Any]]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Resetting a silent doorbell is a failing system call (and an exception) per park: only those that rang are."""
    fabric, peer, received = linked
    fabric.spin = False
    links = fabric.shm
    assert links is not None
    reads = [0]
    eventfd_read = os.eventfd_read

    def counted(fd: int) -> int:
        reads[0] += 1
        return eventfd_read(fd)

    monkeypatch.setattr(os, "eventfd_read", counted)
    communicator = fabric.communicators()[0]
    communicator.park(0.001)
    assert reads[0] == 1  # the worker's own wake-up, cleared before it parks; not the silent doorbell
    writer = threading.Thread(
        target=lambda: (eventually(lambda: fabric.signals[0].parked), peer.send(0, [frame([CREDIT, 0])]))
    )
    writer.start()
    communicator.park(10.0)
    writer.join()
    communicator.take_activations()
    assert received == [(1, ([CREDIT, 0], b""))]
    assert not select.select([links.doorbells[0]], [], [], 0)[0]  # the doorbell that rang was reset
