"""Pane 4, the stuck view: the ports whose frontier is not empty, and what holds the chosen one back."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from viz.errors import VizError
from viz.model import Loc, Model, View
from viz.tui.adapter import KIND_TITLES, StuckPlace, default_place, explanation, path_text, stuck_places


class StuckPane:
    """The list of places with a non-empty frontier, and the explanation of the chosen one."""

    def __init__(self) -> None:
        """No places yet."""
        self.places: list[StuckPlace] = []
        """The places listed, in the list's order."""
        self._labels: list[str] = []

    def compose(self) -> ComposeResult:
        """The caption, the list of places and the explanation below it."""
        with Vertical():
            yield Static(id="stuck-caption", classes="caption")
            yield OptionList(id="stuck-places")
            with VerticalScroll(id="stuck-scroll"):
                yield Static(id="stuck-text")

    def current_place(self, loc: Loc | None) -> StuckPlace | None:
        """The listed place at ``loc``, if it is listed."""
        for place in self.places:
            if place.loc == loc:
                return place
        return None

    def refresh(self, options: OptionList, caption: Static, model: Model, view: View, loc: Loc | None) -> Loc | None:
        """Relist the places and highlight the one at ``loc`` (or the default); return the location chosen."""
        places = stuck_places(model, view)
        self.places = places
        labels = [p.label for p in places]
        if loc is None or all(p.loc != loc for p in places):
            chosen = default_place(places) if loc is None else None
            if loc is not None and chosen is None:
                chosen = None
            loc = chosen.loc if chosen is not None else loc
        if labels != self._labels:
            self._labels = labels
            options.clear_options()
            options.add_options([Option(label) for label in labels])
        for index, place in enumerate(places):
            if place.loc == loc:
                if options.highlighted != index:
                    options.highlighted = index
                break
        text = (
            f"{len(places)} port(s) with a non-empty frontier; pick one (arrows, click)"
            if places
            else "every frontier is empty: nothing is stuck"
        )
        caption.update(text)
        return loc

    def explain(self, widget: Static, model: Model, view: View, loc: Loc | None) -> None:
        """Show in ``widget`` the pointstamps that keep the frontier at ``loc`` where it is."""
        text = Text()
        place = self.current_place(loc)
        if place is None:
            if loc is not None:
                text.append(f"{model.describe(loc)}: its frontier is empty, nothing holds it back.")
            else:
                text.append("No location selected.")
        else:
            try:
                heading, blockers = explanation(model, view, place)
            except VizError as error:  # a recording can make a port the explainer does not know: say so, go on
                widget.update(Text(f"{place.label}: cannot be explained: {error}"))
                return
            text.append(heading + "\n", style="bold")
            if not blockers:
                text.append("\nno pointstamp holds it back on this view (other workers may; press w)\n")
            for blocker in blockers:
                what = blocker.description.partition("; path: ")[0]
                text.append("\n")
                text.append(f"{KIND_TITLES.get(blocker.kind, blocker.kind)}: ", style="bold red")
                text.append(what + "\n")
                text.append(f"  path: {path_text(model, blocker)}\n", style="dim")
        widget.update(text)
