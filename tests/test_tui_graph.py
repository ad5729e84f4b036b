"""The graph pane: Graphviz's ``plain`` layout drawn in the terminal, with live frontiers, and without ``dot``."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest
from helpers.tui_helpers import replay_app, synthetic_events
from textual.widgets import Static, TabbedContent

from viz.errors import RenderError
from viz.tui.adapter import TuiState
from viz.tui.graph import INSTALL_HINT, Cluster, Layout, Node, dot_source, draw, frame_title, layout, parse_plain


def canvas_lines(app: object) -> list[str]:
    """The graph pane's drawing, line by line."""
    return str(app.query_one("#graph-canvas", Static).render()).splitlines()  # type: ignore[attr-defined]


def column_of(lines: list[str], text: str) -> tuple[int, int]:
    """(row, column) where ``text`` first appears."""
    for row, line in enumerate(lines):
        if text in line:
            return row, line.index(text)
    raise AssertionError(f"{text!r} is not drawn:\n" + "\n".join(lines))


def test_the_layout_comes_from_dot_plain_and_follows_the_dataflow() -> None:
    state = TuiState()
    state.apply_all(synthetic_events())
    source, nodes, clusters = dot_source(state.model)
    assert "subgraph cluster_n0 {" in source and "subgraph cluster_n0_2 {" in source  # the loop nests in the flow
    assert [c.label for c in clusters] == ["dataflow flow"]
    assert [c.label for c in clusters[0].children] == ["Loop · Product[integer, integer]"]
    plan = layout(state.model, 100, 20)
    x = {node.address + ((node.kind,) if node.kind != "operator" else ()): node.x for node in plan.nodes.values()}
    # left to right as the records flow: numbers, into the loop, Step, out of the loop, Probe
    assert x[(0, 1)] < x[(0, 2, "in")] < x[(0, 2, 2)] < x[(0, 2, "out")] < x[(0, 3)]
    assert len(plan.edges) == 6 and all(len(spline) >= 4 for spline in plan.edges)


def test_parse_plain_reads_nodes_and_edge_splines() -> None:
    from viz.tui.graph import Node

    nodes = {"a": Node("a", (0, 1), "operator", 0, 10, 3), "b": Node("b", (0, 2), "operator", 0, 10, 3)}
    width, height, edges = parse_plain(
        'graph 1 4.5 2\nnode a 1 1 1.25 0.75 "" solid box black lightgrey\n'
        'node b 3.5 1 1.25 0.75 "" solid box black lightgrey\n'
        "edge a b 4 1.6 1 2 1 2.5 1 2.9 1 solid black\nstop\n",
        nodes,
    )
    assert (width, height) == (4.5, 2.0)
    assert (nodes["b"].x, nodes["b"].y) == (3.5, 1.0)
    assert edges == [[(1.6, 1.0), (2.0, 1.0), (2.5, 1.0), (2.9, 1.0)]]


@pytest.mark.parametrize("size", [(80, 24), (200, 60)])
def test_graph_pane_draws_boxes_edges_clusters_and_frontiers(size: tuple[int, int]) -> None:
    async def run() -> None:
        app = replay_app()
        async with app.run_test(size=size) as pilot:
            await pilot.press("5")
            await pilot.pause(0.1)
            assert app.query_one(TabbedContent).active == "graph"
            assert "laid out by Graphviz (dot -Tplain)" in str(app.query_one("#graph-caption", Static).render())
            lines = canvas_lines(app)
            drawing = "\n".join(lines)
            for text in ("numbers", "Step", "Feedback", "Probe", "dataflow flow", "Loop · Product"):
                assert text in drawing, text
            # each port's frontier, inside its operator's box
            row, column = column_of(lines, "┌ Step ")
            assert lines[row + 1][column:].startswith("│i0 {(0, 0)}")
            assert lines[row + 2][column:].startswith("│i1 {(0, 1)}")
            assert lines[row + 3][column:].startswith("│o0 {(0, 0)}")
            assert "▸in0 {0}" in drawing and "◂out0" in drawing  # the loop's boundary ports
            assert re.search("─+▶", drawing)  # edges with arrowheads
            # dot's left-to-right order survives the scaling
            assert column_of(lines, "numbers")[1] < column_of(lines, "Step")[1] < column_of(lines, "Probe")[1]
            # the drawing fills the pane it was laid out for, or the pane scrolls (keys or the mouse)
            scroll = app.query_one("#graph-scroll")
            assert len(lines) >= scroll.size.height - 1
            if max(map(len, lines)) > scroll.size.width:
                assert scroll.has_focus
                await pilot.press("right", "right", "right")
                assert scroll.scroll_x > 0
            assert app.errors == []

    asyncio.run(run())


def test_graph_frontiers_follow_the_replay_and_the_worker() -> None:
    async def run() -> None:
        app = replay_app(done=True, at_end=True)
        async with app.run_test(size=(200, 60)) as pilot:
            await pilot.press("5")
            await pilot.pause(0.1)
            lines = canvas_lines(app)
            row, column = column_of(lines, "┌ Step ")
            assert lines[row + 1][column:].startswith("│i0 {} ")  # finished: every frontier empty
            await pilot.press("F", "F")  # back two frontier changes: times are still possible
            lines = canvas_lines(app)
            row, column = column_of(lines, "┌ Step ")
            assert not lines[row + 1][column:].startswith("│i0 {} "), lines[row + 1]
            await pilot.press("w")
            assert "showing worker 0" in str(app.query_one("#status2", Static).render())
            assert "┌ Step " in "\n".join(canvas_lines(app))
            assert app.errors == []

    asyncio.run(run())


def test_graph_pane_without_dot_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no dot anywhere
    state = TuiState()
    state.apply_all(synthetic_events())
    with pytest.raises(RenderError, match="apt-get install graphviz"):
        layout(state.model, 80, 20)

    async def run() -> None:
        app = replay_app()
        async with app.run_test(size=(100, 30)) as pilot:
            await pilot.press("5")
            await pilot.pause(0.1)
            assert "cannot be drawn" in str(app.query_one("#graph-caption", Static).render())
            assert " ".join(canvas_lines(app)).split() == INSTALL_HINT.split()
            await pilot.press("1")  # every other pane still works
            assert app.query_one(TabbedContent).active == "tree"
            assert app.errors == []

    asyncio.run(run())


def test_draw_spreads_a_small_graph_and_keeps_a_large_one_at_its_size() -> None:
    state = TuiState()
    state.apply_all(synthetic_events())
    model = state.model
    small = draw(layout(model, 60, 10), model, model.view(), 60, 10)
    assert small.width > 60 and small.height >= 10  # too small a pane: natural size, the pane scrolls
    large = draw(layout(model, 240, 70), model, model.view(), 240, 70)
    assert (large.width, large.height) == (240, 70)
    rows = [y for y in range(large.height) if "".join(large.chars[y]).strip()]
    assert rows[-1] - rows[0] > 20  # spread over the height, not a thin band


PEEL = "Peel · Product[Product[integer, integer], integer]"


@pytest.mark.parametrize("width", range(4, len(PEEL) + 6))
def test_a_frame_title_is_shortened_at_a_word_boundary_with_an_ellipsis(width: int) -> None:
    title = frame_title(PEEL, width)
    assert len(title) <= width
    if len(PEEL) + 2 <= width:
        assert title == f" {PEEL} "
        return
    assert title.startswith(" ") and title.endswith("… "), title
    kept = title[1:-2].rstrip()
    assert PEEL.startswith(kept)
    after = PEEL[len(kept) : len(kept) + 1]
    # never a word cut in two ("…, i"), unless the first word alone does not fit
    assert not (kept[-1:].isalnum() and after.isalnum()) or " " not in kept, title


def test_frame_titles_at_some_widths() -> None:
    assert frame_title(PEEL, 40) == " Peel · Product[Product[integer … "
    assert frame_title(PEEL, 26) == " Peel · Product[Product[… "
    assert frame_title(PEEL, 12) == " Peel … "
    assert frame_title(PEEL, 5) == " Pe… "
    assert frame_title(PEEL, 3) == ""


def test_an_edge_through_a_frame_title_does_not_cut_it() -> None:
    state = TuiState()
    state.apply_all(synthetic_events())
    model = state.model
    box = Node("n", (9, 9), "operator", 0, 60, 4, x=5.0, y=2.0)  # not an operator of the model: a bare frame
    row_of_title = 2.0 + (4 // 2 + 1) / 4.0  # the frame's top row, in inches (4 cells per inch)
    edge = [(1.0, row_of_title), (9.0, row_of_title)]  # straight through it
    plan = Layout(10.0, 4.0, {"n": box}, [edge], [Cluster((9,), PEEL, nodes=["n"])], ())
    lines = draw(plan, model, model.view(), 100, 20).to_text().plain.splitlines()
    titled = [line for line in lines if "Peel" in line]
    assert len(titled) == 1 and f" {PEEL} " in titled[0], "\n".join(lines)


def test_negative_addresses_and_ports_are_laid_out_not_refused_by_dot() -> None:
    """Found by the viewer audit: an operator at address (0, -1) or a channel from port -1 (well-typed ints)
    made node names like n0_-1 that dot refuses ('syntax error near -1'): the graph pane showed no graph."""
    from runtime.instrument import ChannelCreated, LocationsDefined, OperatorCreated
    from viz.tui.app import TimelyApp
    from viz.tui.sources import Replay

    events = [
        OperatorCreated(0, 1, 0.0, (0,), "dataflow", 0, 0, (), "integer"),
        OperatorCreated(0, 2, 0.0, (0, -1), "Negative", 1, 1, ((0,),), None),
        OperatorCreated(0, 3, 0.0, (0, 1), "Map", 1, 1, ((0,),), None),
        ChannelCreated(0, 4, 0.0, (0,), (-1, 0), (1, 0), "Pipeline"),
        ChannelCreated(0, 5, 0.0, (0,), (1, -2), (0, -3), "Pipeline"),
        LocationsDefined(0, 6, 0.0, (0,), ((1, 0, True), (1, 0, False))),
    ]
    replay = Replay(events)
    replay.seek(len(replay))

    async def run() -> None:
        app = TimelyApp(replay=replay, clock=lambda: 0.0)
        async with app.run_test(size=(100, 30)) as pilot:
            await pilot.press("5")
            await pilot.pause(0.1)
            assert "laid out by Graphviz" in str(app.query_one("#graph-caption", Static).render())
            drawing = "\n".join(canvas_lines(app))
            assert "Negative" in drawing and "Map" in drawing
            assert app.errors == []

    asyncio.run(run())
