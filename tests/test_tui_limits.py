"""The live viewer's listener bounds how many connections it holds and what it buffers for each."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers import eventually, recording_v1
from helpers.bounds import rss
from helpers.tui_helpers import wait_until
from textual.widgets import Static

from runtime.framing import HEAD
from runtime.instrument import (
    END_FRAME,
    Event,
    FrontiersChanged,
    LocationsDefined,
    OperatorCreated,
    encode_events,
    encode_header,
    read_recording,
)
from viz import limits
from viz.__main__ import main as viz_main
from viz.model import Model
from viz.tui import sources
from viz.tui.app import TimelyApp
from viz.tui.sources import MAX_CONNECTIONS, MAX_PENDING_BYTES, LiveListener, Replay


def test_connections_beyond_the_limit_are_refused_and_counted() -> None:
    listener = LiveListener("127.0.0.1", 0)
    listener.start()
    held = [socket.create_connection(("127.0.0.1", listener.port)) for _ in range(MAX_CONNECTIONS + 3)]
    try:
        eventually(lambda: listener.refused == 3, 10, "three refusals")
        assert sum(1 for c in listener.connections if c.open) == MAX_CONNECTIONS
        assert listener.last_refused is not None and f"{MAX_CONNECTIONS} connections already open" in (
            listener.last_refused
        )
    finally:
        for sock in held:
            sock.close()
        listener.close()


def test_a_connection_without_a_header_is_closed_after_the_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sources, "HEADER_TIMEOUT", 0.5)
    listener = LiveListener("127.0.0.1", 0)
    listener.start()
    idle = socket.create_connection(("127.0.0.1", listener.port))
    slow = socket.create_connection(("127.0.0.1", listener.port))
    try:
        slow.sendall(b"\x85")  # the first byte of a map that never ends
        eventually(lambda: len(listener.connections) == 2 and not any(c.open for c in listener.connections), 10, "")
        assert all("no header within 0.5 s" in (c.error or "") for c in listener.connections)
    finally:
        idle.close()
        slow.close()
        listener.close()


@pytest.mark.parametrize(
    "start",
    [
        # format 2: a frame that declares 100 MiB and never finishes
        pytest.param(lambda: encode_header(0) + HEAD.pack(100 << 20, 0), id="format 2"),
        # format 1: a bin of 100 MiB, never finished
        pytest.param(lambda: recording_v1.header(0) + b"\xc6" + struct.pack("!I", 100 << 20), id="format 1"),
    ],
)
def test_half_sent_events_are_bounded_per_connection(start: Callable[[], bytes]) -> None:
    listener = LiveListener("127.0.0.1", 0)
    listener.start()
    before = rss()
    senders = []
    chunk = b"\0" * (1 << 20)
    try:
        for _ in range(4):
            sock = socket.create_connection(("127.0.0.1", listener.port))
            sock.sendall(start())
            sock.settimeout(0.5)
            senders.append(sock)
        for _ in range(24):
            for sock in senders:
                with contextlib.suppress(OSError):  # the viewer closed it: what this test wants
                    sock.sendall(chunk)
        eventually(lambda: not any(c.open for c in listener.connections), 10, "the connections to close")
        assert [c.error for c in listener.connections] == [
            f"an event larger than the limit of {MAX_PENDING_BYTES:,} bytes"
        ] * 4
        assert rss() - before < 48 << 20, f"the listener grew by {(rss() - before) >> 20} MiB"
    finally:
        for sock in senders:
            sock.close()
        listener.close()


def test_the_header_says_when_the_viewer_refused_a_connection() -> None:
    async def run() -> None:
        listener = LiveListener("127.0.0.1", 0)
        app = TimelyApp(listener=listener, refresh_interval=0.05)
        held: list[socket.socket] = []
        async with app.run_test(size=(160, 24)) as pilot:
            held.extend(socket.create_connection(("127.0.0.1", listener.port)) for _ in range(MAX_CONNECTIONS + 1))
            await wait_until(pilot, lambda: listener.refused == 1, 10, "the refusal")
            await pilot.pause(0.2)
            status = str(app.query_one("#status2", Static).render())
            assert f"{MAX_CONNECTIONS} connection(s) open" in status, status
            assert "refused 1 (127.0.0.1:" in status and "connections already open" in status, status
            for sock in held:
                sock.close()

    asyncio.run(run())


def test_scopes_nested_1000_deep_by_address_are_cut_at_the_depth_limit_and_the_viewer_lives(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Found by the viewer audit: 1,000 scopes each inside the last (addresses (0,), (0, 1), (0, 1, 1), ...)
    made ``python -m viz dot`` end in RecursionError and the terminal viewer die drawing its scope tree."""
    raws: list[tuple[object, ...]] = [
        (1, 0, depth, 0.0, (0,) + (1,) * (depth - 1), f"s{depth}", 1, 1, ((0,),), "integer") for depth in range(1, 1001)
    ]
    path = tmp_path / "deep.msgpack"
    path.write_bytes(encode_header(0) + encode_events(raws) + END_FRAME)
    assert viz_main(["dot", str(path), "-o", str(tmp_path / "deep.dot")]) == 0, capsys.readouterr().err
    events: list[Event] = read_recording(path).events
    model = Model.from_events(events)
    assert max(map(len, model.operators)) == limits.MAX_DEPTH
    assert model.over_limit == 1000 - limits.MAX_DEPTH
    replay = Replay(events)
    replay.seek(len(replay))

    async def run() -> None:
        app = TimelyApp(replay=replay, clock=lambda: 0.0)
        async with app.run_test(size=(100, 30)) as pilot:
            for pane in "12345":
                await pilot.press(pane)
                await pilot.pause()
            assert app.errors == []

    asyncio.run(run())


def test_the_replays_copies_hold_about_as_many_entries_as_the_recording_has_events() -> None:
    """Found by the viewer audit: a replay copied its whole state every 2,000 events, so a recording whose state
    grows with it (each frontier change at a new time) was copied quadratically: 200,000 such events took
    1 GB and 4 minutes before ``viz tui --replay`` opened, 10**6 would not have fitted."""
    count = 20_000
    events: list[Event] = [
        OperatorCreated(0, 1, 0.0, (0,), "dataflow", 0, 0, (), "integer"),
        OperatorCreated(0, 2, 0.0, (0, 1), "map", 1, 1, ((0,),), None),
        LocationsDefined(0, 3, 0.0, (0,), ((1, 0, True), (1, 0, False))),
    ]
    events += [FrontiersChanged(0, 10 + i, 0.001 * i, (0,), ((0, i, 1),)) for i in range(count)]
    replay = Replay(events, checkpoint_every=100)
    replay.seek(len(replay))
    copied = sum(
        len(times) for state in replay._checkpoints.values() for times in state.model.view().frontier_counts.values()
    )
    assert copied <= 3 * count  # was 2,009,400: 200 copies of up to 20,000 times each
    replay.seek(12_345)  # back, from a copy
    fresh = Replay(events, checkpoint_every=100)
    fresh.seek(12_345)
    assert replay.state.model.view().frontier_counts == fresh.state.model.view().frontier_counts
    assert len(replay.state.model.view().frontier(((0,), 1, 0, True))) == 12_345 - 3
