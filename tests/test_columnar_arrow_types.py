"""Arrow column types the columnar paths must carry or refuse clearly (found by a randomized type campaign).

Arrow (26 at least) has no ``take`` or ``filter`` of ``string_view``,
``binary_view`` and run-end encoded columns, nor of nested columns holding
views: :func:`scopes.batches.take` and :func:`scopes.batches.filter_rows` widen
such columns, take their rows and cast them back, so the exchange, the joins,
``join_latest`` and the windows' late rows carry them as they came, at every
worker count.  A dictionary of views is decoded the same way
(:func:`scopes.batches.decoded`), and a user's extension type without a hash
crosses processes and capture logs.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import pytest
from helpers.arrow_type_mains import PASSENGERS, exchanged, joined, semi_joined, table
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.testing import run_dataflow
from scopes.batches import decoded, filter_rows, take
from scopes.errors import BatchError
from scopes.windows import Tumbling

pa = pytest.importorskip("pyarrow")
pc = pytest.importorskip("pyarrow.compute")

STALL = 30.0
TEXTS = st.one_of(st.none(), st.text(alphabet="abcé", max_size=14))
"""Short strings and long ones (views keep up to 12 bytes inline), and nulls."""


def with_texts(texts: list[str | None]) -> Any:
    """A table of every passenger type of ``texts``, plus a list of views and a map to binary views."""
    rows = table([(index % 3, index, text) for index, text in enumerate(texts)])
    lists = pa.array([None if t is None else [t, t] for t in texts], pa.list_(pa.string_view()))
    maps = pa.array([None if t is None else [(t, t.encode())] for t in texts], pa.map_(pa.string(), pa.binary_view()))
    return rows.append_column("l", lists).append_column("m", maps)


@settings(max_examples=60, deadline=None)
@given(texts=st.lists(TEXTS, max_size=12), data=st.data())
def test_take_and_filter_keep_view_and_run_end_encoded_columns_as_they_came(texts: list[Any], data: Any) -> None:
    whole = with_texts(texts)
    cut = data.draw(st.integers(0, len(texts)))
    chunked = pa.concat_tables([whole.slice(0, cut), whole.slice(cut, 0), whole.slice(cut)])  # offsets, empty chunk
    rows = whole.to_pylist()
    indices = np.array(data.draw(st.lists(st.integers(0, max(len(texts) - 1, 0)), max_size=10)) if texts else [])
    mask = data.draw(st.lists(st.booleans(), min_size=len(texts), max_size=len(texts)))
    for batch in (chunked, whole.combine_chunks().to_batches()[0] if texts else whole):
        taken = take(batch, indices.astype(np.int64))
        assert taken.schema == whole.schema and type(taken) is type(batch)
        assert taken.to_pylist() == [rows[i] for i in indices]
        kept = filter_rows(batch, pa.array(mask, pa.bool_()))
        assert kept.schema == whole.schema
        assert kept.to_pylist() == [row for row, keep in zip(rows, mask, strict=True) if keep]


def test_a_column_of_a_type_no_widening_helps_is_refused_naming_it() -> None:
    union = pa.UnionArray.from_sparse(pa.array([0, 0], pa.int8()), [pa.array(["a", "b"], pa.string_view())])
    with pytest.raises(BatchError, match=r"the column 'x', which is sparse_union<0: string_view=0>: cast it"):
        take(pa.table({"x": union}), np.array([0]))


EPOCHS = [
    table([(0, 0, "a"), (1, 1, None), (2, 2, "a string longer than twelve bytes"), (0, 3, "b"), (1, 4, "é")]),
    table([(2, 5, "c"), (0, 6, None), (1, 7, "dd")]),
]


def records(epoch: Any) -> list[dict[str, Any]]:
    return list(epoch.to_pylist())


def counted(rows: list[dict[str, Any]]) -> Counter[str]:
    return Counter(repr(sorted(row.items())) for row in rows)


def expected_join(epoch: Any) -> list[dict[str, Any]]:
    rows = records(epoch)
    return [{**left, "w": right["v"]} for left in rows for right in rows if right["k"] == left["k"]]


def expected_semi(epoch: Any) -> list[dict[str, Any]]:
    rows = records(epoch)
    evens = {row["k"] for row in rows if row["v"] % 2 == 0}
    return [row for row in rows if row["k"] in evens]


CONFIGURATIONS = [(1, 1), (2, 1)]


@pytest.mark.parametrize(("workers", "processes"), CONFIGURATIONS)
@pytest.mark.parametrize(
    ("build", "expected"), [(exchanged, records), (joined, expected_join), (semi_joined, expected_semi)]
)
def test_view_and_run_end_encoded_passengers_cross_the_exchange_and_joins(
    build: Any, expected: Any, workers: int, processes: int
) -> None:
    run = run_dataflow(build, EPOCHS, workers=workers, processes=processes, stall_timeout=STALL)
    for time, epoch in enumerate(EPOCHS):
        assert counted(run.output()[time]) == counted(expected(epoch)), (build.__name__, time)


def test_view_and_run_end_encoded_passengers_cross_processes() -> None:
    run = run_dataflow(joined, EPOCHS, workers=1, processes=2, stall_timeout=STALL)
    for time, epoch in enumerate(EPOCHS):
        assert counted(run.output()[time]) == counted(expected_join(epoch))


def _late(scope: Any, stream: Any) -> Any:
    rows = stream.map_batch(lambda t: t.append_column("at", pa.array([0] * t.num_rows, pa.int64())))
    return rows.window_batch(Tumbling(2), keys="k", event_time="at").count().late


def _latest(scope: Any, stream: Any) -> Any:
    first = stream.map_batch(lambda t: filter_rows(t, pc.less(t.column("v"), 3)))  # one table row per key and time
    rows = stream.map_batch(lambda t: t.select(["k", "v"]).rename_columns(["k", "w"]))
    return rows.key_by_columns("k").join_latest(first.key_by_columns("k"))


@pytest.mark.parametrize("workers", [1, 2])
def test_late_rows_and_join_latest_keep_view_and_run_end_encoded_passengers(workers: int) -> None:
    epochs = {0: EPOCHS[0], 5: EPOCHS[1]}  # at 5, rows of event time 0 are late (their window closed at 1)
    late = run_dataflow(_late, epochs, workers=workers, stall_timeout=STALL).output()
    assert counted(late[5]) == counted([{**row, "at": 0} for row in records(EPOCHS[1])])
    latest = run_dataflow(_latest, [EPOCHS[0]], workers=workers, stall_timeout=STALL).output()
    table_rows = {row["k"]: row for row in records(EPOCHS[0]) if row["v"] < 3}
    want = [
        {"k": row["k"], "w": row["v"], **{name: table_rows[row["k"]][name] for name in ("v", *PASSENGERS)}}
        for row in records(EPOCHS[0])
    ]
    assert counted(latest[0]) == counted(want)


def _count_dictionary_views(scope: Any, stream: Any) -> Any:
    encoded = stream.map_batch(lambda t: t.set_column(2, "s", pc.dictionary_encode(t.column("s"))))
    return encoded.aggregate_batch("k", [("s", "count"), ("b", "count")])


@pytest.mark.parametrize("workers", [1, 2])
def test_a_dictionary_of_views_is_counted_by_aggregate_batch(workers: int) -> None:
    run = run_dataflow(_count_dictionary_views, EPOCHS, workers=workers, stall_timeout=STALL)
    for time, epoch in enumerate(EPOCHS):
        counts: Counter[int] = Counter()
        for row in records(epoch):
            counts[row["k"]] += row["s"] is not None
        want = [{"k": k, "s_count": n, "b_count": n} for k, n in counts.items()]
        assert counted(run.output()[time]) == counted(want)


def test_decoded_gives_a_dictionary_of_views_values_in_their_type() -> None:
    for kind, values in (
        (pa.string_view(), ["a", None, "long enough to be out of line", "a"]),
        (pa.binary_view(), [b"x", None, b"x"]),
    ):
        column = pc.dictionary_encode(pa.array(values, kind))
        chunked = pa.chunked_array([column, column.slice(1)])
        assert decoded(column).type == kind and decoded(column).to_pylist() == values
        assert decoded(chunked).to_pylist() == values + values[1:]


def test_a_user_extension_type_without_a_hash_crosses_the_wire_and_capture_logs(tmp_path: Any) -> None:
    from helpers.arrow_type_mains import Celsius

    from runtime import EventWriter, LogFile, execute
    from runtime.communication.arraycodec import decode_arrow, encode_columnar
    from scopes import INTEGER

    degrees = pa.ExtensionArray.from_storage(Celsius(), pa.array([21, None, -4], pa.int64()))
    batch = pa.table({"t": degrees, "k": [1, 2, 1]})
    with pytest.raises(TypeError):
        hash(batch.schema)  # what made the wire's schema cache fail
    for _ in range(2):  # the second decode is where a kept schema would be looked up
        back = decode_arrow(*encode_columnar(batch))
        assert back.schema == batch.schema and back.to_pylist() == batch.to_pylist()

    def capture(worker: Any) -> None:
        def build(scope: Any) -> Any:
            handle, stream = scope.new_input()
            stream.capture_into(EventWriter(tmp_path / "celsius.log"))
            return handle

        handle = worker.dataflow(build)
        handle.send_batch(batch)
        handle.close()

    def replay(worker: Any) -> list[Any]:
        got: list[Any] = []
        logs = [LogFile(tmp_path / "celsius.log", INTEGER)]
        worker.dataflow(lambda scope: scope.replay(logs).inspect_batch(lambda time, b: got.append(b)))
        return got

    execute(capture, workers=1, stall_timeout=STALL)
    (replayed,) = execute(replay, workers=1, stall_timeout=STALL)[0]
    assert replayed.schema == batch.schema and replayed.to_pylist() == batch.to_pylist()


HALVES = st.lists(st.one_of(st.none(), st.sampled_from([0.0, -0.0, 1.5, 2.0, float("nan"), -65504.0])), max_size=8)


def half_dictionary(values: list[float | None]) -> Any:
    mask = np.array([value is None for value in values], dtype=bool)
    halves = np.array([0.0 if value is None else value for value in values], dtype=np.float16)
    return pc.dictionary_encode(pa.array(halves, pa.float16(), mask=mask))


def plain(values: list[Any]) -> list[Any]:
    """Values as comparable text: NaN is NaN, -0.0 is not 0.0."""
    return [repr(value) for value in values]


@settings(max_examples=60, deadline=None)
@given(parts=st.lists(HALVES, min_size=1, max_size=4), data=st.data())
def test_dictionaries_of_float16_keep_their_values_when_taken_filtered_and_concatenated(
    parts: list[list[Any]], data: Any
) -> None:
    """Arrow concatenates them into their bits as numbers (-0.0 as 32768.0): the batches' functions must not."""
    from scopes.batches import combined, concat_batches

    values = [value for part in parts for value in part]
    tables = [pa.table({"h": half_dictionary(part), "i": pa.array(range(len(part)), pa.int64())}) for part in parts]
    table = pa.concat_tables(tables)  # one dictionary per chunk
    assert plain(combined(table.column("h")).to_pylist()) == plain(values)
    batches = [t.combine_chunks().to_batches()[0] for t in tables if t.num_rows]
    if batches:
        assert plain(concat_batches(batches).column("h").to_pylist()) == plain(values)
    indices = np.array(data.draw(st.lists(st.integers(0, max(len(values) - 1, 0)), max_size=8)) if values else [])
    assert plain(take(table, indices.astype(np.int64)).column("h").to_pylist()) == plain([values[i] for i in indices])
    mask = data.draw(st.lists(st.booleans(), min_size=len(values), max_size=len(values)))
    kept = filter_rows(table, pa.array(mask, pa.bool_()))
    assert plain(kept.column("h").to_pylist()) == plain([v for v, keep in zip(values, mask, strict=True) if keep])
    assert kept.schema == table.schema


def _half_passengers(scope: Any, stream: Any) -> Any:
    """Rows with a dictionary of float16 column, one chunk (and dictionary) per row, exchanged and joined."""

    def encoded(t: Any) -> Any:
        rows = [t.slice(i, 1) for i in range(t.num_rows)]
        return pa.concat_tables([r.set_column(1, "h", pc.dictionary_encode(r.column("h"))) for r in rows])

    rows = stream.map_batch(encoded)
    return rows.exchange_batch("k").join_batch(rows.map_batch(lambda t: t.select(["k"])), "k", join_type="left semi")


def test_dictionary_of_float16_passengers_keep_their_values_on_one_worker_and_two() -> None:
    halves = np.array([-0.0, 2.0, np.nan, 1.5, 2.0, 0.0, np.nan, 1.5], dtype=np.float16)
    epoch = pa.table({"k": pa.array(range(8), pa.int64()), "h": pa.array(halves, pa.float16())})
    want = Counter(plain([(k, float(h)) for k, h in enumerate(halves.tolist())]))
    for workers in (1, 2):
        rows = run_dataflow(_half_passengers, [epoch], workers=workers, stall_timeout=STALL).output()[0]
        assert Counter(plain([(row["k"], row["h"]) for row in rows])) == want, (workers, rows)


def test_run_dataflow_gives_processes_a_user_extension_type_as_threads_get_it() -> None:
    """The inputs used to be decoded before the build's module registered the type: its storage type came."""
    from helpers.arrow_type_mains import Celsius, column_types

    degrees = pa.ExtensionArray.from_storage(Celsius(), pa.array([21, None, -4, 7], pa.int64()))
    epoch = pa.table({"t": degrees})
    for processes in (1, 2):
        run = run_dataflow(column_types, [epoch], workers=1, processes=processes, stall_timeout=STALL)
        assert {row["type"] for row in run.output()[0]} == {str(Celsius())}, processes


def _no_columns_join(scope: Any, stream: Any) -> Any:
    rows = stream.map_batch(lambda t: t.select([]))  # Arrow allows rows without columns
    return rows.join_batch(rows, "k", name="Join")


def _no_columns_exchange(scope: Any, stream: Any) -> Any:
    return stream.map_batch(lambda t: t.select([])).exchange_batch("k", name="Route")


@pytest.mark.parametrize(("build", "operator"), [(_no_columns_join, "Join"), (_no_columns_exchange, "Route")])
@pytest.mark.parametrize("workers", [1, 2])
def test_an_arrow_batch_of_rows_and_no_columns_is_refused_naming_the_key(
    build: Any, operator: str, workers: int
) -> None:
    from runtime import WorkerFailed
    from scopes.errors import KeyColumnError, OperatorFailed

    with pytest.raises(WorkerFailed) as failed:
        run_dataflow(build, [pa.table({"k": [1, 2, 3]})], workers=workers, stall_timeout=STALL)
    error: BaseException = failed.value
    while isinstance(error, WorkerFailed | OperatorFailed) and error.__cause__ is not None:
        error = error.__cause__
    assert isinstance(error, KeyColumnError), repr(error)
    assert f"'{operator}'" in str(error) and "no key column 'k'" in str(error) and "no columns" in str(error)


def test_batches_of_rows_and_no_columns_keep_their_rows_when_taken_concatenated_and_sent() -> None:
    from runtime.communication.arraycodec import decode_arrow, encode_columnar
    from scopes.batches import concat_batches

    rows = pa.table({"k": [1, 2, 3, 4]}).select([])  # Arrow keeps 4 rows, in no batch
    assert take(rows, np.array([0, 0, 3])).num_rows == 3
    assert concat_batches([rows, rows]).num_rows == 8
    assert decode_arrow(*encode_columnar(rows)).num_rows == 4


@pytest.mark.parametrize(("workers", "processes"), [(1, 1), (2, 1), (1, 2)])
def test_rows_without_columns_are_routed_and_counted_at_every_worker_count(workers: int, processes: int) -> None:
    """Two workers stalled (rows counted as sent never arrived); two processes received none of them."""
    from helpers.arrow_type_mains import no_columns_routed

    run = run_dataflow(no_columns_routed, [pa.table({"k": range(7)})], workers=workers, processes=processes)
    assert sum(run.output()[0]) == 7


def nested_dictionary(values: Any, indices: list[int | None]) -> Any:
    return pa.DictionaryArray.from_arrays(pa.array(indices, pa.int32()), values)


NESTED_VALUES = {
    "struct": pa.array([{"a": 1}, {"a": 2}, None]),
    "list": pa.array([[1], [], [2, 3]], pa.list_(pa.int64())),
    "dense_union": pa.UnionArray.from_dense(
        pa.array([0, 1, 0], pa.int8()), pa.array([0, 0, 1], pa.int32()), [pa.array([5, 6]), pa.array(["u"])]
    ),
    "run_end_encoded": pc.run_end_encode(pa.array([7, 7, None])),
}


@pytest.mark.parametrize("name", list(NESTED_VALUES))
def test_dictionaries_of_nested_values_are_taken_across_chunks_and_decoded(name: str) -> None:
    """Arrow cannot unify such dictionaries (take on a chunked column) nor cast them to their values (count)."""
    values = NESTED_VALUES[name]
    first, second = nested_dictionary(values, [0, None, 1]), nested_dictionary(values.slice(1), [1, 0])
    table = pa.concat_tables([pa.table({"d": first}), pa.table({"d": second})])
    plain = first.to_pylist() + second.to_pylist()
    taken = take(table, np.array([4, 0, 3, 1]))
    assert taken.schema == table.schema and taken.column("d").to_pylist() == [plain[i] for i in (4, 0, 3, 1)]
    with_nulls = take(table, pa.chunked_array([pa.array([2, None, 3], pa.int64())]))  # a join's unmatched rows
    assert with_nulls.column("d").to_pylist() == [plain[2], None, plain[3]]
    kept = filter_rows(table, pa.array([True, False, True, True, False]))
    assert kept.column("d").to_pylist() == [plain[0], plain[2], plain[3]]
    assert decoded(table.column("d")).to_pylist() == plain and decoded(first).type == values.type


def _count_nested_dictionaries(scope: Any, stream: Any) -> Any:
    def encoded(t: Any) -> Any:
        structs = pa.array([{"a": 1}, None, {"a": 3}])
        d = nested_dictionary(structs, [i % 3 if i % 4 else None for i in t.column("v").to_pylist()])
        return t.select(["k"]).append_column("d", d)

    return stream.map_batch(encoded).aggregate_batch("k", [("d", "count")])


@pytest.mark.parametrize("workers", [1, 2])
def test_a_dictionary_of_structs_is_counted_by_aggregate_batch(workers: int) -> None:
    run = run_dataflow(_count_nested_dictionaries, EPOCHS, workers=workers, stall_timeout=STALL)
    for time, epoch in enumerate(EPOCHS):
        counts: Counter[int] = Counter()
        for row in records(epoch):
            counts[row["k"]] += bool(row["v"] % 4) and row["v"] % 3 != 1  # a null index or a null struct
        assert counted(run.output()[time]) == counted([{"k": k, "d_count": n} for k, n in counts.items()])


def test_a_dictionary_of_an_extension_type_is_refused_when_sent_not_taken_for_damage(tmp_path: Any) -> None:
    """Arrow's IPC reader gives it back wrong: it arrived in another process, or a capture log, as damage."""
    from helpers.arrow_type_mains import uuid_dictionaries_routed

    from runtime.communication.arraycodec import ColumnarEncodeError, encode_columnar
    from scopes.errors import TimelyError

    uuids = pa.ExtensionArray.from_storage(pa.uuid(), pa.array([bytes(16)], pa.binary(16)))
    inner = pa.DictionaryArray.from_arrays(pa.array([0], pa.int8()), uuids)
    nested = pa.table({"n": pa.StructArray.from_arrays([inner], names=["d"])})
    for batch in (pa.table({"u": pa.DictionaryArray.from_arrays(pa.array([0, 0], pa.int32()), uuids)}), nested):
        with pytest.raises(ColumnarEncodeError, match=r"the Arrow column '[un]' .*extension<arrow.uuid>.*decode it"):
            encode_columnar(batch)
    run = run_dataflow(uuid_dictionaries_routed, [pa.table({"k": range(6)})], workers=2)  # threads: no encoding
    assert len(run.output()[0]) == 6
    with pytest.raises(TimelyError, match=r"'u'.*extension<arrow.uuid>.*decode it"):  # not 'damaged'
        run_dataflow(uuid_dictionaries_routed, [pa.table({"k": range(6)})], workers=1, processes=2)


EMPTY_TYPES = {
    "dense_union": pa.dense_union([pa.field("a", pa.int64()), pa.field("b", pa.string())]),
    "sparse_union": pa.sparse_union([pa.field("a", pa.int64())]),
    "dictionary<null>": pa.dictionary(pa.int32(), pa.null()),
    "dictionary<float16>": pa.dictionary(pa.int32(), pa.float16()),
}


@pytest.mark.parametrize("name", list(EMPTY_TYPES))
def test_an_empty_record_batch_of_any_type_crosses_the_wire(name: str) -> None:
    """decode_arrow made an empty batch with from_pylist([]), which pyarrow cannot for these types."""
    from runtime.communication.arraycodec import decode_arrow, encode_columnar

    batch = pa.RecordBatch.from_arrays([pa.nulls(0, EMPTY_TYPES[name]), pa.array([], pa.int64())], names=["x", "k"])
    back = decode_arrow(*encode_columnar(batch))
    assert back.num_rows == 0 and back.schema == batch.schema and type(back) is pa.RecordBatch


def _left_latest_with_unions(scope: Any, stream: Any) -> Any:
    union = EMPTY_TYPES["dense_union"]
    schema = pa.schema([("k", pa.int64()), ("u", union)])

    def updates(t: Any) -> Any:
        values = pa.UnionArray.from_dense(
            pa.array([0] * t.num_rows, pa.int8()),
            pa.array(range(t.num_rows), pa.int32()),
            [t.column("v").combine_chunks(), pa.array([], pa.string())],
            ["a", "b"],
        )
        return filter_rows(pa.table({"k": t.column("k"), "u": values}), pc.equal(t.column("k"), 0))

    rows = stream.map_batch(lambda t: t.select(["k", "v"]))
    table = stream.map_batch(updates).map_batch(lambda t: t.slice(0, 1))
    return rows.key_by_columns("k").join_latest(table.key_by_columns("k"), how="left", schema=schema)


def test_a_left_join_latest_takes_a_table_schema_with_a_union() -> None:
    """Building its empty table with Schema.empty_table() raised pyarrow's bare ArrowNotImplementedError."""
    run = run_dataflow(_left_latest_with_unions, [EPOCHS[0]], workers=1, stall_timeout=STALL)
    got = {(row["k"], row["v"], row["u"]) for row in run.output()[0]}
    assert got == {(0, 0, 0), (0, 3, 0), (1, 1, None), (1, 4, None), (2, 2, None)}
