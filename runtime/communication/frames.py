"""The frames processes of a cluster exchange after the handshake, and the checks of what a peer sent.

A frame is a header (a list whose first element is its kind) and a payload.
The kinds are ``data`` (a batch for one or more workers of the receiving
process), ``credit`` (bytes of the send window given back), ``beat`` (a
heartbeat), ``stop`` (a reason to stop, relayed), ``bye`` (the sender's workers
finished; the payload carries their results) and the shared-memory transport's
``offer``.  Even a peer that proved the token is checked before anything acts
on its header: each ``*_problem`` function says what is wrong with a header of
its kind, or ``None``, once per frame.
"""

from __future__ import annotations

from typing import Any, get_args

from runtime.codec import describe, shown
from runtime.communication import StopKind
from runtime.communication.wire import WireError, decode_value

DATA, BEAT, STOP, BYE, CREDIT = 0, 1, 2, 3, 4
"""The kinds of frames (the shared-memory transport's ``OFFER`` is its own)."""

_STOP_KINDS = frozenset(get_args(StopKind))
_DATA_FIELDS = "a data frame needs a channel, an address, receivers and a path"


def data_problem(header: list[Any], base: int, workers: int) -> str | None:
    """What is wrong with a ``data`` header for a process whose workers are ``base`` to ``base + workers - 1``."""
    if len(header) != 6:
        return "a data frame has 6 fields"
    _, channel, address, receivers, _time, path = header
    # loops rather than all() over generators: this runs for every data frame
    if (
        channel.__class__ is not int
        or address.__class__ is not tuple
        or path.__class__ is not int
        or receivers.__class__ is not list
        or not receivers
    ):
        return _DATA_FIELDS
    for step in address:
        if step.__class__ is not int:
            return _DATA_FIELDS
    # every receiver is checked before any is given the frame (a negative index would reach the last mailbox)
    for receiver in receivers:
        if receiver.__class__ is not int or not 0 <= receiver - base < workers:
            last = base + workers - 1
            return f"a data frame for a worker that is not one of this process's workers ({base} to {last})"
    return None


def credit_problem(header: list[Any]) -> str | None:
    """What is wrong with a ``credit`` header."""
    if len(header) != 2 or header[1].__class__ is not int or header[1] < 0:
        return "a credit frame carries a count of bytes"
    return None


def beat_problem(header: list[Any]) -> str | None:
    """What is wrong with a ``beat`` header: seconds waited, messages sent and arrived, and whether stuck."""
    if len(header) != 5:
        return "a heartbeat has 5 fields"
    _, waiting_for, sent, arrived, stuck = header
    if (
        waiting_for.__class__ is not float
        or waiting_for != waiting_for  # NaN
        or sent.__class__ is not int
        or arrived.__class__ is not int
        or sent < 0
        or arrived < 0
        or stuck.__class__ is not bool
    ):
        return "a heartbeat carries seconds, two counts and a flag"
    return None


def stop_problem(header: list[Any], peers: int) -> str | None:
    """What is wrong with a ``stop`` header in a cluster of ``peers`` workers."""
    if len(header) != 4:
        return "a stop frame has 4 fields"
    _, stop_kind, worker, detail = header
    if (
        stop_kind.__class__ is not str
        or stop_kind not in _STOP_KINDS
        or detail.__class__ is not str
        or not (worker is None or (worker.__class__ is int and 0 <= worker < peers))
    ):
        return f"a stop frame carries a reason, a worker (of {peers}) or None, and text"
    return None


def malformed(process: int, endpoint: object, header: list[Any], why: str) -> WireError:
    """The error for a frame from ``process`` (at ``endpoint``) whose ``header`` is not one this protocol sends."""
    return WireError(f"process {process} ({endpoint}) sent a malformed frame (header {shown(header)}): {why}")


def decode_results(payload: bytes | memoryview, process: int) -> list[Any]:
    """The worker results in the ``bye`` frame of ``process``; :class:`WireError` naming it if there are none."""
    try:
        results = decode_value(payload)
    except WireError as error:
        raise WireError(f"the results process {process} sent with its goodbye do not decode: {error}") from None
    if results.__class__ is not list:
        raise WireError(
            f"process {process} sent {describe(results)} with its goodbye, not the list of its workers' results"
        )
    return results
