"""Recording a program's events in memory, for tests and notebooks."""

from __future__ import annotations

import os

from runtime.instrumentation.encoding import END_FRAME, encode_events, encode_header
from runtime.instrumentation.events import Event, decode, freeze
from runtime.instrumentation.registry import install
from runtime.instrumentation.shipper import EventShipper
from runtime.instrumentation.sinks import MemorySink


class Recorder:
    """Records every event of the workers created while it is active, in memory.

    ``with Recorder() as recording: execute(main, workers=2)`` then
    ``recording.events`` (decoded :class:`Event` objects, in the order logged
    per worker).  Activating a recorder replaces any other active logging
    until it exits.
    """

    def __init__(self) -> None:
        """An inactive recorder."""
        self._sink = MemorySink()
        self._pipeline: EventShipper | None = None
        self._previous: EventShipper | None = None

    def __enter__(self) -> Recorder:
        self._pipeline = EventShipper([self._sink])
        self._previous = install(self._pipeline)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._pipeline is not None:
            install(self._previous)
            self._pipeline.close()

    @property
    def events(self) -> list[Event]:
        """Every event recorded so far, decoded."""
        if self._pipeline is not None:
            self._pipeline.flush()
        return [decode(freeze(raw)) for raw in self._sink.raw]

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the recording to ``path`` in the file format."""
        if self._pipeline is not None:
            self._pipeline.flush()
        with open(path, "wb") as handle:
            handle.write(encode_header(0))
            handle.write(encode_events(self._sink.raw))
            handle.write(END_FRAME)
