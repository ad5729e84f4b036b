"""Errors in user functions name the operator that called them, and the time.

An exchange key function is blamed on the exchange (not on the input or map
before it), with the time of the batch, the same way on 1 and 2 workers, on
threads and on processes (the key also runs on a single worker); notification
logic is blamed at the notified time.  Before, a failing key after an input
surfaced with no operator, scope or time, one after a map blamed the map, a
failing key on one worker was never noticed, and a notification said
"at time None".
"""

from __future__ import annotations

import pytest
from helpers import user_error_mains

from runtime import WorkerFailed, execute
from scopes.errors import OperatorFailed

RUNS = {"1 worker": {"workers": 1}, "2 threads": {"workers": 2}, "2 processes": {"workers": 1, "processes": 2}}


def failure(main, run: dict) -> WorkerFailed:
    with pytest.raises(WorkerFailed) as excinfo:
        execute(main, stall_timeout=30, **run)
    return excinfo.value


def operator_failed(error: BaseException) -> OperatorFailed | None:
    current: BaseException | None = error
    while current is not None:
        if isinstance(current, OperatorFailed):
            return current
        current = current.__cause__
    return None


@pytest.mark.parametrize("run", list(RUNS), ids=list(RUNS))
@pytest.mark.parametrize("main", [user_error_mains.key_after_input, user_error_mains.key_after_map])
def test_a_failing_exchange_key_names_the_exchange_and_the_time(main, run):
    error = failure(main, RUNS[run])
    message = str(error)
    time = 0 if main is user_error_mains.key_after_input else 3
    assert "operator 'ByKey'" in message, message
    assert f"at time {time}" in message, message
    assert "scope 'dataflow 0'" in message and "ZeroDivisionError" in message, message
    assert "'Copy'" not in message and "'Numbers'" not in message, message
    if "processes" not in RUNS[run]:
        failed = operator_failed(error)
        assert failed is not None and failed.operator == "ByKey" and failed.time == time
        assert "exchange key function" in str(failed) and "record 0" in str(failed)
        assert isinstance(failed.__cause__, ZeroDivisionError)


@pytest.mark.parametrize("run", list(RUNS), ids=list(RUNS))
def test_a_failing_notification_names_the_notified_time(run):
    message = str(failure(user_error_mains.notification_fails, RUNS[run]))
    assert "operator 'Windows'" in message and "at time 5" in message, message
    assert "time None" not in message and "outside any batch" not in message, message
