"""Recordings whose checksums are right but whose events are not: refused when read, never a crash later.

A recording's frames carry a CRC-32, which anyone can recompute over whatever
they write, so the checksum proves nothing about the contents.  Each event's
fields are checked to have their types as the frame is read (the file and the
byte offset named), and the viewer bounds what a type-correct event can make
it draw.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from runtime.errors import RecordingCorrupt, RecordingError
from runtime.instrument import END_FRAME, RecordingStream, decode, encode_events, encode_header, read_recording
from scopes.progress.timestamp import Product
from viz import limits
from viz.__main__ import main as viz_main
from viz.dot import to_graph
from viz.explain import explain
from viz.model import Model
from viz.time_kinds import TIME_DEPTH, time_kind
from viz.tui.sources import Replay

GOOD: list[tuple[Any, ...]] = [
    (1, 0, 1, 0.0, (0,), "dataflow", 0, 0, (), "integer"),
    (1, 0, 2, 0.0, (0, 1), "map", 1, 1, ((0,),), None),
    (2, 0, 3, 0.0, (0,), (1, 0), (1, 0), "Pipeline"),
    (3, 0, 4, 0.0, (0,), ((1, 0, True), (1, 0, False))),
    (6, 0, 5, 0.0, (0,), ((0, 3, 1),)),
    (7, 0, 6, 0.0, (0,), ((0, 3, 1),)),
    (5, 0, 7, 0.0, (0, 1), (((3, 5),),), (((3, 5),),)),
    (8, 0, 8, 0.0, (0, 1), "input", "advanced", 3),
]

HOSTILE = [
    pytest.param(({}, 0, 9, 1.0), id="a map as the kind"),  # was TypeError: unhashable type: 'dict'
    pytest.param((1, 0, 9, 1.0, None, "op", 0, 0, (), None), id="no address"),
    pytest.param((1, 0, 9, 1.0, (0, 2), "op", "many", 0, (), None), id="text as a port count"),
    pytest.param((6, 0, 9, 1.0, (0,), ((0, {"a": 1}, 1),)), id="a map as a time"),
    pytest.param((6, 0, 9, 1.0, (0,), ((0, 3),)), id="a change of two fields"),
    pytest.param((4, b"w", 9, 1.0, (0, 1), 0.0, 0.5), id="bytes as the worker"),
    pytest.param((4, 0, 9, "late", (0, 1), 0.0, 0.5), id="text as the time"),
    pytest.param((2, 0, 9, 1.0, (0,), (1,), (1, 0), "Pipeline"), id="a source of one field"),
    pytest.param((14, 0, 9, 1.0, (), 0, 3, 1, "created", "f.py:1"), id="an empty address"),
    # found by the viewer audit: 'viz tui --replay' died before opening (int(inf / bucket) for the rates)
    pytest.param((5, 0, 9, float("inf"), (0, 1), (((3, 5),),), ()), id="an infinite time"),
    pytest.param((5, 0, 9, float("nan"), (0, 1), (((3, 5),),), ()), id="a NaN time"),
]


def recording_bytes(*frames: list[tuple[Any, ...]]) -> bytes:
    """A whole recording (checksums right) holding a frame of raw events as they are for each of ``frames``."""
    return encode_header(0) + b"".join(encode_events(raws) for raws in frames) + END_FRAME


@pytest.mark.parametrize("hostile", HOSTILE)
def test_a_mistyped_event_with_right_checksums_is_refused_naming_the_file_and_offset(
    tmp_path: Path, hostile: tuple[Any, ...], capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "hostile.msgpack"
    good = recording_bytes(GOOD)
    path.write_bytes(recording_bytes(GOOD, [hostile]))
    with pytest.raises(RecordingCorrupt) as caught:
        read_recording(path)
    assert str(path) in str(caught.value) and "not a pytimely event" in str(caught.value)
    assert caught.value.offset == len(good) - len(END_FRAME)  # the frame after the good events
    assert viz_main(["dot", str(path), "-o", "-"]) == 1  # one line, no traceback
    assert "not a pytimely event" in capsys.readouterr().err
    with pytest.raises(RecordingCorrupt):  # the same check for a stream fed as it arrives
        RecordingStream("stream").feed(recording_bytes([hostile]))


@pytest.mark.parametrize("hostile", HOSTILE)
def test_decode_refuses_a_mistyped_event(hostile: tuple[Any, ...]) -> None:
    with pytest.raises(RecordingError, match="not a pytimely event"):
        decode(hostile)


def test_a_map_as_the_kind_is_refused_also_by_the_live_viewers_lighter_check() -> None:
    stream = RecordingStream("live", check_fields=False)
    with pytest.raises(RecordingCorrupt, match="byte offset"):
        stream.feed(recording_bytes([({}, 0, 9, 1.0)]))


def test_the_recordings_the_runtime_writes_pass_the_check() -> None:
    events = RecordingStream("good").feed(recording_bytes(GOOD))
    assert [decode(raw) for raw in events] == [decode(raw) for raw in GOOD]


def test_an_operator_declaring_2_to_the_40_ports_is_not_drawn() -> None:
    """20 bytes declaring 2**40 inputs made the diagram loop (10**7 took 16 s and a 650 MB DOT source)."""
    huge = (1, 0, 9, 1.0, (0, 2), "wide", 1 << 40, 1, (), None)
    events = [decode(raw) for raw in [*GOOD, huge]]
    model = Model.from_events(events)
    assert model.over_limit == 1 and (0, 2) not in model.operators
    started = time.monotonic()
    assert to_graph(model) is not None
    assert time.monotonic() - started < 30  # generous: a bound on a hang, not a timing claim
    within = (1, 0, 9, 1.0, (0, 2), "wide", limits.MAX_PORTS, 1, (), None)
    assert (0, 2) in Model.from_events([*events[:-1], decode(within)]).operators


MIXED = [
    (6, 0, 9, 0.0, (0,), ((0, "T(3)", 1),)),  # a str time in a scope of int times
    (7, 0, 10, 0.0, (0,), ((0, 2.5, 1),)),  # a float one
    (8, 0, 11, 0.0, (0, 1), "input", "advanced", (3, 4)),  # a tuple: no time the runtime records
]


def test_times_of_another_kind_than_their_scopes_are_not_applied_and_the_diagram_is_drawn(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Found by the hostile-bytes audit: right checksums over a str time among int times made sorting a frontier
    raise TypeError, a traceback from ``python -m viz dot``."""
    path = tmp_path / "mixed.msgpack"
    path.write_bytes(recording_bytes(GOOD, MIXED))
    model = Model.from_events(read_recording(path).events)
    assert model.mistimed == len(MIXED)
    assert model.view().frontier(((0,), 1, 0, True)) == [3]  # the int times are all there
    assert viz_main(["dot", str(path), "-o", str(tmp_path / "out.dot")]) == 0
    assert "3 event(s) hold a time of another kind" in capsys.readouterr().err


def test_one_kind_of_time_per_scope_is_applied_whatever_the_kind() -> None:
    """A user's own timestamp type is recorded as its repr: str times throughout are a scope's kind like ints."""
    as_text = [
        (*raw[:5], tuple((loc, f"T({time})", diff) for loc, time, diff in raw[5]))
        if raw[0] in (6, 7)
        else (*raw[:7], f"T({raw[7]})")
        if raw[0] == 8
        else raw
        for raw in GOOD
    ]
    model = Model.from_events([decode(raw) for raw in as_text])
    assert model.mistimed == 0 and model.view().frontier(((0,), 1, 0, True)) == ["T(3)"]


def test_a_product_nested_deeper_than_any_scope_is_no_time() -> None:
    deep: Any = 0
    for _ in range(TIME_DEPTH + 1):
        deep = Product(deep, 0)
    assert time_kind(deep) is None and time_kind(Product(Product(1, 2), 3)) is not None


@pytest.mark.parametrize("kind", [6, 7, 13], ids=["tracked", "frontier", "originated"])
def test_a_negative_location_index_is_kept_apart_not_a_crash(
    tmp_path: Path, kind: int, capsys: pytest.CaptureFixture[str]
) -> None:
    """Found by the viewer audit: a change at location -5 of a scope with 2 locations indexed its table from the end
    and raised IndexError, a traceback from ``python -m viz dot`` and from ``viz tui --replay`` before it opened."""
    path = tmp_path / "negative.msgpack"
    path.write_bytes(recording_bytes(GOOD, [(kind, 0, 9, 1.0, (0,), ((-5, 3, 1), (-1, 4, 1)))]))
    events = read_recording(path).events
    model = Model.from_events(events)
    view = model.view()
    assert view.pointstamps.get(((0,), -1, -5, False)) == {3: 1} or view.frontier(((0,), -1, -5, False)) == [3]
    assert viz_main(["dot", str(path), "-o", str(tmp_path / "out.dot")]) == 0
    replay = Replay(events)
    replay.seek(len(replay))
    assert replay.state.model.events == len(events)


@pytest.mark.parametrize("times", [("T(1)", "T(2)"), (0.5, 1.5)], ids=["a user's own (its repr)", "float"])
def test_times_of_a_user_type_or_floats_on_two_workers_are_combined_and_explained(
    tmp_path: Path, times: tuple[Any, Any]
) -> None:
    """Found by the viewer audit: the combined view and the explainer compared times with the runtime's
    ``less_equal``, which knows ints and ``PartialOrder`` types only, so a user's timestamp type (recorded as
    its repr, a str) or float times on two workers made ``python -m viz dot`` raise AttributeError."""
    first, second = times
    per_worker = [
        (kind, worker, seq, 0.0, (0,), ((0, time, 1),))
        for worker, time in ((0, first), (1, second))
        for kind, seq in ((6, 20), (7, 21))
    ]
    structure = [raw[:1] + (1,) + raw[2:] for raw in GOOD[:4]]
    inputs = [(8, worker, 22, 0.0, (0, 1), "input", "advanced", time) for worker, time in ((0, first), (1, second))]
    path = tmp_path / "typed.msgpack"
    path.write_bytes(recording_bytes(GOOD[:4], structure, per_worker, inputs))
    model = Model.from_events(read_recording(path).events)
    loc = ((0,), 1, 0, True)
    assert model.mistimed == 0 and len(model.workers) == 2
    frontier = model.view().frontier(loc)
    assert first in frontier
    assert [blocker.time for blocker in explain(model, loc, first)] == [first]
    assert viz_main(["dot", str(path), "-o", str(tmp_path / "out.dot")]) == 0


@pytest.mark.parametrize("moment", [float("inf"), float("-inf"), float("nan")], ids=["inf", "-inf", "NaN"])
def test_a_time_that_is_no_moment_is_refused_by_the_live_viewers_lighter_check_too(moment: float) -> None:
    """Found by the viewer audit: the live viewer's rates took int(t / bucket), OverflowError or ValueError."""
    stream = RecordingStream("live", check_fields=False)
    with pytest.raises(RecordingCorrupt, match="or time is not one of an event"):
        stream.feed(recording_bytes([(4, 0, 9, moment, (0, 1), 0.0, 0.5)]))
