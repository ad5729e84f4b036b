"""The connecting side of forming the mesh: join every lower peer at once, whichever of them is missing.

Process ``i`` of a cluster connects to every process ``j < i``
(:meth:`runtime.communication.tcp.Mesh.connect`).  :func:`join_lower_peers`
has one job: try every one of those peers at the same time, each on its own
thread that retries it (one short attempt after another) until it has joined,
the mesh has failed or the deadline has passed.  A peer that never starts
therefore keeps no other from joining: every peer that is up is joined, and
its handshake (with the check of the settings every process must share, see
:mod:`runtime.communication.agreement`) is done, whoever is missing.  At the
deadline the :class:`~runtime.errors.ConnectTimeout` names every peer never
reached, each with the last error of trying it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from runtime.errors import ConnectTimeout, SettingsMismatch

RETRY_PAUSE = 0.05
"""Seconds a connecting thread waits after a failed attempt before it tries its peer again."""
JOIN_MARGIN = 10.0
"""Seconds past the deadline the connecting threads are waited for: an attempt under way at the deadline ends
within its own bounds (a connect's timeout, a handshake step's), well within this."""


class Outcome:
    """What the connecting threads found, each of its fields written under :attr:`lock`."""

    def __init__(self) -> None:
        """Nothing found yet."""
        self.lock = threading.Lock()
        self.unreached: dict[int, BaseException | None] = {}
        """Peers never joined before the deadline, to the last error of trying each."""
        self.fatal: BaseException | None = None
        """The first error that ends forming the mesh at once (a refusal, a wrong token, a peer lost)."""


def join_lower_peers(
    index: int,
    peers: list[int],
    attempt: Callable[[int, float], None],
    retryable: tuple[type[BaseException], ...],
    check: Callable[[], None],
    disagree: Callable[[int, SettingsMismatch], None],
    describe: Callable[[int], str],
    closed: Callable[[], str],
    deadline: float,
    failed: threading.Event,
) -> None:
    """Join each of ``peers`` (process ``index``'s lower peers) at once, or raise.

    ``attempt(peer, deadline)`` tries ``peer`` once: it returns once ``peer`` has joined, raises one of
    ``retryable`` when ``peer`` is not there (yet), :class:`SettingsMismatch` when it differs from this process
    (handed to ``disagree(peer, error)`` at once; ``peer`` is not tried again), anything else when the mesh cannot
    form.  ``check()`` runs before each attempt and raises when the mesh can no longer form (a joined peer has
    closed).  ``failed`` is set by whichever side of forming failed: the threads then stop before their next
    attempt, and this sets it for the error it raises.  Raises the first such error, else a
    :class:`ConnectTimeout` naming every peer never reached (``describe(p)`` names process ``p``), ending with
    ``closed()``: a clause on the joined peers that have closed since, or empty.
    """
    outcome = Outcome()
    threads = [
        threading.Thread(
            target=_join_one,
            args=(peer, attempt, retryable, check, disagree, deadline, failed, outcome),
            name=f"timely-connect-{peer}",
            daemon=True,
        )
        for peer in peers[1:]
    ]
    for thread in threads:
        thread.start()
    if peers:  # the first on this thread: a process with one lower peer starts no thread
        _join_one(peers[0], attempt, retryable, check, disagree, deadline, failed, outcome)
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()) + JOIN_MARGIN)
    with outcome.lock:
        if any(thread.is_alive() for thread in threads) and outcome.fatal is None:
            alive = [peer for peer, thread in zip(peers[1:], threads, strict=True) if thread.is_alive()]
            waiting = ", ".join(describe(peer) for peer in alive)
            outcome.fatal = ConnectTimeout(
                f"process {index} was still trying {waiting} {JOIN_MARGIN:.0f} s after the deadline; check the "
                "network path to it"
            )
        fatal = outcome.fatal
        unreached = dict(sorted(outcome.unreached.items()))
    if fatal is not None:
        failed.set()
        raise fatal
    if unreached:
        failed.set()
        tried = [f"{describe(peer)} (last error: {error})" for peer, error in unreached.items()]
        names = " and ".join([", ".join(tried[:-1]), tried[-1]] if len(tried) > 1 else tried)
        they = "it is" if len(unreached) == 1 else "they are"
        raise ConnectTimeout(
            f"process {index} could not connect to {names} before the deadline; check that {they} running with "
            f"the same hostfile and process count{closed()}"
        )


def _join_one(
    peer: int,
    attempt: Callable[[int, float], None],
    retryable: tuple[type[BaseException], ...],
    check: Callable[[], None],
    disagree: Callable[[int, SettingsMismatch], None],
    deadline: float,
    failed: threading.Event,
    outcome: Outcome,
) -> None:
    """Try ``peer`` until it joins, differs, the mesh fails or the deadline passes; note what ended it."""
    last_error: BaseException | None = None
    try:
        while not failed.is_set():  # set when the other side failed: connect raises that error
            check()
            if time.monotonic() >= deadline:
                with outcome.lock:
                    outcome.unreached[peer] = last_error
                return
            try:
                attempt(peer, deadline)
            except retryable as error:
                last_error = error
                failed.wait(min(RETRY_PAUSE, max(0.0, deadline - time.monotonic())))
                continue
            return
    except SettingsMismatch as error:  # connect raises it once every other peer has handshaken
        disagree(peer, error)
    except BaseException as error:  # noqa: BLE001 - handed to the thread that forms the mesh
        with outcome.lock:
            if outcome.fatal is None:
                outcome.fatal = error
        failed.set()
