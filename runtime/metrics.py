"""Prometheus / OpenMetrics metrics for a running computation, served over HTTP by each process.

Turn them on with ``--metrics HOST:PORT`` (any program that runs through
:func:`runtime.execute_from_args`), ``PYTIMELY_METRICS=HOST:PORT``, or
:func:`serve_metrics` in your own code.  Process ``P`` of a cluster listens on
``PORT + P``.  The numbers come from the instrumentation events
(:mod:`runtime.instrument`), so turning metrics on turns the event hooks on;
their cost is the "logging to memory" row of ``BENCHMARKS.md``.

Every series carries ``worker``; operator series also carry ``operator`` (the
name the program gave), ``scope`` (the scope path, ``dataflow/loop``) and
``address``:

``pytimely_operator_records_in_total`` / ``_records_out_total``
    records received (sent) by the operator, over all its ports.
``pytimely_operator_port_records_out_total`` (with ``port``)
    records sent by each output of an operator that has several: a window's
    late records are its ``port="1"``.
``pytimely_operator_batches_in_total`` / ``_batches_out_total``
    ``(time, batch)`` messages received (sent).
``pytimely_operator_activations_total`` / ``pytimely_operator_busy_seconds_total``
    how often the operator ran, and for how long.
``pytimely_frontier`` (with ``port`` and ``kind``: ``input`` for an operator's
input port, probes included, ``scope_output`` for a scope's output)
    the earliest time that may still arrive there; for a nested scope's
    ``Product`` times, its outermost (epoch) component; ``+Inf`` once nothing
    more can arrive.
``pytimely_frontier_seconds_since_advance``
    seconds since that frontier last moved: the frontier lag to alert on.
``pytimely_capabilities`` / ``pytimely_messages_in_flight`` (with ``dataflow``)
    the pointstamps that hold a dataflow's frontiers back, as this worker
    knows them: capabilities held by operators and inputs, and messages sent
    but not yet received.
``pytimely_stalled``, ``pytimely_waiting`` and ``pytimely_stall_info`` (with ``cause``)
    while no worker can make progress with work unfinished (for the worker's
    ``stall_warning``, 30 s by default): ``stalled`` is 1 when the worker's
    ``main`` cannot feed its inputs (it waits in ``step_while``, or has
    returned), ``waiting`` is 1 when it can (a program waiting for outside
    data, which is no stall), or when an operator that something outside
    wakes still runs (a replay from a socket, a source given a waker);
    ``stall_info`` gives the explanation's first
    line as ``cause`` in either case.
``pytimely_instrumentation_events_dropped_total``
    events the instrumentation had to drop (a slow viewer, a full buffer).

``docs/prometheus-rules.yml`` holds alerting rules built on these series.
"""

from __future__ import annotations

import errno
import importlib.util
import math
import os
import sys
import threading
import time
import warnings
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from runtime.communication.tcp import port_number
from runtime.errors import ConfigurationError, MetricsUnavailable
from runtime.instrument import (
    K_DATAFLOW_DONE,
    K_DROPPED,
    K_FRONTIERS,
    K_LOCATIONS,
    K_MESSAGES,
    K_OPERATOR,
    K_POINTSTAMPS,
    K_SCHEDULE,
    EventShipper,
    Sink,
)

MAX_COMPLETED = 64
"""Completed dataflows (one per worker each) whose series are still served, the newest: a program building a
dataflow per epoch (a Barrier is one) would otherwise grow the endpoint by every series of each, for ever."""

METRICS_VARIABLE = "PYTIMELY_METRICS"
"""The environment variable that turns the metrics endpoint on, as ``--metrics HOST:PORT`` does."""


@dataclass
class _Operator:
    name: str
    records_in: int = 0
    records_out: int = 0
    batches_in: int = 0
    batches_out: int = 0
    activations: int = 0
    busy: float = 0.0
    by_port: list[int] = field(default_factory=list)


@dataclass
class _Frontier:
    counts: Counter[Any] = field(default_factory=Counter)
    advanced: float = field(default_factory=time.monotonic)


class MetricsState:
    """What the metrics report, folded from instrumentation events; safe to read while events arrive."""

    def __init__(self) -> None:
        """Nothing seen yet."""
        self._lock = threading.Lock()
        self._operators: dict[tuple[int, tuple[int, ...]], _Operator] = {}
        self._locations: dict[tuple[int, tuple[int, ...]], tuple[tuple[int, int, bool], ...]] = {}
        self._frontiers: dict[tuple[int, tuple[int, ...], int], _Frontier] = {}
        self._held: dict[tuple[int, int, bool], int] = {}
        self._dropped = 0
        self._stalls: dict[int, tuple[str, bool] | None] = {}  # (cause, main free to feed the inputs)
        self._pipeline: EventShipper | None = None
        self._completed: dict[tuple[int, int], None] = {}
        """``(worker, dataflow)`` of the completed dataflows still served, oldest first."""

    def follow(self, pipeline: EventShipper) -> None:
        """Read ``pipeline`` (the instrumentation pipeline feeding this state) at every read.

        It ships the events logged so far first: it ships from a background
        thread every few milliseconds, so without this a scrape right after
        ``execute`` returned missed the run's last events.  And its sinks'
        drops (a viewer too slow, or never there) are counted: they happen in
        the sinks, where no event says so.
        """
        self._pipeline = pipeline

    # ------------------------------------------------------------------ folding events

    def fold(self, events: list[tuple[Any, ...]]) -> None:
        """Fold raw events ``(kind, worker, seq, t, *fields)`` into the state."""
        with self._lock:
            for event in events:
                kind, worker = event[0], event[1]
                if kind == K_MESSAGES:
                    self._messages(worker, event[4], event[5], event[6])
                elif kind == K_SCHEDULE:
                    operator = self._operators.get((worker, tuple(event[4])))
                    if operator is not None:
                        operator.activations += 1
                        operator.busy += event[6]
                elif kind == K_FRONTIERS:
                    self._frontier_changes(worker, tuple(event[4]), event[5], event[3])
                elif kind == K_POINTSTAMPS:
                    self._pointstamps(worker, tuple(event[4]), event[5])
                elif kind == K_OPERATOR:
                    address = tuple(event[4])
                    self._operators[(worker, address)] = _Operator(str(event[5]))
                    if len(address) == 1:  # a dataflow built again under the index of one completed before
                        self._completed.pop((worker, address[0]), None)
                elif kind == K_DATAFLOW_DONE:
                    self._dataflow_completed(worker, int(event[4]))
                elif kind == K_LOCATIONS:
                    self._locations[(worker, tuple(event[4]))] = tuple(tuple(entry) for entry in event[5])
                elif kind == K_DROPPED:
                    self._dropped += int(event[4])

    def _dataflow_completed(self, worker: int, dataflow: int) -> None:
        """Serve the completed dataflow's series (done: frontiers ``+Inf``) until :data:`MAX_COMPLETED` newer end."""
        self._completed[(worker, dataflow)] = None
        while len(self._completed) > MAX_COMPLETED:
            gone_worker, gone = next(iter(self._completed))
            del self._completed[(gone_worker, gone)]
            tables: tuple[dict[Any, Any], ...] = (self._operators, self._locations, self._frontiers)
            for table in tables:
                for key in [key for key in table if key[0] == gone_worker and key[1][:1] == (gone,)]:
                    del table[key]
            for held in [key for key in self._held if key[0] == gone_worker and key[1] == gone]:
                del self._held[held]

    def _messages(self, worker: int, address: Any, consumed: Any, produced: Any) -> None:
        operator = self._operators.get((worker, tuple(address)))
        if operator is None:
            return
        for port in consumed:
            operator.batches_in += len(port)
            operator.records_in += sum(records for _, records in port)
        several = len(produced) > 1
        for index, port in enumerate(produced):
            operator.batches_out += len(port)
            records = sum(records for _, records in port)
            operator.records_out += records
            if several:  # each output of an operator with several (a window's late records leave by port 1)
                by_port = operator.by_port
                while len(by_port) <= index:
                    by_port.append(0)
                by_port[index] += records

    def _frontier_changes(self, worker: int, scope: tuple[int, ...], changes: Any, at: float) -> None:
        for location, stamp, diff in changes:
            frontier = self._frontiers.get((worker, scope, location))
            if frontier is None:
                frontier = self._frontiers[(worker, scope, location)] = _Frontier()
            frontier.counts[stamp] += diff
            if frontier.counts[stamp] == 0:
                del frontier.counts[stamp]
            if diff < 0:  # a time left the frontier: it advanced
                frontier.advanced = at

    def _pointstamps(self, worker: int, scope: tuple[int, ...], changes: Any) -> None:
        table = self._locations.get((worker, scope), ())
        for location, _, diff in changes:
            is_source = table[location][2] if location < len(table) else True
            key = (worker, scope[0] if scope else 0, bool(is_source))
            self._held[key] = self._held.get(key, 0) + diff

    def report_stall(self, worker: int, cause: str | None, waiting: bool = False) -> None:
        """Record that ``worker`` is idle with work unfinished for ``cause``, or no longer (``None``).

        ``waiting``: its ``main`` is free to feed the inputs (it is not inside
        ``step_while`` and has not returned), so the program may be waiting for
        outside data, which is no stall.  The cause kept is the explanation's
        first line that names something (headings ending in ``:`` are skipped),
        cut at 300 characters.
        """
        with self._lock:
            self._stalls[worker] = None if cause is None else (_one_line(cause), waiting)

    # ------------------------------------------------------------------ reading

    def _scope_path(self, worker: int, address: tuple[int, ...]) -> str:
        names = []
        for depth in range(1, len(address)):
            scope = self._operators.get((worker, address[:depth]))
            names.append(scope.name if scope is not None else str(address[depth - 1]))
        return "/".join(names)

    def samples(self) -> dict[str, list[tuple[dict[str, str], float]]]:
        """Every series as ``{metric: [(labels, value), ...]}``, read consistently under the lock.

        Every event logged before the call is folded in first (see :meth:`follow`).
        """
        pipeline = self._pipeline
        if pipeline is not None:
            pipeline.flush()
        dropped = 0 if pipeline is None else pipeline.dropped
        now = time.monotonic()
        out: dict[str, list[tuple[dict[str, str], float]]] = {}

        def add(metric: str, labels: dict[str, str], value: float) -> None:
            out.setdefault(metric, []).append((labels, value))

        with self._lock:
            for (worker, address), operator in self._operators.items():
                labels = self._labels(worker, address, operator.name)
                add("operator_records_in", labels, operator.records_in)
                add("operator_records_out", labels, operator.records_out)
                for port, records in enumerate(operator.by_port):
                    add("operator_port_records_out", {**labels, "port": str(port)}, records)
                add("operator_batches_in", labels, operator.batches_in)
                add("operator_batches_out", labels, operator.batches_out)
                add("operator_activations", labels, operator.activations)
                add("operator_busy_seconds", labels, operator.busy)
            for (worker, scope, location), frontier in self._frontiers.items():
                where = self._where(worker, scope, location)
                if where is None:
                    continue
                add("frontier", where, _gauge_value(frontier.counts))
                lag = max(0.0, now - frontier.advanced) if frontier.counts else 0.0  # done: nothing lags
                add("frontier_seconds_since_advance", where, lag)
            for (worker, dataflow, is_source), count in self._held.items():
                metric = "capabilities" if is_source else "messages_in_flight"
                add(metric, {"worker": str(worker), "dataflow": str(dataflow)}, count)
            workers = {worker for worker, _ in self._operators} | set(self._stalls)
            for worker in sorted(workers):
                stall = self._stalls.get(worker)
                add("stalled", {"worker": str(worker)}, 0.0 if stall is None or stall[1] else 1.0)
                add("waiting", {"worker": str(worker)}, 1.0 if stall is not None and stall[1] else 0.0)
            for worker, stall in self._stalls.items():
                if stall is not None:
                    add("stall_info", {"worker": str(worker), "cause": stall[0]}, 1.0)
            add("instrumentation_events_dropped", {}, self._dropped + dropped)
        return out

    def _labels(self, worker: int, address: tuple[int, ...], name: str) -> dict[str, str]:
        return {
            "worker": str(worker),
            "operator": name,
            "scope": self._scope_path(worker, address),
            "address": ".".join(map(str, address)),
        }

    def _where(self, worker: int, scope: tuple[int, ...], location: int) -> dict[str, str] | None:
        table = self._locations.get((worker, scope))
        if table is None or location >= len(table):
            return None
        node, port, is_source = table[location]
        if is_source:
            return None
        if node == 0:
            owner = self._operators.get((worker, scope))
            labels = self._labels(worker, scope, owner.name if owner is not None else "scope")
            return {**labels, "port": str(port), "kind": "scope_output"}
        address = scope + (node,)
        operator = self._operators.get((worker, address))
        labels = self._labels(worker, address, operator.name if operator is not None else f"node {node}")
        return {**labels, "port": str(port), "kind": "input"}


def _one_line(explanation: str) -> str:
    lines = [line.strip() for line in explanation.strip().splitlines() if line.strip()]
    informative = [line for line in lines if not line.endswith(":")]
    return ((informative or lines or ["stalled"])[0])[:300]


def _gauge_value(counts: Counter[Any]) -> float:
    """The frontier as one number: its earliest (outermost) time, or +Inf when it is empty."""
    values = [_outermost(stamp) for stamp, count in counts.items() if count > 0]
    numbers = [value for value in values if value is not None]
    if not values:
        return math.inf
    return float(min(numbers)) if numbers else math.nan


def _outermost(stamp: Any) -> float | None:
    while hasattr(stamp, "outer"):
        stamp = stamp.outer
    if isinstance(stamp, bool) or not isinstance(stamp, int | float):
        return None
    return float(stamp)


class MetricsSink(Sink):
    """An instrumentation sink that folds events into a :class:`MetricsState` (no bytes needed)."""

    needs_bytes = False
    records = False  # an endpoint beside the program: PYTIMELY_LOG still records

    def __init__(self, state: MetricsState) -> None:
        """Fold into ``state``."""
        self.state = state

    def write(self, events: list[tuple[Any, ...]], encoded: bytes) -> None:
        """Fold the batch."""
        self.state.fold(events)


_DESCRIPTIONS = {
    "operator_records_in": ("counter", "Records received by the operator over all its input ports."),
    "operator_records_out": ("counter", "Records sent by the operator over all its output ports."),
    "operator_port_records_out": ("counter", "Records sent by each output of an operator with several outputs."),
    "operator_batches_in": ("counter", "(time, batch) messages received by the operator."),
    "operator_batches_out": ("counter", "(time, batch) messages sent by the operator."),
    "operator_activations": ("counter", "Times the operator was scheduled."),
    "operator_busy_seconds": ("counter", "Seconds the operator spent running."),
    "frontier": ("gauge", "Earliest time that may still arrive at the port (outermost component; +Inf when done)."),
    "frontier_seconds_since_advance": ("gauge", "Seconds since the frontier at the port last advanced."),
    "capabilities": ("gauge", "Capabilities held in the dataflow, as this worker knows them."),
    "messages_in_flight": ("gauge", "Messages sent but not yet received in the dataflow, as this worker knows them."),
    "stalled": (
        "gauge",
        "1 while no worker can make progress and this worker's main cannot feed its inputs (it waits in step_while "
        "or has returned).",
    ),
    "waiting": (
        "gauge",
        "1 while no worker can make progress but this worker's main is free to feed its inputs, or an operator that "
        "something outside wakes still runs: waiting for outside data, no stall.",
    ),
    "stall_info": ("gauge", "Why no worker can make progress (stalled or waiting), first line, as the cause label."),
    "instrumentation_events_dropped": ("counter", "Instrumentation events dropped because a sink could not keep up."),
}


class _Collector:
    """A prometheus_client collector that reads a :class:`MetricsState` at each scrape."""

    def __init__(self, state: MetricsState) -> None:
        self.state = state

    def describe(self) -> list[Any]:
        return []

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        samples = self.state.samples()
        for metric, (kind, text) in _DESCRIPTIONS.items():
            rows = samples.get(metric, [])
            names = sorted({key for labels, _ in rows for key in labels})
            family: Any
            if kind == "counter":
                family = CounterMetricFamily(f"pytimely_{metric}", text, labels=names)
            else:
                family = GaugeMetricFamily(f"pytimely_{metric}", text, labels=names)
            for labels, value in rows:
                family.add_metric([labels.get(name, "") for name in names], value)
            yield family


@dataclass
class MetricsServer:
    """A running metrics endpoint: where it listens, the state it reads, and how to stop it."""

    host: str
    port: int
    state: MetricsState
    _shutdown: Callable[[], None]

    @property
    def url(self) -> str:
        """The URL Prometheus scrapes."""
        return f"http://{self.host}:{self.port}/metrics"

    def close(self) -> None:
        """Stop serving."""
        self._shutdown()


_current: MetricsState | None = None


def current_state() -> MetricsState | None:
    """The state the active endpoint serves in this process, or ``None`` when metrics are off."""
    return _current


def warn_unseen_processes(processes: int) -> None:
    """Warn that the endpoint this process serves (if any) will not see the workers of ``processes`` new processes.

    ``serve_metrics`` in a program serves the workers of that program's
    process; ``execute(main, processes=P)`` runs its workers in new processes,
    so the endpoint would stay empty, silently, unless each process serves its
    own (``PYTIMELY_METRICS``, which they inherit).
    """
    if _current is not None and not os.environ.get(METRICS_VARIABLE, "").strip():
        warnings.warn(
            f"the metrics endpoint this program serves (serve_metrics) sees only the workers of its own process, "
            f"and execute(..., processes={processes}) runs its workers in new processes: it will show none of them. "
            f"Set {METRICS_VARIABLE}=HOST:PORT (or pass --metrics HOST:PORT to execute_from_args) to have each "
            "process serve its own workers, process P at PORT + P",
            RuntimeWarning,
            stacklevel=3,
        )


def report_stall(worker: int, cause: str | None, waiting: bool = False) -> None:
    """Tell the active endpoint (if any) that ``worker`` is idle with work unfinished for ``cause``, or no longer
    (``None``); ``waiting``: its ``main`` is free to feed the inputs (see :meth:`MetricsState.report_stall`)."""
    state = _current
    if state is not None:
        state.report_stall(worker, cause, waiting)


def parse_address(spec: str, process: int = 0) -> tuple[str, int]:
    """``HOST:PORT`` (process ``P`` gets ``PORT + P``); a malformed spec is a ConfigurationError.

    The port is 1 to 5 ASCII digits, and ``PORT + P`` must be a port too (0 picks a free one everywhere).
    """
    host, _, port_text = spec.strip().rpartition(":")
    port = port_number(port_text)
    if not host or port is None:
        raise ConfigurationError(f"--metrics {spec!r}: expected HOST:PORT, for example 127.0.0.1:9464")
    if port and port + process > 65535:
        raise ConfigurationError(
            f"--metrics {spec!r}: process {process} would listen on port {port} + {process}, above 65535; "
            f"choose a port of at most {65535 - process} (or 0 for a free one)"
        )
    return host.strip("[]"), (port + process if port else 0)


def serve_metrics(spec: str, process: int = 0) -> MetricsServer:
    """Serve ``/metrics`` at ``spec`` (``HOST:PORT``; port 0 picks a free one) and turn the event hooks on.

    Events then reach the endpoint for every worker created from now on; an
    already active ``--log`` sink keeps receiving them too.
    """
    global _current
    try:
        from prometheus_client import CollectorRegistry, make_wsgi_app
    except ImportError:
        raise MetricsUnavailable("--metrics needs prometheus_client: `pip install prometheus_client`") from None
    from runtime import instrument
    from runtime.metrics_http import start_server

    host, port = parse_address(spec, process)
    state = MetricsState()
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Collector(state))
    try:
        server, thread = start_server(host, port, make_wsgi_app(registry))  # bounded: see runtime.metrics_http
    except OSError as error:
        raise MetricsUnavailable(_cannot_listen(spec, process, host, port, error, process > 0)) from None
    sink = MetricsSink(state)
    pipeline = instrument.add_sink(sink)
    state.follow(pipeline)
    _current = state

    def shutdown() -> None:
        global _current
        server.shutdown()
        server.server_close()
        thread.join(timeout=5.0)
        instrument.remove_sink(pipeline, sink)
        if _current is state:
            _current = None

    return MetricsServer(host, server.server_port, state, shutdown)


def check_metrics(spec: str, processes: Sequence[int]) -> None:
    """Refuse ``--metrics spec`` as :func:`serve_metrics` would for each of ``processes`` (all on this machine):
    a malformed address, a missing prometheus_client, a port that is taken or an address this machine lacks.

    Nothing is left listening; a port taken between this check and the run is still refused then.
    """
    addresses = [parse_address(spec, process) for process in processes]
    if importlib.util.find_spec("prometheus_client") is None:
        raise MetricsUnavailable("--metrics needs prometheus_client: `pip install prometheus_client`")
    from runtime.metrics_http import check_can_listen

    for process, (host, port) in zip(processes, addresses, strict=True):
        if port:  # port 0 picks a free one
            try:
                check_can_listen(host, port)
            except OSError as error:
                raise MetricsUnavailable(
                    _cannot_listen(spec, process, host, port, error, len(addresses) > 1 or process > 0)
                ) from None


def _cannot_listen(spec: str, process: int, host: str, port: int, error: OSError, name_process: bool) -> str:
    """Why process ``process`` cannot serve ``--metrics spec`` at ``host:port``, and what to do."""
    who = f"process {process} " if name_process else ""
    advice = (
        "stop what listens there or choose another port (0 picks a free one)"
        if error.errno == errno.EADDRINUSE
        else "choose an address of this machine, or a port it may listen on"
    )
    return f"--metrics {spec!r}: {who}cannot listen on {host}:{port}: {error.strerror or error}; {advice}"


def serve_from_environment(process: int = 0) -> MetricsServer | None:
    """Serve metrics if ``PYTIMELY_METRICS`` asks for them (as ``--metrics`` sets it); else ``None``."""
    spec = os.environ.get(METRICS_VARIABLE, "").strip()
    if spec in ("", "off", "0", "none"):
        return None
    server = serve_metrics(spec, process)
    if parse_address(spec, process)[1] == 0:  # a free port: nobody could scrape it without being told which
        print(f"pytimely: process {process} serves metrics at {server.url}", file=sys.stderr, flush=True)
    return server
