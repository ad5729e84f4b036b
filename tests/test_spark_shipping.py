"""Sessions made elsewhere, shipping pytimely, and durable results, on ``local-cluster[2,1,1024]``.

One child process (a SparkContext is one per process) makes a plain
``SparkSession.builder`` session whose executors run a Python that lacks
pytimely (a bare name on PATH, as on a cluster), then checks, in order, that

* ``spark_session()`` returns it with a warning listing what it lacks;
* ``run_dataflow`` warns that the executors run another Python, and its
  preflight refuses at once, naming the modules the executors cannot import;
* a zip of pytimely's packages shipped with ``addPyFile`` (what ``--py-files``
  and ``spark.submit.pyFiles`` do) makes the same job run;
* after an executor JVM is killed, the ``durable=True`` (reliable checkpoint)
  and ``durable=PATH`` results still ``count()`` and ``collect()`` every row,
  while the default (local checkpoint) one has lost its blocks.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest
from helpers.spark_home import private_spark_home

pytest.importorskip("pyspark")

ROOT = Path(__file__).resolve().parent.parent

SCRIPT = r"""
import json, os, re, signal, sys, time, warnings, zipfile
sys.path.insert(0, {root!r})
from pyspark.sql import SparkSession

found = {{}}
plain = (SparkSession.builder.master("local-cluster[2,1,1024]").appName("made elsewhere")
         .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
         .config("spark.executor.memory", "512m").getOrCreate())
plain.sparkContext.setLogLevel("ERROR")

from runtime.spark import SparkSetupError, run_dataflow, spark_session

with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    spark = spark_session("local[2]")
found["same_session"] = spark is plain
found["lacks"] = [str(w.message) for w in caught if "lacks" in str(w.message)]

def build(scope, rows):
    return rows.map(lambda row: (row[0] % 7, 1)).key_by(lambda kv: kv[0]).fold(int, lambda n, _kv: n + 1)

numbers = spark.range(2000, numPartitions=2)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    try:
        run_dataflow(numbers, build, "k long, n long", workers=2, slot_wait=60)
        found["refused"] = None
    except SparkSetupError as error:
        found["refused"] = str(error)
found["interpreter"] = [str(w.message) for w in caught if "runs Python tasks with" in str(w.message)]

packages = os.path.join({tmp!r}, "pytimely.zip")
with zipfile.ZipFile(packages, "w") as archive:
    for package in ("runtime", "scopes"):
        for folder, _, files in os.walk(os.path.join({root!r}, package)):
            for name in files:
                if name.endswith(".py") or name == "py.typed":
                    path = os.path.join(folder, name)
                    archive.write(path, os.path.relpath(path, {root!r}))
spark.sparkContext.addPyFile(packages)
spark.sparkContext.setCheckpointDir(os.path.join({tmp!r}, "checkpoints"))
schema = "k long, n long"
local = run_dataflow(numbers, build, schema, workers=2, slot_wait=60)
reliable = run_dataflow(numbers, build, schema, workers=2, slot_wait=60, durable=True)
written = run_dataflow(numbers, build, schema, workers=2, slot_wait=60, durable=os.path.join({tmp!r}, "out"))
found["before"] = sorted(tuple(row) for row in local.collect())

# this driver's executors: by its port, as the application id (app-<second>-0000) is shared by any other
# local-cluster started in the same second
driver = ":" + spark.sparkContext.getConf().get("spark.driver.port")
executors = {{}}
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        command = open(f"/proc/{{pid}}/cmdline", "rb").read().split(b"\0")
    except OSError:
        continue
    words = [w.decode(errors="replace") for w in command]
    if "--driver-url" in words and words[words.index("--driver-url") + 1].endswith(driver):
        executors[words[words.index("--executor-id") + 1]] = int(pid)
found["executors"] = len(executors)
victim, pid = sorted(executors.items())[0]
os.kill(pid, signal.SIGKILL)
deadline = time.monotonic() + 120
jsc = spark.sparkContext._jsc.sc()
while victim in re.findall(r"\d+", str(jsc.getExecutorIds())) and time.monotonic() < deadline:
    time.sleep(0.5)
found["victim_gone"] = victim not in re.findall(r"\d+", str(jsc.getExecutorIds()))
found["killed"] = [victim, str(jsc.getExecutorIds())]  # to read if it was not
for label, frame in (("reliable", reliable), ("written", written)):
    found[label] = [frame.count(), sorted(tuple(row) for row in frame.collect())]
try:
    local.count()
    found["local_after"] = None
except Exception as error:
    found["local_after"] = str(error)[:2000]
print(json.dumps(found))
spark.stop()
"""


def python_without_pytimely(where: Path) -> Path:
    """A virtual environment whose ``python`` sees this one's packages (pyspark, pyarrow, ...) but not pytimely."""
    venv.EnvBuilder(with_pip=False, symlinks=True).create(where)
    site = Path(sysconfig.get_paths(vars={"base": str(where), "platbase": str(where)})["purelib"])
    # a plain path line: the packages, without running this environment's .pth files (pytimely's editable finder)
    (site / "packages.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    python = where / "bin" / "python"
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    probe = "import pyarrow, msgpack, pyspark; import runtime"
    check = subprocess.run([python, "-c", probe], capture_output=True, cwd=where, env=env)
    assert b"No module named 'runtime'" in check.stderr, check.stderr
    return python


def python_error(stderr: str) -> str:
    """The script's own Python traceback from its stderr (the JVM's shutdown noise after it can run to pages)."""
    start = stderr.rfind("Traceback (most recent call last)")
    if start < 0:
        return stderr[-4000:]
    lines = stderr[start:].splitlines()
    end = next((i + 1 for i, line in enumerate(lines) if line and not line[0].isspace() and i > 0), len(lines))
    return "\n".join(lines[: end + 30])[-6000:]  # and the start of a Java error message under it


def test_a_session_made_elsewhere_is_diagnosed_pytimely_ships_as_py_files_and_durable_results_survive_an_executor(
    tmp_path: Path,
) -> None:
    bare = python_without_pytimely(tmp_path / "env")
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "PYSPARK_DRIVER_PYTHON")}
    env["PATH"] = f"{bare.parent}{os.pathsep}{env.get('PATH', '')}"
    env["PYSPARK_PYTHON"] = "python"  # a bare name, looked up on PATH, as clusters often have it
    env["SPARK_HOME"] = str(private_spark_home(tmp_path / "spark"))  # executors' directories of its own
    script = SCRIPT.format(root=str(ROOT), tmp=str(tmp_path))
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=500, cwd=tmp_path, env=env
    )
    assert done.returncode == 0, python_error(done.stderr)
    found = json.loads(done.stdout.strip().splitlines()[-1])
    print(json.dumps(found, indent=1)[:6000])

    assert found["same_session"] and len(found["lacks"]) == 1
    assert "spark.python.daemon.module" in found["lacks"][0] and "spark.stop()" in found["lacks"][0]
    assert found["interpreter"] and "runs Python tasks with python" in found["interpreter"][0]
    refused = found["refused"]
    assert refused is not None and "spark.archives" in refused and "--py-files" in refused
    assert "No module named 'scopes'" in refused and "No module named 'runtime'" in refused

    expected = [[k, len(range(k, 2000, 7))] for k in range(7)]
    assert found["before"] == expected and found["executors"] == 2 and found["victim_gone"]
    assert found["reliable"] == [7, expected] and found["written"] == [7, expected]
    assert found["local_after"] is not None and "CHECKPOINT" in found["local_after"].upper()
