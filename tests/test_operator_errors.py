"""Errors a user must understand: failures in user functions, and functions of the wrong shape.

* An exception in any user function running in an operator surfaces as
  :class:`scopes.errors.OperatorFailed`, raised from the user's exception, naming the
  operator, its address and scope path, the time of the batch and the worker.
* ``flat_map`` returning a non-iterable, a constructor returning ``None`` and a logic
  function with the wrong signature each get an error that names the operator and
  says what was expected, never a bare ``TypeError`` from inside the engine.
"""

from __future__ import annotations

import traceback
from pathlib import Path

import pytest

from runtime import WorkerFailed, execute
from scopes import BuildError, Pipeline, Product
from scopes.errors import OperatorFailed, UserFunctionError


def failure_chain(error: BaseException) -> list[BaseException]:
    """``error`` and its causes, outermost first."""
    chain: list[BaseException] = []
    current: BaseException | None = error
    while current is not None:
        chain.append(current)
        current = current.__cause__
    return chain


def run_to_failure(main, workers: int = 1) -> tuple[WorkerFailed, OperatorFailed | None, BaseException]:
    """Run ``main``; return the WorkerFailed, the OperatorFailed under it (if any), and the root cause."""
    with pytest.raises(WorkerFailed) as excinfo:
        execute(main, workers=workers, stall_timeout=5)
    chain = failure_chain(excinfo.value)
    failed = [error for error in chain if isinstance(error, OperatorFailed)]
    assert len(failed) <= 1, f"OperatorFailed was wrapped twice: {chain}"
    return excinfo.value, (failed[0] if failed else None), chain[-1]


def build_only(build, workers: int = 1) -> BaseException:
    """Build a dataflow with ``build``; return the error building raised (under WorkerFailed)."""

    def main(worker):
        worker.dataflow(build)

    _, _, root = run_to_failure(main, workers)
    return root


# ---------------------------------------------------------------------------- OperatorFailed


def test_failure_in_map_names_operator_address_scope_time_and_worker():
    def main(worker):
        def build(scope):
            handle, stream = scope.new_input()
            stream.map(lambda x: 1 // (x - 2), name="Divide").probe()
            return handle

        handle = worker.dataflow(build)
        handle.advance_to(4)
        handle.send_batch([1, 2, 3])

    failed, operator_failed, root = run_to_failure(main)
    assert operator_failed is not None
    assert isinstance(root, ZeroDivisionError)
    assert operator_failed.__cause__ is root
    assert operator_failed.operator == "Divide"
    assert operator_failed.scope_path == ("dataflow 0",)
    assert operator_failed.address[0] == 0 and len(operator_failed.address) == 2
    assert operator_failed.time == 4 and operator_failed.worker == 0
    message = str(operator_failed)
    built = next(n for n, text in enumerate(Path(__file__).read_text().splitlines(), 1) if 'name="Divide"' in text)
    assert message == (
        f"operator 'Divide' (address {operator_failed.address}, in scope 'dataflow 0', built at "
        f"test_operator_errors.py:{built}) failed at time 4 on worker 0: ZeroDivisionError: integer division or "
        "modulo by zero"
    )
    # the user's own frame is in the chained traceback
    frames = traceback.extract_tb(root.__traceback__)
    assert any(frame.filename == __file__ for frame in frames), frames
    assert "'Divide'" in str(failed) and "time 4" in str(failed)


def test_failure_in_a_nested_scope_names_the_scope_path_and_product_time():
    def main(worker):
        def build(scope):
            def body(inner):
                return scope.to_stream([1]).enter(inner).map(lambda x: x / 0, name="Inner").leave()

            scope.iterative(body).probe()

        worker.dataflow(build)

    _, operator_failed, root = run_to_failure(main)
    assert operator_failed is not None and isinstance(root, ZeroDivisionError)
    assert operator_failed.operator == "Inner"
    assert operator_failed.scope_path == ("dataflow 0", "Iterative")
    assert len(operator_failed.address) == 3
    assert operator_failed.time == Product(0, 0)
    assert "in scope 'dataflow 0' > 'Iterative'" in str(operator_failed)


def test_failure_on_one_worker_names_that_worker():
    def main(worker):
        def build(scope):
            handle, stream = scope.new_input()

            def check(record):
                if worker.index == 1:
                    raise ValueError(f"worker 1 rejects {record!r}")
                return record

            stream.map(check, name="Picky").probe()
            return handle

        handle = worker.dataflow(build)
        handle.send("r")

    failed, operator_failed, root = run_to_failure(main, workers=2)
    assert operator_failed is not None and isinstance(root, ValueError)
    assert operator_failed.worker == 1 and failed.worker == 1
    assert "on worker 1" in str(operator_failed) and "worker 1 rejects 'r'" in str(operator_failed)


@pytest.mark.parametrize("family", ["filter", "flat_map", "inspect", "exchange", "partition", "branch"])
def test_failure_in_every_per_record_function_is_an_operator_failure(family):
    def boom(record):
        raise RuntimeError(f"{family} failed on {record!r}")

    def main(worker):
        def build(scope):
            handle, stream = scope.new_input()
            if family == "filter":
                stream.filter(boom, name="Family").probe()
            elif family == "flat_map":
                stream.flat_map(boom, name="Family").probe()
            elif family == "inspect":
                stream.inspect(boom, name="Family").probe()
            elif family == "exchange":  # the key is blamed on the exchange, not on the map feeding it
                stream.map(lambda record: record, name="Map").exchange(boom, name="Family").probe()
            elif family == "partition":
                for part in stream.partition(2, boom, name="Family"):
                    part.probe()
            else:
                false, true = stream.branch(boom, name="Family")
                false.probe()
                true.probe()
            return handle

        handle = worker.dataflow(build)
        handle.advance_to(2)
        handle.send("r")

    _, operator_failed, root = run_to_failure(main, workers=2 if family == "exchange" else 1)
    assert operator_failed is not None, "the failure must be reported as OperatorFailed"
    assert isinstance(root, RuntimeError) and f"{family} failed on 'r'" in str(root)
    assert f"{family} failed on 'r'" in str(operator_failed)
    assert operator_failed.operator == "Family" and operator_failed.time == 2


def test_failure_in_a_notification_names_the_notified_time():
    def main(worker):
        def build(scope):
            handle, stream = scope.new_input()

            def logic(input, output, notificator):
                for ref, _batch in input:
                    notificator.notify_at(ref.retain())
                for capability in notificator:
                    raise LookupError(f"no entry for time {capability.time}")

            stream.unary_notify(Pipeline, "Notified", logic).probe()
            return handle

        handle = worker.dataflow(build)
        handle.advance_to(3)
        handle.send("r")
        handle.advance_to(4)

    _, operator_failed, root = run_to_failure(main)
    assert operator_failed is not None and isinstance(root, LookupError)
    assert operator_failed.operator == "Notified" and operator_failed.time == 3
    assert "at time 3" in str(operator_failed) and "no entry for time 3" in str(operator_failed)


def test_failure_in_source_logic_is_an_operator_failure():
    def main(worker):
        def build(scope):
            def constructor(capability, info):
                def logic(output):
                    raise OSError("the source's file is gone")

                return logic

            scope.source("Reader", constructor).probe()

        worker.dataflow(build)

    _, operator_failed, root = run_to_failure(main)
    assert operator_failed is not None and isinstance(root, OSError)
    assert operator_failed.operator == "Reader" and operator_failed.time is None


def test_an_operator_failure_raised_inside_logic_is_not_wrapped_again():
    original = OperatorFailed("inner report", "Inner", (0, 9), ("dataflow 0",), 1, 0)

    def main(worker):
        def build(scope):
            handle, stream = scope.new_input()

            def constructor(capability, info):
                capability.drop()

                def logic(input, output):
                    for _ref, _batch in input:
                        raise original

                return logic

            stream.unary(Pipeline, "Outer", constructor).probe()
            return handle

        handle = worker.dataflow(build)
        handle.send("r")

    _, operator_failed, _ = run_to_failure(main)
    assert operator_failed is original


# ---------------------------------------------------------------------------- flat_map results


def test_flat_map_returning_a_non_iterable_names_the_operator():
    def main(worker):
        def build(scope):
            handle, stream = scope.new_input()
            stream.map(lambda x: x + 1).flat_map(lambda x: x * 2, name="Explode").probe()
            return handle

        handle = worker.dataflow(build)
        handle.send(1)

    _, operator_failed, root = run_to_failure(main)
    assert operator_failed is not None
    errors = failure_chain(operator_failed)
    user_error = next(error for error in errors if isinstance(error, UserFunctionError))
    message = str(user_error)
    assert "flat_map 'Explode'" in message and "iterable" in message, message
    assert "'int' object is not iterable" in message, message
    assert isinstance(root, TypeError)


def test_type_error_raised_by_a_flat_map_function_is_left_alone():
    def explode(record):
        raise TypeError("the user's own type error")

    def main(worker):
        def build(scope):
            handle, stream = scope.new_input()
            stream.flat_map(explode, name="Explode").probe()
            return handle

        handle = worker.dataflow(build)
        handle.send(1)

    _, operator_failed, root = run_to_failure(main)
    assert operator_failed is not None
    assert operator_failed.__cause__ is root and str(root) == "the user's own type error"


# ---------------------------------------------------------------------------- build-time shape checks


def unary_with(constructor, name="Shaped", method="unary"):
    def build(scope):
        handle, stream = scope.new_input()
        getattr(stream, method)(Pipeline, name, constructor).probe()
        return handle

    return build


def test_constructor_returning_none_says_what_was_expected():
    def constructor(capability, info):
        capability.drop()

        def logic(input, output):
            pass  # forgot to return it

    error = build_only(unary_with(constructor, "Forgetful"))
    assert isinstance(error, BuildError), error
    message = str(error)
    assert "'Forgetful'" in message and "'dataflow 0'" in message, message
    assert "returned None" in message and "logic(input, output)" in message, message


def test_constructor_returning_a_non_function_says_what_was_expected():
    error = build_only(unary_with(lambda capability, info: 42, "NotLogic"))
    assert isinstance(error, BuildError), error
    assert "'NotLogic'" in str(error) and "42" in str(error) and "logic(input, output)" in str(error)


@pytest.mark.parametrize("method", ["unary", "unary_frontier"])
def test_unary_logic_with_the_wrong_signature_is_refused_at_build(method):
    def constructor(capability, info):
        def logic(input):  # missing the output
            pass

        return logic

    error = build_only(unary_with(constructor, "OneArg", method))
    assert isinstance(error, BuildError), error
    message = str(error)
    assert "'OneArg'" in message and "2 arguments (input, output)" in message, message
    assert "logic(input)" in message, message


def test_unary_constructor_with_the_wrong_signature_is_refused_at_build():
    def constructor(capability):  # missing the info
        return lambda input, output: None

    error = build_only(unary_with(constructor, "NoInfo"))
    assert isinstance(error, BuildError), error
    assert "'NoInfo'" in str(error) and "(capability, info)" in str(error)


def test_binary_logic_with_a_unary_signature_is_refused_at_build():
    def build(scope):
        handle, stream = scope.new_input()
        stream.binary(stream, Pipeline, Pipeline, "Pair", lambda cap, info: lambda input, output: None).probe()
        return handle

    error = build_only(build)
    assert isinstance(error, BuildError), error
    assert "'Pair'" in str(error) and "3 arguments (input1, input2, output)" in str(error)


def test_unary_notify_logic_with_the_wrong_signature_is_refused_at_build():
    def build(scope):
        handle, stream = scope.new_input()
        stream.unary_notify(Pipeline, "Notify", lambda input, output: None).probe()
        return handle

    error = build_only(build)
    assert isinstance(error, BuildError), error
    assert "'Notify'" in str(error) and "(input, output, notificator)" in str(error)


def test_source_constructor_returning_none_is_refused_at_build():
    def build(scope):
        scope.source("Silent", lambda capability, info: None).probe()

    error = build_only(build)
    assert isinstance(error, BuildError), error
    assert "'Silent'" in str(error) and "logic(output)" in str(error)


@pytest.mark.parametrize(
    ("method", "function", "expected"),
    [
        ("map", 42, "the map function must be a function taking 1 argument (record)"),
        ("map", lambda a, b: a, "the map function must accept 1 argument (record)"),
        ("filter", lambda: True, "the filter predicate must accept 1 argument (record)"),
        ("flat_map", "abc", "the flat_map function must be a function"),
        ("inspect", lambda a, b: None, "the inspect function must accept 1 argument"),
        ("exchange", None, "the exchange key must be a function"),
    ],
)
def test_per_record_functions_of_the_wrong_shape_are_refused_at_build(method, function, expected):
    def build(scope):
        handle, stream = scope.new_input()
        getattr(stream, method)(function, name="Misfit").probe()
        return handle

    error = build_only(build)
    assert isinstance(error, BuildError), error
    assert "'Misfit'" in str(error) and expected in str(error), str(error)


def test_builtins_without_a_signature_are_accepted():
    results: list = []

    def main(worker):
        def build(scope):
            stream = scope.to_stream(["1", "22"]).map(int).map(str).flat_map(tuple)
            stream.inspect(results.append)

        worker.dataflow(build)

    execute(main, stall_timeout=5)
    assert results == ["1", "2", "2"]


def test_two_operators_of_one_name_are_told_apart_by_the_line_that_built_them_on_processes():
    """Found by a user-level audit: a failure named the operator, its address and its scope, but not the line
    that built it, which the stall errors name.  Two ``map``s run as one fused operator: it names both lines.  The
    lines travel with the failure from another process too."""
    with pytest.raises(WorkerFailed) as failed:
        execute(two_maps_main, processes=2)
    lines = Path(__file__).read_text().splitlines()
    marks = ("plus_one = stream.map", "plus_one.map(")
    first, second = (next(n for n, text in enumerate(lines, 1) if text.lstrip().startswith(mark)) for mark in marks)
    assert "operator 'Map+1 fused'" in str(failed.value)
    built = f"built at test_operator_errors.py:{first} and test_operator_errors.py:{second})"
    assert built in str(failed.value), str(failed.value)


def two_maps_main(worker):
    def build(scope):
        handle, stream = scope.new_input()
        plus_one = stream.map(lambda x: x + 1)  # the first map
        plus_one.map(lambda x: 1 // (x - 3)).probe()  # the second map, fused with the first
        return handle

    handle = worker.dataflow(build)
    if worker.index == 1:
        handle.send_batch([1, 2, 3])


def line_of(mark: str) -> int:
    """The line of this file that holds ``mark``."""
    return next(n for n, text in enumerate(Path(__file__).read_text().splitlines(), 1) if mark in text)


@pytest.mark.parametrize("workers", [1, 2])
def test_a_failing_exchange_key_names_the_line_that_built_the_exchange(workers):
    """Found by the new-user audit: a map's failure named its line, an exchange key's did not."""

    def main(worker):
        def build(scope):
            handle, stream = scope.new_input()
            stream.exchange(lambda record: record["word"], name="ByWord").probe()  # the exchange
            return handle

        handle = worker.dataflow(build)
        handle.advance_to(3)
        handle.send({"count": 1})

    failed, operator_failed, root = run_to_failure(main, workers)
    assert operator_failed is not None and isinstance(root, KeyError)
    line = line_of('name="ByWord"')
    built = f"built at test_operator_errors.py:{line}"
    assert operator_failed.site == built.removeprefix("built at ")
    assert built in str(operator_failed) and built in str(failed), str(failed)
    assert "'ByWord'" in str(failed) and "time 3" in str(failed)


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("family", ["exchange_batch", "exchange on an array"])
def test_a_failing_batch_key_function_is_an_operator_failure(workers, family):
    """Found by the new-user audit: a key function failing on a columnar batch surfaced as the bare exception
    ('worker 0 of 1 failed: IndexError: ...'), naming no operator, time or line."""
    import numpy as np

    def main(worker):
        def build(scope):
            handle, stream = scope.new_input()
            if family == "exchange_batch":
                stream.exchange_batch(lambda batch: batch["word"], name="Rows").probe()  # the batch exchange
            else:
                stream.exchange(lambda record: record["word"], name="Rows").probe()  # the batch exchange
            return handle

        handle = worker.dataflow(build)
        handle.advance_to(5)
        handle.send_batch(np.arange(4))

    failed, operator_failed, root = run_to_failure(main, workers)
    assert isinstance(root, IndexError)
    assert operator_failed is not None and operator_failed.operator == "Rows"
    assert operator_failed.time == 5 and operator_failed.worker in range(workers)  # each worker sends the batch
    line = line_of("# the batch exchange") + (0 if family == "exchange_batch" else 2)
    assert f"built at test_operator_errors.py:{line}" in str(failed), str(failed)
    assert "'Rows'" in str(failed) and "time 5" in str(failed)
    assert "the ndarray batch of 4 rows" in str(operator_failed)
