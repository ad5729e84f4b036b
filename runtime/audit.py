"""The progress audit: check the progress ledger while the computation runs (a debug mode).

Turn it on with ``execute(..., audit=True)`` or ``PYTIMELY_AUDIT=1``.  Each
worker then gets an :class:`Auditor`, which receives the same hook calls as
the instrumentation (:class:`scopes.progress.hooks.ProgressObserver`) and checks, as
they happen:

1. **Safety.** A message consumed at an operator input bears a time the
   input's frontier has not passed: some frontier element is ``<=`` it.  The
   frontier promises that no earlier time will arrive; a message behind it
   means the ledger let the frontier advance while the message was in flight.
2. **Frontiers never go backwards.** At every location, each time that joins
   the frontier is ``>=`` some time of the frontier before, and a location
   whose frontier became empty stays empty.
3. **No capability count goes negative**, in any worker's view of the ledger
   (capabilities are created and dropped by the worker that holds them, so no
   interleaving of progress batches can make them negative).  With a single
   worker the counts of messages in flight are checked too, except at inputs
   fed across a scope boundary, whose counts a nested scope reports when its
   own ledger has them.
4. **Nothing is left over.** When a dataflow completes, every count of the
   worker's ledger is zero; and when every worker of a single-process run has
   completed it, for each operator input in every scope, the records consumed
   equal the records produced on the channels that feed it (times copies, for
   a broadcast), time by time: nothing was counted in flight that never
   arrived, and nothing arrived that was not counted.  Channels into and out
   of nested scopes are left out: a scope reports what crosses its boundary
   as its own ledger knows it, over every worker.
5. **Nothing is counted that was never sent.** When every worker has been
   idle for :data:`AUDIT_QUIET` seconds with no message in flight anywhere
   (the communication layer says so) and none unread in this worker's
   mailboxes, every message sent has been received and read: a count of
   messages still waiting at an operator input means an operator counted
   records it never sent (an over-count, which would otherwise hang the run,
   or end it only at ``stall_timeout``).  The violation names the input, the
   time, and each operator output feeding it with what it counted on this
   worker; in a single process, also what the feeding channels produced and
   the input consumed over every worker.

The first violation raises :class:`~runtime.errors.AuditViolation` in the
worker, naming the check, the operator (name, scope path and address), the
port or channel, the worker and the time.  The audit costs what logging costs
and more; it is for tests and debugging, not production.
"""

from __future__ import annotations

import os
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from runtime.errors import AuditViolation, ConfigurationError
from scopes.progress.hooks import ProgressObserver
from scopes.progress.order import Time, less_equal

AUDIT_QUIET = 0.5
"""Seconds every worker must have been idle, with nothing in flight, before check 5 judges the counts."""

AUDIT_VARIABLE = "PYTIMELY_AUDIT"
"""The environment variable that turns the audit on for every worker (``1``)."""


AUDIT_ON = ("1", "true", "yes", "on")
"""The values of :data:`AUDIT_VARIABLE` that turn the audit on (in any case)."""
AUDIT_OFF = ("", "0", "false", "no", "off")
"""The values of :data:`AUDIT_VARIABLE` that leave it off; any other is refused."""


def audit_setting(text: str | None) -> bool:
    """Whether ``text`` (the value of ``PYTIMELY_AUDIT``, ``None`` when unset) asks for the audit.

    A value that is neither on nor off (``2``, ``enabled``) is a :class:`~runtime.errors.ConfigurationError`:
    read as off, it would run without the checks the user asked for, and say nothing.
    """
    value = (text or "").strip().lower()
    if value not in AUDIT_ON + AUDIT_OFF:
        raise ConfigurationError(
            f"{AUDIT_VARIABLE} must be 1 (or true, yes, on) to turn the progress audit on, or 0 (or false, no, "
            f"off, or unset) to leave it off; got {text!r}"
        )
    return value in AUDIT_ON


def audit_requested() -> bool:
    """Whether ``PYTIMELY_AUDIT`` asks for the audit (see :func:`audit_setting`)."""
    return audit_setting(os.environ.get(AUDIT_VARIABLE))


class ProcessLedger:
    """Records produced and consumed by every worker of this process, per scope, port and time.

    Shared by the auditors of one process's workers.  The channel balance (check
    4) is judged only when the process holds every worker of the computation.
    """

    def __init__(self, local_workers: int, peers: int) -> None:
        """A ledger for ``local_workers`` workers of a computation of ``peers`` workers."""
        self.local_workers = local_workers
        self.peers = peers
        self._lock = threading.Lock()
        self._produced: Counter[tuple[tuple[int, ...], int, int, Any]] = Counter()
        self._consumed: Counter[tuple[tuple[int, ...], int, int, Any]] = Counter()
        self._channels: dict[tuple[int, ...], list[tuple[tuple[int, int], tuple[int, int], str, int]]] = {}
        self._completed: Counter[int] = Counter()
        self._scopes: set[tuple[int, ...]] = set()

    def scope(self, address: tuple[int, ...]) -> None:
        """Remember that ``address`` is a nested scope: channels to or from it are not balanced here."""
        with self._lock:
            self._scopes.add(address)

    def channel(
        self, scope: tuple[int, ...], source: tuple[int, int], target: tuple[int, int], contract: str, copies: int
    ) -> None:
        """Remember an edge of ``scope`` (once: every worker builds the same dataflow)."""
        with self._lock:
            edges = self._channels.setdefault(scope, [])
            if (source, target, contract, copies) not in edges:
                edges.append((source, target, contract, copies))

    def count(
        self,
        address: tuple[int, ...],
        consumed: Sequence[Iterable[tuple[Any, int]]],
        produced: Sequence[Iterable[tuple[Any, int]]],
    ) -> None:
        """Add one scheduling's records received and sent by the operator at ``address``."""
        scope, node = address[:-1], address[-1]
        with self._lock:
            for port, counts in enumerate(consumed):
                for time, records in counts:
                    self._consumed[(scope, node, port, time)] += records
            for port, counts in enumerate(produced):
                for time, records in counts:
                    self._produced[(scope, node, port, time)] += records

    def balance(self, key: tuple[tuple[int, ...], int, int, Any]) -> tuple[int, int] | None:
        """Records produced for and consumed at input ``(scope, node, port, time)`` over every worker.

        ``None`` unless this process holds every worker (otherwise its counts are partial).
        """
        if self.local_workers != self.peers:
            return None
        scope, node, port, time = key
        with self._lock:
            produced = 0
            for source, target, _, copies in self._channels.get(scope, ()):
                if target == (node, port):
                    produced += self._produced[(scope, source[0], source[1], time)] * copies
            return produced, self._consumed[key]

    def completed(self, dataflow: int, describe: Any) -> None:
        """One worker completed ``dataflow``; after the last one, check every channel's balance."""
        with self._lock:
            self._completed[dataflow] += 1
            if self._completed[dataflow] < self.local_workers or self.local_workers != self.peers:
                return
            expected: Counter[tuple[tuple[int, ...], int, int, Any]] = Counter()
            feeding: dict[tuple[tuple[int, ...], int, int], list[tuple[tuple[int, ...], int, str]]] = {}
            produced_by: dict[tuple[tuple[int, ...], int, int], list[tuple[Any, int]]] = {}
            for (s, node, port, time), records in self._produced.items():  # once, not once per channel
                produced_by.setdefault((s, node, port), []).append((time, records))
            for scope, edges in self._channels.items():
                if scope[0] != dataflow:
                    continue
                for source, target, contract, copies in edges:
                    if source[0] == 0 or target[0] == 0:
                        continue  # a scope boundary: its records are counted in the parent scope
                    if scope + (source[0],) in self._scopes or scope + (target[0],) in self._scopes:
                        continue  # a nested scope counts its boundary over every worker
                    feeding.setdefault((scope, target[0], target[1]), []).append(
                        (scope + (source[0],), source[1], contract)
                    )
                    for time, records in produced_by.get((scope, source[0], source[1]), ()):
                        expected[(scope, target[0], target[1], time)] += records * copies
            for key in set(expected) | {k for k in self._consumed if k[0][0] == dataflow}:
                scope, node, port, time = key
                if (scope, node, port) not in feeding:
                    continue
                if expected[key] != self._consumed[key]:
                    raise AuditViolation(
                        f"channel balance: {describe(scope + (node,))} input {port} consumed "
                        f"{self._consumed[key]} record(s) at time {time!r}, but the channels feeding it "
                        f"({'; '.join(f'{describe(a)} output {o} ({c})' for a, o, c in feeding[(scope, node, port)])}) "
                        f"produced {expected[key]} for it, over all "
                        f"{self.peers} worker(s)"
                    )


class Auditor:
    """One worker's audit: receives the observer hooks and raises at the first violation."""

    def __init__(self, worker: int, peers: int, ledger: ProcessLedger | None = None) -> None:
        """Audit worker ``worker`` of ``peers``; ``ledger`` is shared with this process's other workers."""
        self.worker = worker
        self.peers = peers
        self.ledger = ledger
        self._names: dict[tuple[int, ...], str] = {}
        self._scopes: set[tuple[int, ...]] = set()
        self._tables: dict[tuple[int, ...], tuple[tuple[int, int, bool], ...]] = {}
        self._targets: dict[tuple[tuple[int, ...], int, int], int] = {}
        self._frontiers: dict[tuple[tuple[int, ...], int], Counter[Any]] = {}
        self._ever: set[tuple[tuple[int, ...], int]] = set()
        self._counts: dict[tuple[int, ...], Counter[tuple[int, Any]]] = {}
        # inputs fed by a nested scope or a scope's own input: their counts arrive as the scope's ledger
        # reports them, which may be after the consumer's, so they may dip below zero for a moment
        self._sources: dict[tuple[tuple[int, ...], int, int], set[int]] = {}
        self._feeders: dict[tuple[tuple[int, ...], int, int], set[tuple[int, int]]] = {}
        self._claimed: Counter[tuple[tuple[int, ...], int, Any]] = Counter()
        """Records this worker's operators counted as produced, per (address, output, time)."""

    # ------------------------------------------------------------------ naming

    def describe(self, address: tuple[int, ...]) -> str:
        """``operator 'Name' (scope 'a/b', address (0, 2))``."""
        path = "/".join(self._names.get(address[:depth], str(address[depth - 1])) for depth in range(1, len(address)))
        return f"operator {self._names.get(address, '?')!r} (scope {path!r}, address {address})"

    def _location(self, scope: tuple[int, ...], location: int) -> str:
        table = self._tables.get(scope, ())
        if location >= len(table):
            return f"location {location} of scope {scope}"
        node, port, is_source = table[location]
        if node == 0:
            return f"{'input' if is_source else 'output'} {port} of scope {self.describe(scope)}"
        return f"{'output' if is_source else 'input'} {port} of {self.describe(scope + (node,))}"

    def _fail(self, check: str, detail: str) -> None:
        raise AuditViolation(f"progress audit, {check}, on worker {self.worker}: {detail}")

    # ------------------------------------------------------------------ the hooks

    def operator_created(
        self,
        address: tuple[int, ...],
        name: str,
        inputs: int,
        outputs: int,
        reach: Sequence[Sequence[int]],
        scope_timestamp: str | None,
        site: str | None = None,
    ) -> None:
        """Remember the operator's name, and whether it is a scope."""
        self._names[address] = name
        if scope_timestamp is not None:
            self._scopes.add(address)
            if self.ledger is not None:
                self.ledger.scope(address)

    def channel_created(
        self, scope: tuple[int, ...], source: tuple[int, int], target: tuple[int, int], contract: str, copies: int = 1
    ) -> None:
        """Remember inputs fed across a scope boundary; give the edge to the process ledger."""
        self._sources.setdefault((scope, target[0], target[1]), set()).add(source[0])
        self._feeders.setdefault((scope, target[0], target[1]), set()).add(source)
        if self.ledger is not None:
            self.ledger.channel(scope, source, target, contract, copies)

    def locations(self, scope: tuple[int, ...], table: Sequence[tuple[int, int, bool]]) -> None:
        """Remember the scope's location numbering."""
        self._tables[scope] = tuple(table)
        for location, (node, port, is_source) in enumerate(table):
            if not is_source:
                self._targets[(scope, node, port)] = location

    def scheduled(self, address: tuple[int, ...], start: float, duration: float) -> None:
        """Nothing to check."""

    def messages(
        self,
        address: tuple[int, ...],
        consumed: Sequence[Iterable[tuple[Any, int]]],
        produced: Sequence[Iterable[tuple[Any, int]]],
    ) -> None:
        """Check 1: every time consumed is at or beyond the input's frontier; count records for check 4.

        A nested scope reports what crossed its boundary as its own tracker
        knows it, over every worker; the checks cover operators.
        """
        if address in self._scopes:
            return
        consumed = [list(port) for port in consumed]
        produced = [list(port) for port in produced]
        scope, node = address[:-1], address[-1]
        for port, counts in enumerate(consumed):
            location = self._targets.get((scope, node, port))
            if location is None:
                continue
            frontier = [time for time, count in self._frontiers.get((scope, location), Counter()).items() if count > 0]
            for time, records in counts:
                if not any(less_equal(element, time) for element in frontier):
                    self._fail(
                        "safety",
                        f"{self.describe(address)} consumed {records} record(s) at time {time!r} on input {port}, "
                        f"but the frontier there had already passed it ({sorted(frontier, key=repr)}): the ledger let "
                        "the frontier advance while these records were in flight",
                    )
        claimed = self._claimed
        for port, counts in enumerate(produced):
            for time, records in counts:
                claimed[(address, port, time)] += records
        if self.ledger is not None:
            self.ledger.count(address, consumed, produced)

    def pointstamps(self, scope: tuple[int, ...], changes: Iterable[tuple[int, Any, int]]) -> None:
        """Check 3: fold the changes into this worker's ledger; no capability count (any count, alone) below 0."""
        counts = self._counts.setdefault(scope, Counter())
        table = self._tables.get(scope, ())
        for location, time, diff in changes:
            key = (location, time)
            counts[key] += diff
            value = counts[key]
            if value == 0:
                del counts[key]
            elif value < 0:
                capability = location < len(table) and table[location][2] and table[location][0] != 0
                checked = (
                    self.peers == 1
                    and location < len(table)
                    and table[location][0] != 0
                    and not self._fed_by_boundary(scope, table[location][0], table[location][1])
                )
                if capability or checked:
                    kind = "capabilities" if capability else "messages in flight"
                    self._fail(
                        "negative count",
                        f"the count of {kind} at time {time!r} at {self._location(scope, location)} fell to {value}",
                    )

    def _fed_by_boundary(self, scope: tuple[int, ...], node: int, port: int) -> bool:
        """Whether input ``port`` of ``node`` receives from a nested scope or from ``scope``'s own inputs."""
        return any(
            source == 0 or scope + (source,) in self._scopes for source in self._sources.get((scope, node, port), ())
        )

    def stalled(self, seconds: float, unread: Callable[[], Sequence[str]]) -> None:
        """Check 5: after every worker was idle ``seconds`` with nothing in flight, no messages are counted waiting.

        ``unread()`` describes messages waiting unread in this worker's mailboxes
        (then nothing is judged: they are still to be read).
        """
        if seconds < AUDIT_QUIET:
            return
        for scope, counts in self._counts.items():
            table = self._tables.get(scope, ())
            for (location, time), value in counts.items():
                if value <= 0 or location >= len(table) or table[location][2] or table[location][0] == 0:
                    continue
                if unread():
                    return
                self._over_count(scope, table[location][0], table[location][1], time, value, seconds)

    def _over_count(self, scope: tuple[int, ...], node: int, port: int, time: Any, value: int, seconds: float) -> None:
        feeders = sorted(self._feeders.get((scope, node, port), ()))
        claims = "; ".join(
            f"{self.describe(scope + (source,))} output {output} counted "
            f"{self._claimed[(scope + (source,), output, time)]} record(s) at time {time!r} on worker {self.worker}"
            for source, output in feeders
            if source != 0
        )
        balance = self.ledger.balance((scope, node, port, time)) if self.ledger is not None else None
        totals = (
            f"; over all {self.peers} worker(s) the channels feeding it produced {balance[0]} record(s) at that "
            f"time and it consumed {balance[1]}"
            if balance is not None
            else ""
        )
        self._fail(
            "over-count",
            f"every worker has been idle for {seconds:.1f} s with no message in flight, yet {value} record(s) "
            f"at time {time!r} are counted in flight to input {port} of {self.describe(scope + (node,))}: an "
            f"operator feeding it counted records it never sent ({claims or 'fed across a scope boundary'}"
            f"{totals}), unless that input's operator left records unread without asking to run again",
        )

    def local_pointstamps(self, scope: tuple[int, ...], changes: Iterable[tuple[int, Any, int]]) -> None:
        """Nothing to check: every worker's view is checked in :meth:`pointstamps`."""

    def frontiers(self, scope: tuple[int, ...], changes: Iterable[tuple[int, Any, int]]) -> None:
        """Check 2: each location's frontier only advances."""
        before: dict[int, list[Any]] = {}
        for location, time, diff in changes:
            key = (scope, location)
            frontier = self._frontiers.setdefault(key, Counter())
            if location not in before:
                before[location] = [t for t, count in frontier.items() if count > 0]
            frontier[time] += diff
            if frontier[time] == 0:
                del frontier[time]
        for location, old in before.items():
            key = (scope, location)
            new = [t for t, count in self._frontiers[key].items() if count > 0]
            if not old and key in self._ever and new:
                self._fail(
                    "frontier went backwards",
                    f"the frontier at {self._location(scope, location)} was empty (complete) and became "
                    f"{sorted(new, key=repr)}",
                )
            for time in new:
                if old and time not in old and not any(less_equal(element, time) for element in old):
                    self._fail(
                        "frontier went backwards",
                        f"time {time!r} joined the frontier at {self._location(scope, location)}, which was "
                        f"{sorted(old, key=repr)}: no earlier frontier time is <= it",
                    )
            if new:
                self._ever.add(key)

    def input_event(
        self, address: tuple[int, ...], name: str, action: str, time: Time, site: str | None = None
    ) -> None:
        """Nothing to check."""

    def capability_site(
        self, address: tuple[int, ...], output: int, time: Time, diff: int, action: str, site: str
    ) -> None:
        """Nothing to check: the pointstamps say what is held."""

    def dataflow_completed(self, index: int, name: str) -> None:
        """Check 4: this worker's ledger of the dataflow is empty; then the process-wide channel balance."""
        for scope, counts in self._counts.items():
            if scope[0] != index or not counts:
                continue
            (location, time), value = next(iter(counts.items()))
            self._fail(
                "count left over",
                f"dataflow {name!r} completed with a count of {value} at time {time!r} at "
                f"{self._location(scope, location)} ({len(counts)} nonzero count(s) in all)",
            )
        if self.ledger is not None:
            self.ledger.completed(index, self.describe)


class TeeObserver:
    """Hands every hook call to each of several observers, in order (instrumentation and audit together)."""

    def __init__(self, *observers: Any) -> None:
        """Forward to ``observers``."""
        self._observers = observers

    def __getattr__(self, name: str) -> Any:
        methods = [getattr(target, name) for target in self._observers if hasattr(target, name)]

        def forward(*args: Any, **kwargs: Any) -> None:
            for method in methods:
                method(*args, **kwargs)

        return forward


def combine(*observers: ProgressObserver | None) -> ProgressObserver | None:
    """One observer for the given ones, skipping ``None``: ``None``, the only one, or a :class:`TeeObserver`.

    Typed with the hooks' interface, so that mypy checks at each call that the
    :class:`Auditor` and the logger implement all of it.
    """
    present = [candidate for candidate in observers if candidate is not None]
    if not present:
        return None
    if len(present) == 1:
        return present[0]
    return TeeObserver(*present)
