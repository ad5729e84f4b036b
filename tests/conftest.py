"""Make the repository root importable when the tests run without an installed package."""

import os
import sys
from pathlib import Path

import pytest

ROOT = str(Path(__file__).resolve().parent.parent)
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from helpers.conftest_spark import spark  # noqa: E402, F401  (the shared SparkSession fixture)

# The standalone-cluster test starts five JVMs for about four minutes: `make test-cluster` runs it
# (PYTIMELY_CLUSTER_TESTS=1); the suite does not collect it, rather than collect and skip it.
collect_ignore = [] if os.environ.get("PYTIMELY_CLUSTER_TESTS") == "1" else ["test_spark_standalone.py"]


@pytest.fixture(params=["shm", "tcp"])
def transport(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run a cluster test over each transport between processes on one host (``$PYTIMELY_TRANSPORT``)."""
    monkeypatch.setenv("PYTIMELY_TRANSPORT", request.param)
    return str(request.param)
