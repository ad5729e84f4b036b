"""The Textual app: a live (or replayed) view of the scope tree, operators, channels and stuck frontiers.

:class:`TimelyApp` composes the parts: each pane lives in :mod:`viz.tui.panes`,
live intake in :mod:`viz.tui.live_feed`, replay's playback in
:mod:`viz.tui.playback`, the operator table's filter and order in
:mod:`viz.tui.table_order`, and the help screen and time slider in
:mod:`viz.tui.widgets`.  The app holds what the user chose, maps keys and
clicks to the parts, and redraws the visible pane.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

from rich.text import Text
from textual import on
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import ScrollableContainer
from textual.css.query import NoMatches
from textual.widgets import DataTable, Footer, Input, OptionList, Static, TabbedContent, TabPane, Tree
from textual.widgets.tree import TreeNode

from viz.model import Address, Loc, View
from viz.tui.adapter import (
    TuiState,
    address_text,
    place_for_operator,
    stuck_places,
    unfinished_dataflows,
)
from viz.tui.diagram_file import reserve_diagram_path
from viz.tui.live_feed import LiveFeed, Run
from viz.tui.panes.channels import add_channel_columns, compose_channels, refresh_channels
from viz.tui.panes.graph import GraphPane
from viz.tui.panes.operators import add_operator_columns, compose_operators, refresh_operators
from viz.tui.panes.stuck import StuckPane
from viz.tui.panes.tree import TreePane
from viz.tui.playback import Playback
from viz.tui.program_errors import died_stuck
from viz.tui.sources import Connection, LiveListener, Replay
from viz.tui.table_order import TableOrder
from viz.tui.widgets import HelpScreen, TimeSlider

__all__ = ["HelpScreen", "Run", "TimeSlider", "TimelyApp"]


class TimelyApp(App[int]):
    """The pytimely viewer: scope tree, operators, channels and the stuck view, live or replayed."""

    TITLE = "pytimely viewer"
    CSS = """
    #status { height: 1; background: $primary; color: $text; padding: 0 1; }
    #status2 { height: 1; background: $primary-darken-2; color: $text; padding: 0 1; }
    TabbedContent { height: 1fr; }
    TabPane { padding: 0; }
    #filter { display: none; height: 3; }
    #filter.shown { display: block; }
    .caption { height: 1; color: $text-muted; padding: 0 1; }
    #stuck-places { height: 1fr; max-height: 12; border: none; }
    #stuck-scroll { height: 2fr; border-top: solid $primary; }
    #stuck-text { padding: 0 1; }
    #graph-scroll { height: 1fr; }
    #graph-canvas { width: auto; height: auto; }
    #program-error { height: auto; max-height: 10; display: none; padding: 0 1; }
    #program-error.shown { display: block; }
    #footer-note { height: 1; display: none; color: $text-muted; padding: 0 1; }
    #footer-note.shown { display: block; }
    Tree, DataTable { height: 1fr; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "Quit"),
        Binding("question_mark", "help", "Help"),
        Binding("1", "pane('tree')", "Tree", show=False),
        Binding("2", "pane('operators')", "Operators", show=False),
        Binding("3", "pane('channels')", "Channels", show=False),
        Binding("4", "pane('stuck')", "Stuck", show=False),
        Binding("5", "pane('graph')", "Graph"),
        Binding("x", "explain", "Explain"),
        Binding("w", "worker", "Worker"),
        Binding("right_square_bracket", "run(1)", "Next run"),
        Binding("left_square_bracket", "run(-1)", "Prev run", show=False),
        Binding("slash", "filter", "Filter"),
        Binding("s", "sort", "Sort", show=False),
        Binding("r", "reverse", "Reverse", show=False),
        Binding("d", "diagram", "Diagram"),
        Binding("escape", "close_filter", "Close filter", show=False),
        Binding("p", "play", "Play"),
        Binding("n", "step(1)", "Step"),
        Binding("b", "step(-1)", "Back", show=False),
        Binding("f", "frontier(1)", "Next change"),
        Binding("F", "frontier(-1)", "Prev change", show=False),
        Binding("plus,equals_sign", "speed(1)", "Faster", show=False),
        Binding("minus", "speed(-1)", "Slower", show=False),
        Binding("g", "seek_end(0)", "Start", show=False),
        Binding("G", "seek_end(1)", "End", show=False),
    ]

    def __init__(
        self,
        *,
        replay: Replay | None = None,
        listener: LiveListener | None = None,
        clock: Callable[[], float] = time.monotonic,
        refresh_interval: float = 0.25,
        ingest_interval: float = 0.05,
        idle_after: float = 3.0,
        diagram_dir: str | Path = ".",
        program: Any = None,
    ) -> None:
        """A viewer of ``replay`` (a recording) or of what ``listener`` receives (live)."""
        super().__init__()
        if (replay is None) == (listener is None):
            raise ValueError("TimelyApp needs exactly one of replay= or listener=")
        self.replay = replay
        self.listener = listener
        self.program = program
        self.clock = clock
        self.refresh_interval = refresh_interval
        self.ingest_interval = ingest_interval
        self.idle_after = idle_after
        self.diagram_dir = Path(diagram_dir)
        self.feed = LiveFeed(listener, clock, self._new_run) if listener is not None else None
        """Live: the runs and what the listener delivers (``None`` for a replay)."""
        self.playback = Playback(replay, clock) if replay is not None else None
        """Replay: where it is and whether it plays (``None`` live)."""
        self.run_index = 0
        """The run on screen (live)."""
        self._follow_newest = True
        self.worker: int | None = None
        self.order = TableOrder()
        self.stuck_loc: Loc | None = None
        self.tree_pane = TreePane()
        self.stuck_pane = StuckPane()
        self.graph_pane = GraphPane()
        self._dirty = True
        self._last_arrival = clock()
        self._auto_opened = False
        self.errors: list[str] = []
        self.last_diagram: str | None = None
        self._program_ended = False
        self.auto_stuck_opened = 0

    # ------------------------------------------------------------------ state access

    @property
    def state(self) -> TuiState:
        """The state on screen."""
        if self.replay is not None:
            return self.replay.state
        return self.runs[self.run_index].state

    @property
    def live_state(self) -> TuiState | None:
        """The state of the newest live run (``None`` for a replay)."""
        return self.runs[-1].state if self.runs else None

    @property
    def runs(self) -> list[Run]:
        """Live: one entry per program run that connected, oldest first (see :class:`Run`); a replay has none."""
        return self.feed.runs if self.feed is not None else []

    @property
    def lag(self) -> float:
        """Live: how far behind the program the screen was at the last intake, in seconds."""
        return self.feed.lag if self.feed is not None else 0.0

    @property
    def ingested(self) -> int:
        """Live: the events folded in so far."""
        return self.feed.ingested if self.feed is not None else 0

    @property
    def playing(self) -> bool:
        """Whether the replay is playing."""
        return self.playback is not None and self.playback.playing

    @property
    def sort_column(self) -> str:
        """The column the operator table is sorted by."""
        return self.order.sort_column

    @property
    def _tree_nodes(self) -> dict[Address, TreeNode[Address]]:
        """The scope tree's node for each address on screen."""
        return self.tree_pane.nodes

    def _new_run(self, run: Run, connection: Connection) -> None:
        """A connection started a new program run: follow it if the newest run was on screen, and say so."""
        if self._follow_newest:
            self._show_run(len(self.runs) - 1)
        self.notify(f"run {run.number} connected ({connection.peer}); ']' and '[' switch runs", title="new run")

    def _show_run(self, index: int) -> None:
        self.run_index = index
        self.worker = None
        self.stuck_loc = None
        self.graph_pane.key = None
        self._dirty = True

    def action_run(self, direction: int) -> None:
        """Show the next (``1``) or previous (``-1``) program run (live)."""
        if len(self.runs) < 2:
            self.notify("only one run so far: each program that connects becomes a run of its own")
            return
        index = max(0, min(len(self.runs) - 1, self.run_index + direction))
        self._follow_newest = index == len(self.runs) - 1
        self._show_run(index)
        self.refresh_panes()

    def current_view(self) -> View:
        """The view of the selected worker (or all workers combined)."""
        model = self.state.model
        if self.worker is not None and self.worker in model.workers:
            return model.view(self.worker)
        return model.view(None)

    # ------------------------------------------------------------------ layout

    def compose(self) -> ComposeResult:
        """Status lines, the five panes, the replay slider and the key footer."""
        yield Static(id="status")
        yield Static(id="status2")
        yield Static(id="program-error")
        with TabbedContent(initial="tree"):
            with TabPane("1 Tree", id="tree"):
                yield from self.tree_pane.compose()
            with TabPane("2 Operators", id="operators"):
                yield from compose_operators()
            with TabPane("3 Channels", id="channels"):
                yield from compose_channels()
            with TabPane("4 Stuck", id="stuck"):
                yield from self.stuck_pane.compose()
            with TabPane("5 Graph", id="graph"):
                yield from self.graph_pane.compose()
        if self.replay is not None:
            yield TimeSlider(id="slider")
        yield Static(id="footer-note")
        yield Footer(compact=True, show_command_palette=False)

    def on_mount(self) -> None:
        """Set up the tables and the timers."""
        add_operator_columns(self.query_one("#op-table", DataTable))
        add_channel_columns(self.query_one("#channel-table", DataTable))
        if self.listener is not None:
            self.listener.start()
            self.set_interval(self.ingest_interval, self._ingest)
        else:
            self.set_interval(0.05, self._play_tick)
        self.set_interval(self.refresh_interval, self._refresh_tick)
        self.refresh_panes()
        self.query_one("#scope-tree", Tree).focus()

    # ------------------------------------------------------------------ live ingest

    def _ingest(self) -> None:
        """Fold what the listener queued into the live state, within a time budget per tick."""
        feed = self.feed
        assert feed is not None
        took = feed.take(self.ingest_interval * 0.8)
        now = self.clock()
        if took:
            self._last_arrival = now
            self._auto_opened = False
            self._dirty = True
        for connection in feed.newly_dropped():
            self.notify(
                f"the connection from {connection.peer} dropped before its workers shut down"
                f" ({connection.error or 'closed'}); the last state it sent stays on screen",
                title="connection dropped",
                severity="warning",
                timeout=10,
            )
        feed.sample(now)
        self._check_idle(now)

    def events_per_second(self) -> float:
        """Events received per second over the last second or so (live mode)."""
        return self.feed.events_per_second() if self.feed is not None else 0.0

    def _check_idle(self, now: float) -> None:
        """Open the stuck view when every worker has been idle for a while with work unfinished."""
        if self._auto_opened or now - self._last_arrival < self.idle_after:
            return
        model = self.state.model
        model.settle()  # quiet workers: their last tracker batches stand, no frontier change follows them
        if not model.workers or not unfinished_dataflows(model):
            return
        if all(view.shut_down for view in model.workers.values()):
            return
        self._auto_opened = True
        self.auto_stuck_opened += 1
        self.stuck_loc = None
        self.query_one(TabbedContent).active = "stuck"
        self._dirty = True
        self.refresh_panes()
        self.notify(
            f"every worker has been idle for {self.idle_after:g} s with work unfinished: "
            "the stuck view shows what holds the frontiers back",
            title="stuck?",
        )

    # ------------------------------------------------------------------ replay

    def _play_tick(self) -> None:
        if self.playback is None or not self.playback.tick():
            return
        self._dirty = True
        self._refresh_status()

    def _replay_moved(self) -> None:
        self._dirty = True
        self.refresh_panes()

    def action_play(self) -> None:
        """Play or pause the replay."""
        if self.playback is None:
            return
        self.playback.toggle()
        self._replay_moved()

    def action_step(self, count: int) -> None:
        """Move ``count`` events (negative: backwards)."""
        if self.playback is None:
            return
        self.playback.step(count)
        self._replay_moved()

    def action_frontier(self, direction: int) -> None:
        """Jump to the next (``1``) or previous (``-1``) frontier change."""
        if self.playback is None:
            return
        if not self.playback.frontier(direction):
            self.notify("no more frontier changes that way", timeout=2)
        self._replay_moved()

    def action_speed(self, direction: int) -> None:
        """Play faster (``1``) or slower (``-1``)."""
        if self.playback is None:
            return
        self.playback.change_speed(direction)
        self._refresh_status()

    def action_seek_end(self, end: int) -> None:
        """Go to the start (``0``) or the end (``1``) of the recording."""
        if self.playback is None:
            return
        self.playback.seek(len(self.playback.replay) if end else 0)
        self._replay_moved()

    @on(TimeSlider.Seek)
    def _on_seek(self, message: TimeSlider.Seek) -> None:
        if self.playback is None:
            return
        self.playback.seek(message.position)
        self._replay_moved()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Replay keys only in replay mode."""
        if action in ("play", "step", "frontier", "speed", "seek_end"):
            return self.replay is not None
        if action == "run":
            return self.listener is not None
        return True

    # ------------------------------------------------------------------ other actions

    def action_help(self) -> None:
        """Show the key reference."""
        self.push_screen(HelpScreen())

    def action_pane(self, pane: str) -> None:
        """Show one pane."""
        self.query_one(TabbedContent).active = pane
        self._dirty = True
        self.refresh_panes()
        focus = {
            "tree": "#scope-tree",
            "operators": "#op-table",
            "channels": "#channel-table",
            "graph": "#graph-scroll",
        }
        self.query_one(focus.get(pane, "#stuck-places")).focus()

    @on(TabbedContent.TabActivated)
    def _on_tab(self, event: TabbedContent.TabActivated) -> None:
        self._dirty = True
        self.refresh_panes()

    def action_worker(self) -> None:
        """Cycle the worker shown: all workers, then each one."""
        workers = sorted(self.state.model.workers)
        if self.worker is None:
            self.worker = workers[0] if workers else None
        else:
            later = [w for w in workers if w > self.worker]
            self.worker = later[0] if later else None
        self._dirty = True
        self.refresh_panes()

    def action_filter(self) -> None:
        """Open the operator table's filter."""
        self.query_one(TabbedContent).active = "operators"
        box = self.query_one("#filter", Input)
        box.add_class("shown")
        box.focus()

    def action_close_filter(self) -> None:
        """Close the filter box (the filter stays; clear the text to remove it)."""
        box = self.query_one("#filter", Input)
        if box.has_class("shown"):
            box.remove_class("shown")
            self.query_one("#op-table").focus()

    @on(Input.Changed, "#filter")
    def _on_filter(self, event: Input.Changed) -> None:
        self.order.filter_text = event.value.strip()
        self._dirty = True
        self.refresh_panes()

    @on(Input.Submitted, "#filter")
    def _on_filter_done(self, event: Input.Submitted) -> None:
        self.action_close_filter()

    def action_sort(self) -> None:
        """Sort the operator table by the next column."""
        self.order.next_column()
        self._dirty = True
        self.refresh_panes()

    def action_reverse(self) -> None:
        """Reverse the operator table's order."""
        self.order.reverse()
        self._dirty = True
        self.refresh_panes()

    @on(DataTable.HeaderSelected, "#op-table")
    def _on_header(self, event: DataTable.HeaderSelected) -> None:
        if not self.order.header_clicked(str(event.column_key.value)):
            return
        self._dirty = True
        self.refresh_panes()

    def _selected_operator(self) -> Address | None:
        pane = self.query_one(TabbedContent).active
        if pane == "tree":
            node = self.query_one("#scope-tree", Tree).cursor_node
            return node.data if node is not None else None
        if pane == "operators":
            table = self.query_one("#op-table", DataTable)
            if table.row_count:
                key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
                return tuple(int(p) for p in str(key).split(".")) if key else None
        return None

    def action_explain(self) -> None:
        """Open the stuck view at the operator under the cursor."""
        address = self._selected_operator()
        view = self.current_view()
        places = stuck_places(self.state.model, view)
        if address is not None:
            place = place_for_operator(places, address)
            if place is None:
                self.notify(f"every frontier of {address_text(address)} is empty: nothing holds it back", timeout=3)
            else:
                self.stuck_loc = place.loc
        self.action_pane("stuck")

    @on(DataTable.RowSelected, "#op-table")
    def _on_row_selected(self, event: DataTable.RowSelected) -> None:
        self.action_explain()

    @on(OptionList.OptionHighlighted, "#stuck-places")
    def _on_place(self, event: OptionList.OptionHighlighted) -> None:
        index = event.option_index
        places = self.stuck_pane.places
        if 0 <= index < len(places) and places[index].loc != self.stuck_loc:
            self.stuck_loc = places[index].loc
            self._refresh_stuck_text()

    def action_diagram(self) -> None:
        """Write the current diagram (with live frontiers and the stuck location) to an SVG file."""
        from viz.dot import Diagram, to_graph

        model = self.state.model
        if not model.scopes:
            self.notify("nothing to draw yet", severity="warning")
            return
        stuck = None
        place = self.stuck_pane.current_place(self.stuck_loc)
        if place is not None:
            stuck = (place.loc, place.frontier[0])
        worker = self.worker if self.worker in model.workers else None
        diagram = Diagram(to_graph(model, worker=worker, stuck=stuck))
        directory = self.diagram_dir

        def write() -> None:
            path: Path | None = None
            try:
                path = reserve_diagram_path(directory)  # numbered past every existing diagram: never overwrites
                diagram.save(str(path))
            except Exception as error:  # noqa: BLE001 - shown to the user, never fatal
                if path is not None:
                    path.unlink(missing_ok=True)
                self.call_from_thread(self.notify, f"diagram not written: {error}", severity="error", timeout=8)
                return
            self.last_diagram = str(path)
            self.call_from_thread(self.notify, f"diagram written to {path}", title="diagram", timeout=8)
            self.call_from_thread(self._show_diagram_path)

        self.run_worker(write, thread=True, group="diagram")

    def _check_program(self) -> None:
        """Once the program started by the viewer has failed: show its last error; if it died stuck, the stuck view."""
        code = self.program.process.poll()
        if code is None:
            return
        self._program_ended = True
        if code == 0:
            return
        lines = self.program.error_lines()
        note = self.query_one("#program-error", Static)
        note.update(Text("\n".join([f"program exited with status {code}:", *lines]), style="bold red"))
        note.add_class("shown")
        if died_stuck(lines):
            self.stuck_loc = None
            self.query_one(TabbedContent).active = "stuck"
            self._dirty = True
            self.refresh_panes()
            self.notify("the program died stuck: the stuck view shows what held its frontiers back", title="stuck")

    def _show_diagram_path(self) -> None:
        """Say in the footer where the last diagram went (and in the status line)."""
        note = self.query_one("#footer-note", Static)
        note.update(f"diagram written to {self.last_diagram}")
        note.add_class("shown")
        self._refresh_status()

    # ------------------------------------------------------------------ refresh

    def _refresh_tick(self) -> None:
        if self.listener is not None:
            self._refresh_status()
        if self.program is not None and not self._program_ended:
            self._check_program()
        if self._dirty or self._graph_resized():
            self.refresh_panes()

    def refresh_panes(self) -> None:
        """Redraw the status lines and the visible pane from the state."""
        try:
            self._refresh_status()
            pane = self.query_one(TabbedContent).active
            view = self.current_view()
            model = self.state.model
            if pane == "tree":
                self.tree_pane.refresh(self.query_one("#scope-tree", Tree), model, view)
            elif pane == "operators":
                refresh_operators(
                    self.query_one("#op-table", DataTable),
                    self.query_one("#op-caption", Static),
                    model,
                    view,
                    self.order,
                    self.worker,
                )
            elif pane == "channels":
                refresh_channels(
                    self.query_one("#channel-table", DataTable),
                    self.query_one("#channel-caption", Static),
                    self.state,
                    view,
                    self.replay,
                )
            elif pane == "stuck":
                self.stuck_loc = self.stuck_pane.refresh(
                    self.query_one("#stuck-places", OptionList),
                    self.query_one("#stuck-caption", Static),
                    model,
                    view,
                    self.stuck_loc,
                )
                self._refresh_stuck_text()
            elif pane == "graph":
                self.graph_pane.refresh(
                    self.query_one("#graph-caption", Static),
                    self.query_one("#graph-canvas", Static),
                    self.query_one("#graph-scroll", ScrollableContainer),
                    model,
                    view,
                    self._redraw_soon,
                )
            self._dirty = False
        except Exception as error:  # noqa: BLE001 - a live viewer must not die on one bad frame
            message = f"display error: {type(error).__name__}: {error}"
            if message not in self.errors:
                self.errors.append(message)
                self.notify(message, severity="error", timeout=10)

    def _refresh_status(self) -> None:
        model = self.state.model
        workers = len(model.workers)
        shown = "all workers" if self.worker is None else f"worker {self.worker}"
        if self.playback is not None:
            replay = self.playback.replay
            mode = "playing" if self.playback.playing else "paused"
            first = (
                f"REPLAY · {workers} worker{'s' if workers != 1 else ''} · event {replay.position:,}/{len(replay):,} · "
                f"{replay.now:.3f}/{replay.end - replay.start:.3f} s · {mode} ×{self.playback.speed:g}"
            )
            if replay.truncated:
                first += " · TRUNCATED"
            slider = self.query("#slider")
            if slider:
                widget = slider.first(TimeSlider)
                widget.total = len(replay)
                widget.position = replay.position
        else:
            feed = self.feed
            assert feed is not None
            run = f"run {self.run_index + 1}/{len(self.runs)} · " if len(self.runs) > 1 else ""
            first = (
                f"LIVE {feed.listener.address} · {run}{workers} worker{'s' if workers != 1 else ''} · "
                f"{feed.events_per_second():,.0f} events/s · behind {feed.lag:.1f} s"
            )
        # the header's first line carries what the issue asks for at 80 columns; details follow on the second
        first += f" · dropped {model.dropped:,}"
        second = [f"showing {shown}"]
        if self.feed is not None:
            second.append(self.feed.connection_text(self.run_index))
        if self.replay is not None and self.replay.truncated:
            second.extend(self.replay.truncated)
        pending = unfinished_dataflows(model)
        if model.scopes:
            second.append(f"unfinished: {', '.join(pending)}" if pending else "all dataflows done")
        second.append(f"{model.events:,} events")
        if self.program is not None:
            second.append(self.program.describe())
        if self.last_diagram:
            second.append(f"diagram: {self.last_diagram}")
        try:
            status, status2 = self.query_one("#status", Static), self.query_one("#status2", Static)
        except NoMatches:  # a timer or a listener thread fired while the screen is not mounted (start, exit)
            return
        status.update(Text(first, style="bold" if model.dropped else ""))
        status2.update(" · ".join(second))

    def _redraw(self) -> None:
        self._dirty = True
        self.refresh_panes()

    def _redraw_soon(self) -> None:
        """Redraw once the screen has been laid out (the graph pane has no size before)."""
        self.call_after_refresh(self._redraw)

    def _graph_resized(self) -> bool:
        """Whether the graph pane shows a drawing made for another size than it has now."""
        if self.graph_pane.key is None:
            return False
        try:
            if self.query_one(TabbedContent).active != "graph":
                return False
            return self.graph_pane.resized(self.query_one("#graph-scroll", ScrollableContainer))
        except NoMatches:  # a timer fired while the screen is not mounted (start, exit)
            return False

    def _refresh_stuck_text(self) -> None:
        text = self.query_one("#stuck-text", Static)
        self.stuck_pane.explain(text, self.state.model, self.current_view(), self.stuck_loc)

    async def on_unmount(self) -> None:
        """Stop listening."""
        if self.listener is not None:
            self.listener.close()
