"""Shipping pytimely in a packed virtual environment (``spark.archives``), on ``local-cluster[2,1,1024]``.

docs/spark.md's ``packed-env`` block runs as written in a copy of the checkout
(a new venv with pytimely installed, not editable, and the driver's versions of
its dependencies, packed by ``venv-pack``), once per test session. Then one
child process (a SparkContext is one per process) drives two sessions made by
``spark_session``, as the page says:

* the executors run the interpreter the packed ``python`` links to, with no
  archive: ``run_dataflow``'s preflight refuses at once, naming the module they
  cannot import (``local[2]``: the point is the interpreter, not the cluster);
* ``spark.archives=pytimely-env.tar.gz#env`` and
  ``spark.pyspark.python=./env/bin/python`` on ``local-cluster[2,1,1024]``:
  a ``run_dataflow`` job gives the expected rows, and each task reports its
  ``sys.executable``, working directory and ``scopes.__file__``, which lie in
  the ``env`` directory Spark unpacked in its executor's working directory,
  not in the checkout or the driver's venv.

The executors' working directories (``work/APP`` in pyspark's installation,
where ``local-cluster`` puts them) are removed afterwards.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_spark_docs import _as_written, block

pytest.importorskip("pyspark", reason="the Spark tests need the spark extra: pip install -e '.[spark]'")
pytest.importorskip("venv_pack", reason="the packed environment needs venv-pack, in the spark extra")

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ("pyproject.toml", "README.md", "scopes", "runtime", "viz")
"""What ``pip install .`` reads from the checkout."""

SCRIPT = r"""
import json, os, sys, warnings
given = json.loads(sys.argv[1])
sys.path.insert(0, given["root"])  # the driver's pytimely: this checkout
from pyspark.find_spark_home import _find_spark_home
from runtime.spark import SparkSetupError, run_dataflow, spark_session

SETTINGS = {"spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false", "spark.executor.memory": "512m"}
SCHEMA = "k long, n long, python string, cwd string, scopes string"

def start(master, config):
    spark = spark_session(master, "pytimely archives", {**SETTINGS, **config})
    spark.sparkContext.setLogLevel("ERROR")
    work = os.path.join(_find_spark_home(), "work", spark.sparkContext.applicationId)
    print(json.dumps({"work": work}), flush=True)
    return spark

def build(scope, rows):
    import os, sys
    import scopes
    where = (sys.executable, os.getcwd(), scopes.__file__)  # in the task, where the dataflow is built
    counts = rows.map(lambda row: (row[0] % 7, 1)).key_by(lambda kv: kv[0]).fold(int, lambda n, _kv: n + 1)
    return counts.map(lambda kn: (kn[0], kn[1], *where))

found = {}
spark = start("local[2]", {"spark.pyspark.python": given["bare"]})
with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # the wrong-interpreter warning: test_spark_shipping checks it
    try:
        run_dataflow(spark.range(2000, numPartitions=2), build, SCHEMA, workers=2, slot_wait=60)
        found["refused"] = None
    except SparkSetupError as error:
        found["refused"] = str(error)
spark.stop()

spark = start("local-cluster[2,1,1024]", {"spark.archives": given["archive"] + "#env",
                                          "spark.pyspark.python": "./env/bin/python"})
result = run_dataflow(spark.range(2000, numPartitions=2), build, SCHEMA, workers=2, slot_wait=60)
found["rows"] = sorted(tuple(row) for row in result.collect())
spark.stop()
print(json.dumps(found))
"""


@pytest.fixture(scope="session")
def packed_environment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """docs/spark.md's ``packed-env`` block, run in a copy of the checkout: the path of ``pytimely-env.tar.gz``."""
    checkout = tmp_path_factory.mktemp("checkout")
    for name in SOURCES:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, checkout / name, ignore=shutil.ignore_patterns("__pycache__", "*.so"))
        else:
            shutil.copy2(source, checkout / name)
    environment = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "VIRTUAL_ENV")}
    started = time.monotonic()
    done = subprocess.run(
        ["bash", "-e", "-c", _as_written(block("packed-env"), {})],
        cwd=checkout,
        env=environment,
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    archive = checkout / "pytimely-env.tar.gz"
    print(f"packed in {time.monotonic() - started:.1f} s: {archive.stat().st_size / 1e6:.0f} MB")
    yield archive
    shutil.rmtree(checkout, ignore_errors=True)


def _run(script: str, argument: str, cwd: Path, env: dict[str, str], timeout: float) -> tuple[int, str, str]:
    """Run ``script`` in a child process group; on a timeout kill the group (the driver and its JVMs)."""
    child = subprocess.Popen(
        [sys.executable, "-c", script, argument],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = child.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)
        out, err = child.communicate()
    return child.returncode, out, err


def test_a_packed_virtual_environment_shipped_with_spark_archives_runs_the_dataflow_on_local_cluster(
    packed_environment: Path, tmp_path: Path
) -> None:
    packed_python = packed_environment.parent / "pytimely-env" / "bin" / "python"
    bare = os.path.realpath(packed_python)  # the interpreter the packed environment's python links to
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("PYTHONPATH", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "VIRTUAL_ENV")
    }
    given = json.dumps({"root": str(ROOT), "archive": str(packed_environment), "bare": bare})
    started = time.monotonic()
    code, out, err = _run(SCRIPT, given, tmp_path, env, timeout=400)
    lines = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    try:
        assert code == 0, err[-4000:]
        found = lines[-1]
        print(f"sessions and jobs in {time.monotonic() - started:.1f} s")
        print(json.dumps(found, indent=1)[:4000])

        refused = found["refused"]
        assert refused is not None and "cannot import runtime" in refused and "spark.archives" in refused

        expected = [[k, len(range(k, 2000, 7))] for k in range(7)]
        assert [row[:2] for row in found["rows"]] == expected
        application = Path(lines[1]["work"])  # the archive session's: its executors' working directories
        places = {tuple(row[2:]) for row in found["rows"]}
        assert len({cwd for _, cwd, _ in places}) == 2  # two tasks, in two executors' working directories
        for python, cwd, scopes_file in places:
            unpacked = Path(cwd) / "env"  # where Spark unpacked pytimely-env.tar.gz#env
            assert Path(cwd).parent == application and python == str(unpacked / "bin" / "python")
            site = Path(scopes_file).parent.parent
            assert site.name == "site-packages" and site.is_relative_to(unpacked / "lib"), scopes_file
            assert not site.is_relative_to(ROOT) and not site.is_relative_to(packed_environment.parent)
    finally:
        for line in lines:
            if "work" in line and Path(line["work"]).parent.name == "work":
                shutil.rmtree(line["work"], ignore_errors=True)
