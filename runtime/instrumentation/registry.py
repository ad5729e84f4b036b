"""The process's active pipeline: turning logging on and off, and the logger a new worker gets."""

from __future__ import annotations

import atexit
import os
import threading
from pathlib import Path

from runtime.instrumentation.logger import Instrument
from runtime.instrumentation.shipper import EventShipper
from runtime.instrumentation.sinks import FileSink, Sink, TcpSink

_active: EventShipper | None = None
_active_lock = threading.Lock()


def logger_for(worker: int) -> Instrument | None:
    """The logger a new worker should use, or ``None`` when logging is off (the default)."""
    pipeline = _active
    if pipeline is None:
        return None
    return pipeline.logger(worker)


def logging_active() -> bool:
    """Whether a pipeline is installed (logging was turned on in this process and not stopped)."""
    return _active is not None


def recording_active() -> bool:
    """Whether the installed pipeline records (a file, memory, a viewer), not only feeds observers such as metrics."""
    pipeline = _active
    return pipeline is not None and any(sink.records for sink in pipeline.sinks)


def active_sinks() -> list[Sink]:
    """The sinks of the installed pipeline (none when logging is off)."""
    pipeline = _active
    return [] if pipeline is None else list(pipeline.sinks)


def install(pipeline: EventShipper | None) -> EventShipper | None:
    """Make ``pipeline`` (or nothing) the active one; return the one it replaces, for the caller to close or restore."""
    global _active
    with _active_lock:
        previous, _active = _active, pipeline
    return previous


def stop_logging() -> None:
    """Flush and close the active pipeline (registered with ``atexit`` too)."""
    previous = install(None)
    if previous is not None:
        previous.close()


atexit.register(stop_logging)


def add_sink(sink: Sink) -> EventShipper:
    """Send events to ``sink`` too: through the active pipeline, or a new one installed for it; returns it."""
    global _active
    with _active_lock:
        if _active is None:
            _active = EventShipper([sink])
        else:
            _active.attach(sink)
        return _active


def remove_sink(pipeline: EventShipper, sink: Sink) -> None:
    """Stop sending events to ``sink``; a pipeline left without sinks is stopped and uninstalled."""
    global _active
    if pipeline.detach(sink):
        return
    with _active_lock:
        if _active is pipeline:
            _active = None
    pipeline.close()


def log_path(path: str, process: int, processes: int) -> Path:
    """The file process ``process`` of ``processes`` writes for ``--log path``."""
    target = Path(path)
    if processes <= 1:
        return target
    return target.with_name(f"{target.stem}.{process}{target.suffix}")


def log_sink(spec: str | None, process: int = 0, processes: int = 1) -> Sink | None:
    """The sink ``--log SPEC`` / ``PYTIMELY_LOG=SPEC`` asks for, as process ``process`` of ``processes``, or ``None``.

    ``SPEC`` is ``tcp://HOST:PORT`` (stream to a live viewer), a file path
    (one file per process, see :func:`log_path`), or empty / ``off`` / ``None``
    (no sink).  Raises :class:`~runtime.errors.ConfigurationError` for a malformed spec.
    """
    from runtime.errors import ConfigurationError

    target = _log_target(spec, process, processes)
    if target is None:
        return None
    if isinstance(target, tuple):
        return TcpSink(target[0], target[1], process)
    try:
        return FileSink(target, process)
    except OSError as error:
        raise ConfigurationError(f"--log {str(spec).strip()!r}: cannot write {target}: {error.strerror}") from None


def check_log(spec: str | None, process: int = 0, processes: int = 1) -> None:
    """Refuse, as :func:`log_sink` would, a malformed ``--log SPEC`` or a file that cannot be made; create nothing.

    For a file, its directory must exist and be writable, and the path must not be a directory.
    """
    from runtime.errors import ConfigurationError

    target = _log_target(spec, process, processes)
    if target is None or isinstance(target, tuple):
        return
    folder = target.parent
    problem = (
        f"{target} is a directory"
        if target.is_dir()
        else f"the directory {folder} does not exist"
        if not folder.is_dir()
        else f"the directory {folder} is not writable"
        if not os.access(folder, os.W_OK | os.X_OK)
        else None
    )
    if problem is not None:
        raise ConfigurationError(f"--log {str(spec).strip()!r}: cannot write {target}: {problem}")


def _log_target(spec: str | None, process: int, processes: int) -> tuple[str, int] | Path | None:
    """What ``--log SPEC`` names: ``(host, port)`` of a viewer, this process's file, or ``None`` (logging off)."""
    from runtime.errors import ConfigurationError

    if spec is None or spec.strip() in ("", "off", "0", "none"):
        return None
    spec = spec.strip()
    if spec.startswith("tcp://"):
        host, _, port_text = spec[len("tcp://") :].rpartition(":")
        # ASCII digits only: str.isdigit() takes '²', which int() refuses, and '٣', which it reads as 3
        if not host or not (port_text.isascii() and port_text.isdigit() and 0 < int(port_text) <= 65535):
            raise ConfigurationError(
                f"--log {spec!r}: expected tcp://HOST:PORT with a port from 1 to 65535, for example "
                "tcp://127.0.0.1:51317"
            )
        return host, int(port_text)
    return log_path(spec[len("file:") :] if spec.startswith("file:") else spec, process, processes)


def configure_from(spec: str | None, process: int = 0, processes: int = 1) -> EventShipper | None:
    """Turn logging on as ``--log SPEC`` / ``PYTIMELY_LOG=SPEC`` asks, for workers created from now on.

    ``SPEC`` is read by :func:`log_sink`.  The new pipeline replaces (and
    closes) any active one.  Returns it, or ``None`` when ``SPEC`` turns
    logging off.  Raises :class:`~runtime.errors.ConfigurationError` for a malformed spec.
    """
    sink = log_sink(spec, process, processes)
    if sink is None:
        return None
    pipeline = EventShipper([sink])
    previous = install(pipeline)
    if previous is not None:
        previous.close()
    return pipeline
