"""Arrow batches that user code built without validation, sent between processes: refused by their sender.

pyarrow builds arrays without checking their values unless asked: a ``string`` holding bytes that are not UTF-8,
a ``time32`` of 25 hours, a dictionary index past its dictionary (``safe=False``).  In a column that is not a key,
such a batch sent to another process (``exchange_batch``, ``broadcast``, any channel) reached the receiver's full
validation, and the cluster failed with a ``WireError``: "process 0 sent worker 1 a malformed batch ... do all
processes run the same program, with the same codecs registered?", blaming the wire and the deployment, naming
no operator and no column.  The sending worker now refuses it with an ``InvalidArrowBatch`` naming the operator
that pushed it (and the one its channel leads to), the time, the column, Arrow's own validation text and what to
do; valid batches of the same shapes travel as before.  On threads the batch travels by reference, unchecked
(docs/columnar.md).  A capture log took such a batch, and reading it refused it as damage; a process's results
holding one failed in the launcher as ``PeerLost ... exited with status 0 without reporting``; a batch of only null
columns of many rows (valid) was refused by the receiver as malformed: each is now refused by its sender, saying
why.  Results that do not decode in the launcher for another reason (a codec registered inside ``main``) are that
process's error, naming the reason.
"""

from __future__ import annotations

import io
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

pa = pytest.importorskip("pyarrow")
np = pytest.importorskip("numpy")

from helpers import invalid_arrow_mains  # noqa: E402
from helpers.invalid_layout import BadLayout  # noqa: E402
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from runtime import execute  # noqa: E402
from runtime.communication import arrow_validity  # noqa: E402
from runtime.communication.arrow_validity import column_problem, refuse_invalid  # noqa: E402
from runtime.communication.wire import decode_batch, encode_batch  # noqa: E402
from runtime.errors import ClusterError, EncodingError, InvalidArrowBatch, WorkerFailed  # noqa: E402
from runtime.eventlog import EventEncodeError, EventWriter  # noqa: E402
from runtime.testing import run_dataflow  # noqa: E402
from scopes.capture import Batch  # noqa: E402

ROWS = 8
"""Rows of each table: keys 0 to 7, which routing spreads over both processes."""

PROBLEMS = {
    "text": "Invalid UTF8 sequence",
    "time": "not within the acceptable range",
    "dictionary": "out of bounds",
}
"""What Arrow's validation says of each invalid column."""


def values(kind: str, valid: bool, rows: int = ROWS) -> Any:
    """A column of ``rows`` values of ``kind``; invalid at row 1 unless ``valid`` (built as user code can)."""
    if kind == "text":
        data = b"".join(b"\xff\xfe" if row == 1 and not valid else b"ok" for row in range(rows))
        offsets = np.arange(0, 2 * rows + 1, 2, dtype=np.int32)
        return pa.Array.from_buffers(pa.string(), rows, [None, pa.py_buffer(offsets), pa.py_buffer(data)])
    if kind == "time":
        seconds = np.arange(rows, dtype=np.int32)
        if not valid:
            seconds[1] = 25 * 3600
        return pa.array(seconds).view(pa.time32("s"))
    indices = pa.array([5 if row == 1 and not valid else row % 2 for row in range(rows)], pa.int32())
    return pa.DictionaryArray.from_arrays(indices, pa.array(["a", "b"]), safe=False)


def table(kind: str, record: str) -> Any:
    """The table user code builds from an input record ``"good"`` or ``"bad"``: keys and a value column."""
    return pa.table({"k": pa.array(range(ROWS)), "v": values(kind, record == "good")})


def keys_of(routed: Any) -> Any:
    return routed.map_batch(lambda t: t.select(["k"]), name="Keys")


def exchange_text(scope: Any, rows: Any) -> Any:
    return keys_of(rows.map_batch(lambda r: table("text", r[0]), name="Tables").exchange_batch("k", name="ByKey"))


def exchange_time(scope: Any, rows: Any) -> Any:
    return keys_of(rows.map_batch(lambda r: table("time", r[0]), name="Tables").exchange_batch("k", name="ByKey"))


def exchange_dictionary(scope: Any, rows: Any) -> Any:
    tables = rows.map_batch(lambda r: table("dictionary", r[0]), name="Tables")
    return keys_of(tables.exchange_batch("k", name="ByKey"))


def broadcast_text(scope: Any, rows: Any) -> Any:
    return keys_of(rows.map_batch(lambda r: table("text", r[0]), name="Tables").broadcast())


def exchange_text_in_a_region(scope: Any, rows: Any) -> Any:
    tables = rows.map_batch(lambda r: table("text", r[0]), name="Tables")
    return scope.region(lambda inner: keys_of(tables.enter(inner).exchange_batch("k", name="ByKey")).leave(), "Inner")


def values_after_exchange(scope: Any, rows: Any) -> Any:
    """Every kind of value column exchanged, then read as Python values: the right answer when valid."""
    tables = rows.map_batch(
        lambda r: pa.table({"k": pa.array(range(ROWS)), **{kind: values(kind, True) for kind in PROBLEMS}}),
        name="Tables",
    )
    return tables.exchange_batch("k", name="ByKey").broadcast()


EXCHANGES = {"text": exchange_text, "time": exchange_time, "dictionary": exchange_dictionary}


def refusal(build: Any, **configuration: Any) -> str:
    with pytest.raises(WorkerFailed) as failure:
        run_dataflow(build, [["good"], ["bad"]], **configuration)
    return str(failure.value)


def assert_sender_refused(message: str, kind: str, receiver: str) -> None:
    assert "WireError" not in message and "malformed" not in message, message
    assert "InvalidArrowBatch" in message and "failed in operator 'Tables'" in message, message
    assert "outside any batch" not in message, message  # an exchange sends after the logic returned: said so
    assert f"to operator '{receiver}' in scope 'dataflow 0'" in message, message
    assert "batch it pushed at time 1" in message and "column 'v'" in message and PROBLEMS[kind] in message, message
    assert "batch.validate(full=True) shows the problem" in message and "pyarrow.array(...)" in message, message


@pytest.mark.parametrize("kind", sorted(EXCHANGES))
def test_an_invalid_value_column_is_refused_by_its_sender_not_called_damage_by_the_receiver(kind: str) -> None:
    """It was ``WireError: process 0 sent worker 1 a malformed batch ... do all processes run the same
    program, with the same codecs registered?``, raised by the receiver."""
    before = sorted(os.listdir("/dev/shm")) if os.path.isdir("/dev/shm") else []
    message = refusal(EXCHANGES[kind], processes=2)
    assert_sender_refused(message, kind, "ByKey")
    # the exchange's buffers are sent after the logic returned: it said "outside any batch (no input message ...)"
    assert ") while sending on what its logic gave, after the logic returned" in message, message
    assert (sorted(os.listdir("/dev/shm")) if os.path.isdir("/dev/shm") else []) == before


def test_a_broadcast_of_an_invalid_batch_is_refused_by_its_sender() -> None:
    assert_sender_refused(refusal(broadcast_text, processes=2), "text", "Broadcast")


def test_an_operator_in_a_nested_scope_is_named_with_its_scope() -> None:
    message = refusal(exchange_text_in_a_region, processes=2)
    assert "to operator 'ByKey' in scope 'dataflow 0' > 'Inner' (address (0, 3, " in message, message
    assert "WireError" not in message and "column 'v'" in message, message


@pytest.mark.parametrize("kind", sorted(EXCHANGES))
def test_threads_pass_the_invalid_batch_by_reference(kind: str) -> None:
    """Threads hand each other the batch itself, unchecked: the keys come out right, and the values are never
    read as Python values here (reading them refuses them: tests/test_python_values.py)."""
    for workers in (1, 2):
        run = run_dataflow(EXCHANGES[kind], [["good"], ["bad"]], workers=workers)
        assert {time: sorted(row["k"] for row in rows) for time, rows in run.output().items()} == {
            0: list(range(ROWS)),
            1: list(range(ROWS)),
        }


def test_valid_batches_of_the_same_shapes_travel_between_processes() -> None:
    one = run_dataflow(values_after_exchange, [["good"]], workers=1)
    two = run_dataflow(values_after_exchange, [["good"]], processes=2)
    expected = sorted(map(repr, one.output()[0]))
    assert sorted(map(repr, two.output()[0])) == sorted(expected * 2)  # broadcast: one copy per worker
    assert len(expected) == ROWS and "'dictionary': 'b'" in expected[1], expected


def test_a_batch_of_many_null_rows_in_few_bytes_is_refused_by_its_sender() -> None:
    """Valid, but the receiver refuses more than 8 rows a byte (its guard against batches that declare rows they
    do not hold): it was a ``WireError`` about a malformed batch; now the sender says so and what to send."""
    for many in (pa.table({"n": pa.nulls(100_000)}), pa.table({"n": range(100_000)}).select([])):
        with pytest.raises(EncodingError, match="of 100000 rows encodes to .* bytes: its columns hold no bytes"):
            encode_batch(many)
    for few in (pa.table({"n": pa.nulls(1000)}), pa.table({"n": range(1000)}).select([])):
        assert decode_batch(*encode_batch(few)).num_rows == 1000


def test_results_holding_an_invalid_batch_are_refused_in_their_process() -> None:
    """It was ``PeerLost: process 0 ... exited with status 0 without reporting``: the launcher could not decode
    the results, and said so only in a thread's traceback."""
    with pytest.raises(ClusterError) as failure:
        execute(invalid_arrow_mains.return_invalid_table, processes=2, workers=1)
    message = str(failure.value)
    assert type(failure.value) is ClusterError and "without reporting" not in message, message
    assert "results of process" in message and "column 'w' (string) is not valid Arrow" in message, message


def test_results_that_do_not_decode_in_the_launcher_name_the_reason_not_a_silent_process() -> None:
    """A codec registered inside ``main`` (in the workers' processes only): the launcher cannot decode their
    results.  It was ``PeerLost: ... exited with status 0 without reporting``, the real ``WireError`` only in a
    thread's traceback on standard error."""
    with pytest.raises(ClusterError) as failure:
        execute(invalid_arrow_mains.return_point_registered_in_main, processes=2, workers=1)
    message = str(failure.value)
    assert type(failure.value) is ClusterError and "without reporting" not in message, message
    assert "does not decode" in message and "'helpers.invalid_arrow_mains.Point'" in message, message
    assert "register the same codecs in every process" in message, message


def test_a_capture_log_refuses_an_invalid_batch_when_written_not_when_read() -> None:
    """It was written, and reading the log refused it as damage (``EventLogCorrupt``) at the frame's offset."""
    with pytest.raises(EventEncodeError, match="at time 3: .*column 'v' \\(string\\) is not valid Arrow"):
        EventWriter(io.BytesIO(), close=False).push(Batch(3, pa.table({"v": values("text", False)})))
    EventWriter(io.BytesIO(), close=False).push(Batch(3, pa.table({"v": values("text", True)})))


# ---------------------------------------------------------------------- the check itself


def test_each_invalid_column_is_named_with_arrows_text_and_the_batch_kind() -> None:
    for kind, problem in PROBLEMS.items():
        for batch in (
            pa.table({"k": [1] * ROWS, "v": values(kind, False)}),
            pa.record_batch([values(kind, False)], ["v"]),
        ):
            with pytest.raises(InvalidArrowBatch) as failure:
                encode_batch(batch)
            assert failure.value.column == "v" and problem in failure.value.problem, failure.value
            assert isinstance(failure.value, EncodingError) and isinstance(failure.value, ValueError)
        refuse_invalid(pa.table({"v": values(kind, True)}))


@pytest.mark.parametrize("rows", [2, 2 * arrow_validity.NUMPY_FROM])
def test_a_batch_invalid_only_as_a_whole_is_refused_not_passed(rows: int) -> None:
    """Short, Arrow's full validation of the batch fails; long (a string column: the NumPy checks), its layout's."""
    with pytest.raises(InvalidArrowBatch) as failure:
        refuse_invalid(BadLayout(pa.table({"k": list(range(rows)), "v": ["a", "b"] * (rows // 2)})))
    error = failure.value
    assert error.column == "" and error.column_type == "" and "3 rows where the table has 2" in error.problem
    assert "though each of its columns is" in str(error) and error.part.startswith("layout"), str(error)


LONG = arrow_validity.NUMPY_FROM * 2
"""Rows enough for the NumPy checks."""


@pytest.mark.parametrize("kind", sorted(PROBLEMS))
def test_long_columns_take_the_numpy_checks_and_reach_arrows_verdict(kind: str) -> None:
    """Long columns are proved valid by NumPy; an invalid value, a null slot that NumPy cannot rule out, a slice
    leaving the bad row out and a chunked column reach Arrow's verdict."""
    bad, good = values(kind, False, LONG), values(kind, True, LONG)
    assert PROBLEMS[kind] in (column_problem(bad) or ""), kind
    assert column_problem(good) is None and column_problem(bad.slice(2)) is None
    assert PROBLEMS[kind] in (column_problem(pa.chunked_array([good, bad])) or "")
    validity = pa.py_buffer(b"\xfd" + b"\xff" * (LONG // 8))  # row 1 null
    if kind == "dictionary":
        indices = bad.indices
        hidden = pa.DictionaryArray.from_arrays(
            pa.Array.from_buffers(indices.type, LONG, [validity, indices.buffers()[1]]), bad.dictionary, safe=False
        )
    else:
        hidden = pa.Array.from_buffers(bad.type, LONG, [validity, *bad.buffers()[1:]])
    assert column_problem(hidden) is None, kind  # the bad value sits in a null slot: Arrow passes it, and so do we


def test_offsets_that_decrease_are_refused_though_every_byte_is_ascii() -> None:
    offsets = np.arange(LONG + 1, dtype=np.int32)
    offsets[5] = 1
    for kind in (pa.string(), pa.binary()):
        column = pa.Array.from_buffers(kind, LONG, [None, pa.py_buffer(offsets), pa.py_buffer(b"a" * LONG)])
        assert "non-monotonic offset" in (column_problem(column) or ""), kind


@contextmanager
def numpy_checks_for_any_length() -> Iterator[None]:
    """The NumPy checks for arrays of any length, not only long ones."""
    before = arrow_validity.NUMPY_FROM
    arrow_validity.NUMPY_FROM = 0
    try:
        yield
    finally:
        arrow_validity.NUMPY_FROM = before


@settings(max_examples=200, deadline=None)
@given(
    data=st.binary(max_size=12),
    cuts=st.lists(st.integers(0, 12), min_size=1, max_size=6),
    large=st.booleans(),
    nulls=st.integers(0, 63),
)
def test_the_numpy_string_check_agrees_with_arrows_full_validation(
    data: bytes, cuts: list[int], large: bool, nulls: int
) -> None:
    """Any offsets (decreasing ones too) over any bytes, with nulls: the verdict is Arrow's."""
    kind, width = (pa.large_string(), np.int64) if large else (pa.string(), np.int32)
    offsets = np.array([min(cut, len(data)) for cut in cuts], dtype=width)
    rows = len(offsets) - 1
    validity = pa.py_buffer(bytes([nulls]))
    try:
        column = pa.Array.from_buffers(kind, rows, [validity, pa.py_buffer(offsets), pa.py_buffer(data)])
    except pa.ArrowInvalid:
        return  # refused when built (Arrow's cheap checks): never sent
    assert_same_verdict_as_arrow(column)


@settings(max_examples=200, deadline=None)
@given(
    raw=st.lists(
        st.integers(-(2**31), 2**31 - 1) | st.sampled_from([-1, 0, 1, 3, 4, 86_399, 86_400, 86_399_999, 86_400_000]),
        min_size=1,
        max_size=8,
    ),
    dictionary=st.integers(0, 4),
    unit=st.sampled_from(["s", "ms"]),
    nulls=st.integers(0, 255),
)
def test_the_numpy_time_and_index_checks_agree_with_arrows_full_validation(
    raw: list[int], dictionary: int, unit: str, nulls: int
) -> None:
    validity = pa.py_buffer(bytes([nulls]))
    numbers = pa.py_buffer(np.array(raw, dtype=np.int32))
    times = pa.Array.from_buffers(pa.time32(unit), len(raw), [validity, numbers])
    indices = pa.Array.from_buffers(pa.int32(), len(raw), [validity, numbers])
    words = pa.DictionaryArray.from_arrays(indices, pa.array(["x"] * dictionary), safe=False)
    for column in (times, words):
        assert_same_verdict_as_arrow(column)


def assert_same_verdict_as_arrow(column: Any) -> None:
    """``column_problem`` (its NumPy checks on, whatever the length) says what Arrow's full validation says."""
    try:
        column.validate(full=True)
        expected = None
    except pa.ArrowInvalid as error:
        expected = str(error)
    with numpy_checks_for_any_length():
        assert column_problem(column) == expected
