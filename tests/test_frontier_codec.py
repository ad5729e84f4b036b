"""A frontier (an :class:`Antichain`) travels between processes, as a worker's result or in a record, bounded."""

from __future__ import annotations

import msgpack  # type: ignore[import-untyped]
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime import execute
from runtime.codec import EXT_CODEC, MAX_ANTICHAIN
from runtime.communication.wire import decode_value, encode_value
from runtime.errors import DecodeError
from runtime.worker import Worker
from scopes.progress.antichain import Antichain
from scopes.progress.timestamp import Product


def frontier_main(worker: Worker) -> Antichain:
    """docs/operators.md's ending: run one epoch through an exchange and return the probe's frontier."""

    def build(scope):  # type: ignore[no-untyped-def]
        numbers, stream = scope.new_input("numbers")
        return numbers, stream.exchange(lambda n: n).probe()

    numbers, probe = worker.dataflow(build)
    if worker.index == 0:
        numbers.send_batch(range(10))
    numbers.advance_to(1)
    worker.step_while(lambda: probe.less_than(numbers.time))
    return probe.frontier()


def test_a_probes_frontier_is_a_result_on_processes_as_on_threads() -> None:
    """Found by a user-level audit: ``return probe.frontier()`` (docs/operators.md) worked on threads and failed
    with an EncodingError on 2 processes."""
    threads = execute(frontier_main, workers=2)
    processes = execute(frontier_main, processes=2)
    assert [list(chain.elements) for chain in processes] == [list(chain.elements) for chain in threads] == [[1], [1]]
    assert all(type(chain) is Antichain for chain in processes)


@pytest.mark.parametrize(
    "elements",
    [[], [3], [Product(1, 2), Product(2, 1)], [Product(Product(0, 4), 1)]],
)
def test_antichains_round_trip_the_wire(elements: list) -> None:
    decoded = decode_value(encode_value(Antichain(elements)))
    assert type(decoded) is Antichain and list(decoded.elements) == elements


def _codec_frame(encoded: object) -> bytes:
    return msgpack.packb(msgpack.ExtType(EXT_CODEC, msgpack.packb(["pytimely.Antichain", encoded])))


def test_a_hostile_antichain_is_refused_not_built() -> None:
    with pytest.raises(DecodeError, match=f"at most {MAX_ANTICHAIN} times"):
        decode_value(_codec_frame(list(range(MAX_ANTICHAIN + 1))))
    with pytest.raises(DecodeError, match="at most"):
        decode_value(_codec_frame({"not": "a list"}))
    with pytest.raises(DecodeError):
        decode_value(_codec_frame([1, "a"]))  # times that do not compare


SCALARS = st.none() | st.integers(-(2**63), 2**64 - 1) | st.floats() | st.text(max_size=4)
"""What msgpack packs: a hostile peer's payload is any nesting of these."""


@settings(deadline=None, max_examples=300)
@given(st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=6), max_leaves=40))
def test_any_payload_under_the_antichain_codec_decodes_to_an_antichain_or_a_decode_error(payload: object) -> None:
    """Fuzz: whatever a peer puts under the codec's name, decoding gives an Antichain or a DecodeError."""
    try:
        decoded = decode_value(_codec_frame(payload))
    except DecodeError:
        return
    assert type(decoded) is Antichain and len(decoded.elements) <= MAX_ANTICHAIN
