"""Frames from another process are checked before they are acted on: a malformed header is a WireError naming it."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.communication.process_fabric import BEAT, BYE, CREDIT, DATA, STOP, ProcessFabric, decode_results
from runtime.communication.wire import WireError, encode_batch, encode_value


class QuietMesh:
    endpoints = ["a:1", "b:2"]

    def __init__(self) -> None:
        self.goodbyes: list[int] = []

    def send(self, process: int, data: bytes) -> None:
        pass

    def send_pieces(self, process: int, pieces: list[Any]) -> None:
        pass

    def said_goodbye(self, process: int) -> None:
        self.goodbyes.append(process)


def fabric() -> ProcessFabric:
    """Process 1 of 2, workers 3 to 5."""
    made = ProcessFabric(1, 2, 3, QuietMesh())  # type: ignore[arg-type]
    made.communicators()
    return made


def untouched(made: ProcessFabric) -> bool:
    return (
        not made._remote_boxes
        and not made.arrived
        and made.unacknowledged == [0, 0]
        and not made.beats
        and made.stop_reason is None
        and not made.byes
        and not any(signal.pending for signal in made.signals)
    )


PATH, ENCODED = encode_batch([1, 2, 3])
PAYLOAD = bytes(ENCODED)
MALFORMED = [
    [DATA, 5, (0, 1), [0], None, PATH],  # worker 0 is process 0's: local index -3 would wrap to worker 3
    [DATA, 5, (0, 1), [-1], None, PATH],
    [DATA, 5, (0, 1), [3, 0], None, PATH],  # worker 3 is this process's: nothing is given to it either
    [DATA, 5, (0, 1), [6], None, PATH],
    [DATA, 5, (0, 1), [True], None, PATH],
    [DATA, 5, (0, 1), [], None, PATH],
    [DATA, 5, (0, 1), "abc", None, PATH],
    [DATA, "x", (0, 1), [3], None, PATH],
    [DATA, 1.0, (0, 1), [3], None, PATH],
    [DATA, 5, [0, 1], [3], None, PATH],
    [DATA, 5, (0, "1"), [3], None, PATH],
    [DATA, 5, (0, True), [3], None, PATH],
    [DATA, 5, (0, 1), [3], None, "0"],
    [DATA, 5],
    [CREDIT, -(10**9)],
    [CREDIT, "12"],
    [CREDIT, 1.5],
    [CREDIT],
    [BEAT, "nan", "3", "4", 1],
    [BEAT, float("nan"), 3, 4, True],
    [BEAT, 0.5, -1, 4, True],
    [STOP, 5, None, "detail"],
    [STOP, ["failed"], None, "detail"],
    [STOP, "failed", "w", "detail"],
    [STOP, "failed", 6, "detail"],
    [STOP, "failed", None, {"a": 1}],
    [BYE, 1],
    [7],
    [True],
    ["data"],
]


@pytest.mark.parametrize("header", MALFORMED, ids=repr)
def test_a_malformed_header_is_a_wire_error_naming_the_process_and_nothing_is_done(header: list[Any]) -> None:
    made = fabric()
    with pytest.raises(WireError, match=r"process 0 \(a:1\) sent a malformed frame"):
        made.on_frame(0, header, PAYLOAD)
    assert untouched(made)


def test_well_formed_frames_are_still_taken() -> None:
    made = fabric()
    made.on_frame(0, [DATA, 5, (0, 1), [3, 5], None, PATH], PAYLOAD)
    made.on_frame(0, [CREDIT, 0], b"")
    made.on_frame(0, [BEAT, -1.0, 2, 3, False], b"")
    made.on_frame(0, [STOP, "failed", 2, "worker 2 failed"], b"")
    made.on_frame(0, [BYE], b"results")
    assert made.arrived == {0: 2} and made.beats[0][1:] == (-1.0, 2, 3) and made.byes == {0: b"results"}
    assert made.stop_reason is not None and made.stop_reason.worker == 2


scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**63), 2**64 - 1), st.floats(), st.text(max_size=4), st.binary(max_size=4)
)
fields = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3) | st.tuples(inner, inner), max_leaves=6)


@settings(max_examples=300, deadline=None)
@given(kind=st.sampled_from([DATA, BEAT, STOP, BYE, CREDIT, 9]), rest=st.lists(fields, max_size=6))
def test_any_header_is_taken_or_refused_with_a_wire_error(kind: int, rest: list[Any]) -> None:
    made = fabric()
    try:
        made.on_frame(0, [kind, *rest], PAYLOAD)
    except WireError:
        assert untouched(made)


@pytest.mark.parametrize("payload", [encode_value({"results": 1}), encode_value(None), b"", b"\xc1"], ids=repr)
def test_a_goodbye_whose_results_are_not_a_list_is_a_wire_error_naming_the_process(payload: bytes) -> None:
    with pytest.raises(WireError, match="process 2 "):
        decode_results(payload, 2)
    assert decode_results(encode_value([1, (2, 3)]), 2) == [1, (2, 3)]
