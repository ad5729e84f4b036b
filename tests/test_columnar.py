"""Columnar batches: map_batch, exchange_batch, count, accumulate_batch, inspect_batch and send_batch
carry NumPy arrays and Arrow batches as themselves, and route rows exactly as the record-wise exchange."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime import WorkerFailed, execute
from scopes import ScopeBuilder, Stream
from scopes.batches import BatchError, KeyColumnError
from scopes.errors import BuildError, KeyTypeError, OperatorFailed, UserFunctionError
from scopes.hashing import KeyHashError, route

STALL = 10.0


def run(
    build: Callable[[ScopeBuilder, list[Any]], Stream],
    feed: Callable[[int, int], list[Any]],
    workers: int = 1,
    epochs: int = 1,
) -> list[list[Any]]:
    """Run ``build(scope, seen)`` on every worker, send ``feed(worker, epoch)`` batches per epoch; return ``seen``."""

    def main(worker: Any) -> list[Any]:
        seen: list[Any] = []

        def dataflow(scope: ScopeBuilder) -> Any:
            handle, stream = scope.new_input()
            return handle, build(stream, seen).probe()

        handle, probe = worker.dataflow(dataflow)
        for epoch in range(epochs):
            for batch in feed(worker.index, epoch):
                handle.send_batch(batch)
            handle.advance_to(epoch + 1)
        handle.close()
        worker.step_while(lambda: not probe.done())
        return seen

    return execute(main, workers=workers, stall_timeout=STALL)


def root_cause(error: BaseException) -> BaseException:
    while error.__cause__ is not None:
        error = error.__cause__
    return error


def failure(build: Callable[[Stream, list[Any]], Stream], feed: Callable[[int, int], list[Any]], workers: int = 2):
    """Run and expect a worker failure; return (OperatorFailed or None, root cause)."""
    with pytest.raises(WorkerFailed) as excinfo:
        run(build, feed, workers=workers)
    error: BaseException | None = excinfo.value
    operator_failed = None
    while isinstance(error, (WorkerFailed, OperatorFailed)):
        if isinstance(error, OperatorFailed):
            operator_failed = error
        error = error.__cause__
    assert error is not None
    return operator_failed, error


# ---------------------------------------------------------------------------------------------- map_batch


def test_map_batch_gets_and_sends_numpy_arrays_whole() -> None:
    def build(stream: Stream, seen: list[Any]) -> Stream:
        return stream.map_batch(lambda batch: batch * 3 + 1).inspect_batch(
            lambda time, batch: seen.append((time, type(batch), batch.tolist()))
        )

    [seen] = run(build, lambda w, e: [np.arange(5) + 10 * e], epochs=2)
    assert seen == [(0, np.ndarray, [1, 4, 7, 10, 13]), (1, np.ndarray, [31, 34, 37, 40, 43])]


def test_map_batch_with_list_functions_and_kind_changes() -> None:
    def build(stream: Stream, seen: list[Any]) -> Stream:
        return (
            stream.map_batch(lambda batch: [x * 2 for x in batch if x % 2])
            .map_batch(np.asarray)
            .inspect_batch(lambda time, batch: seen.append((type(batch), batch.tolist())))
        )

    [seen] = run(build, lambda w, e: [[1, 2, 3, 4, 5]])
    assert seen == [(np.ndarray, [2, 6, 10])]


def test_map_batch_does_not_send_empty_results() -> None:
    def build(stream: Stream, seen: list[Any]) -> Stream:
        return stream.map_batch(lambda batch: batch[batch > 100]).inspect_batch(lambda t, b: seen.append(b))

    [seen] = run(build, lambda w, e: [np.arange(10), np.arange(200)])
    assert len(seen) == 1 and seen[0].tolist() == list(range(101, 200))


def test_map_batch_returning_a_non_batch_names_operator_time_and_value() -> None:
    def build(stream: Stream, seen: list[Any]) -> Stream:
        return stream.map_batch(lambda batch: int(batch.sum()), name="Summer")

    operator_failed, root = failure(build, lambda w, e: [np.arange(4)], workers=1)
    assert isinstance(root, UserFunctionError)
    message = str(root)
    assert "operator 'Summer'" in message and "at time 0" in message and "int 6" in message
    assert "must return a batch" in message
    assert operator_failed is not None and operator_failed.operator == "Summer"


def test_map_batch_returning_a_zero_dimensional_array_is_refused() -> None:
    def build(stream: Stream, seen: list[Any]) -> Stream:
        return stream.map_batch(lambda batch: np.float64(batch.mean()) * np.ones(()), name="Mean")

    _, root = failure(build, lambda w, e: [np.arange(4.0)], workers=1)
    assert isinstance(root, UserFunctionError) and "operator 'Mean'" in str(root)


def test_map_batch_function_signature_is_checked_when_built() -> None:
    def main(worker: Any) -> None:
        def dataflow(scope: ScopeBuilder) -> None:
            _, stream = scope.new_input()
            stream.map_batch(lambda a, b: a, name="TwoArgs")

        worker.dataflow(dataflow)

    with pytest.raises(WorkerFailed) as excinfo:
        execute(main, stall_timeout=STALL)
    assert isinstance(root_cause(excinfo.value), BuildError) and "TwoArgs" in str(root_cause(excinfo.value))


# ---------------------------------------------------------------------------------------------- fan-out copies


def test_fan_out_copies_arrays_so_receivers_may_change_them_in_place() -> None:
    def build(stream: Stream, seen: list[Any]) -> Stream:
        def negate(batch: np.ndarray) -> np.ndarray:
            batch *= -1
            return batch

        def add(batch: np.ndarray) -> np.ndarray:
            batch += 100
            return batch

        first = stream.map_batch(negate).inspect_batch(lambda t, b: seen.append(("negated", type(b), b.tolist())))
        second = stream.map_batch(add).inspect_batch(lambda t, b: seen.append(("added", type(b), b.tolist())))
        return first.concat(second)

    [seen] = run(build, lambda w, e: [np.arange(3)])
    assert sorted(seen, key=repr) == sorted(
        [("negated", np.ndarray, [0, -1, -2]), ("added", np.ndarray, [100, 101, 102])], key=repr
    )


def test_fan_out_shares_arrow_batches_and_broadcast_copies_arrays() -> None:
    table = pa.table({"k": [1, 2, 3]})

    def build(stream: Stream, seen: list[Any]) -> Stream:
        first = stream.inspect_batch(lambda t, b: seen.append(b))
        second = stream.inspect_batch(lambda t, b: seen.append(b))
        return first.concat(second)

    [seen] = run(build, lambda w, e: [table])
    assert len(seen) == 2 and all(batch is table for batch in seen)

    def broadcast(stream: Stream, seen: list[Any]) -> Stream:
        return stream.broadcast().inspect_batch(lambda t, b: seen.append((type(b), b.tolist())))

    outputs = run(broadcast, lambda w, e: [np.arange(2) + 10 * w], workers=3)
    for seen in outputs:
        assert sorted(seen, key=repr) == [(np.ndarray, [0, 1]), (np.ndarray, [10, 11]), (np.ndarray, [20, 21])]


# ---------------------------------------------------------------------------------------------- exchange_batch


def routed(keys_per_worker: list[np.ndarray], workers: int, key: Any) -> list[list[Any]]:
    """Run exchange_batch on the rows; return, per worker, the (type, rows) messages it received."""

    def build(stream: Stream, seen: list[Any]) -> Stream:
        return stream.exchange_batch(key).inspect_batch(lambda t, b: seen.append((type(b), b.tolist())))

    return run(build, lambda w, e: [keys_per_worker[w]], workers=workers)


def routed_record_wise(keys_per_worker: list[list[Any]], workers: int) -> list[list[Any]]:
    def build(stream: Stream, seen: list[Any]) -> Stream:
        return stream.exchange(lambda x: x).inspect_batch(lambda t, b: seen.extend(b))

    return run(build, lambda w, e: [keys_per_worker[w]], workers=workers)


KEY_ARRAYS = st.sampled_from(["int64", "int32", "uint64", "float64", "str", "bytes", "bool"]).flatmap(
    lambda kind: st.lists(
        {
            "int64": st.integers(-(2**63), 2**63 - 1),
            "int32": st.integers(-(2**31), 2**31 - 1),
            "uint64": st.integers(0, 2**64 - 1),
            "float64": st.floats(allow_nan=False) | st.integers(-1000, 1000).map(float),
            "str": st.text(max_size=4).map(lambda s: s.rstrip("\0")),
            "bytes": st.binary(max_size=4).map(lambda s: s.rstrip(b"\0")),
            "bool": st.booleans(),
        }[kind],
        min_size=1,
        max_size=30,
    ).map(lambda values: np.array(values, dtype={"str": str, "bytes": bytes}.get(kind, kind)))
)


@given(st.lists(KEY_ARRAYS, min_size=3, max_size=3), st.sampled_from([2, 3]))
@settings(max_examples=25, deadline=None)
def test_exchange_batch_routes_each_row_where_the_record_wise_exchange_does(
    arrays: list[np.ndarray], workers: int
) -> None:
    arrays = arrays[:workers]
    if len({array.dtype.kind for array in arrays}) > 1:
        arrays = [arrays[0]] * workers
    columnar = routed(arrays, workers, lambda batch: batch)
    record_wise = routed_record_wise([array.tolist() for array in arrays], workers)
    for worker in range(workers):
        assert all(kind is np.ndarray for kind, _ in columnar[worker])
        assert len(columnar[worker]) <= workers  # at most one batch from each sending worker
        rows = [row for _, batch in columnar[worker] for row in batch]
        assert sorted(rows, key=repr) == sorted(record_wise[worker], key=repr)
        assert all(route(row, workers) == worker for row in rows)


INT_DTYPES = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]


@given(
    st.sampled_from(INT_DTYPES).flatmap(
        lambda name: st.tuples(
            st.just(name),
            st.lists(st.integers(int(np.iinfo(name).min), int(np.iinfo(name).max)), min_size=1, max_size=40),
        )
    ),
    st.sampled_from([1, 2, 3, 4, 8]),
)
@settings(max_examples=80, deadline=None)
def test_integer_keys_go_to_the_worker_of_their_stable_hash_whatever_their_width(
    case: tuple[str, list[int]], peers: int
) -> None:
    """Among a power of two of workers the destination is the key's low bits, computed without hashing."""
    from scopes.channels import BatchKeys

    name, values = case
    batch = np.zeros(len(values), [("pad", "u1"), ("k", name)])  # a strided field, as structured batches have
    batch["k"] = values
    found = BatchKeys("k", "test").destinations(batch, 0, peers)
    assert found.tolist() == [route(value, peers) for value in values]
    assert BatchKeys(lambda b: b["k"], "test").destinations(batch, 0, peers).tolist() == found.tolist()


def test_exchange_batch_by_structured_field_and_by_arrow_columns() -> None:
    dtype = np.dtype([("word", "U8"), ("n", "i8")])
    words = ["a", "b", "c", "d", "e", "f", "a", "b"]
    structured = [np.array([(w, i) for i, w in enumerate(words)], dtype=dtype)] * 2
    for worker, seen in enumerate(routed(structured, 2, "word")):
        rows = [row for _, batch in seen for row in batch]
        assert all(route(word, 2) == worker for word, _ in rows)
    total = sum(len(batch) for seen in routed(structured, 2, "word") for _, batch in seen)
    assert total == 16

    record_batch = pa.record_batch({"word": words, "n": list(range(8))})
    for source in (record_batch, pa.Table.from_batches([record_batch, record_batch])):

        def build(stream: Stream, seen: list[Any]) -> Stream:
            return stream.exchange_batch("word").inspect_batch(lambda t, b: seen.append(b))

        outputs = run(build, lambda w, e, s=source: [s], workers=3)  # type: ignore[misc]
        rows = 0
        for worker, seen in enumerate(outputs):
            for batch in seen:
                assert type(batch) is type(source)
                assert all(route(word, 3) == worker for word in batch.column("word").to_pylist())
                rows += batch.num_rows
        assert rows == 3 * source.num_rows


def test_exchange_batch_sends_one_batch_per_destination_time_and_invocation() -> None:
    def build(stream: Stream, seen: list[Any]) -> Stream:
        return stream.exchange_batch(lambda batch: batch).inspect_batch(lambda t, b: seen.append((t, len(b))))

    outputs = run(build, lambda w, e: [np.arange(100), np.arange(100, 200), np.arange(200, 300)], workers=2, epochs=2)
    for seen in outputs:
        assert sorted(time for time, _ in seen) == [0, 0, 1, 1]  # three batches sent, one message per sender and time
    assert sum(rows for seen in outputs for _, rows in seen) == 2 * 2 * 300


def test_exchange_batch_with_list_batches_and_a_key_function() -> None:
    records = [(w, i) for i, w in enumerate(["the", "quick", "brown", "fox", "jumps", "over", "the", "lazy", "dog"])]

    def build(stream: Stream, seen: list[Any]) -> Stream:
        return stream.exchange_batch(lambda batch: [word for word, _ in batch]).inspect_batch(
            lambda t, b: seen.append((type(b), b))
        )

    outputs = run(build, lambda w, e: [list(records)], workers=2)
    for worker, seen in enumerate(outputs):
        for kind, batch in seen:
            assert kind is list and all(route(word, 2) == worker for word, _ in batch)
    assert sum(len(b) for seen in outputs for _, b in seen) == 2 * len(records)


def test_exchange_batch_with_tuple_keys_routes_like_tuple_records() -> None:
    pairs = [(i % 3, str(i % 5)) for i in range(40)]

    def build(stream: Stream, seen: list[Any]) -> Stream:
        return stream.exchange_batch(lambda batch: batch).inspect_batch(lambda t, b: seen.extend(b))

    columnar = run(build, lambda w, e: [list(pairs)], workers=3)
    record_wise = routed_record_wise([pairs] * 3, 3)
    assert [sorted(seen) for seen in columnar] == [sorted(seen) for seen in record_wise]


# ---------------------------------------------------------------------------------------------- exchange misuse


def test_missing_key_column_names_column_available_columns_operator_and_scope() -> None:
    dtype = np.dtype([("word", "U8"), ("n", "i8")])

    def build(stream: Stream, seen: list[Any]) -> Stream:
        return stream.exchange_batch("wrod", name="ByWord")

    for workers in (1, 2):
        for batch in (np.zeros(3, dtype=dtype), pa.record_batch({"word": ["a"], "n": [1]})):
            _, root = failure(build, lambda w, e, b=batch: [b], workers=workers)  # type: ignore[misc]
            assert isinstance(root, KeyColumnError), root
            message = str(root)
            assert "'wrod'" in message and "['word', 'n']" in message
            assert "operator 'ByWord' in scope 'dataflow 0'" in message and "at time 0" in message
            assert root.available == ("word", "n")


def test_key_function_returning_the_wrong_number_of_keys() -> None:
    def build(stream: Stream, seen: list[Any]) -> Stream:
        return stream.exchange_batch(lambda batch: batch[:-1], name="Short")

    _, root = failure(build, lambda w, e: [np.arange(5)])
    assert isinstance(root, UserFunctionError)
    assert "operator 'Short'" in str(root) and "4 keys" in str(root) and "5 rows" in str(root)

    def scalar(stream: Stream, seen: list[Any]) -> Stream:
        return stream.exchange_batch(lambda batch: 7, name="Scalar")

    _, root = failure(scalar, lambda w, e: [np.arange(5)])
    assert isinstance(root, UserFunctionError) and "one key per row" in str(root)


def test_unsupported_key_dtypes_are_refused() -> None:
    def build(stream: Stream, seen: list[Any]) -> Stream:
        return stream.exchange_batch(lambda batch: np.array([[1], [2]] + [[3, 4]], dtype=object)[: len(batch)])

    _, root = failure(build, lambda w, e: [np.arange(3)])
    assert isinstance(root, KeyHashError) and "unhashable" in str(root)

    def dates(stream: Stream, seen: list[Any]) -> Stream:
        return stream.exchange_batch("when")

    batch = np.zeros(2, dtype=[("when", "datetime64[M]")])  # months have no fixed length: seconds route
    _, root = failure(dates, lambda w, e: [batch])
    assert isinstance(root, KeyTypeError) and "datetime64[M]" in str(root) and "'when'" in str(root)


def test_exchange_batch_refuses_batches_it_does_not_know() -> None:
    def build(stream: Stream, seen: list[Any]) -> Stream:
        return stream.unary(_pipeline(), "MakeTuple", lambda cap, info: _send_as_tuple).exchange_batch(
            lambda b: b, name="Router"
        )

    _, root = failure(build, lambda w, e: [[1, 2, 3]])
    assert isinstance(root, BatchError) and "tuple" in str(root) and "operator 'Router'" in str(root)

    def by_column(stream: Stream, seen: list[Any]) -> Stream:
        return stream.exchange_batch("word", name="ListByColumn")

    _, root = failure(by_column, lambda w, e: [[("a", 1)]])
    assert isinstance(root, BatchError) and "list batch" in str(root) and "ListByColumn" in str(root)


def test_exchange_batch_key_must_be_a_name_or_function() -> None:
    def main(worker: Any) -> None:
        def dataflow(scope: ScopeBuilder) -> None:
            _, stream = scope.new_input()
            stream.exchange_batch(3, name="Bad")  # type: ignore[arg-type]

        worker.dataflow(dataflow)

    with pytest.raises(WorkerFailed) as excinfo:
        execute(main, stall_timeout=STALL)
    assert isinstance(root_cause(excinfo.value), BuildError) and "Bad" in str(root_cause(excinfo.value))


def _pipeline() -> Any:
    from scopes.channels import Pipeline

    return Pipeline


def _send_as_tuple(input: Any, output: Any) -> None:
    for ref, batch in input:
        output._port.send(ref.time, tuple(batch))  # a batch of a kind nobody knows


# ---------------------------------------------------------------------------------------------- aggregation


def test_count_accumulate_batch_and_inspect_batch_on_columnar_batches() -> None:
    def build(stream: Stream, seen: list[Any]) -> Stream:
        counted = stream.count().inspect(lambda n: seen.append(("count", n)))
        summed = stream.accumulate_batch(0, lambda acc, batch: acc + int(batch.sum())).inspect(
            lambda s: seen.append(("sum", s))
        )
        listed = stream.accumulate_batch([], lambda acc, batch: acc + [type(batch)]).inspect(
            lambda kinds: seen.append(("kinds", kinds))
        )
        return counted.concat(summed, listed)

    [seen] = run(build, lambda w, e: [np.arange(10), np.arange(5)], epochs=2)
    assert sorted(seen, key=repr) == sorted(
        [
            ("count", 15),
            ("count", 15),
            ("sum", 55),
            ("sum", 55),
            ("kinds", [np.ndarray, np.ndarray]),
            ("kinds", [np.ndarray, np.ndarray]),
        ],
        key=repr,
    )


def test_count_of_arrow_batches_is_their_row_count() -> None:
    def build(stream: Stream, seen: list[Any]) -> Stream:
        return stream.count().inspect(seen.append)

    [seen] = run(build, lambda w, e: [pa.record_batch({"a": [1, 2, 3]}), pa.table({"a": [4, 5]})])
    assert seen == [5]


def test_accumulate_batch_starts_each_time_from_a_copy_and_checks_the_fold() -> None:
    def build(stream: Stream, seen: list[Any]) -> Stream:
        def fold(acc: dict[str, list[int]], batch: np.ndarray) -> dict[str, list[int]]:
            acc["rows"].append(len(batch))
            return acc

        return stream.accumulate_batch({"rows": []}, fold).inspect(seen.append)

    [seen] = run(build, lambda w, e: [np.arange(e + 1)], epochs=3)
    assert seen == [{"rows": [1]}, {"rows": [2]}, {"rows": [3]}]

    def main(worker: Any) -> None:
        def dataflow(scope: ScopeBuilder) -> None:
            _, stream = scope.new_input()
            stream.accumulate_batch(0, lambda acc: acc, name="OneArg")

        worker.dataflow(dataflow)

    with pytest.raises(WorkerFailed) as excinfo:
        execute(main, stall_timeout=STALL)
    assert isinstance(root_cause(excinfo.value), BuildError) and "OneArg" in str(root_cause(excinfo.value))


# ---------------------------------------------------------------------------------------------- inputs and sessions


def test_send_batch_sends_a_columnar_batch_as_one_message_after_buffered_records() -> None:
    def main(worker: Any) -> list[Any]:
        seen: list[Any] = []

        def dataflow(scope: ScopeBuilder) -> Any:
            handle, stream = scope.new_input()
            return handle, stream.inspect_batch(lambda t, b: seen.append((type(b), len(b)))).probe()

        handle, probe = worker.dataflow(dataflow)
        handle.send(1)
        handle.send(2)
        array = np.arange(7)
        handle.send_batch(array)
        handle.send_batch(pa.table({"x": [1]}))
        handle.send_batch(x for x in range(3))
        handle.close()
        worker.step_while(lambda: not probe.done())
        return seen

    [seen] = execute(main, stall_timeout=STALL)
    assert seen == [(list, 2), (np.ndarray, 7), (pa.Table, 1), (list, 3)]


def test_session_give_batch_sends_columnar_batches_whole() -> None:
    def build(stream: Stream, seen: list[Any]) -> Stream:
        def constructor(capability: Any, info: Any) -> Any:
            capability.drop()

            def logic(input: Any, output: Any) -> None:
                for ref, batch in input:
                    session = output.session(ref)
                    session.give("before")
                    session.give_batch(np.asarray(batch) * 2)
                    session.give_batch(["after"])

            return logic

        return stream.unary(_pipeline(), "Doubler", constructor).inspect_batch(
            lambda t, b: seen.append((type(b), b.tolist() if isinstance(b, np.ndarray) else b))
        )

    [seen] = run(build, lambda w, e: [[1, 2]])
    assert seen == [(list, ["before"]), (np.ndarray, [2, 4]), (list, ["after"])]


def test_columnar_wordcount_matches_record_wise_on_two_workers() -> None:
    import examples.wordcount as records
    import examples.wordcount_columnar as columnar

    text = records.random_text(3, 40, 7)
    assert columnar.run(text, workers=2) == records.reference(text)
    assert partial(columnar.run, text, workers=1)() == records.reference(text)


def test_exchange_batch_never_merges_batches_of_different_kinds_or_dtypes() -> None:
    batches = [np.arange(4, dtype=np.int64), np.arange(4, dtype=np.float64), [0, 1, 2, 3], np.arange(4, 8)]

    def build(stream: Stream, seen: list[Any]) -> Stream:
        return stream.exchange_batch(lambda batch: batch).inspect_batch(
            lambda t, b: seen.append((type(b).__name__, getattr(b, "dtype", None), list(b)))
        )

    outputs = run(build, lambda w, e: batches if w == 0 else [], workers=2)
    for worker, seen in enumerate(outputs):
        # the runs stay apart: int64, float64, list, then int64 again; nothing was converted
        assert [(kind, str(dtype)) for kind, dtype, _ in seen] == [
            ("ndarray", "int64"),
            ("ndarray", "float64"),
            ("list", "None"),
            ("ndarray", "int64"),
        ]
        assert [values for _, _, values in seen] == [[worker, worker + 2]] * 3 + [[4 + worker, 6 + worker]]
        assert all(route(value, 2) == worker for _, _, values in seen for value in values)


def test_columnar_wordcount_script_prints_what_the_record_wise_one_prints() -> None:
    import subprocess
    import sys
    from pathlib import Path

    examples = Path(__file__).resolve().parent.parent / "examples"
    flags = ["-w", "2", "--epochs", "3", "--lines", "30", "--seed", "5"]
    outputs = [
        subprocess.run(
            [sys.executable, str(examples / script), *flags], capture_output=True, text=True, timeout=60, check=True
        ).stdout
        for script in ("wordcount.py", "wordcount_columnar.py")
    ]
    assert outputs[0] == outputs[1]
    assert outputs[1].rstrip().endswith("matches reference: True")


def test_send_batch_refuses_a_zero_dimensional_array() -> None:
    def main(worker: Any) -> None:
        def dataflow(scope: ScopeBuilder) -> Any:
            handle, stream = scope.new_input("Numbers")
            return handle, stream.probe()

        handle, _ = worker.dataflow(dataflow)
        handle.send_batch(np.array(3))

    with pytest.raises(WorkerFailed) as excinfo:
        execute(main, stall_timeout=STALL)
    root = root_cause(excinfo.value)
    assert isinstance(root, BatchError) and "input 'Numbers'" in str(root) and "0-dimensional" in str(root)


def test_key_functions_may_return_array_likes() -> None:
    class Keys:
        def __init__(self, values: np.ndarray) -> None:
            self.values = values

        def __len__(self) -> int:
            return len(self.values)

        def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
            return self.values

    def build(stream: Stream, seen: list[Any]) -> Stream:
        return stream.exchange_batch(lambda batch: Keys(batch + 1)).inspect_batch(lambda t, b: seen.extend(b.tolist()))

    outputs = run(build, lambda w, e: [np.arange(20)], workers=2)
    for worker, seen in enumerate(outputs):
        assert seen and all(route(value + 1, 2) == worker for value in seen)


def test_a_column_key_on_a_plain_array_says_to_use_a_key_function() -> None:
    def build(stream: Stream, seen: list[Any]) -> Stream:
        return stream.exchange_batch("word", name="Plain")

    for workers in (1, 2):
        _, root = failure(build, lambda w, e: [np.arange(3)], workers=workers)
        assert isinstance(root, KeyColumnError) and root.available == ()
        assert "operator 'Plain'" in str(root) and "without named columns" in str(root) and "key function" in str(root)


def test_exchange_batch_contract_in_a_generic_operator() -> None:
    from scopes.channels import ExchangeBatch

    def build(stream: Stream, seen: list[Any]) -> Stream:
        def constructor(capability: Any, info: Any) -> Any:
            capability.drop()

            def logic(input: Any, output: Any) -> None:
                for ref, batch in input:
                    seen.append((info.worker_index, batch["k"].tolist()))
                    output.session(ref).give_batch(batch)

            return logic

        return stream.unary(ExchangeBatch("k"), "Keyed", constructor)

    keyed = np.zeros(30, dtype=[("k", "i8"), ("v", "f8")])
    keyed["k"] = np.arange(30)
    outputs = run(build, lambda w, e: [keyed], workers=3)
    total = 0
    for worker, seen in enumerate(outputs):
        for index, keys in seen:
            assert index == worker and all(route(k, 3) == worker for k in keys)
            total += len(keys)
    assert total == 90

    def missing(stream: Stream, seen: list[Any]) -> Stream:
        return stream.unary(ExchangeBatch("nope"), "Keyed", lambda cap, info: lambda i, o: None)

    _, root = failure(missing, lambda w, e: [keyed])
    assert isinstance(root, KeyColumnError) and "ExchangeBatch channel into the operator at address" in str(root)


def test_record_wise_exchange_of_columnar_batches_keeps_them_columnar() -> None:
    def build(stream: Stream, seen: list[Any]) -> Stream:
        return stream.exchange(lambda row: int(row) // 3).inspect_batch(lambda t, b: seen.append(b))

    outputs = run(build, lambda w, e: [np.arange(30)], workers=2)
    rows = 0
    for worker, seen in enumerate(outputs):
        for batch in seen:
            assert isinstance(batch, np.ndarray)
            assert all(route(value // 3, 2) == worker for value in batch.tolist())
            rows += len(batch)
    assert rows == 60

    table = pa.table({"word": ["a", "b", "c", "d"], "n": [1, 2, 3, 4]})

    def arrow(stream: Stream, seen: list[Any]) -> Stream:
        return stream.exchange(lambda row: row["word"]).inspect_batch(lambda t, b: seen.append(b))

    outputs = run(arrow, lambda w, e: [table], workers=2)
    for worker, seen in enumerate(outputs):
        for batch in seen:
            assert isinstance(batch, pa.Table)
            assert all(route(word, 2) == worker for word in batch.column("word").to_pylist())
    assert sum(batch.num_rows for seen in outputs for batch in seen) == 8


@pytest.mark.parametrize("without_concat_batches", [False, True])
def test_concat_batches_joins_every_kind_in_order_and_refuses_mixed_kinds(
    without_concat_batches: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    from scopes.batches import concat_batches

    if without_concat_batches:  # pyarrow before 19: record batches are joined through a table
        monkeypatch.delattr(pa, "concat_batches", raising=False)
    batches = [pa.record_batch({"n": pa.array(values, pa.int64())}) for values in ([1, 2], [], [3])]
    joined = concat_batches(batches)
    assert isinstance(joined, pa.RecordBatch) and joined.column("n").to_pylist() == [1, 2, 3]
    empty = concat_batches([batches[1], batches[1]])
    assert isinstance(empty, pa.RecordBatch) and empty.num_rows == 0 and empty.schema == batches[0].schema
    assert concat_batches([[1], [], [2, 3]]) == [1, 2, 3]
    assert concat_batches([np.arange(2), np.arange(1)]).tolist() == [0, 1, 0]
    assert concat_batches([batches[0]]) is batches[0]
    with pytest.raises(BatchError, match="different kinds"):
        concat_batches([[1], batches[0]])
    with pytest.raises(BatchError, match="at least one"):
        concat_batches([])
