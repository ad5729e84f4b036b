"""The dataflow half of the differential tests: named inputs, the streams a test builds, and what they emit."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any


def build_observed(
    scope: Any,
    names: Iterable[str],
    build: Callable[[Any, dict[str, Any]], dict[str, Any]],
    handles: dict[str, Any],
    probes: list[Any],
    keep: Callable[[str, Any, Any], None],
) -> None:
    """Make one input per name in ``scope`` (into ``handles``), build the tested streams from them with ``build``
    (``{output name: stream}``), and call ``keep(output name, time, batch)`` for every batch each emits; each
    output's probe goes into ``probes``."""
    streams = {}
    for name in names:
        handles[name], streams[name] = scope.new_input(name)
    for out, stream in build(scope, streams).items():
        stream.inspect_batch(lambda time, batch, out=out: keep(out, time, batch))
        probes.append(stream.probe())


def joins(scope: Any, streams: dict[str, Any]) -> dict[str, Any]:
    """The joins under test: per time of ``left`` and ``right``, and ``left`` against the latest ``table``, inner and
    left (a ``build`` for :func:`build_observed`)."""
    lefts, rights, updates = (streams[name].keyed() for name in ("left", "right", "table"))
    return {
        "join": lefts.join(rights),
        "inner": lefts.join_latest(updates),
        "left": lefts.join_latest(updates, how="left"),
    }


def user_window_sums(rows: Any, spec: Any, lateness: int) -> Any:
    """The columnar window under test: Arrow rows keyed by ``user``, windowed by ``event`` (``spec``, ``lateness``),
    each window's amount sum and minimum and its row count (its ``down`` and ``late`` streams are the outputs)."""
    return (
        rows.key_by_columns("user")
        .window(spec, event_time="event", lateness=lateness)
        .aggregate([("amount", "sum"), ("amount", "min"), ("event", "count", "rows")])
    )
