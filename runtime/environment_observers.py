"""The observers the environment asks for: ``PYTIMELY_LOG`` (a recording or a live viewer) and ``PYTIMELY_METRICS``.

Every way of running workers turns them on the same way, for as long as its
workers run: :func:`~runtime.execute.execute` in this process (worker threads),
each process that :func:`~runtime.launcher.execute_processes` or a cluster
starts (:mod:`runtime.cluster_member`), and the flags of
:func:`~runtime.cluster.execute_from_args` (``--log`` and ``--metrics`` set the
variables).  A recording or an endpoint that is already on in this process
(``viz tui --`` turns logging on first; a program may call
:func:`~runtime.metrics.serve_metrics` itself) is left as it is, and left on;
an endpoint is no recording, so ``PYTIMELY_LOG`` still records beside it.

:func:`recording_processes` brings the events of the processes that
``execute(..., processes=P)`` starts into a :class:`~runtime.instrument.Recorder`
active in the program, which their workers cannot reach.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from runtime.instrument import (
    MemorySink,
    RecordingError,
    active_sinks,
    add_sink,
    log_path,
    log_sink,
    read_raw,
    recording_active,
    remove_sink,
)
from runtime.metrics import current_state, serve_from_environment
from runtime.settings import settings_for_run

LOG_VARIABLE = "PYTIMELY_LOG"
"""The environment variable that turns instrumentation on, as ``--log`` does (see :mod:`runtime.instrument`)."""


@contextmanager
def observers_from_environment(process: int = 0, processes: int = 1) -> Iterator[None]:
    """Record (``PYTIMELY_LOG``) and serve metrics (``PYTIMELY_METRICS``) as the environment asks while the block runs,
    as process ``process`` of ``processes``; turn off, afterwards, only what this call turned on.

    A malformed value is a :class:`~runtime.errors.ConfigurationError` before the block runs.
    """
    sink = None if recording_active() else log_sink(os.environ.get(LOG_VARIABLE), process, processes)
    pipeline = None if sink is None else add_sink(sink)  # beside a metrics endpoint already on, if any

    def stop_recording() -> None:
        if pipeline is not None and sink is not None:
            remove_sink(pipeline, sink)  # ships what the workers logged first
            sink.close()

    try:
        metrics = None if current_state() is not None else serve_from_environment(process)
    except BaseException:
        stop_recording()
        raise
    try:
        yield
    finally:
        if metrics is not None:
            metrics.close()
        stop_recording()


@contextmanager
def recording_processes(processes: int) -> Iterator[None]:
    """While the block starts and runs ``processes`` processes: have them record into files, then add their events
    to the in-memory recordings (a :class:`~runtime.instrument.Recorder`) active in this process, failed run or not.

    Without it a ``Recorder`` around ``execute(main, processes=P)`` stayed empty, silently: the workers run in
    other processes.  Nothing changes when no ``Recorder`` is active, or when ``PYTIMELY_LOG`` already says where
    the processes record.
    """
    sinks = [sink for sink in active_sinks() if isinstance(sink, MemorySink)]
    if not sinks or os.environ.get(LOG_VARIABLE, "").strip() not in ("", "off", "0", "none"):
        yield
        return
    with tempfile.TemporaryDirectory(prefix="pytimely-recording-") as folder:
        path = str(Path(folder) / "run.msgpack")
        try:
            with settings_for_run({LOG_VARIABLE: path}):
                yield
        finally:
            events = []
            for process in range(processes):
                file = log_path(path, process, processes)
                with contextlib.suppress(RecordingError):  # damage never hides how the run ended
                    events.extend(read_raw(file))
            events.sort(key=lambda raw: (raw[3], raw[1], raw[2]))
            for sink in sinks:
                sink.raw.extend(events)
