"""Visual tooling for pytimely: a model rebuilt from instrumentation events, and Graphviz diagrams.

* :class:`viz.model.Model` rebuilds dataflows and their state (frontiers,
  capabilities, messages in flight) from ``runtime.instrument`` events, live or
  recorded, per worker or for all workers.
* :func:`viz.explain.explain` says what holds a frontier back.
* :func:`render` draws a diagram (:class:`viz.dot.Diagram`: DOT, SVG, PNG, and
  SVG display in Jupyter).  ``python -m viz dot LOG -o out.svg`` does the same
  from a recording.

The terminal UI (``python -m viz tui``) is still to come.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from runtime.instrument import Event, Recorder
from viz.dot import Diagram, to_graph
from viz.errors import RenderError, SelectionError, VizError
from viz.explain import Blocker, explain
from viz.model import Loc, Model

__all__ = [
    "Blocker",
    "Diagram",
    "Model",
    "RenderError",
    "SelectionError",
    "VizError",
    "explain",
    "render",
]


def render(
    source: Model | Recorder | Iterable[Event],
    *,
    worker: int | None = None,
    at: float | None = None,
    depth: int | None = None,
    stuck: tuple[Loc, Any] | None = None,
) -> Diagram:
    """Draw the dataflows of ``source``: a model, a :class:`~runtime.instrument.Recorder`, or events.

    ``worker`` picks one worker's view (default: all workers combined), ``at``
    a moment (seconds from the first event; recordings only), ``depth``
    collapses scopes nested deeper than that, and ``stuck=(location, time)``
    marks a location and what holds it back.
    """
    if isinstance(source, Model):
        if at is not None:
            raise SelectionError("'at' needs events or a Recorder, not a Model already built")
        model = source
    else:
        events = source.events if isinstance(source, Recorder) else list(source)
        model = Model.from_events(events, until=at)
    if worker is not None and worker not in model.workers:
        raise SelectionError(f"no events from worker {worker}; the recording has workers {sorted(model.workers)}")
    return Diagram(to_graph(model, worker=worker, depth=depth, stuck=stuck))
