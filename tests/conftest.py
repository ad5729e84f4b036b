"""Make the repository root importable, and sort the tests into the runs that take them.

- ``bench``: tests of ``benchmarks/`` (their smoke run needs the ``bench`` extra).  ``pytest`` leaves
  them out (``addopts`` in pyproject.toml); ``make test`` runs everything (``-m ""``).
- ``progress``: the files that exercise the progress path.  ``make test-audit`` runs them again with
  the progress audit on (``PYTIMELY_AUDIT=1``) on the compiled build.
- Spark's tests share one SparkSession per process, so under pytest-xdist they all go to one worker
  (``--dist loadgroup``), which starts one JVM, not one per worker.
- ``PYTIMELY_NO_SKIPS=1`` (set by ``make test``, which installs every extra) turns a skip into a failure:
  nothing is skipped there.
- Every JVM the tests start (Spark's drivers, executors and daemons) runs with :data:`JVM_OPTIONS`.
"""

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = str(Path(__file__).resolve().parent.parent)
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from helpers.conftest_spark import spark  # noqa: E402, F401  (the shared SparkSession fixture)

JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
"""For every JVM the tests start, through ``$JAVA_TOOL_OPTIONS`` (unless set already), which child processes
inherit: the quick compiler only, and one garbage-collector thread. A test's JVM lives seconds to minutes on
small data, where the optimizing compiler's and parallel collector's threads cost more CPU than they save:
with these, ``test_spark_cluster.py`` alone takes 31 s of CPU instead of 57 s, ``test_spark.py`` (one session for
minutes) 44 s instead of 78 s, on a machine where the suite's four workers share two cores. Neither option
changes what Spark computes."""
os.environ.setdefault("JAVA_TOOL_OPTIONS", JVM_OPTIONS)

# The standalone-cluster test starts five JVMs for about four minutes: `make test-cluster` runs it
# (PYTIMELY_CLUSTER_TESTS=1); the suite does not collect it, rather than collect and skip it.
collect_ignore = [] if os.environ.get("PYTIMELY_CLUSTER_TESTS") == "1" else ["test_spark_standalone.py"]


@pytest.fixture(params=["shm", "tcp"])
def transport(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run a cluster test over each transport between processes on one host (``$PYTIMELY_TRANSPORT``)."""
    monkeypatch.setenv("PYTIMELY_TRANSPORT", request.param)
    return str(request.param)


BENCH_FILES = frozenset({"test_bench.py", "test_spark_bench.py", "test_latency_limits.py", "test_no_hooks.py"})
"""Test files of ``benchmarks/`` (marked ``bench``)."""

PROGRESS_FILES = frozenset(
    {
        "test_audit.py",
        "test_broadcast.py",
        "test_capability_lifetimes.py",
        "test_certain_stalls.py",
        "test_columnar_engine.py",
        "test_compiled.py",
        "test_exchange.py",
        "test_final_frontier.py",
        "test_interleavings.py",
        "test_keyed_state.py",
        "test_loop_liveness.py",
        "test_notifications.py",
        "test_pass_through.py",
        "test_progress_batches.py",
        "test_progress_fast_paths.py",
        "test_safety.py",
        "test_scheduling.py",
        "test_scope_boundaries.py",
        "test_scopes_progress.py",
        "test_simulation.py",
        "test_stall_policy.py",
        "test_stuck.py",
        "test_sync_processes.py",
        "test_tracker_reference.py",
        "test_user_timestamp.py",
        "test_windows.py",
    }
)
"""Test files that exercise the progress path (marked ``progress``): the audit pass runs these."""
COMPILED_FILES = frozenset(
    {
        "test_capture.py",
        "test_columnar.py",
        "test_copy_once.py",
        "test_instrument.py",
        "test_lean_input_probe.py",
        "test_misuse.py",
        "test_operator_errors.py",
        "test_sequencer.py",
        "test_user_error_blame.py",
        "test_viz_blame.py",
    }
)
"""Test files whose subject is the operator and channel path (operators and their Python subclasses, ports,
handles, capabilities and their user sites, probes, record-wise chains, columnar batches through them), marked
``compiled``: the audit pass runs them too, on the compiled build, beside the ``progress`` files."""

SPARK_SESSION_FILES = {
    "test_spark.py": "spark-a",
    "test_spark_types.py": "spark-a",
    "test_spark_output_validity.py": "spark-a",
    "test_spark_columnar.py": "spark-b",
    "test_spark_user.py": "spark-b",
    "test_spark_warmup.py": "spark-b",
    "test_spark_errors.py": "spark-b",
    "test_spark_forms.py": "spark-b",
    "test_spark_observability.py": "spark-b",
    "test_spark_resume.py": "spark-b",
    "test_spark_settings.py": "spark-b",
}
"""Test files that use the shared ``spark`` fixture, by xdist group: each group's files run on one
worker and share its session (one JVM). ``test_spark.py`` alone takes as long as the others together,
so there are two groups, and the suite's longest chain is shorter than with one. A file missing here would start
a session (10 to 15 s of a JVM's start) on every worker that takes one of its tests: collection refuses it."""

LONG_FIRST = (
    "test_spark_cluster.py",
    "test_spark_connect.py",
    "test_spark_shipping.py",
    "test_bench.py",
    "test_checkpoint_kills.py",
    "test_simulation.py",
    "test_spark_docs.py",
    "test_scopes_progress.py",
    "test_viz_explain_moments.py",
    "test_columnar_graphs.py",
    "test_cluster.py",
)
"""Files with tests of half a minute or more (a loaded run's ``--durations``), collected before the rest, so that
pytest-xdist starts them early instead of leaving them for the end of the run, where one would hold the whole
suite while the other workers stand idle. xdist sends its groups first (the units with the most tests: Spark's
two sessions and the archives), then these in this order: the Spark tests of a ``local-cluster`` of their own,
the minute-long ones, and last the CPU-bound ones of 20-40 s (``test_viz_explain_moments.py``'s every-moment
parts), which beside the first Spark start-ups made executor JVMs miss their registration in loaded runs."""


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark each test by its file (``bench``, ``progress``, ``compiled``, Spark's xdist group); long files first.

    First of the hooks: pytest-xdist's own reads the ``xdist_group`` marks (and appends ``@GROUP`` to the node
    ids) in this hook; run after it, the marks added here would come too late and group nothing.
    """
    for item in items:
        name = item.path.name
        if "spark" in getattr(item, "fixturenames", ()) and name not in SPARK_SESSION_FILES:
            raise pytest.UsageError(
                f"{item.nodeid} uses the shared `spark` fixture, but {name} is not in SPARK_SESSION_FILES "
                "(tests/conftest.py): add it to a group there, so that its tests share one session"
            )
        if name in BENCH_FILES:
            item.add_marker(pytest.mark.bench)
        if name in PROGRESS_FILES:
            item.add_marker(pytest.mark.progress)
        if name in COMPILED_FILES:
            item.add_marker(pytest.mark.compiled)
        if name in SPARK_SESSION_FILES:
            item.add_marker(pytest.mark.xdist_group(SPARK_SESSION_FILES[name]))
    rank = {name: index for index, name in enumerate(LONG_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(LONG_FIRST)))


def _no_skips() -> bool:
    return os.environ.get("PYTIMELY_NO_SKIPS") == "1"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """Under ``PYTIMELY_NO_SKIPS=1`` a skipped test fails, saying why it would have been skipped."""
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    if _no_skips() and report.skipped and not hasattr(report, "wasxfail"):
        report.outcome = "failed"
        report.longrepr = f"skipped, but PYTIMELY_NO_SKIPS=1 (make test installs every extra): {report.longrepr}"


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Iterator[None]:
    """Under ``PYTIMELY_NO_SKIPS=1`` a module skipped as a whole (a missing package) fails to collect."""
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    if _no_skips() and report.skipped:
        report.outcome = "failed"
        report.longrepr = f"skipped, but PYTIMELY_NO_SKIPS=1 (make test installs every extra): {report.longrepr}"
