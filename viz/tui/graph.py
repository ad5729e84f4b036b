"""A terminal drawing of the dataflow graph, laid out by Graphviz (``dot -Tplain``), with live frontiers.

:func:`layout` writes a small DOT description of the model's structure (each
leaf operator a fixed-size box, each scope a cluster holding its children and
its boundary ports) and asks Graphviz for the ``plain`` output: node centres
and edge splines, in inches.  Boxes are sized in terminal cells before the
layout, so the positions ``dot`` returns never make boxes overlap once they
are mapped back to cells.  The layout depends only on the structure and the pane's
size, so it is computed once for them and reused while the frontiers change.

:func:`draw` maps a :class:`Layout` onto a grid of cells, scaled up to fill
the space it is given (Graphviz spreads the layout, never shrinks it: a graph
larger than the pane keeps its natural size and the pane scrolls), and paints
scope clusters (their extent
is the union of their members, since ``plain`` gives no cluster boxes),
edges with arrowheads, then the boxes with each port's frontier.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rich.text import Text

from viz.dot import format_frontier
from viz.errors import RenderError
from viz.model import Address, Model, View

CELLS_PER_INCH_X = 8.0
"""Terminal columns per inch of the layout."""
CELLS_PER_INCH_Y = 4.0
"""Terminal rows per inch of the layout (a cell is about twice as tall as wide)."""
BOX_WIDTH = 20
"""Columns of an operator's box (names and frontiers are cut to fit)."""
NARROW_BOX_WIDTH = 15
"""Columns of an operator's box in a pane narrower than :data:`NARROW`."""
NARROW = 120

INSTALL_HINT = (
    "The graph pane needs Graphviz's 'dot' program, which was not found. Install it "
    "(Debian/Ubuntu: apt-get install graphviz; macOS: brew install graphviz) and open this pane again; "
    "every other pane works without it."
)


@dataclass
class Node:
    """A box (an operator) or a boundary port (a scope's input or output) of the drawing."""

    name: str
    address: Address
    """The operator, or the scope whose boundary this is."""
    kind: str
    """``"operator"``, ``"in"`` (a scope input, seen from inside) or ``"out"``."""
    port: int
    width: int
    height: int
    x: float = 0.0
    y: float = 0.0
    """Centre, in inches, y growing upwards (as ``plain`` gives it)."""


@dataclass
class Cluster:
    """A scope: its name, its members (nodes by name) and the scopes nested in it."""

    address: Address
    label: str
    nodes: list[str] = field(default_factory=list)
    children: list[Cluster] = field(default_factory=list)


@dataclass
class Layout:
    """What ``dot -Tplain`` made of the structure: node centres, edge splines, the graph's size."""

    width: float
    height: float
    nodes: dict[str, Node]
    edges: list[list[tuple[float, float]]]
    clusters: list[Cluster]
    signature: tuple[Any, ...]


def _num(value: int) -> str:
    """An int as a DOT identifier's part: ``-1`` is ``m1`` (a recording may hold any int; ``-`` ends an ID)."""
    return str(value) if value >= 0 else f"m{-value}"


def _id(address: Address) -> str:
    return "n" + "_".join(map(_num, address))


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def signature(model: Model) -> tuple[Any, ...]:
    """What the layout depends on: the operators and the edges (a new one means a new layout)."""
    return (len(model.operators), sum(len(scope.edges) for scope in model.scopes.values()), len(model.scopes))


def _nodes_and_clusters(model: Model, box_width: int) -> tuple[dict[str, Node], list[Cluster]]:
    nodes: dict[str, Node] = {}

    def scope_cluster(address: Address) -> Cluster:
        scope = model.scopes[address]
        info = scope.info
        label = f"{info.name} · {info.scope_timestamp}" if len(address) > 1 else f"dataflow {info.name}"
        cluster = Cluster(address, label)
        if len(address) > 1:
            # a boundary port shows the frontier its parent tracks there: room for one time of the parent's type
            parent = model.scopes.get(address[:-1])
            nesting = (parent.info.scope_timestamp or "").count("Product") if parent else 0
            width = max(box_width // 2 + 1, 9 + 5 * nesting)
            for kind, count in (("in", info.inputs), ("out", info.outputs)):
                for port in range(count):
                    name = f"{_id(address)}_{kind}{port}"
                    nodes[name] = Node(name, address, kind, port, width, 1)
                    cluster.nodes.append(name)
        for _, child in sorted(scope.children.items()):
            if child.is_scope and child.address in model.scopes:
                cluster.children.append(scope_cluster(child.address))
            else:
                name = _id(child.address)
                # room for one time of the scope's type: "(0, 0)" per Product level, plus "│i0 {" and "}│"
                nesting = (info.scope_timestamp or "").count("Product")
                width = max(box_width, 10 + 5 * nesting)
                nodes[name] = Node(name, child.address, "operator", 0, width, 2 + child.inputs + child.outputs)
                cluster.nodes.append(name)
        return cluster

    clusters = [scope_cluster(dataflow.address) for dataflow in model.dataflows()]
    return nodes, clusters


def _endpoint(model: Model, scope: Address, node: int, port: int, is_source: bool) -> str:
    """The drawing's node for one end of an edge inside ``scope``."""
    if node == 0:  # the scope's own boundary, seen from inside
        return f"{_id(scope)}_{'in' if is_source else 'out'}{_num(port)}"
    address = scope + (node,)
    info = model.operators.get(address)
    if info is not None and info.is_scope and address in model.scopes:
        return f"{_id(address)}_{'out' if is_source else 'in'}{_num(port)}"
    return _id(address)


def dot_source(model: Model, box_width: int = BOX_WIDTH) -> tuple[str, dict[str, Node], list[Cluster]]:
    """The DOT text ``dot`` lays out, with the nodes and clusters it names."""
    nodes, clusters = _nodes_and_clusters(model, box_width)
    lines = [
        "digraph pytimely {",
        "  rankdir=LR; nodesep=0.3; ranksep=0.4; margin=0;",
        '  node [shape=box, fixedsize=true, label=""];',
    ]

    def emit(cluster: Cluster, indent: str) -> None:
        lines.append(f"{indent}subgraph cluster_{_id(cluster.address)} {{")
        lines.append(f"{indent}  label={_quote(cluster.label)}; margin=14;")
        for name in cluster.nodes:
            node = nodes[name]
            width, height = node.width / CELLS_PER_INCH_X, node.height / CELLS_PER_INCH_Y
            lines.append(f"{indent}  {name} [width={width:.3f}, height={height:.3f}];")
        for child in cluster.children:
            emit(child, indent + "  ")
        lines.append(f"{indent}}}")

    for cluster in clusters:
        emit(cluster, "  ")
    for address, scope in sorted(model.scopes.items()):
        for edge in scope.edges:
            tail = _endpoint(model, address, edge.source[0], edge.source[1], True)
            head = _endpoint(model, address, edge.target[0], edge.target[1], False)
            if tail in nodes and head in nodes:
                lines.append(f"  {tail} -> {head};")
    lines.append("}")
    return "\n".join(lines) + "\n", nodes, clusters


def parse_plain(text: str, nodes: dict[str, Node]) -> tuple[float, float, list[list[tuple[float, float]]]]:
    """Read ``dot -Tplain``: set the nodes' centres; return the graph's width, height and edge splines."""
    width = height = 0.0
    edges: list[list[tuple[float, float]]] = []
    for line in text.splitlines():
        parts = line.split()
        if not parts:
            continue
        if parts[0] == "graph":
            width, height = float(parts[2]), float(parts[3])
        elif parts[0] == "node" and parts[1] in nodes:
            nodes[parts[1]].x, nodes[parts[1]].y = float(parts[2]), float(parts[3])
        elif parts[0] == "edge":
            count = int(parts[3])
            coords = parts[4 : 4 + 2 * count]
            edges.append([(float(coords[i]), float(coords[i + 1])) for i in range(0, len(coords), 2)])
    return width, height, edges


PAD_X, PAD_Y = 3, 2
"""Cells left around the drawing, for the outermost clusters' borders."""


def layout(model: Model, width: int = 0, height: int = 0, timeout: float = 30.0) -> Layout:
    """Lay the model's structure out with ``dot -Tplain``, spread to fill ``width`` × ``height`` cells.

    A graph that needs more room than that keeps its natural size (the pane
    scrolls); Graphviz spreads a smaller one (``ratio=fill``), so edges still
    meet the boxes.  Raise :class:`RenderError` if ``dot`` is missing or fails.
    """
    program = shutil.which("dot")
    if program is None:
        raise RenderError(INSTALL_HINT)
    source, nodes, clusters = dot_source(model, NARROW_BOX_WIDTH if 0 < width < NARROW else BOX_WIDTH)
    plan = _run(program, source, nodes, clusters, model, timeout)
    target_w = max(plan.width, (width - 2 * PAD_X) / CELLS_PER_INCH_X)
    target_h = max(plan.height, (height - 2 * PAD_Y) / CELLS_PER_INCH_Y)
    if target_w > plan.width + 0.2 or target_h > plan.height + 0.2:
        spread = source.replace("margin=0;", f'margin=0; size="{target_w:.2f},{target_h:.2f}!"; ratio=fill;', 1)
        plan = _run(program, spread, nodes, clusters, model, timeout)
    return plan


def _run(
    program: str, source: str, nodes: dict[str, Node], clusters: list[Cluster], model: Model, timeout: float
) -> Layout:
    try:
        done = subprocess.run([program, "-Tplain"], input=source.encode(), capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise RenderError(f"dot took more than {timeout:g} s to lay out {len(nodes)} boxes") from None
    except OSError as error:
        raise RenderError(f"cannot run {program}: {error.strerror or error}") from None
    if done.returncode != 0:
        detail = done.stderr.decode(errors="replace").strip().splitlines()
        raise RenderError(f"dot could not lay out the graph: {detail[-1] if detail else done.returncode}")
    plain = done.stdout.decode(errors="replace")
    width, height, edges = parse_plain(plain, nodes)
    return Layout(width, height, nodes, edges, clusters, signature(model))


# ---------------------------------------------------------------------- drawing


class Canvas:
    """A grid of cells, each a character and a style."""

    def __init__(self, width: int, height: int) -> None:
        """A blank grid."""
        self.width, self.height = width, height
        self.chars = [[" "] * width for _ in range(height)]
        self.styles: list[list[str]] = [[""] * width for _ in range(height)]

    def put(self, x: int, y: int, char: str, style: str = "") -> None:
        """Set one cell (ignored outside the grid)."""
        if 0 <= x < self.width and 0 <= y < self.height:
            self.chars[y][x] = char
            self.styles[y][x] = style

    def text(self, x: int, y: int, text: str, style: str = "") -> None:
        """Write ``text`` from ``(x, y)`` rightwards."""
        for offset, char in enumerate(text):
            self.put(x + offset, y, char, style)

    def box(self, left: int, top: int, width: int, height: int, style: str, rounded: bool = False) -> None:
        """Draw a rectangle's border."""
        right, bottom = left + width - 1, top + height - 1
        corners = "╭╮╰╯" if rounded else "┌┐└┘"  # noqa: RUF001
        for x in range(left + 1, right):
            self.put(x, top, "─", style)
            self.put(x, bottom, "─", style)
        for y in range(top + 1, bottom):
            self.put(left, y, "│", style)
            self.put(right, y, "│", style)
        self.put(left, top, corners[0], style)
        self.put(right, top, corners[1], style)
        self.put(left, bottom, corners[2], style)
        self.put(right, bottom, corners[3], style)

    def trimmed(self, width: int, height: int) -> Canvas:
        """The drawing without the blank rows above and columns left of it, at least ``width`` × ``height``."""
        rows = [y for y in range(self.height) if any(c != " " for c in self.chars[y])]
        columns = [x for x in range(self.width) if any(self.chars[y][x] != " " for y in rows)]
        if not rows:
            return Canvas(width, height)
        top, left = rows[0], columns[0]
        used_w, used_h = columns[-1] - left + 1, rows[-1] - top + 1
        # centre what is smaller than the pane, keep the rest from its top left corner
        shift_x = max((width - used_w) // 2, 0)
        shift_y = max((height - used_h) // 2, 0)
        result = Canvas(max(width, used_w), max(height, used_h))
        for y in range(top, rows[-1] + 1):
            for x in range(left, columns[-1] + 1):
                result.chars[y - top + shift_y][x - left + shift_x] = self.chars[y][x]
                result.styles[y - top + shift_y][x - left + shift_x] = self.styles[y][x]
        return result

    def to_text(self) -> Text:
        """The grid as Rich text, one line per row."""
        text = Text(no_wrap=True, overflow="crop")
        for row in range(self.height):
            chars, styles = self.chars[row], self.styles[row]
            start = 0
            for column in range(1, self.width + 1):
                if column == self.width or styles[column] != styles[start]:
                    text.append("".join(chars[start:column]), style=styles[start] or None)
                    start = column
            if row + 1 < self.height:
                text.append("\n")
        return text


def _fit(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(width - 1, 0)] + "…"


def frame_title(label: str, width: int) -> str:
    """``label`` padded with a space each side, in at most ``width`` cells, shortened at a word boundary with "…".

    A word is a run of letters and digits, so ``Peel · Product[Product[integer,
    integer], integer]`` may become ``Peel · Product[Product[integer, …``, never
    ``… i``; a first word too long for the width is cut (``Pe…``).
    """
    if len(label) + 2 <= width:
        return f" {label} "
    room = width - 2  # the text and its ellipsis, between the two spaces
    if room < 2:
        return ""
    cuts = sorted({0, *(end for word in re.finditer(r"\w+", label) for end in (word.start(), word.end()))})
    for cut in reversed(cuts):
        kept = label[:cut].rstrip(" ,·")
        ellipsis = "…" if kept[-1:] in ("[", "(") else " …"  # "Product[…", "Peel …"
        if kept and len(kept) + len(ellipsis) <= room:
            return f" {kept}{ellipsis} "
    return f" {label[: room - 1]}… "


def _bezier(points: list[tuple[float, float]], steps: int) -> list[tuple[float, float]]:
    """Sample the cubic B-spline pieces ``plain`` gives (1 + 3k control points)."""
    samples = [points[0]]
    for start in range(0, len(points) - 3, 3):
        p0, p1, p2, p3 = points[start : start + 4]
        for step in range(1, steps + 1):
            t = step / steps
            a, b, c, d = (1 - t) ** 3, 3 * t * (1 - t) ** 2, 3 * t * t * (1 - t), t**3
            samples.append(
                (a * p0[0] + b * p1[0] + c * p2[0] + d * p3[0], a * p0[1] + b * p1[1] + c * p2[1] + d * p3[1])
            )
    return samples


def draw(plan: Layout, model: Model, view: View, width: int, height: int, busy: set[Address] | None = None) -> Canvas:
    """Paint ``plan`` with the frontiers of ``view``, filling at least ``width`` × ``height`` cells."""
    natural_w = round(plan.width * CELLS_PER_INCH_X) + 2 * PAD_X
    natural_h = round(plan.height * CELLS_PER_INCH_Y) + 2 * PAD_Y
    canvas = Canvas(max(width, natural_w), max(height, natural_h))

    def cell(x: float, y: float) -> tuple[int, int]:
        return round(x * CELLS_PER_INCH_X) + PAD_X, round((plan.height - y) * CELLS_PER_INCH_Y) + PAD_Y

    boxes: dict[str, tuple[int, int, int, int]] = {}
    for name, node in plan.nodes.items():
        cx, cy = cell(node.x, node.y)
        boxes[name] = (cx - node.width // 2, cy - node.height // 2, node.width, node.height)
    titles = _paint_clusters(canvas, plan, boxes)
    _paint_edges(canvas, plan, cell)
    for x, y, title, style in titles:  # over the edges: no edge crosses out part of a scope's name
        canvas.text(x, y, title, style)
    _paint_nodes(canvas, plan, boxes, model, view, busy or set())
    return canvas.trimmed(width, height)


def _paint_clusters(
    canvas: Canvas, plan: Layout, boxes: dict[str, tuple[int, int, int, int]]
) -> list[tuple[int, int, str, str]]:
    """Frame each scope around the boxes of its operators and its nested scopes; return the titles to write.

    Each title ``(x, y, text, style)`` is the scope's name and timestamp, shortened to its frame
    (:func:`frame_title`), for the caller to write once the edges are drawn.
    """
    titles: list[tuple[int, int, str, str]] = []

    def extent(cluster: Cluster) -> tuple[int, int, int, int] | None:
        parts = [boxes[name] for name in cluster.nodes if name in boxes]
        for child in cluster.children:
            inner = extent(child)
            if inner is not None:
                parts.append(inner)
        if not parts:
            return None
        left = min(p[0] for p in parts) - 2
        top = min(p[1] for p in parts) - 1
        right = max(p[0] + p[2] for p in parts) + 2
        bottom = max(p[1] + p[3] for p in parts) + 1
        return left, top, right - left, bottom - top

    def paint_cluster(cluster: Cluster, depth: int) -> None:
        box = extent(cluster)
        if box is None:
            return
        left, top, w, h = box
        style = "blue" if depth else "bright_blue"
        canvas.box(left, top, w, h, style)
        titles.append((left + 2, top, frame_title(cluster.label, w - 4), f"bold {style}"))
        for child in cluster.children:
            paint_cluster(child, depth + 1)

    for cluster in plan.clusters:
        paint_cluster(cluster, 0)
    return titles


def _paint_edges(canvas: Canvas, plan: Layout, cell: Callable[[float, float], tuple[int, int]]) -> None:
    """Trace each edge's spline in cells (``cell`` maps layout inches to cells), with an arrowhead at its end."""
    for spline in plan.edges:
        samples = [cell(x, y) for x, y in _bezier(spline, 8)] if len(spline) >= 4 else [cell(x, y) for x, y in spline]
        for (x0, y0), (x1, y1) in zip(samples, samples[1:], strict=False):
            steps = max(abs(x1 - x0), abs(y1 - y0), 1)
            for step in range(steps + 1):
                x = x0 + round((x1 - x0) * step / steps)
                y = y0 + round((y1 - y0) * step / steps)
                horizontal = abs(x1 - x0) >= abs(y1 - y0) * 2
                canvas.put(x, y, "─" if horizontal else ("│" if abs(x1 - x0) * 2 <= abs(y1 - y0) else "·"), "grey62")
        if len(samples) >= 2:
            (x0, y0), (x1, y1) = samples[max(0, len(samples) - 5)], samples[-1]
            across = abs(x1 - x0) >= abs(y1 - y0)
            arrow = ("▶" if x1 >= x0 else "◀") if across else ("▼" if y1 > y0 else "▲")
            canvas.put(x1, y1, arrow, "bold grey70")


def _paint_nodes(
    canvas: Canvas,
    plan: Layout,
    boxes: dict[str, tuple[int, int, int, int]],
    model: Model,
    view: View,
    busy: set[Address],
) -> None:
    """Paint each operator's box with its ports' frontiers (yellow if in ``busy``), and each scope port's frontier."""
    for name, node in plan.nodes.items():
        left, top, w, h = boxes[name]
        if node.kind == "operator":
            info = model.operators.get(node.address)
            if info is None:
                continue
            holding = node.address in busy
            style = "bold yellow" if holding else "green"
            canvas.box(left, top, w, h, style)
            for y in range(top + 1, top + h - 1):
                canvas.text(left + 1, y, " " * (w - 2))
            canvas.text(left + 1, top, _fit(f" {info.name} ", w - 2), style)
            row = top + 1
            for port in range(info.inputs):
                frontier = format_frontier(view.frontier(model.input_loc(node.address, port)))
                canvas.text(left + 1, row, _fit(f"i{port} {frontier}", w - 2), "" if frontier != "{}" else "dim")
                row += 1
            for port in range(info.outputs):
                frontier = format_frontier(view.frontier(model.output_loc(node.address, port)))
                canvas.text(left + 1, row, _fit(f"o{port} {frontier}", w - 2), "" if frontier != "{}" else "dim")
                row += 1
        else:
            scope = node.address
            if len(scope) < 2:
                continue
            loc = model.input_loc(scope, node.port) if node.kind == "in" else model.output_loc(scope, node.port)
            frontier = format_frontier(view.frontier(loc))
            marker = "▸" if node.kind == "in" else "◂"
            canvas.text(left, top, _fit(f"{marker}{node.kind}{node.port} {frontier}".ljust(w), w), "cyan")
