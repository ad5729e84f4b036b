"""Graphviz diagrams of a :class:`~viz.model.Model`: nested scopes, ports, frontiers, stuck locations.

* Scopes are nested clusters labelled with their name and timestamp type; a
  scope's inputs and outputs are drawn as boundary nodes inside its cluster.
* Operators are boxes with a row of input ports above and output ports below;
  every port shows its current frontier (``{}``: nothing more can arrive).
* Edges show their channel contract, the records that crossed them (also the
  edges into, out of and around nested scopes, see
  :meth:`~viz.model.Model.edge_records`), and the records in flight (see
  :meth:`~viz.model.Model.in_flight`).
* Operators that hold capabilities are filled orange and list them; a stuck
  location is outlined red, with a note listing what holds it back, and the
  operators holding it back are filled red.
* Scopes nested deeper than ``depth`` are collapsed into one box with a summary.

DOT text always works; SVG and PNG need Graphviz's ``dot`` program.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from pathlib import PurePath
from typing import Any

import graphviz  # type: ignore[import-untyped]

from scopes.progress.order import Time
from viz.errors import RenderError
from viz.explain import Blocker, explain
from viz.model import Address, Edge, Loc, Model, ScopeInfo, View

HOLD_COLOR = "#ffd59a"
BLOCK_COLOR = "#f6a6a6"
STUCK_COLOR = "#d62728"
INSTALL_HINT = (
    "Graphviz's 'dot' program was not found: install it (Debian/Ubuntu: 'apt-get install graphviz', "
    "macOS: 'brew install graphviz'), or write DOT text instead (an output file ending in .dot)"
)


_PORT_ROW = '<TR><TD BORDER="0"><TABLE BORDER="0" CELLSPACING="0" CELLBORDER="1"><TR>{}</TR></TABLE></TD></TR>'


def _id(address: Address) -> str:
    return "op_" + "_".join(map(str, address))


def _boundary(address: Address, is_input: bool, port: int) -> str:
    return f"{_id(address)}_{'in' if is_input else 'out'}{port}"


def format_frontier(times: Sequence[Any]) -> str:
    """A frontier as short text: ``{}`` when empty."""
    text = ", ".join(_time(t) for t in times)
    if len(text) > 40:
        text = text[:37] + "..."
    return "{" + text + "}"


def _time(time: Time) -> str:
    if isinstance(time, tuple) and len(time) == 2:
        return f"({_time(time[0])}, {_time(time[1])})"
    return str(time)


class _Renderer:
    def __init__(self, model: Model, view: View, depth: int | None, stuck: tuple[Loc, Any] | None) -> None:
        self.model = model
        self.view = view
        self.depth = depth
        self.blockers: list[Blocker] = []
        self.stuck = stuck
        self.blocking: set[Address] = set()
        if stuck is not None:
            self.blockers = explain(model, stuck[0], stuck[1], view)
            for blocker in self.blockers:
                loc = blocker.location
                self.blocking.add(loc[0] + (loc[1],))

    def collapsed(self, address: Address) -> bool:
        return self.depth is not None and len(address) - 1 > self.depth

    def render(self) -> graphviz.Digraph:
        graph = graphviz.Digraph("dataflow")
        graph.attr(rankdir="TB", fontname="Helvetica", compound="true", newrank="true")
        graph.attr("node", fontname="Helvetica", fontsize="10")
        graph.attr("edge", fontname="Helvetica", fontsize="9")
        for scope in self.model.dataflows():
            self.scope(graph, scope)
        if self.stuck is not None:
            self.note(graph)
        return graph

    # ------------------------------------------------------------------ scopes

    def scope(self, parent: graphviz.Digraph, scope: ScopeInfo) -> None:
        address = scope.address
        with parent.subgraph(name="cluster_" + _id(address)) as cluster:
            info = scope.info
            done = len(address) == 1 and address[0] in self.view.completed
            label = f"{info.name} : {info.scope_timestamp}{'  (completed)' if done else ''}"
            cluster.attr(label=label, style="rounded", color="#555555", fontsize="11")
            for port in range(info.inputs):
                frontier = self.view.frontier((address, 0, port, True))
                cluster.node(
                    _boundary(address, True, port),
                    f"scope input {port}\n{format_frontier(frontier)}",
                    shape="invhouse",
                    style="filled",
                    fillcolor="#e8eef8",
                )
            for port in range(info.outputs):
                frontier = self.view.frontier((address, 0, port, False))
                cluster.node(
                    _boundary(address, False, port),
                    f"scope output {port}\n{format_frontier(frontier)}",
                    shape="house",
                    style="filled",
                    fillcolor="#e8eef8",
                    **self._stuck_attrs((address, 0, port, False)),
                )
            for index in sorted(scope.children):
                child = scope.children[index]
                if child.is_scope and not self.collapsed(child.address) and child.address in self.model.scopes:
                    self.scope(cluster, self.model.scopes[child.address])
                else:
                    self.operator(cluster, child.address)
            for edge in scope.edges:
                self.edge(cluster, edge)

    def _stuck_attrs(self, loc: Loc) -> dict[str, str]:
        if self.stuck is not None and self.stuck[0] == loc:
            return {"color": STUCK_COLOR, "penwidth": "3"}
        return {}

    # ------------------------------------------------------------------ operators

    def operator(self, graph: graphviz.Digraph, address: Address) -> None:
        model, view = self.model, self.view
        info = model.operators[address]
        held = model.capabilities(address, view) if not info.is_scope else {}
        fill = BLOCK_COLOR if address in self.blocking else HOLD_COLOR if held else "#ffffff"
        stuck_port = None
        if self.stuck is not None:
            s_scope, s_node, s_port, s_src = self.stuck[0]
            if s_scope + (s_node,) == address:
                stuck_port = (s_port, s_src)
        ins = "".join(
            self._port_cell(f"i{p}", f"in {p}", view.frontier(model.input_loc(address, p)), stuck_port == (p, False))
            for p in range(info.inputs)
        )
        outs = "".join(
            self._port_cell(f"o{p}", f"out {p}", view.frontier(model.output_loc(address, p)), stuck_port == (p, True))
            for p in range(info.outputs)
        )
        title = html.escape(info.name)
        lines = [f"<B>{title}</B>"]
        if info.is_scope:
            inner = sum(1 for a in model.operators if len(a) > len(address) and a[: len(address)] == address)
            lines.append(html.escape(f"scope : {info.scope_timestamp}, {inner} operators inside (collapsed)"))
        lines.append(html.escape(f"address {address}"))
        for port, counts in sorted(held.items()):
            times = ", ".join(f"{_time(t)}×{c}" for t, c in sorted(counts.items(), key=lambda kv: repr(kv[0])))
            lines.append(html.escape(f"holds out {port}: {times}"))
        sched = view.scheduled.get(address)
        if sched:
            lines.append(html.escape(f"ran {sched[0]}× {sched[1] * 1000:.1f} ms"))
        body = "<BR/>".join(lines)
        rows = []
        if ins:
            rows.append(_PORT_ROW.format(ins))
        rows.append(f'<TR><TD BORDER="0" BGCOLOR="{fill}">{body}</TD></TR>')
        if outs:
            rows.append(_PORT_ROW.format(outs))
        label = '<<TABLE BORDER="1" CELLBORDER="0" CELLSPACING="0" CELLPADDING="3">' + "".join(rows) + "</TABLE>>"
        graph.node(_id(address), label, shape="plaintext", margin="0")

    @staticmethod
    def _port_cell(port: str, name: str, frontier: list[Any], stuck: bool) -> str:
        text = html.escape(f"{name} {format_frontier(frontier)}")
        color = f' COLOR="{STUCK_COLOR}" BORDER="3"' if stuck else ""
        return f'<TD PORT="{port}"{color}><FONT POINT-SIZE="8">{text}</FONT></TD>'

    # ------------------------------------------------------------------ edges

    def _end(self, scope: Address, node: int, port: int, is_source: bool) -> str:
        if node == 0:
            return _boundary(scope, is_source, port)
        address = scope + (node,)
        info = self.model.operators.get(address)
        if info is not None and info.is_scope and not self.collapsed(address) and address in self.model.scopes:
            return _boundary(address, not is_source, port)
        return f"{_id(address)}:{'o' if is_source else 'i'}{port}"

    def edge(self, graph: graphviz.Digraph, edge: Edge) -> None:
        address, source, target, contract = edge.scope, edge.source, edge.target, edge.contract
        tail = self._end(address, source[0], source[1], True)
        head = self._end(address, target[0], target[1], False)
        parts = [] if contract == "Pipeline" else [contract]
        records = self.model.edge_records(edge, self.view)
        if records:
            parts.append(f"{records} rec")
        if target[0] != 0:
            flight = sum(self.model.in_flight(edge, self.view).values())
            if flight:
                parts.append(f"{flight} in flight")
        attrs = {"label": " ".join(parts)} if parts else {}
        if contract == "Exchange":
            attrs["style"] = "bold"
        elif contract == "Broadcast":
            attrs["style"] = "dashed"
        graph.edge(tail, head, **attrs)

    def note(self, graph: graphviz.Digraph) -> None:
        assert self.stuck is not None
        loc, time = self.stuck
        lines = [f"stuck: {self.model.describe(loc)} cannot pass {_time(time)}"]
        if not self.blockers:
            lines.append("nothing holds it back at that time")
        for blocker in self.blockers[:12]:
            text = blocker.description.split("; path:")[0]
            lines.append(f"• {text}")
        if len(self.blockers) > 12:
            lines.append(f"... and {len(self.blockers) - 12} more")
        graph.node("stuck_note", "\\l".join(lines) + "\\l", shape="note", color=STUCK_COLOR, fontcolor=STUCK_COLOR)
        scope, node, port, is_source = loc
        anchor = self._end(scope, node, port, is_source).split(":")[0]
        graph.edge("stuck_note", anchor, color=STUCK_COLOR, style="dashed", arrowhead="none")


def to_graph(
    model: Model,
    worker: int | None = None,
    depth: int | None = None,
    stuck: tuple[Loc, Any] | None = None,
    view: View | None = None,
) -> graphviz.Digraph:
    """The diagram of ``model`` as seen by ``worker`` (``None``: all workers combined)."""
    return _Renderer(model, view if view is not None else model.view(worker), depth, stuck).render()


def pipe(graph: graphviz.Digraph, fmt: str) -> bytes:
    """Lay out ``graph`` with ``dot`` and return it in format ``fmt`` (``svg``, ``png``, ...)."""
    try:
        return graph.pipe(format=fmt)
    except graphviz.ExecutableNotFound:
        raise RenderError(INSTALL_HINT) from None
    except graphviz.CalledProcessError as error:
        detail = (error.stderr or b"").decode(errors="replace").strip().splitlines()
        raise RenderError(f"dot failed to lay out the diagram: {detail[-1] if detail else error}") from None


class Diagram:
    """A rendered dataflow diagram: DOT text, SVG or PNG, and Jupyter display."""

    def __init__(self, graph: graphviz.Digraph) -> None:
        """Wrap a Graphviz graph."""
        self.graph = graph

    @property
    def source(self) -> str:
        """The DOT text."""
        return str(self.graph.source)

    def svg(self) -> str:
        """The diagram as SVG text (needs ``dot``)."""
        return pipe(self.graph, "svg").decode()

    def png(self) -> bytes:
        """The diagram as PNG bytes (needs ``dot``)."""
        return pipe(self.graph, "png")

    def _repr_svg_(self) -> str:
        return self.svg()

    def save(self, path: str) -> None:
        """Write to ``path``: DOT for ``.dot``/``.gv``, otherwise the format its suffix names."""
        suffix = PurePath(path).suffix[1:].lower() or "dot"  # of the file's name: './out' and 'a.d/out' are DOT
        if suffix in ("dot", "gv"):
            data = self.source.encode()
        else:
            if suffix not in ("svg", "png", "pdf", "plain", "json"):
                raise RenderError(f"cannot write {path}: use a file ending in .dot, .gv, .svg, .png, .pdf or .plain")
            data = pipe(self.graph, suffix)
        try:
            with open(path, "wb") as handle:
                handle.write(data)
        except OSError as error:
            raise RenderError(f"cannot write {path}: {error.strerror}") from None
