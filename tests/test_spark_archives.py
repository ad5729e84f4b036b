"""Shipping pytimely in a packed virtual environment (``spark.archives``), on ``local-cluster[2,1,1024]``.

docs/spark.md's ``packed-env`` block runs as written in a copy of the checkout
(a new venv with pytimely installed, not editable, and the driver's versions of
its dependencies, packed by ``venv-pack``), once per test session. Then:

* one child process (a SparkContext is one per process) drives two sessions
  made by ``spark_session``, as the page says. First the executors run the
  interpreter the packed ``python`` links to, with no archive:
  ``run_dataflow``'s preflight refuses at once, naming the module they cannot
  import (``local[2]``: the point is the interpreter, not the cluster). Then
  ``spark.archives=pytimely-env.tar.gz#env`` with
  ``spark.pyspark.python=./env/bin/python`` on ``local-cluster[2,1,1024]``;
* the page's ``packed-env-submit`` block runs as written (with a ``--master``,
  small settings and this module's ``job.py``), the job taking spark-submit's
  session.

Each ``run_dataflow`` job must give the expected rows, and each task reports
its ``sys.executable``, working directory and ``scopes.__file__``: they lie in
the ``env`` directory Spark unpacked in its executor's working directory, not
in the checkout or the packed venv's source. Each child runs with a
``SPARK_HOME`` of its test's own (pyspark's installation by links,
``helpers/spark_home.py``), so its executors' working directories
(``work/APP``, where ``local-cluster`` puts them) are its own; they are removed
afterwards.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers.spark_home import private_spark_home
from test_spark_docs import _as_written, block

pytest.importorskip("pyspark", reason="the Spark tests need the spark extra: pip install -e '.[spark]'")
pytest.importorskip("venv_pack", reason="the packed environment needs venv-pack, in the spark extra")

# Both tests on one xdist worker, so that the packed environment is made once (per worker). Neither uses the
# shared session of the spark-a/spark-b groups: each child process starts its own.
pytestmark = pytest.mark.xdist_group("spark-archives")

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ("pyproject.toml", "README.md", "scopes", "runtime", "viz")
"""What ``pip install .`` reads from the checkout."""
CLUSTER = "local-cluster[2,1,1024]"
SETTINGS = {"spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false", "spark.executor.memory": "512m"}

JOB = r"""
import json, os, sys, warnings
given = json.loads(sys.argv[1])
sys.path.insert(0, given["root"])  # the driver's pytimely: this checkout
from pyspark.find_spark_home import _find_spark_home
from pyspark.sql import SparkSession
from runtime.spark import SparkSetupError, run_dataflow, spark_session

SCHEMA = "k long, n long, python string, cwd string, scopes string"

def reported(spark):
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

def run(spark):
    return run_dataflow(spark.range(2000, numPartitions=2), build, SCHEMA, workers=2, slot_wait=60)

found = {}
if given["mode"] == "sessions":
    config = {**given["settings"], "spark.pyspark.python": given["bare"]}
    spark = reported(spark_session("local[2]", "pytimely archives", config))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the wrong-interpreter warning: test_spark_shipping checks it
        try:
            run(spark)
            found["refused"] = None
        except SparkSetupError as error:
            found["refused"] = str(error)
    spark.stop()
    shipped = {"spark.archives": given["archive"] + "#env", "spark.pyspark.python": "./env/bin/python"}
    spark = reported(spark_session(given["cluster"], "pytimely archives", {**given["settings"], **shipped}))
else:
    spark = reported(SparkSession.builder.getOrCreate())  # the session spark-submit made
found["rows"] = sorted(tuple(row) for row in run(spark).collect())
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


def _run(
    command: list[str], cwd: Path, timeout: float, spark_home: str | None = None
) -> tuple[list[dict[str, Any]], int, str]:
    """Run ``command`` in a process group of its own, without this checkout on its paths; kill the group on a timeout.

    Returns the JSON lines it printed, its exit code and the end of its stderr.
    """
    drop = ("PYTHONPATH", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "VIRTUAL_ENV", "SPARK_HOME")
    env = {key: value for key, value in os.environ.items() if key not in drop}
    if spark_home is not None:
        env["SPARK_HOME"] = spark_home
    child = subprocess.Popen(
        command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        out, err = child.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)  # the driver and the JVM it started
        out, err = child.communicate()
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")], child.returncode, err[-4000:]


def _remove_working_directories(lines: list[dict[str, Any]]) -> None:
    """Remove the executors' working directories of the applications the child reported (``.../work/APP``)."""
    for line in lines:
        if "work" in line and Path(line["work"]).parent.name == "work":
            shutil.rmtree(line["work"], ignore_errors=True)


def _check_rows_and_places(found: dict[str, Any], application: Path, packed: Path) -> None:
    """The job's rows are the expected ones, computed by ``./env/bin/python`` with pytimely from ``./env``."""
    expected = [[k, len(range(k, 2000, 7))] for k in range(7)]
    assert [row[:2] for row in found["rows"]] == expected
    places = {tuple(row[2:]) for row in found["rows"]}
    assert len({cwd for _, cwd, _ in places}) == 2  # two tasks, in two executors' working directories
    for python, cwd, scopes_file in places:
        unpacked = Path(cwd) / "env"  # where Spark unpacked pytimely-env.tar.gz#env
        assert Path(cwd).parent == application and python == str(unpacked / "bin" / "python")
        site = Path(scopes_file).parent.parent
        assert site.name == "site-packages" and site.is_relative_to(unpacked / "lib"), scopes_file
        # not the checkout's sources, nor the packed venv's (local-cluster's work directory may lie in ROOT/.venv)
        assert Path(scopes_file).parent != ROOT / "scopes" and not site.is_relative_to(packed.parent)


def _job(tmp_path: Path, **given: Any) -> tuple[Path, str]:
    """This module's ``job.py`` in ``tmp_path`` and its argument."""
    job = tmp_path / "job.py"
    job.write_text(JOB)
    return job, json.dumps({"root": str(ROOT), "settings": SETTINGS, "cluster": CLUSTER, **given})


def test_a_session_with_the_packed_environment_in_spark_archives_runs_the_dataflow_and_none_without_it(
    packed_environment: Path, tmp_path: Path
) -> None:
    bare = os.path.realpath(packed_environment.parent / "pytimely-env" / "bin" / "python")  # what it links to
    job, given = _job(tmp_path, mode="sessions", archive=str(packed_environment), bare=bare)
    started = time.monotonic()
    home = str(private_spark_home(tmp_path / "spark"))  # executors' directories of its own
    lines, code, err = _run([sys.executable, str(job), given], tmp_path, 400, home)
    try:
        assert code == 0, err
        print(f"two sessions and their jobs in {time.monotonic() - started:.1f} s")
        found = lines[-1]
        refused = found["refused"]
        assert refused is not None and "cannot import runtime" in refused and "spark.archives" in refused
        _check_rows_and_places(found, Path(lines[1]["work"]), packed_environment)
    finally:
        _remove_working_directories(lines)


def test_the_spark_submit_block_ships_the_packed_environment_as_written(
    packed_environment: Path, tmp_path: Path
) -> None:
    job, given = _job(tmp_path, mode="submitted")
    # pyspark's installation, as docs/spark.md's manual-start block finds it, by links with a work directory of its own
    spark_home = str(private_spark_home(tmp_path / "spark"))
    submit = Path(spark_home) / "bin" / "spark-submit"
    settings = " ".join(f"--conf {key}={value}" for key, value in SETTINGS.items())
    command = _as_written(block("packed-env-submit"), {})
    assert command.startswith("spark-submit ") and command.endswith(" job.py"), command
    command = (
        f"{shlex.quote(str(submit))} --master '{CLUSTER}' {settings} " + command[len("spark-submit ") : -len("job.py")]
    )
    command += f"{shlex.quote(str(job))} {shlex.quote(given)}"
    started = time.monotonic()
    lines, code, err = _run(["bash", "-e", "-c", command], packed_environment.parent, 400, spark_home)
    try:
        assert code == 0, err
        print(f"spark-submit in {time.monotonic() - started:.1f} s")
        _check_rows_and_places(lines[-1], Path(lines[0]["work"]), packed_environment)
    finally:
        _remove_working_directories(lines)
