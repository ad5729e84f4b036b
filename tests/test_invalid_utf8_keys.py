"""Arrow string key columns holding bytes that are not UTF-8: refused the same way at every worker count.

Arrow builds a ``string`` array from any bytes.  Keyed by such a column, ``exchange_batch``, ``aggregate_batch``,
``join_batch`` and ``key_by_columns(...).join_latest`` passed on 1 worker (which routes nothing) and on 2 workers
when the column was short and had no null (its bytes were hashed directly), but refused the batch on 2 workers
when hashing made Python strings of the values (a null, more than ``DIRECT_ROWS`` rows): an
``ArrowValueError`` on some worker counts and batches, a plausible answer on the others.  Each now refuses it
before hashing, on 1 worker, 2 threads and 2 processes, with the one ``ArrowValueError`` naming the operator,
the time, the column, the row and the value.
"""

from __future__ import annotations

from typing import Any

import pytest

pa = pytest.importorskip("pyarrow")

from runtime.errors import WorkerFailed  # noqa: E402
from runtime.testing import run_dataflow  # noqa: E402
from scopes.errors import ArrowValueError  # noqa: E402
from scopes.hashing import DIRECT_ROWS  # noqa: E402

CONFIGURATIONS: list[dict[str, Any]] = [{"workers": 1}, {"workers": 2}, {"processes": 2}]
IDS = ["1 worker", "2 threads", "2 processes"]


def words(large: bool = False) -> Any:
    """``["ok", "\\xff\\xfe"]`` as Arrow strings, the second not UTF-8 (Arrow builds it; ``validate`` would refuse
    it)."""
    kind, width = (pa.large_string(), 8) if large else (pa.string(), 4)
    offsets = b"".join(n.to_bytes(width, "little") for n in (0, 2, 4))
    return pa.Array.from_buffers(kind, 2, [None, pa.py_buffer(offsets), pa.py_buffer(b"ok\xff\xfe")])


def table(rows: Any) -> Any:
    """Rows of ``w`` and ``n``: the first batch (time 0) fine, the second's row 1 not UTF-8."""
    if rows == [0]:
        return pa.table({"w": pa.array(["a", "b"]), "n": [1, 2]})
    return pa.table({"w": words(), "n": [3, 4]})


def by_exchange(scope: Any, rows: Any) -> Any:
    return rows.map_batch(table).exchange_batch("w", name="ByWord").map_batch(lambda t: t.select(["n"]))


def by_aggregate(scope: Any, rows: Any) -> Any:
    return rows.map_batch(table).aggregate_batch("w", [("n", "sum")], name="ByWord")


def by_two_keys(scope: Any, rows: Any) -> Any:
    keyed = rows.map_batch(lambda batch: table(batch).append_column("k", pa.array([7, 7])))
    return keyed.aggregate_batch(["k", "w"], [("n", "sum")], name="ByWord")


def by_join(scope: Any, rows: Any) -> Any:
    tables = rows.map_batch(table)
    prices = rows.map_batch(lambda batch: pa.table({"w": pa.array(["a"]), "p": [9]}))
    return tables.join_batch(prices, "w", name="ByWord").map_batch(lambda t: t.select(["n"]))


def by_join_latest(scope: Any, rows: Any) -> Any:
    tables = rows.map_batch(table)
    prices = rows.map_batch(lambda batch: pa.table({"w": pa.array(["a"]), "p": [9]}))
    joined = tables.key_by_columns("w").join_latest(prices.key_by_columns("w"), name="ByWord")
    return joined.map_batch(lambda t: t.select(["n"]))


def by_key_function(scope: Any, rows: Any) -> Any:
    routed = rows.map_batch(table).exchange_batch(lambda t: t.column("w"), name="ByWord")
    return routed.map_batch(lambda t: t.select(["n"]))


BUILDS = [by_exchange, by_aggregate, by_two_keys, by_join, by_join_latest, by_key_function]


def refusal(build: Any, configuration: dict[str, Any]) -> str:
    with pytest.raises(WorkerFailed) as failure:
        run_dataflow(build, [[0], [1]], **configuration)
    message = str(failure.value)
    assert "ArrowValueError" in message and "operator 'ByWord'" in message, message
    assert "routing the batch at time 1 by its keys" in message, message
    assert "row 1" in message and "not valid UTF-8" in message and "fix or cast the key column" in message, message
    return message[message.index("ArrowValueError") :].split(" [process")[0]


@pytest.mark.parametrize("build", BUILDS, ids=[build.__name__ for build in BUILDS])
def test_a_key_column_not_utf8_is_refused_alike_on_1_worker_2_threads_and_2_processes(build: Any) -> None:
    """The same ArrowValueError, word for word, on every configuration; it passed on 1 worker and on 2 (the
    column is short and has no null: its bytes were hashed as they are)."""
    messages = {IDS[index]: refusal(build, configuration) for index, configuration in enumerate(CONFIGURATIONS)}
    assert len(set(messages.values())) == 1, messages
    if build is not by_key_function:
        assert "column 'w' (string)" in messages["1 worker"], messages


def test_a_long_or_large_key_column_not_utf8_is_refused_on_1_worker_as_on_2() -> None:
    """On 2 workers a column of more than DIRECT_ROWS rows (or with a null) was refused by hashing; 1 worker
    passed it.  A ``large_string`` column, a chunked one and a slice that leaves the bad value out are looked at
    too; a null whose bytes are not UTF-8 is no value and passes, as it converts to None."""
    from scopes.key_text import refuse_invalid_text

    long = pa.concat_arrays([pa.array(["x"] * DIRECT_ROWS), words()])
    for column, row in [(long, DIRECT_ROWS + 1), (words(large=True), 1), (pa.chunked_array([words()[:1], words()]), 2)]:
        with pytest.raises(ArrowValueError) as failure:
            refuse_invalid_text(column, "w", "operator 'ByWord'", 3)
        assert failure.value.row == row and failure.value.column == "w", failure.value
    null = pa.Array.from_buffers(pa.string(), 2, [pa.py_buffer(b"\x01"), words().buffers()[1], words().buffers()[2]])
    for fine in (words().slice(0, 1), null, pa.array(["é", "ü"]), pa.array([1, 2])):
        refuse_invalid_text(fine, "w", "operator 'ByWord'", 3)


def test_a_dictionary_key_column_not_utf8_is_refused_on_1_worker_as_on_2() -> None:
    """A dictionary column's values are hashed all on 2 workers, used by a row or not."""
    used = pa.DictionaryArray.from_arrays(pa.array([0, 1], pa.int32()), words())
    unused = pa.DictionaryArray.from_arrays(pa.array([0, 0], pa.int32()), words())

    def build(keys: Any) -> Any:
        return lambda scope, rows: rows.map_batch(lambda batch: pa.table({"w": keys, "n": [1, 2]})).exchange_batch(
            "w", name="ByWord"
        )

    for keys in (used, unused):
        messages = []
        for workers in (1, 2):
            with pytest.raises(WorkerFailed) as failure:
                run_dataflow(build(keys), [[0]], workers=workers)
            message = str(failure.value)
            assert "ArrowValueError" in message and "not valid UTF-8" in message, message
            messages.append(message[message.index("ArrowValueError") :])
        assert messages[0] == messages[1], messages
