"""A probe asked about a time of another type than its stream's says so, naming the probe and its scope.

A probe inside a loop, whose times are ``Product(epoch, iteration)``, waited on with
an epoch (``step_while(lambda: probe.less_than(1))``) failed with "TypeError: cannot
unpack non-iterable int object", and a probe after the loop asked about a loop's time
with "'<' not supported between instances of 'int' and 'Product'", naming neither
the probe nor the times it holds.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import pytest
from helpers import loop_mains

from runtime import WorkerFailed, execute

RUNS: dict[str, dict[str, Any]] = {
    "1 worker": {"workers": 1},
    "2 threads": {"workers": 2},
    "2 processes": {"workers": 1, "processes": 2},
}


@pytest.mark.parametrize("run", list(RUNS), ids=list(RUNS))
@pytest.mark.parametrize("inside", [True, False], ids=["probe in the loop", "probe after the loop"])
def test_a_probe_asked_about_another_kind_of_time_names_itself_and_its_times(inside: bool, run: str) -> None:
    with pytest.raises(WorkerFailed) as caught:
        execute(partial(loop_mains.probe_asked_of_another_time, inside=inside), stall_timeout=30, **RUNS[run])
    message = str(caught.value)
    if inside:
        expected = ("probe 'InnerProbe' (scope 'dataflow 0' > 'Rounds'", "less_than(1)", "Product[integer, integer]")
    else:
        expected = ("probe 'OuterProbe' (scope 'dataflow 0',", "less_than(Product(1, 0))", "integer timestamps")
    assert "TimestampError" in message and all(part in message for part in expected), message
