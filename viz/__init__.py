"""Visual tooling for pytimely: a model rebuilt from instrumentation events, and Graphviz diagrams.

* :class:`viz.model.Model` rebuilds dataflows and their state (frontiers,
  capabilities, messages in flight) from ``runtime.instrument`` events, live or
  recorded, per worker or for all workers.
* :func:`viz.explain.explain` says what holds a frontier back.
* :func:`render` draws a diagram (:class:`viz.dot.Diagram`: DOT, SVG, PNG, and
  SVG display in Jupyter) of a recording, or of the running program: give it
  the worker inside ``main(worker)``, or one of ``worker.dataflows``
  (:mod:`viz.live` reads their live state; no logging needed).  A dataflow
  displays itself in Jupyter the same way (``Dataflow._repr_svg_``, drawn by viz once imported).
  ``python -m viz dot LOG -o out.svg`` draws from a recording file.
* ``python -m viz tui`` is the terminal UI on the same model.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from runtime.instrument import Event, Recorder
from runtime.worker import Dataflow, Worker, set_svg_renderer
from scopes.progress.subgraph import Subgraph
from viz.dot import Diagram, to_graph
from viz.errors import RenderError, SelectionError, TimelyError, VizError
from viz.explain import Blocker, explain
from viz.live import snapshot
from viz.model import Loc, Model

__all__ = [
    "Blocker",
    "Diagram",
    "Model",
    "RenderError",
    "SelectionError",
    "TimelyError",
    "VizError",
    "explain",
    "render",
    "snapshot",
]


def render(
    source: Worker | Dataflow | Subgraph | Model | Recorder | Iterable[Event],
    *,
    worker: int | None = None,
    at: float | None = None,
    depth: int | None = None,
    stuck: tuple[Loc, Any] | None = None,
) -> Diagram:
    """Draw the dataflows of ``source``, live or recorded.

    Live: a :class:`~runtime.worker.Worker` (its running dataflows, from inside
    ``main(worker)``), or a :class:`~runtime.worker.Dataflow` (one of
    ``worker.dataflows``; it can be drawn after it completed), as this worker's
    trackers see them now (see :mod:`viz.live` for what is shown).  Recorded:
    a :class:`~viz.model.Model`, a :class:`~runtime.instrument.Recorder`, or events.

    ``worker`` picks one worker's view of a recording (default: all workers
    combined), ``at`` a moment (seconds from the first event; recordings
    only), ``depth`` collapses scopes nested deeper than that, and
    ``stuck=(location, time)`` marks a location and what holds it back.
    The result displays itself in Jupyter as SVG.
    """
    if isinstance(source, Worker | Dataflow | Subgraph):
        if at is not None:
            raise SelectionError("'at' picks a moment of a recording; a live dataflow is drawn as it is now")
        model = snapshot(source)
    elif isinstance(source, Model):
        if at is not None:
            raise SelectionError("'at' needs events or a Recorder, not a Model already built")
        model = source
    else:
        events = source.events if isinstance(source, Recorder) else list(source)
        model = Model.from_events(events, until=at)
    if worker is not None and worker not in model.workers:
        raise SelectionError(f"no events from worker {worker}; the recording has workers {sorted(model.workers)}")
    return Diagram(to_graph(model, worker=worker, depth=depth, stuck=stuck))


def _dataflow_svg(dataflow: Dataflow) -> str:
    """What a dataflow shows in Jupyter: its live diagram as SVG."""
    return render(dataflow).svg()


set_svg_renderer(_dataflow_svg)
