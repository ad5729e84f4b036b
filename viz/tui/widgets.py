"""The viewer's small widgets: the key reference and the replay's time slider."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.message import Message
from textual.reactive import reactive
from textual.screen import ModalScreen
from textual.widget import Widget
from textual.widgets import Static

HELP = """\
[b]pytimely viewer[/b] - keys (or the mouse: tabs, rows, headers, slider)

[b]Panes[/b]
  1 2 3 4 5    scope tree, operator table, channels, stuck view, graph
  tab          move between widgets; arrows move the cursor
  enter        tree: fold or unfold a scope
  x            open the stuck view at the operator under the cursor
  w            cycle the worker shown: all workers, then each worker
  /            filter the operator table (escape closes the filter)
  s / r        sort the operator table by the next column / reverse it
  d            write the diagram with live frontiers to an SVG file
  ?            this help;  q  quit

[b]Replay[/b]
  n / b        one event forwards / backwards
  f / F        the next / previous frontier change
  p            play or pause;  + / -  faster / slower
  g / G        the start / the end (a recording opens at its end)

[b]Live[/b]
  ] / [        the next / previous program run (each program that connects
               is a run of its own; the header shows which one is on screen)

The stuck view lists every port whose frontier is not empty. Pick one to see
the pointstamps that keep its earliest time possible: capabilities held by
operators, messages in flight on channels, input handles not advanced or
never closed, and progress a worker or a scope has not heard yet. In live
mode it opens by itself when every worker has been idle for a while with
work unfinished.

The graph (5) is laid out by Graphviz's dot (it needs the graphviz package of
your system): scopes are frames, operators boxes with each input's (i0) and
output's (o0) frontier; yellow boxes still have work. Arrows or the mouse
scroll a graph larger than the screen.
"""


class HelpScreen(ModalScreen[None]):
    """The key reference."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,question_mark,q", "dismiss", "Close"),
    ]
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll { width: 84; max-width: 100%; height: auto; max-height: 100%;
        border: round $accent; background: $surface; padding: 0 1; }
    """

    def compose(self) -> ComposeResult:
        """The help text in a scrollable box."""
        with VerticalScroll():
            yield Static(HELP, id="help-text")

    async def action_dismiss(self, result: None = None) -> None:
        """Close the help."""
        self.dismiss(result)


class TimeSlider(Widget):
    """A one-line slider over a recording's events; click or drag to seek."""

    DEFAULT_CSS = """
    TimeSlider { height: 1; padding: 0 1; background: $panel; }
    """

    position: reactive[int] = reactive(0)
    total: reactive[int] = reactive(1)

    class Seek(Message):
        """The user picked a position on the slider."""

        def __init__(self, position: int) -> None:
            super().__init__()
            self.position = position

    def render(self) -> Text:
        """A bar with a knob at the current position."""
        width = max(self.content_size.width, 3)
        total = max(self.total, 1)
        knob = min(width - 1, round(self.position / total * (width - 1)))
        text = Text()
        text.append("━" * knob, style="bold $accent" if False else "bold cyan")
        text.append("●", style="bold yellow")
        text.append("─" * (width - 1 - knob), style="grey50")
        return text

    def _seek_at(self, x: int) -> None:
        width = max(self.content_size.width, 2)
        fraction = min(max((x - 1) / (width - 1), 0.0), 1.0)
        self.post_message(self.Seek(round(fraction * self.total)))

    def on_click(self, event: events.Click) -> None:
        """Seek to where the user clicked."""
        self._seek_at(event.x)

    def on_mouse_move(self, event: events.MouseMove) -> None:
        """Seek while dragging with the left button down."""
        if event.button == 1:
            self._seek_at(event.x)
