"""Pane 5, the graph: Graphviz's layout of the dataflow, drawn in the terminal with live frontiers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import ScrollableContainer, Vertical
from textual.widgets import Static

from viz.errors import RenderError
from viz.model import Model, View
from viz.tui.adapter import unfinished, walk
from viz.tui.graph import Layout, draw, layout, signature


class GraphPane:
    """The graph's widgets and its layout, which is redone only when the structure or the pane's size changes."""

    def __init__(self) -> None:
        """No layout yet."""
        self.key: tuple[Any, ...] | None = None
        """The structure's signature and the size the layout was made for (``None``: lay out again)."""
        self.plan: Layout | None = None
        self.error: str | None = None

    def compose(self) -> ComposeResult:
        """The caption and a scrollable canvas."""
        with Vertical():
            yield Static(id="graph-caption", classes="caption")
            with ScrollableContainer(id="graph-scroll", can_focus=True):
                yield Static(id="graph-canvas")

    def refresh(
        self,
        caption: Static,
        canvas: Static,
        scroll: ScrollableContainer,
        model: Model,
        view: View,
        redraw_later: Callable[[], None],
    ) -> None:
        """Draw the graph with ``dot -Tplain``'s layout; call ``redraw_later`` if the pane has no size yet."""
        if not model.scopes:
            caption.update("no dataflow yet")
            canvas.update("")
            return
        width, height = scroll.size
        if not width or not height:  # not laid out yet: draw once it is
            redraw_later()
            return
        key = (signature(model), width, height)
        if key != self.key:
            self.key = key
            try:
                self.plan = layout(model, width, height)
                self.error = None
            except RenderError as error:
                self.plan, self.error = None, str(error)
        if self.plan is None:
            caption.update("the graph cannot be drawn")
            canvas.update(Text(self.error or "", style="bold red"))
            return
        busy = {info.address for info in walk(model) if len(info.address) > 1 and unfinished(model, view, info)}
        drawing = draw(self.plan, model, view, width, height, busy)
        canvas.update(drawing.to_text())
        more = " · arrows or the mouse scroll" if drawing.width > width or drawing.height > height else ""
        caption.update(
            f"{len(self.plan.nodes)} boxes laid out by Graphviz (dot -Tplain) · i/o: input/output frontiers · "
            f"yellow: work left{more}"
        )

    def resized(self, scroll: ScrollableContainer) -> bool:
        """Whether the drawing on screen was made for another size than ``scroll`` has now."""
        if self.key is None:
            return False
        return tuple(scroll.size) != self.key[1:]
