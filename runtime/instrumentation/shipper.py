"""The process's pipeline: one background thread ships every worker's events to the sinks.

Each worker's :class:`Instrument` appends plain tuples to its own deque (an
atomic operation, no lock).  One background thread per process drains the
deques every few milliseconds, encodes, and hands the batch to the sinks.  A
TCP sink keeps a bounded buffer of encoded chunks and a sender thread: chunks
wait there for the viewer's first connection (so a viewer started after the
program sees everything from the start, up to the bound); when the buffer is
full, because the viewer is slow, late or gone, chunks are dropped and
counted, never waited for.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Sequence
from typing import Any

from runtime.instrumentation.encoding import encode_events
from runtime.instrumentation.logger import Instrument
from runtime.instrumentation.sinks import Sink


class EventShipper:
    """Collects every worker's events in this process and ships them to the sinks off the hot path."""

    def __init__(self, sinks: Sequence[Sink], interval: float = 0.02) -> None:
        """Ship to ``sinks`` every ``interval`` seconds from a background thread."""
        self.sinks = list(sinks)
        self._deques: list[deque[tuple[Any, ...]]] = []
        self._lock = threading.Lock()
        self._interval = interval
        self._stop = threading.Event()
        self._closed = False
        self._sinks_closed = False
        self._detached_drops = 0
        self._thread = threading.Thread(target=self._run, name="timely-log-writer", daemon=True)
        self._thread.start()

    def logger(self, worker: int) -> Instrument:
        """A new logger for ``worker`` whose events this pipeline ships."""
        events: deque[tuple[Any, ...]] = deque()
        with self._lock:
            self._deques.append(events)
        return Instrument(worker, events)

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            self.flush()

    def flush(self) -> None:
        """Encode and write every event logged so far (safe from any thread; nothing once closed)."""
        with self._lock:
            if self._sinks_closed:  # a metrics scrape may still ask: the sinks (a file) are closed
                return
            batch: list[tuple[Any, ...]] = []
            for events in self._deques:
                pop = events.popleft
                for _ in range(len(events)):
                    batch.append(pop())
            if not batch:
                return
            encoded = encode_events(batch) if any(s.needs_bytes for s in self.sinks) else b""
            for sink in self.sinks:
                sink.write(batch, encoded)

    def attach(self, sink: Sink) -> None:
        """Ship events to ``sink`` too, from the next batch on."""
        with self._lock:
            self.sinks.append(sink)

    def detach(self, sink: Sink) -> bool:
        """Ship what is logged so far to ``sink``, then stop; return whether other sinks remain."""
        self.flush()
        with self._lock:
            if sink in self.sinks:
                self.sinks.remove(sink)
                self._detached_drops += sink.dropped
            return bool(self.sinks)

    @property
    def dropped(self) -> int:
        """Events dropped by the sinks so far (those detached since included)."""
        return self._detached_drops + sum(sink.dropped for sink in self.sinks)

    def close(self) -> None:
        """Stop the writer thread, write what remains and close the sinks.  Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._stop.set()
        self._thread.join(timeout=5.0)
        self.flush()
        with self._lock:
            self._sinks_closed = True
        for sink in self.sinks:
            sink.close()
