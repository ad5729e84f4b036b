"""The terminal UI: ``python -m viz tui`` shows the scope tree and its frontiers, live or from a recording.

* :class:`viz.tui.app.TimelyApp` is the Textual app (scope tree, operator
  table, channel activity, stuck view, graph, replay controls), composed of
  one module per pane in :mod:`viz.tui.panes`, the live intake
  (:mod:`viz.tui.live_feed`), replay's playback (:mod:`viz.tui.playback`), the
  operator table's filter and order (:mod:`viz.tui.table_order`) and small
  widgets (:mod:`viz.tui.widgets`);
* :mod:`viz.tui.sources` replays recordings and listens for live programs;
* :mod:`viz.tui.adapter` turns the :class:`~viz.model.Model` into what the panes show;
* :mod:`viz.tui.cli` is the ``tui`` subcommand; :mod:`viz.tui.logged` runs a
  program with logging pointed at the viewer.
"""

from __future__ import annotations

__all__: list[str] = []
