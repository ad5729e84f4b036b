"""The settings every process of a cluster must share, carried by the handshake and compared there.

Some settings are read by each process for itself, yet work only when every
process has the same value:

- the send window (``$PYTIMELY_SEND_WINDOW``): a receiver returns credit at
  thresholds of its own window, so a sender with a smaller one waits for the
  heartbeat's credit at every turn (a run 250 times slower, and no error);
- the frame limit (``$PYTIMELY_MAX_FRAME_BYTES``): a sender checks a frame
  against its own limit and a receiver against its own, so a higher one
  somewhere fails only once a large frame arrives;
- the worker threads per process (``-w/--workers``): worker ``w`` runs in
  process ``w // W``, so processes with another ``W`` route records to workers
  that are not there.

Every process sends its values (:class:`ClusterSettings`) in the handshake,
as plain integers that are compared only once the peer has proved the token.
:func:`disagreement` describes what differs (these settings, and string
hashing, ``PYTHONHASHSEED``, which the handshake compares too), naming each
setting, both values and both processes.  The settings that need not agree are left out: the
transport (a pair that either process puts on TCP uses TCP), the size of the
rings (each process sizes the rings it reads), the cores of worker threads,
the audit, the compiled build, metrics and logs (each a process's own).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from runtime.communication import wire
from runtime.communication.byte_sizes import byte_setting
from runtime.communication.hostfile import Endpoint

DEFAULT_SEND_WINDOW = 8 << 20
"""Bytes of encoded data one process may have sent to another that its workers have not pulled yet."""
SEND_WINDOW_VARIABLE = "PYTIMELY_SEND_WINDOW"
"""The environment variable that sets the send window in bytes (e.g. ``65536``, ``64K``, ``8M``)."""
MIN_SEND_WINDOW = 1 << 16
"""The smallest send window accepted."""
LARGEST_SENT = (1 << 64) - 1
"""The largest value a handshake carries (msgpack's largest integer): a send window above it is sent as it, and
compared as it (no window of that size ever fills)."""


def send_window_from(text: str | None) -> int:
    """The send window in bytes that ``text`` (``$PYTIMELY_SEND_WINDOW``) asks for; the default if unset."""
    return byte_setting(SEND_WINDOW_VARIABLE, text, DEFAULT_SEND_WINDOW, MIN_SEND_WINDOW, None, "65536, 64K or 8M")


@dataclass(frozen=True)
class ClusterSettings:
    """The values of one process for the settings every process of its cluster must share."""

    workers: int
    """Worker threads per process (``-w/--workers``)."""
    send_window: int
    """Bytes in flight to each other process (``$PYTIMELY_SEND_WINDOW``)."""
    max_frame: int
    """The largest frame sent or accepted (``$PYTIMELY_MAX_FRAME_BYTES``)."""

    @classmethod
    def of_this_process(cls, workers: int = 1, send_window: int | None = None) -> ClusterSettings:
        """This process's values: ``send_window`` (default: ``$PYTIMELY_SEND_WINDOW``) and the frame limit in
        force (read once, when the wire module was imported)."""
        if send_window is None:
            send_window = send_window_from(os.environ.get(SEND_WINDOW_VARIABLE))
        return cls(workers, send_window, wire.MAX_FRAME)

    def fields(self) -> list[int]:
        """The values as the handshake carries them, in the order of :data:`SETTINGS`."""
        return [min(getattr(self, setting.attribute), LARGEST_SENT) for setting in SETTINGS]


def _bytes(value: int) -> str:
    """``65536 bytes (64 KiB)``: the count as given, and in the largest binary unit that divides it."""
    for shift, unit in ((30, "GiB"), (20, "MiB"), (10, "KiB")):
        if value >= 1 << shift and value % (1 << shift) == 0:
            return f"{value} bytes ({value >> shift} {unit})"
    return f"{value} bytes"


@dataclass(frozen=True)
class Setting:
    """One setting that must agree: how to name it, show its values and say how to set it."""

    attribute: str
    """Its field of :class:`ClusterSettings`."""
    name: str
    """What it is, in words."""
    source: str
    """Where a process takes it from: an environment variable (``$NAME``) or a flag."""
    show: Callable[[int], str]
    """A value, in words."""
    advice: str
    """What to do when the processes disagree."""


SETTINGS = (
    Setting(
        "workers",
        "number of worker threads per process",
        "-w/--workers",
        str,
        "start every process with the same -w/--workers",
    ),
    Setting(
        "send_window",
        "send window",
        f"${SEND_WINDOW_VARIABLE}",
        _bytes,
        f"set {SEND_WINDOW_VARIABLE} to the same value in every process, or in none (then it is "
        f"{_bytes(DEFAULT_SEND_WINDOW)})",
    ),
    Setting(
        "max_frame",
        "frame limit",
        f"${wire.MAX_FRAME_SETTING}",
        _bytes,
        f"set {wire.MAX_FRAME_SETTING} to the same value in every process, or in none (then it is "
        f"{_bytes(wire.DEFAULT_MAX_FRAME)})",
    ),
)
"""The settings compared, in the order the handshake carries them."""


def disagreement(
    mine: ClusterSettings,
    theirs: list[Any],
    hashes_alike: bool,
    me: tuple[int, Endpoint],
    peer: tuple[int, Endpoint],
) -> str | None:
    """What differs between this process (``me``: its index and address) and a ``peer``, as one sentence naming
    each setting that differs, both values and both processes; ``None`` if nothing does.

    ``mine`` are this process's settings, ``theirs`` the peer's handshake fields (see
    :meth:`ClusterSettings.fields`); ``hashes_alike`` whether both hash strings alike (``PYTHONHASHSEED``).
    """
    problems = []
    if not hashes_alike:
        problems.append(
            f"process {peer[0]} hashes strings differently from process {me[0]}, so exchange would route records "
            "inconsistently: set PYTHONHASHSEED to the same value (e.g. 0) in every process"
        )
    for setting, ours, their in zip(SETTINGS, mine.fields(), theirs, strict=True):
        if ours != their:
            problems.append(
                f"the {setting.name} ({setting.source}) is {setting.show(ours)} in process {me[0]} and "
                f"{setting.show(their)} in process {peer[0]}: {setting.advice}"
            )
    if not problems:
        return None
    return (
        f"process {me[0]} ({me[1]}) and process {peer[0]} ({peer[1]}) were started with different settings, which "
        f"must be the same in every process of a cluster: {'; and '.join(problems)}"
    )
