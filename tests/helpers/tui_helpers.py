"""Shared pieces for the terminal UI tests: deterministic recordings and a way to wait in a pilot."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from helpers.recording_v1 import header as _header
from helpers.recording_v1 import pack as _pack
from helpers.viz_synthetic import finish, running
from runtime.instrument import Event
from viz.tui.app import TimelyApp
from viz.tui.sources import Replay

ROOT = Path(__file__).resolve().parent.parent.parent


def synthetic_events(done: bool = False) -> list[Event]:
    """Two workers, an input 'numbers' feeding a loop and a probe; finished if ``done``, else stuck on the input."""
    script = running(workers=2, in_flight=3)
    if done:
        finish(script, workers=2)
    return script.events()


def replay_app(done: bool = False, at_end: bool = True, **options: object) -> TimelyApp:
    """A viewer replaying the synthetic recording, opened at its end (or start)."""
    replay = Replay(synthetic_events(done))
    if at_end:
        replay.seek(len(replay))
    return TimelyApp(replay=replay, clock=lambda: 0.0, **options)  # type: ignore[arg-type]


def write_recording(path: Path, events_raw: list[tuple[object, ...]], version: int = 1) -> None:
    """Write raw events to ``path`` in the file format, with a header of the given version."""
    header = _header(0)
    if version != 1:
        import msgpack  # type: ignore[import-untyped]

        header = msgpack.packb({"format": "pytimely-events", "version": version, "process": 0})
    with open(path, "wb") as handle:
        handle.write(header)
        for raw in events_raw:
            handle.write(_pack(raw))


async def wait_until(pilot: object, condition: Callable[[], bool], timeout: float, what: str) -> None:
    """Let the app run until ``condition()`` holds; fail after ``timeout`` seconds saying ``what``."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        await pilot.pause(0.05)  # type: ignore[attr-defined]
