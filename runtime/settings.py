"""Every ``PYTIMELY_*`` setting of the runtime, checked before any work starts, whatever runs the workers.

Each setting is read where it is used, and some are used only by processes
(the transport, the rings, the send window) or only by worker threads (where
they run): read there alone, a wrong value was refused at some worker counts and
ignored at others, so a job tried on threads failed only once run on a cluster.
:func:`check_settings` reads them all when :func:`runtime.execute`,
:func:`runtime.launcher.execute_processes` or a cluster process starts, so a
wrong value is a :class:`~runtime.errors.ConfigurationError` naming the
setting, what it got and what it takes, the same at 1 worker, on threads and on
processes.  An empty value means the setting is unset.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from numbers import Real

from runtime.audit import AUDIT_VARIABLE, audit_setting
from runtime.communication.process_fabric import SEND_WINDOW_VARIABLE, send_window_from
from runtime.communication.shm_transport import RING_VARIABLE, TRANSPORT_VARIABLE, ring_capacity_from, transport_from
from runtime.communication.wire import MAX_FRAME_SETTING, max_frame_from
from runtime.errors import ConfigurationError
from runtime.thread_cores import CORES_VARIABLE, cores_from
from scopes.native import PURE_VARIABLE, pure_requested

__all__ = ["check_settings", "check_stall_timeout", "settings_for_run"]


def check_settings(environ: Mapping[str, str] | None = None) -> None:
    """Refuse a wrong value of any runtime setting in ``environ`` (default ``os.environ``), naming it.

    Raises :class:`~runtime.errors.ConfigurationError` for the first wrong one.
    """
    env = os.environ if environ is None else environ
    transport_from(env.get(TRANSPORT_VARIABLE))
    ring_capacity_from(env.get(RING_VARIABLE))
    send_window_from(env.get(SEND_WINDOW_VARIABLE))
    max_frame_from(env.get(MAX_FRAME_SETTING))
    cores_from(env.get(CORES_VARIABLE))
    audit_setting(env.get(AUDIT_VARIABLE))
    if pure_requested(env.get(PURE_VARIABLE)) is None:  # read by scopes at import, which cannot raise this
        raise ConfigurationError(
            f"{PURE_VARIABLE} must be 1 (or true, yes, on) to ignore a compiled build, or 0 (or false, no, off, "
            f"or unset) to use one when it is current; got {env.get(PURE_VARIABLE)!r}"
        )


def check_stall_timeout(
    stall_timeout: object, caller: str = "execute", name: str = "stall_timeout", optional: bool = True
) -> None:
    """Refuse a ``stall_timeout`` (or another of the stall settings, ``name``) that is not a number of seconds > 0
    (a ``bool`` is not one), nor ``None`` when it is ``optional``."""
    if stall_timeout is None and optional:
        return
    if isinstance(stall_timeout, bool) or not isinstance(stall_timeout, Real) or not float(stall_timeout) > 0:
        none = " or None" if optional else ""
        raise ConfigurationError(f"{caller} needs {name} > 0 (a number of seconds){none}, got {stall_timeout!r}")


@contextmanager
def settings_for_run(values: Mapping[str, str | None]) -> Iterator[None]:
    """Set each setting of ``values`` that has a value (``None``: leave it as it is) while the block runs, for
    the processes it starts to read; then restore what the environment held, so that a later run of the same
    program does not inherit them."""
    before = {name: os.environ.get(name) for name, value in values.items() if value is not None}
    for name in before:
        os.environ[name] = str(values[name])
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
