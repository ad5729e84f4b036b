"""Live mode's intake: what the listener received, folded into one model per program run."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable

from runtime.instrument import RecordingError
from viz.tui.adapter import TuiState
from viz.tui.ingest import apply_raw
from viz.tui.sources import Connection, LiveListener


class Run:
    """One program run seen live: its own model, and the connections (one per process) it came on.

    Connections that overlap in time belong to one run (the processes of one
    program), and so does a reconnection from a process of the newest run
    (same process id); otherwise a connection that arrives once every
    connection of the newest run has closed, or that repeats a process index
    the newest run already has, is a new program: a new run.  Runs never share a model, so a second
    program's operators are never grafted onto the first's.
    """

    def __init__(self, number: int) -> None:
        """Run ``number`` (from 1), empty."""
        self.number = number
        self.state = TuiState(0.25)
        self.connections: list[Connection] = []


class LiveFeed:
    """The runs seen live, and the rate, lag and losses of what the listener delivers."""

    def __init__(
        self, listener: LiveListener, clock: Callable[[], float], on_new_run: Callable[[Run, Connection], None]
    ) -> None:
        """Fold what ``listener`` receives into runs; call ``on_new_run`` when a connection starts a new one."""
        self.listener = listener
        self.runs: list[Run] = [Run(1)]
        """One entry per program run that connected, oldest first (see :class:`Run`)."""
        self.lag = 0.0
        """The age of the oldest data not on screen yet when the last :meth:`take` began."""
        self.ingested = 0
        self._clock = clock
        self._on_new_run = on_new_run
        self._rate_samples: deque[tuple[float, int]] = deque(maxlen=64)
        self._reported_drops: set[int] = set()

    def run_for(self, connection: Connection) -> Run:
        """The run a connection belongs to: a program's processes overlap; a later program starts a new run."""
        for run in self.runs:
            if connection in run.connections:
                return run
        current = self.runs[-1]
        others = [c for c in current.connections if c is not connection]
        reconnected = connection.pid is not None and connection.pid in {c.pid for c in others}
        if (
            others
            and not reconnected
            and (
                not any(c.open for c in others)
                or (connection.process is not None and connection.process in {c.process for c in others})
            )
        ):
            current = Run(len(self.runs) + 1)
            self.runs.append(current)
            self._on_new_run(current, connection)
        current.connections.append(connection)
        return current

    def take(self, budget: float) -> int:
        """Fold what the listener queued into the runs' states for at most ``budget`` seconds; return the events."""
        listener = self.listener
        started = time.perf_counter()
        took = 0
        self.lag = listener.lag  # the age of the oldest data not on screen yet, before catching up
        while time.perf_counter() - started < budget:
            batches = listener.take(20_000)
            if not batches:
                break
            for connection, raws in batches:
                run = self.run_for(connection)
                try:
                    apply_raw(run.state, raws)
                except (RecordingError, ValueError, TypeError, IndexError, KeyError) as error:
                    # A malformed event ends what this connection can tell; the others go on.
                    connection.error = connection.error or f"not a pytimely event stream ({error})"
                took += len(raws)
        self.ingested += took
        return took

    def newly_dropped(self) -> list[Connection]:
        """The connections that dropped before their workers shut down, each returned once."""
        dropped = []
        for connection in self.listener.connections:
            if connection.dropped_early and id(connection) not in self._reported_drops:
                self._reported_drops.add(id(connection))
                dropped.append(connection)
        return dropped

    def sample(self, now: float) -> None:
        """Note how many events had arrived by ``now``, for :meth:`events_per_second`."""
        self._rate_samples.append((now, self.listener.received))

    def events_per_second(self) -> float:
        """Events received per second over the last second or so."""
        samples = self._rate_samples
        if len(samples) < 2:
            return 0.0
        now, latest = samples[-1]
        for then, count in samples:
            if now - then <= 1.5:
                return (latest - count) / (now - then) if now > then else 0.0
        return 0.0

    def connection_text(self, run_index: int) -> str:
        """The state of run ``run_index``'s connections, for the status line."""
        listener = self.listener
        connections = list(self.runs[run_index].connections)
        if run_index == len(self.runs) - 1:  # and those that failed before sending any event
            assigned = {id(c) for run in self.runs for c in run.connections}
            connections += [c for c in listener.connections if id(c) not in assigned]
        refused = f", refused {listener.refused} ({listener.last_refused})" if listener.refused else ""
        if not connections:
            return f"waiting for a program on {listener.address}{refused}"
        newer = len(self.runs) - 1 - run_index
        if newer:
            return f"earlier run ({newer} newer; ']' shows it){refused}"
        open_ = sum(1 for c in connections if c.open)
        lost = [c for c in connections if c.dropped_early]
        parts = [f"{open_} connection(s) open"]
        if lost:
            reasons = {c.error or "closed before its workers shut down" for c in lost}
            parts.append(f"{len(lost)} dropped ({'; '.join(sorted(reasons))})")
        elif not open_:
            parts.append("program ended")
        return ", ".join(parts) + refused
