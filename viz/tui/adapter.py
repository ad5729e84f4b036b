"""What the panes show, computed from a :class:`~viz.model.Model`: rows, labels, rates, stuck places.

Everything here is plain data (no Textual), so the panes stay thin and the
numbers can be tested on their own.  :class:`TuiState` wraps the model with the
few things the terminal UI needs that the model does not keep: message rates
per channel over event time, and the last time anything happened.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from runtime.instrument import Event, FrontiersChanged, Messages
from viz.dot import format_frontier
from viz.explain import Blocker, explain
from viz.model import Address, Edge, Loc, Model, OperatorInfo, View

SPARK = "▁▂▃▄▅▆▇█"


def address_text(address: Address) -> str:
    """An address as ``0.3.1``."""
    return ".".join(map(str, address))


def sparkline(values: list[float]) -> str:
    """Values as a row of block characters scaled to their maximum (spaces when all are zero)."""
    top = max(values, default=0.0)
    if top <= 0:
        return " " * len(values)
    return "".join(" " if v <= 0 else SPARK[min(len(SPARK) - 1, int(v / top * (len(SPARK) - 1)))] for v in values)


class RateHistory:
    """Records per channel port in buckets of event time, for sparklines.

    Keys are ``(address, port, is_output)``: records an operator consumed at an
    input, or produced at an output.
    """

    KEPT = 64
    """Buckets kept per key, the newest: a sparkline shows 20, and a live run must not grow one a bucket for ever."""

    def __init__(self, bucket: float = 0.25) -> None:
        """Buckets of ``bucket`` seconds of event time."""
        self.bucket = bucket
        self.counts: dict[tuple[Address, int, bool], dict[int, int]] = {}

    def add(self, event: Messages) -> None:
        """Fold one ``Messages`` event in."""
        slot = int(event.t / self.bucket)
        for port, entries in enumerate(event.consumed):
            if entries:
                self.add_records((event.address, port, False), slot, sum(count for _, count in entries))
        for port, entries in enumerate(event.produced):
            if entries:
                self.add_records((event.address, port, True), slot, sum(count for _, count in entries))

    def add_records(self, key: tuple[Address, int, bool], slot: int, records: int) -> None:
        """Add ``records`` to bucket ``slot`` of ``key``, forgetting those :attr:`KEPT` or more before its newest."""
        buckets = self.counts.get(key)
        if buckets is None:
            buckets = self.counts[key] = {}
        buckets[slot] = buckets.get(slot, 0) + records
        if len(buckets) > 2 * self.KEPT:
            newest = max(buckets)
            for old in [old for old in buckets if old <= newest - self.KEPT]:
                del buckets[old]

    def series(self, key: tuple[Address, int, bool], end: float, width: int) -> list[float]:
        """Records per second in the ``width`` buckets that end at event time ``end``."""
        buckets = self.counts.get(key, {})
        last = int(end / self.bucket)
        return [buckets.get(slot, 0) / self.bucket for slot in range(last - width + 1, last + 1)]


class TuiState:
    """The model plus message-rate history and counters the panes need."""

    def __init__(self, bucket: float = 0.25) -> None:
        """An empty state; rates bucketed by ``bucket`` seconds of event time."""
        self.model = Model()
        self.rates = RateHistory(bucket)
        self.frontier_changes = 0

    def apply(self, event: Event) -> None:
        """Fold one event into the model and the rate history."""
        self.model.apply(event)
        if isinstance(event, Messages):
            self.rates.add(event)
        elif isinstance(event, FrontiersChanged):
            self.frontier_changes += 1

    def size(self) -> int:
        """Roughly how many entries the state holds: the model's (:meth:`Model.size`) and the rate buckets."""
        return self.model.size() + sum(map(len, self.rates.counts.values()))

    def apply_all(self, events: Iterable[Event]) -> None:
        """Fold many events in."""
        for event in events:
            self.apply(event)


# ---------------------------------------------------------------------- structure helpers


def scope_path(model: Model, address: Address) -> str:
    """The names of the scopes enclosing ``address``, outermost first, joined by ``/``."""
    names = []
    for length in range(1, len(address)):
        scope = model.scopes.get(address[:length])
        names.append(scope.info.name if scope is not None else "?")
    return "/".join(names)


def port_frontiers(model: Model, view: View, info: OperatorInfo, inputs: bool) -> list[list[Any]]:
    """The frontier at each input (or output) of the operator, as its enclosing scope tracks it."""
    if len(info.address) < 2:
        return []
    count = info.inputs if inputs else info.outputs
    locate = model.input_loc if inputs else model.output_loc
    return [view.frontier(locate(info.address, port)) for port in range(count)]


def unfinished(model: Model, view: View, info: OperatorInfo) -> bool:
    """Whether some time may still arrive at one of the operator's ports (or inside the scope).

    Before the enclosing scope's tracker reported any frontier (the dataflow
    is being built, or not yet started), nothing in it is finished.
    """
    if info.address[:-1] not in view.started and info.address[0] not in view.completed:
        return True
    if any(port_frontiers(model, view, info, True)) or any(port_frontiers(model, view, info, False)):
        return True
    if info.is_scope and info.address in model.scopes:
        children = model.scopes[info.address].children.values()
        return any(unfinished(model, view, child) for child in children)
    return False


def frontier_summary(frontiers: list[list[Any]]) -> str:
    """Per-port frontiers as ``{..} {..}`` (``-`` for no ports)."""
    if not frontiers:
        return "-"
    return " ".join(format_frontier(times) for times in frontiers)


def capabilities_text(model: Model, view: View, address: Address) -> str:
    """Capabilities held, as ``out0: (0, 1)×3`` (time×count); empty when none."""
    held = model.capabilities(address, view)
    parts = []
    for port, counts in sorted(held.items()):
        times = ", ".join(f"{format_frontier([time])[1:-1]}×{count}" for time, count in counts.items())
        parts.append(f"out{port}: {times}")
    return "; ".join(parts)


def walk(model: Model) -> Iterator[OperatorInfo]:
    """Every dataflow, scope and operator, depth first in address order."""
    for dataflow in model.dataflows():
        yield dataflow.info
        yield from _walk_children(model, dataflow.address)


def _walk_children(model: Model, scope: Address) -> Iterator[OperatorInfo]:
    info = model.scopes.get(scope)
    if info is None:
        return
    for _, child in sorted(info.children.items()):
        yield child
        if child.is_scope:
            yield from _walk_children(model, child.address)


# ---------------------------------------------------------------------- the tree


def dataflow_status(model: Model, address: Address) -> str:
    """``done`` when every worker completed the dataflow, else ``running (k/n done)``."""
    workers = model.workers
    done = sum(1 for view in workers.values() if address[0] in view.completed)
    if workers and done == len(workers):
        return "done"
    return f"running ({done}/{len(workers)} workers done)" if done else "running"


def tree_label(model: Model, view: View, info: OperatorInfo) -> tuple[str, bool]:
    """The tree line for a dataflow, scope or operator, and whether it is unfinished."""
    if len(info.address) == 1:
        status = dataflow_status(model, info.address)
        busy = status != "done"
        return f"{info.name} · dataflow {info.address[0]} · {info.scope_timestamp} · {status}", busy
    busy = unfinished(model, view, info)
    parts = [info.name, f"[{address_text(info.address)}]"]
    if info.inputs:
        parts.append("in " + frontier_summary(port_frontiers(model, view, info, True)))
    if info.outputs:
        parts.append("out " + frontier_summary(port_frontiers(model, view, info, False)))
    held = capabilities_text(model, view, info.address)
    if held:
        parts.append(f"holds {held}")
    if info.is_scope:
        parts.append(f"· {info.scope_timestamp}")
    return " ".join(parts), busy


# ---------------------------------------------------------------------- the operator table


@dataclass
class OperatorRow:
    """One row of the operator table."""

    address: Address
    name: str
    scope: str
    frontiers: str
    capabilities: str
    records_in: int
    records_out: int
    scheduled: int
    seconds: float
    busy: bool

    def matches(self, text: str) -> bool:
        """Whether the filter ``text`` (case-insensitive) occurs in the name, scope path or address."""
        needle = text.lower()
        return needle in self.name.lower() or needle in self.scope.lower() or needle in address_text(self.address)

    def sort_key(self, column: str) -> Any:
        """The value the table sorts this row by for ``column``."""
        if column == "address":
            return self.address
        value = getattr(self, column)
        return value.lower() if isinstance(value, str) else value


def records_through(model: Model, view: View, info: OperatorInfo) -> tuple[int, int]:
    """Records in and out of an operator; for a scope, what crossed the edges at its boundary.

    A nested scope's own message reports count the records of every worker on
    each worker, so a scope's counts come from :meth:`Model.edge_records`
    instead: the edges into it in its parent, and the edges to its outputs inside.
    """
    if not info.is_scope or len(info.address) < 2:
        return view.records_in(info.address), view.records_out(info.address)
    parent, inner = model.scopes.get(info.address[:-1]), model.scopes.get(info.address)
    index = info.address[-1]
    records_in = sum(model.edge_records(e, view) for e in parent.edges if e.target[0] == index) if parent else 0
    records_out = sum(model.edge_records(e, view) for e in inner.edges if e.target[0] == 0) if inner else 0
    return records_in, records_out


def operator_rows(model: Model, view: View) -> list[OperatorRow]:
    """A row for every operator and scope (not the dataflows themselves)."""
    rows = []
    for info in walk(model):
        if len(info.address) < 2:
            continue
        sched = view.scheduled.get(info.address, [0, 0.0])
        records_in, records_out = records_through(model, view, info)
        rows.append(
            OperatorRow(
                info.address,
                info.name,
                scope_path(model, info.address),
                frontier_summary(port_frontiers(model, view, info, True)),
                capabilities_text(model, view, info.address),
                records_in,
                records_out,
                int(sched[0]),
                float(sched[1]),
                unfinished(model, view, info),
            )
        )
    return rows


# ---------------------------------------------------------------------- channels


@dataclass
class ChannelRow:
    """One row of the channel pane."""

    key: str
    scope: str
    source: str
    target: str
    contract: str
    records: int
    in_flight: int | None
    """Records in flight; ``None`` where one worker's view cannot tell (they belong to the channel)."""
    spark: str


def _end_name(model: Model, scope: Address, node: int, port: int, is_source: bool) -> str:
    if node == 0:
        return f"(scope {'in' if is_source else 'out'}{port})"
    info = model.operators.get(scope + (node,))
    name = info.name if info is not None else "?"
    return f"{name}.{'out' if is_source else 'in'}{port}"


def _rate_key(edge: Edge) -> tuple[Address, int, bool]:
    node, port = edge.target
    if node != 0:
        return (edge.scope + (node,), port, False)
    node, port = edge.source
    return (edge.scope + (node,), port, True) if node != 0 else ((), 0, False)


def channel_rows(state: TuiState, view: View, width: int = 20, end: float | None = None) -> list[ChannelRow]:
    """A row per channel: records carried, records in flight, and a records-per-second sparkline."""
    model = state.model
    end = model.last_t if end is None else end
    # per-worker counts of records in flight are not the channel's (see Model.in_flight)
    per_worker_only = view.local_mode and not view.combined and len(model.workers) > 1
    rows = []
    for address, scope in sorted(model.scopes.items()):
        for edge in scope.edges:
            key = _rate_key(edge)
            records = model.edge_records(edge, view)
            flight: int | None = sum(model.in_flight(edge, view).values())
            if not flight and per_worker_only:
                flight = None
            series = state.rates.series(key, end, width) if end is not None else [0.0] * width
            rows.append(
                ChannelRow(
                    f"{address_text(address)}:{edge.source[0]}.{edge.source[1]}>{edge.target[0]}.{edge.target[1]}",
                    scope_path(model, address + (0,)),
                    _end_name(model, address, edge.source[0], edge.source[1], True),
                    _end_name(model, address, edge.target[0], edge.target[1], False),
                    edge.contract,
                    records,
                    flight,
                    sparkline(series),
                )
            )
    return rows


# ---------------------------------------------------------------------- stuck locations


@dataclass
class StuckPlace:
    """A port whose frontier is not empty: somewhere a person may ask "why is this stuck?"."""

    loc: Loc
    label: str
    frontier: list[Any]


def stuck_places(model: Model, view: View) -> list[StuckPlace]:
    """Every operator port with a non-empty frontier, inputs first, in address order."""
    places = []
    for info in walk(model):
        if len(info.address) < 2:
            continue
        for inputs in (True, False):
            for port, times in enumerate(port_frontiers(model, view, info, inputs)):
                if times:
                    loc = model.input_loc(info.address, port) if inputs else model.output_loc(info.address, port)
                    kind = "in" if inputs else "out"
                    label = f"{info.name}.{kind}{port} [{address_text(info.address)}] {format_frontier(times)}"
                    places.append(StuckPlace(loc, label, times))
    places.sort(key=lambda p: (p.loc[3], p.loc[0] + (p.loc[1],), p.loc[2]))
    return places


def default_place(places: list[StuckPlace]) -> StuckPlace | None:
    """The place to explain first: the last input (most downstream) of the outermost scopes."""
    inputs = [p for p in places if not p.loc[3]]
    if not inputs:
        return places[0] if places else None
    outermost = min(len(p.loc[0]) for p in inputs)
    return max((p for p in inputs if len(p.loc[0]) == outermost), key=lambda p: (p.loc[0], p.loc[1], -p.loc[2]))


def place_for_operator(places: list[StuckPlace], address: Address) -> StuckPlace | None:
    """The first stuck port of the operator at ``address`` (inputs first)."""
    for place in places:
        if place.loc[0] + (place.loc[1],) == address:
            return place
    return None


KIND_TITLES = {
    "capability": "capability held",
    "messages": "messages in flight",
    "input": "input handle",
    "progress": "progress not yet heard",
}


def short_loc(model: Model, loc: Loc) -> str:
    """A location in a few characters: ``Name.in0``, or ``Scope.in0 (inside)`` for a scope's boundary."""
    scope, node, port, is_source = loc
    if node == 0:
        inner = model.scopes.get(scope)
        name = inner.info.name if inner is not None else address_text(scope)
        return f"{name}.{'in' if is_source else 'out'}{port} (inside)"
    info = model.operators.get(scope + (node,))
    name = info.name if info is not None else address_text(scope + (node,))
    return f"{name}.{'out' if is_source else 'in'}{port}"


def path_text(model: Model, blocker: Blocker) -> str:
    """The blocker's path to the stuck location, as short names joined by arrows."""
    return " → ".join(short_loc(model, loc) for loc in blocker.path)


def explanation(model: Model, view: View, place: StuckPlace) -> tuple[str, list[Blocker]]:
    """A heading for ``place`` and the blockers that hold its earliest frontier time back."""
    time = place.frontier[0]
    heading = (
        f"{model.describe(place.loc)}: frontier {format_frontier(place.frontier)}; "
        f"what keeps time {format_frontier([time])[1:-1]} possible here:"
    )
    return heading, explain(model, place.loc, time, view)


def unfinished_dataflows(model: Model) -> list[str]:
    """Names of dataflows some worker has not completed (empty once every worker is done)."""
    names = []
    for dataflow in model.dataflows():
        if dataflow_status(model, dataflow.address) != "done":
            names.append(dataflow.info.name)
    return names
