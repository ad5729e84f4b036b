"""Loops misused when built are refused then, saying what and where, on 1 worker, 2 threads and 2 processes.

A path summary must fit the timestamps of the scope it is given in.
An operator's summary or a loop variable's summary of another shape than the
scope's times (an integer summary where times are products, a product nested to
another depth) was accepted when built: at the top level it failed only when
progress first reached it, with a ``TypeError`` naming no operator, and in a loop
with "cannot compose IntegerSummary(0) with ProductSummary(...)", naming neither
the operator nor the loop variable.  Now it is refused when the dataflow is built,
naming the operator or loop variable, its scope and the shape expected, the same
way on 1 worker, 2 threads and 2 processes.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import pytest
from helpers import loop_mains
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime import execute
from scopes import INTEGER, IntegerSummary, ProductSummary, ProductType
from scopes.errors import SummaryError
from scopes.progress.timestamp import PathSummary, TimestampType, fits

RUNS: dict[str, dict[str, Any]] = {
    "1 worker": {"workers": 1},
    "2 threads": {"workers": 2},
    "2 processes": {"workers": 1, "processes": 2},
}

EXPECTED = {
    "operator at top": ("operator 'Shifted' in scope 'dataflow 0'", "IntegerSummary(0)"),
    "operator in loop": ("operator 'Shifted' in scope 'dataflow 0' > 'Rounds'", "ProductSummary("),
    "loop in loop": (
        "loop_variable 'Again' in scope 'dataflow 0' > 'Outer' > 'Rounds'",
        "ProductSummary(ProductSummary(",
    ),
}


@pytest.mark.parametrize("run", list(RUNS), ids=list(RUNS))
@pytest.mark.parametrize("case", list(loop_mains.WRONG_SUMMARIES))
def test_a_summary_of_another_shape_is_refused_when_built(case: str, run: str) -> None:
    messages = execute(partial(loop_mains.wrong_summary, case=case), stall_timeout=30, **RUNS[run])
    where, shape = EXPECTED[case]
    for message in messages:
        assert message is not None, "the dataflow was built and ran"
        assert message.startswith(where) and "does not fit" in message and shape in message, message


def types(depth: int) -> TimestampType:
    """Integers nested ``depth`` times in products."""
    return INTEGER if depth == 0 else ProductType(types(depth - 1), INTEGER)


def summaries(depth: int) -> st.SearchStrategy[PathSummary]:
    """Summaries of ``types(depth)``, with any steps."""
    step = st.builds(IntegerSummary, st.integers(0, 3))
    if depth == 0:
        return step
    return st.builds(ProductSummary, summaries(depth - 1), step)


@settings(deadline=None, max_examples=60)
@given(st.integers(0, 3), st.integers(0, 3), st.data())
def test_a_summary_fits_exactly_the_times_of_its_own_depth(made_for: int, given_to: int, data: st.DataObject) -> None:
    summary = data.draw(summaries(made_for))
    identity = types(given_to).identity()
    assert fits(summary, identity) == (made_for == given_to)
    if made_for != given_to:
        with pytest.raises(SummaryError):  # what fits() spares: a failure only once composed
            identity.followed_by(summary)


@pytest.mark.parametrize("run", list(RUNS), ids=list(RUNS))
def test_a_stream_of_a_loop_entered_into_the_loop_beside_it_is_told_to_leave_first(run: str) -> None:
    """It was a BuildError saying it 'cannot enter stream 'State' from scope 'Iterative' into scope 'Iterative',
    which is not nested inside it' (the two loops had one name): now each scope's path and address, and what to do."""
    for message in execute(loop_mains.entered_from_a_sibling, stall_timeout=30, **RUNS[run]):
        assert message is not None, "the dataflow was built and ran"
        assert message.startswith("stream 'State' (made by operator 'State' in scope 'dataflow 0' > 'Iterative')")
        assert "(address (0, 3))" in message and "(address (0, 2))" in message, message
        assert "stream.leave()" in message, message
