"""A user's own program on a real standalone cluster (a master and two workers on loopback).

``runtime.spark.standalone`` starts the cluster with ``spark-daemon.sh``;
``examples/spark_user.py`` runs on it as its own driver process, as a user
would run it, with the mesh's ports pinned.  It takes about a minute and
starts five JVMs, so it runs only under ``make test-cluster``
(``PYTIMELY_CLUSTER_TESTS=1``).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from runtime.spark import standalone

ROOT = Path(__file__).resolve().parent.parent


def test_a_users_program_runs_on_a_standalone_cluster_and_matches_plain_spark(tmp_path: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as probe:
        low = probe.getsockname()[1]
    with standalone.running(workers=2, cores=1, memory="1g", directory=tmp_path / "cluster") as cluster:
        assert cluster.master.startswith("spark://127.0.0.1:") and standalone.status(tmp_path / "cluster") == cluster
        done = subprocess.run(
            [
                sys.executable,
                str(ROOT / "examples" / "spark_user.py"),
                "--master",
                cluster.master,
                "--numbers",
                "3000",
                "--workers",
                "2",
                "--slot-wait",
                "120",
                "--ports",
                f"{low}-{low + 20}",
            ],
            capture_output=True,
            text=True,
            timeout=300,
            cwd=tmp_path,
        )
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
        assert "3,000 stopping times" in done.stdout and "check against plain Spark: OK" in done.stdout
        pids = [int(path.read_text()) for path in (tmp_path / "cluster" / "pids").glob("*.pid")]
        assert len(pids) == 3
    assert standalone.status(tmp_path / "cluster") is None
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
