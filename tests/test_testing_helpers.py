"""runtime.testing: run a build function over records per epoch, on threads and processes, and compare."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from helpers.columnar_user_mains import arrow_zoned, floats_when_split, nan_array, sub_arrays, timestamped

from runtime.errors import ConfigurationError, WorkerFailed
from runtime.testing import assert_agree, assert_outputs, run_dataflow
from scopes import INTEGER, Pipeline, Product, ProductType, Tumbling


def lengths(scope, words):
    """Top level, so that runs on processes can import it by name."""
    return words.exchange(lambda w: w).map(len)


def counts_without_exchange(scope, words):
    """A per-worker count: its answer depends on the number of workers (the bug assert_agree must catch)."""
    return words.count()


def counts_with_exchange(scope, words):
    return words.exchange(lambda w: 0).count()


def join_named(scope, streams):
    left = streams["left"].map(lambda r: ("left", r))
    right = streams["right"].map(lambda r: ("right", r))
    return {"both": left.concat(right), "left_only": left}


def test_outputs_are_grouped_by_time_across_workers():
    result = run_dataflow(lengths, [["a", "bb", "dd"], ["ccc"]], workers=2)
    assert result.output() == {0: [1, 2, 2], 1: [3]}
    assert result.frontiers == {"output": []}
    assert result.records() == [1, 2, 2, 3]
    assert_outputs(result, {0: [2, 1, 2], 1: [3]})


def test_epochs_given_as_a_mapping_of_times():
    result = run_dataflow(lengths, {3: ["a"], 7: ["bbbb"]}, workers=2)
    assert result.output() == {3: [1], 7: [4]}
    assert result.times == [3, 7]


def test_named_inputs_and_several_outputs():
    result = run_dataflow(join_named, {"left": [[1], [2]], "right": [[10]]}, workers=2)
    assert result.output("both") == {0: [("left", 1), ("right", 10)], 1: [("left", 2)]}
    assert result.output("left_only") == {0: [("left", 1)], 1: [("left", 2)]}
    with pytest.raises(KeyError, match="collected \\['both', 'left_only'\\]"):
        result.output("nope")


def test_inputs_left_open_end_at_the_time_after_the_last_epoch():
    result = run_dataflow(lengths, [["a"], ["bb"], []], close=False, workers=2)
    assert result.output() == {0: [1], 1: [2]}
    assert result.frontiers == {"output": [3]}


def windows_of_two(scope, words):
    return words.window(Tumbling(2), key=lambda word: word).count().down


@pytest.mark.parametrize(("workers", "processes"), [(1, 1), (2, 1), (1, 2)])
def test_inputs_left_open_collect_nothing_the_worker_sends_after_the_run(workers, processes):
    # the window [0, 2) closes at time 1: the inputs left open at 1 must not send it; the worker's own close of
    # its inputs, once the run has ended, would, and those records are no part of the run
    result = run_dataflow(windows_of_two, [["a"]], close=False, workers=workers, processes=processes)
    assert result.output() == {} and result.frontiers == {"output": [1]}
    closed = run_dataflow(windows_of_two, [["a"]], workers=workers, processes=processes)
    assert closed.output() == {1: [("a", (0, 2), 1)]}


def running_totals_of_an_array(scope, numbers):
    """Records taken out of a NumPy array are NumPy scalars: the keys and totals below are ``numpy.int64``."""
    array = numbers.map_batch(lambda batch: np.asarray(batch, dtype=np.int64))
    return array.key_by(lambda n: n % 3).fold(int, lambda total, n: total + n)


def test_records_holding_numpy_scalars_come_back_from_processes():
    """The results of run_dataflow's processes travel to the parent in the wire encoding, which has no NumPy
    scalars: assert_agree failed on 2 processes with an EncodingError for a dataflow that ran fine there."""
    runs = assert_agree(running_totals_of_an_array, [[1, 2, 4], [5]])
    assert_outputs(runs[-1], {0: [(1, 5), (2, 2)], 1: [(2, 7)]})
    assert [type(value) for record in runs[-1].output()[0] for value in record] == [int] * 4


def test_columnar_batches_come_back_as_records():
    def build(scope, numbers):
        return numbers.map_batch(lambda batch: np.asarray(batch, dtype=np.int64) * 2)

    result = run_dataflow(build, [[1, 2, 3]])
    assert result.output() == {0: [2, 4, 6]}


def test_assert_outputs_names_time_missing_and_unexpected_records():
    result = run_dataflow(lengths, [["a", "bb"], ["ccc"]])
    with pytest.raises(AssertionError) as failure:
        assert_outputs(result, {0: [1, 5], 1: [3], 2: [9]})
    message = str(failure.value)
    assert "output 'output' on 1 worker(s) x 1 process(es)" in message
    assert "at time 0: missing [5] (1 record(s)); unexpected [2] (1 record(s))" in message
    assert "at time 2: missing [9]" in message
    assert "at time 1" not in message


def test_assert_agree_passes_on_threads_and_processes():
    runs = assert_agree(counts_with_exchange, [["a", "b", "c"], ["d"]])
    assert [(run.workers, run.processes) for run in runs] == [(1, 1), (2, 1), (4, 1), (1, 2)]
    assert all(run.output() == {0: [3], 1: [1]} for run in runs)


def test_assert_agree_catches_an_answer_that_depends_on_the_worker_count():
    with pytest.raises(AssertionError) as failure:
        assert_agree(counts_without_exchange, [["a", "b", "c", "d"]], configurations=[(1, 1), (2, 1)])
    message = str(failure.value)
    assert "on 2 worker(s) x 1 process(es) differs from 1 worker(s) x 1 process(es)" in message
    assert "at time 0: missing [4]" in message and "unexpected [2, 2]" in message


def test_assert_agree_compares_final_frontiers():
    runs = assert_agree(lengths, [["a"], ["b"]], configurations=[(1, 1), (3, 1)], close=False)
    assert [run.frontiers for run in runs] == [{"output": [2]}, {"output": [2]}]


@pytest.mark.parametrize(
    ("inputs", "message"),
    [
        ({3: ["a"], 1: ["b"]}, "increasing time order, but 1 follows 3"),
        ("abc", "must be a list of lists"),
        ([["a"], "bc"], "at time 1: the records of an epoch must be a list, got str"),
    ],
)
def test_malformed_inputs_are_refused_with_the_input_and_time(inputs, message):
    with pytest.raises(ConfigurationError, match=message):
        run_dataflow(lengths, inputs)


def test_a_build_function_that_returns_no_stream_is_refused():
    with pytest.raises(WorkerFailed) as failure:
        run_dataflow(lambda scope, words: 3, [["a"]])
    assert isinstance(failure.value.__cause__, ConfigurationError)
    assert "must return a stream or a dict of streams by name, got int" in str(failure.value.__cause__)


def test_processes_need_a_top_level_build_function():
    with pytest.raises(ConfigurationError, match="must be defined at the top level of a module"):
        run_dataflow(lambda scope, words: words, [["a"]], processes=2)


def test_processes_need_wire_encodable_inputs():
    with pytest.raises(ConfigurationError, match="sends the inputs to each process in the wire encoding"):
        run_dataflow(lengths, [[object()]], processes=2)


def frontier_at_each_batch(scope, numbers):
    """Per batch received, its time and the earliest time its input's frontier still allowed then."""

    def constructor(capability, info):
        capability.drop()

        def logic(input, output):
            for ref, batch in input:
                output.session(ref).give((len(batch), min(input.frontier.elements, default=None)))

        return logic

    return numbers.unary_frontier(Pipeline, "Watch", constructor)


def test_per_epoch_completes_each_epoch_before_sending_the_next():
    epochs = [[1, 2], [3], [4, 5, 6]]
    lockstep = run_dataflow(frontier_at_each_batch, epochs, per_epoch=True)
    assert all(earliest == time for time, seen in lockstep.output().items() for _, earliest in seen), lockstep
    assert {time: sum(n for n, _ in seen) for time, seen in lockstep.output().items()} == {0: 2, 1: 1, 2: 3}
    at_once = run_dataflow(frontier_at_each_batch, epochs)  # everything sent before the first step
    assert [earliest for _, earliest in at_once.output()[2]] == [0], at_once


def test_per_epoch_and_audit_on_several_workers_and_processes():
    runs = assert_agree(counts_with_exchange, [["a", "b"], ["c"], ["d", "e", "f"]], per_epoch=True)
    assert all(run.output() == {0: [2], 1: [1], 2: [3]} for run in runs)
    audited = run_dataflow(counts_with_exchange, [["a", "b"], ["c"]], workers=2, per_epoch=True, audit=True)
    assert audited.output() == {0: [2], 1: [1]}


def test_another_timestamp_type_on_threads():
    product = ProductType(INTEGER, INTEGER)
    run = run_dataflow(lengths, {Product(0, 1): ["a"], Product(2, 3): ["bb"]}, workers=2, timestamp=product)
    assert run.output() == {Product(0, 1): [1], Product(2, 3): [2]}
    with pytest.raises(ConfigurationError, match="runs on threads only"):
        run_dataflow(lengths, {Product(0, 1): ["a"]}, processes=2, timestamp=product)


def test_a_build_function_that_reads_no_input_gets_an_empty_one():
    run = run_dataflow(lambda scope, _unused: scope.to_stream(range(5)).map(lambda n: n * n), [], workers=2)
    assert run.output() == {0: [0, 0, 1, 1, 4, 4, 9, 9, 16, 16]}  # to_stream runs on every worker
    assert run.frontiers == {"output": []}


def test_assert_agree_catches_integers_on_one_worker_that_are_floats_on_two() -> None:
    with pytest.raises(AssertionError) as failure:
        assert_agree(floats_when_split, [[1, 2, 3, 4]], configurations=[(1, 1), (2, 1)])
    assert "at time 0: missing [1, 2, 3, 4] (4 record(s)); unexpected [1.0, 2.0, 3.0, 4.0]" in str(failure.value)


def test_assert_outputs_tells_integers_floats_and_booleans_apart_but_not_numpy_scalars() -> None:
    run = run_dataflow(floats_when_split, [[1, 2]])
    with pytest.raises(AssertionError, match=r"missing \[1, 2\] \(2 record\(s\)\); unexpected \[1.0, 2.0\]"):
        assert_outputs(run, {0: [1, 2]})
    assert_outputs(run, {0: [np.float64(1), 2.0]})
    with pytest.raises(AssertionError, match=r"missing \[True\]"):
        assert_outputs(run_dataflow(lengths, [["a"]]), {0: [True]})


def test_nan_outputs_agree_with_nan_and_with_an_expected_nan() -> None:
    runs = assert_agree(nan_array, [[1, 2, 3]], configurations=[(1, 1), (2, 1)])
    assert_outputs(runs[1], {0: [float("nan")] * 3})
    with pytest.raises(AssertionError, match=r"at time 0: missing \[nan\]"):
        assert_outputs(runs[1], {0: [float("nan")] * 4})


@pytest.mark.parametrize("build", [timestamped, arrow_zoned])
def test_columnar_outputs_whose_records_have_no_wire_encoding_agree_on_processes(build: Any) -> None:
    pytest.importorskip("pyarrow")
    runs = assert_agree(build, [[1, 2, 3], [4]], configurations=[(1, 1), (1, 2)])
    assert len(runs[1].output()[0]) == 3 and len(runs[1].output()[1]) == 1


def test_sub_array_fields_come_back_as_tuples() -> None:
    run = run_dataflow(sub_arrays, [[1, 2]], workers=2)
    assert run.output() == {0: [(1, (1, 1, 1)), (2, (2, 2, 2))]}
    assert_outputs(run, {0: [(2, (2, 2, 2)), (1, [1, 1, 1])]})


def doubled_batches(scope, numbers):
    """What a columnar program does with a NumPy batch: list batches would be repeated (``[1, 2] * 2``)."""
    return numbers.map_batch(lambda batch: batch * 2)


def batch_kinds(scope, numbers):
    return numbers.map_batch(lambda batch: [type(batch).__name__] if len(batch) else [])


def test_epochs_given_as_numpy_arrays_reach_the_dataflow_as_arrays():
    """Found by the new-user audit: run_dataflow turned an epoch given as a NumPy array into a list, so a
    map_batch that doubles an array repeated the list instead ([0, 0, 1, 1, 2, 2] for [0, 2, 4]), an answer
    that no real run gives, and assert_agree agreed with it."""
    epochs = [np.arange(3), np.arange(3, 8)]
    for workers in (1, 2, 3):
        assert_outputs(run_dataflow(doubled_batches, epochs, workers=workers), {0: [0, 2, 4], 1: [6, 8, 10, 12, 14]})
    assert_agree(doubled_batches, epochs)
    kinds = run_dataflow(batch_kinds, epochs, workers=2).output()
    assert kinds == {0: ["ndarray", "ndarray"], 1: ["ndarray", "ndarray"]}


def test_epochs_given_as_arrow_batches_reach_the_dataflow_as_arrow_batches():
    pa = pytest.importorskip("pyarrow")
    epochs = [pa.record_batch({"k": [1, 2, 1], "v": [1, 2, 3]}), pa.table({"k": [2], "v": [7]})]
    assert run_dataflow(batch_kinds, epochs, workers=2).output() == {0: ["RecordBatch", "RecordBatch"], 1: ["Table"]}
    runs = assert_agree(totals_by_key, epochs)
    assert_outputs(runs[0], {0: [{"k": 1, "v_sum": 4}, {"k": 2, "v_sum": 2}], 1: [{"k": 2, "v_sum": 7}]})


def totals_by_key(scope, rows):
    return rows.aggregate_batch("k", [("v", "sum")])
