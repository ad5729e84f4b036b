"""run_dataflow over Spark Connect: ``SparkSession.builder.remote("local[2]")``, a real local Connect server.

The Connect client changes process-wide state (the session is remote from then
on), so the test drives it in a child process, which prints what it found as
JSON on its last line.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("grpc")  # pyspark[connect]
pytest.importorskip("zstandard")

ROOT = Path(__file__).resolve().parent.parent

SCRIPT = r"""
import json, os, sys
sys.path.insert(0, {root!r})
os.environ["PYSPARK_PYTHON"] = sys.executable
from collections import Counter
from pyspark.sql import SparkSession
from runtime.errors import ConfigurationError
from runtime.spark import run_dataflow

def build(scope, rows):
    return rows.map(lambda row: (row[0] % 7, 1)).key_by(lambda kv: kv[0]).fold(int, lambda n, _kv: n + 1)

spark = SparkSession.builder.remote("local[2]").getOrCreate()
found = {{"remote": type(spark).__module__}}
for name, call in [("no_workers", lambda: run_dataflow(spark.range(10), build, "k long, n long")),
                   ("no_checkpoint_dir", lambda: run_dataflow(spark.range(10), build, "k long, n long", workers=2,
                                                              durable=True))]:
    try:
        call()
        found[name] = None
    except ConfigurationError as error:
        found[name] = str(error)
events = []
result = run_dataflow(spark.range(1000), build, "k long, n long", workers=2, on_progress=events.append)
found["events"] = sorted({{(event["event"], event["task"]) for event in events}})
found["rows"] = sorted(tuple(row) for row in result.collect())
found["take"] = len(result.take(2))
found["limit"] = result.limit(3).count()
found["union"] = result.union(result).count()
durable = run_dataflow(spark.range(1000), build, "k long, n long", workers=2, durable={out!r})
found["durable"] = sorted(tuple(row) for row in durable.collect())
print(json.dumps(found))
spark.stop()
"""


def test_run_dataflow_works_over_spark_connect_and_its_result_is_an_ordinary_dataframe(tmp_path: Path) -> None:
    script = SCRIPT.format(root=str(ROOT), out=str(tmp_path / "out"))
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=400, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["remote"].startswith("pyspark.sql.connect")
    assert "needs workers=" in found["no_workers"] and "over Connect" in found["no_workers"]
    assert "setCheckpointDir" in found["no_checkpoint_dir"] and "durable='PATH'" in found["no_checkpoint_dir"]
    expected = [[k, len(range(k, 1000, 7))] for k in range(7)]
    assert sorted(found["rows"]) == expected and sorted(found["durable"]) == expected
    assert {("joined", 0), ("joined", 1), ("finished", 0), ("finished", 1)} <= {tuple(e) for e in found["events"]}
    assert (found["take"], found["limit"], found["union"]) == (2, 3, 14)
    assert (tmp_path / "out").is_dir()
